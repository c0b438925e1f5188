//! Whose bytes a verdict blames and at which level: a frame broken on the tool side of a bridge
//! run is the bridge's, a frame broken by a tool process under test is the tool process's, a
//! line the bridge writes to the host is the bridge's; the level is the broken requirement's.

use serde_json::Value;

use crate::common::{EXE, Sandbox, code, text};

/// A "bridge" for these tests (python3): in mode `frame` it listens on the socket, starts the
/// tool process (`{mock}`) on it and writes a length prefix of 4 GiB to it; in mode `line` it
/// writes a line that is not JSON-RPC on stdout, in mode `reply` a response to a request the
/// host never sent. Then it waits for the end of stdin.
const FAKE_BRIDGE: &str = r#"import os, socket, subprocess, sys
mode, path, mock = sys.argv[1:4]
if mode == "line":
    sys.stdout.write("this is not JSON-RPC\n")
    sys.stdout.flush()
elif mode == "reply":
    sys.stdout.write('{"jsonrpc": "2.0", "id": 99, "result": {}}\n')
    sys.stdout.flush()
else:
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    subprocess.Popen([mock], env=dict(os.environ, PROTOMCP_SOCKET=path))
    conn, _ = srv.accept()
    conn.sendall(b"\xff\xff\xff\xff")
sys.stdin.read()
"#;

/// The python3 interpreter itself (not a version manager's shim, which may need the HOME that
/// the runner gives the bridge a private one of).
fn python() -> String {
    let o = std::process::Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

/// Runs `args` with a JSON report; the report's only case.
fn case(sb: &Sandbox, args: &[&str], scenario: &std::path::Path) -> (std::process::Output, Value) {
    let json = sb.dir.path().join("r.json");
    let o = sb.cmd().args(args).arg("--scenarios").arg(scenario).arg("--json").arg(&json).output().unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default()).unwrap_or_default();
    (o, v["cases"][0].clone())
}

#[test]
fn a_frame_the_bridge_breaks_on_the_tool_side_is_named_as_the_bridges() {
    let sb = Sandbox::new();
    let script = sb.file("fake-bridge.py", FAKE_BRIDGE);
    let s = sb.file(
        "s.yaml",
        "id: x.bridge-prefix\ntitle: t\nrequirements: [BR-HANDSHAKE-01]\nlevel: MUST\nrole: bridge\nsteps:\n  - tool_handshake: {}\n",
    );
    let bridge = format!("{} {} frame {{socket}} {{mock}}", python(), script.display());
    let (o, c) = case(&sb, &["--bridge", &bridge], &s);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(c["verdict"], "FAIL", "{c}");
    assert_eq!(c["broken"], serde_json::json!(["BR-FRAME-04"]), "{c}");
    let m = c["message"].as_str().unwrap();
    assert!(m.contains("BR-FRAME-04 [MUST] broken by the bridge: the bridge sent a frame at stream offset 0"), "{m}");
    assert!(!m.contains("tool process sent"), "{m}");
    sb.assert_clean();
}

#[test]
fn a_line_the_bridge_breaks_on_the_host_side_is_named_as_the_bridges() {
    let sb = Sandbox::new();
    let script = sb.file("fake-bridge.py", FAKE_BRIDGE);
    let s = sb.file(
        "s.yaml",
        "id: x.bridge-line\ntitle: t\nrequirements: [BR-MCP-01]\nlevel: MUST\nrole: bridge\nsteps:\n  - host_expect_nothing: {for_ms: 2000}\n",
    );
    let bridge = format!("{} {} line {{socket}} {{mock}}", python(), script.display());
    let (o, c) = case(&sb, &["--bridge", &bridge], &s);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(c["broken"], serde_json::json!(["BR-MCP-01"]), "{c}");
    let m = c["message"].as_str().unwrap();
    assert!(m.contains("the bridge wrote a line that is not JSON-RPC on stdout"), "{m}");
    sb.assert_clean();
}

#[test]
fn a_frame_the_tool_process_breaks_is_named_as_the_tool_processes() {
    let sb = Sandbox::new();
    let s = sb.file(
        "s.yaml",
        "id: x.tp-prefix\ntitle: t\nrequirements: [TP-HANDSHAKE-02]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n",
    );
    let testee = format!("{EXE} testee --misbehave huge-prefix");
    let (o, c) = case(&sb, &["--testee", &testee], &s);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(c["broken"], serde_json::json!(["TP-FRAME-04"]), "{c}");
    let m = c["message"].as_str().unwrap();
    assert!(m.contains("TP-FRAME-04 [MUST] broken by the tool process: the tool process sent a frame"), "{m}");
    sb.assert_clean();
}

#[test]
fn a_should_scenario_whose_failing_step_checks_a_must_is_a_fail() {
    let sb = Sandbox::new();
    // The answer arrives under another rid: the step checks TP-CALL-01 (MUST) in a scenario
    // about TP-SIDEBAND-08 (SHOULD).
    let steps = "  - handshake: {}\n  - send: {request_id: c1, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect: {envelope: {request_id: c1, arm: call_result}}\n    checks: [";
    let testee = format!("{EXE} testee --misbehave wrong-rid");
    for (checks, verdict, exit) in [("TP-CALL-01", "FAIL", 1), ("TP-SIDEBAND-08", "WARN", 0)] {
        let s = sb.file(
            "s.yaml",
            &format!(
                "id: x.level\ntitle: t\nrequirements: [TP-SIDEBAND-08]\nlevel: SHOULD\nrole: tool-process\nsteps:\n{steps}{checks}]\n"
            ),
        );
        let (o, c) = case(&sb, &["--testee", &testee], &s);
        assert_eq!(code(&o), exit, "{}", text(&o));
        assert_eq!(c["verdict"], verdict, "{checks}: {c}");
        assert_eq!(c["level"], "SHOULD", "the scenario's level stays what it is about: {c}");
    }
    sb.assert_clean();
}

#[test]
fn a_response_to_no_request_is_named_when_it_arrives() {
    let sb = Sandbox::new();
    let script = sb.file("fake-bridge.py", FAKE_BRIDGE);
    let s = sb.file(
        "s.yaml",
        "id: x.bridge-reply\ntitle: t\nrequirements: [BR-MCP-01]\nlevel: MUST\nrole: bridge\nsteps:\n  - host_expect_nothing: {for_ms: 20000}\n",
    );
    let bridge = format!("{} {} reply {{socket}} {{mock}}", python(), script.display());
    let started = std::time::Instant::now();
    let (o, c) = case(&sb, &["--bridge", &bridge], &s);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(c["broken"], serde_json::json!(["BR-MCP-19"]), "{c}");
    let m = c["message"].as_str().unwrap();
    assert!(
        m.contains(
            "BR-MCP-19 [MUST] broken by the bridge: the bridge sent a response under id 99, which the host never used"
        ),
        "{m}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "named when it arrived");
    sb.assert_clean();
}
