//! `protomcp-conform --profile proto-mcp` end to end: the catalogue passes against the bundled
//! reference server, and each `--misbehave` variant fails exactly the scenarios of the rule it
//! breaks.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_protomcp-conform");
const SAFE_TOOL: &str = "echo=type.googleapis.com/conform.v1.EchoRequest=0a026869";

/// Runs the profile with `args`; returns the exit status and (id, verdict, broken) per case.
fn run(args: &[&str]) -> (i32, Vec<(String, String, Vec<String>)>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(BIN)
        .args(["--profile", "proto-mcp", "--json", json.to_str().unwrap()])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }))
    .unwrap();
    let cases = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let broken = c["broken"].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_owned()).collect();
            (c["id"].as_str().unwrap().to_owned(), c["verdict"].as_str().unwrap().to_owned(), broken)
        })
        .collect();
    (out.status.code().unwrap_or(-1), cases)
}

fn not_passing(cases: &[(String, String, Vec<String>)]) -> Vec<(String, String, Vec<String>)> {
    cases.iter().filter(|(_, v, _)| v != "PASS" && v != "SKIP").cloned().collect()
}

#[test]
fn the_reference_server_passes_every_scenario() {
    let (status, cases) = run(&[]);
    assert!(cases.len() >= 70);
    assert_eq!(not_passing(&cases), vec![]);
    // The only SKIP is the scenario for servers without the JSON-RPC fallback.
    let skipped: Vec<&str> = cases.iter().filter(|(_, v, _)| v == "SKIP").map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(skipped, vec!["pm.frame.json-without-fallback"]);
    assert_eq!(status, 0);
}

#[test]
fn a_server_that_buffers_16_bytes_before_sniffing_fails_only_the_15_byte_first_frame() {
    let server = format!("{BIN} proto-mcp-server --misbehave buffer-first-16");
    let (status, cases) = run(&["--server", &server, "--safe-tool", SAFE_TOOL]);
    assert_eq!(
        not_passing(&cases),
        vec![("pm.frame.short-first-frame-15".into(), "FAIL".into(), vec!["PM-FRAME-03".into()])]
    );
    assert_eq!(status, 1);
}

#[test]
fn a_server_silent_on_undecodable_frames_fails_pm_error_08_and_warns_where_it_is_a_should() {
    let server = format!("{BIN} proto-mcp-server --misbehave silent-on-undecodable");
    let (status, cases) = run(&["--server", &server, "--safe-tool", SAFE_TOOL]);
    assert_eq!(
        not_passing(&cases),
        vec![
            ("pm.error.session-after-parse-error".into(), "WARN".into(), vec!["PM-ERROR-08".into()]),
            ("pm.error.undecodable-frame".into(), "FAIL".into(), vec!["PM-ERROR-08".into()]),
        ]
    );
    assert_eq!(status, 1);
}

#[test]
fn coverage_for_the_profile_exits_0_and_lists_nothing_missing() {
    let out = Command::new(BIN)
        .args(["coverage", "--profile", "proto-mcp"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("0 missing") && !text.contains("MISSING"), "{text}");
}
