//! `protomcp-conform --bridge … --bridge-transport http` and `--bridge DIR` (bridge manifests):
//! BR scenarios over Streamable HTTP against the reference bridge, the start-up watchdog for a
//! bridge that never listens, the manifest form and its errors; no process survives any of them.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{EXE, Sandbox, bridge_catalogue_without_soaks, text};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn http_bridge() -> String {
    format!("{EXE} bridge --transport http --port {{port}} --call-timeout 3s -- {{mock}}")
}

const INIT: &str = r#"  - host_send: {message: {jsonrpc: "2.0", id: 1, method: initialize, params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: h, version: "1"}}}}
  - host_expect: {message: {id: 1, result: {}}}
  - host_send: {message: {jsonrpc: "2.0", method: notifications/initialized}}
"#;

#[test]
fn http_mode_runs_bridge_scenarios_and_skips_stdio_only_ones() {
    let sb = Sandbox::new();
    let tx = sb.dir.path().join("tx");
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(http_bridge())
        .args(["--bridge-transport", "http"])
        .args([
            "--only",
            "bridge.calls.forward-and-map",
            "--only",
            "bridge.progress.*",
            "--only",
            "bridge.log.forward*",
        ])
        .args(["--only", "bridge.toollist.disable-enable", "--only", "bridge.mcp.ping-before-initialize"])
        .arg("--transcripts")
        .arg(&tx)
        .args(["-j", "2"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  bridge.calls.forward-and-map"), "{t}");
    assert!(t.contains("PASS  bridge.toollist.disable-enable"), "list_changed over the GET stream: {t}");
    assert!(t.contains("PASS  bridge.log.forward-and-map"), "{t}");
    assert!(t.contains("SKIP  bridge.mcp.ping-before-initialize"), "{t}");
    assert!(t.contains("runs only over stdio"), "{t}");
    let transcript = std::fs::read_to_string(tx.join("bridge.calls.forward-and-map.txt")).unwrap();
    assert!(transcript.contains("host→bridge") && transcript.contains("bridge→host"), "{transcript}");
    assert!(transcript.contains("testee→harness"), "both sides interleaved: {transcript}");
    sb.assert_clean();
}

#[test]
fn http_mode_sees_http_statuses_and_fails_wrong_answers() {
    // A request without a session is an HTTP 400 (BR-HTTP-11): a scenario expecting a JSON-RPC
    // answer fails and the transcript shows the status; a wrong isError expectation fails too.
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("scn");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("no-session.yaml"),
        r#"
id: bridge.selftest.no-session
title: ping without a session
requirements: [BR-MCP-08]
level: MUST
role: bridge
steps:
  - tool_handshake: {tools: [{name: echo}]}
  - host_send: {message: {jsonrpc: "2.0", id: 7, method: ping}}
  - host_expect: {message: {id: 7, result: {}}, within_ms: 500}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("wrong.yaml"),
        format!(
            r#"
id: bridge.selftest.wrong-is-error
title: expects the wrong isError
requirements: [BR-CALL-06]
level: MUST
role: bridge
steps:
  - tool_handshake: {{tools: [{{name: echo}}]}}
{INIT}  - host_send: {{message: {{jsonrpc: "2.0", id: 2, method: tools/call, params: {{name: echo, arguments: {{}}}}}}}}
  - expect: {{envelope: {{request_id: {{capture: c}}, call_tool: {{}}}}}}
  - send: {{request_id: "${{c}}", call_result: {{is_error: true, result_json: "[]"}}}}
  - host_expect: {{message: {{id: 2, result: {{isError: false}}}}}}
"#
        ),
    )
    .unwrap();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(http_bridge())
        .args(["--bridge-transport", "http", "--scenarios"])
        .arg(&dir)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL  bridge.selftest.no-session"), "{t}");
    assert!(t.contains("<HTTP 400"), "the status is in the transcript: {t}");
    assert!(t.contains("FAIL  bridge.selftest.wrong-is-error"), "{t}");
    assert!(t.contains("isError"), "{t}");
    assert!(t.contains("--bridge-transport http"), "the re-run command keeps the transport: {t}");
    sb.assert_clean();
}

#[test]
fn a_bridge_that_never_listens_is_killed_by_the_start_up_watchdog() {
    let sb = Sandbox::new();
    let s = sb.file(
        "hang.yaml",
        &format!(
            r#"
id: bridge.selftest.never-listens
title: a bridge that never opens its port
requirements: [BR-HTTP-01]
level: MUST
role: bridge
needs: [http]
timeout_ms: 3000
steps:
{INIT}"#
        ),
    );
    // A "bridge" that ignores its arguments and never listens.
    let hang = sb.file("hang.sh", "#!/bin/sh\nsleep 300\n");
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(format!("{} --port {{port}} {{mock}}", hang.display()))
        .args(["--bridge-transport", "http", "--scenarios"])
        .arg(&s)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "a FAIL (the bridge does not serve): {t}");
    assert!(t.contains("FAIL  bridge.selftest.never-listens"), "{t}");
    assert!(t.contains("start-up watchdog: the bridge did not accept connections at http://127.0.0.1:"), "{t}");
    assert!(started.elapsed() < Duration::from_secs(15), "the watchdog fired late: {t}");
    sb.assert_clean();

    // One that exits at once is reported as such, without waiting for the watchdog.
    let started = Instant::now();
    let out = sb
        .cmd()
        .args(["--bridge", "false {port}", "--bridge-transport", "http", "--scenarios"])
        .arg(&s)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("the bridge exited (exit status: 1) before accepting connections"), "{t}");
    assert!(started.elapsed() < Duration::from_secs(2), "{t}");
    sb.assert_clean();
}

#[test]
fn bridge_manifests_for_stdio_and_http() {
    let sb = Sandbox::new();
    for (dir, target) in [("harness/bridges/reference", "stdio"), ("harness/bridges/reference-http", "http")] {
        let out = sb
            .cmd()
            .arg("--bridge")
            .arg(root().join(dir))
            .args(["--only", "bridge.calls.forward-and-map", "--only", "bridge.lifecycle.stdin-eof"])
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(0), "{dir}: {t}");
        assert!(t.contains("PASS  bridge.calls.forward-and-map"), "{t}");
        assert!(t.contains(&format!("target: reference bridge ({target})")), "{t}");
        // End of stdin is stdio-only: the HTTP manifest skips it.
        let eof =
            if target == "stdio" { "PASS  bridge.lifecycle.stdin-eof" } else { "SKIP  bridge.lifecycle.stdin-eof" };
        assert!(t.contains(eof), "{t}");
    }
    // A manifest of our own: a relative command runs in the manifest's directory with its env.
    let d = sb.dir.path().join("mine");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("run.sh"), "#!/bin/sh\ntest \"$MINE\" = yes || exit 9\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(d.join("run.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        d.join("protomcp-conform.toml"),
        "name = \"mine\"\nbridge = [\"./run.sh\", \"{exe}\", \"bridge\", \"--call-timeout\", \"3s\", \"--\", \"{mock}\"]\nenv = {MINE = \"yes\"}\nskip = {\"bridge.mcp.initialize-capabilities\" = \"not today\"}\n",
    )
    .unwrap();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(&d)
        .args(["--only", "bridge.calls.forward-and-map", "--only", "bridge.mcp.initialize-capabilities"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  bridge.calls.forward-and-map"), "{t}");
    assert!(t.contains("SKIP  bridge.mcp.initialize-capabilities") && t.contains("not today"), "{t}");
    sb.assert_clean();
}

#[test]
fn a_bad_bridge_manifest_is_a_usage_error_with_its_position() {
    let sb = Sandbox::new();
    let d = sb.dir.path().join("bad");
    std::fs::create_dir_all(&d).unwrap();
    let m = d.join("protomcp-conform.toml");
    for (text_of, want) in [
        ("bridge = \"/bin/b {mock}\"\ntransport = \"tcp\"\n", ":2:13: unknown transport `tcp`; valid: stdio, http"),
        ("bridge = \"/bin/b {mock}\"\n\ncommand = [\"x\"]\n", ":3:1: unknown field `command`"),
        ("name = \"x\"\nbridge = [\"/bin/b\", 3]\n", ":2:10: "),
    ] {
        std::fs::write(&m, text_of).unwrap();
        let out = sb.cmd().arg("--bridge").arg(&d).output().unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(t.contains(&format!("{}{want}", m.display())), "want {want:?}: {t}");
    }
}

#[test]
fn bridge_catalogue_over_http_against_the_reference_bridge() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(root().join("harness/bridges/reference-http"))
        // The soaks take about a minute (tests/soak.rs runs a scaled-down one).
        .args(bridge_catalogue_without_soaks())
        .args(["-j", "2"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  bridge.lifecycle.crash-and-restart"), "{t}");
    assert!(!t.contains("ERROR"), "{t}");
    sb.assert_clean();
}

#[test]
fn sigint_mid_run_over_http_leaves_no_bridge_or_mock() {
    let sb = Sandbox::new();
    let s = sb.file(
        "long.yaml",
        &format!(
            r#"
id: bridge.selftest.long-http
title: a long wait with an HTTP session open
requirements: [BR-MCP-08]
level: MUST
role: bridge
steps:
  - tool_handshake: {{tools: [{{name: echo}}]}}
{INIT}  - host_expect_nothing: {{for_ms: 30000}}
"#
        ),
    );
    let mut child = sb
        .cmd()
        .arg("--bridge")
        .arg(http_bridge())
        .args(["--bridge-transport", "http", "--scenarios"])
        .arg(&s)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    // The mock runs as `{mock}`, a link named `mock` to the binary.
    while !sb.leftovers().iter().any(|l| l.ends_with("/mock\0") || l.ends_with("\0mock\0")) {
        assert!(Instant::now() < deadline, "the mock never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the session start, then interrupt.
    std::thread::sleep(Duration::from_millis(500));
    protomcp_harness::os::signal_process(child.id() as i32, libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    sb.assert_clean();
}

#[test]
fn features_claimed_for_a_bridge_command() {
    let sb = Sandbox::new();
    let s = sb.file(
        "needs.yaml",
        &format!(
            r#"
id: bridge.selftest.needs-subscribe
title: runs only when the bridge claims subscribe
requirements: [BR-MCP-08]
level: MUST
role: bridge
needs: [subscribe]
steps:
  - tool_handshake: {{tools: [{{name: echo}}]}}
{INIT}  - host_send: {{message: {{jsonrpc: "2.0", id: 5, method: ping}}}}
  - host_expect: {{message: {{id: 5, result: {{}}}}}}
"#
        ),
    );
    let bridge = format!("{EXE} bridge --call-timeout 3s -- {{mock}}");
    let run =
        |extra: &[&str]| sb.cmd().arg("--bridge").arg(&bridge).arg("--scenarios").arg(&s).args(extra).output().unwrap();
    let t = text(&run(&[]));
    assert!(t.contains("SKIP  bridge.selftest.needs-subscribe") && t.contains("subscribe"), "{t}");
    let out = run(&["--features", "subscribe"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  bridge.selftest.needs-subscribe"), "{t}");
    let out = run(&["--features", "teleport"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("unknown bridge feature `teleport`"), "{}", text(&out));
    sb.assert_clean();
}
