//! The reference bridge's polling before it sleeps (`bridge --poll`,
//! harness/src/bridge/spin.rs), seen from outside on both transports: with the hidden switch
//! [`POLL_STATS`] the bridge says at exit how many of its windows it polled and how many were
//! answered while it polled. The windows here are 5 s, longer than any answer of the reference
//! testee or of this host, so every window the bridge polls is answered while it polls; what
//! is checked is that both sides of each transport open and close windows (the unit tests in
//! `spin.rs` check the polling itself).

use std::process::Stdio;
use std::time::Duration;

use protomcp_harness::bridge::POLL_STATS;
use protomcp_harness::host::StdioHost;
use protomcp_harness::host::http::HttpHost;
use serde_json::json;

const CALLS: u64 = 30;

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// (polled, answered while polling) from the bridge's stderr.
fn stats(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("poll windows:"))
        .unwrap_or_else(|| panic!("no poll windows line on the bridge's stderr:\n{stderr}"));
    let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect();
    (n[0], n[1])
}

async fn over_stdio(poll: &str) -> (u64, u64) {
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

async fn over_http(poll: &str) -> (u64, u64) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_bridge_polls_for_the_answers_of_the_tool_process_and_the_host_and_never_with_poll_off() {
    let (polled, caught) = over_stdio("5s").await;
    // Two windows a call (the tool process's answer, the host's next request), less the few a
    // busy machine lets close before the poller looks: more than one a call, so that the
    // host's side must count (without it: 32 for 30 calls).
    assert!(caught >= CALLS * 4 / 3 && caught <= polled, "{polled} polled, {caught} answered while polling");
    assert_eq!(over_stdio("off").await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_the_bridge_polls_for_the_answers_of_the_tool_process_and_the_host_and_never_with_poll_off() {
    let (polled, caught) = over_http("5s").await;
    assert!(caught >= CALLS * 4 / 3 && caught <= polled, "{polled} polled, {caught} answered while polling");
    assert_eq!(over_http("off").await, (0, 0));
}
