//! Reference testee, tool calls and correlation (§6, §7, §19): the tools of Appendix B.1 and how
//! their results look on the wire.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;
use serde_json::{Value, json};

#[tokio::test]
async fn echo_and_add() {
    let mut p = Peer::ready(Options::default()).await;
    let started = Instant::now();
    let r = p.call_result("c1", "echo", r#"{"text":"hi \"there\" é 🦀\n"}"#).await;
    assert!(started.elapsed() < T_PROMPT, "TP-CALL-20");
    // TP-CALL-03: the element is exactly {"type":"text","text":…}.
    assert_eq!(
        serde_json::from_str::<Value>(&r.result_json).unwrap(),
        json!([{"type":"text","text":"hi \"there\" é 🦀\n"}])
    );
    assert!(!r.is_error && r.error.is_none() && r.structured_content_json.is_empty());
    ok_text(&p.call_result("c2", "add", r#"{"a":2,"b":40}"#).await, "42");
    ok_text(&p.call_result("c3", "add", r#"{"b":-5,"a":2.0}"#).await, "-3");
    ok_text(
        &p.call_result("c4", "add", r#"{"a":9223372036854775807,"b":9223372036854775807}"#).await,
        "18446744073709551614",
    );
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_failing_handler_is_an_error_result_and_the_testee_lives_on() {
    let mut p = Peer::ready(Options::default()).await;
    for i in 0..3 {
        let r = p.call_result(&format!("f{i}"), "fail", "{}").await;
        // TP-CALL-07, D-01: the message, no ToolError (no code was given), no backtrace.
        err_text(&r, "fixture failure");
        assert_eq!(text(&r), "fixture failure");
        assert!(r.error.is_none());
    }
    ok_text(&p.call_result("c", "echo", r#"{"text":"alive"}"#).await, "alive");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn fail_soft_carries_the_tool_error_exactly() {
    let mut p = Peer::ready(Options::default()).await;
    let r = p.call_result("c", "fail_soft", "").await;
    err_text(&r, "soft failure");
    // TP-CALL-13.
    assert_eq!(r.error, Some(tool_error("E_FIXTURE", "soft failure", "retry later", true)));
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn unknown_tools_are_error_results_naming_the_tool() {
    let mut p = Peer::ready(Options::default()).await;
    for name in ["nope", "", "Echo", "echo ", "ünï\u{0}code"] {
        let r = p.call_result("c", name, "{}").await;
        // TP-CALL-04/05/06.
        err_text(&r, &format!("Tool not found: {name}"));
        assert_eq!(r.error.as_ref().map(|e| e.error_code.as_str()), Some("NOT_FOUND"));
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn bad_arguments_never_reach_the_handler() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-CALL-09: not JSON. `fail` would say "fixture failure" if its handler ran.
    for args in ["{", "nope", "{\"a\":}", "{} {}", " "] {
        let r = p.call_result("c", "fail", args).await;
        err_text(&r, "not valid JSON");
    }
    // TP-CALL-10: JSON, but not an object.
    for (args, kind) in
        [("[]", "an array"), ("\"{}\"", "a string"), ("7", "a number"), ("true", "a boolean"), ("null", "null")]
    {
        let r = p.call_result("c", "fail", args).await;
        err_text(&r, &format!("expected a JSON object, got {kind}"));
    }
    // TP-CALL-12: required members and primitive types.
    err_text(&p.call_result("c", "echo", "{}").await, "missing required argument \"text\"");
    err_text(&p.call_result("c", "echo", r#"{"text":1}"#).await, "must be a string");
    err_text(&p.call_result("c", "add", r#"{"a":1,"b":"2"}"#).await, "must be an integer");
    err_text(&p.call_result("c", "add", r#"{"a":1,"b":2.5}"#).await, "must be an integer");
    err_text(&p.call_result("c", "toggle", r#"{"enable":1}"#).await, "must be a boolean");
    err_text(&p.call_result("c", "slow", r#"{"steps":-1}"#).await, "must not be negative");
    // TP-CALL-08: empty means {}; members the schema does not name are fine.
    ok_text(&p.call_result("c", "secret", "").await, "secret");
    ok_text(&p.call_result("c", "echo", r#"{"text":"x","mw":"before:echo","n":1e400}"#).await, "x");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn toggle_asks_for_enable_and_disable_lists() {
    let mut p = Peer::ready(Options::default()).await;
    let on = p.call_result("c1", "toggle", r#"{"enable":true}"#).await;
    ok_text(&on, "ok");
    assert_eq!((on.enable_tools.as_slice(), on.disable_tools.len()), (&["secret".to_owned()][..], 0));
    let off = p.call_result("c2", "toggle", r#"{"enable":false}"#).await;
    ok_text(&off, "ok");
    assert_eq!((off.enable_tools.len(), off.disable_tools.as_slice()), (0, &["secret".to_owned()][..]));
    // TP-CALL-19: the hidden tool is callable by its name all the same.
    ok_text(&p.call_result("c3", "secret", "{}").await, "secret");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn structured_content_comes_with_its_text() {
    let mut p = Peer::ready(Options::default()).await;
    let r = p.call_result("c", "structured", "{}").await;
    assert!(!r.is_error);
    // TP-CALL-16/17/18.
    let structured: Value = serde_json::from_str(&r.structured_content_json).unwrap();
    assert_eq!(structured, json!({"answer": 42}));
    let as_text: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(as_text, structured);
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn logit_logs_before_its_result() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("c", "logit", "{}").await;
    // TP-LOG-01..05.
    let log = p.envelope().await;
    assert_eq!(log.request_id, "");
    let Some(Msg::Log(m)) = log.msg else { panic!("{log:?}") };
    assert_eq!(m.level, "info");
    assert_eq!(serde_json::from_str::<Value>(&m.data_json).unwrap(), json!("fixture log"));
    ok_text(&p.result("c").await, "logged");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn rids_are_echoed_byte_for_byte() {
    let mut p = Peer::ready(Options::default()).await;
    let long = "é".repeat(1024);
    // TP-CONCUR-05.
    for rid in ["0", " ", "req-0 ", "日本語", "🦀\u{0}\t\"\\", "a/b?c=d#e", long.as_str()] {
        let r = p.call_result(rid, "echo", r#"{"text":"r"}"#).await;
        ok_text(&r, "r");
        p.send(env::list_resources().with_rid(rid)).await;
        assert_eq!(p.envelope().await.request_id, rid);
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn sixty_four_pipelined_calls_are_all_answered() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-CONCUR-02: written back to back, without waiting.
    let mut wire = Vec::new();
    for i in 0..64 {
        let (name, args) = if i % 2 == 0 {
            ("echo", format!(r#"{{"text":"{i}"}}"#))
        } else {
            ("add", format!(r#"{{"a":{i},"b":0}}"#))
        };
        wire.extend_from_slice(&env::call_tool(name, &args).with_rid(format!("p{i}")).to_frame());
    }
    p.send_raw(&wire).await;
    let mut seen = BTreeSet::new();
    for _ in 0..64 {
        let e = p.envelope().await;
        let Some(Msg::CallResult(r)) = &e.msg else { panic!("{e:?}") };
        let i: usize = e.request_id.strip_prefix('p').unwrap().parse().unwrap();
        ok_text(r, &i.to_string());
        assert!(seen.insert(i), "answered twice: {i}");
    }
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn the_reader_keeps_serving_while_a_handler_runs() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("slow", "slow", r#"{"steps":20}"#).await;
    let started = Instant::now();
    // TP-CONCUR-04: answered at once, long before slow's 2 s.
    ok_text(&p.call_result("e", "echo", r#"{"text":"meanwhile"}"#).await, "meanwhile");
    p.send(env::read_resource("fixture://static").with_rid("r")).await;
    assert_eq!(p.envelope().await.request_id, "r");
    assert!(started.elapsed() < T_PROMPT);
    p.send(env::cancel("slow")).await;
    ok_text(&p.result("slow").await, "cancelled");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_rid_reused_while_in_flight_is_survived() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("dup", "slow", r#"{"steps":2}"#).await;
    p.call("dup", "slow", r#"{"steps":1}"#).await;
    // TP-CONCUR-06: both answered here (one or two is acceptable).
    let mut texts = vec![text(&p.result("dup").await), text(&p.result("dup").await)];
    texts.sort();
    assert_eq!(texts, ["done 1", "done 2"]);
    ok_text(&p.call_result("e", "echo", r#"{"text":"fine"}"#).await, "fine");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn any_call_request_leaves_the_testee_serving() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-CALL-21: no rid, no answer (this testee ignores it).
    p.send(env::call_tool("echo", r#"{"text":"x"}"#)).await;
    p.silence(Duration::from_millis(200)).await;
    // TP-CALL-11: odd names, arguments and progress tokens.
    let long_name = "n".repeat(100_000);
    for (name, args, token) in [
        (long_name.as_str(), "{}", ""),
        ("echo", "\u{0}", "\u{0}"),
        ("slow", r#"{"steps":0}"#, "🦀"),
        ("add", r#"{"a":1e308,"b":1}"#, ""),
        ("big", r#"{"n":-1}"#, ""),
        ("big", r#"{"n":99999999999999}"#, ""),
        ("stream_big", r#"{"n":-5}"#, ""),
    ] {
        p.send(env::call_tool_with_progress(name, args, token).with_rid("odd")).await;
        let r = p.result("odd").await;
        if name == "slow" {
            ok_text(&r, "done 0");
        } else {
            assert!(r.is_error, "{name} {args}: {r:?}");
        }
    }
    ok_text(&p.call_result("e", "echo", r#"{"text":"still here"}"#).await, "still here");
    assert_eq!(p.close().await, 0);
}
