//! Reference testee, cancellation and progress (§8, §9).

use std::time::{Duration, Instant};

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;

#[tokio::test]
async fn progress_with_a_token_all_before_the_result() {
    let mut p = Peer::ready(Options::default()).await;
    let token = "tok 🦀 1";
    p.send(env::call_tool_with_progress("slow", r#"{"steps":3}"#, token).with_rid("c1")).await;
    // TP-PROGRESS-01/03/04/05: (i, steps, "step i"), token unchanged, empty rid, increasing.
    for i in 1..=3 {
        assert_eq!(p.envelope().await, env::progress(token, i, 3, &format!("step {i}")));
    }
    ok_text(&p.result("c1").await, "done 3");
    p.silence(Duration::from_millis(250)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn no_progress_without_a_token() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("c1", "slow", r#"{"steps":3}"#).await;
    // TP-PROGRESS-02: the result is the first thing to arrive.
    ok_text(&p.result("c1").await, "done 3");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_cancelled_call_stops_promptly_and_still_gets_one_result() {
    let mut p = Peer::ready(Options::default()).await;
    p.send(env::call_tool_with_progress("slow", r#"{"steps":50}"#, "t").with_rid("c1")).await;
    assert!(matches!(p.envelope().await.msg, Some(Msg::Progress(_))));
    // TP-CANCEL-01: the body names the call; the Envelope rid is irrelevant.
    p.send(env::cancel("c1").with_rid("unrelated")).await;
    let cancelled_at = Instant::now();
    // TP-CANCEL-03/04: seen within T_PROMPT; exactly one result. Progress may still be in the
    // pipe for the step that was running.
    let (r, others) = p.any_result("c1").await;
    assert!(cancelled_at.elapsed() < T_PROMPT, "{:?}", cancelled_at.elapsed());
    ok_text(&r, "cancelled");
    assert!(others.iter().all(|e| matches!(e.msg, Some(Msg::Progress(_)))), "{others:?}");
    p.silence(Duration::from_millis(300)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn cancels_naming_nothing_in_flight_are_ignored() {
    let mut p = Peer::ready(Options::default()).await;
    ok_text(&p.call_result("done", "echo", r#"{"text":"x"}"#).await, "x");
    // TP-CANCEL-02: unknown, finished, empty: no reply, no harm.
    for rid in ["never", "done", ""] {
        p.send(env::cancel(rid)).await;
    }
    p.silence(Duration::from_millis(300)).await;
    ok_text(&p.call_result("next", "echo", r#"{"text":"y"}"#).await, "y");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn cancelling_one_call_leaves_the_others_alone() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("a", "slow", r#"{"steps":3}"#).await;
    p.call("b", "slow", r#"{"steps":30}"#).await;
    p.send(env::cancel("b")).await;
    // TP-CANCEL-06. (`b` may not even have started: then it never runs, TP-CANCEL-05.)
    assert!(text(&p.result("b").await).contains("cancelled"));
    ok_text(&p.result("a").await, "done 3");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_call_cancelled_before_it_started_is_answered_at_once() {
    // The middleware variant holds requests back during its registration burst: a call and its
    // cancellation can both arrive before the handler could start.
    let mut p = Peer::start(Options { middleware: true, ..Options::default() });
    p.send(env::list_tools().with_rid("req-0")).await;
    assert!(matches!(p.envelope().await.msg, Some(Msg::ToolList(_))));
    assert_eq!(p.envelope().await, env::register_middleware("guard", 1));
    p.call("early", "slow", r#"{"steps":50}"#).await;
    p.call("kept", "echo", r#"{"text":"kept"}"#).await;
    p.send(env::cancel("early")).await;
    for _ in 0..3 {
        p.send(env::register_middleware_response(true)).await;
        if let Some(Msg::RegisterMiddleware(_)) = p.envelope().await.msg {
            continue;
        }
        break;
    }
    assert_eq!(p.envelope().await, env::disable_tools(["secret"]));
    let started = Instant::now();
    // TP-CANCEL-05: not run (slow would take 5 s), answered with the cancellation result.
    let (r, others) = p.any_result("early").await;
    assert!(started.elapsed() < Duration::from_millis(500));
    err_text(&r, "cancelled");
    let kept = match others.as_slice() {
        [] => p.result("kept").await,
        [e] => match &e.msg {
            Some(Msg::CallResult(r)) => r.clone(),
            other => panic!("{other:?}"),
        },
        more => panic!("{more:?}"),
    };
    ok_text(&kept, "kept");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn cancellation_ends_a_wait_for_a_reverse_reply() {
    let mut p = Peer::ready(Options::default()).await;
    p.call("c", "ask", r#"{"question":"?"}"#).await;
    let req = p.envelope().await;
    assert!(matches!(req.msg, Some(Msg::SamplingRequest(_))));
    p.send(env::cancel("c")).await;
    ok_text(&p.result("c").await, "cancelled");
    // The late answer is ignored (TP-SAMPLING-04/05).
    p.send(
        protomcp_proto::Envelope::from(protomcp_proto::pb::SamplingResponse::default())
            .with_rid(req.request_id.clone()),
    )
    .await;
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}
