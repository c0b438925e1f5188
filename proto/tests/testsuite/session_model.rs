//! Properties of the session model: any op sequence gives a plan a conforming peer passes, and
//! a peer answering twice, never, or under a notification's rid is caught with a requirement ID.

#![cfg(feature = "proptest")]

use proptest::prelude::*;
use protomcp_proto::Arm;
use protomcp_proto::session::{self, Checker, Op, Step};
use protomcp_proto::strategies;

const ALL: &[&str] =
    &["hidden", "structured", "log", "stream", "resources", "prompts", "completions", "progress", "cancel"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn plans_pass_a_conforming_peer(ops in strategies::ops(40)) {
        let plan = session::plan(ALL, &ops);
        let c = session::simulate(&plan, None);
        prop_assert!(c.findings.is_empty(), "{:?}", c.findings);
        // Dropping any op keeps the plan valid (what the shrinker relies on).
        for i in 0..ops.len() {
            let mut fewer = ops.clone();
            fewer.remove(i);
            let c = session::simulate(&session::plan(ALL, &fewer), None);
            prop_assert!(c.findings.is_empty(), "{:?}", c.findings);
        }
    }

    #[test]
    fn duplicates_are_caught(ops in strategies::ops(20), k in 0usize..100) {
        let plan = session::plan(&[] as &[&str], &ops);
        let awaited = plan.steps.iter().any(|s| matches!(s, Step::Await { replies, .. } if !replies.is_empty()));
        let c = session::simulate(&plan, Some(k));
        prop_assert_eq!(awaited, c.findings.iter().any(|f| f.requirement == "TP-CONCUR-01"), "{:?}", c.findings);
    }

    #[test]
    fn envelopes_encode(e in strategies::envelope(), body in strategies::hostile_body()) {
        use protomcp_proto::EnvelopeExt;
        let frame = e.to_frame();
        prop_assert_eq!(frame.len(), 4 + prost::Message::encoded_len(&e));
        let decoded: Result<protomcp_proto::Envelope, _> = prost::Message::decode(body.as_slice());
        prop_assert!(decoded.is_ok(), "hostile bodies are still valid protobuf: {:?}", decoded);
    }
}

#[test]
fn checker_findings_cite_requirements() {
    let mut c = Checker::new();
    c.sent("a", Some(Arm::CallTool), "tok");
    c.sent("n", Some(Arm::Cancel), "");
    c.received("", Some(Arm::Progress), "tok");
    c.received("a", Some(Arm::CallResult), "");
    assert!(c.findings.is_empty(), "{:?}", c.findings);
    c.received("", Some(Arm::Progress), "tok");
    c.received("a", Some(Arm::CallResult), "");
    c.received("n", Some(Arm::CallResult), "");
    c.received("", Some(Arm::Progress), "other");
    let reqs: Vec<&str> = c.findings.iter().map(|f| f.requirement).collect();
    assert_eq!(reqs, ["TP-PROGRESS-03", "TP-CONCUR-01", "TP-FRAME-06", "TP-PROGRESS-02"]);
    c.sent("k", Some(Arm::CallTool), "");
    c.cancel("k");
    assert_eq!(c.unanswered()[0].requirement, "TP-CANCEL-03");
    c.received("k", Some(Arm::CallResult), "");
    c.sent("b", Some(Arm::ListTools), "");
    c.received("b", Some(Arm::CallResult), "");
    assert_eq!(c.unanswered()[0].requirement, "TP-CONCUR-01");
}

#[test]
fn reused_rids_are_never_in_flight_twice() {
    use session::{Args, Extra, RidKind, Tool};
    let call = |rid| Op::Call { tool: Tool::Echo, args: Args::Valid, rid, progress: false, extra: Extra::None };
    let plan = session::plan(ALL, &[call(RidKind::Plain), Op::Sync, call(RidKind::Reuse(0)), call(RidKind::Reuse(0))]);
    let rids: Vec<String> = plan
        .steps
        .iter()
        .filter_map(|s| if let Step::Send { wire, .. } = s { Some(wire.envelope().request_id) } else { None })
        .collect();
    assert_eq!(rids[0], rids[1], "the second call reuses the answered rid");
    assert_ne!(rids[1], rids[2], "the third may not reuse a rid in flight");
}

#[test]
fn replies_under_a_rid_the_harness_reused_while_in_flight_or_left_empty_are_never_findings() {
    let mut c = Checker::new();
    // Two requests in flight under one rid: which reply answers which is not knowable.
    c.sent("dup", Some(Arm::CallTool), "");
    c.sent("dup", Some(Arm::ListTools), "");
    c.received("dup", Some(Arm::ToolList), "");
    c.received("dup", Some(Arm::CallResult), "");
    c.received("dup", Some(Arm::CallResult), "");
    // A request without a rid may be answered under the empty rid (TP-CALL-21).
    c.sent("", Some(Arm::CallTool), "");
    c.received("", Some(Arm::CallResult), "");
    assert!(c.findings.is_empty(), "{:?}", c.findings);
    // Other rids are still judged.
    c.sent("b", Some(Arm::CallTool), "");
    c.received("b", Some(Arm::ToolList), "");
    assert_eq!(c.findings.len(), 1, "{:?}", c.findings);
}
