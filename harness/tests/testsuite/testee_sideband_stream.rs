//! Reference testee, large results (§11, §12): when the sideband is used, how it is described,
//! error results that must fit a frame, and chunked streams.

use std::time::Duration;

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::frame::{Frame, MAX_FRAME};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{RawHeader, StreamHeader};

/// `x` characters whose result_json is exactly `len` bytes long.
fn n_for_json_len(len: usize) -> usize {
    len - x_json(0).len()
}

/// Calls `name` and reads a sideband transfer: the header and the decoded payload.
async fn sideband(p: &mut Peer, rid: &str, name: &str, args: &str) -> (RawHeader, Vec<u8>) {
    p.call(rid, name, args).await;
    let Frame::Envelope(h) = p.frame().await else { panic!("header frame first") };
    // TP-SIDEBAND-03: empty Envelope rid; TP-SIDEBAND-02: the call rid in the body.
    assert_eq!(h.envelope.request_id, "");
    let Some(Msg::RawHeader(header)) = h.envelope.msg else { panic!("{:?}", h.envelope) };
    assert_eq!(header.request_id, rid);
    assert_eq!(header.field_name, "result_json", "TP-SIDEBAND-04");
    // TP-SIDEBAND-01/06/07: the decoder reads exactly `size` bytes and checks zstd against
    // uncompressed_size.
    let Frame::Sideband(s) = p.frame().await else { panic!("payload right after the header") };
    assert_eq!(s.header, header);
    (header, s.payload.expect("payload decodes").to_vec())
}

#[tokio::test]
async fn the_threshold_is_strictly_greater_than() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-SIDEBAND-08: 65,536 bytes stay in a frame, 65,537 go to the sideband.
    let at = n_for_json_len(65_536);
    let r = p.call_result("at", "big", &format!(r#"{{"n":{at}}}"#)).await;
    assert_eq!(r.result_json, x_json(at));
    let (h, payload) = sideband(&mut p, "over", "big", &format!(r#"{{"n":{}}}"#, at + 1)).await;
    assert_eq!(payload, x_json(at + 1).as_bytes());
    // TP-SIDEBAND-09: the payload (65,537) is above COMPRESS_THRESHOLD too.
    assert_eq!((h.compression.as_str(), h.uncompressed_size), ("zstd", 65_537));
    assert!(h.size < 65_537);
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn compression_follows_its_own_threshold() {
    let opts = Options { raw_threshold: 100, compress_threshold: 1000, ..Options::default() };
    let mut p = Peer::ready(opts).await;
    // Below COMPRESS_THRESHOLD: plain, uncompressed_size 0 (TP-SIDEBAND-07, D-10).
    let (h, payload) = sideband(&mut p, "plain", "echo", &format!(r#"{{"text":"{}"}}"#, "é".repeat(100))).await;
    assert_eq!((h.compression.as_str(), h.uncompressed_size, h.size), ("", 0, payload.len() as u64));
    let v: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(v[0]["text"], "é".repeat(100));
    let (h, payload) = sideband(&mut p, "packed", "big", r#"{"n":5000}"#).await;
    assert_eq!((h.compression.as_str(), h.uncompressed_size), ("zstd", 5027));
    assert_eq!(payload, x_json(5000).as_bytes());
    // Results that may not use the sideband stay in frames whatever their size
    // (TP-SIDEBAND-05): errors, ToolErrors, enable/disable lists, structured content.
    let r = p.call_result("e", "big_err", r#"{"n":500}"#).await;
    assert!(r.is_error && r.result_json == x_json(500));
    let r = p.call_result("s", "structured", "{}").await;
    assert!(!r.structured_content_json.is_empty());
    let r = p.call_result("t", "fail", r#"{"padding":"............................................................................................................."}"#).await;
    assert!(r.is_error);
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn a_result_too_big_for_a_frame_uses_the_sideband_whatever_the_threshold() {
    let opts = Options { raw_threshold: usize::MAX, compress_threshold: usize::MAX, ..Options::default() };
    let mut p = Peer::ready(opts).await;
    // TP-SIDEBAND-10.
    let n = MAX_FRAME as usize + 10;
    let (h, payload) = sideband(&mut p, "huge", "big", &format!(r#"{{"n":{n}}}"#)).await;
    assert_eq!((h.compression.as_str(), h.uncompressed_size), ("", 0));
    assert!(payload == x_json(n).as_bytes());
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn an_error_result_too_big_for_a_frame_is_shortened() {
    let mut p = Peer::ready(Options::default()).await;
    for n in [MAX_FRAME as usize + 1, 20_000_000] {
        // TP-SIDEBAND-11 and TP-FRAME-04 (the decoder refuses frames above MAX_FRAME).
        let r = p.call_result("e", "big_err", &format!(r#"{{"n":{n}}}"#)).await;
        assert!(r.is_error);
        assert_eq!(r.error.as_ref().map(|e| e.error_code.as_str()), Some("E_BIG"));
        let t = text(&r);
        assert!(t.len() > MAX_FRAME as usize - 1024 && t.len() < n);
        assert!(t.bytes().all(|b| b == b'x'));
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn concurrent_large_results_do_not_interleave() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-FRAME-02: two sideband transfers, a stream and small replies at once.
    p.call("b1", "big", r#"{"n":3000000}"#).await;
    p.call("b2", "big", r#"{"n":2500000}"#).await;
    p.call("s1", "stream_big", r#"{"n":400000}"#).await;
    for i in 0..20 {
        p.call(&format!("e{i}"), "echo", r#"{"text":"small"}"#).await;
    }
    let mut pending: std::collections::BTreeSet<String> =
        ["b1", "b2", "s1"].into_iter().map(String::from).chain((0..20).map(|i| format!("e{i}"))).collect();
    let mut streamed = Vec::new();
    while !pending.is_empty() {
        match p.frame().await {
            Frame::Envelope(d) => match d.envelope.msg {
                Some(Msg::RawHeader(h)) => {
                    let Frame::Sideband(s) = p.frame().await else { panic!("payload must follow its header") };
                    let n = if h.request_id == "b1" { 3_000_000 } else { 2_500_000 };
                    assert_eq!(s.payload.unwrap(), x_json(n).as_bytes());
                    assert!(pending.remove(&h.request_id));
                }
                Some(Msg::StreamHeader(_)) => {}
                Some(Msg::StreamChunk(c)) => {
                    streamed.extend_from_slice(&c.data);
                    if c.r#final {
                        assert_eq!(streamed, x_json(400_000).as_bytes());
                        assert!(pending.remove("s1"));
                    }
                }
                Some(Msg::CallResult(r)) => {
                    ok_text(&r, "small");
                    assert!(pending.remove(&d.envelope.request_id));
                }
                other => panic!("{other:?}"),
            },
            Frame::Sideband(s) => panic!("a payload without its header: {:?}", s.header),
        }
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn stream_big_sends_a_well_formed_stream() {
    let mut p = Peer::ready(Options::default()).await;
    for n in [0usize, 10, 65_509, 200_000] {
        let rid = format!("st-{n}");
        p.call(&rid, "stream_big", &format!(r#"{{"n":{n}}}"#)).await;
        let e = p.envelope().await;
        assert_eq!(e.request_id, rid, "TP-STREAM-02");
        let Some(Msg::StreamHeader(StreamHeader { field_name, total_size, chunk_size })) = e.msg else {
            panic!("{e:?}")
        };
        let want = x_json(n);
        // TP-STREAM-03/04.
        assert_eq!((field_name.as_str(), total_size, chunk_size), ("result_json", want.len() as u64, 65_536));
        let mut data = Vec::new();
        loop {
            let e = p.envelope().await;
            assert_eq!(e.request_id, rid);
            let Some(Msg::StreamChunk(c)) = e.msg else { panic!("{e:?}") };
            assert!(c.data.len() <= chunk_size as usize);
            data.extend_from_slice(&c.data);
            if c.r#final {
                break;
            }
            assert!(!c.data.is_empty());
        }
        assert_eq!(data, want.as_bytes());
    }
    // TP-STREAM-05: nothing else follows for those rids.
    p.silence(Duration::from_millis(200)).await;
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn sizes_beyond_the_large_limit_are_refused() {
    let mut p = Peer::ready(Options::default()).await;
    let n = 64 * 1024 * 1024;
    err_text(&p.call_result("b", "big", &format!(r#"{{"n":{n}}}"#)).await, "n must be between 0 and");
    err_text(&p.call_result("s", "stream_big", &format!(r#"{{"n":{n}}}"#)).await, "n must be between 0 and");
    assert_eq!(p.close().await, 0);
}
