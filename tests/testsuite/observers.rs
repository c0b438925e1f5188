//! The observers judge every run: a violation the session model is certain of is a finding of the
//! case whatever the scenario checks, named by its requirement, party and rule, and pinned by a
//! known-failures entry like any other check.

use serde_json::{Value, json};

use crate::common::{Sandbox, code, text};

/// A scenario whose steps check only that the call is answered: the second answer the
/// `answer-twice` testee sends is the observer's to see.
const TWICE: &str = concat!(
    "id: x.twice\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n",
    "testee: {misbehave: answer-twice}\n",
    "steps:\n",
    "  - handshake: {}\n",
    "  - send: {request_id: c1, call_tool: {name: echo, arguments_json: {text: hi}}}\n",
    "  - expect: {envelope: {request_id: c1, call_result: {}}}\n",
    "  - expect_alive: {}\n",
);

/// The same scenario against the conforming reference testee.
const ONCE: &str = concat!(
    "id: x.once\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n",
    "steps:\n",
    "  - handshake: {}\n",
    "  - send: {request_id: c1, call_tool: {name: echo, arguments_json: {text: hi}}}\n",
    "  - expect: {envelope: {request_id: c1, call_result: {}}}\n",
    "  - expect_alive: {}\n",
);

/// Runs `scenario` (with `args` before it, and a known-failures file when given) with a JSON
/// report; the report's only case.
fn run(sb: &Sandbox, args: &[&str], scenario: &str, known: Option<&str>) -> (std::process::Output, Value) {
    let s = sb.file("s.yaml", scenario);
    let json = sb.dir.path().join("r.json");
    let mut cmd = sb.cmd();
    cmd.args(args).arg("--scenarios").arg(&s).arg("--json").arg(&json);
    if let Some(k) = known {
        cmd.arg("--known-failures").arg(sb.file("kf.yaml", k));
    }
    let o = cmd.output().unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default()).unwrap_or_default();
    (o, v["cases"][0].clone())
}

#[test]
fn a_second_answer_no_step_looks_for_fails_the_case_under_the_observers_rule_and_party() {
    let sb = Sandbox::new();
    let (o, c) = run(&sb, &[], TWICE, None);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(c["verdict"], "FAIL", "{c}");
    assert_eq!(c["check"], "rule session-model", "{c}");
    assert_eq!(c["broken"], json!(["TP-CONCUR-01"]), "the steps held; only the observer's requirement broke: {c}");
    let f = &c["findings"][0];
    assert_eq!(
        (&f["requirement"], &f["party"], &f["rule"], &f["level"]),
        (&json!("TP-CONCUR-01"), &json!("tool process"), &json!("session-model"), &json!("MUST")),
        "{c}"
    );
    assert!(f["message"].as_str().unwrap().contains("a second call_result for \"c1\""), "{c}");
    assert!(f["step"].as_u64().is_some(), "the finding says where it was seen: {c}");
    // The HTML report lists the case's findings.
    let html = sb.dir.path().join("r.html");
    let o = sb.cmd().arg("--scenarios").arg(sb.dir.path().join("s.yaml")).arg("--html").arg(&html).output().unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<ul class=\"findings\"><li>TP-CONCUR-01 [MUST] rule session-model"), "no findings list");
    sb.assert_clean();
}

#[test]
fn a_known_failures_entry_pinning_the_observers_rule_makes_its_finding_xfail() {
    let sb = Sandbox::new();
    let kf = "x.twice: {requirement: TP-CONCUR-01, check: rule session-model, reason: answers twice}\n";
    let (o, c) = run(&sb, &[], TWICE, Some(kf));
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(c["verdict"], "XFAIL", "{c}");
    // An entry at a step that passed does not cover it: a new failure of a known-failing scenario.
    let kf = "x.twice: {requirement: TP-CALL-01, check: step 3, reason: r}\n";
    let (_, c) = run(&sb, &[], TWICE, Some(kf));
    assert_ne!(c["verdict"], "XFAIL", "{c}");
    assert!(
        c["message"].as_str().unwrap().contains("new failure in a known-failing scenario: rule session-model"),
        "{c}"
    );
    sb.assert_clean();
}

#[test]
fn an_entry_pinning_the_observers_rule_where_it_finds_nothing_is_stale() {
    let sb = Sandbox::new();
    let (o, c) = run(&sb, &[], ONCE, None);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!((&c["verdict"], &c["findings"]), (&json!("PASS"), &json!([])), "{c}");
    let kf = "x.once: {requirement: TP-CONCUR-01, check: rule session-model, reason: r}\n";
    let (o, c) = run(&sb, &[], ONCE, Some(kf));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(c["verdict"], "XPASS", "{c}");
    assert!(c["message"].as_str().unwrap().contains("the observer found nothing: remove the stale entry"), "{c}");
    sb.assert_clean();
}

/// A "bridge" (python3) that answers every request line with an error whose code is 0.
const CODE_ZERO_BRIDGE: &str = r#"import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" in msg:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": 0, "message": "no"}}) + "\n")
        sys.stdout.flush()
"#;

#[test]
fn an_error_code_of_zero_no_step_looks_at_is_the_bridges_finding() {
    let sb = Sandbox::new();
    let script = sb.file("bridge.py", CODE_ZERO_BRIDGE);
    let scenario = concat!(
        "id: x.code-zero\ntitle: t\nrequirements: [BR-MCP-19]\nlevel: MUST\nrole: bridge\n",
        "steps:\n",
        "  - host_send: {message: {jsonrpc: \"2.0\", id: 1, method: ping}}\n",
        "  - host_expect: {message: {id: 1}}\n",
    );
    let (o, c) = run(&sb, &["--bridge", &format!("python3 {}", script.display())], scenario, None);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!((&c["verdict"], &c["check"]), (&json!("FAIL"), &json!("rule bridge-model")), "{c}");
    assert_eq!(c["broken"], json!(["BR-MCP-18"]), "{c}");
    assert_eq!(
        (&c["findings"][0]["party"], &c["findings"][0]["rule"]),
        (&json!("bridge"), &json!("bridge-model")),
        "{c}"
    );
    sb.assert_clean();
}
