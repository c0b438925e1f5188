//! HTTP sessions of the reference bridge end: DELETE ends a session at once and cancels its
//! calls in flight at the tool process (BR-HTTP-12, BR-CANCEL-06); a session idle for
//! `--session-idle` is ended (BR-HTTP-26); both answer 404 afterwards.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use protomcp_harness::host::http::{HttpHost, request};
use serde_json::json;
use tokio::process::{Child, Command};

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// The bridge over HTTP on a free loopback port in front of the reference testee, listening.
async fn start(extra: &[&str], trace: &Path) -> (Child, SocketAddr) {
    let port = crate::common::free_port();
    let child = Command::new(bin())
        .args(["bridge", "--transport", "http", "--port", &port.to_string(), "--call-timeout", "10s"])
        .args(["--trace", trace.to_str().unwrap()])
        .args(extra)
        .args(["--", &bin(), "testee"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    crate::common::wait_listening(addr, Duration::from_secs(10)).await;
    (child, addr)
}

/// Whether the trace shows a CancelRequest sent to the tool process.
fn cancel_sent(trace: &Path) -> bool {
    let t = std::fs::read_to_string(trace).unwrap_or_default();
    t.lines().any(|l| l.starts_with("testee→harness ") && l.contains("\"cancel\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_the_session_and_cancels_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    let (_child, addr) = start(&[], &trace).await;
    let mut host = HttpHost::new(addr, None);
    host.initialize().await.unwrap();
    let sid = host.session.clone().unwrap();
    // A call of 30 × 100 ms, in flight when the session is deleted.
    let caller = HttpHost { session: Some(sid.clone()), ..HttpHost::new(addr, None) };
    let call =
        tokio::spawn(
            async move { caller.call(2, "tools/call", json!({"name": "slow", "arguments": {"steps": 30}})).await },
        );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!cancel_sent(&trace));
    let deleted = Instant::now();
    let r = request(addr, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"", Duration::from_secs(5)).await.unwrap();
    assert!((200..300).contains(&r.status), "DELETE: {}", r.status);
    // CancelRequest at once, not when the call would have ended (2.5 s after DELETE) or timed
    // out; 2 s leaves a busy machine its slack.
    while !cancel_sent(&trace) {
        assert!(deleted.elapsed() < Duration::from_secs(2), "no CancelRequest within 2 s of DELETE");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), call).await;
    // BR-HTTP-12: the id is gone.
    let r = host.post(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await.unwrap();
    assert_eq!(r.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    let (_child, addr) = start(&["--session-idle", "1s"], &trace).await;
    let mut host = HttpHost::new(addr, None);
    host.initialize().await.unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    // Requests keep it alive.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(host.post(&ping).await.unwrap().status, 200);
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(host.post(&ping).await.unwrap().status, 404);
    // Another session still starts.
    let mut other = HttpHost::new(addr, None);
    other.initialize().await.unwrap();
    assert_eq!(other.post(&ping).await.unwrap().status, 200);
}
