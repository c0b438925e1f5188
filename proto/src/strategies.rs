//! proptest strategies for Envelopes and session ops (cargo feature `proptest`).
//!
//! - [`envelope`]: any arm (both directions, reserved ones too) with its fields drawn from valid
//!   and boundary values: empty and huge strings, non-ASCII, valid and invalid JSON in `*_json`
//!   fields, extreme integers; rids empty, plain, long, non-ASCII or with control characters;
//! - [`envelope_for`]: the same for one arm; [`to_tool`] / [`to_bridge`]: only the arms a bridge
//!   (resp. a tool process) sends, so "wrong direction" is `to_tool` from the other side;
//! - [`hostile_body`]: encoded bodies with unknown fields, unknown arms, several arms, no arm;
//! - [`op`] / [`ops`]: [`session::Op`]s for the session model (duplicate rids, cancellations,
//!   noise), shrinking towards plain `echo` calls.

use proptest::prelude::*;
use proptest::sample::select;

use crate::envelopes::{self, Arm, Direction, EnvelopeExt, RawBody};
use crate::pb::Envelope;
use crate::session::{Args, Extra, Noise, Op, Request, RidKind, Tool};

/// String values: valid, empty, huge (above `RAW_THRESHOLD`), non-ASCII, escapes.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_]{1,12}",
        2 => Just(String::new()),
        2 => "\\PC{0,24}",
        1 => Just("quote\"back\\slash\nnl\u{0}nul".to_owned()),
        1 => (1usize..4).prop_map(|k| "x".repeat(k * 40_000)),
    ]
}

/// JSON text: valid objects, other valid JSON, and text that is not JSON.
pub fn json_text() -> impl Strategy<Value = String> {
    let valid_object = prop::collection::btree_map(
        "[a-z]{1,6}",
        prop_oneof![
            any::<i64>().prop_map(|i| i.to_string()),
            "[a-z ]{0,8}".prop_map(|s| serde_json::Value::String(s).to_string()),
            Just("null".to_owned()),
            Just("[1,2.5e300,-0]".to_owned()),
        ],
        0..4,
    )
    .prop_map(|m| {
        let members: Vec<String> =
            m.into_iter().map(|(k, v)| format!("{}:{v}", serde_json::Value::String(k))).collect();
        format!("{{{}}}", members.join(","))
    });
    prop_oneof![
        4 => valid_object,
        1 => select(vec!["[]", "\"s\"", "42", "true", "null", "[{\"type\":\"text\",\"text\":\"ok\"}]"]).prop_map(String::from),
        2 => select(vec!["", "{", "{\"a\":}", "not json", "{\"a\":1}}", "\u{feff}{}", "{'a':1}", "[1,]"]).prop_map(String::from),
        1 => (1usize..3).prop_map(|k| format!("{{\"deep\":{}1{}}}", "[".repeat(k * 200), "]".repeat(k * 200))),
    ]
}

/// Request ids: empty (missing), plain, long, non-ASCII, control characters.
pub fn rid() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just(String::new()),
        6 => "req-[0-9]{1,4}",
        1 => "\\PC{1,12}",
        1 => Just(format!("long-{}", "r".repeat(1100))),
        1 => Just("tab\tnul\u{0}del\u{7f}".to_owned()),
    ]
}

/// Integer field values: zero, small, negative, the extremes.
pub fn int64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        -5i64..100,
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::from(i32::MAX)),
        Just(i64::from(i32::MIN))
    ]
}

/// An Envelope holding `arm`, every field filled: schema-driven (see [`envelopes::synthesize`]),
/// then strings, `*_json` strings and integers replaced by generated values.
pub fn envelope_for(arm: Arm) -> impl Strategy<Value = Envelope> {
    (
        prop::collection::vec(any::<u64>(), 1..32),
        prop::collection::vec(text(), 1..4),
        prop::collection::vec(json_text(), 1..4),
        prop::collection::vec(int64(), 1..4),
        rid(),
    )
        .prop_map(move |(entropy, texts, jsons, ints, rid)| {
            let mut it = entropy.into_iter().cycle();
            let mut next = move || it.next().unwrap_or(0);
            let e = envelopes::synthesize(arm, &mut next).with_rid(rid);
            let mut v = crate::dynamic::from_envelope(&e).expect("synthesized envelopes are valid");
            let mut k = 0usize;
            replace_leaves(&mut v, &mut |name, leaf| {
                k += 1;
                match leaf {
                    serde_json::Value::String(_) if name == "request_id" => {}
                    serde_json::Value::String(s) if name.ends_with("_json") => *s = jsons[k % jsons.len()].clone(),
                    serde_json::Value::String(s) => *s = texts[k % texts.len()].clone(),
                    serde_json::Value::Number(n) if n.is_i64() && !name.contains("size") => {
                        let x = ints[k % ints.len()];
                        // Unsigned fields keep their (non-negative) value.
                        if n.as_i64().is_some_and(|o| o >= 0) && x < 0 {
                            return;
                        }
                        *n = x.into();
                    }
                    _ => {}
                }
            });
            match crate::dynamic::encode(&v).ok().and_then(|b| prost::Message::decode(b.as_slice()).ok()) {
                Some(e) => e,
                None => e,
            }
        })
}

fn replace_leaves(v: &mut serde_json::Value, f: &mut dyn FnMut(&str, &mut serde_json::Value)) {
    fn walk(name: &str, v: &mut serde_json::Value, f: &mut dyn FnMut(&str, &mut serde_json::Value)) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, c) in m.iter_mut() {
                    walk(k, c, f);
                }
            }
            serde_json::Value::Array(a) => {
                for c in a {
                    walk(name, c, f);
                }
            }
            leaf => f(name, leaf),
        }
    }
    walk("", v, f)
}

fn arms(dir: Option<Direction>) -> Vec<Arm> {
    Arm::ALL.iter().copied().filter(|a| dir.is_none_or(|d| a.direction() == d)).collect()
}

/// Any arm with generated values.
pub fn envelope() -> impl Strategy<Value = Envelope> {
    select(arms(None)).prop_flat_map(envelope_for)
}

/// Arms a bridge sends to a tool process.
pub fn to_tool() -> impl Strategy<Value = Envelope> {
    select(arms(Some(Direction::BridgeToTool))).prop_flat_map(envelope_for)
}

/// Arms a tool process sends to a bridge (wrong-direction input for a tool process).
pub fn to_bridge() -> impl Strategy<Value = Envelope> {
    select(arms(Some(Direction::ToolToBridge))).prop_flat_map(envelope_for)
}

/// Encoded bodies a conforming peer must skip or handle: an Envelope with unknown fields
/// appended, an unknown arm alone, two arms (the last wins), no arm at all.
pub fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
    let unknown = (64u32..5000).prop_filter("not an Envelope field", |n| crate::schema::envelope().field(*n).is_none());
    prop_oneof![
        (to_tool(), unknown.clone(), any::<u64>()).prop_map(|(e, n, v)| RawBody::of(&e).varint(n, v).into_bytes()),
        (unknown.clone(), prop::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(n, b)| RawBody::default().bytes(n, &b).into_bytes()),
        (to_tool(), to_tool()).prop_map(|(a, b)| RawBody::of(&a).raw(&prost::Message::encode_to_vec(&b)).into_bytes()),
        rid().prop_map(|r| RawBody::of(&Envelope::default().with_rid(r)).into_bytes()),
        (unknown, any::<u32>())
            .prop_map(|(n, v)| RawBody::default().fixed32(n, v).fixed64(n + 1, u64::from(v)).into_bytes()),
    ]
}

fn tool() -> impl Strategy<Value = Tool> {
    prop_oneof![8 => Just(Tool::Echo), 4 => select(Tool::ALL.to_vec())]
}

fn args() -> impl Strategy<Value = Args> {
    prop_oneof![8 => Just(Args::Valid), 4 => select(Args::ALL.to_vec())]
}

fn rid_kind() -> impl Strategy<Value = RidKind> {
    prop_oneof![
        10 => Just(RidKind::Plain),
        1 => Just(RidKind::Long),
        1 => Just(RidKind::Unicode),
        1 => Just(RidKind::Control),
        3 => any::<u8>().prop_map(RidKind::Reuse),
    ]
}

fn extra() -> impl Strategy<Value = Extra> {
    prop_oneof![8 => Just(Extra::None), 1 => Just(Extra::UnknownFields), 1 => Just(Extra::Namespace)]
}

fn noise() -> impl Strategy<Value = Noise> {
    prop_oneof![
        3 => (any::<u8>(), any::<u64>()).prop_map(|(arm, seed)| Noise::WrongDirection { arm, seed }),
        1 => any::<u8>().prop_map(Noise::UnsolicitedReply),
        1 => any::<u16>().prop_map(Noise::UnknownArm),
        1 => Just(Noise::EmptyEnvelope),
        1 => Just(Noise::ZeroLength),
    ]
}

/// One op; calls dominate, shrinking goes towards `echo` with valid arguments.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (tool(), args(), rid_kind(), any::<bool>(), extra())
            .prop_map(|(tool, args, rid, progress, extra)| Op::Call { tool, args, rid, progress, extra }),
        3 => (select(Request::ALL.to_vec()), rid_kind()).prop_map(|(req, rid)| Op::Request { req, rid }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(pick, envelope_rid)| Op::Cancel { pick, envelope_rid }),
        3 => noise().prop_map(Op::Noise),
        2 => Just(Op::Sync),
        1 => Just(Op::Alive),
    ]
}

/// A sequence of up to `max` ops.
pub fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=max.max(1))
}
