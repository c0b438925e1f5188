//! Reference testee, protocol middleware (§13, Appendix B.3): the answers to
//! MiddlewareInterceptRequest of `guard`, `mirror` and `broken`.

use std::time::Duration;

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::Envelope;
use protomcp_proto::envelopes::EnvelopeExt;
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{MiddlewareInterceptRequest, MiddlewareInterceptResponse};
use serde_json::{Value, json};

fn middleware() -> Options {
    Options { middleware: true, ..Options::default() }
}

const RESULT: &str = r#"[{"type":"text","text":"r"}]"#;

async fn intercept(
    p: &mut Peer,
    mw: &str,
    phase: &str,
    tool: &str,
    args: &str,
    is_error: bool,
) -> MiddlewareInterceptResponse {
    let req = MiddlewareInterceptRequest {
        middleware_name: mw.into(),
        phase: phase.into(),
        tool_name: tool.into(),
        arguments_json: args.into(),
        result_json: if phase == "after" { RESULT.into() } else { String::new() },
        is_error,
    };
    p.send(Envelope::from(req).with_rid("mw-1")).await;
    let e = p.envelope().await;
    assert_eq!(e.request_id, "mw-1", "TP-CONCUR-01");
    let Some(Msg::MiddlewareInterceptResponse(r)) = e.msg else { panic!("{e:?}") };
    r
}

fn pass(args: &str, phase: &str) -> MiddlewareInterceptResponse {
    MiddlewareInterceptResponse {
        arguments_json: args.into(),
        result_json: if phase == "after" { RESULT.into() } else { String::new() },
        reject: false,
        reject_reason: String::new(),
    }
}

#[tokio::test]
async fn guard_rejects_secret_before_the_call_only() {
    let mut p = Peer::ready(middleware()).await;
    let r = intercept(&mut p, "guard", "before", "secret", "{}", false).await;
    assert!(r.reject);
    assert_eq!(r.reject_reason, "blocked by guard");
    // TP-MIDDLEWARE-02/06: everything else passes through unchanged.
    assert_eq!(
        intercept(&mut p, "guard", "before", "echo", r#"{"text":"a"}"#, false).await,
        pass(r#"{"text":"a"}"#, "before")
    );
    assert_eq!(intercept(&mut p, "guard", "after", "secret", "{}", false).await, pass("{}", "after"));
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn mirror_marks_arguments_and_replaces_results() {
    let mut p = Peer::ready(middleware()).await;
    let r = intercept(&mut p, "mirror", "before", "echo", r#"{"text":"hi","n":[1,{"k":null}]}"#, false).await;
    assert!(!r.reject);
    let args: Value = serde_json::from_str(&r.arguments_json).unwrap();
    assert_eq!(args, json!({"text":"hi","n":[1,{"k":null}],"mw":"before:echo"}));
    let r = intercept(&mut p, "mirror", "before", "secret", "", false).await;
    assert_eq!(serde_json::from_str::<Value>(&r.arguments_json).unwrap(), json!({"mw":"before:secret"}));
    for is_error in [false, true] {
        let r = intercept(&mut p, "mirror", "after", "fail", "{}", is_error).await;
        let result: Value = serde_json::from_str(&r.result_json).unwrap();
        assert_eq!(result, json!([{"type":"text","text":format!("after:fail:{is_error}")}]));
        assert!(!r.reject);
    }
    // A failure of mirror (arguments that are not an object) is a rejection with a reason.
    let r = intercept(&mut p, "mirror", "before", "echo", "[1]", false).await;
    assert!(r.reject && !r.reject_reason.is_empty());
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn broken_fails_on_boom_and_the_testee_goes_on() {
    let mut p = Peer::ready(middleware()).await;
    for phase in ["before", "after"] {
        // TP-MIDDLEWARE-04.
        let r = intercept(&mut p, "broken", phase, "boom", "{}", false).await;
        assert!(r.reject, "{phase}");
        assert!(r.reject_reason.contains("broken"), "{}", r.reject_reason);
    }
    assert_eq!(intercept(&mut p, "broken", "before", "echo", "{}", false).await, pass("{}", "before"));
    ok_text(&p.call_result("c", "echo", r#"{"text":"alive"}"#).await, "alive");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn unregistered_middleware_passes_through() {
    // TP-MIDDLEWARE-03: names never registered, and every name when none are.
    let mut p = Peer::ready(middleware()).await;
    assert_eq!(intercept(&mut p, "audit", "before", "secret", r#"{"a":1}"#, false).await, pass(r#"{"a":1}"#, "before"));
    assert_eq!(intercept(&mut p, "", "after", "", "", true).await, pass("", "after"));
    assert_eq!(p.close().await, 0);
    let mut p = Peer::ready(Options::default()).await;
    for mw in ["guard", "mirror", "broken"] {
        assert_eq!(intercept(&mut p, mw, "before", "boom", "{}", false).await, pass("{}", "before"));
        assert_eq!(intercept(&mut p, mw, "after", "secret", "{}", false).await, pass("{}", "after"));
    }
    p.silence(Duration::from_millis(100)).await;
    assert_eq!(p.close().await, 0);
}
