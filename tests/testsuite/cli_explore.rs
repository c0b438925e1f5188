//! `protomcp-conform explore`: nothing found against the reference testee; a planted bug
//! (`--misbehave answer-twice`) found, shrunk, and written as a scenario that fails against the
//! buggy testee and passes against the correct one through the normal runner.

use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

fn run(args: &[&str]) -> Output {
    Command::new(EXE).args(args).output().expect("run protomcp-conform")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn reference_testee_passes_generated_sessions() {
    let out = tempfile::tempdir().unwrap();
    let o = run(&["explore", "--cases", "40", "--seed", "11", "--out", out.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing found (seed 11)"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing written");
}

#[test]
fn planted_double_answer_is_found_shrunk_and_replays() {
    let out = tempfile::tempdir().unwrap();
    let buggy = format!("{EXE} testee --misbehave answer-twice");
    let o =
        run(&["explore", "--testee", &buggy, "--cases", "20", "--seed", "5", "--out", out.path().to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("TP-CONCUR-01: a second call_result"), "the finding names the requirement: {t}");
    assert!(t.contains("--seed 5"), "the re-run command carries the seed: {t}");
    let files: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{t}");
    let file = files[0].to_str().unwrap();
    let yaml = std::fs::read_to_string(file).unwrap();
    // Shrunk to one call: a single send between the handshake and the checks.
    assert_eq!(yaml.matches("\n  - send").count(), 1, "{yaml}");
    let again = run(&["--scenarios", file, "--testee", &buggy]);
    assert_eq!(again.status.code(), Some(1), "fails against the buggy testee: {}", text(&again));
    let good = run(&["--scenarios", file]);
    assert_eq!(good.status.code(), Some(0), "passes against the reference: {}", text(&good));
}

#[test]
fn differential_run_reports_divergence() {
    let out = tempfile::tempdir().unwrap();
    let plain = format!("{EXE} testee");
    let wrong = format!("{EXE} testee --misbehave wrong-rid");
    let o = run(&[
        "explore",
        "--testee",
        &plain,
        "--testee",
        &plain,
        "--cases",
        "6",
        "--seed",
        "2",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "two equal targets agree: {}", text(&o));
    let o = run(&[
        "explore",
        "--testee",
        &plain,
        "--testee",
        &wrong,
        "--cases",
        "10",
        "--seed",
        "2",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(&format!("against {wrong}")) || t.contains("DIVERGENT"), "{t}");
}
