//! Reference testee, handshake and reload (§5, §21): what it sends, in which order, and when.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;
use serde_json::Value;

fn middleware() -> Options {
    Options { middleware: true, ..Options::default() }
}

#[tokio::test]
async fn no_greeting_then_tool_list_marker_and_hidden_tools() {
    let mut p = Peer::with_defaults();
    // TP-HANDSHAKE-01: nothing before the first ListToolsRequest.
    p.silence(Duration::from_millis(300)).await;
    p.send(env::list_tools().with_rid("req-0")).await;
    // TP-HANDSHAKE-02: the first frame is the tool list under that rid.
    let first = p.envelope().await;
    assert_eq!(first.request_id, "req-0");
    let Some(Msg::ToolList(list)) = first.msg else { panic!("{first:?}") };
    // TP-HANDSHAKE-03: every tool, hidden `secret` included; names unique (TP-HANDSHAKE-06).
    let names: BTreeSet<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ALL_TOOLS.into_iter().collect());
    assert_eq!(names.len(), list.tools.len());
    for t in &list.tools {
        // TP-HANDSHAKE-04/06/07.
        assert!(!t.name.is_empty() && t.name.len() <= 128);
        assert!(t.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)), "{}", t.name);
        assert!(!t.description.is_empty(), "{}", t.name);
        let schema: Value = serde_json::from_str(&t.input_schema_json).unwrap();
        assert_eq!(schema["type"], "object", "{}", t.name);
        assert!(!t.task_support, "TP-TASK-03");
        // TP-HANDSHAKE-05: only `structured` has an output schema, and it is an object schema.
        if t.name == "structured" {
            let out: Value = serde_json::from_str(&t.output_schema_json).unwrap();
            assert_eq!(out, serde_json::json!({"type":"object","properties":{"answer":{"type":"integer"}}}));
        } else {
            assert_eq!(t.output_schema_json, "", "{}", t.name);
        }
    }
    let echo = list.tools.iter().find(|t| t.name == "echo").unwrap();
    let schema: Value = serde_json::from_str(&echo.input_schema_json).unwrap();
    assert_eq!(schema["properties"]["text"]["type"], "string");
    assert_eq!(schema["required"], serde_json::json!(["text"]));
    // TP-HANDSHAKE-10: the marker, at once; TP-HANDSHAKE-12: then exactly one DisableTools.
    assert_eq!(p.envelope().await, env::handshake_marker());
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn without_hidden_secret_is_visible_and_no_disable_follows_the_marker() {
    // `testee --no-hidden`: TP-HANDSHAKE-13, nothing hidden, so nothing after the marker.
    let mut p = Peer::start(Options { hidden: false, ..Options::default() });
    p.send(env::list_tools().with_rid("req-0")).await;
    let Some(Msg::ToolList(list)) = p.envelope().await.msg else { panic!() };
    assert!(list.tools.iter().any(|t| t.name == "secret"));
    assert_eq!(p.envelope().await, env::handshake_marker());
    p.silence(Duration::from_millis(300)).await;
    ok_text(&p.call_result("c1", "secret", "").await, "secret");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn requests_before_the_first_list_tools_are_ignored_harmlessly() {
    let mut p = Peer::with_defaults();
    // TP-HANDSHAKE-16: not fatal; this testee ignores them.
    p.call("early", "echo", r#"{"text":"too soon"}"#).await;
    p.send(env::list_resources().with_rid("early-2")).await;
    p.send(env::reload().with_rid("early-3")).await;
    p.send(env::cancel("early")).await;
    p.silence(Duration::from_millis(300)).await;
    p.handshake().await;
    ok_text(&p.call_result("c1", "echo", r#"{"text":"now"}"#).await, "now");
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_later_list_tools_gets_the_list_only() {
    let mut p = Peer::ready(Options::default()).await;
    for rid in ["req-7", "ünïcødé 🦀"] {
        p.send(env::list_tools().with_rid(rid)).await;
        let e = p.envelope().await;
        assert_eq!(e.request_id, rid, "TP-HANDSHAKE-14");
        let Some(Msg::ToolList(l)) = e.msg else { panic!() };
        assert_eq!(l.tools.len(), ALL_TOOLS.len());
    }
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn reload_is_answered_then_the_burst_repeats_with_empty_rids() {
    let mut p = Peer::ready(Options::default()).await;
    p.send(env::reload().with_rid("req-20")).await;
    // TP-RELOAD-01/02.
    assert_eq!(p.envelope().await, env::reload_response(true, "").with_rid("req-20"));
    let list = p.envelope().await;
    assert_eq!(list.request_id, "");
    assert!(matches!(list.msg, Some(Msg::ToolList(ref l)) if l.tools.len() == ALL_TOOLS.len()));
    assert_eq!(p.envelope().await, env::handshake_marker());
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    ok_text(&p.call_result("c1", "echo", r#"{"text":"after reload"}"#).await, "after reload");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn calls_in_flight_survive_a_reload() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("slow-1", "slow", r#"{"steps":3}"#).await;
    p.send(env::reload().with_rid("rl")).await;
    let (r, others) = p.any_result("slow-1").await;
    ok_text(&r, "done 3"); // TP-RELOAD-04
    assert_eq!(others.len(), 4, "reload response, tool list, marker, disable: {others:?}");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn middleware_registrations_wait_for_each_ack_in_order() {
    let mut p = Peer::start(middleware());
    p.send(env::list_tools().with_rid("req-0")).await;
    assert!(matches!(p.envelope().await.msg, Some(Msg::ToolList(_))));
    // TP-HANDSHAKE-09: in registration order, one at a time.
    for (name, priority) in [("guard", 1), ("mirror", 10), ("broken", 20)] {
        assert_eq!(p.envelope().await, env::register_middleware(name, priority));
        p.silence(Duration::from_millis(150)).await;
        p.send(env::register_middleware_response(true)).await;
    }
    // TP-HANDSHAKE-10/12.
    assert_eq!(p.envelope().await, env::handshake_marker());
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_request_in_place_of_the_ack_is_held_back_not_taken_as_the_ack() {
    let mut p = Peer::start(middleware());
    p.send(env::list_tools().with_rid("req-0")).await;
    assert!(matches!(p.envelope().await.msg, Some(Msg::ToolList(_))));
    assert_eq!(p.envelope().await, env::register_middleware("guard", 1));
    // TP-HANDSHAKE-11: the harness's probe, a call in place of the ack.
    p.call("c1", "echo", r#"{"text":"queued"}"#).await;
    p.send(env::list_resources().with_rid("r1")).await;
    p.silence(Duration::from_millis(300)).await;
    p.send(env::register_middleware_response(true)).await;
    assert_eq!(p.envelope().await, env::register_middleware("mirror", 10));
    p.send(env::register_middleware_response(true)).await;
    assert_eq!(p.envelope().await, env::register_middleware("broken", 20));
    p.send(env::register_middleware_response(true)).await;
    assert_eq!(p.envelope().await, env::handshake_marker());
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    // Then the held-back requests are served (in any order: the call runs in a task).
    let (r, others) = p.any_result("c1").await;
    ok_text(&r, "queued");
    let listed = match others.as_slice() {
        [] => p.envelope().await,
        [e] => e.clone(),
        more => panic!("{more:?}"),
    };
    assert_eq!(listed.request_id, "r1");
    assert!(matches!(listed.msg, Some(Msg::ResourceListResponse(_))));
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn reload_repeats_the_middleware_registrations() {
    let mut p = Peer::ready(middleware()).await;
    p.send(env::reload().with_rid("rl")).await;
    assert_eq!(p.envelope().await, env::reload_response(true, "").with_rid("rl"));
    assert!(matches!(p.envelope().await.msg, Some(Msg::ToolList(_))));
    for (name, priority) in [("guard", 1), ("mirror", 10), ("broken", 20)] {
        assert_eq!(p.envelope().await, env::register_middleware(name, priority));
        p.send(env::register_middleware_response(true)).await;
    }
    assert_eq!(p.envelope().await, env::handshake_marker());
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn stray_acks_and_a_refused_registration_change_nothing() {
    let mut p = Peer::start(middleware());
    p.send(env::register_middleware_response(true)).await; // before the handshake
    p.send(env::list_tools().with_rid("req-0")).await;
    assert!(matches!(p.envelope().await.msg, Some(Msg::ToolList(_))));
    assert_eq!(p.envelope().await, env::register_middleware("guard", 1));
    p.send(env::register_middleware_response(false)).await; // refused: go on
    assert_eq!(p.envelope().await, env::register_middleware("mirror", 10));
    p.send(env::register_middleware_response(true)).await;
    assert_eq!(p.envelope().await, env::register_middleware("broken", 20));
    p.send(env::register_middleware_response(true)).await;
    assert_eq!(p.envelope().await, env::handshake_marker());
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    p.send(env::register_middleware_response(true)).await; // after it
    p.silence(Duration::from_millis(200)).await;
    ok_text(&p.call_result("c", "echo", r#"{"text":"fine"}"#).await, "fine");
    assert_eq!(p.close().await, 0);
}
