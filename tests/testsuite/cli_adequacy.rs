//! `protomcp-conform adequacy`: faults of the reference testee against the scenarios that should
//! catch them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

fn scenario(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(rel)
}

fn adequacy(fault: &str, scenarios: &Path, json: &Path) -> Output {
    adequacy_of("tool-process", fault, scenarios, json)
}

/// `adequacy --role ROLE` of one fault over one scenario file (a bridge fault: both transports of
/// the reference bridge).
fn adequacy_of(role: &str, fault: &str, scenarios: &Path, json: &Path) -> Output {
    Command::new(EXE)
        .args(["adequacy", "--role", role, "--only", fault, "-j", "2", "--scenarios"])
        .arg(scenarios)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap()
}

fn outcome(json: &Path) -> String {
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    doc["faults"][0]["outcome"].as_str().unwrap().to_owned()
}

#[test]
fn a_fault_whose_check_is_removed_from_its_scenario_survives() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let original = std::fs::read_to_string(scenario("calls/tool-error.yaml")).unwrap();
    let whole = dir.path().join("tool-error.yaml");
    std::fs::write(&whole, &original).unwrap();
    let o = adequacy("tp.call.retryable-dropped", &whole, &json);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(outcome(&json), "KILLED", "{out}");
    assert!(out.contains("ADEQUACY: 100.0 % killed and attributed (1 of 1 faults"), "{out}");

    // The same scenario with the check of `retryable` taken out: nothing catches the fault.
    let weakened = original.replace(", retryable: true}", "}");
    assert_ne!(weakened, original, "the scenario no longer checks retryable this way");
    std::fs::write(&whole, weakened).unwrap();
    let o = adequacy("tp.call.retryable-dropped", &whole, &json);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(outcome(&json), "SURVIVED", "{out}");
    assert!(out.contains("SURVIVED tp.call.retryable-dropped (TP-CALL-13)"), "{out}");
}

#[test]
fn a_fault_caught_under_another_requirement_is_misattributed() {
    // calls/add.yaml checks TP-CALL-01..03 only: a result sent twice fails it under TP-CALL-01,
    // but an echo that is slow is not in its reach, and TP-CALL-14's extra ToolError shows up
    // as a mismatch of the result it checks under TP-CALL-01..03.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let o = adequacy("tp.call.error-on-success", &scenario("calls/add.yaml"), &json);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(outcome(&json), "MISATTRIBUTED", "{out}");
    assert!(out.contains("named instead: TP-CALL-01, TP-CALL-02, TP-CALL-03"), "{out}");
}

#[test]
fn the_fault_table_lists_every_tool_process_fault_with_its_requirement() {
    let o = Command::new(EXE).args(["adequacy", "--list"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert!(rows.len() >= 90, "{out}");
    for r in &rows {
        assert_eq!(r[1], "tool-process", "{r:?}");
        assert!(r[0].starts_with("tp.") && r[2].starts_with("TP-"), "{r:?}");
    }
    assert!(out.contains("tp.call.reply-twice\ttool-process\tTP-CALL-01\t"), "{out}");
}

#[test]
fn the_testee_refuses_a_fault_that_is_not_in_the_catalogue() {
    let o = Command::new(EXE).args(["testee", "--fault", "tp.no.such-fault"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tp.no.such-fault"));
}

#[test]
fn coverage_lists_the_requirements_whose_faults_an_adequacy_report_did_not_kill() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let report = serde_json::json!({"faults": [
        {"name": "tp.call.reply-twice", "requirement": "TP-CALL-01", "outcome": "KILLED"},
        {"name": "tp.call.echo-slow", "requirement": "TP-CALL-20", "outcome": "SURVIVED"},
        {"name": "tp.frame.malformed-deaf", "requirement": "TP-FRAME-14", "outcome": "MISATTRIBUTED"},
    ]});
    std::fs::write(&json, report.to_string()).unwrap();
    let o = Command::new(EXE).args(["coverage", "--adequacy"]).arg(&json).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("were not killed and attributed"), "{out}");
    assert!(out.contains("  TP-CALL-20 [MUST] tp.call.echo-slow\n"), "{out}");
    assert!(out.contains("  TP-FRAME-14 [MUST] tp.frame.malformed-deaf\n"), "{out}");
    assert!(!out.contains("TP-CALL-01 [MUST]"), "{out}");
}

fn bridge_adequacy(fault: &str, scenarios: &Path, json: &Path) -> Output {
    adequacy_of("bridge", fault, scenarios, json)
}

#[test]
fn a_bridge_fault_is_killed_over_both_transports_and_survives_once_its_check_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let original = std::fs::read_to_string(scenario("bridge/calls/unknown-tool.yaml")).unwrap();
    let whole = dir.path().join("unknown-tool.yaml");
    std::fs::write(&whole, &original).unwrap();
    let o = bridge_adequacy("br.call.unknown-tool-as-result", &whole, &json);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(outcome(&json), "KILLED", "{out}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let killed_by: Vec<&str> =
        doc["faults"][0]["kills"].as_array().unwrap().iter().map(|k| k["scenario"].as_str().unwrap()).collect();
    assert_eq!(killed_by, ["bridge.calls.unknown-tool", "bridge.calls.unknown-tool [http]"], "{out}");
    assert_eq!(doc["faults"][0]["role"], "bridge");

    // The same scenario without its check of the error: an isError result passes it.
    let weakened = original.replace(", error: {code: -32602}}", "}");
    assert_ne!(weakened, original, "the scenario no longer checks the error this way");
    std::fs::write(&whole, weakened).unwrap();
    let o = bridge_adequacy("br.call.unknown-tool-as-result", &whole, &json);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(outcome(&json), "SURVIVED", "{out}");
    assert!(out.contains("SURVIVED br.call.unknown-tool-as-result (BR-CALL-04)"), "{out}");
}

#[test]
fn the_bridge_refuses_a_fault_of_the_other_role_or_none_of_the_catalogue() {
    for name in ["tp.call.reply-twice", "br.no.such-fault"] {
        let o = Command::new(EXE).args(["bridge", "--fault", name, "--", "true"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(name), "{name}");
    }
}
