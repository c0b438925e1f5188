//! `protomcp-conform testee` as a process: startup errors (TP-CONN-02..04), a real connection
//! through `PROTOMCP_SOCKET`, exit on end-of-file (TP-CONN-07..09), signals, and the
//! process-level `--misbehave` modes.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use protomcp_harness::dump::{Dump, dump};
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::frame::Limits;
use protomcp_proto::violation::Party;

const T_PROMPT: Duration = Duration::from_secs(1);
const T_START: Duration = Duration::from_secs(10);

fn testee() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_protomcp-conform"));
    c.arg("testee")
        .env_remove("PROTOMCP_SOCKET")
        .env_remove("PROTOMCP_CHUNK_THRESHOLD")
        .env_remove("PROTOMCP_COMPRESS_THRESHOLD")
        // TP-CONN-07: stdin at end-of-file, stdout discarded.
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn output_within(mut c: Command, within: Duration) -> Output {
    let mut child = c.spawn().unwrap();
    let status = wait_within(&mut child, within).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("no exit within {within:?}")
    });
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    Output { status, stdout: Vec::new(), stderr: stderr.into_bytes() }
}

fn wait_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// A private directory for a socket, removed on drop. Short path: socket paths are limited.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir =
            std::env::temp_dir().join(format!("pct-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A bridge's listening socket and the testee started against it.
struct Bridge {
    _dir: TempDir,
    listener: UnixListener,
    child: Child,
}

impl Bridge {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Bridge {
        let dir = TempDir::new();
        let path = dir.path("s");
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut c = testee();
        c.args(args).env("PROTOMCP_SOCKET", &path);
        for (k, v) in env {
            c.env(k, v);
        }
        Bridge { _dir: dir, listener, child: c.spawn().unwrap() }
    }

    fn accept(&self, within: Duration) -> Option<UnixStream> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                    return Some(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("{e}"),
            }
        }
        None
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success();
        assert!(ok, "kill {sig}");
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads what the testee sends until `done` says the decoded capture is complete.
fn read_until(s: &mut UnixStream, buf: &mut Vec<u8>, done: impl Fn(&Dump) -> bool) -> Dump {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut chunk = [0u8; 65536];
    loop {
        let d = dump(buf, Party::ToolProcess, Limits::default());
        if done(&d) {
            assert!(d.violations.is_empty(), "{:?}", d.violations);
            return d;
        }
        assert!(Instant::now() < deadline, "incomplete: {:#?}", d.lines);
        match s.read(&mut chunk) {
            Ok(0) => panic!("end of stream: {:#?}", d.lines),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

fn has(d: &Dump, needle: &str) -> bool {
    d.lines.iter().any(|l| l.contains(needle))
}

/// The handshake, as a bridge does it; returns the connection.
fn handshake(b: &Bridge) -> (UnixStream, Vec<u8>) {
    let mut s = b.accept(T_START).expect("the testee connects");
    s.write_all(&env::list_tools().with_rid("req-0").to_frame()).unwrap();
    let mut buf = Vec::new();
    let d = read_until(&mut s, &mut buf, |d| d.frames >= 3);
    assert!(d.lines[0].contains("#5 tool_list rid=\"req-0\""), "{:#?}", d.lines);
    assert!(d.lines[1].contains("#4 reload_response rid=\"\""), "{:#?}", d.lines);
    assert!(d.lines[2].contains("#8 disable_tools rid=\"\""), "{:#?}", d.lines);
    (s, buf)
}

fn stderr_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr).lines().map(str::to_owned).collect()
}

#[test]
fn an_unset_or_empty_socket_variable_is_a_one_line_usage_error() {
    for value in [None, Some("")] {
        let mut c = testee();
        if let Some(v) = value {
            c.env("PROTOMCP_SOCKET", v);
        }
        // TP-CONN-02/03.
        let o = output_within(c, T_START);
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let lines = stderr_lines(&o);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("PROTOMCP_SOCKET") && !lines[0].contains("panicked"), "{lines:?}");
    }
}

#[test]
fn a_socket_that_cannot_be_reached_is_exit_1() {
    let dir = TempDir::new();
    let file = dir.path("plain-file");
    std::fs::write(&file, b"not a socket").unwrap();
    let closed = dir.path("closed");
    drop(UnixListener::bind(&closed).unwrap()); // the file stays, nobody listens
    for path in [dir.path("missing"), file, closed, PathBuf::from("relative/nowhere")] {
        let mut c = testee();
        c.env("PROTOMCP_SOCKET", &path);
        // TP-CONN-04.
        let started = Instant::now();
        let o = output_within(c, T_START);
        assert_eq!(o.status.code(), Some(1), "{}: {o:?}", path.display());
        assert!(started.elapsed() < T_START);
        assert_eq!(stderr_lines(&o).len(), 1, "{o:?}");
    }
}

#[test]
fn serves_over_the_socket_and_leaves_with_0_when_the_bridge_closes() {
    let mut b = Bridge::start(&[], &[]);
    let (mut s, mut buf) = handshake(&b);
    s.write_all(&env::call_tool("echo", r#"{"text":"over a real socket"}"#).with_rid("c1").to_frame()).unwrap();
    let d = read_until(&mut s, &mut buf, |d| d.frames >= 4);
    assert!(has(&d, "#6 call_result rid=\"c1\""), "{:#?}", d.lines);
    assert!(has(&d, "over a real socket"));
    // TP-CONN-08/09 (with shutdown(SHUT_RDWR), as Appendix B.4 recommends).
    s.shutdown(std::net::Shutdown::Both).unwrap();
    let status = wait_within(&mut b.child, T_PROMPT).expect("exit within T_PROMPT");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn thresholds_come_from_the_environment_and_bad_values_fall_back() {
    let b = Bridge::start(&[], &[("PROTOMCP_CHUNK_THRESHOLD", "64"), ("PROTOMCP_COMPRESS_THRESHOLD", "lots")]);
    let (mut s, mut buf) = handshake(&b);
    let text = "y".repeat(100);
    s.write_all(&env::call_tool("echo", &format!(r#"{{"text":"{text}"}}"#)).with_rid("c1").to_frame()).unwrap();
    // TP-SIDEBAND-08 with the moved threshold; TP-SIDEBAND-12/13: the malformed compression
    // threshold is 65,536, so the payload is plain.
    let d = read_until(&mut s, &mut buf, |d| d.lines.iter().any(|l| l.contains("sideband payload for call")));
    assert!(has(&d, "#30 raw_header rid=\"\""), "{:#?}", d.lines);
    assert!(has(&d, "request_id: \"c1\""), "{:#?}", d.lines);
    assert!(has(&d, "compression: \"\""), "{:#?}", d.lines);
    drop(s);
    let mut b = b;
    assert_eq!(wait_within(&mut b.child, T_PROMPT).and_then(|s| s.code()), Some(0));
    let mut stderr = String::new();
    b.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains("PROTOMCP_COMPRESS_THRESHOLD=\"lots\""), "{stderr}");
}

#[test]
fn sigterm_ends_the_testee_unless_it_misbehaves() {
    // TP-LIFECYCLE-02.
    let mut b = Bridge::start(&[], &[]);
    let _conn = handshake(&b);
    b.signal("-TERM");
    assert!(wait_within(&mut b.child, T_PROMPT).is_some(), "SIGTERM ends it");
    let mut b = Bridge::start(&["--misbehave", "ignore-sigterm"], &[]);
    let _conn = handshake(&b);
    b.signal("-TERM");
    assert!(wait_within(&mut b.child, Duration::from_millis(500)).is_none(), "SIGTERM ignored");
}

#[test]
fn misbehave_never_connect_stays_alive_without_connecting() {
    let mut b = Bridge::start(&["--misbehave", "never-connect"], &[]);
    assert!(b.accept(Duration::from_millis(500)).is_none());
    assert!(b.child.try_wait().unwrap().is_none(), "still running");
}

#[test]
fn misbehave_grandchild_leaves_a_sleep_in_the_process_group() {
    let mut b = Bridge::start(&["--misbehave", "grandchild"], &[]);
    let _conn = handshake(&b);
    let mut line = String::new();
    BufReader::new(b.child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let pid: u32 = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
    let pgid = |pid: u32| -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')').next()?.split_whitespace().nth(2).map(str::to_owned)
    };
    assert_eq!(pgid(pid), pgid(b.child.id()), "same process group");
    let _ = b.child.kill();
    let _ = b.child.wait();
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "outlives the testee");
    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
}
