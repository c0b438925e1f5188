//! Reference testee, reverse requests (§10, §17, §18): `narrow`, `ask` and `roots` send a request
//! with a fresh rid and accept only the reply of the right type carrying that rid.

use std::time::Duration;

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::Envelope;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::SamplingResponse;
use protomcp_proto::pb::envelope::Msg;
use serde_json::{Value, json};

fn sampling_answer(rid: &str, content_json: &str, error: &str) -> Envelope {
    Envelope::from(SamplingResponse {
        role: "assistant".into(),
        content_json: content_json.into(),
        model: "m".into(),
        stop_reason: "endTurn".into(),
        error: error.into(),
    })
    .with_rid(rid)
}

#[tokio::test]
async fn narrow_waits_for_the_active_tools_response_with_its_own_rid() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("c1", "narrow", "{}").await;
    let req = p.envelope().await;
    // TP-TOOLLIST-02, TP-CONCUR-07.
    assert!(!req.request_id.is_empty());
    assert_eq!(req.msg, env::set_allowed(["echo", "narrow"]).msg);
    let rid = req.request_id.clone();
    // TP-TOOLLIST-05: empty or unknown rids, or the right rid on another type, are not the answer.
    p.send(env::active_tools(["wrong"])).await;
    p.send(env::active_tools(["wrong"]).with_rid(format!("{rid}-other"))).await;
    p.send(sampling_answer(&rid, r#"{"type":"text","text":"no"}"#, "")).await;
    p.send(env::list_roots_response([("file:///no", "no")]).with_rid(rid.clone())).await;
    // TP-TOOLLIST-03: everything else is served meanwhile.
    ok_text(&p.call_result("e", "echo", r#"{"text":"meanwhile"}"#).await, "meanwhile");
    p.send(env::active_tools(["echo", "narrow"]).with_rid(rid.clone())).await;
    ok_text(&p.result("c1").await, "echo,narrow");
    // A second answer under the same rid is ignored too.
    p.send(env::active_tools(["late"]).with_rid(rid)).await;
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn reverse_waits_are_bounded() {
    let opts = Options { reverse_timeout: Duration::from_millis(300), ..Options::default() };
    let mut p = Peer::ready(opts).await;
    // TP-TOOLLIST-04: the handler gets an error.
    p.call("n", "narrow", "{}").await;
    let req = p.envelope().await;
    err_text(&p.result("n").await, "no ActiveToolsResponse arrived within 300 ms");
    p.send(env::active_tools(["echo"]).with_rid(req.request_id)).await;
    // TP-SAMPLING-04: the failure reaches `ask` as `error: …`.
    p.call("a", "ask", r#"{"question":"?"}"#).await;
    let req = p.envelope().await;
    ok_text(&p.result("a").await, "error: no SamplingResponse arrived within 300 ms");
    p.send(sampling_answer(&req.request_id, r#"{"type":"text","text":"late"}"#, "")).await;
    p.call("r", "roots", "{}").await;
    let _ = p.envelope().await;
    err_text(&p.result("r").await, "no ListRootsResponse");
    p.silence(Duration::from_millis(200)).await;
    ok_text(&p.call_result("e", "echo", r#"{"text":"fine"}"#).await, "fine");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn concurrent_reverse_requests_get_distinct_rids() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("n1", "narrow", "{}").await;
    p.call("n2", "narrow", "{}").await;
    p.call("a1", "ask", r#"{"question":"q"}"#).await;
    p.call("r1", "roots", "{}").await;
    let mut rids = Vec::new();
    for _ in 0..4 {
        let e = p.envelope().await;
        assert!(!e.request_id.is_empty());
        rids.push((e.request_id.clone(), e.msg));
    }
    let distinct: std::collections::BTreeSet<_> = rids.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(distinct.len(), 4, "TP-CONCUR-07: {rids:?}");
    // Answer in reverse order.
    for (rid, msg) in rids.into_iter().rev() {
        match msg {
            Some(Msg::SetAllowed(_)) => p.send(env::active_tools(["echo", "narrow"]).with_rid(rid)).await,
            Some(Msg::SamplingRequest(_)) => p.send(sampling_answer(&rid, r#"{"type":"text","text":"A"}"#, "")).await,
            Some(Msg::ListRootsRequest(_)) => {
                p.send(env::list_roots_response([("file:///r", "r")]).with_rid(rid)).await
            }
            other => panic!("{other:?}"),
        }
    }
    let mut results = Vec::new();
    for _ in 0..4 {
        let e = p.envelope().await;
        let Some(Msg::CallResult(r)) = e.msg else { panic!() };
        results.push((e.request_id, text(&r)));
    }
    results.sort();
    assert_eq!(
        results,
        [("a1", "A"), ("n1", "echo,narrow"), ("n2", "echo,narrow"), ("r1", "file:///r")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn ask_sends_one_user_text_message_and_returns_the_answer() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("c", "ask", r#"{"question":"What is 6×7?"}"#).await;
    let req = p.envelope().await;
    let Some(Msg::SamplingRequest(s)) = &req.msg else { panic!("{req:?}") };
    // TP-SAMPLING-01/06.
    assert!(!req.request_id.is_empty());
    let messages: Value = serde_json::from_str(&s.messages_json).unwrap();
    assert_eq!(messages, json!([{"role":"user","content":{"type":"text","text":"What is 6×7?"}}]));
    assert!(s.max_tokens > 0);
    assert!(s.model_preferences_json.is_empty());
    // TP-SAMPLING-05: an answer under another rid is ignored.
    p.send(sampling_answer("stranger", r#"{"type":"text","text":"wrong"}"#, "")).await;
    p.send(sampling_answer(&req.request_id, r#"{"type":"text","text":"42"}"#, "")).await;
    ok_text(&p.result("c").await, "42");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_sampling_error_reaches_ask_as_a_failure() {
    let mut p = Peer::ready(Options::default()).await;
    for (content, error, want) in [
        ("", "no eligible session", "error: no eligible session"),
        (r#"{"type":"text","text":"ignored"}"#, "denied", "error: denied"),
        (r#"{"type":"image","data":"AA==","mimeType":"image/png"}"#, "", "error: the answer has no text content"),
        ("not json", "", "error: the answer's content is not a content object"),
    ] {
        p.call("c", "ask", r#"{"question":"q"}"#).await;
        let req = p.envelope().await;
        p.send(sampling_answer(&req.request_id, content, error)).await;
        let r = p.result("c").await;
        assert!(text(&r).starts_with(want), "{r:?}");
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn roots_returns_the_uris_one_per_line() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("c", "roots", "{}").await;
    let req = p.envelope().await;
    // TP-ROOTS-01.
    assert!(!req.request_id.is_empty());
    assert!(matches!(req.msg, Some(Msg::ListRootsRequest(_))));
    // TP-ROOTS-02.
    p.send(env::list_roots_response([("file:///wrong", "w")]).with_rid("other")).await;
    p.send(env::list_roots_response([("file:///a", "a"), ("file:///b%20c", "b")]).with_rid(req.request_id)).await;
    ok_text(&p.result("c").await, "file:///a\nfile:///b%20c");
    p.call("empty", "roots", "{}").await;
    let req = p.envelope().await;
    p.send(env::list_roots_response(Vec::<(String, String)>::new()).with_rid(req.request_id)).await;
    ok_text(&p.result("empty").await, "");
    assert_eq!(p.close().await, 0);
}
