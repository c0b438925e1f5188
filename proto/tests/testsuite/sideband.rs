//! SIDEBAND and STREAM: large results outside a CallToolResponse, decoded within limits.

use bytes::BytesMut;
use protomcp_proto::envelopes::{EnvelopeExt, RawBody};
use protomcp_proto::frame::{Frame, FrameDecoder, FrameError, Limits, Stage};
use protomcp_proto::pb::{Envelope, RawHeader, StreamChunk, StreamHeader};
use protomcp_proto::sideband::{
    Compression, SidebandError, StreamAssembler, StreamError, StreamEvent, StreamLimits, decompress_bounded,
    encode_sideband, encode_stream, sideband_violations,
};
use protomcp_proto::violation::{Party, Rule};

fn decode_all(limits: Limits, chunks: &[&[u8]]) -> Vec<Frame> {
    let mut d = FrameDecoder::with_limits(Party::ToolProcess, limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        while let Some(item) = d.decode(&mut buf).unwrap() {
            out.push(item);
        }
    }
    while let Some(item) = d.decode_eof(&mut buf).unwrap() {
        out.push(item);
    }
    out
}

fn payload_of(items: &[Frame]) -> &Result<bytes::Bytes, SidebandError> {
    match items.last() {
        Some(Frame::Sideband(s)) => &s.payload,
        other => panic!("expected a sideband payload, got {other:?}"),
    }
}

/// Spec §11, byte example 1: call rid "c1", 10-byte uncompressed payload.
const EXAMPLE_1_HEADER: [u8; 26] = [
    0x00, 0x00, 0x00, 0x16, 0xF2, 0x01, 0x13, 0x0A, 0x02, 0x63, 0x31, 0x12, 0x0B, 0x72, 0x65, 0x73, 0x75, 0x6C, 0x74,
    0x5F, 0x6A, 0x73, 0x6F, 0x6E, 0x18, 0x0A,
];

#[test]
fn spec_example_1_encodes_byte_for_byte() {
    let wire = encode_sideband("c1", "result_json", b"[1,2,3,45]", Compression::None).unwrap();
    assert_eq!(&wire[..26], &EXAMPLE_1_HEADER);
    assert_eq!(&wire[26..], b"[1,2,3,45]");
}

#[test]
fn spec_example_1_decodes_then_the_next_frame_follows() {
    let mut wire = EXAMPLE_1_HEADER.to_vec();
    wire.extend_from_slice(b"[1,2,3,45]");
    wire.extend_from_slice(&protomcp_proto::envelopes::list_tools().with_rid("n").to_frame());
    let items = decode_all(Limits::default(), &[&wire]);
    let [Frame::Envelope(h), Frame::Sideband(s), Frame::Envelope(next)] = items.as_slice() else { panic!("{items:?}") };
    assert_eq!(h.envelope.request_id, "", "the Envelope rid stays empty");
    assert_eq!(s.header.request_id, "c1");
    assert_eq!(s.offset, 26);
    assert_eq!(s.payload.as_deref(), Ok(&b"[1,2,3,45]"[..]));
    assert_eq!(next.envelope.request_id, "n");
    assert_eq!(next.offset, 36, "spec: the next frame starts at 0x24");
}

#[test]
fn spec_example_2_header_bytes() {
    // N = 36, rid "req-7", size 206, zstd, uncompressed_size 70030.
    let header = RawHeader {
        request_id: "req-7".into(),
        field_name: "result_json".into(),
        size: 206,
        compression: "zstd".into(),
        uncompressed_size: 70030,
    };
    let expected: &[u8] = &[
        0x00, 0x00, 0x00, 0x24, 0xF2, 0x01, 0x21, 0x0A, 0x05, 0x72, 0x65, 0x71, 0x2D, 0x37, 0x12, 0x0B, 0x72, 0x65,
        0x73, 0x75, 0x6C, 0x74, 0x5F, 0x6A, 0x73, 0x6F, 0x6E, 0x18, 0xCE, 0x01, 0x22, 0x04, 0x7A, 0x73, 0x74, 0x64,
        0x28, 0x8E, 0xA3, 0x04,
    ];
    assert_eq!(Envelope::from(header).to_frame().as_ref(), expected);
}

#[test]
fn zstd_payload_split_at_every_byte_decodes() {
    let value = format!("[{{\"type\":\"text\",\"text\":\"{}\"}}]", "x".repeat(70_000));
    let wire = encode_sideband("req-7", "result_json", value.as_bytes(), Compression::Zstd { level: 3 }).unwrap();
    assert!(wire.len() < 1000, "70 kB of x compress well");
    for cut in 0..wire.len() {
        let items = decode_all(Limits::default(), &[&wire[..cut], &wire[cut..]]);
        assert_eq!(payload_of(&items).as_deref(), Ok(value.as_bytes()), "cut at {cut}");
    }
}

#[test]
fn zero_size_payload() {
    let wire = encode_sideband("c1", "result_json", b"", Compression::None).unwrap();
    let items = decode_all(Limits::default(), &[&wire]);
    assert_eq!(payload_of(&items).as_deref(), Ok(&b""[..]));
}

#[test]
fn payload_cut_off_by_eof() {
    let wire = encode_sideband("c1", "result_json", b"0123456789", Compression::None).unwrap();
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::from(&wire[..wire.len() - 4]);
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    assert_eq!(d.decode(&mut buf), Ok(None));
    let err = d.decode_eof(&mut buf).unwrap_err();
    assert!(
        matches!(err, FrameError::Truncated { stage: Stage::SidebandPayload, have: 6, need: 10, offset: 26, .. }),
        "{err:?}"
    );
    assert_eq!(err.violation().requirement(), "TP-SIDEBAND-01");
}

#[test]
fn oversize_payload_fails_at_once_then_is_skipped_without_buffering() {
    let limits = Limits { max_sideband: 100, ..Limits::default() };
    let header = Envelope::from(protomcp_proto::fuzzing::raw_header("c1", 5000, "", 0)).to_frame();
    let mut d = FrameDecoder::with_limits(Party::ToolProcess, limits);
    let mut buf = BytesMut::from(&header[..]);
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    // Reported before a single payload byte arrived.
    let Ok(Some(Frame::Sideband(s))) = d.decode(&mut buf) else { panic!() };
    assert_eq!(s.payload, Err(SidebandError::TooLarge { size: 5000, limit: 100 }));
    for _ in 0..50 {
        buf.extend_from_slice(&[b'x'; 100]);
        assert_eq!(d.decode(&mut buf), Ok(None));
        assert!(buf.is_empty(), "skipped bytes are not kept");
    }
    buf.extend_from_slice(&protomcp_proto::envelopes::list_tools().with_rid("after").to_frame());
    let Ok(Some(Frame::Envelope(next))) = d.decode(&mut buf) else { panic!() };
    assert_eq!(next.envelope.request_id, "after", "framing intact after the skipped payload");
}

#[test]
fn unknown_compression_fails_the_payload_not_the_stream() {
    let header = Envelope::from(protomcp_proto::fuzzing::raw_header("c1", 3, "gzip", 0)).to_frame();
    let mut wire = header.to_vec();
    wire.extend_from_slice(b"abc");
    wire.extend_from_slice(&protomcp_proto::envelopes::list_tools().to_frame());
    let items = decode_all(Limits::default(), &[&wire]);
    let Frame::Sideband(s) = &items[1] else { panic!() };
    assert_eq!(s.payload, Err(SidebandError::UnknownCompression("gzip".into())));
    assert_eq!(items.len(), 3);
    let v = sideband_violations("", &s.header, &s.payload, Party::ToolProcess);
    assert_eq!(v[0].requirement(), "TP-SIDEBAND-14");
}

#[test]
fn zstd_garbage_and_size_mismatch() {
    assert!(matches!(decompress_bounded(&[0x28, 0xB5, 0x2F, 0xFD, 1, 2, 3], 0, 1 << 20), Err(SidebandError::Zstd(_))));
    let z = zstd::bulk::compress(b"hello world", 3).unwrap();
    assert_eq!(decompress_bounded(&z, 11, 1 << 20).as_deref(), Ok(&b"hello world"[..]));
    assert_eq!(decompress_bounded(&z, 0, 1 << 20).as_deref(), Ok(&b"hello world"[..]), "0 = size not announced");
    assert_eq!(decompress_bounded(&z, 12, 1 << 20), Err(SidebandError::SizeMismatch { declared: 12, actual: 11 }));
    assert_eq!(decompress_bounded(&z, 5, 1 << 20), Err(SidebandError::SizeMismatch { declared: 5, actual: 11 }));
}

#[test]
fn zstd_without_content_size_or_checksum_decodes() {
    // A streaming encoder that records neither content size nor checksum (BR-SIDEBAND-04).
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 19).unwrap();
    enc.include_contentsize(false).unwrap();
    enc.include_checksum(false).unwrap();
    std::io::Write::write_all(&mut enc, &b"abc".repeat(50_000)).unwrap();
    let z = enc.finish().unwrap();
    assert_eq!(decompress_bounded(&z, 150_000, 1 << 20).unwrap().len(), 150_000);
}

#[test]
fn a_zip_bomb_stops_at_the_limit() {
    let zeros = vec![0u8; 8 << 20];
    let bomb = zstd::bulk::compress(&zeros, 19).unwrap();
    assert!(bomb.len() < 1024, "8 MiB of zeros in {} bytes", bomb.len());
    assert_eq!(decompress_bounded(&bomb, 0, 1 << 20), Err(SidebandError::DecompressedTooLarge { limit: 1 << 20 }));
    assert_eq!(
        decompress_bounded(&bomb, 2 << 20, 1 << 20),
        Err(SidebandError::DecompressedTooLarge { limit: 1 << 20 }),
        "an announced size above the limit is refused before decoding"
    );
    assert_eq!(decompress_bounded(&bomb, 8 << 20, 64 << 20).unwrap().len(), 8 << 20, "within limits it is legal");
}

#[test]
fn header_rules_are_reported_against_the_sender() {
    let h = RawHeader {
        request_id: "c1".into(),
        field_name: "content".into(),
        size: 2,
        compression: String::new(),
        uncompressed_size: 2,
    };
    let v = sideband_violations("c1", &h, &Ok(bytes::Bytes::from_static(b"[]")), Party::ToolProcess);
    let ids: Vec<&str> = v.iter().map(|v| v.requirement()).collect();
    assert_eq!(ids, ["TP-SIDEBAND-03", "TP-SIDEBAND-04", "TP-SIDEBAND-07"]);
    assert_eq!(v[0].level(), protomcp_proto::violation::Level::Should);
    let from_bridge = sideband_violations("", &h, &Ok(bytes::Bytes::new()), Party::Bridge);
    assert_eq!(from_bridge[0].requirement(), "BR-SIDEBAND-10");
}

#[test]
fn raw_header_with_unknown_fields_still_switches_to_the_payload() {
    let body = RawBody::of(&Envelope::from(protomcp_proto::fuzzing::raw_header("c1", 2, "", 0))).varint(77, 1);
    let mut wire = body.to_frame().to_vec();
    wire.extend_from_slice(b"[]");
    let items = decode_all(Limits::default(), &[&wire]);
    assert_eq!(payload_of(&items).as_deref(), Ok(&b"[]"[..]));
}

// ---- STREAM ----

fn assembler() -> StreamAssembler {
    StreamAssembler::new(Party::ToolProcess, StreamLimits::default())
}

#[test]
fn spec_stream_example_decodes() {
    // Spec §12, written rid-first as upstream encoders do.
    let frames: [&[u8]; 4] = [
        &[
            0x00, 0x00, 0x00, 0x18, 0x72, 0x02, 0x63, 0x31, 0xE2, 0x01, 0x11, 0x0A, 0x0B, 0x72, 0x65, 0x73, 0x75, 0x6C,
            0x74, 0x5F, 0x6A, 0x73, 0x6F, 0x6E, 0x10, 0x0A, 0x18, 0x04,
        ],
        &[0x00, 0x00, 0x00, 0x0D, 0x72, 0x02, 0x63, 0x31, 0xEA, 0x01, 0x06, 0x0A, 0x04, 0x30, 0x31, 0x32, 0x33],
        &[0x00, 0x00, 0x00, 0x0D, 0x72, 0x02, 0x63, 0x31, 0xEA, 0x01, 0x06, 0x0A, 0x04, 0x34, 0x35, 0x36, 0x37],
        &[0x00, 0x00, 0x00, 0x0D, 0x72, 0x02, 0x63, 0x31, 0xEA, 0x01, 0x06, 0x0A, 0x02, 0x38, 0x39, 0x10, 0x01],
    ];
    let items = decode_all(Limits::default(), &frames);
    let mut asm = assembler();
    let events: Vec<StreamEvent> = items
        .iter()
        .map(|i| match i {
            Frame::Envelope(d) => asm.handle(&d.envelope).unwrap(),
            _ => panic!(),
        })
        .collect();
    let StreamEvent::Complete { rid, field_name, data, violations } = events.last().unwrap() else {
        panic!("{events:?}")
    };
    assert_eq!((rid.as_str(), field_name.as_str(), &data[..]), ("c1", "result_json", &b"0123456789"[..]));
    assert!(violations.is_empty());
    // Our encoder produces the same Envelopes.
    let ours = encode_stream("c1", "result_json", b"0123456789", 4, true);
    let theirs: Vec<Envelope> =
        items.iter().map(|i| if let Frame::Envelope(d) = i { d.envelope.clone() } else { panic!() }).collect();
    assert_eq!(ours, theirs);
}

#[test]
fn interleaved_streams_assemble_independently() {
    let a = encode_stream("a", "result_json", b"AAAAAAAAAA", 3, false);
    let b = encode_stream("b", "structured_content_json", b"{\"k\":1}", 2, true);
    let mut asm = assembler();
    let mut done = Vec::new();
    let noise = protomcp_proto::envelopes::progress("tok", 1, 2, "");
    for i in 0..a.len().max(b.len()) {
        for e in [a.get(i), Some(&noise), b.get(i)].into_iter().flatten() {
            if let Some(StreamEvent::Complete { rid, data, .. }) = asm.handle(e) {
                done.push((rid, data));
            }
        }
    }
    done.sort();
    assert_eq!(
        done,
        vec![
            ("a".into(), bytes::Bytes::from_static(b"AAAAAAAAAA")),
            ("b".into(), bytes::Bytes::from_static(b"{\"k\":1}"))
        ]
    );
    assert_eq!(asm.buffered(), 0);
}

#[test]
fn empty_value_is_one_empty_final_chunk() {
    let frames = encode_stream("c", "result_json", b"", 8, true);
    assert_eq!(frames.len(), 2);
    let mut asm = assembler();
    asm.handle(&frames[0]);
    assert!(matches!(asm.handle(&frames[1]), Some(StreamEvent::Complete { data, .. }) if data.is_empty()));
}

#[test]
fn chunk_without_header_is_an_orphan() {
    let chunk = Envelope::from(StreamChunk { data: "x".into(), r#final: true }).with_rid("nobody");
    let Some(StreamEvent::Orphan { violation, .. }) = assembler().handle(&chunk) else { panic!() };
    assert_eq!(violation.requirement(), "TP-STREAM-02");
}

#[test]
fn unknown_field_name_fails_the_call() {
    let h = Envelope::from(StreamHeader { field_name: "content".into(), total_size: 0, chunk_size: 4 }).with_rid("c");
    let Some(StreamEvent::Failed { error, violations, .. }) = assembler().handle(&h) else { panic!() };
    assert_eq!(error, StreamError::UnknownField("content".into()));
    assert_eq!(violations[0].requirement(), "TP-STREAM-03");
}

#[test]
fn total_size_mismatch_fails_and_oversize_chunks_are_flagged() {
    let mut asm = assembler();
    asm.handle(
        &Envelope::from(StreamHeader { field_name: "result_json".into(), total_size: 99, chunk_size: 2 }).with_rid("c"),
    );
    asm.handle(&Envelope::from(StreamChunk { data: "abcd".into(), r#final: false }).with_rid("c"));
    let Some(StreamEvent::Failed { error, violations, .. }) =
        asm.handle(&Envelope::from(StreamChunk { data: "e".into(), r#final: true }).with_rid("c"))
    else {
        panic!()
    };
    assert_eq!(error, StreamError::TotalMismatch { declared: 99, actual: 5 });
    let rules: Vec<Rule> = violations.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        [Rule::StreamSizes, Rule::StreamField, Rule::StreamSizes],
        "chunk > chunk_size, then data lost (abcde is no JSON value), then total_size"
    );
    assert_eq!(asm.buffered(), 0);
}

#[test]
fn a_stream_short_of_its_total_whose_data_is_cut_json_names_lost_data_first() {
    let header =
        Envelope::from(StreamHeader { field_name: "result_json".into(), total_size: 30, chunk_size: 64 }).with_rid("c");
    let reqs = |data: &'static str| {
        let mut asm = assembler();
        asm.handle(&header);
        let Some(StreamEvent::Failed { violations, .. }) =
            asm.handle(&Envelope::from(StreamChunk { data: data.into(), r#final: true }).with_rid("c"))
        else {
            panic!()
        };
        violations.iter().map(|v| v.requirement()).collect::<Vec<_>>()
    };
    assert_eq!(reqs(r#"[{"type":"text","text":"x"#), ["TP-STREAM-03", "TP-STREAM-04"]);
    // A whole value under a total that is merely wrong: TP-STREAM-04 alone.
    assert_eq!(reqs("[]"), ["TP-STREAM-04"]);
}

#[test]
fn a_huge_total_size_reserves_nothing_and_growth_past_the_limit_fails() {
    let limits = StreamLimits { max_stream: 10, ..StreamLimits::default() };
    let mut asm = StreamAssembler::new(Party::ToolProcess, limits);
    asm.handle(
        &Envelope::from(StreamHeader { field_name: "result_json".into(), total_size: u64::MAX, chunk_size: 8 })
            .with_rid("c"),
    );
    assert_eq!(asm.buffered(), 0);
    asm.handle(&Envelope::from(StreamChunk { data: "12345678".into(), r#final: false }).with_rid("c"));
    let Some(StreamEvent::Failed { error, .. }) =
        asm.handle(&Envelope::from(StreamChunk { data: "9ab".into(), r#final: false }).with_rid("c"))
    else {
        panic!()
    };
    assert_eq!(error, StreamError::TooLarge { limit: 10 });
    assert_eq!((asm.buffered(), asm.open_streams()), (0, 0));
}

#[test]
fn connection_end_fails_every_open_stream() {
    let mut asm = assembler();
    for rid in ["x", "y"] {
        asm.handle(&encode_stream(rid, "result_json", b"abcdef", 2, true)[0]);
        asm.handle(&encode_stream(rid, "result_json", b"abcdef", 2, true)[1]);
    }
    let events = asm.abort_all("connection closed");
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| matches!(e, StreamEvent::Failed { error: StreamError::Aborted { .. }, .. })));
    assert_eq!(asm.buffered(), 0);
}

#[test]
fn streams_from_the_bridge_break_br_stream_08() {
    let mut asm = StreamAssembler::new(Party::Bridge, StreamLimits::default());
    let Some(StreamEvent::Progress { .. }) = asm.handle(&encode_stream("c", "result_json", b"a", 1, true)[0]) else {
        panic!()
    };
    let Some(StreamEvent::Complete { violations, .. }) =
        asm.handle(&encode_stream("c", "result_json", b"a", 1, true)[1])
    else {
        panic!()
    };
    assert_eq!(violations[0].requirement(), "BR-STREAM-08");
}

#[test]
fn a_raw_header_from_the_bridge_is_an_ordinary_frame() {
    // Sideband payloads only flow from a tool process; a bridge's RawHeader has no payload.
    let mut wire = Envelope::from(protomcp_proto::fuzzing::raw_header("c1", 5, "", 0)).to_frame().to_vec();
    wire.extend_from_slice(&protomcp_proto::envelopes::list_tools().with_rid("next").to_frame());
    let mut d = FrameDecoder::new(Party::Bridge);
    let mut buf = BytesMut::from(&wire[..]);
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    let Ok(Some(Frame::Envelope(next))) = d.decode(&mut buf) else { panic!("the next frame, not a payload") };
    assert_eq!(next.envelope.request_id, "next");
}

/// `[RawHeader announcing `size`][payload]`: a header that may lie about the payload after it.
fn lying_sideband(size: u64, compression: &str, payload: &[u8]) -> Vec<u8> {
    let header = RawHeader {
        request_id: "c1".into(),
        field_name: "result_json".into(),
        size,
        compression: compression.into(),
        uncompressed_size: 0,
    };
    let mut wire = Envelope::from(header).to_frame().to_vec();
    wire.extend_from_slice(payload);
    wire
}

#[test]
fn a_plain_payload_shorter_than_announced_is_named_when_the_next_frame_arrives() {
    let text = br#"[{"type":"text","text":"short"}]"#;
    let next = protomcp_proto::envelopes::list_tools().with_rid("after").to_frame();
    // Announced 10 bytes more than sent: the next frame's bytes would complete it.
    let mut wire = lying_sideband(text.len() as u64 + 10, "", text);
    wire.extend_from_slice(&next);
    // Byte by byte, and all at once: the same items.
    let one: Vec<&[u8]> = wire.chunks(1).collect();
    for chunks in [vec![&wire[..]], one] {
        let items = decode_all(Limits::default(), &chunks);
        assert_eq!(items.len(), 3, "{items:?}");
        let Frame::Sideband(s) = &items[1] else { panic!("{:?}", items[1]) };
        assert_eq!(s.payload, Err(SidebandError::Short { size: text.len() as u64 + 10, actual: text.len() as u64 }));
        let v = sideband_violations("", &s.header, &s.payload, Party::ToolProcess);
        assert_eq!(v.iter().map(|v| v.requirement()).collect::<Vec<_>>(), ["TP-SIDEBAND-01"]);
        let Frame::Envelope(d) = &items[2] else { panic!("{:?}", items[2]) };
        assert_eq!(d.envelope.request_id, "after", "the frame after the short payload is read in frame");
    }
}

#[test]
fn a_zstd_payload_shorter_than_announced_ends_where_its_zstd_frame_ends() {
    let z = zstd::bulk::compress(&br#"[{"type":"text","text":"yyyyyyyyyyyyyyyyyyyy"}]"#.repeat(50), 3).unwrap();
    let next = protomcp_proto::envelopes::list_tools().with_rid("after").to_frame();
    let mut wire = lying_sideband(z.len() as u64 + 3, "zstd", &z);
    wire.extend_from_slice(&next);
    let items = decode_all(Limits::default(), &[&wire]);
    let Frame::Sideband(s) = &items[1] else { panic!("{items:?}") };
    assert_eq!(s.payload, Err(SidebandError::Short { size: z.len() as u64 + 3, actual: z.len() as u64 }));
    assert!(matches!(&items[2], Frame::Envelope(d) if d.envelope.request_id == "after"), "{items:?}");
}

#[test]
fn a_payload_of_the_announced_length_is_never_cut_whatever_it_holds() {
    // NUL bytes and a would-be frame inside a payload of the right length (not JSON: a bridge
    // takes plain payloads verbatim, BR-SIDEBAND-04): delivered whole, as announced.
    let inner = protomcp_proto::envelopes::list_tools().with_rid("inside").to_frame();
    let mut payload = b"[1,".to_vec();
    payload.extend_from_slice(&inner);
    let wire = lying_sideband(payload.len() as u64, "", &payload);
    let items = decode_all(Limits::default(), &[&wire]);
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(payload_of(&items).as_deref(), Ok(&payload[..]));
    // A NUL that starts no frame: read on to the announced length.
    let wire = lying_sideband(8, "", b"ab\0\0\0\xffcd");
    let items = decode_all(Limits::default(), &[&wire]);
    assert_eq!(payload_of(&items).as_deref(), Ok(&b"ab\0\0\0\xffcd"[..]));
}

#[test]
fn a_payload_longer_than_announced_is_named_by_the_prefix_that_follows_it() {
    let text = br#"[{"type":"text","text":"longer"}]"#;
    // Announced 4 bytes fewer than sent: `"}]` and more are read as the next length prefix.
    let wire = lying_sideband(text.len() as u64 - 4, "", text);
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::from(&wire[..]);
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Sideband(_)))));
    let err = d.decode(&mut buf).unwrap_err();
    assert!(matches!(err, FrameError::Oversize { .. }), "{err:?}");
    let v = d.violation_of(&err);
    assert_eq!((v.rule, v.requirement()), (Rule::SidebandSize, "TP-SIDEBAND-01"), "{v}");
    assert!(v.detail.contains("longer than its RawHeader.size"), "{v}");
    // The same prefix anywhere else is an oversize frame (TP-FRAME-04).
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::from(&b"\xff\xff\xff\xff"[..]);
    let err = d.decode(&mut buf).unwrap_err();
    assert_eq!(d.violation_of(&err).requirement(), "TP-FRAME-04");
}

#[test]
fn a_frame_between_a_raw_header_and_its_payload_is_named_as_interleaved_frames() {
    // The RawHeader frame, then another frame's prefix, then the payload, then that frame's body.
    let text = br#"[{"type":"text","text":"xxxxxxxxxxxxxxxxxxxxxxxx"}]"#;
    let other = protomcp_proto::envelopes::call_result_text("between").with_rid("c2").to_frame();
    let mut wire = lying_sideband(text.len() as u64, "", b"");
    wire.extend_from_slice(&other[..4]);
    wire.extend_from_slice(text);
    wire.extend_from_slice(&other[4..]);
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::from(&wire[..]);
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Sideband(_)))));
    let err = d.decode(&mut buf).unwrap_err();
    let v = d.violation_of(&err);
    assert_eq!((v.rule, v.requirement()), (Rule::FramesInterleaved, "TP-FRAME-02"), "{v}");
    assert!(v.detail.contains("written between the RawHeader frame and its payload"), "{v}");
}

#[test]
fn what_a_decoder_waits_for_is_told_with_its_counts() {
    let wire = lying_sideband(100, "", b"[1,2,3]");
    let mut d = FrameDecoder::new(Party::ToolProcess);
    let mut buf = BytesMut::from(&wire[..]);
    assert!(matches!(d.decode(&mut buf), Ok(Some(Frame::Envelope(_)))));
    assert_eq!(d.decode(&mut buf), Ok(None));
    let u = d.unfinished(buf.len()).expect("a payload begun");
    assert_eq!((u.stage, u.have, u.need), (Stage::SidebandPayload, 7, 100));
    assert!(u.to_string().contains("has 7 of the 100 bytes its RawHeader.size announced"), "{u}");
    let mut idle = FrameDecoder::new(Party::ToolProcess);
    assert_eq!(idle.decode(&mut BytesMut::new()), Ok(None));
    assert_eq!(idle.unfinished(0), None);
}

#[test]
fn chunks_past_the_announced_total_fail_the_stream_when_they_arrive() {
    let mut asm = assembler();
    asm.handle(
        &Envelope::from(StreamHeader { field_name: "result_json".into(), total_size: 5, chunk_size: 4 }).with_rid("c"),
    );
    assert!(matches!(
        asm.handle(&Envelope::from(StreamChunk { data: "abcd".into(), r#final: false }).with_rid("c")),
        Some(StreamEvent::Progress { .. })
    ));
    assert_eq!(asm.open(), [("c".to_owned(), 4, 5)]);
    // 8 bytes of a stream that announced 5: failed at once, not at the final chunk.
    let Some(StreamEvent::Failed { error, violations, .. }) =
        asm.handle(&Envelope::from(StreamChunk { data: "efgh".into(), r#final: false }).with_rid("c"))
    else {
        panic!()
    };
    assert_eq!(error, StreamError::TotalMismatch { declared: 5, actual: 8 });
    assert_eq!(violations.iter().map(|v| v.requirement()).collect::<Vec<_>>(), ["TP-STREAM-04"]);
    assert_eq!((asm.buffered(), asm.open_streams()), (0, 0));
}
