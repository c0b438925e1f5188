//! The codec over a real unix socket pair: what one side writes, in whatever pieces, the other
//! side reads as decoded items; malformed frames are skipped in-band; framing loss ends the stream.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use protomcp_harness::io::{CodecError, EnvelopeCodec, Incoming, Outgoing};
use protomcp_proto::envelopes::{self as env, EnvelopeExt, RawBody};
use protomcp_proto::frame::{Frame, FrameError, Limits, frame_bytes};
use protomcp_proto::sideband::{Compression, encode_sideband};
use protomcp_proto::violation::Party;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, FramedWrite};

const WAIT: Duration = Duration::from_secs(5);

async fn next(r: &mut FramedRead<UnixStream, EnvelopeCodec>) -> Option<Result<Incoming, CodecError>> {
    tokio::time::timeout(WAIT, r.next()).await.expect("an item within 5 s")
}

fn envelope(item: Option<Result<Incoming, CodecError>>) -> protomcp_proto::Envelope {
    match item {
        Some(Ok(Incoming::Frame(Frame::Envelope(d)))) => d.envelope,
        other => panic!("expected an Envelope, got {other:?}"),
    }
}

#[tokio::test]
async fn bridge_writes_tool_reads_one_byte_per_write() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut reader = FramedRead::new(a, EnvelopeCodec::new(Party::Bridge, Limits::default()));
    let call = env::call_tool("echo", r#"{"text":"hi"}"#).with_rid("req-1");
    let wire = [env::list_tools().with_rid("req-0").to_frame(), call.to_frame()].concat();
    let writer = tokio::spawn(async move {
        for byte in wire {
            b.write_all(&[byte]).await.unwrap();
            b.flush().await.unwrap();
        }
        b
    });
    assert_eq!(envelope(next(&mut reader).await), env::list_tools().with_rid("req-0"));
    assert_eq!(envelope(next(&mut reader).await), call);
    drop(writer.await.unwrap());
    assert!(next(&mut reader).await.is_none(), "clean EOF between frames ends the stream");
}

#[tokio::test]
async fn sink_sends_envelopes_and_raw_sideband_bytes() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut reader = FramedRead::new(a, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
    let mut writer = FramedWrite::new(b, EnvelopeCodec::new(Party::Bridge, Limits::default()));
    let value = b"[{\"type\":\"text\",\"text\":\"big\"}]".repeat(3000);
    writer.send(Outgoing::Envelope(env::handshake_marker())).await.unwrap();
    writer
        .send(Outgoing::Raw(encode_sideband("req-3", "result_json", &value, Compression::Zstd { level: 3 }).unwrap()))
        .await
        .unwrap();
    assert_eq!(envelope(next(&mut reader).await), env::handshake_marker());
    let _header = envelope(next(&mut reader).await);
    match next(&mut reader).await {
        Some(Ok(Incoming::Frame(Frame::Sideband(s)))) => {
            assert_eq!(s.header.request_id, "req-3");
            assert_eq!(s.payload.as_deref(), Ok(&value[..]));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_frame_is_reported_and_the_stream_goes_on() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut reader = FramedRead::new(a, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
    let garbage = RawBody::default().bytes(3, &[0x0A, 2, 0xC3, 0x28]).to_frame(); // invalid UTF-8
    b.write_all(&garbage).await.unwrap();
    b.write_all(&env::call_result_text("ok").with_rid("r1").to_frame()).await.unwrap();
    match next(&mut reader).await {
        Some(Ok(Incoming::Malformed(FrameError::Undecodable { error, .. }))) => assert_eq!(error.offset, 4),
        other => panic!("{other:?}"),
    }
    assert_eq!(envelope(next(&mut reader).await).request_id, "r1");
}

#[tokio::test]
async fn an_oversize_prefix_ends_the_stream_with_an_error() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut reader = FramedRead::new(a, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
    b.write_all(&[0xFF, 0xFF, 0xFF, 0xFF]).await.unwrap();
    match next(&mut reader).await {
        Some(Err(CodecError::Frame(FrameError::Oversize { len: u32::MAX, .. }))) => {}
        other => panic!("{other:?}"),
    }
    assert!(next(&mut reader).await.is_none());
}

#[tokio::test]
async fn eof_inside_a_frame_is_a_truncation() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let mut reader = FramedRead::new(a, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
    let frame = env::call_result_text("cut").with_rid("r").to_frame();
    b.write_all(&frame[..frame.len() - 2]).await.unwrap();
    drop(b);
    match next(&mut reader).await {
        Some(Err(CodecError::Frame(e @ FrameError::Truncated { .. }))) => {
            assert_eq!(e.violation().requirement(), "TP-FRAME-01")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_sink_refuses_an_envelope_above_the_limit_but_sends_raw_bytes_as_given() {
    let (a, b) = UnixStream::pair().unwrap();
    let limits = Limits { max_frame: 64, ..Limits::default() };
    let mut writer = FramedWrite::new(b, EnvelopeCodec::new(Party::Bridge, limits));
    let big = env::call_tool("echo", &format!(r#"{{"text":"{}"}}"#, "x".repeat(100)));
    assert!(matches!(writer.send(Outgoing::Envelope(big.clone())).await, Err(CodecError::Encode(_))));
    // A hostile scenario can still put it on the wire on purpose.
    let body = prost::Message::encode_to_vec(&big);
    writer.send(Outgoing::Raw(frame_bytes(&body))).await.unwrap();
    drop(writer);
    let mut reader = FramedRead::new(a, EnvelopeCodec::new(Party::Bridge, Limits::default()));
    assert_eq!(envelope(next(&mut reader).await), big);
}
