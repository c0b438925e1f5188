//! Wire pinning: every Envelope arm, filled with non-default values, encodes to the bytes checked
//! in under `proto/testdata/arms/` and decodes back equal; and the arm table matches the field
//! numbers and tag bytes of spec §2.2, written out here by hand from the spec.
//!
//! To regenerate the checked-in bytes after a deliberate change: `PROTOMCP_BLESS=1 cargo test -p
//! protomcp-proto --test testsuite wire`, then read the diff.

use std::path::PathBuf;

use prost::Message;
use protomcp_proto::envelopes::{self, Arm, Direction, EnvelopeExt};
use protomcp_proto::pb::Envelope;
use protomcp_proto::schema::{self, FieldKind};

/// (arm, field number, tag bytes, direction) exactly as listed in spec §2.2.
const SPEC_ARMS: &[(&str, u32, &[u8], &str)] = &[
    ("reload", 1, &[0x0A], "B>T"),
    ("list_tools", 2, &[0x12], "B>T"),
    ("call_tool", 3, &[0x1A], "B>T"),
    ("reload_response", 4, &[0x22], "T>B"),
    ("tool_list", 5, &[0x2A], "T>B"),
    ("call_result", 6, &[0x32], "T>B"),
    ("enable_tools", 7, &[0x3A], "T>B"),
    ("disable_tools", 8, &[0x42], "T>B"),
    ("set_allowed", 9, &[0x4A], "T>B"),
    ("set_blocked", 10, &[0x52], "T>B"),
    ("get_active_tools", 11, &[0x5A], "T>B"),
    ("batch", 12, &[0x62], "T>B"),
    ("active_tools", 13, &[0x6A], "B>T"),
    ("progress", 16, &[0x82, 0x01], "T>B"),
    ("cancel", 17, &[0x8A, 0x01], "B>T"),
    ("log", 18, &[0x92, 0x01], "T>B"),
    ("create_task", 19, &[0x9A, 0x01], "T>B"),
    ("task_status", 20, &[0xA2, 0x01], "B>T"),
    ("task_status_response", 21, &[0xAA, 0x01], "T>B"),
    ("task_result", 22, &[0xB2, 0x01], "B>T"),
    ("task_cancel", 23, &[0xBA, 0x01], "B>T"),
    ("register_middleware", 24, &[0xC2, 0x01], "T>B"),
    ("register_middleware_response", 25, &[0xCA, 0x01], "B>T"),
    ("middleware_intercept", 26, &[0xD2, 0x01], "B>T"),
    ("middleware_intercept_response", 27, &[0xDA, 0x01], "T>B"),
    ("stream_header", 28, &[0xE2, 0x01], "T>B"),
    ("stream_chunk", 29, &[0xEA, 0x01], "T>B"),
    ("raw_header", 30, &[0xF2, 0x01], "T>B"),
    ("list_resources_request", 31, &[0xFA, 0x01], "B>T"),
    ("resource_list_response", 32, &[0x82, 0x02], "T>B"),
    ("list_resource_templates_request", 33, &[0x8A, 0x02], "B>T"),
    ("resource_template_list_response", 34, &[0x92, 0x02], "T>B"),
    ("read_resource_request", 35, &[0x9A, 0x02], "B>T"),
    ("read_resource_response", 36, &[0xA2, 0x02], "T>B"),
    ("resource_changed", 37, &[0xAA, 0x02], "T>B"),
    ("list_prompts_request", 40, &[0xC2, 0x02], "B>T"),
    ("prompt_list_response", 41, &[0xCA, 0x02], "T>B"),
    ("get_prompt_request", 42, &[0xD2, 0x02], "B>T"),
    ("get_prompt_response", 43, &[0xDA, 0x02], "T>B"),
    ("completion_request", 50, &[0x92, 0x03], "B>T"),
    ("completion_response", 51, &[0x9A, 0x03], "T>B"),
    ("sampling_request", 60, &[0xE2, 0x03], "T>B"),
    ("sampling_response", 61, &[0xEA, 0x03], "B>T"),
    ("list_roots_request", 62, &[0xF2, 0x03], "T>B"),
    ("list_roots_response", 63, &[0xFA, 0x03], "B>T"),
];

/// Message fields of spec §2.2 that carry numbers wider than a bool, with their proto types.
const SPEC_SCALARS: &[(&str, &str, u32, FieldKind)] = &[
    ("ProgressNotification", "progress", 2, FieldKind::Int64),
    ("ProgressNotification", "total", 3, FieldKind::Int64),
    ("TaskStatusResponse", "progress", 3, FieldKind::Int64),
    ("TaskStatusResponse", "total", 4, FieldKind::Int64),
    ("RegisterMiddlewareRequest", "priority", 2, FieldKind::Int32),
    ("StreamHeader", "total_size", 2, FieldKind::Uint64),
    ("StreamHeader", "chunk_size", 3, FieldKind::Uint32),
    ("StreamChunk", "data", 1, FieldKind::Bytes),
    ("RawHeader", "size", 3, FieldKind::Uint64),
    ("RawHeader", "uncompressed_size", 5, FieldKind::Uint64),
    ("ResourceDefinition", "size", 5, FieldKind::Int64),
    ("ResourceContent", "blob", 4, FieldKind::Bytes),
    ("CompletionResponse", "total", 2, FieldKind::Int32),
    ("SamplingRequest", "max_tokens", 4, FieldKind::Int32),
];

fn testdata(arm: Arm) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/arms").join(format!(
        "{:02}_{}.hex",
        arm.number(),
        arm.name()
    ))
}

/// A deterministic Envelope for `arm` with every field set.
fn pinned(arm: Arm) -> Envelope {
    let mut state = u64::from(arm.number()).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 7;
        state ^= state >> 9;
        state
    };
    envelopes::synthesize(arm, &mut next).with_rid(format!("rid-{}", arm.number()))
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .chunks(16)
        .map(|l| l.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn unhex(text: &str) -> Vec<u8> {
    text.split_whitespace().map(|h| u8::from_str_radix(h, 16).expect("hex byte")).collect()
}

#[test]
fn the_arm_table_is_the_spec_table() {
    assert_eq!(Arm::ALL.len(), 45, "45 oneof arms");
    assert_eq!(SPEC_ARMS.len(), 45);
    for (arm, (name, number, tag, dir)) in Arm::ALL.iter().zip(SPEC_ARMS) {
        assert_eq!((arm.name(), arm.number()), (*name, *number));
        let expected_dir = if *dir == "B>T" { Direction::BridgeToTool } else { Direction::ToolToBridge };
        assert_eq!(arm.direction(), expected_dir, "direction of {name}");
        let mut key = Vec::new();
        prost::encoding::encode_key(*number, prost::encoding::WireType::LengthDelimited, &mut key);
        assert_eq!(&key, tag, "tag bytes of {name}");
        let field = schema::envelope().field(*number).unwrap_or_else(|| panic!("{name} in protomcp.proto"));
        assert_eq!(field.name, *name);
        assert!(field.in_oneof, "{name} belongs to the oneof");
    }
    let env = schema::envelope();
    let rid = env.field(14).expect("request_id");
    assert_eq!((rid.name, rid.kind, rid.in_oneof), ("request_id", FieldKind::String, false));
    let ns = env.field(15).expect("namespace");
    assert_eq!((ns.name, ns.kind, ns.in_oneof), ("namespace", FieldKind::String, false));
    assert_eq!(env.fields.len(), 47, "45 arms + request_id + namespace, nothing else");
}

#[test]
fn numeric_field_types_are_the_spec_types() {
    for (msg, field, number, kind) in SPEC_SCALARS {
        let f = schema::message(msg).unwrap().field(*number).unwrap();
        assert_eq!((f.name, f.kind), (*field, *kind), "{msg}.{field}");
    }
}

#[test]
fn every_arm_encodes_to_its_checked_in_bytes_and_back() {
    let bless = std::env::var_os("PROTOMCP_BLESS").is_some();
    let mut failures = Vec::new();
    for &arm in Arm::ALL {
        let envelope = pinned(arm);
        let bytes = envelope.to_frame();
        // The frame carries the arm's tag and the rid's tag.
        let (_, _, tag, _) = SPEC_ARMS.iter().find(|(n, ..)| *n == arm.name()).unwrap();
        assert!(bytes[4..].windows(tag.len()).any(|w| w == *tag), "{} tag present", arm.name());
        let path = testdata(arm);
        if bless {
            std::fs::write(&path, hex(&bytes)).unwrap();
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            failures.push(format!("{}: missing (run with PROTOMCP_BLESS=1)", path.display()));
            continue;
        };
        let checked_in = unhex(&text);
        if checked_in != bytes.as_ref() {
            failures.push(format!("{}: our encoding changed", arm.name()));
        }
        let len = u32::from_be_bytes(checked_in[..4].try_into().unwrap()) as usize;
        assert_eq!(len, checked_in.len() - 4, "{}: prefix is the body length", arm.name());
        let decoded = Envelope::decode(&checked_in[4..]).unwrap();
        assert_eq!(decoded, envelope, "{}: decodes back equal", arm.name());
        assert_eq!(decoded.arm(), Some(arm));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_pinned_message_sets_every_field() {
    for &arm in Arm::ALL {
        let envelope = pinned(arm);
        let schema::FieldKind::Message(idx) = schema::envelope().field(arm.number()).unwrap().kind else {
            unreachable!()
        };
        let msg = &schema::MESSAGES[idx];
        // Re-scan the encoding: every declared field number of the message must occur.
        let body = envelope.encode_to_vec();
        let report = protomcp_proto::wire::scan(&bytes::Bytes::from(body.clone())).unwrap();
        assert!(report.unknown.is_empty());
        for f in msg.fields {
            let mut key = Vec::new();
            let wt = if f.kind.wire_type() == 2 {
                prost::encoding::WireType::LengthDelimited
            } else {
                prost::encoding::WireType::Varint
            };
            prost::encoding::encode_key(f.number, wt, &mut key);
            assert!(body.windows(key.len()).any(|w| w == key), "{}.{} is set", msg.name, f.name);
        }
    }
}

#[test]
fn the_spec_example_list_tools_frame_decodes_and_encodes_byte_for_byte() {
    // Spec §3: ListToolsRequest with rid "req-0", 13 bytes on the wire.
    let wire = [0x00, 0x00, 0x00, 0x09, 0x12, 0x00, 0x72, 0x05, 0x72, 0x65, 0x71, 0x2D, 0x30];
    let env = envelopes::list_tools().with_rid("req-0");
    assert_eq!(env.to_frame().as_ref(), &wire);
    assert_eq!(Envelope::decode(&wire[4..]).unwrap(), env);
}

#[test]
fn fields_are_accepted_in_any_order() {
    // The rid before the arm (upstream writers) and after it (prost) decode to the same thing.
    let rid_first = [0x72, 0x02, 0x63, 0x31, 0x1A, 0x06, 0x0A, 0x04, 0x65, 0x63, 0x68, 0x6F];
    let arm_first = [0x1A, 0x06, 0x0A, 0x04, 0x65, 0x63, 0x68, 0x6F, 0x72, 0x02, 0x63, 0x31];
    let a = Envelope::decode(&rid_first[..]).unwrap();
    let b = Envelope::decode(&arm_first[..]).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, envelopes::call_tool("echo", "").with_rid("c1"));
}
