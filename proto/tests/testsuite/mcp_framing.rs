//! proto-mcp frames (`[u32 BE length][MCPMessage]`) through the generic bounded decoder, and the
//! catalogue's field numbers pinned against the byte strings the profile quotes.

use bytes::BytesMut;
use prost::Message;
use protomcp_proto::frame::{MessageDecoder, MessageFrameError, Stage, frame_bytes};
use protomcp_proto::mcp::pb::{self, mcp_message::Payload};
use protomcp_proto::mcp::{Arm, McpMessage, default_handshake};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn decode_all(chunks: &[&[u8]], max: u32) -> Vec<Result<McpMessage, MessageFrameError>> {
    let mut d = MessageDecoder::<McpMessage>::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        buf.extend_from_slice(c);
        let last = i + 1 == chunks.len();
        loop {
            let step = if last { d.decode_eof(&mut buf) } else { d.decode(&mut buf) };
            match step {
                Ok(Some(m)) => out.push(Ok(m.message)),
                Ok(None) => break,
                Err(e) => {
                    let go = e.is_recoverable();
                    out.push(Err(e));
                    if !go {
                        return out;
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_default_handshake_is_57_bytes_on_the_wire() {
    assert_eq!(default_handshake(1).to_frame().len(), 57);
}

#[test]
fn the_profiles_15_byte_initialize_decodes_to_version_1_0_0_with_id_1() {
    let got = decode_all(&[&hex("0000000b 0801 1207 0a05 312e302e30")], 1 << 20);
    let Ok(m) = &got[0] else { panic!("{got:?}") };
    assert_eq!(m.id, 1);
    let Some(Payload::InitializeRequest(r)) = &m.payload else { panic!("{m:?}") };
    assert_eq!(r.protocol_version, "1.0.0");
    assert!(r.capabilities.is_none());
}

#[test]
fn every_arm_has_the_catalogues_tag_byte() {
    for arm in Arm::ALL {
        let tag = (arm.number() << 3) | 2;
        let payload = match arm {
            Arm::InitializeRequest => Payload::InitializeRequest(Default::default()),
            Arm::InitializeResponse => Payload::InitializeResponse(Default::default()),
            Arm::ListToolsRequest => Payload::ListToolsRequest(Default::default()),
            Arm::ListToolsResponse => Payload::ListToolsResponse(Default::default()),
            Arm::CallToolRequest => Payload::CallToolRequest(Default::default()),
            Arm::CallToolResponse => Payload::CallToolResponse(Default::default()),
            Arm::ListResourcesRequest => Payload::ListResourcesRequest(Default::default()),
            Arm::ListResourcesResponse => Payload::ListResourcesResponse(Default::default()),
            Arm::ReadResourceRequest => Payload::ReadResourceRequest(Default::default()),
            Arm::ReadResourceResponse => Payload::ReadResourceResponse(Default::default()),
            Arm::ErrorResponse => Payload::ErrorResponse(Default::default()),
        };
        let m = McpMessage::with(0, payload);
        assert_eq!(m.encode_to_vec(), vec![tag as u8, 0], "{arm}");
        assert_eq!(m.arm(), Some(arm));
    }
}

#[test]
fn frames_split_at_every_point_decode_the_same() {
    let mut wire = default_handshake(1).to_frame().to_vec();
    wire.extend_from_slice(&hex("00000000"));
    wire.extend_from_slice(&McpMessage::with(2, Payload::ListToolsRequest(Default::default())).to_frame());
    let whole = decode_all(&[&wire], 1 << 20);
    assert_eq!(whole.len(), 3);
    for cut in 0..=wire.len() {
        assert_eq!(decode_all(&[&wire[..cut], &wire[cut..]], 1 << 20), whole, "cut at {cut}");
    }
}

#[test]
fn unknown_fields_inside_and_outside_the_oneof_are_ignored() {
    let body = hex("0805 2205 7a037a7a7a a00107");
    let got = decode_all(&[&frame_bytes(&body)], 1 << 20);
    assert_eq!(got, vec![Ok(McpMessage::with(5, Payload::ListToolsRequest(pb::ListToolsRequest::default())))]);
}

#[test]
fn an_undecodable_body_is_skipped_and_the_next_frame_still_decodes() {
    let mut wire = hex("00000005 0802 22ffff");
    wire.extend_from_slice(&hex("00000004 0803 2200"));
    let got = decode_all(&[&wire], 1 << 20);
    assert!(matches!(&got[0], Err(MessageFrameError::Undecodable { offset: 0, len: 5, .. })), "{got:?}");
    assert_eq!(got[1].as_ref().unwrap().id, 3);
}

#[test]
fn an_oversize_prefix_fails_before_anything_is_reserved_and_stays_failed() {
    let mut d = MessageDecoder::<McpMessage>::new(1 << 20);
    let mut buf = BytesMut::from(&hex("7fffffff 00")[..]);
    let e = d.decode(&mut buf).unwrap_err();
    assert_eq!(e, MessageFrameError::Oversize { offset: 0, len: 0x7fff_ffff, max: 1 << 20 });
    assert!(buf.capacity() < 1024, "nothing reserved for the announced length");
    assert_eq!(d.decode(&mut buf).unwrap_err(), e);
}

#[test]
fn eof_inside_a_frame_is_truncation_with_what_arrived() {
    let got = decode_all(&[&hex("00000010 0802")], 1 << 20);
    assert_eq!(got, vec![Err(MessageFrameError::Truncated { offset: 0, stage: Stage::Body, have: 6, need: 20 })]);
}
