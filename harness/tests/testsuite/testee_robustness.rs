//! Reference testee, robustness (§3, §4, §20, §25): odd frames, lost framing, end-of-file, and
//! the `--misbehave` modes.

use std::time::{Duration, Instant};

use crate::common::*;
use prost::Message;
use protomcp_harness::io::Incoming;
use protomcp_harness::testee::{self, Misbehave, Options};
use protomcp_proto::envelopes::{self as env, Arm, Direction, EnvelopeExt, RawBody};
use protomcp_proto::frame::{Frame, FrameError, MAX_FRAME, frame_bytes, frame_with_prefix};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{self, Envelope};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

async fn probe(p: &mut Peer, rid: &str) {
    ok_text(&p.call_result(rid, "echo", r#"{"text":"probe"}"#).await, "probe");
}

#[tokio::test]
async fn zero_length_frames_unset_and_unknown_arms_are_ignored() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-FRAME-05.
    p.send_raw(&[0, 0, 0, 0]).await;
    // TP-FRAME-06: no arm (with and without rid), an arm number nobody knows.
    p.send(Envelope::default().with_rid("r")).await;
    p.send_raw(&RawBody::default().bytes(99, b"\x0a\x01x").bytes(14, b"r2").to_frame()).await;
    p.send_raw(&RawBody::default().bytes(38, b"").to_frame()).await;
    p.silence(Duration::from_millis(200)).await;
    probe(&mut p, "c").await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn unknown_fields_namespace_and_field_order_do_not_matter() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-FRAME-07: unknown fields in the Envelope and inside the call.
    let call =
        pb::CallToolRequest { name: "echo".into(), arguments_json: r#"{"text":"u"}"#.into(), ..Default::default() };
    let inner = RawBody::of(&Envelope::default()).raw(&call.encode_to_vec()).varint(9, 7).fixed32(10, 1).into_bytes();
    let body = RawBody::default().bytes(3, &inner).bytes(14, b"u1").fixed64(77, 5).varint(1000, 1).to_frame();
    p.send_raw(&body).await;
    ok_text(&p.result("u1").await, "u");
    // TP-FRAME-08: a namespace is ignored, and never sent back (checked by Peer::envelope).
    p.send(env::call_tool("echo", r#"{"text":"ns"}"#).with_rid("n1").with_namespace("elsewhere")).await;
    ok_text(&p.result("n1").await, "ns");
    // TP-FRAME-09: the rid before the arm.
    let body = RawBody::default().bytes(14, b"o1").bytes(3, &call.encode_to_vec()).to_frame();
    p.send_raw(&body).await;
    ok_text(&p.result("o1").await, "u");
    // TP-FRAME-10: two arms, the last one wins.
    let two = RawBody::of(&env::list_tools().with_rid("two")).bytes(31, b"").to_frame();
    p.send_raw(&two).await;
    let e = p.envelope().await;
    assert_eq!(e.request_id, "two");
    assert!(matches!(e.msg, Some(Msg::ResourceListResponse(_))), "{e:?}");
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn undecodable_frames_are_skipped() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-FRAME-13/14: invalid UTF-8 in a string, a truncated varint, a bad wire type.
    let bad_utf8 = RawBody::default().bytes(3, &[0x0A, 2, 0xC3, 0x28]).bytes(14, b"bad").to_frame();
    p.send_raw(&bad_utf8).await;
    p.send_raw(&frame_bytes(&[0x72, 0xFF])).await;
    p.send_raw(&frame_bytes(&[0x77, 0x01])).await;
    p.send_raw(&frame_bytes(&[0xFF; 17])).await;
    p.silence(Duration::from_millis(200)).await;
    probe(&mut p, "after").await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_frame_of_exactly_max_frame_bytes_is_accepted() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-FRAME-03: pad the echo text until the body is exactly MAX_FRAME.
    let mut n = MAX_FRAME as usize - 100;
    let call = loop {
        let e = env::call_tool("echo", &format!(r#"{{"text":"{}"}}"#, "x".repeat(n))).with_rid("max");
        match e.encoded_len() {
            len if len == MAX_FRAME as usize => break e,
            len if len < MAX_FRAME as usize => n += MAX_FRAME as usize - len,
            len => n -= len - MAX_FRAME as usize,
        }
    };
    p.send(call).await;
    let (r, others) = p.any_result("max").await;
    assert!(others.is_empty());
    assert_eq!(text(&r).len(), n);
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn an_oversize_prefix_closes_at_once() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-FRAME-11/12: no waiting for 10 MiB + 1 bytes that will never come.
    let started = Instant::now();
    p.send_raw(&frame_with_prefix(MAX_FRAME + 1, b"abc")).await;
    match p.try_next(T_PROMPT).await {
        Ok(None) => {}
        other => panic!("expected end of stream, got {other:?}"),
    }
    let Peer { testee, .. } = p;
    assert_eq!(exit_within(testee, T_PROMPT).await, testee::exit::FAILURE);
    assert!(started.elapsed() < T_PROMPT);
}

#[tokio::test]
async fn end_of_file_while_idle_exits_zero() {
    // TP-CONN-08/09, before and after the handshake.
    let p = Peer::with_defaults();
    assert_eq!(p.close().await, 0);
    let p = Peer::ready(Options::default()).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn end_of_file_inside_a_frame_exits_promptly() {
    // TP-FRAME-15: in the prefix, and in the body.
    for cut in [2usize, 9] {
        let mut p = Peer::ready(Options::default()).await;
        let frame = env::call_tool("echo", r#"{"text":"cut"}"#).with_rid("c").to_frame();
        p.send_raw(&frame[..cut]).await;
        assert_eq!(p.close().await, 0);
    }
}

#[tokio::test]
async fn end_of_file_while_handlers_run_exits_promptly() {
    // TP-CONN-10: slow would run for 10 s; the testee may stop it and leave.
    let mut p = Peer::ready(Options::default()).await;
    p.call("s", "slow", r#"{"steps":100}"#).await;
    p.call("a", "ask", r#"{"question":"?"}"#).await;
    assert!(matches!(p.envelope().await.msg, Some(Msg::SamplingRequest(_))));
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn reserved_and_foreign_messages_are_ignored() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-TASK-01 and every arm only a tool process sends.
    for arm in
        Arm::ALL.iter().filter(|a| a.direction() == Direction::ToolToBridge || a.number() >= 20 && a.number() <= 23)
    {
        p.send(arm.empty_envelope().with_rid("x")).await;
    }
    // A RawHeader from the bridge is just a frame: no payload follows it (BR-SIDEBAND-10), so
    // the request behind it must not be swallowed as one.
    p.send(Envelope::from(pb::RawHeader { request_id: "c".into(), size: 1000, ..Default::default() })).await;
    p.silence(Duration::from_millis(300)).await;
    probe(&mut p, "c").await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn any_sequence_of_decodable_frames_leaves_the_testee_serving() {
    // TP-SECURITY-01/02: every arm, both directions, with every field set to odd values.
    let mut p = Peer::ready(Options::default()).await;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..3 {
        for arm in Arm::ALL {
            let e = env::synthesize(*arm, &mut next).with_rid(format!("s{round}-{}", arm.number()));
            p.send(e).await;
        }
    }
    // Everything is answered (a reload burst included); the probe gets through in the end.
    // Registrations are acknowledged (TP-SECURITY-02's proviso).
    p.send(env::call_tool("echo", r#"{"text":"probe"}"#).with_rid("probe")).await;
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "no answer to the probe");
        match p.try_next(WAIT).await {
            Ok(Some(Ok(Incoming::Frame(Frame::Envelope(d))))) => match d.envelope.msg {
                Some(Msg::CallResult(r)) if d.envelope.request_id == "probe" => {
                    ok_text(&r, "probe");
                    break;
                }
                Some(Msg::RegisterMiddleware(_)) => p.send(env::register_middleware_response(true)).await,
                _ => {}
            },
            Ok(Some(Ok(_))) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(p.close().await, 0);
}

// ---- misbehaving on purpose ----

fn misbehaving(kind: Misbehave) -> Options {
    Options { misbehave: Some(kind), ..Options::default() }
}

/// Raw bytes from the testee, up to `n`, within `within`.
async fn read_some(s: &mut UnixStream, n: usize, within: Duration) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + within;
    while got < n {
        match tokio::time::timeout_at(deadline, s.read(&mut buf[got..])).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(k)) => got += k,
            Ok(Err(e)) => panic!("{e}"),
        }
    }
    buf.truncate(got);
    buf
}

#[tokio::test]
async fn misbehave_silent_garbage_and_huge_prefix() {
    for kind in [Misbehave::Silent, Misbehave::Garbage, Misbehave::HugePrefix] {
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let testee = tokio::spawn(testee::serve(theirs, misbehaving(kind)));
        ours.write_all(&env::list_tools().with_rid("req-0").to_frame()).await.unwrap();
        let got = read_some(&mut ours, 8192, Duration::from_millis(300)).await;
        match kind {
            Misbehave::Silent => assert!(got.is_empty()),
            Misbehave::Garbage => {
                assert_eq!(got.len(), testee::misbehave::GARBAGE_LEN);
                assert!(u32::from_be_bytes([got[0], got[1], got[2], got[3]]) > MAX_FRAME);
            }
            _ => assert_eq!(got, [0xFF; 4]),
        }
        drop(ours);
        assert_eq!(exit_within(testee, T_PROMPT).await, 0, "{kind}");
    }
}

#[tokio::test]
async fn misbehave_drip_writes_one_byte_per_second() {
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let testee = tokio::spawn(testee::serve(theirs, misbehaving(Misbehave::Drip)));
    ours.write_all(&env::list_tools().with_rid("req-0").to_frame()).await.unwrap();
    assert_eq!(read_some(&mut ours, 1, Duration::from_millis(500)).await.len(), 1);
    let started = Instant::now();
    assert_eq!(read_some(&mut ours, 1, Duration::from_millis(2500)).await.len(), 1);
    assert!(started.elapsed() > Duration::from_millis(400), "{:?}", started.elapsed());
    drop(ours);
    let _ = exit_within(testee, T_PROMPT).await;
}

#[tokio::test]
async fn misbehave_wrong_rid_and_answer_twice() {
    let mut p = Peer::ready(misbehaving(Misbehave::WrongRid)).await;
    p.call("c1", "echo", r#"{"text":"x"}"#).await;
    let e = p.envelope().await;
    assert_eq!(e.request_id, "wrong-c1");
    // Other replies keep their rids.
    p.send(env::list_resources().with_rid("l")).await;
    assert_eq!(p.envelope().await.request_id, "l");
    assert_eq!(p.close().await, 0);

    let mut p = Peer::ready(misbehaving(Misbehave::AnswerTwice)).await;
    p.call("c1", "echo", r#"{"text":"x"}"#).await;
    ok_text(&p.result("c1").await, "x");
    ok_text(&p.result("c1").await, "x");
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn misbehave_crash_mid_call() {
    let mut p = Peer::ready(misbehaving(Misbehave::CrashMidCall)).await;
    probe(&mut p, "c0").await;
    p.call("c1", "slow", r#"{"steps":5}"#).await;
    assert!(matches!(p.try_next(T_PROMPT).await, Ok(None)), "the connection ends without a result");
    let Peer { testee, .. } = p;
    assert_eq!(exit_within(testee, T_PROMPT).await, testee::exit::CRASH);
}

#[tokio::test]
async fn misbehave_flood_never_stops_and_still_answers() {
    let mut p = Peer::ready(misbehaving(Misbehave::Flood)).await;
    p.call("c", "echo", r#"{"text":"x"}"#).await;
    let (mut logs, mut answered) = (0, false);
    // Far more than any bound of the harness (crate::limits), and the flood is still going.
    while logs < 200_000 || !answered {
        let e = p.envelope().await;
        match e.msg {
            Some(Msg::Log(_)) => logs += 1,
            Some(Msg::CallResult(_)) => answered = true,
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(p.envelope().await.msg, Some(Msg::Log(_))));
    assert_eq!(p.close().await, 0);
}

#[test]
fn undecodable_frames_are_what_the_decoder_calls_undecodable() {
    // Guards the premise of `undecodable_frames_are_skipped`.
    let mut d = protomcp_proto::FrameDecoder::new(protomcp_proto::Party::Bridge);
    let mut buf = bytes::BytesMut::from(&frame_bytes(&[0x72, 0xFF])[..]);
    assert!(matches!(d.decode(&mut buf), Err(FrameError::Undecodable { .. })));
}
