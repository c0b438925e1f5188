//! `protomcp-conform capture`: a short host script drives a real bridge through the capture, and
//! both scenarios written from it replay PASS against the setup they were captured from: the
//! reference bridge with the reference testee (needs nothing but this crate), and pmcp with the
//! Python SDK testee (SKIP with the reason when pmcp or the Python venv is not there). Nothing
//! may be left behind: no process, no temp dir.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{EXE, Sandbox, code, text};
use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The capture running as the host's bridge command, and what it writes on stdout.
struct Capture {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Also the calls only the reference testee serves in every form.
    rich: bool,
}

impl Capture {
    fn start(sb: &Sandbox, out: &Path, tool: &str, bridge: &[&str], path: Option<&str>) -> Capture {
        let mut c = sb.cmd();
        c.current_dir(root())
            .args(["capture", "--out"])
            .arg(out)
            .args(["--id", "capture.test", "--tool", tool, "--max-time", "90s", "--"])
            .args(bridge)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(p) = path {
            c.env("PATH", p);
        }
        let mut child = c.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Capture { child, lines, rich: tool.ends_with(" testee") }
    }

    fn send(&mut self, m: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
    }

    /// The response with `id` (notifications before it are passed over).
    fn response(&mut self, id: i64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line =
                self.lines.recv_timeout(left).unwrap_or_else(|e| panic!("no response {id} from the bridge: {e}"));
            let m: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout: {line:?}: {e}"));
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return m;
            }
        }
    }

    /// The host script: initialize, list the tools, call echo and add; then the end of stdin.
    fn drive(&mut self) {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "capture-test", "version": "1"}}}));
        let init = self.response(1);
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        self.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        let list = self.response(2);
        assert!(list.to_string().contains("\"echo\""), "{list}");
        self.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "captured $1"}}}));
        let echo = self.response(3);
        assert_eq!(echo["result"]["content"][0]["text"], "captured $1", "{echo}");
        self.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}));
        let add = self.response(4);
        assert_eq!(add["result"]["content"][0]["text"], "5", "{add}");
        if self.rich {
            // Progress tokens of both sides, a sideband result, a chunked stream.
            self.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow", "arguments": {"steps": 2}, "_meta": {"progressToken": "host-tok"}}}));
            assert_eq!(self.response(5)["result"]["content"][0]["text"], "done 2");
            self.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "big", "arguments": {"n": 100_000}}}));
            assert_eq!(self.response(6)["result"]["content"][0]["text"].as_str().map(str::len), Some(100_000));
            self.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "stream_big", "arguments": {"n": 100_000}}}));
            assert_eq!(self.response(7)["result"]["content"][0]["text"].as_str().map(str::len), Some(100_000));
        }
        drop(self.child.stdin.take());
    }

    /// Waits for the capture to end (at most 60 s) and returns its status and stderr.
    fn finish(mut self) -> (i32, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the capture did not end within 60 s of the end of its stdin");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err);
        (status.code().unwrap_or(-1), err)
    }
}

/// Captures a session of `bridge` with `tool`, checks the files, replays both scenarios (they must
/// PASS) and returns the output dir.
fn capture_and_replay(sb: &Sandbox, tool: &str, bridge: &[&str], replay_bridge: &str, path: Option<&str>) -> PathBuf {
    let out = sb.dir.path().join("cap");
    let mut cap = Capture::start(sb, &out, tool, bridge, path);
    cap.drive();
    let (status, err) = cap.finish();
    assert_eq!(status, 0, "capture: {err}");
    assert!(err.contains("the bridge ended (exit status 0)"), "{err}");
    let session = std::fs::read_to_string(out.join("capture.txt")).unwrap();
    assert!(session.contains(" tp1    -- connected") && session.contains(" host   host→bridge "), "{session}");
    for (file, args) in
        [("tool-process.yaml", vec!["--testee", tool]), ("bridge.yaml", vec!["--bridge", replay_bridge])]
    {
        let mut c = sb.cmd();
        c.current_dir(root()).args(&args).arg("--scenarios").arg(out.join(file));
        if let Some(p) = path {
            c.env("PATH", p);
        }
        let o = c.output().unwrap();
        let t = text(&o);
        assert_eq!(code(&o), 0, "{file}: {t}\n{}", std::fs::read_to_string(out.join(file)).unwrap());
        assert!(t.contains("PASS  capture.test."), "{t}");
    }
    sb.assert_clean();
    out
}

#[test]
fn a_captured_session_of_the_reference_bridge_replays_pass_against_the_reference_testee_and_bridge() {
    let sb = Sandbox::new();
    let tool = format!("{EXE} testee");
    let replay = format!("{EXE} bridge -- {{mock}}");
    let out = capture_and_replay(&sb, &tool, &[EXE, "bridge", "--", "{tool}"], &replay, None);
    let tp = std::fs::read_to_string(out.join("tool-process.yaml")).unwrap();
    // The host's `$` is doubled in what the harness sends; the bridge's rids are captured in
    // the bridge scenario and sent back as placeholders.
    assert!(tp.contains("captured $$1"), "{tp}");
    let br = std::fs::read_to_string(out.join("bridge.yaml")).unwrap();
    assert!(br.contains(r#""request_id":{"capture":"rid_1"}"#) && br.contains(r#""request_id":"${rid_1}""#), "{br}");
    // The bridge's progress token is captured and the tool side's progress sent under it; the
    // sideband payload goes as bytes, the stream as its frames; the tool-process scenario expects
    // both as results.
    assert!(
        br.contains(r#""progress_token":{"capture":"token_1"}"#) && br.contains(r#""progress_token":"${token_1}""#),
        "{br}"
    );
    assert!(br.contains("  - send_raw: {hex: \"") && br.contains("stream_chunk"), "{br}");
    assert!(!tp.contains("stream_chunk") && !tp.contains("raw_header"), "{tp}");

    // The replay judges: a tool process that answers under another rid fails it.
    let o = sb
        .cmd()
        .args(["--testee", &format!("{EXE} testee --misbehave wrong-rid"), "--scenarios"])
        .arg(out.join("tool-process.yaml"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("FAIL  capture.test.tool-process"), "{}", text(&o));

    // The capture file alone writes the same scenarios again.
    let again = sb.dir.path().join("again");
    let o = sb
        .cmd()
        .args(["capture", "--from"])
        .arg(out.join("capture.txt"))
        .arg("--out")
        .arg(&again)
        .args(["--id", "capture.test"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    for f in ["tool-process.yaml", "bridge.yaml"] {
        assert_eq!(
            std::fs::read_to_string(again.join(f)).unwrap(),
            std::fs::read_to_string(out.join(f)).unwrap(),
            "{f}"
        );
    }
    sb.assert_clean();
}

/// The venv with the Python SDK (as harness/testees/python/ci.sh makes it).
fn python_venv() -> Result<PathBuf, String> {
    let venv = std::env::var_os("PROTOMCP_CONFORM_PYVENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/conformance/pyvenv"));
    let python = venv.join("bin/python3");
    let ok = Command::new(&python)
        .args(["-c", "import protomcp"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(venv.join("bin"))
    } else {
        Err(format!("no venv with the Python SDK at {} (harness/testees/python/ci.sh makes it)", venv.display()))
    }
}

#[test]
fn a_captured_session_of_pmcp_with_the_python_sdk_replays_pass_against_pmcp_and_the_python_testee() {
    // A build the user supplies (PMCP_BIN), else the one install.sh puts into target/.
    let pmcp = std::env::var_os("PMCP_BIN")
        .filter(|b| !b.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root().join("target/pmcp/bin/protomcp"));
    let required = std::env::var_os("PROTOMCP_CONFORM_REQUIRE_PMCP").is_some();
    let venv = python_venv();
    let missing = match (&venv, pmcp.is_file()) {
        (Err(e), _) => Some(e.clone()),
        (_, false) => Some(format!(
            "no pmcp at {} (set PMCP_BIN, or harness/bridges/pmcp/install.sh installs it where the module proxy serves it)",
            pmcp.display()
        )),
        _ => None,
    };
    if let Some(reason) = missing {
        assert!(!required, "PROTOMCP_CONFORM_REQUIRE_PMCP is set, but {reason}");
        eprintln!("SKIP: {reason}");
        return;
    }
    let path = format!("{}:{}", venv.unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let sb = Sandbox::new();
    let pmcp = pmcp.display().to_string();
    let out = capture_and_replay(
        &sb,
        "python3 harness/testees/python/testee.py",
        &[&pmcp, "run", "{tool}"],
        &format!("{pmcp} run {{mock}}"),
        Some(&path),
    );
    // pmcp's start-up list_changed notifications are not judged.
    let br = std::fs::read_to_string(out.join("bridge.yaml")).unwrap();
    assert!(!br.contains(r#""method":"notifications/tools/list_changed""#), "{br}");
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_status_2() {
    let sb = Sandbox::new();
    let out = sb.dir.path().join("cap");
    let run = |args: &[&str]| sb.cmd().args(["capture", "--out"]).arg(&out).args(args).output().unwrap();
    let o = run(&["--tool", "x", "--", "pmcp", "run", "tool.py"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("names no `{tool}`"), "{}", text(&o));
    let o = run(&["--tool", "x"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o).contains("no bridge command: give it after `--`"), "{}", text(&o));
    let o = run(&["--tool", "x", "--id", "Bad Id", "--", "b", "{tool}"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o).contains("--id \"Bad Id\""), "{}", text(&o));
    let o = run(&["--tool", "x", "--", "/nonexistent/bridge", "{tool}"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("cannot start the bridge `/nonexistent/bridge"), "{}", text(&o));
    let bad = sb.file("bad.txt", "hello\n");
    let o = sb.cmd().args(["capture", "--out"]).arg(&out).arg("--from").arg(&bad).output().unwrap();
    assert_eq!(code(&o), 2);
    assert!(text(&o).contains("line 1: not a capture file"), "{}", text(&o));
    sb.assert_clean();
}

#[test]
fn a_bridge_that_never_exits_is_ended_after_the_grace_time_and_nothing_is_left() {
    // `sleep` as the "bridge": it never reads stdin, never starts the tool. The host leaves at
    // once; after --grace the capture ends its group and still writes the capture file.
    let sb = Sandbox::new();
    let out = sb.dir.path().join("cap");
    let started = Instant::now();
    let o = sb
        .cmd()
        .args(["capture", "--grace", "300ms", "--out"])
        .arg(&out)
        .args(["--tool", "true", "--", "sh", "-c", "sleep 30 # {tool}"])
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    let t = text(&o);
    assert_eq!(code(&o), 1, "{t}");
    assert!(
        t.contains("did not exit within --grace") && t.contains("no tool-process.yaml: no tool process connected"),
        "{t}"
    );
    assert!(std::fs::read_to_string(out.join("capture.txt")).unwrap().contains("host→bridge line: <end of file>"));
    sb.assert_clean();
}

#[test]
fn a_bridge_over_http_is_captured_on_its_tool_side_and_its_tool_process_scenario_replays_pass() {
    // No host on stdio: the reference bridge over HTTP hand-shakes with its tool process at
    // start-up; the capture ends it after --grace (stdin is at its end from the start).
    let sb = Sandbox::new();
    let out = sb.dir.path().join("cap");
    let port = crate::common::free_port().to_string();
    let tool = format!("{EXE} testee");
    let o = sb
        .cmd()
        .args(["capture", "--grace", "1500ms", "--out"])
        .arg(&out)
        .args(["--tool", &tool, "--", EXE, "bridge", "--transport", "http", "--port", &port, "--", "{tool}"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(code(&o), 1, "{t}");
    assert!(t.contains("no bridge.yaml: nothing crossed the host's stdin or stdout") && t.contains("wrote "), "{t}");
    assert!(!t.contains("--bridge '"), "a replay of a file not written: {t}");
    let tp = std::fs::read_to_string(out.join("tool-process.yaml")).unwrap();
    assert!(tp.contains(r#""list_tools":{}"#) && tp.trim_end().ends_with("what followed is not replayed"), "{tp}");
    let o = sb.cmd().args(["--testee", &tool, "--scenarios"]).arg(out.join("tool-process.yaml")).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    sb.assert_clean();
}

#[test]
fn a_tool_process_outside_the_bridges_group_that_outlives_the_bridge_is_ended() {
    // The "bridge" starts its tool in a session of its own and exits at once; the tool
    // (`sleep 60`, exec'd by the launcher) would live on.
    let sb = Sandbox::new();
    let out = sb.dir.path().join("cap");
    let started = Instant::now();
    let o = sb
        .cmd()
        .args(["capture", "--out"])
        .arg(&out)
        .args(["--tool", "sleep 60", "--", "sh", "-c", "PROTOMCP_SOCKET=/nowhere/tp.sock setsid {tool} & sleep 1"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?} {t}", started.elapsed());
    assert!(t.contains("the bridge ended (exit status 0)"), "{t}");
    assert!(!t.contains("survived"), "{t}");
    sb.assert_clean();
}
