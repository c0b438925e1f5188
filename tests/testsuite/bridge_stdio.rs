//! The reference bridge over stdio, driven by the harness's hand-rolled MCP host against the
//! reference testee (`protomcp-conform testee`).

use std::path::Path;
use std::time::Duration;

use protomcp_harness::host::StdioHost;
use serde_json::{Value, json};

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// A bridge over `tool` (argv), with a 5 s call timeout and the given extra flags.
fn spawn(extra: &[&str], tool: &[String]) -> StdioHost {
    let mut argv = vec![bin(), "bridge".into(), "--call-timeout".into(), "5s".into()];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    argv.push("--".into());
    argv.extend(tool.iter().cloned());
    StdioHost::spawn(&argv, &[]).expect("bridge starts")
}

async fn start(extra: &[&str]) -> StdioHost {
    let host = spawn(extra, &[bin(), "testee".into()]);
    let init = host.initialize("2025-06-18", json!({"sampling": {}, "roots": {"listChanged": true}})).await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    host
}

/// A shell wrapper that appends its pid to `pids` and then becomes the testee.
fn recording_testee(dir: &Path) -> (Vec<String>, std::path::PathBuf) {
    let pids = dir.join("pids");
    let script = dir.join("tool.sh");
    std::fs::write(&script, format!("#!/bin/sh\necho $$ >> '{}'\nexec '{}' testee\n", pids.display(), bin())).unwrap();
    (vec!["/bin/sh".into(), script.to_string_lossy().into_owned()], pids)
}

fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

fn alive(pid: i32) -> bool {
    protomcp_harness::os::signal_process(pid, 0)
}

async fn call(host: &StdioHost, name: &str, args: Value) -> Value {
    host.request("tools/call", Some(json!({"name": name, "arguments": args}))).await.unwrap()
}

fn text(resp: &Value) -> &str {
    resp["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text in {resp}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_initialize_and_tools_list() {
    let mut host = start(&[]).await;
    let init = &host.messages()[0];
    let caps = &init["result"]["capabilities"];
    assert_eq!(caps["tools"]["listChanged"], true, "{init}");
    assert!(caps.get("logging").is_some() && caps.get("completions").is_some());
    assert!(caps.get("tasks").is_none());
    let list = host.request("tools/list", None).await.unwrap();
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in ["echo", "add", "fail", "fail_soft", "slow", "big", "toggle", "structured", "ask", "roots"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert!(!names.contains(&"secret"), "the hidden tool is listed: {names:?}");
    let structured = tools.iter().find(|t| t["name"] == "structured").unwrap();
    assert_eq!(structured["outputSchema"]["type"], "object");
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        if let Some(a) = t.get("annotations") {
            assert!(a.as_object().unwrap().values().all(|v| v == true), "a false hint: {t}");
        }
    }
    // A later version than offered falls back to the newest one.
    let other = spawn(&[], &[bin(), "testee".into()]);
    let r = other.initialize("2099-01-01", json!({})).await.unwrap();
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    assert!(host.garbage().is_empty(), "non-MCP output: {:?}", host.garbage());
    assert_eq!(host.close(Duration::from_secs(5)).await.map(|s| s.code()), Some(Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_tool_calls() {
    let host = start(&[]).await;
    assert_eq!(text(&call(&host, "echo", json!({"text": "héllo"})).await), "héllo");
    assert_eq!(text(&call(&host, "add", json!({"a": 2, "b": 40})).await), "42");
    let fail = call(&host, "fail", json!({})).await;
    assert_eq!(fail["result"]["isError"], true, "{fail}");
    assert!(text(&fail).contains("fixture failure"));
    let soft = call(&host, "fail_soft", json!({})).await;
    assert_eq!(soft["result"]["isError"], true);
    assert_eq!(
        soft["result"]["_meta"]["protomcp/toolError"],
        json!({"errorCode": "E_FIXTURE", "message": "soft failure", "suggestion": "retry later", "retryable": true})
    );
    let s = call(&host, "structured", json!({})).await;
    assert_eq!(s["result"]["structuredContent"], json!({"answer": 42}), "{s}");
    // 200,000 characters: above the sideband and compression thresholds.
    let big = call(&host, "big", json!({"n": 200_000})).await;
    assert_eq!(text(&big).len(), 200_000);
    assert!(text(&big).bytes().all(|b| b == b'x'));
    let streamed = call(&host, "stream_big", json!({"n": 150_000})).await;
    assert_eq!(text(&streamed).len(), 150_000, "{}", &streamed.to_string()[..200]);
    let unknown = call(&host, "nope", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let hidden = call(&host, "secret", json!({})).await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_tool_list_changes() {
    let host = start(&[]).await;
    let on = call(&host, "toggle", json!({"enable": true})).await;
    assert_eq!(text(&on), "ok");
    // BR-CALL-14: in effect (and announced) before the response.
    let changed = host.notifications_of("notifications/tools/list_changed");
    assert_eq!(changed.len(), 1, "{:?}", host.notifications());
    assert_eq!(text(&call(&host, "secret", json!({})).await), "secret");
    let list = host.request("tools/list", None).await.unwrap();
    assert!(list["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "secret"));
    // No change, no notification (BR-TOOLLIST-13).
    call(&host, "toggle", json!({"enable": true})).await;
    call(&host, "toggle", json!({"enable": false})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(host.notifications_of("notifications/tools/list_changed").len(), 2);
    assert_eq!(call(&host, "secret", json!({})).await["error"]["code"], -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_progress() {
    let host = start(&[]).await;
    let r = host
        .request("tools/call", Some(json!({"name": "slow", "arguments": {"steps": 3}, "_meta": {"progressToken": 77}})))
        .await
        .unwrap();
    assert_eq!(text(&r), "done 3");
    let progress = host.notifications_of("notifications/progress");
    assert_eq!(progress.len(), 3, "{progress:?}");
    for (i, p) in progress.iter().enumerate() {
        // Numbers compare by value (spec §1.6): rmcp writes progress as a float.
        let n = i as u32 + 1;
        let params = &p["params"];
        assert_eq!(params["progressToken"], 77, "{p}");
        assert_eq!(params["progress"].as_f64(), Some(f64::from(n)), "{p}");
        assert_eq!(params["total"].as_f64(), Some(3.0), "{p}");
        assert_eq!(params["message"], format!("step {n}"), "{p}");
    }
    // All of them before the response.
    let msgs = host.messages();
    let resp_at = msgs.iter().position(|m| m["id"] == r["id"]).unwrap();
    let last_progress = msgs.iter().rposition(|m| m["method"] == "notifications/progress").unwrap();
    assert!(last_progress < resp_at);
    // Without a token: no progress.
    host.clear_notifications();
    call(&host, "slow", json!({"steps": 2})).await;
    assert!(host.notifications_of("notifications/progress").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    let host = start(&["--trace", trace.to_str().unwrap()]).await;
    let (id, rx) = host.start_request("tools/call", Some(json!({"name": "slow", "arguments": {"steps": 30}})));
    tokio::time::sleep(Duration::from_millis(300)).await;
    host.notify("notifications/cancelled", Some(json!({"requestId": id, "reason": "test"})));
    // BR-CANCEL-02: no response for the cancelled request.
    let r = host.wait("tools/call", id, rx, Duration::from_millis(1500)).await;
    assert!(r.is_err(), "the cancelled call was answered: {r:?}");
    // BR-CANCEL-01: the tool process was told.
    let t = std::fs::read_to_string(&trace).unwrap();
    // In the trace the bridge is the testee: `testee→harness` is a frame to the tool process.
    assert!(t.lines().any(|l| l.starts_with("testee→harness ") && l.contains("\"cancel\"")), "{t}");
    // Unknown ids are ignored, and the bridge keeps serving.
    host.notify("notifications/cancelled", Some(json!({"requestId": 9999})));
    assert_eq!(text(&call(&host, "echo", json!({"text": "after"})).await), "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_logging() {
    let host = start(&[]).await;
    assert_eq!(text(&call(&host, "logit", json!({})).await), "logged");
    let logs = host.wait_notifications("notifications/message", 1, Duration::from_secs(2)).await.unwrap();
    assert_eq!(logs[0]["params"]["level"], "info");
    assert!(logs[0]["params"]["data"].to_string().contains("fixture log"), "{}", logs[0]);
    let set = host.request("logging/setLevel", Some(json!({"level": "error"}))).await.unwrap();
    assert_eq!(set["result"], json!({}), "{set}");
    call(&host, "logit", json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(host.notifications_of("notifications/message").len(), 1);
    let bad = host.request("logging/setLevel", Some(json!({"level": "loud"}))).await.unwrap();
    assert!(bad["error"]["code"].as_i64().is_some_and(|c| c != 0), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_resources_prompts_completion() {
    let host = start(&[]).await;
    let list = host.request("resources/list", None).await.unwrap();
    let stat = list["result"]["resources"].as_array().unwrap().iter().find(|r| r["uri"] == "fixture://static").cloned();
    assert_eq!(
        stat,
        Some(json!({"uri": "fixture://static", "name": "static", "mimeType": "text/plain", "size": 14,
                     "description": "A static text resource"}))
    );
    let tl = host.request("resources/templates/list", None).await.unwrap();
    assert_eq!(tl["result"]["resourceTemplates"][0]["uriTemplate"], "fixture://item/{id}", "{tl}");
    let read = host.request("resources/read", Some(json!({"uri": "fixture://static"}))).await.unwrap();
    assert_eq!(read["result"]["contents"][0]["text"], "static-content", "{read}");
    let item = host.request("resources/read", Some(json!({"uri": "fixture://item/7"}))).await.unwrap();
    assert_eq!(item["result"]["contents"][0]["text"], "item 7", "{item}");
    let missing = host.request("resources/read", Some(json!({"uri": "fixture://nothing"}))).await.unwrap();
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    let prompts = host.request("prompts/list", None).await.unwrap();
    assert_eq!(prompts["result"]["prompts"][0]["name"], "greet", "{prompts}");
    let greet =
        host.request("prompts/get", Some(json!({"name": "greet", "arguments": {"name": "Ann"}}))).await.unwrap();
    assert_eq!(
        greet["result"]["messages"][0],
        json!({"role": "user", "content": {"type": "text", "text": "Hello, Ann!"}})
    );
    let no_arg = host.request("prompts/get", Some(json!({"name": "greet"}))).await.unwrap();
    assert_eq!(no_arg["error"]["code"], -32602, "{no_arg}");
    let unknown = host.request("prompts/get", Some(json!({"name": "nope"}))).await.unwrap();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let c = host
        .request(
            "completion/complete",
            Some(json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "b"}})),
        )
        .await
        .unwrap();
    assert_eq!(c["result"]["completion"]["values"], json!(["bob", "bobby"]), "{c}");
    assert_eq!(c["result"]["completion"]["total"], 2);
    // Subscriptions are bridge-side bookkeeping.
    let sub = host.request("resources/subscribe", Some(json!({"uri": "fixture://static"}))).await.unwrap();
    assert_eq!(sub["result"], json!({}), "{sub}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_sampling_and_roots_reach_the_calling_session() {
    let host = start(&[]).await;
    host.on_request(|method, params| match method {
        "sampling/createMessage" => {
            let q = params["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
            Ok(json!({"role": "assistant", "content": {"type": "text", "text": format!("answer to {q}")},
                      "model": "test-model", "stopReason": "endTurn"}))
        }
        "roots/list" => Ok(json!({"roots": [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]})),
        other => Err((protomcp_harness::jsonrpc::ErrorCode::METHOD_NOT_FOUND, format!("unexpected {other}"))),
    });
    let asked = call(&host, "ask", json!({"question": "life"})).await;
    assert!(text(&asked).contains("answer to"), "{asked}");
    let roots = call(&host, "roots", json!({})).await;
    assert_eq!(text(&roots), "file:///work\nfile:///tmp");
}

/// The judged case: the tool process dies under 100 concurrent calls; every call gets exactly
/// one answer, the bridge restarts the tool process, and serves calls again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_tool_process_killed_during_100_calls() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, pid_file) = recording_testee(dir.path());
    let host = spawn(&[], &tool);
    host.initialize("2025-06-18", json!({})).await.unwrap();
    let first = pids(&pid_file);
    assert_eq!(first.len(), 1);
    let calls: Vec<_> = (0..100)
        .map(|_| host.start_request("tools/call", Some(json!({"name": "slow", "arguments": {"steps": 20}}))))
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    protomcp_harness::os::signal_process(first[0], libc::SIGKILL);
    let killed = std::time::Instant::now();
    let mut answers = Vec::new();
    for (id, rx) in calls {
        answers.push(host.wait("tools/call", id, rx, Duration::from_secs(3)).await.expect("an answer"));
    }
    let elapsed = killed.elapsed();
    assert!(elapsed < Duration::from_secs(1), "answers took {elapsed:?} (BR-LIFECYCLE-03: within 1 s)");
    for a in &answers {
        let failed = a["error"]["code"].as_i64().is_some_and(|c| c != 0) || a["result"]["isError"] == true;
        assert!(failed, "a call of the dead process succeeded: {a}");
    }
    // Exactly one answer each.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids: Vec<i64> =
        host.messages().iter().filter(|m| m.get("method").is_none()).filter_map(|m| m["id"].as_i64()).collect();
    for a in &answers {
        assert_eq!(ids.iter().filter(|i| Some(**i) == a["id"].as_i64()).count(), 1, "{a}");
    }
    // The bridge restarts the tool process and serves calls again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = call(&host, "echo", json!({"text": "back"})).await;
        if r["result"]["content"][0]["text"] == "back" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no successful call after the restart: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let now = pids(&pid_file);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!alive(first[0]));
    let list = host.request("tools/list", None).await.unwrap();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"echo") && !names.contains(&"secret"), "{names:?}");
    // And it still answers 100 concurrent calls.
    let again: Vec<_> = (0..100)
        .map(|i| host.start_request("tools/call", Some(json!({"name": "add", "arguments": {"a": i, "b": 1}}))))
        .collect();
    for (i, (id, rx)) in again.into_iter().enumerate() {
        let r = host.wait("tools/call", id, rx, Duration::from_secs(5)).await.unwrap();
        assert_eq!(text(&r), (i + 1).to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_shuts_down_cleanly() {
    for how in ["eof", "sigterm", "sigint"] {
        let dir = tempfile::tempdir().unwrap();
        let (tool, pid_file) = recording_testee(dir.path());
        let mut host = spawn(&[], &tool);
        host.initialize("2025-06-18", json!({})).await.unwrap();
        let tp = pids(&pid_file)[0];
        assert!(alive(tp));
        let status = match how {
            "eof" => host.close(Duration::from_secs(5)).await,
            "sigterm" => {
                host.signal(libc::SIGTERM);
                host.wait_exit(Duration::from_secs(5)).await
            }
            _ => {
                host.signal(libc::SIGINT);
                host.wait_exit(Duration::from_secs(5)).await
            }
        };
        let status = status.unwrap_or_else(|| panic!("{how}: the bridge did not exit within 5 s"));
        if how == "eof" {
            assert_eq!(status.code(), Some(0));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!alive(tp), "{how}: the tool process {tp} is still alive");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_failed_start_is_reported() {
    // A tool process that exits at once.
    let mut host = spawn(&[], &["/bin/false".into()]);
    let started = std::time::Instant::now();
    let status = host.wait_exit(Duration::from_secs(5)).await.expect("the bridge exits");
    assert_eq!(status.code(), Some(1));
    // At once, not after a connect wait (the call timeout, 5 min by default).
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    // One that never connects: given up after the call timeout.
    let argv = [bin(), "bridge".into(), "--call-timeout".into(), "1s".into(), "--".into(), "sleep".into(), "30".into()];
    let mut host = StdioHost::spawn(&argv, &[]).unwrap();
    let status = host.wait_exit(Duration::from_secs(5)).await.expect("the bridge gives up");
    assert_eq!(status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_malformed_input_keeps_the_session() {
    let host = start(&[]).await;
    host.send_line("this is not json");
    host.send_line(r#"[{"jsonrpc":"2.0","id":900,"method":"ping"}]"#);
    let bad_args = host.request("tools/call", Some(json!({"name": "echo", "arguments": [1, 2]}))).await.unwrap();
    assert_eq!(bad_args["error"]["code"], -32602, "{bad_args}");
    let unknown = host.request("no/such/method", None).await.unwrap();
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let tasks = host.request("tasks/list", None).await.unwrap();
    assert_eq!(tasks["error"]["code"], -32601, "{tasks}");
    assert_eq!(text(&call(&host, "echo", json!({"text": "still here"})).await), "still here");
    let errors: Vec<Value> =
        host.messages().into_iter().filter(|m| m["id"].is_null() && m.get("error").is_some()).collect();
    let codes: Vec<i64> = errors.iter().filter_map(|e| e["error"]["code"].as_i64()).collect();
    assert!(codes.contains(&-32700) && codes.contains(&-32600), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_middleware_intercepts() {
    let host = spawn(&[], &[bin(), "testee".into(), "--middleware".into()]);
    host.initialize("2025-06-18", json!({})).await.unwrap();
    // mirror (priority 10): `before` adds "mw" to the arguments, `after` replaces the result.
    let r = call(&host, "echo", json!({"text": "hi"})).await;
    assert_eq!(text(&r), "after:echo:false", "{r}");
    // guard (priority 1) rejects `secret`: the tool is not called.
    call(&host, "toggle", json!({"enable": true})).await;
    let blocked = call(&host, "secret", json!({})).await;
    assert_eq!(blocked["result"]["isError"], true, "{blocked}");
    assert!(text(&blocked).contains("blocked by guard"), "{blocked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_watch_restarts_after_in_flight_calls_finish() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, pid_file) = recording_testee(dir.path());
    let script = tool[1].clone();
    let host = spawn(&["--watch", &script], &tool);
    host.initialize("2025-06-18", json!({})).await.unwrap();
    assert_eq!(pids(&pid_file).len(), 1);
    let (id, rx) = host.start_request("tools/call", Some(json!({"name": "slow", "arguments": {"steps": 8}})));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut text_now = std::fs::read_to_string(&script).unwrap();
    text_now.push_str("# changed\n");
    std::fs::write(&script, text_now).unwrap();
    // The call in flight finishes on the old process.
    let r = host.wait("tools/call", id, rx, Duration::from_secs(5)).await.unwrap();
    assert_eq!(text(&r), "done 8", "{r}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while pids(&pid_file).len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no restart after the change");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let r = call(&host, "echo", json!({"text": "reloaded"})).await;
        if r["result"]["content"][0]["text"] == "reloaded" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pids(&pid_file)[0]));
}
