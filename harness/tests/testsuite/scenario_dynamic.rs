//! Envelopes written in scenarios, checked on the wire with proto's own decoder.

use std::path::Path;

use bytes::BytesMut;
use protomcp_harness::scenario::{Action, Captures, FrameBody, parse_str};
use protomcp_proto::dynamic::{self, hex_encode};
use protomcp_proto::frame::{Decoded, Frame, FrameDecoder};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::violation::Party;
use serde_json::json;

fn decode_frame(frame: &[u8]) -> Decoded {
    let mut buf = BytesMut::from(frame);
    match FrameDecoder::new(Party::Bridge).decode(&mut buf) {
        Ok(Some(Frame::Envelope(d))) => {
            assert!(buf.is_empty(), "one frame");
            d
        }
        other => panic!("{other:?}"),
    }
}

fn scenario_frames(steps: &str) -> Vec<Vec<u8>> {
    let text = format!(
        "id: framing.x\ntitle: x\nrequirements: [TP-FRAME-07]\nlevel: MUST\nrole: tool-process\nsteps:\n{steps}"
    );
    let s = parse_str(Path::new("x.yaml"), &text).unwrap_or_else(|e| panic!("{e}"));
    s.steps
        .iter()
        .map(|step| match &step.action {
            Action::Send(t) => t.frame(&Captures::new()).unwrap().to_vec(),
            Action::SendFrame(f) => {
                let body = match &f.body {
                    FrameBody::Hex(b) => b.clone(),
                    FrameBody::Envelope(t) => t.body(&Captures::new()).unwrap(),
                };
                let mut out = f.length.unwrap_or(body.len() as u32).to_be_bytes().to_vec();
                out.extend(body);
                out
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn unknown_fields_show_up_in_the_wire_report() {
    let frames = scenario_frames(
        "  - send:\n      request_id: u2\n      call_tool:\n        name: echo\n        unknown_fields: [{number: 99, varint: 7}]\n      unknown_fields: [{number: 1000, bytes_hex: '0102'}]\n",
    );
    let d = decode_frame(&frames[0]);
    assert_eq!(d.envelope.request_id, "u2");
    let Some(Msg::CallTool(call)) = &d.envelope.msg else { panic!() };
    assert_eq!(call.name, "echo");
    let report = d.wire.as_ref().expect("unknown fields were reported");
    let found: Vec<(&str, u32, u8)> = report.unknown.iter().map(|u| (u.path.as_str(), u.number, u.wire_type)).collect();
    assert_eq!(found, [("Envelope.call_tool", 99, 0), ("Envelope", 1000, 2)]);
    assert!(report.unknown[1].is_unknown_arm());
    // And back: the tree of the decoded frame names them at the same places.
    let tree = dynamic::from_decoded(&d).unwrap();
    assert_eq!(
        tree,
        json!({
            "request_id": "u2",
            "call_tool": {"name": "echo", "unknown_fields": [{"number": 99, "varint": 7}]},
            "unknown_fields": [{"number": 1000, "bytes_hex": "0102"}],
        })
    );
}

#[test]
fn unknown_arm_alone_and_several_arms() {
    let frames = scenario_frames(
        "  - send: {request_id: u1, unknown_fields: [{number: 38, message: {unknown_fields: [{number: 1, text: hi}]}}]}\n  - send: {list_tools: {}, call_tool: {name: echo}, request_id: r}\n  - send_frame: {length: 3, body: {list_tools: {}}}\n",
    );
    let d = decode_frame(&frames[0]);
    assert_eq!(d.envelope.msg, None, "prost sees no arm");
    let report = d.wire.as_ref().unwrap();
    assert_eq!(report.unknown.len(), 1);
    assert!(report.unknown[0].is_unknown_arm());
    assert_eq!(report.unknown[0].number, 38);
    let d = decode_frame(&frames[1]);
    assert!(matches!(d.envelope.msg, Some(Msg::CallTool(_))), "the last arm wins");
    assert_eq!(d.wire.as_ref().unwrap().arms, vec![2, 3]);
    // A lying prefix: three bytes announced, two sent.
    assert_eq!(hex_encode(&frames[2]), "000000031200");
}

#[test]
fn field_order_and_groups_reach_the_wire() {
    let frames = scenario_frames(
        "  - send:\n      request_id: u2\n      call_tool: {name: echo, arguments_json: {text: x}}\n      unknown_fields: [{number: 52, wire_type: 3, raw_hex: '0801'}]\n      field_order: [52, request_id]\n",
    );
    let body = &frames[0][4..];
    assert_eq!(&body[..6], &[0xa3, 0x03, 0x08, 0x01, 0xa4, 0x03], "the group first");
    let d = decode_frame(&frames[0]);
    let Some(Msg::CallTool(call)) = &d.envelope.msg else { panic!() };
    assert_eq!(call.arguments_json, r#"{"text":"x"}"#);
    let report = d.wire.as_ref().unwrap();
    assert_eq!((report.unknown[0].number, report.unknown[0].wire_type), (52, 3));
}

#[test]
fn every_arm_decodes_and_reencodes_through_the_harness_path() {
    use protomcp_proto::envelopes::{Arm, EnvelopeExt, synthesize};
    let mut state = 7u64;
    let mut next = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        state >> 11
    };
    for &arm in Arm::ALL {
        let envelope = synthesize(arm, &mut next).with_rid("r");
        let d = decode_frame(&envelope.to_frame());
        let tree = dynamic::from_decoded(&d).unwrap();
        assert_eq!(dynamic::arm_of(&tree), Some(arm.name()));
        let again = dynamic::encode(&tree).unwrap();
        assert_eq!(decode_frame(&protomcp_proto::frame::frame_bytes(&again)).envelope, envelope, "{arm:?}");
    }
}
