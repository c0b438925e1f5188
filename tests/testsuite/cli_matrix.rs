//! `protomcp-conform matrix`: requirement × target, and the scenarios targets disagree on.

use std::path::PathBuf;
use std::process::{Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(name)
}

#[test]
fn a_target_that_breaks_a_rule_shows_in_its_column_and_as_a_disagreement() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let o = Command::new(EXE)
        .args(["matrix", "--scenarios"])
        .arg(scenario("calls/echo.yaml"))
        .args(["--testee", &format!("{EXE} testee --misbehave wrong-rid"), "--json"])
        .arg(&json)
        .arg("--html")
        .arg(dir.path().join("m.html"))
        .env("PROTOMCP_CONFORM_TMPDIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the wrong-rid run fails, so the matrix does: {out}{err}");
    let col = format!("{EXE} testee --misbehave wrong-rid");
    assert!(out.contains(&format!("| requirement | reference testee | {col} |")), "{out}");
    assert!(out.contains("| TP-CALL-01 MUST | ✓ | ✗ 1/1 |"), "{out}");
    assert!(out.contains("| TP-CALL | 2/2 | 0/2 |"), "{out}");
    assert!(out.contains("- `calls.echo` (TP-CALL-01, TP-CALL-03): "), "{out}");
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(m["targets"][0], "reference testee");
    assert_eq!(m["disagreements"][0]["verdicts"]["reference testee"], "PASS");
    assert_eq!(m["disagreements"][0]["verdicts"][col.as_str()], "FAIL");
    // The HTML report: a column per target; the failing one's cell names the scenario that broke it.
    let html = std::fs::read_to_string(dir.path().join("m.html")).unwrap();
    assert!(html.contains(&format!("<th>reference testee</th><th>{col}</th>")), "{html}");
    let row = html.lines().find(|l| l.starts_with("<tr id=\"req-TP-CALL-01\"")).unwrap();
    assert!(row.contains("data-verdicts=\"FAIL PASS\""), "{row}");
    assert!(row.contains("broken in <a href=\"#case-calls.echo\">calls.echo</a>"), "{row}");
}

#[test]
fn targets_that_agree_have_no_disagreements_and_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(EXE)
        .args(["matrix", "--scenarios"])
        .arg(scenario("calls/add.yaml"))
        .args(["--testee", &format!("{EXE} testee")])
        .env("PROTOMCP_CONFORM_TMPDIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("No scenario on which the targets disagree."), "{out}");
}
