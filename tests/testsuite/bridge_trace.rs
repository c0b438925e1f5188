//! `protomcp-conform bridge --trace FILE` over stdio against the reference testee: the trace
//! holds both sides in the transcript line format, in order, written as it happens, and the
//! harness reads it back and normalizes it.

use std::time::Duration;

use protomcp_harness::host::StdioHost;
use protomcp_harness::transcript::{self, Dir, Item};
use serde_json::{Value, json};

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// The position of the first item after `from` that `pred` accepts.
fn find(items: &[Item], from: usize, what: &str, pred: impl Fn(&Item) -> bool) -> usize {
    match items.iter().skip(from).position(pred) {
        Some(i) => from + i,
        None => panic!("no {what} after item {from} in {items:#?}"),
    }
}

fn host_method(item: &Item, dir: Dir, method: &str) -> bool {
    matches!(item, Item::Host { dir: d, message: Some(m), .. } if *d == dir && m["method"] == method)
}

fn host_result_with(item: &Item, pred: impl Fn(&Value) -> bool) -> bool {
    matches!(item, Item::Host { dir: Dir::FromTestee, message: Some(m), .. } if m.get("result").is_some_and(&pred))
}

/// A frame between the bridge and the tool process with this arm; `to_tp`: the bridge sent it.
fn frame_arm(item: &Item, to_tp: bool, arm: &str) -> Option<Value> {
    let want = if to_tp { Dir::FromTestee } else { Dir::ToTestee };
    match item {
        Item::Frame { dir, tree: Some(t), .. } if *dir == want && t.get(arm).is_some() => Some(t.clone()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_holds_both_sides_in_order_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.trace");
    let argv: Vec<String> = vec![
        bin(),
        "bridge".into(),
        "--call-timeout".into(),
        "5s".into(),
        "--trace".into(),
        path.to_string_lossy().into_owned(),
        "--".into(),
        bin(),
        "testee".into(),
    ];
    let mut host = StdioHost::spawn(&argv, &[]).expect("bridge starts");
    let init = host.initialize("2025-06-18", json!({})).await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    let list = host.request("tools/list", None).await.unwrap();
    assert!(list["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{list}");
    let call =
        host.request("tools/call", Some(json!({"name": "echo", "arguments": {"text": "traced"}}))).await.unwrap();
    assert_eq!(call["result"]["content"][0]["text"], "traced", "{call}");
    host.send_line("this is not json");
    let garbage = host.request("ping", None).await.unwrap();
    assert!(garbage.get("result").is_some(), "{garbage}");

    // Written as it happens: everything is in the file while the bridge still runs.
    let text = std::fs::read_to_string(&path).unwrap();
    let items = transcript::read(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));

    // The tool process connects, then the handshake: ListToolsRequest out, ToolListResponse in.
    assert_eq!(items[0], Item::Connected, "{text}");
    let lt = find(&items, 0, "ListToolsRequest", |i| frame_arm(i, true, "list_tools").is_some());
    let lt_rid = frame_arm(&items[lt], true, "list_tools").unwrap()["request_id"].clone();
    let tl = find(&items, lt, "its tool list", |i| {
        frame_arm(i, false, "tool_list").is_some_and(|t| t["request_id"] == lt_rid)
    });

    // The host side, in order, after the handshake.
    let init_req = find(&items, tl, "initialize", |i| host_method(i, Dir::ToTestee, "initialize"));
    let init_resp = find(&items, init_req, "the initialize result", |i| {
        host_result_with(i, |r| r.get("protocolVersion").is_some())
    });
    let initialized =
        find(&items, init_resp, "initialized", |i| host_method(i, Dir::ToTestee, "notifications/initialized"));
    let list_req = find(&items, initialized, "tools/list", |i| host_method(i, Dir::ToTestee, "tools/list"));
    let list_resp = find(&items, list_req, "the tools/list result", |i| host_result_with(i, |r| r["tools"].is_array()));
    let call_req = find(&items, list_resp, "tools/call", |i| host_method(i, Dir::ToTestee, "tools/call"));

    // tools/call crosses to the tool process and back, between the host's request and response.
    let out = find(&items, call_req, "CallToolRequest", |i| frame_arm(i, true, "call_tool").is_some());
    let out_tree = frame_arm(&items[out], true, "call_tool").unwrap();
    assert_eq!(out_tree["call_tool"]["name"], "echo");
    let args: Value = serde_json::from_str(out_tree["call_tool"]["arguments_json"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"text": "traced"}));
    let rid = out_tree["request_id"].clone();
    assert!(rid.as_str().is_some_and(|r| !r.is_empty()), "the trace keeps the real rid: {rid}");
    let back = find(&items, out, "CallToolResponse", |i| {
        frame_arm(i, false, "call_result").is_some_and(|t| t["request_id"] == rid)
    });
    let call_resp =
        find(&items, back, "the tools/call result", |i| host_result_with(i, |r| r["content"][0]["text"] == "traced"));

    // A line that is not JSON is kept as it was, and answered with a parse error.
    let raw = find(
        &items,
        call_resp,
        "the raw line",
        |i| matches!(i, Item::Host { dir: Dir::ToTestee, message: None, raw: Some(r) } if r == "this is not json"),
    );
    find(
        &items,
        raw,
        "the parse error",
        |i| matches!(i, Item::Host { dir: Dir::FromTestee, message: Some(m), .. } if m["error"]["code"] == -32700),
    );

    // The harness normalizes a trace like a scenario's transcript.
    let normalized = transcript::render(&items);
    assert!(normalized.contains("testee→harness {\"list_tools\":{},\"request_id\":\"[ID:1]\"}\n"), "{normalized}");
    assert!(normalized.contains("\"arguments_json\":{\"text\":\"traced\"}"), "{normalized}");

    // The tool connection ending is recorded when the bridge stops.
    host.close(Duration::from_secs(5)).await.expect("the bridge exits after end-of-file");
    let items = transcript::read(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(matches!(items.last(), Some(Item::Shutdown { .. })), "{:?}", items.last());
}

/// Over Streamable HTTP the trace records each host request and its answer as the JSON-RPC
/// messages they were, with their ids, around the frames of the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_over_http_keeps_jsonrpc_ids() {
    use protomcp_harness::host::http::HttpHost;
    use std::net::{Ipv4Addr, SocketAddr};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.trace");
    let port = crate::common::free_port();
    let mut child = tokio::process::Command::new(bin())
        .args(["bridge", "--transport", "http", "--port", &port.to_string(), "--call-timeout", "5s", "--trace"])
        .arg(&path)
        .args(["--", &bin(), "testee"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    crate::common::wait_listening(addr, Duration::from_secs(10)).await;
    let mut host = HttpHost::new(addr, None);
    host.initialize().await.unwrap();
    let r = host.call(41, "tools/call", json!({"name": "echo", "arguments": {"text": "over http"}})).await.unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "over http", "{r}");

    let text = std::fs::read_to_string(&path).unwrap();
    let items = transcript::read(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let req = find(&items, 0, "tools/call with id 41", |i| {
        matches!(i, Item::Host { dir: Dir::ToTestee, message: Some(m), .. }
            if m["method"] == "tools/call" && m["id"] == 41 && m["jsonrpc"] == "2.0")
    });
    let out = find(&items, req, "CallToolRequest", |i| frame_arm(i, true, "call_tool").is_some());
    find(&items, out, "the answer to id 41", |i| {
        matches!(i, Item::Host { dir: Dir::FromTestee, message: Some(m), .. }
            if m["id"] == 41 && m["result"]["content"][0]["text"] == "over http")
    });
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}
