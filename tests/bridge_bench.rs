//! Latency benchmark of the reference bridge (issue 5): a `tools/call` of `echo` through the
//! bridge over stdio, against the same call sent directly over the socket to the same testee.
//! Ignored by default; run it with
//!
//! ```text
//! cargo test --release --test bridge_bench -- --ignored --nocapture
//! ```
//!
//! Both paths include their client: the direct path the harness's Envelope connection, the
//! bridge path the hand-rolled JSON-RPC host (JSON encode/decode, two pipes). A third path, the
//! floor, sends the direct path's Envelopes through a process that only copies bytes
//! ([`relay_process`]): what it adds is what any process in the middle costs on the machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use protomcp_harness::bridge::link::{Dispatch, Link};
use protomcp_harness::bridge::process::ToolProcess;
use protomcp_harness::bridge::state::ToolOp;
use protomcp_harness::host::StdioHost;
use protomcp_proto::EnvelopeExt;
use protomcp_proto::envelopes as env;
use protomcp_proto::pb::{self, Envelope, envelope::Msg};
use serde_json::json;

const SEQUENTIAL: usize = 3000;
const WARMUP: usize = 300;
const IN_FLIGHT: usize = 16;
const THROUGHPUT_CALLS: usize = 8000;

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

struct Quiet;

impl Dispatch for Quiet {
    fn control(&self, _op: &ToolOp) -> Vec<String> {
        Vec::new()
    }
    fn progress(&self, _p: pb::ProgressNotification) {}
    fn log(&self, _l: pb::LogMessage) {}
    fn resource_changed(&self, _uri: String) {}
    fn reverse(&self, _link: Arc<Link>, _rid: String, _msg: Msg) {}
    fn diag(&self, _line: String) {}
    fn trace(&self, _from_tp: bool, _envelope: &Envelope) {}
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Stats {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

fn summarize(mut samples: Vec<Duration>, per_sec: f64) -> Stats {
    samples.sort();
    Stats { p50: percentile(&samples, 0.5), p99: percentile(&samples, 0.99), per_sec }
}

/// The Envelope path: the harness's connection to `argv`, which connects to the socket (the
/// reference testee itself, or the copying relay in front of it).
async fn direct(argv: &[String]) -> Stats {
    let mut tp = ToolProcess::spawn(argv, None).unwrap();
    let stream = tp.accept(Duration::from_secs(10)).await.unwrap();
    let (link, _hs) = Link::start(stream, 1, Arc::new(Quiet));
    let n = std::sync::atomic::AtomicU64::new(0);
    let rid = || format!("b-{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let r = rid();
    let reply = link.request(&r, env::list_tools().with_rid(r.clone())).await.unwrap().unwrap();
    assert!(matches!(reply, Msg::ToolList(_)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let call = |link: &Link, rid: String| {
        let rx = link.request(&rid, env::call_tool("echo", r#"{"text":"bench"}"#).with_rid(rid.clone()));
        async move {
            match rx.await.unwrap().unwrap() {
                Msg::CallResult(c) => assert!(!c.is_error),
                other => panic!("{other:?}"),
            }
        }
    };
    let mut samples = Vec::with_capacity(SEQUENTIAL);
    for i in 0..WARMUP + SEQUENTIAL {
        let t = Instant::now();
        call(&link, rid()).await;
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    let start = Instant::now();
    let per_worker = THROUGHPUT_CALLS / IN_FLIGHT;
    let n = Arc::new(std::sync::atomic::AtomicU64::new(1_000_000));
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let link = link.clone();
            let n = n.clone();
            tokio::spawn(async move {
                for _ in 0..per_worker {
                    let rid = format!("t-{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
                    let rx = link.request(&rid, env::call_tool("echo", r#"{"text":"bench"}"#).with_rid(rid.clone()));
                    assert!(matches!(rx.await.unwrap().unwrap(), Msg::CallResult(_)));
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
    summarize(samples, per_sec)
}

async fn through_bridge() -> Stats {
    let argv = [bin(), "bridge".into(), "--".into(), bin(), "testee".into()];
    let host = Arc::new(StdioHost::spawn(&argv, &[]).unwrap());
    host.initialize("2025-06-18", json!({})).await.unwrap();
    let params = json!({"name": "echo", "arguments": {"text": "bench"}});
    let mut samples = Vec::with_capacity(SEQUENTIAL);
    for i in 0..WARMUP + SEQUENTIAL {
        let t = Instant::now();
        let r = host.request("tools/call", Some(params.clone())).await.unwrap();
        assert_eq!(r["result"]["isError"], false, "{r}");
        if i >= WARMUP {
            samples.push(t.elapsed());
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
                    assert_eq!(r["result"]["isError"], false);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let per_sec = (per_worker * IN_FLIGHT) as f64 / start.elapsed().as_secs_f64();
    summarize(samples, per_sec)
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
    if !std::env::args().any(|a| a == "relay_process") {
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
    [me.as_str(), "relay_process", "--exact", "--ignored", "--nocapture", "-q"].map(str::to_owned).to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
async fn bridge_latency_benchmark() {
    let d = direct(&[bin(), "testee".into()]).await;
    let b = through_bridge().await;
    let r = direct(&relay_argv()).await;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "tools/call echo, {SEQUENTIAL} sequential calls after {WARMUP} warm-up; throughput with {IN_FLIGHT} in flight"
    );
    println!("{:<16} {:>10} {:>10} {:>14}", "path", "p50 µs", "p99 µs", "calls/s @16");
    println!("{:<16} {:>10.1} {:>10.1} {:>14.0}", "direct socket", us(d.p50), us(d.p99), d.per_sec);
    println!("{:<16} {:>10.1} {:>10.1} {:>14.0}", "through bridge", us(b.p50), us(b.p99), b.per_sec);
    println!(
        "added at p50: {:.1} µs; ratios bridge/direct: p50 {:.2}, p99 {:.2}, throughput {:.2}",
        us(b.p50) - us(d.p50),
        us(b.p50) / us(d.p50),
        us(b.p99) / us(d.p99),
        b.per_sec / d.per_sec
    );
    println!(
        "floor: through a process that only copies bytes (relay_process): p50 {:.1} µs, p99 {:.1} µs, {:.0} calls/s @16; \
         it adds {:.1} µs at p50, the bridge {:.1} µs more than that",
        us(r.p50),
        us(r.p99),
        r.per_sec,
        us(r.p50) - us(d.p50),
        us(b.p50) - us(r.p50)
    );
}
