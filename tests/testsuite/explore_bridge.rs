//! `protomcp-conform explore --bridge`: nothing found against the reference bridge; a fault of
//! the catalogue (`bridge --fault br.mcp.unanswered-after-restart`: calls after a tool-process
//! restart are never answered) found by the bridge model, shrunk, and written as a bridge scenario
//! that fails against the faulty bridge and passes against the normal one through the normal
//! runner; a differential run of two bridges that answer differently. MCP 2026-07-28: generated
//! modern sessions (MRTR rounds of every kind, listen subscriptions, mixed eras) pass against the
//! reference bridge over stdio and HTTP; a bridge that forwards a refused retry's answers
//! (`br.mrtr.refused-retry-forwards`) and one whose parked calls never expire
//! (`br.mrtr.never-expires`) are found under their requirements, shrunk, and replay.

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

/// What the first `cases` cases of `seed` hold: op kinds and MRTR ends.
fn generated(seed: u64, cases: u64, http: bool) -> std::collections::BTreeSet<String> {
    use protomcp_harness::explore::bridge_gen::BOp;
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..cases {
        let case = protomcp_harness::explore::bridge::generate(seed, k, 12, http);
        seen.insert(if case.legacy { "legacy session".to_owned() } else { "modern only".to_owned() });
        for op in &case.ops {
            seen.insert(op.kind().to_owned());
            if let BOp::Mrtr { end, .. } = op {
                seen.insert(format!("{end:?}").split(['(', ' ']).next().unwrap_or("").to_owned());
            }
        }
    }
    seen
}

#[test]
fn the_reference_bridge_serves_generated_modern_sessions_over_stdio_and_http() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    // What these cases hold: modern-only and mixed cases, MRTR rounds ending in several ways.
    let stdio = generated(31, 30, false);
    for k in ["modern only", "legacy session", "mrtr", "listen", "modern-local", "Never", "Tampered", "Parked"] {
        assert!(stdio.contains(k), "{k}: {stdio:?}");
    }
    let o = run(&["explore", "--bridge", REFERENCE, "--cases", "30", "--seed", "31", "-j", "3", "--out", dir]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing found (seed 31)"), "{}", text(&o));
    let http = generated(32, 20, true);
    for k in ["modern only", "mrtr", "modern-local"] {
        assert!(http.contains(k), "{k}: {http:?}");
    }
    let url = "{exe} bridge --transport http --port {port} --call-timeout 3s -- {mock}";
    let o = run(&[
        "explore",
        "--bridge",
        url,
        "--transport",
        "http",
        "--cases",
        "20",
        "--seed",
        "32",
        "-j",
        "3",
        "--out",
        dir,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing written");
}

/// Runs `explore --bridge` against the reference bridge with `fault`, expects a finding naming
/// `requirement` first, and replays the one shrunk file against both bridges.
fn found_shrunk_and_replayed(fault: &str, seed: &str, requirement: &str) -> String {
    let out = tempfile::tempdir().unwrap();
    let faulty = format!("{{exe}} bridge --fault {fault} --call-timeout 3s -- {{mock}}");
    let o = run(&[
        "explore",
        "--bridge",
        &faulty,
        "--cases",
        "60",
        "--seed",
        seed,
        "-j",
        "3",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let first = t.lines().skip_while(|l| !l.starts_with("FOUND")).nth(1).unwrap_or("");
    assert!(first.trim_start().starts_with(&format!("{requirement}: ")), "first finding {first:?}: {t}");
    let files: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{t}");
    let file = files[0].to_str().unwrap();
    let yaml = std::fs::read_to_string(file).unwrap();
    assert!(yaml.contains(&format!("requirements: [BR-MCP-19, {requirement}")), "{yaml}");
    let bad = run(&["--scenarios", file, "--bridge", &faulty]);
    assert_eq!(bad.status.code(), Some(1), "fails against the faulty bridge: {}", text(&bad));
    let good = run(&["--scenarios", file, "--bridge", REFERENCE]);
    assert_eq!(good.status.code(), Some(0), "passes against the normal bridge: {}", text(&good));
    yaml
}

#[test]
fn a_refused_retry_whose_answers_reach_the_tool_process_is_found_shrunk_and_replays() {
    let yaml = found_shrunk_and_replayed("br.mrtr.refused-retry-forwards", "21", "BR-STATELESS-22");
    // Shrunk to the one MRTR round: a call, a retry with other arguments, then the good retry.
    assert_eq!(yaml.matches("\"method\":\"tools/call\"").count(), 3, "{yaml}");
    assert_eq!(yaml.matches("\"requestState\":\"${").count(), 2, "{yaml}");
    assert!(yaml.contains("\"arguments\":{\"n\":1000"), "{yaml}");
}

#[test]
fn a_parked_call_never_cancelled_is_found_shrunk_and_replays() {
    let yaml = found_shrunk_and_replayed("br.mrtr.never-expires", "21", "BR-STATELESS-26");
    assert!(yaml.contains("expect_any_order"), "the never-retried round: {yaml}");
}
