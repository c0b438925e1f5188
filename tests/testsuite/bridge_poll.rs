//! The reference bridge's polling before it sleeps (`bridge --poll`,
//! bridge/src/spin.rs), seen from outside on both transports: with the hidden switch
//! [`POLL_STATS`] the bridge says at exit how many windows it opened, how many of them it
//! polled and how many were answered while it polled. What is checked is that both sides of
//! each transport open their windows: one for the tool process's answer and one for the host's
//! next request, each call. How many windows opened depends only on the traffic, so that count
//! is what the test holds the bridge to. Which windows get polled depends on scheduling too: a
//! window whose answer is already in the socket when the bridge's thread comes back to it
//! closes before the poller runs, and on a machine running the whole testsuite that was more
//! than 20 of 64 (CI missed a threshold of 40 caught; beside busy loops here, 1 to 21). So of the polling this test asks only that it happened at all; the
//! unit tests in `spin.rs` check the polling itself, on a runtime they control.

use std::process::Stdio;
use std::time::Duration;

use protomcp_bridge::POLL_STATS;
use protomcp_harness::host::StdioHost;
use protomcp_harness::host::http::HttpHost;
use serde_json::json;

const CALLS: u64 = 30;

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// (opened, polled, answered while polling) from the bridge's stderr.
fn stats(stderr: &str) -> (u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("poll windows:"))
        .unwrap_or_else(|| panic!("no poll windows line on the bridge's stderr:\n{stderr}"));
    let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect();
    (n[0], n[1], n[2])
}

async fn over_stdio(poll: &str) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let err = dir.path().join("stderr");
    let argv: Vec<String> =
        [bin().as_str(), "bridge", "--poll", poll, "--", &bin(), "testee"].iter().map(|s| (*s).to_owned()).collect();
    let stderr = Stdio::from(std::fs::File::create(&err).unwrap());
    let mut host = StdioHost::spawn_with_stderr(&argv, &[(POLL_STATS.into(), "1".into())], stderr).unwrap();
    host.initialize("2025-06-18", json!({})).await.unwrap();
    for i in 0..CALLS {
        let r = host
            .request("tools/call", Some(json!({"name": "echo", "arguments": {"text": format!("c{i}")}})))
            .await
            .unwrap();
        assert_eq!(r["result"]["content"][0]["text"], format!("c{i}"), "{r}");
    }
    let status = host.close(Duration::from_secs(10)).await.expect("the bridge exits after end-of-file");
    assert_eq!(status.code(), Some(0));
    stats(&std::fs::read_to_string(&err).unwrap())
}

async fn over_http(poll: &str) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let err = dir.path().join("stderr");
    let port = crate::common::free_port();
    let mut child = tokio::process::Command::new(bin())
        .args(["bridge", "--transport", "http", "--port", &port.to_string(), "--poll", poll, "--"])
        .args([bin().as_str(), "testee"])
        .env(POLL_STATS, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    crate::common::wait_listening(addr, Duration::from_secs(10)).await;
    let mut host = HttpHost::new(addr, None);
    host.initialize().await.unwrap();
    for i in 0..CALLS {
        let params = json!({"name": "echo", "arguments": {"text": format!("c{i}")}});
        let r = host.call(100 + i as i64, "tools/call", params).await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], format!("c{i}"), "{r}");
    }
    protomcp_harness::os::signal_process(child.id().unwrap() as i32, libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("exits on SIGTERM").unwrap();
    assert!(status.success(), "{status}");
    stats(&std::fs::read_to_string(&err).unwrap())
}

/// The counts of a run with 1 s windows, longer than any answer here, against what the traffic
/// alone decides: two windows a call at least (initialize and its notification add a few),
/// never more polled than opened nor more answered than polled, and the poller ran.
fn judge((opened, polled, caught): (u64, u64, u64)) {
    let said = format!("{opened} opened, {polled} polled, {caught} answered while polling");
    eprintln!("poll windows: {said}");
    assert!((2 * CALLS..=2 * CALLS + 8).contains(&opened), "{said}");
    assert!(caught <= polled && polled <= opened, "{said}");
    // Of 60 windows, each spanning a round trip through another process, one at least finds
    // the poller running; without the poller (or on the wrong runtime) none does.
    assert!(caught >= 1, "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_bridge_opens_a_window_for_both_peers_each_call_and_none_with_poll_off() {
    judge(over_stdio("1s").await);
    assert_eq!(over_stdio("off").await, (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_the_bridge_opens_a_window_for_both_peers_each_call_and_none_with_poll_off() {
    judge(over_http("1s").await);
    assert_eq!(over_http("off").await, (0, 0, 0));
}

#[test]
fn a_window_longer_than_a_second_is_refused_with_the_reason() {
    let out = std::process::Command::new(bin())
        .args(["bridge", "--poll", "2s", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--poll") && err.contains("at most 1s"), "{err}");
}
