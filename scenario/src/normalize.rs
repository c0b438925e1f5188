//! One shape for call results, whatever form the peer used (TP-STREAM-01: "wherever a
//! requirement only asks for a result, accept all three forms").
//!
//! A sideband transfer (RawHeader + payload) and a completed stream (StreamHeader + chunks)
//! become the tree of the equivalent Envelope, `{request_id: <call rid>, call_result:
//! {<field_name>: <payload as text>}}`, plus two keys that no Envelope has:
//!
//! - [`VIA`] (`via`): `"sideband"` or `"stream"` (a plain frame has no `via`; patterns read that
//!   as `"frame"`);
//! - `sideband: {envelope_rid, field_name, size, compression, uncompressed_size[, error]
//!   [, utf8: false]}` or `stream: {field_name, violations}`: what the transfer looked like, for
//!   scenarios that check the transfer itself (e.g. that a large payload was compressed).
//!
//! So `expect: {envelope: {request_id: c1, call_result: {result_json: […]}}}` passes for all
//! three forms, and `via: sideband` narrows it to one.

use protomcp_proto::dynamic;
use protomcp_proto::frame::{Decoded, Sideband};
use protomcp_proto::sideband::{RESULT_FIELDS, StreamEvent};
use serde_json::{Map, Value, json};

/// The key that tells how a result arrived.
pub const VIA: &str = "via";

/// The tree of a frame, with the unknown fields its wire report found (see
/// [`dynamic::from_decoded`]).
pub fn frame_value(decoded: &Decoded) -> Result<Value, dynamic::DynError> {
    dynamic::from_decoded(decoded)
}

fn call_result(field_name: &str, text: String) -> Value {
    let mut result = Map::new();
    if RESULT_FIELDS.contains(&field_name) && !text.is_empty() {
        result.insert(field_name.to_owned(), Value::String(text));
    }
    Value::Object(result)
}

fn with_rid(mut obj: Map<String, Value>, rid: &str) -> Value {
    if !rid.is_empty() {
        obj.insert("request_id".into(), Value::String(rid.to_owned()));
    }
    Value::Object(obj)
}

/// A sideband transfer as the equivalent result. `envelope_rid` is the rid of the RawHeader
/// frame itself (it should be empty, TP-SIDEBAND-03); the call rid is `RawHeader.request_id`.
/// A payload that could not be had (bad zstd, over the limit) gives no `call_result` and a
/// `sideband.error`.
pub fn sideband_value(sideband: &Sideband, envelope_rid: &str) -> Value {
    let h = &sideband.header;
    let mut info = Map::new();
    info.insert("envelope_rid".into(), Value::String(envelope_rid.to_owned()));
    info.insert("field_name".into(), Value::String(h.field_name.clone()));
    info.insert("size".into(), Value::from(h.size));
    info.insert("compression".into(), Value::String(h.compression.clone()));
    info.insert("uncompressed_size".into(), Value::from(h.uncompressed_size));
    let mut obj = Map::new();
    obj.insert(VIA.into(), json!("sideband"));
    match &sideband.payload {
        Ok(bytes) => {
            let text = match std::str::from_utf8(bytes) {
                Ok(t) => t.to_owned(),
                Err(_) => {
                    info.insert("utf8".into(), Value::Bool(false));
                    String::from_utf8_lossy(bytes).into_owned()
                }
            };
            obj.insert("call_result".into(), call_result(&h.field_name, text));
        }
        Err(e) => {
            info.insert("error".into(), Value::String(e.to_string()));
        }
    }
    obj.insert("sideband".into(), Value::Object(info));
    with_rid(obj, &h.request_id)
}

/// A completed stream as the equivalent result; `None` for the other stream events (progress,
/// failures and orphans are the runner's business).
pub fn stream_value(event: &StreamEvent) -> Option<Value> {
    let StreamEvent::Complete { rid, field_name, data, violations } = event else { return None };
    let mut info = Map::new();
    info.insert("field_name".into(), Value::String(field_name.clone()));
    info.insert(
        "violations".into(),
        Value::Array(violations.iter().map(|v| Value::String(format!("{}: {}", v.requirement(), v.detail))).collect()),
    );
    let text = match std::str::from_utf8(data) {
        Ok(t) => t.to_owned(),
        Err(_) => {
            info.insert("utf8".into(), Value::Bool(false));
            String::from_utf8_lossy(data).into_owned()
        }
    };
    let mut obj = Map::new();
    obj.insert(VIA.into(), json!("stream"));
    obj.insert("call_result".into(), call_result(field_name, text));
    obj.insert("stream".into(), Value::Object(info));
    Some(with_rid(obj, rid))
}
