//! Latency and throughput benchmark of the reference bridge (issues 5 and 14): a `tools/call`
//! of `echo` to the reference testee, through every path in one run, with the same call mix.
//! Ignored by default; run it with
//!
//! ```text
//! PMCP_BIN=/path/to/protomcp cargo test --release --test testsuite bridge_bench -- --ignored --nocapture
//! ```
//!
//! Paths: the direct socket (the harness's Envelope connection to the testee); the floor, the
//! same Envelopes through a process that only copies bytes ([`relay_process`]): what it adds is
//! what any process in the middle costs on the machine; the reference bridge over stdio (the
//! harness's JSON-RPC host on two pipes) and over Streamable HTTP (a keep-alive client in this
//! file, [`KeepAlive`]), as it runs by default and with `--poll off` (what its polling before
//! sleeping buys, `bridge/src/spin.rs`); and with `PMCP_BIN` set (a pmcp v0.3.0 binary:
//! `harness/bridges/pmcp/install.sh` puts one into `target/pmcp/bin/protomcp` where the module proxy
//! serves it; else a build of upstream's tag that the user made) pmcp over stdio and HTTP,
//! started the way the catalogue's pmcp manifests start it (`run FILE --socket PATH`). Both
//! bridges start the same tool file, a script that runs the reference testee. The bench prints
//! a table and the ratios issue 14 sets as goals, each marked met or not; it asserts no time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use protomcp_bridge::link::{Link, Sink};
use protomcp_bridge::process::ToolProcess;
use protomcp_harness::host::StdioHost;
use protomcp_proto::EnvelopeExt;
use protomcp_proto::envelopes as env;
use protomcp_proto::pb::envelope::Msg;
use serde_json::{Value, json};

use crate::common::{free_port, wait_listening};

const SEQUENTIAL: usize = 3000;
const WARMUP: usize = 300;
const IN_FLIGHT: usize = 16;
const THROUGHPUT_CALLS: usize = 8000;

/// The direct path's side of a link: replies handed to whoever waits for their rid.
#[derive(Default)]
struct Replies {
    waiting: std::sync::Mutex<std::collections::HashMap<String, tokio::sync::oneshot::Sender<Msg>>>,
}

impl Replies {
    /// Sends `envelope` under `rid` and waits for the reply.
    async fn request(&self, link: &Link, rid: String, envelope: protomcp_proto::pb::Envelope) -> Msg {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiting.lock().unwrap().insert(rid.clone(), tx);
        link.send(envelope.with_rid(rid)).unwrap();
        rx.await.expect("a reply")
    }
}

impl Sink for Replies {
    fn envelope(&self, _generation: u64, envelope: protomcp_proto::pb::Envelope) {
        let tx = self.waiting.lock().unwrap().remove(&envelope.request_id);
        if let (Some(tx), Some(msg)) = (tx, envelope.msg) {
            let _ = tx.send(msg);
        }
    }
    fn sideband(&self, _generation: u64, _sideband: protomcp_proto::frame::Sideband) {}
    fn closed(&self, _generation: u64, _reason: String) {}
    fn diag(&self, _line: String) {}
    fn trace(&self, _from_tp: bool, _envelope: &protomcp_proto::pb::Envelope) {}
}

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Stats {
    p50: Duration,
    p99: Duration,
    /// Sequential calls per second (one at a time, back to back).
    seq_per_sec: f64,
    /// Calls per second with [`IN_FLIGHT`] in flight.
    per_sec: f64,
}

fn summarize(mut samples: Vec<Duration>, seq: Duration, per_sec: f64) -> Stats {
    let seq_per_sec = samples.len() as f64 / seq.as_secs_f64();
    samples.sort();
    Stats { p50: percentile(&samples, 0.5), p99: percentile(&samples, 0.99), seq_per_sec, per_sec }
}

/// The Envelope path: the harness's connection to `argv`, which connects to the socket (the
/// reference testee itself, or the copying relay in front of it).
async fn direct(argv: &[String]) -> Stats {
    let mut tp = ToolProcess::spawn(argv, None).unwrap();
    let stream = tp.accept(Duration::from_secs(10)).await.unwrap();
    let replies = Arc::new(Replies::default());
    let link = Link::start(stream, 1, replies.clone());
    let n = std::sync::atomic::AtomicU64::new(0);
    let rid = || format!("b-{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let reply = replies.request(&link, rid(), env::list_tools()).await;
    assert!(matches!(reply, Msg::ToolList(_)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let call = |rid: String| {
        let (link, replies) = (link.clone(), replies.clone());
        async move {
            match replies.request(&link, rid, env::call_tool("echo", r#"{"text":"bench"}"#)).await {
                Msg::CallResult(c) => assert!(!c.is_error),
                other => panic!("{other:?}"),
            }
        }
    };
    let mut samples = Vec::with_capacity(SEQUENTIAL);
    let mut seq = Duration::ZERO;
    for i in 0..WARMUP + SEQUENTIAL {
        let t = Instant::now();
        call(rid()).await;
        if i >= WARMUP {
            samples.push(t.elapsed());
            seq += t.elapsed();
        }
    }
    let start = Instant::now();
    let per_worker = THROUGHPUT_CALLS / IN_FLIGHT;
    let n = Arc::new(std::sync::atomic::AtomicU64::new(1_000_000));
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (link, replies) = (link.clone(), replies.clone());
            let n = n.clone();
            tokio::spawn(async move {
                for _ in 0..per_worker {
                    let rid = format!("t-{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
                    let reply = replies.request(&link, rid, env::call_tool("echo", r#"{"text":"bench"}"#)).await;
                    assert!(matches!(reply, Msg::CallResult(_)));
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let per_sec = (per_worker * IN_FLIGHT) as f64 / start.elapsed().as_secs_f64();
    link.close("done".into());
    tp.terminate().await;
    summarize(samples, seq, per_sec)
}

/// Whether `response` is the echo tool's answer (pmcp leaves out `isError` when false).
fn echoed(response: &Value) -> bool {
    let r = &response["result"];
    r["isError"] != true && r["content"][0]["text"] == "bench"
}

/// A bridge over stdio: the harness's JSON-RPC host on the bridge's stdin/stdout (`argv`).
/// Sequential calls, then [`IN_FLIGHT`] tasks that each wait for their answer before the next
/// call, all on the one pipe pair (the host matches answers to requests by id).
/// `era`: [`Era::Legacy`] initializes a session first; [`Era::Modern`] sends every call as an MCP
/// 2026-07-28 request (its `_meta`, no initialize).
async fn stdio_bridge(argv: &[String], era: Era) -> Stats {
    let host = Arc::new(StdioHost::spawn_with_stderr(argv, &[], std::process::Stdio::null()).unwrap());
    let params = match era {
        Era::Legacy => {
            host.initialize("2025-06-18", json!({})).await.unwrap();
            json!({"name": "echo", "arguments": {"text": "bench"}})
        }
        Era::Modern => json!({"name": "echo", "arguments": {"text": "bench"}, "_meta": MODERN_META.clone()}),
    };
    let mut samples = Vec::with_capacity(SEQUENTIAL);
    let mut seq = Duration::ZERO;
    for i in 0..WARMUP + SEQUENTIAL {
        let t = Instant::now();
        let r = host.request("tools/call", Some(params.clone())).await.unwrap();
        assert!(echoed(&r), "{r}");
        if i >= WARMUP {
            samples.push(t.elapsed());
            seq += t.elapsed();
        }
    }
    let start = Instant::now();
    let per_worker = THROUGHPUT_CALLS / IN_FLIGHT;
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let host = host.clone();
            let params = params.clone();
            tokio::spawn(async move {
                for _ in 0..per_worker {
                    let r = host.request("tools/call", Some(params.clone())).await.unwrap();
                    assert!(echoed(&r), "{r}");
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let per_sec = (per_worker * IN_FLIGHT) as f64 / start.elapsed().as_secs_f64();
    summarize(samples, seq, per_sec)
}

/// Which MCP era the calls of a path are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

static MODERN_META: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
    || json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}),
);

/// One HTTP/1.1 keep-alive connection to a Streamable HTTP endpoint at `/mcp`: each POST is one
/// write, its response is read up to the end of its own framing (`Content-Length` or the last
/// chunk of a chunked body, such as an SSE stream that ends after the answer), and the
/// connection stays open for the next. One request at a time per connection (no pipelining).
struct KeepAlive {
    stream: tokio::net::TcpStream,
    addr: String,
    buf: Vec<u8>,
}

/// One response on a [`KeepAlive`] connection.
struct HttpReply {
    status: u16,
    session: Option<String>,
    body: Vec<u8>,
}

impl HttpReply {
    /// The JSON-RPC message in the body: a JSON body, or the last `data:` line of an event stream.
    fn message(&self) -> Value {
        let text = String::from_utf8_lossy(&self.body);
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            return v;
        }
        let data = text.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).filter(|d| !d.is_empty());
        data.filter_map(|d| serde_json::from_str::<Value>(d).ok()).next_back().unwrap_or(Value::Null)
    }
}

impl KeepAlive {
    async fn connect(addr: std::net::SocketAddr) -> KeepAlive {
        let stream = protomcp_harness::host::http::connect(addr).await.unwrap();
        KeepAlive { stream, addr: addr.to_string(), buf: Vec::new() }
    }

    async fn post(&mut self, session: Option<&str>, body: &str) -> HttpReply {
        self.post_with(session, "", body).await
    }

    /// A POST with more header lines (`extra`, each ending in CRLF).
    async fn post_with(&mut self, session: Option<&str>, extra: &str, body: &str) -> HttpReply {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n{extra}",
            self.addr,
            body.len()
        );
        if let Some(s) = session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.stream.write_all(req.as_bytes()).await.unwrap();
        loop {
            if let Some((reply, used)) = parse_reply(&self.buf) {
                self.buf.drain(..used);
                return reply;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed a keep-alive connection: {:?}", String::from_utf8_lossy(&self.buf));
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A complete response at the start of `raw` and how many bytes it took, or `None` while
/// incomplete.
fn parse_reply(raw: &[u8]) -> Option<(HttpReply, usize)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&raw[..end - 4]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let (mut length, mut chunked, mut session) = (None, false, None);
    for (n, v) in lines.filter_map(|l| l.split_once(':')) {
        let (n, v) = (n.trim().to_ascii_lowercase(), v.trim());
        match n.as_str() {
            "content-length" => length = v.parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            "mcp-session-id" => session = Some(v.to_owned()),
            _ => {}
        }
    }
    let rest = &raw[end..];
    if !chunked {
        let l = length.unwrap_or(0);
        return (rest.len() >= l).then(|| (HttpReply { status, session, body: rest[..l].to_vec() }, end + l));
    }
    let (mut at, mut body) = (0, Vec::new());
    loop {
        let eol = rest[at..].windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&rest[at..at + eol]).split(';').next()?.trim(), 16).ok()?;
        at += eol + 2;
        if size == 0 {
            // The last chunk, then the (empty) trailer section.
            let trailer = rest[at..].windows(2).position(|w| w == b"\r\n")?;
            return Some((HttpReply { status, session, body }, end + at + trailer + 2));
        }
        if rest.len() < at + size + 2 {
            return None;
        }
        body.extend_from_slice(&rest[at..at + size]);
        at += size + 2;
    }
}

/// A bridge over Streamable HTTP: `argv` (with its port) started, one session initialized,
/// [`SEQUENTIAL`] calls on one keep-alive connection, then [`IN_FLIGHT`] keep-alive connections
/// of the same session, each a task that sends its next call when the answer to its last one
/// arrived (HTTP/1.1 answers in order on a connection, so 16 in flight takes 16 connections).
/// In [`Era::Modern`] nothing is initialized: every call is a POST of its own without a session,
/// with the headers of spec §26.7.
async fn http_bridge(argv: &[String], port: u16, era: Era) -> Stats {
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr, Duration::from_secs(20)).await;
    let mut conn = KeepAlive::connect(addr).await;
    let session = match era {
        Era::Modern => None,
        Era::Legacy => {
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
            let r = conn.post(None, &init.to_string()).await;
            assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
            assert!(r.message()["result"]["protocolVersion"].is_string(), "{}", r.message());
            let session = r.session.clone();
            let r = conn.post(session.as_deref(), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
            assert!(r.status == 202 || r.status == 200, "{}", r.status);
            session
        }
    };
    let extra = match era {
        Era::Modern => "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
        Era::Legacy => "",
    };
    let call = move |id: u64| {
        let mut params = json!({"name": "echo", "arguments": {"text": "bench"}});
        if era == Era::Modern {
            params["_meta"] = MODERN_META.clone();
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    };
    let check = |r: &HttpReply, id: u64| {
        let m = r.message();
        assert!(r.status == 200 && m["id"] == id && echoed(&m), "{} {m}", r.status);
    };
    let mut samples = Vec::with_capacity(SEQUENTIAL);
    let mut seq = Duration::ZERO;
    for i in 0..WARMUP + SEQUENTIAL {
        let id = i as u64 + 1;
        let t = Instant::now();
        let r = conn.post_with(session.as_deref(), extra, &call(id)).await;
        check(&r, id);
        if i >= WARMUP {
            samples.push(t.elapsed());
            seq += t.elapsed();
        }
    }
    let per_worker = THROUGHPUT_CALLS / IN_FLIGHT;
    let mut conns = Vec::with_capacity(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        conns.push(KeepAlive::connect(addr).await);
    }
    let start = Instant::now();
    let workers: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(w, mut conn)| {
            let session = session.clone();
            tokio::spawn(async move {
                for k in 0..per_worker {
                    let id = 1_000_000 + (w * per_worker + k) as u64;
                    let r = conn.post_with(session.as_deref(), extra, &call(id)).await;
                    check(&r, id);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let per_sec = (per_worker * IN_FLIGHT) as f64 / start.elapsed().as_secs_f64();
    let _ = child.start_kill();
    let _ = child.wait().await;
    summarize(samples, seq, per_sec)
}

/// The floor path's relay, started by the benchmark as a process of its own (this test binary,
/// filtered to this test): it connects to the benchmark's socket, starts the reference testee on
/// a socket of its own and copies bytes both ways, doing nothing else. The difference between
/// this path and the direct one is what any bridge process in the middle costs on this machine
/// (two more process wake-ups and copies per call), before it does any work.
#[test]
#[ignore = "the relay process of bridge_latency_benchmark; does nothing unless started by it"]
fn relay_process() {
    use std::os::unix::net::{UnixListener, UnixStream};
    let Some(up) = std::env::var_os("PROTOMCP_SOCKET") else { return };
    if !std::env::args().any(|a| a == "bridge_bench::relay_process") {
        return;
    }
    // Beside the benchmark's socket, in the directory the benchmark removes.
    let down_path = std::path::Path::new(&up).with_file_name("relay-testee.sock");
    let listener = UnixListener::bind(&down_path).unwrap();
    let mut testee = std::process::Command::new(bin())
        .arg("testee")
        .env("PROTOMCP_SOCKET", &down_path)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (down, _) = listener.accept().unwrap();
    let up = UnixStream::connect(up).unwrap();
    let (mut up_r, mut up_w) = (up.try_clone().unwrap(), up);
    let (mut down_r, mut down_w) = (down.try_clone().unwrap(), down);
    let to_testee = std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_r, &mut down_w);
        let _ = down_w.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut down_r, &mut up_w);
    let _ = testee.kill();
    let _ = testee.wait();
    let _ = to_testee.join();
}

fn relay_argv() -> Vec<String> {
    let me = std::env::current_exe().unwrap().display().to_string();
    [me.as_str(), "bridge_bench::relay_process", "--exact", "--ignored", "--nocapture", "-q"]
        .map(str::to_owned)
        .to_vec()
}

/// A private directory for the bench's sockets and the testee's entry file; removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let d = std::env::temp_dir().join(format!("bridge-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    /// An executable without extension that runs the reference testee: the tool file both
    /// bridges start (pmcp runs such a file as it is, like the catalogue's `{mock}`).
    fn testee(&self) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.0.join("testee");
        std::fs::write(&p, format!("#!/bin/sh\nexec '{}' testee \"$@\"\n", bin())).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn strs(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_owned()).collect()
}

/// "met" / "NOT met" for a ratio against its goal.
fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

/// Below this an added p50 is within the run-to-run noise of the direct path's own p50 (which
/// moves by tens of µs between runs here): a ratio to it means nothing.
const MEASURABLE_US: f64 = 5.0;

/// One goal on added p50 latencies: `ours / theirs` at most `goal`. "Nothing measurable" is a
/// p50 less than [`MEASURABLE_US`] above the direct path's. When `ours` added nothing
/// measurable (the polling bridge is awake when its peers answer, where the direct path's
/// client sleeps) the goal is met whatever `theirs`; otherwise, when `theirs` added nothing
/// measurable (on an idle VM the direct path's wake-ups can cost more than a process in the
/// middle), the ratio means nothing.
fn added_goal(what: &str, ours: f64, theirs: f64, goal: f64) {
    if ours < MEASURABLE_US {
        println!(
            "goal: {what} = {ours:.1} / {theirs:.1} (≤ {goal}): met (ours added nothing measurable over the direct path)"
        );
        return;
    }
    if theirs < MEASURABLE_US {
        println!(
            "goal: {what} = {ours:.1} / {theirs:.1} (≤ {goal}): not determined in this run (the denominator added nothing measurable)"
        );
        return;
    }
    let x = ours / theirs;
    println!("goal: {what} = {ours:.1} / {theirs:.1} = {x:.2} (≤ {goal}): {}", verdict(x <= goal));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
async fn bridge_latency_benchmark() {
    let scratch = Scratch::new();
    let testee = scratch.testee();
    let me = bin();
    let pmcp = std::env::var("PMCP_BIN").ok().filter(|p| !p.is_empty());
    let mut rows: Vec<(String, Stats)> = Vec::new();
    rows.push(("direct socket".into(), direct(&[me.clone(), "testee".into()]).await));
    rows.push(("copy-only relay (floor)".into(), direct(&relay_argv()).await));
    let sock = scratch.path("ref.sock");
    // The reference bridge as it runs by default (polling before it sleeps: `bridge --poll`),
    // then without polling: what the polling buys.
    for (label, poll) in [("", &[][..]), (", --poll off", &["--poll", "off"][..])] {
        let argv = [&[me.as_str(), "bridge"][..], poll, &["--socket", &sock, "--", &testee]].concat();
        rows.push((format!("reference, stdio{label}"), stdio_bridge(&strs(&argv), Era::Legacy).await));
        let port = free_port();
        let p = port.to_string();
        let http = ["--transport", "http", "--host", "127.0.0.1", "--port", &p, "--socket", &sock, "--", &testee];
        let argv = [&[me.as_str(), "bridge"][..], poll, &http].concat();
        rows.push((format!("reference, HTTP{label}"), http_bridge(&strs(&argv), port, Era::Legacy).await));
    }
    // MCP 2026-07-28: every call a request of its own (issue 30).
    let argv = [me.as_str(), "bridge", "--socket", &sock, "--", &testee];
    rows.push(("reference, stdio, 2026-07-28".into(), stdio_bridge(&strs(&argv), Era::Modern).await));
    let port = free_port();
    let p = port.to_string();
    let http = ["--transport", "http", "--host", "127.0.0.1", "--port", &p, "--socket", &sock, "--", &testee];
    let argv = [&[me.as_str(), "bridge"][..], &http].concat();
    rows.push(("reference, HTTP, 2026-07-28".into(), http_bridge(&strs(&argv), port, Era::Modern).await));
    if let Some(pmcp) = &pmcp {
        let sock = scratch.path("pmcp.sock");
        let argv = strs(&[pmcp, "run", &testee, "--socket", &sock]);
        rows.push(("pmcp, stdio".into(), stdio_bridge(&argv, Era::Legacy).await));
        let port = free_port();
        let p = port.to_string();
        let argv = strs(&[
            pmcp,
            "run",
            &testee,
            "--socket",
            &sock,
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            &p,
        ]);
        rows.push(("pmcp, HTTP".into(), http_bridge(&argv, port, Era::Legacy).await));
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let direct_p50 = us(rows[0].1.p50);
    let added = |name: &str| rows.iter().find(|(n, _)| n == name).map(|(_, s)| us(s.p50) - direct_p50);
    let stat = |name: &str| rows.iter().find(|(n, _)| n == name).map(|(_, s)| s);

    println!(
        "tools/call echo, reference testee behind every path; {SEQUENTIAL} sequential calls after {WARMUP} warm-up \
         (p50, p99, sequential calls/s), then {THROUGHPUT_CALLS} calls with {IN_FLIGHT} in flight"
    );
    println!(
        "HTTP: one keep-alive connection for the sequential calls; {IN_FLIGHT} keep-alive connections of the same session, one call in flight on each, for the throughput"
    );
    println!(
        "{:<32} {:>9} {:>9} {:>12} {:>14} {:>15}",
        "path", "p50 µs", "p99 µs", "seq calls/s", "calls/s @16", "added p50 µs"
    );
    for (name, s) in &rows {
        println!(
            "{:<32} {:>9.1} {:>9.1} {:>12.0} {:>14.0} {:>15.1}",
            name,
            us(s.p50),
            us(s.p99),
            s.seq_per_sec,
            s.per_sec,
            us(s.p50) - direct_p50
        );
    }
    for t in ["stdio", "HTTP"] {
        let (l, m) = (stat(&format!("reference, {t}")).unwrap(), stat(&format!("reference, {t}, 2026-07-28")).unwrap());
        let x = l.per_sec / m.per_sec;
        println!(
            "goal: {t} cost of a 2026-07-28 tools/call / a legacy one (calls/s @{IN_FLIGHT} legacy / modern) = {:.0} / {:.0} = {x:.2} (≤ 1.2): {}",
            l.per_sec,
            m.per_sec,
            verdict(x <= 1.2)
        );
        let (la, ma) =
            (added(&format!("reference, {t}")).unwrap(), added(&format!("reference, {t}, 2026-07-28")).unwrap());
        println!("  added p50: legacy {la:.1} µs, 2026-07-28 {ma:.1} µs");
    }
    let relay = added("copy-only relay (floor)").unwrap();
    for t in ["stdio", "HTTP"] {
        let r = added(&format!("reference, {t}")).unwrap();
        added_goal(&format!("reference {t} added p50 / relay added p50"), r, relay, 1.5);
    }
    if pmcp.is_none() {
        println!("pmcp: not run (set PMCP_BIN to a pmcp v0.3.0 binary)");
        return;
    }
    for t in ["stdio", "HTTP"] {
        let (r, p) = (stat(&format!("reference, {t}")).unwrap(), stat(&format!("pmcp, {t}")).unwrap());
        let x = r.per_sec / p.per_sec;
        println!(
            "goal: {t} calls/s @{IN_FLIGHT} reference / pmcp = {:.0} / {:.0} = {x:.2} (≥ 3.0): {}",
            r.per_sec,
            p.per_sec,
            verdict(x >= 3.0)
        );
        let (ra, pa) = (added(&format!("reference, {t}")).unwrap(), added(&format!("pmcp, {t}")).unwrap());
        added_goal(&format!("{t} added p50 reference / pmcp"), ra, pa, 0.3);
    }
    let (m, p) = (stat("reference, HTTP, 2026-07-28").unwrap(), stat("pmcp, HTTP").unwrap());
    let x = m.per_sec / p.per_sec;
    println!(
        "goal: HTTP calls/s @{IN_FLIGHT} reference 2026-07-28 / pmcp legacy = {:.0} / {:.0} = {x:.2} (≥ 3.0): {}",
        m.per_sec,
        p.per_sec,
        verdict(x >= 3.0)
    );
    let (r, p) = (stat("reference, HTTP").unwrap(), stat("pmcp, HTTP").unwrap());
    let x = r.seq_per_sec / p.seq_per_sec;
    println!(
        "goal: HTTP keep-alive sequential calls/s reference / pmcp = {:.0} / {:.0} = {x:.2} (≥ 2.0): {}",
        r.seq_per_sec,
        p.seq_per_sec,
        verdict(x >= 2.0)
    );
}
