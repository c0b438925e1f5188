use super::*;
use crate::envelopes::{self as env, Arm, EnvelopeExt, RawBody, synthesize};
use prost::Message;
use serde_json::json;

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

#[test]
fn every_arm_round_trips_byte_for_byte() {
    for seed in 1..=8u64 {
        let mut e = rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for &arm in Arm::ALL {
            let envelope = synthesize(arm, &mut e).with_rid("req-7");
            let body = envelope.encode_to_vec();
            let tree = decode(&body).unwrap_or_else(|e| panic!("{arm:?}: {e}"));
            assert_eq!(arm_of(&tree), Some(arm.name()), "{tree}");
            assert!(tree.get(UNKNOWN_FIELDS).is_none());
            let again = encode(&tree).unwrap_or_else(|e| panic!("{arm:?}: {e}\n{tree}"));
            assert_eq!(hex_encode(&again), hex_encode(&body), "{arm:?}: {tree}");
            assert_eq!(Envelope::decode(again.as_slice()).unwrap(), envelope);
            assert_eq!(from_envelope(&envelope).unwrap(), tree);
        }
    }
}

#[test]
fn empty_arms_and_defaults() {
    let body = encode(&json!({"list_tools": {}, "request_id": "req-0"})).unwrap();
    assert_eq!(hex_encode(&body), "120072057265712d30");
    assert_eq!(decode(&body).unwrap(), json!({"list_tools": {}, "request_id": "req-0"}));
    // null is an empty message; default scalars are not written.
    let body = encode(&json!({"list_tools": null, "request_id": "", "namespace": null})).unwrap();
    assert_eq!(body, vec![0x12, 0x00]);
    assert_eq!(decode(&[]).unwrap(), json!({}));
    let body = encode(&json!({"call_result": {"is_error": false, "result_json": "", "enable_tools": []}})).unwrap();
    assert_eq!(body, vec![0x32, 0x00]);
}

#[test]
fn json_fields_take_structures() {
    let body = encode(&json!({"call_tool": {"name": "echo", "arguments_json": {"text": "hi"}}})).unwrap();
    let e = Envelope::decode(body.as_slice()).unwrap();
    assert_eq!(e, env::call_tool("echo", r#"{"text":"hi"}"#));
}

#[test]
fn negative_ints_and_ranges() {
    let body = encode(&json!({"register_middleware": {"name": "m", "priority": -1}})).unwrap();
    assert_eq!(Envelope::decode(body.as_slice()).unwrap(), env::register_middleware("m", -1));
    assert_eq!(decode(&body).unwrap()["register_middleware"]["priority"], json!(-1));
    let body = encode(&json!({"progress": {"progress": "12", "total": 9_007_199_254_740_993_i64}})).unwrap();
    assert_eq!(Envelope::decode(body.as_slice()).unwrap(), env::progress("", 12, 9_007_199_254_740_993, ""));
    let e = encode(&json!({"register_middleware": {"priority": 2_147_483_648_i64}})).unwrap_err();
    assert_eq!(e.to_string(), "register_middleware.priority: 2147483648 is out of range for int32");
    let e = encode(&json!({"raw_header": {"size": -1}})).unwrap_err();
    assert_eq!(e.to_string(), "raw_header.size: -1 is out of range for uint64");
    let e = encode(&json!({"progress": {"progress": 1.5}})).unwrap_err();
    assert!(e.to_string().starts_with("progress.progress: expected an integer"), "{e}");
}

#[test]
fn errors_name_the_path_and_the_valid_names() {
    let e = encode(&json!({"call_tool": {"name": "echo", "argument_json": "{}"}})).unwrap_err();
    assert_eq!(e.path, vec![PathSeg::Key("call_tool".into()), PathSeg::Key("argument_json".into())]);
    assert_eq!(
        e.to_string(),
        "call_tool.argument_json: CallToolRequest has no field `argument_json`; valid: name, arguments_json, progress_token, unknown_fields, field_order"
    );
    let e = encode(&json!({"tool_list": {"tools": [{"name": "a"}, {"name": 5}]}})).unwrap_err();
    assert_eq!(e.to_string(), "tool_list.tools[1].name: expected a string, found number 5");
    let e = encode(&json!({"call_tul": {}})).unwrap_err();
    assert!(e.to_string().starts_with("call_tul: Envelope has no field `call_tul`; valid: reload, list_tools"), "{e}");
    let e = encode(&json!({"stream_chunk": {"data": {"hex": "0g"}}})).unwrap_err();
    assert_eq!(e.to_string(), "stream_chunk.data.hex: invalid hex: `g` is not a hex digit");
    let e = encode(&json!({"stream_chunk": {"data": {"hex": "41", "text": "B"}}})).unwrap_err();
    assert_eq!(e.to_string(), "stream_chunk.data: `hex` and `text` disagree");
    let e = encode(&json!(["x"])).unwrap_err();
    assert_eq!(e.to_string(), "(envelope): expected an object, found a list");
}

#[test]
fn unknown_fields_and_arms_round_trip() {
    let tree = json!({
        "request_id": "r1",
        "call_tool": {"name": "echo", "unknown_fields": [{"number": 99, "varint": 7}]},
        "unknown_fields": [
            {"number": 1000, "bytes_hex": "0102"},
            {"number": 38, "fixed32": 5},
            {"number": 39, "fixed64": 6},
        ],
    });
    let body = encode(&tree).unwrap();
    assert_eq!(decode(&body).unwrap(), tree);
    // prost sees the known part only.
    assert_eq!(Envelope::decode(body.as_slice()).unwrap(), env::call_tool("echo", "").with_rid("r1"));
    // The same bytes as the RawBody builder.
    let call = RawBody::of(&Envelope::default()).raw(&[0x0a, 0x04]).raw(b"echo").varint(99, 7).into_bytes();
    let expected = RawBody::of(&Envelope::default())
        .bytes(3, &call)
        .raw(&[0x72, 0x02])
        .raw(b"r1")
        .bytes(1000, &[1, 2])
        .fixed32(38, 5)
        .fixed64(39, 6)
        .into_bytes();
    assert_eq!(hex_encode(&body), hex_encode(&expected));
}

#[test]
fn unknown_message_entries_and_groups() {
    let tree = json!({"unknown_fields": [
        {"number": 44, "message": {"name": "x"}, "type": "CallToolRequest"},
        {"number": 45, "message": {"unknown_fields": [{"number": 1, "text": "t"}]}},
        {"number": 46, "wire_type": 3, "raw_hex": "0801"},
    ]});
    let body = encode(&tree).unwrap();
    assert_eq!(hex_encode(&body), "e202030a0178ea02030a0174f3020801f402");
    let back = decode(&body).unwrap();
    assert_eq!(
        back,
        json!({"unknown_fields": [
            {"number": 44, "bytes_hex": "0a0178"},
            {"number": 45, "bytes_hex": "0a0174"},
            {"number": 46, "wire_type": 3, "raw_hex": "0801"},
        ]})
    );
    assert_eq!(encode(&back).unwrap(), body);
    // A known number inside unknown_fields is written verbatim: here a second arm.
    let body = encode(&json!({"list_tools": {}, "unknown_fields": [{"number": 2, "message": {}}]})).unwrap();
    assert_eq!(body, vec![0x12, 0x00, 0x12, 0x00]);
}

#[test]
fn several_arms_last_wins_and_field_order() {
    let tree = json!({"list_tools": {}, "call_tool": {"name": "echo"}, "request_id": "r"});
    let body = encode(&tree).unwrap();
    assert_eq!(decode(&body).unwrap(), json!({"call_tool": {"name": "echo"}, "request_id": "r"}));
    let ordered = encode(&json!({
        "list_tools": {}, "call_tool": {"name": "echo"}, "request_id": "r",
        "unknown_fields": [{"number": 99, "varint": 1}],
        "field_order": [99, "request_id", "call_tool"],
    }))
    .unwrap();
    assert_eq!(hex_encode(&ordered), "9806017201721a060a046563686f1200");
    assert_eq!(decode(&ordered).unwrap()["list_tools"], json!({}));
    assert!(decode(&ordered).unwrap().get("call_tool").is_none());
    let e = encode(&json!({"list_tools": {}, "field_order": ["request_id"]})).unwrap_err();
    assert_eq!(e.to_string(), "field_order[0]: `request_id` is not a field set in this message");
}

#[test]
fn decode_merges_like_prost() {
    // call_tool twice in a row: merged; name twice: the last wins.
    let body = [0x1a, 0x03, 0x0a, 0x01, b'a', 0x1a, 0x03, 0x12, 0x01, b'x', 0x1a, 0x03, 0x0a, 0x01, b'b'];
    let tree = decode(&body).unwrap();
    assert_eq!(tree, json!({"call_tool": {"name": "b", "arguments_json": "x"}}));
    let prost = Envelope::decode(&body[..]).unwrap();
    assert_eq!(from_envelope(&prost).unwrap(), tree);
}

#[test]
fn decode_errors() {
    assert!(decode(&[0x72, 0x05, b'a']).unwrap_err().to_string().contains("length-delimited field of 5 bytes"));
    let e = decode(&[0x1a, 0x03, 0x0a, 0x01, 0xff]).unwrap_err();
    assert_eq!(e.to_string(), "call_tool.name: at body byte 4: string is not UTF-8");
    assert!(decode(&[0x08, 0x01]).unwrap_err().to_string().contains("wire type 0, expected 2"));
    assert!(decode(&[0x00]).is_err());
    assert!(decode(&[0xfb, 0x01]).is_err(), "unterminated group");
}

#[test]
fn check_accepts_wildcards_in_scalar_positions() {
    let wild = |s: &str| s.starts_with("${");
    let tree =
        json!({"request_id": "${rid}", "progress": {"progress": "${n}"}, "stream_chunk": {"data": {"text": "${d}"}}});
    check(&tree, &wild).unwrap();
    assert!(encode(&tree).is_err());
    assert!(check(&json!({"progress": {"progres": 1}}), &wild).is_err());
}

#[test]
fn from_decoded_keeps_unknown_fields() {
    use crate::frame::{Frame, FrameDecoder};
    use crate::violation::Party;
    let body = encode(&json!({
        "call_tool": {"name": "echo", "unknown_fields": [{"number": 9, "varint": 3}]},
        "unknown_fields": [{"number": 1000, "bytes_hex": "ff"}],
    }))
    .unwrap();
    let mut buf = bytes::BytesMut::from(&crate::frame::frame_bytes(&body)[..]);
    let Some(Frame::Envelope(d)) = FrameDecoder::new(Party::Bridge).decode(&mut buf).unwrap() else { panic!() };
    assert_eq!(from_decoded(&d).unwrap(), decode(&body).unwrap());
}
