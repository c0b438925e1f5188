//! FRAME: `[u32 BE length][Envelope]`, read incrementally. Each test is a small transcript:
//! bytes arrive as the peer might send them, and the decoder yields what a receiver must see.

use bytes::BytesMut;
use protomcp_proto::envelopes::{self as env, EnvelopeExt, RawBody};
use protomcp_proto::frame::{Frame, FrameDecoder, FrameError, Limits, Stage, frame_bytes, frame_with_prefix};
use protomcp_proto::pb::Envelope;
use protomcp_proto::violation::Party;
use protomcp_proto::wire::WireErrorKind;
use protomcp_proto::{Arm, MAX_FRAME};

fn tool_process() -> FrameDecoder {
    FrameDecoder::new(Party::ToolProcess)
}

/// Feeds `chunks` one after another and collects every envelope, then checks for leftovers at EOF.
fn feed(decoder: &mut FrameDecoder, chunks: &[&[u8]]) -> Vec<Envelope> {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(item) = decoder.decode(&mut buf).expect("valid stream") {
            match item {
                Frame::Envelope(d) => out.push(d.envelope),
                Frame::Sideband(s) => panic!("unexpected sideband {s:?}"),
            }
        }
    }
    assert!(decoder.decode_eof(&mut buf).expect("clean end").is_none());
    out
}

fn two_frames() -> (Vec<u8>, Vec<Envelope>) {
    let a = env::call_tool("echo", r#"{"text":"hi"}"#).with_rid("r1");
    let b = env::list_tools().with_rid("req-0");
    let mut wire = a.to_frame().to_vec();
    wire.extend_from_slice(&b.to_frame());
    (wire, vec![a, b])
}

#[test]
fn one_byte_at_a_time() {
    let (wire, expected) = two_frames();
    let chunks: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(feed(&mut tool_process(), &chunks), expected);
}

#[test]
fn every_split_point_of_two_frames() {
    // One cut anywhere: inside the first prefix, inside the body, between the frames, inside the
    // second prefix and body.
    let (wire, expected) = two_frames();
    for cut in 0..=wire.len() {
        let got = feed(&mut tool_process(), &[&wire[..cut], &wire[cut..]]);
        assert_eq!(got, expected, "cut at byte {cut}");
    }
}

#[test]
fn every_pair_of_split_points() {
    let (wire, expected) = two_frames();
    for i in 0..=wire.len() {
        for j in i..=wire.len() {
            let got = feed(&mut tool_process(), &[&wire[..i], &wire[i..j], &wire[j..]]);
            assert_eq!(got, expected, "cuts at {i} and {j}");
        }
    }
}

#[test]
fn prefix_split_inside_waits_for_the_rest() {
    let frame = env::list_tools().with_rid("req-0").to_frame();
    for k in 1..4 {
        let mut d = tool_process();
        let mut buf = BytesMut::from(&frame[..k]);
        assert_eq!(d.decode(&mut buf), Ok(None), "{k} prefix bytes: need more");
        assert!(d.is_idle(), "still reading the prefix");
        buf.extend_from_slice(&frame[k..]);
        assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    }
}

#[test]
fn coalesced_frames_in_one_read() {
    let envs: Vec<Envelope> =
        (0..50).map(|i| env::call_tool("add", r#"{"a":1,"b":2}"#).with_rid(format!("c{i}"))).collect();
    let wire: Vec<u8> = envs.iter().flat_map(|e| e.to_frame().to_vec()).collect();
    assert_eq!(feed(&mut tool_process(), &[&wire]), envs);
}

#[test]
fn offsets_count_from_the_start_of_the_stream() {
    let (wire, _) = two_frames();
    let mut d = tool_process();
    let mut buf = BytesMut::from(&wire[..]);
    let Some(Frame::Envelope(a)) = d.decode(&mut buf).unwrap() else { panic!() };
    let Some(Frame::Envelope(b)) = d.decode(&mut buf).unwrap() else { panic!() };
    assert_eq!(a.offset, 0);
    assert_eq!(b.offset, 4 + u64::from(a.len));
    assert_eq!(d.position(), wire.len() as u64);
}

#[test]
fn zero_length_frame_is_an_empty_envelope() {
    let mut wire = vec![0, 0, 0, 0];
    wire.extend_from_slice(&env::list_tools().with_rid("req-1").to_frame());
    let got = feed(&mut tool_process(), &[&wire]);
    assert_eq!(got[0], Envelope::default());
    assert_eq!(got[0].arm(), None);
    assert_eq!(got[1].arm(), Some(Arm::ListTools));
}

#[test]
fn a_frame_of_exactly_max_frame_is_accepted() {
    // A 10 MiB body: a CallToolResponse whose result_json fills the frame exactly.
    let mut n = MAX_FRAME as usize;
    let mut big = env::call_result_text("").with_rid("r");
    while prost::Message::encoded_len(&big) != MAX_FRAME as usize {
        n -= prost::Message::encoded_len(&big).saturating_sub(MAX_FRAME as usize).max(1);
        big = env::call_result_text(&"x".repeat(n)).with_rid("r");
    }
    assert_eq!(prost::Message::encoded_len(&big), MAX_FRAME as usize);
    assert_eq!(feed(&mut tool_process(), &[&big.to_frame()]), vec![big]);
}

#[test]
fn a_prefix_above_max_frame_fails_before_the_body_arrives() {
    let mut d = tool_process();
    let mut buf = BytesMut::from(&(MAX_FRAME + 1).to_be_bytes()[..]);
    let err = d.decode(&mut buf).unwrap_err();
    assert_eq!(err, FrameError::Oversize { party: Party::ToolProcess, offset: 0, len: MAX_FRAME + 1, max: MAX_FRAME });
    assert!(!err.is_recoverable());
    assert_eq!(err.violation().requirement(), "TP-FRAME-04");
    // Framing is lost for good: more bytes change nothing.
    buf.extend_from_slice(&env::list_tools().to_frame());
    assert_eq!(d.decode(&mut buf).unwrap_err(), err);
}

#[test]
fn a_little_endian_prefix_is_named_as_the_wrong_byte_order_not_as_an_oversize_frame() {
    // A 300-byte body announced little-endian reads as 0x2C010000: far above MAX_FRAME.
    let mut buf = BytesMut::from(&300u32.to_le_bytes()[..]);
    let err = tool_process().decode(&mut buf).unwrap_err();
    assert!(matches!(err, FrameError::Oversize { len: 0x2C01_0000, .. }));
    let v = err.violation();
    assert_eq!(v.requirement(), "TP-FRAME-01");
    assert!(v.to_string().contains("read little-endian it would be 300 bytes"), "{v}");
    // Just above the limit, or with no plausible swapped length: an oversize frame.
    for len in [MAX_FRAME + 1, MAX_FRAME + 256, u32::MAX] {
        let err = tool_process().decode(&mut BytesMut::from(&len.to_be_bytes()[..])).unwrap_err();
        assert_eq!(err.violation().requirement(), "TP-FRAME-04", "{len:#x}");
    }
}

#[test]
fn a_body_that_begins_with_another_prefix_is_named_as_interleaved_frames() {
    // Two frames written prefix, prefix, body, body (two writers each writing in two parts).
    let a = env::call_result_text("one").with_rid("w1").to_frame();
    let b = env::call_result_text("two").with_rid("w2").to_frame();
    let mut wire = a[..4].to_vec();
    wire.extend_from_slice(&b[..4]);
    wire.extend_from_slice(&a[4..]);
    wire.extend_from_slice(&b[4..]);
    let err = tool_process().decode(&mut BytesMut::from(&wire[..])).unwrap_err();
    assert!(matches!(err, FrameError::Undecodable { .. }), "{err:?}");
    let v = err.violation();
    assert_eq!(v.requirement(), "TP-FRAME-02", "{v}");
    assert!(v.to_string().contains("the bytes of two frames are interleaved"), "{v}");
    // From a bridge: BR-FRAME-01, which forbids interleaving too.
    let err = FrameDecoder::new(Party::Bridge).decode(&mut BytesMut::from(&wire[..])).unwrap_err();
    assert_eq!(err.violation().requirement(), "BR-FRAME-01");
    // A frame framed a second time (the prefix counted in the outer length) is no interleaving,
    // nor is a body one byte too long: both are frames in the wrong format (TP-FRAME-01).
    let twice = frame_bytes(&a);
    let err = tool_process().decode(&mut BytesMut::from(&twice[..])).unwrap_err();
    assert_eq!(err.violation().requirement(), "TP-FRAME-01", "{}", err.violation());
    let mut long = frame_with_prefix(a.len() as u32 - 3, &a[4..]).to_vec();
    long.extend_from_slice(&b);
    let err = tool_process().decode(&mut BytesMut::from(&long[..])).unwrap_err();
    assert_eq!(err.violation().requirement(), "TP-FRAME-01", "{}", err.violation());
}

#[test]
fn the_last_arm_of_a_body_is_found_whatever_the_field_order() {
    use prost::Message;
    let call = env::call_tool("echo", "{}").with_rid("r1");
    let body = bytes::Bytes::from(call.encode_to_vec());
    // prost writes the arm (field 3) first, then request_id (field 14).
    assert_eq!(protomcp_proto::wire::last_arm_at(&body), Some(0));
    // request_id first: the arm comes after its 4 bytes (tag, length, "r1").
    let mut reversed = vec![0x72, 2, b'r', b'1'];
    reversed.extend_from_slice(&env::call_tool("echo", "{}").encode_to_vec());
    assert_eq!(protomcp_proto::wire::last_arm_at(&bytes::Bytes::from(reversed)), Some(4));
    // No arm, or a body that does not scan.
    assert_eq!(protomcp_proto::wire::last_arm_at(&bytes::Bytes::from_static(&[0x72, 0])), None);
    assert_eq!(protomcp_proto::wire::last_arm_at(&bytes::Bytes::from_static(&[0x1a, 9])), None);
}

#[test]
fn a_4_gib_prefix_reserves_nothing() {
    let mut d = tool_process();
    let mut buf = BytesMut::from(&[0xFF, 0xFF, 0xFF, 0xFF][..]);
    let cap_before = buf.capacity();
    assert!(matches!(d.decode(&mut buf), Err(FrameError::Oversize { len: u32::MAX, .. })));
    assert_eq!(buf.capacity(), cap_before, "no reservation for the announced length");
}

#[test]
fn the_limit_is_configurable() {
    let limits = Limits { max_frame: 16, ..Limits::default() };
    let mut d = FrameDecoder::with_limits(Party::Bridge, limits);
    let frame = env::call_tool("echo", r#"{"text":"too long for sixteen"}"#).to_frame();
    let err = d.decode(&mut BytesMut::from(&frame[..])).unwrap_err();
    assert!(matches!(err, FrameError::Oversize { max: 16, .. }));
    assert_eq!(err.violation().requirement(), "BR-FRAME-04", "the bridge sent it");
}

#[test]
fn truncated_prefix_then_eof() {
    let mut d = tool_process();
    let mut buf = BytesMut::from(&[0, 0][..]);
    let err = d.decode_eof(&mut buf).unwrap_err();
    assert_eq!(
        err,
        FrameError::Truncated { party: Party::ToolProcess, offset: 0, stage: Stage::Prefix, have: 2, need: 4 }
    );
    assert_eq!(err.violation().requirement(), "TP-FRAME-01");
}

#[test]
fn truncated_body_then_eof() {
    let frame = env::call_tool("echo", "{}").with_rid("r1").to_frame();
    let mut d = tool_process();
    let mut buf = BytesMut::from(&frame[..frame.len() - 3]);
    assert_eq!(d.decode(&mut buf), Ok(None), "waiting is fine while the stream is open");
    let err = d.decode_eof(&mut buf).unwrap_err();
    assert!(
        matches!(err, FrameError::Truncated { stage: Stage::Body, have, need, .. } if need == frame.len() as u64 && have == need - 3)
    );
}

#[test]
fn clean_eof_between_frames_is_not_an_error() {
    let mut d = tool_process();
    let mut buf = BytesMut::from(&env::list_tools().to_frame()[..]);
    assert!(d.decode_eof(&mut buf).unwrap().is_some());
    assert_eq!(d.decode_eof(&mut buf), Ok(None));
}

#[test]
fn unknown_field_is_skipped_and_reported_with_its_bytes() {
    let body =
        RawBody::of(&env::call_tool("echo", r#"{"text":"hi"}"#).with_rid("r1")).varint(99, 7).bytes(1000, b"future");
    let mut d = tool_process();
    let Some(Frame::Envelope(got)) = d.decode(&mut BytesMut::from(&body.to_frame()[..])).unwrap() else { panic!() };
    assert_eq!(got.envelope, env::call_tool("echo", r#"{"text":"hi"}"#).with_rid("r1"), "known content intact");
    let report = got.wire.expect("unknown fields are reported");
    let numbers: Vec<u32> = report.unknown.iter().map(|u| u.number).collect();
    assert_eq!(numbers, vec![99, 1000]);
    assert_eq!(&report.unknown[1].raw[..], &[0xC2, 0x3E, 6, b'f', b'u', b't', b'u', b'r', b'e'][..]);
    assert!(report.unknown[1].is_unknown_arm());
    assert!(!report.unknown[0].is_unknown_arm(), "a varint is a field, not an arm");
}

#[test]
fn unknown_field_inside_a_message_is_reported_with_its_path() {
    // CallToolRequest {1 name "echo", 9 "?"} inside arm 3.
    let inner = [0x0A, 4, b'e', b'c', b'h', b'o', 0x4A, 1, b'?'];
    let body = RawBody::default().bytes(3, &inner);
    let mut d = tool_process();
    let Some(Frame::Envelope(got)) = d.decode(&mut BytesMut::from(&body.to_frame()[..])).unwrap() else { panic!() };
    assert_eq!(got.envelope, env::call_tool("echo", ""));
    let u = &got.wire.unwrap().unknown[0];
    assert_eq!((u.path.as_str(), u.number), ("Envelope.call_tool", 9));
}

#[test]
fn unknown_arm_alone_is_an_envelope_without_arm() {
    // Arm 38 is unassigned: an Envelope holding only it decodes to "no arm", rid kept.
    let body = RawBody::default().bytes(38, &[0x0A, 0x01, b'x']).bytes(14, b"r9");
    let mut d = tool_process();
    let Some(Frame::Envelope(got)) = d.decode(&mut BytesMut::from(&body.to_frame()[..])).unwrap() else { panic!() };
    assert_eq!(got.envelope.arm(), None);
    assert_eq!(got.envelope.request_id, "r9");
    assert!(got.wire.unwrap().unknown[0].is_unknown_arm());
}

#[test]
fn two_arms_in_one_envelope_last_wins_and_both_are_reported() {
    let body = RawBody::default().bytes(2, &[]).bytes(3, &[0x0A, 1, b'a']);
    let mut d = tool_process();
    let Some(Frame::Envelope(got)) = d.decode(&mut BytesMut::from(&body.to_frame()[..])).unwrap() else { panic!() };
    assert_eq!(got.envelope.arm(), Some(Arm::CallTool));
    assert_eq!(got.wire.unwrap().arms, vec![2, 3]);
}

#[test]
fn invalid_utf8_in_a_string_is_an_error_at_its_offset_and_the_next_frame_decodes() {
    // call_tool { name: "ec\xFFo" } then a good frame.
    let bad = RawBody::default().bytes(3, &[0x0A, 4, b'e', b'c', 0xFF, b'o']).to_frame();
    let good = env::list_tools().with_rid("req-1").to_frame();
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&bad);
    buf.extend_from_slice(&good);
    let mut d = tool_process();
    let err = d.decode(&mut buf).unwrap_err();
    let FrameError::Undecodable { offset, len, error, .. } = &err else { panic!("{err:?}") };
    assert_eq!((*offset, *len), (0, 8));
    // Body: 1A 06 0A 04 65 63 FF 6F — the bad byte is at body offset 6.
    assert_eq!(error.offset, 6);
    assert_eq!(error.path, "Envelope.call_tool");
    assert!(matches!(error.kind, WireErrorKind::InvalidUtf8 { field: "name", valid_up_to: 2 }));
    assert!(err.is_recoverable());
    assert_eq!(err.violation().requirement(), "TP-FRAME-01");
    assert!(err.to_string().contains("at body byte 6"), "{err}");
    let Some(Frame::Envelope(next)) = d.decode(&mut buf).unwrap() else { panic!() };
    assert_eq!(next.envelope, env::list_tools().with_rid("req-1"));
}

#[test]
fn garbage_bodies_say_where_and_why() {
    let cases: &[(&[u8], usize, &str)] = &[
        (&[0x1A, 0x05, 0x0A], 1, "length-delimited field of 5 bytes with only 1 left"),
        (&[0x80], 0, "varint runs past the end"),
        (&[0x00], 0, "field number 0"),
        (&[0x1F], 0, "invalid wire type 7"),
        (&[0x18, 0x01], 0, "field `call_tool` has wire type 0, expected 2"),
        (&[0x98, 0x06, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02], 2, "varint longer than 10 bytes"),
    ];
    for (body, at, why) in cases {
        let mut d = tool_process();
        let err = d.decode(&mut BytesMut::from(&frame_bytes(body)[..])).unwrap_err();
        let FrameError::Undecodable { error, .. } = &err else { panic!("{body:02x?}: {err:?}") };
        assert_eq!(error.offset, *at, "{body:02x?}: {error}");
        assert!(error.kind.to_string().contains(why), "{body:02x?}: {error}");
    }
}

#[test]
fn a_lying_short_prefix_desynchronises_into_an_error_not_a_hang() {
    // The prefix claims 3 bytes of a 13-byte body; the rest is read as the next frame's prefix.
    let env = env::list_tools().with_rid("req-0");
    let body = prost::Message::encode_to_vec(&env);
    let wire = frame_with_prefix(3, &body);
    let mut d = tool_process();
    let mut buf = BytesMut::from(&wire[..]);
    let first = d.decode(&mut buf);
    assert!(first.is_err() || matches!(first, Ok(Some(_))), "the first 3 bytes are judged at once");
    // Whatever follows, the decoder either yields, errors, or asks for bytes — and at EOF it
    // must say the stream was cut.
    let mut saw_end = false;
    for _ in 0..8 {
        match d.decode_eof(&mut buf) {
            Ok(Some(_)) => continue,
            Err(e) if e.is_recoverable() => continue,
            Ok(None) | Err(_) => {
                saw_end = true;
                break;
            }
        }
    }
    assert!(saw_end);
}

#[test]
fn namespace_is_decoded_and_judged_against_the_sender() {
    let e = env::list_tools().with_rid("r").with_namespace("ns");
    assert_eq!(feed(&mut tool_process(), &[&e.to_frame()]), vec![e.clone()]);
    let Ok(Some(Frame::Envelope(d))) = tool_process().decode(&mut BytesMut::from(&e.to_frame()[..])) else { panic!() };
    assert_eq!(d.violations(Party::ToolProcess)[0].requirement(), "TP-FRAME-08");
    assert_eq!(d.violations(Party::Bridge)[0].requirement(), "BR-FRAME-06");
    let clean = env::list_tools().with_rid("r").to_frame();
    let Ok(Some(Frame::Envelope(d))) = tool_process().decode(&mut BytesMut::from(&clean[..])) else { panic!() };
    assert!(d.violations(Party::ToolProcess).is_empty());
}
