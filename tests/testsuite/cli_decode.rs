//! `protomcp-conform decode`: captured bytes in, frames and violations out, exit code by outcome.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn decode(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_protomcp-conform"))
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_spec_handshake_example_decodes_cleanly() {
    // ListToolsRequest rid "req-0" (spec §3), as the bridge sends it.
    let out = decode(&["--hex", "--from", "bridge"], b"00 00 00 09 12 00 72 05 72 65 71 2D 30\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("#2 list_tools rid=\"req-0\""), "{stdout}");
    assert!(stdout.contains("1 frames in 13 bytes"), "{stdout}");
}

#[test]
fn a_4_gib_prefix_names_the_rule_and_exits_1() {
    let out = decode(&[], &[0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("VIOLATION TP-FRAME-04 [MUST] broken by the tool process"), "{stdout}");
}

#[test]
fn sideband_payload_and_its_rules() {
    // Spec §11 example 1 with a non-empty Envelope rid added by a sloppy sender: a SHOULD.
    let hex = "00 00 00 1a 72 02 63 31 F2 01 13 0A 02 63 31 12 0B 72 65 73 75 6C 74 5F 6A 73 6F 6E 18 0A \
               5b 31 2c 32 2c 33 2c 34 35 5d";
    let out = decode(&["--hex"], hex.as_bytes());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("sideband payload for call \"c1\", 10 bytes: \"[1,2,3,45]\""), "{stdout}");
    assert!(stdout.contains("VIOLATION TP-SIDEBAND-03 [SHOULD]"), "{stdout}");
}

#[test]
fn bad_hex_is_a_usage_error() {
    let out = decode(&["--hex"], b"00 0g");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 1: `g` is not a hex digit"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
