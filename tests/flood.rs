//! The harness holds against a peer that never stops sending (issue 12): a flooding testee, a
//! bridge fed by a flooding tool process (stdio and HTTP), a bridge that floods its stdout at full
//! speed, and the reference bridge with a host that does not read. Each harness run ends with a
//! verdict that names the flood, and the peak resident memory of the harness process stays under
//! 300 MB: its VmHWM, read from `/proc/<pid>/status` while it runs. (`wait4`'s `ru_maxrss` is
//! shown beside it, not judged: it also counts the children the harness reaped, and the image of
//! this test process that the child was forked from, which other tests here make large.)
//! The bounds are in common/src/limits.rs; the scenarios in tests/flood/.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{EXE, Sandbox};

/// The binary under test: this build's, or `PROTOMCP_CONFORM_FLOOD_EXE` (to watch these tests
/// fail against a build with a bound taken out).
fn exe() -> String {
    std::env::var("PROTOMCP_CONFORM_FLOOD_EXE").unwrap_or_else(|_| EXE.to_owned())
}

/// The bound the issue sets on the harness's peak resident memory, in kB (300 MB).
const PEAK_LIMIT_KB: u64 = 300_000;
/// A run above this is stopped at once (the machine must not starve when a bound is missing).
const KILL_AT_KB: u64 = 1_500_000;
/// A run longer than this is stopped (it should end in seconds).
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A field of `/proc/<pid>/status` in kB.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

struct Measured {
    code: i32,
    out: String,
    /// The last VmHWM read before the process ended, in kB.
    hwm_kb: u64,
    /// `ru_maxrss` of `wait4`, in kB (see the module documentation: shown, not judged).
    maxrss_kb: u64,
    took: Duration,
}

impl Measured {
    fn assert_under_limit(&self) {
        assert!(
            self.hwm_kb > 0 && self.hwm_kb < PEAK_LIMIT_KB,
            "peak RSS (VmHWM) {} kB, limit {PEAK_LIMIT_KB} kB\n{}",
            self.hwm_kb,
            self.out
        );
    }
}

/// Runs `cmd` to its end, reading its VmHWM every 20 ms; stops it (SIGINT, then SIGKILL) past
/// [`KILL_AT_KB`] or [`RUN_LIMIT`].
fn measure(mut cmd: Command) -> Measured {
    let started = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let (mut hwm, mut stopped) = (0u64, None);
    let (status, maxrss) = loop {
        if let Some(kb) = status_kb(pid, "VmHWM:") {
            hwm = hwm.max(kb);
        }
        if stopped.is_none() && (hwm > KILL_AT_KB || started.elapsed() > RUN_LIMIT) {
            stopped = Some(format!("stopped after {:?} at VmHWM {hwm} kB", started.elapsed()));
            // SIGINT first: the harness kills its testees and bridges and removes its temp dirs.
            protomcp_harness::os::signal_process(pid as i32, libc::SIGINT);
            std::thread::sleep(Duration::from_secs(3));
            protomcp_harness::os::signal_process(pid as i32, libc::SIGKILL);
        }
        let mut st = 0;
        // SAFETY: nothing safe gives one child's rusage (std's wait has none; rustix 1.1 has no
        // wait4 or getrusage). A zeroed rusage is a valid value (integers only), and wait4 on our
        // own child writes its status and usage through the two pointers, valid for the call.
        let (r, ru) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            (libc::wait4(pid as i32, &mut st, libc::WNOHANG, &mut ru), ru)
        };
        if r == pid as i32 {
            break (st, ru.ru_maxrss as u64);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::mem::forget(child); // reaped by wait4 above
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    let mut out = format!("exit {code}; VmHWM {hwm} kB; ru_maxrss {maxrss} kB\n");
    if let Some(s) = stopped {
        out.push_str(&format!("{s}\n"));
    }
    out.push_str(&out_t.join().unwrap());
    out.push_str("\n--- stderr ---\n");
    out.push_str(&err_t.join().unwrap());
    Measured { code, out, hwm_kb: hwm, maxrss_kb: maxrss, took: started.elapsed() }
}

/// Runs the scenario file `tests/flood/<name>` with `args` and checks: FAIL, naming the flood
/// with `needles`, under the memory limit.
fn flood_run(name: &str, args: &[&str], id: &str, needles: &[&str]) -> Measured {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.root()).unwrap();
    let mut cmd = Command::new(exe());
    cmd.env("PROTOMCP_CONFORM_TMPDIR", sb.root())
        .stdin(Stdio::null())
        .current_dir(root())
        .arg("--scenarios")
        .arg(root().join("tests/flood").join(name))
        .args(args);
    let m = measure(cmd);
    eprintln!("{id}: {} kB VmHWM, {} kB ru_maxrss, {:?}", m.hwm_kb, m.maxrss_kb, m.took);
    assert_eq!(m.code, 1, "{}", m.out);
    assert!(m.out.contains(&format!("FAIL  {id}")), "{}", m.out);
    for n in needles {
        assert!(m.out.contains(n), "{n:?} not in the report:\n{}", m.out);
    }
    m.assert_under_limit();
    sb.assert_clean();
    m
}

#[test]
fn a_testee_that_floods_after_its_handshake_gets_a_verdict_naming_the_flood_within_300_mb() {
    flood_run(
        "tool-process.yaml",
        &[],
        "harness.flood.tool-process",
        &["flood: the tool process sent", "transcript items in one run", "testee→harness log"],
    );
}

#[test]
fn a_bridge_fed_by_a_flooding_tool_process_gets_a_verdict_naming_the_flood_within_300_mb() {
    flood_run(
        "bridge.yaml",
        &["--bridge", "harness/bridges/reference"],
        "harness.flood.bridge",
        &["flood: the bridge sent", "notifications/message"],
    );
}

#[test]
fn over_http_a_bridge_fed_by_a_flooding_tool_process_gets_a_verdict_naming_the_flood_within_300_mb() {
    flood_run(
        "bridge.yaml",
        &["--bridge", "harness/bridges/reference-http"],
        "harness.flood.bridge",
        &["flood: the bridge sent", "notifications/message"],
    );
}

#[test]
fn a_bridge_that_floods_its_stdout_at_full_speed_gets_a_verdict_naming_the_flood_within_300_mb() {
    let line = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"flood"}}"#;
    let bridge = format!("yes {line}");
    flood_run(
        "stdout.yaml",
        &["--bridge", &bridge],
        "harness.flood.bridge-stdout",
        &["flood: the bridge sent", "notifications/message"],
    );
}

/// A shell script in the sandbox that writes to stderr without end (and nothing else).
fn stderr_flooder(sb: &Sandbox) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = sb.file("stderr-flood.sh", "#!/bin/sh\nexec yes 'a line of a flood on stderr' 1>&2\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

#[test]
fn a_testee_that_floods_its_stderr_gets_a_verdict_naming_the_flood_within_300_mb() {
    let sb = Sandbox::new();
    let testee = stderr_flooder(&sb);
    flood_run(
        "stderr-testee.yaml",
        &["--testee", &testee],
        "harness.flood.testee-stderr",
        &["flood: the tool process wrote", "bytes to stderr in one scenario, more than the harness keeps"],
    );
}

#[test]
fn a_bridge_that_floods_its_stderr_gets_a_verdict_naming_the_flood_within_300_mb() {
    let sb = Sandbox::new();
    let bridge = stderr_flooder(&sb);
    flood_run(
        "stderr-bridge.yaml",
        &["--bridge", &bridge],
        "harness.flood.bridge-stderr",
        &["flood: the bridge wrote", "bytes to stderr in one scenario, more than the harness keeps"],
    );
}

/// The reference bridge between a tool process that floods and a host that does not read: its
/// queue of notifications for that host stays bounded (its VmHWM stays small while the tool
/// process has sent far more than the queue holds), and when the host reads again it gets the
/// first notifications, one that says how many were dropped, and the latest ones.
#[test]
fn the_reference_bridge_keeps_what_it_queues_for_a_host_that_does_not_read_bounded() {
    let exe = exe();
    let mut bridge = Command::new(&exe)
        .args(["bridge", "--", &exe, "testee", "--misbehave", "flood"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = bridge.id();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut stdout = BufReader::new(bridge.stdout.take().unwrap());
    let mut stderr = bridge.stderr.take().unwrap();
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}"#;
    writeln!(stdin, "{init}").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":1"#), "{line}");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    // The host reads nothing while the bridge spends 4 s of CPU time (it takes in the flood all
    // along): work done, not time passed, so a slow machine waits longer.
    let ticks = rustix::param::clock_ticks_per_second();
    let cpu = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let rest = stat.rfind(')').map(|i| &stat[i + 1..]).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let t = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        (t(11) + t(12)) * 1000 / ticks // utime + stime, in ms
    };
    let started = Instant::now();
    let mut hwm = 0;
    while cpu() < 4_000 && started.elapsed() < RUN_LIMIT && hwm < KILL_AT_KB {
        hwm = hwm.max(status_kb(pid, "VmHWM:").unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    }
    hwm = hwm.max(status_kb(pid, "VmHWM:").unwrap_or(0));
    let spent = cpu();
    eprintln!("reference bridge, host not reading: VmHWM {hwm} kB after {spent} ms of CPU, {:?}", started.elapsed());
    let ok = hwm < 100_000 && spent >= 4_000;
    // Now the host reads: the first notifications, then the count of the dropped ones.
    let (mut before, mut marker) = (0, None);
    let mut line = String::new();
    while marker.is_none() && ok {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line.contains("notifications dropped") {
            marker = Some(line.clone());
        } else if line.contains(r#""data":"flood"#) {
            before += 1;
        }
    }
    let _ = bridge.kill();
    let _ = bridge.wait();
    let err = err_t.join().unwrap();
    assert!(spent >= 4_000, "the bridge spent only {spent} ms of CPU in {:?}", started.elapsed());
    assert!(hwm < 100_000, "the bridge's VmHWM reached {hwm} kB with a host that does not read\n{err}");
    let marker = marker.expect("a notification counting the dropped ones");
    assert!(marker.contains(r#""level":"warning""#) && marker.contains("protomcp-conform bridge"), "{marker}");
    // The queue's first part, and what was already on its way (rmcp's buffer, the pipe).
    let b = protomcp_harness::limits::BRIDGE_HOST_QUEUE;
    assert!(before >= b.head_items, "{before} notifications before the count");
    assert!(err.contains("notifications for a host session"), "{err}");
}

/// Peak RSS of this test process so far, in kB.
fn own_hwm() -> u64 {
    status_kb(std::process::id(), "VmHWM:").unwrap_or(0)
}

/// The tests that bound this test process's own peak take turns: the peak is the whole
/// process's, so two at once count each other's buffers (two 96 MiB lines held at once passed
/// 250 MB). Each holds the guard for its whole run and starts with the peak reset to what is
/// resident now (`clear_refs` 5), so it measures only itself and the small tests beside it.
fn own_peak_alone() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    turn
}

/// One line of 110 MB on a bridge's stdout, longer than one message
/// ([`protomcp_harness::limits::MESSAGE_BYTES`]): the host driver drops it as it arrives (keeping
/// its first bytes for the report) and names the flood.
#[test]
fn a_line_longer_than_one_message_is_dropped_as_it_arrives_and_named() {
    let _alone = own_peak_alone();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let argv: Vec<String> =
            ["sh", "-c", "head -c 110000000 /dev/zero | tr '\\0' x; echo; sleep 30"].map(String::from).to_vec();
        let host = protomcp_harness::host::StdioHost::spawn(&argv, &[]).unwrap();
        let deadline = Instant::now() + RUN_LIMIT;
        while host.flood().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let f = host.flood().expect("a flood");
        assert!(f.starts_with("flood: the bridge wrote a line of 110,000,000 bytes on stdout"), "{f}");
        let garbage = host.garbage();
        assert_eq!(garbage.len(), 1, "{garbage:?}");
        assert!(garbage[0].starts_with("xxxx") && garbage[0].ends_with("… (a line of 110,000,000 bytes: dropped)"));
        assert!(host.messages().is_empty());
    });
    // The line is held up to MESSAGE_BYTES (96 MiB) before it is dropped, never whole.
    assert!(own_hwm() < 250_000, "VmHWM {} kB", own_hwm());
}

/// Over HTTP: an event stream whose one event is longer than one message, and a JSON body that
/// is: both dropped as they arrive, noted, and named as a flood.
#[test]
fn over_http_an_event_or_body_longer_than_one_message_is_dropped_as_it_arrives_and_named() {
    let _alone = own_peak_alone();
    use protomcp_harness::host::session::{Arrival, Endpoint, HttpSession};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let big = protomcp_harness::limits::MESSAGE_BYTES + 1_000_000;
        for sse in [true, false] {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = if sse {
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: \"".to_owned()
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n\"",
                        big + 2
                    )
                };
                s.write_all(head.as_bytes()).await.unwrap();
                let chunk = vec![b'x'; 1 << 20];
                let mut sent = 0;
                while sent < big {
                    let n = chunk.len().min(big - sent);
                    if s.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    sent += n;
                }
                let _ = s.write_all(if sse { b"\"\n\n" } else { b"\"" }).await;
            });
            let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
            h.post(b"{}".to_vec()).await.unwrap();
            let deadline = Instant::now() + RUN_LIMIT;
            while h.flood().is_none() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let f = h.flood().expect("a flood");
            let what = if sse { "an event" } else { "a body" };
            assert!(f.starts_with("flood: the bridge sent a response body or event of "), "{f}");
            let ev = h.events();
            assert!(
                ev.iter().any(
                    |e| matches!(e, Arrival::Note { text, .. } if text.starts_with(&format!("{what} of more than")))
                ),
                "{ev:?}"
            );
            assert!(!ev.iter().any(|e| matches!(e, Arrival::Message { .. })), "{ev:?}");
        }
    });
    assert!(own_hwm() < 250_000, "VmHWM {} kB", own_hwm());
}
