//! `protomcp-conform mock` and `protomcp-conform --bridge`: the BR catalogue against the
//! reference bridge, a bridge that hangs at start-up, SIGINT in the middle of a run, and no
//! bridge or mock process surviving any of them.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

use crate::common::{Sandbox, bridge_catalogue_without_soaks, text};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn reference_bridge() -> String {
    format!("{EXE} bridge --call-timeout 3s -- {{mock}}")
}

#[test]
fn bridge_catalogue_passes_against_the_reference_bridge() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        // The manifest: it claims the bridge features (subscribe) and names the known failures.
        .arg("--bridge")
        .arg(root().join("harness/bridges/reference"))
        // The soaks take about a minute (tests/soak.rs runs a scaled-down one).
        .args(bridge_catalogue_without_soaks())
        .args(["-j", "2"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  bridge.calls.forward-and-map"), "{t}");
    assert!(t.contains("PASS  bridge.resources.subscribe-and-updated"), "{t}");
    assert!(t.contains("PASS  bridge.lifecycle.crash-and-restart"), "{t}");
    // Only the scenarios that need an HTTP request of their own are skipped over stdio, and the
    // two about reloads by ReloadRequest (the reference bridge restarts, BR-RELOAD-01).
    for line in t.lines().filter(|l| l.starts_with("SKIP")) {
        assert!(
            line.contains("runs only over http (transports:)")
                || line.contains("reloads by restarting the tool process, which BR-RELOAD-01 allows"),
            "{line}\n{t}"
        );
    }
    sb.assert_clean();
}

#[test]
fn tool_process_scenarios_are_skipped_for_a_bridge_and_bridge_scenarios_for_a_testee() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(reference_bridge())
        .args(["--only", "calls.echo*", "--only", "bridge.mcp.ping*"])
        .output()
        .unwrap();
    let t = text(&out);
    // Skipped scenarios are one line per reason (several: a count, naming them when they are few).
    assert!(
        t.lines().any(|l| l.starts_with("SKIP  ")
            && l.contains("a tool-process scenario; the target is a bridge")
            && l.contains("calls.echo")),
        "{t}"
    );
    assert!(t.contains("PASS  bridge.mcp.ping-before-initialize"), "{t}");
    let out = sb.cmd().args(["--testee", &format!("{EXE} testee"), "--only", "bridge.mcp.ping*"]).output().unwrap();
    let t = text(&out);
    assert!(t.contains("SKIP  bridge.mcp.ping-before-initialize") && t.contains("runs with --bridge"), "{t}");
    // The default run drives the bridge scenarios against the reference bridge.
    let out = sb.cmd().args(["--only", "bridge.mcp.ping*"]).output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  bridge.mcp.ping-before-initialize"), "{t}");
    assert!(t.contains("target: reference bridge (stdio)"), "{t}");
    sb.assert_clean();
}

#[test]
fn a_wrong_answer_fails_the_scenario() {
    // The bridge must map is_error to isError: true; a scenario expecting false must fail.
    let sb = Sandbox::new();
    let s = sb.file(
        "wrong.yaml",
        r#"
id: bridge.selftest.wrong
title: expects the wrong isError
requirements: [BR-CALL-06]
level: MUST
role: bridge
steps:
  - tool_handshake: {tools: [{name: echo}]}
  - host_send: {message: {jsonrpc: "2.0", id: 1, method: initialize, params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: h, version: "1"}}}}
  - host_expect: {message: {id: 1, result: {}}}
  - host_send: {message: {jsonrpc: "2.0", id: 2, method: tools/call, params: {name: echo, arguments: {}}}}
  - expect: {envelope: {request_id: {capture: c}, call_tool: {}}}
  - send: {request_id: "${c}", call_result: {is_error: true, result_json: "[]"}}
  - host_expect: {message: {id: 2, result: {isError: false}}}
"#,
    );
    let out = sb.cmd().arg("--bridge").arg(reference_bridge()).arg("--scenarios").arg(&s).output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL  bridge.selftest.wrong"), "{t}");
    assert!(t.contains("host← "), "the transcript shows the host side: {t}");
    sb.assert_clean();
}

#[test]
fn a_bridge_that_hangs_at_startup_is_killed() {
    let sb = Sandbox::new();
    let s = sb.file(
        "hang.yaml",
        r#"
id: bridge.selftest.hang
title: a bridge that never starts its tool process
requirements: [BR-HANDSHAKE-01]
level: MUST
role: bridge
timeout_ms: 1500
steps:
  - tool_handshake: {tools: [{name: echo}]}
"#,
    );
    // A "bridge" that never runs the mock and ignores stdin.
    let hang = sb.file("hang.sh", "#!/bin/sh\nsleep 300\n");
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(format!("{} {{mock}}", hang.display()))
        .arg("--scenarios")
        .arg(&s)
        .output()
        .unwrap();
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("bridge.selftest.hang"), "{t}");
    assert!(started.elapsed() < Duration::from_secs(20), "the watchdog fired late: {t}");
    sb.assert_clean();
}

#[test]
fn sigint_mid_run_leaves_no_bridge_or_mock() {
    let sb = Sandbox::new();
    let s = sb.file(
        "long.yaml",
        r#"
id: bridge.selftest.long
title: a long wait with the mock connected
requirements: [BR-MCP-08]
level: MUST
role: bridge
steps:
  - tool_handshake: {tools: [{name: echo}]}
  - host_expect_nothing: {for_ms: 30000}
"#,
    );
    let mut child = sb
        .cmd()
        .arg("--bridge")
        .arg(reference_bridge())
        .arg("--scenarios")
        .arg(&s)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the mock runs (it inherits the sandbox's variable), then interrupt.
    let deadline = Instant::now() + Duration::from_secs(15);
    // It runs as `{mock}`, a link named `mock` to the binary (its command line ends in `/mock`).
    while !sb.leftovers().iter().any(|l| l.ends_with("/mock\0") || l.ends_with("\0mock\0")) {
        assert!(Instant::now() < deadline, "the mock never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    protomcp_harness::os::signal_process(child.id() as i32, libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    sb.assert_clean();
}

#[test]
fn mock_relays_bytes_both_ways_and_passes_on_end_of_file() {
    let sb = Sandbox::new();
    let dir = sb.dir.path();
    let bridge = UnixListener::bind(dir.join("b.sock")).unwrap();
    let control = UnixListener::bind(dir.join("c.sock")).unwrap();
    let mut child = Command::new(EXE)
        .arg("mock")
        .env("PROTOMCP_SOCKET", dir.join("b.sock"))
        .env("PROTOMCP_CONFORM_CONTROL", dir.join("c.sock"))
        .env_remove("PROTOMCP_CONFORM_MOCK")
        .spawn()
        .unwrap();
    let (mut c, _) = control.accept().unwrap();
    let (mut b, _) = bridge.accept().unwrap();
    b.write_all(b"\x00\x00\x00\x02\x12\x00").unwrap();
    let mut got = [0u8; 6];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"\x00\x00\x00\x02\x12\x00");
    c.write_all(b"not even a frame").unwrap();
    let mut got = [0u8; 16];
    b.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"not even a frame");
    drop(c);
    let mut rest = Vec::new();
    b.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn mock_without_its_variables_exits_2() {
    let out = Command::new(EXE)
        .arg("mock")
        .env_remove("PROTOMCP_SOCKET")
        .env_remove("PROTOMCP_CONFORM_CONTROL")
        .env_remove("PROTOMCP_CONFORM_MOCK")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn a_bridge_that_paginates_its_lists_passes_the_list_scenarios_because_the_harness_follows_next_cursor() {
    // BR-MCP-12: a bridge MAY paginate. The reference bridge with `--page-size 1` hands out one
    // item per page; the scenarios below expect lists of two or more items.
    let sb = Sandbox::new();
    let raw = sb.file(
        "raw-page.yaml",
        r#"
id: bridge.selftest.pages-exist
title: the first page of tools/list holds one tool and a nextCursor (a raw line is not followed)
requirements: [BR-MCP-12]
level: MAY
role: bridge
steps:
  - tool_handshake: {tools: [{name: a}, {name: b}]}
  - host_send: {message: {jsonrpc: "2.0", id: 1, method: initialize, params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: h, version: "1"}}}}
  - host_expect: {message: {id: 1, result: {}}}
  - host_send: {line: "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}"}
  - host_expect: {message: {id: 2, result: {tools: {equals: [{name: a, inputSchema: {type: object}}]}, nextCursor: {capture: c}}}}
"#,
    );
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(root().join("harness/bridges/reference-paged"))
        .arg("--scenarios")
        .arg(&raw)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "the paged bridge answers one item and a cursor: {t}");
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(root().join("harness/bridges/reference-paged"))
        .arg("--scenarios")
        .arg(root().join("scenarios/bridge"))
        .args(["--only", "bridge.toollist.disable-enable", "--only", "bridge.resources.list-mapping"])
        .args(["--only", "bridge.restart.prompts-changed"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    for id in ["bridge.toollist.disable-enable", "bridge.resources.list-mapping", "bridge.restart.prompts-changed"] {
        assert!(t.contains(&format!("PASS  {id}")), "{id}: {t}");
    }
    sb.assert_clean();
}

#[test]
fn reload_scenarios_accept_both_forms_of_reload_and_skip_the_ones_about_the_other_form() {
    // BR-RELOAD-01: a bridge may reload by restart or by ReloadRequest. The reference bridge does
    // either (`--reload`); each form passes the scenarios about reloads in general, runs the
    // ones about its form and SKIPs (never FAILs) the ones about the other.
    let sb = Sandbox::new();
    let run = |manifest: &str| {
        let out = sb
            .cmd()
            .arg("--bridge")
            .arg(root().join("harness/bridges").join(manifest))
            .arg("--scenarios")
            .arg(root().join("scenarios/bridge/reload"))
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(0), "{manifest}: {t}");
        t
    };
    let request = run("reference-reload-request");
    let restart = run("reference");
    for id in ["lists-follow", "within-a-second", "unchanged-no-notification"] {
        assert!(request.contains(&format!("PASS  bridge.reload.{id}")), "{id}: {request}");
        assert!(restart.contains(&format!("PASS  bridge.reload.{id}")), "{id}: {restart}");
    }
    for id in ["request-burst-is-the-new-list", "request-refused-keeps-lists"] {
        assert!(request.contains(&format!("PASS  bridge.reload.{id}")), "{id}: {request}");
        assert!(restart.contains(&format!("SKIP  bridge.reload.{id}")), "{id}: {restart}");
    }
    for id in ["in-flight-call-answered", "failed-start-keeps-bridge-up", "triggers-during-reload-fold"] {
        assert!(request.contains(&format!("SKIP  bridge.reload.{id}")), "{id}: {request}");
        assert!(restart.contains(&format!("PASS  bridge.reload.{id}")), "{id}: {restart}");
    }
    assert!(request.contains("reloads by sending ReloadRequest, which BR-RELOAD-01 allows"), "{request}");
    sb.assert_clean();
}

#[test]
fn a_line_on_stdout_that_is_not_json_rpc_names_br_mcp_01_whatever_the_waiting_step_checks() {
    // A bridge that writes a line of text on stdout before its first MCP message: the host step
    // that meets it names BR-MCP-01, which is what broke, not the requirement its own pattern
    // checks (`checks:`).
    let sb = Sandbox::new();
    let noisy = sb.file("noisy.sh", "#!/bin/sh\necho 'starting up'\nexec \"$@\"\n");
    std::fs::set_permissions(&noisy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = sb.file(
        "noisy.yaml",
        r#"
id: bridge.selftest.noisy
title: the initialize answer after a line of text on stdout
requirements: [BR-MCP-02, BR-MCP-10]
level: MUST
role: bridge
steps:
  - tool_handshake: {tools: [{name: echo}]}
    checks: [BR-CONN-01]
  - host_send: {message: {jsonrpc: "2.0", id: 1, method: initialize, params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: h, version: "1"}}}}
  - host_expect: {message: {id: 1, result: {}}}
    checks: [BR-MCP-02]
"#,
    );
    let json = sb.dir.path().join("r.json");
    let bridge = format!("{} {}", noisy.display(), reference_bridge());
    let out =
        sb.cmd().arg("--bridge").arg(&bridge).arg("--scenarios").arg(&s).arg("--json").arg(&json).output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cases"][0]["verdict"], "FAIL", "{v}");
    assert_eq!(v["cases"][0]["broken"], serde_json::json!(["BR-MCP-01"]), "{v}");
    assert!(v["cases"][0]["message"].as_str().unwrap().contains("not JSON-RPC"), "{v}");
    sb.assert_clean();
}
