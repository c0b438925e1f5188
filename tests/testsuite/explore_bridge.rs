//! `protomcp-conform explore --bridge`: nothing found against the reference bridge; a fault of
//! the catalogue (`bridge --fault br.mcp.unanswered-after-restart`: calls after a tool-process
//! restart are never answered) found by the bridge model, shrunk, and written as a bridge scenario
//! that fails against the faulty bridge and passes against the normal one through the normal
//! runner; a differential run of two bridges that answer differently.

use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");
const REFERENCE: &str = "{exe} bridge --call-timeout 3s -- {mock}";
const PLANTED: &str = "{exe} bridge --fault br.mcp.unanswered-after-restart --call-timeout 3s -- {mock}";

fn run(args: &[&str]) -> Output {
    Command::new(EXE).args(args).output().expect("run protomcp-conform")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn the_reference_bridge_serves_generated_sessions_over_stdio_and_http() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let o = run(&["explore", "--bridge", REFERENCE, "--cases", "24", "--seed", "3", "--out", dir]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing found (seed 3)"), "{}", text(&o));
    let http = "{exe} bridge --transport http --port {port} --call-timeout 3s -- {mock}";
    let o = run(&["explore", "--bridge", http, "--transport", "http", "--cases", "12", "--seed", "4", "--out", dir]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing written");
}

#[test]
fn a_call_left_unanswered_after_a_restart_is_found_shrunk_and_replays() {
    let out = tempfile::tempdir().unwrap();
    let o =
        run(&["explore", "--bridge", PLANTED, "--cases", "40", "--seed", "7", "--out", out.path().to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    // The bridge model names it: the call was owed an answer and never got one.
    assert!(t.contains("BR-MCP-19: tools/call (id") && t.contains("was never answered"), "{t}");
    assert!(t.contains("--seed 7"), "the re-run command carries the seed: {t}");
    let files: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{t}");
    let file = files[0].to_str().unwrap();
    let yaml = std::fs::read_to_string(file).unwrap();
    // Shrunk to what the bug needs: the tool process dies (one `close`), then one call.
    assert_eq!(yaml.matches("\n  - close:").count(), 1, "{yaml}");
    assert_eq!(yaml.matches("\"method\":\"tools/call\"").count(), 2, "{yaml}");
    let planted = run(&["--scenarios", file, "--bridge", PLANTED]);
    assert_eq!(planted.status.code(), Some(1), "fails against the planted bridge: {}", text(&planted));
    let good = run(&["--scenarios", file, "--bridge", REFERENCE]);
    assert_eq!(good.status.code(), Some(0), "passes against the normal bridge: {}", text(&good));
}

#[test]
fn a_differential_run_of_two_bridges_reports_where_they_answer_differently() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    // The same bridge twice: the same answers.
    let o =
        run(&["explore", "--bridge", REFERENCE, "--bridge", REFERENCE, "--cases", "8", "--seed", "9", "--out", dir]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A bridge that answers a call of an unknown tool with an isError result (BR-CALL-04 wants
    // error -32602; the model does not judge that form): the answers differ, side by side.
    let other = "{exe} bridge --fault br.call.unknown-tool-as-result --call-timeout 3s -- {mock}";
    let o = run(&["explore", "--bridge", REFERENCE, "--bridge", other, "--cases", "40", "--seed", "9", "--out", dir]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("DIVERGENT"), "{t}");
    assert!(t.contains("tools/call") && t.contains("| tools/call"), "side by side: {t}");
    assert!(t.contains(": error") && t.contains("isError=true"), "both answers shown: {t}");
}
