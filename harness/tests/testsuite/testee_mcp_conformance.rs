//! `testee --mcp-conformance` over the socket: what the official MCP conformance suite relies on,
//! checked at the Envelope level so that `cargo test` covers it without Node
//! (tests/mcp-conformance/run.sh runs the suite itself).

use std::time::Duration;

use crate::common::*;
use protomcp_harness::testee::{Fixture, Options};
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{Envelope, SamplingResponse};
use serde_json::{Value, json};

fn conformance() -> Options {
    Options { fixture: Fixture::McpConformance, ..Options::default() }
}

/// Past the handshake: the tool list, then the marker (no tool is hidden, so nothing follows it).
async fn ready() -> (Peer, Vec<String>) {
    let mut p = Peer::start(conformance());
    p.send(env::list_tools().with_rid("req-0")).await;
    let list = p.envelope().await;
    let Some(Msg::ToolList(tools)) = list.msg else { panic!("expected the tool list, got {list:?}") };
    assert_eq!(p.envelope().await, env::handshake_marker());
    p.silence(Duration::from_millis(100)).await;
    (p, tools.tools.into_iter().map(|t| t.name).collect())
}

fn blocks(result_json: &str) -> Vec<Value> {
    serde_json::from_str(result_json).expect("result_json is a JSON array")
}

#[tokio::test]
async fn lists_the_suites_tools_and_returns_their_content_blocks() {
    let (mut p, names) = ready().await;
    for name in [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_tool_with_logging",
        "test_error_handling",
        "test_tool_with_progress",
        "test_sampling",
        "json_schema_2020_12_tool",
        "test_missing_capability",
        "test_streaming_elicitation",
        "test_logging_tool",
        "test_trigger_tool_change",
        "test_toggled_tool",
        "test_input_required_result_elicitation",
        "test_input_required_result_sampling",
        "test_input_required_result_list_roots",
        "test_input_required_result_request_state",
        "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state",
        "test_input_required_result_capabilities",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
    }
    ok_text(&p.call_result("c1", "test_simple_text", "").await, "This is a simple text response for testing.");
    let image = blocks(&p.call_result("c2", "test_image_content", "{}").await.result_json);
    assert_eq!((image[0]["type"].as_str(), image[0]["mimeType"].as_str()), (Some("image"), Some("image/png")));
    assert!(image[0]["data"].as_str().unwrap().starts_with("iVBORw0KGgo"), "a base64 PNG");
    let audio = blocks(&p.call_result("c3", "test_audio_content", "{}").await.result_json);
    assert_eq!((audio[0]["type"].as_str(), audio[0]["mimeType"].as_str()), (Some("audio"), Some("audio/wav")));
    assert!(audio[0]["data"].as_str().unwrap().starts_with("UklGR"), "a base64 RIFF file");
    let embedded = blocks(&p.call_result("c4", "test_embedded_resource", "{}").await.result_json);
    assert_eq!(
        embedded,
        [
            json!({"type": "resource", "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}})
        ]
    );
    let mixed = blocks(&p.call_result("c5", "test_multiple_content_types", "{}").await.result_json);
    let types: Vec<&str> = mixed.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text", "image", "resource"]);
    err_text(
        &p.call_result("c6", "test_error_handling", "{}").await,
        "This tool intentionally returns an error for testing",
    );
    err_text(&p.call_result("c7", "no_such_tool", "{}").await, "Tool not found: no_such_tool");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn logging_and_progress_come_before_the_result() {
    let (mut p, _) = ready().await;
    p.call("l", "test_tool_with_logging", "{}").await;
    for entry in ["Tool execution started", "Tool processing data", "Tool execution completed"] {
        assert_eq!(p.envelope().await, env::log("info", "conformance", &Value::from(entry).to_string()));
    }
    assert!(!p.result("l").await.is_error);
    p.send(env::call_tool_with_progress("test_tool_with_progress", "{}", "pt-1").with_rid("p")).await;
    for progress in [0, 50, 100] {
        assert_eq!(p.envelope().await, env::progress("pt-1", progress, 100, ""));
    }
    assert!(!p.result("p").await.is_error);
    // TP-PROGRESS-02: without a token, no progress at all.
    ok_text(&p.call_result("q", "test_tool_with_progress", "{}").await, "Tool with progress executed successfully");
    assert_eq!(p.close().await, 0);
}

/// The diagnostic tools of the suite's 2026-07-28 `server-stateless` scenario: the log is sent
/// whatever the host asked (the bridge filters it), and the trigger disables, then enables again,
/// test_toggled_tool in its own result (a list change the bridge announces).
#[tokio::test]
async fn stateless_diagnostic_tools() {
    let (mut p, _) = ready().await;
    p.call("l", "test_logging_tool", "{}").await;
    assert_eq!(
        p.envelope().await,
        env::log("info", "conformance", &Value::from("Diagnostic trace logging activated").to_string())
    );
    ok_text(&p.result("l").await, "Logging evaluated");
    let off = p.call_result("t1", "test_trigger_tool_change", "{}").await;
    assert_eq!(
        (off.disable_tools.as_slice(), off.enable_tools.len()),
        (["test_toggled_tool".to_owned()].as_slice(), 0)
    );
    let on = p.call_result("t2", "test_trigger_tool_change", "{}").await;
    assert_eq!((on.enable_tools.as_slice(), on.disable_tools.len()), (["test_toggled_tool".to_owned()].as_slice(), 0));
    // Without the host's model: the sampling failure is an error result (the suite wants -32021,
    // which a bridge never sends, BR-STATELESS-16).
    p.call("m", "test_missing_capability", "{}").await;
    answer_sampling(&mut p, SamplingResponse { error: "no sampling capability".into(), ..Default::default() }).await;
    err_text(&p.result("m").await, "no sampling capability");
    // The streaming tool reports whether the bridge answered its SamplingRequest.
    p.call("s", "test_streaming_elicitation", "{}").await;
    answer_sampling(&mut p, SamplingResponse { error: "refused".into(), ..Default::default() }).await;
    ok_text(&p.result("s").await, "Streaming complete (sampling refused)");
    assert_eq!(p.close().await, 0);
}

/// The SamplingRequest the testee sends next, answered with `answer`.
async fn answer_sampling(p: &mut Peer, answer: SamplingResponse) -> Value {
    let e = p.envelope().await;
    let Some(Msg::SamplingRequest(s)) = &e.msg else { panic!("expected a SamplingRequest, got {e:?}") };
    assert!(!e.request_id.is_empty());
    assert_eq!(s.max_tokens, 100);
    let messages: Value = serde_json::from_str(&s.messages_json).unwrap();
    p.send(Envelope::from(answer).with_rid(e.request_id.clone())).await;
    messages
}

#[tokio::test]
async fn sampling_asks_the_host_and_reports_its_answer_or_failure() {
    let (mut p, _) = ready().await;
    p.call("s1", "test_sampling", r#"{"prompt":"Test prompt"}"#).await;
    let answer = SamplingResponse {
        role: "assistant".into(),
        content_json: json!({"type": "text", "text": "hi there"}).to_string(),
        model: "m".into(),
        stop_reason: "endTurn".into(),
        error: String::new(),
    };
    let messages = answer_sampling(&mut p, answer).await;
    assert_eq!(messages, json!([{"role": "user", "content": {"type": "text", "text": "Test prompt"}}]));
    ok_text(&p.result("s1").await, "LLM response: hi there");
    p.call("s2", "test_sampling", r#"{"prompt":"again"}"#).await;
    answer_sampling(&mut p, SamplingResponse { error: "no sampling capability".into(), ..Default::default() }).await;
    err_text(&p.result("s2").await, "no sampling capability");
    err_text(&p.call_result("s3", "test_sampling", "{}").await, "prompt");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn resources_prompts_and_completion() {
    let (mut p, _) = ready().await;
    let ask = async |p: &mut Peer, rid: &str, e: Envelope| {
        p.send(e.with_rid(rid)).await;
        let reply = p.envelope().await;
        assert_eq!(reply.request_id, rid);
        reply.msg.expect("a reply")
    };
    let Msg::ResourceListResponse(list) = ask(&mut p, "r1", env::list_resources()).await else { panic!() };
    let uris: Vec<&str> = list.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["test://static-text", "test://static-binary", "test://watched-resource"]);
    let Msg::ReadResourceResponse(r) = ask(&mut p, "r2", env::read_resource("test://static-binary")).await else {
        panic!()
    };
    assert!(r.contents[0].text.is_empty() && r.contents[0].blob.starts_with(b"\x89PNG"));
    let Msg::ReadResourceResponse(r) = ask(&mut p, "r3", env::read_resource("test://template/123/data")).await else {
        panic!()
    };
    assert_eq!(r.contents[0].uri, "test://template/123/data");
    assert!(r.contents[0].text.contains("Data for ID: 123"));
    let Msg::GetPromptResponse(g) =
        ask(&mut p, "r4", env::get_prompt("test_prompt_with_arguments", r#"{"arg1":"a","arg2":"b"}"#)).await
    else {
        panic!()
    };
    assert_eq!(
        g.messages[0].content_json,
        json!({"type": "text", "text": "Prompt with arguments: arg1='a', arg2='b'"}).to_string()
    );
    let Msg::CompletionResponse(c) =
        ask(&mut p, "r5", env::completion("ref/prompt", "test_prompt_with_arguments", "arg1", "par")).await
    else {
        panic!()
    };
    assert_eq!(c.values, ["paris", "park", "party"]);
    assert_eq!(p.close().await, 0);
}
