//! The bytes a proto-mcp step sends: MCPMessages written by field name (with unknown fields
//! added inside the arm or outside the oneof), raw hex (lying prefixes included), text and
//! JSON-RPC lines, several of them in one write. Sans-IO: the runner writes what this returns.

use std::collections::HashMap;

use prost::Message;
use protomcp_proto::mcp::Arm;
use protomcp_proto::mcp::pb;
use protomcp_proto::mcp::prost_types::Any;
use protomcp_proto::varint::put as varint;
use serde_json::Value;

/// Why a message could not be written (a field of the wrong type, an unknown name, bad hex).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(pub String);

impl From<String> for BuildError {
    fn from(s: String) -> Self {
        BuildError(s)
    }
}

impl From<&str> for BuildError {
    fn from(s: &str) -> Self {
        BuildError(s.to_owned())
    }
}

fn hex(text: &str) -> Result<Vec<u8>, BuildError> {
    protomcp_proto::dynamic::hex_decode(text).map_err(|e| BuildError(e.to_string()))
}

fn text(v: &Value, key: &str) -> Result<String, BuildError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(BuildError(format!("`{key}` must be a string, not {other}"))),
    }
}

fn flag(v: &Value, key: &str) -> Result<bool, BuildError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(BuildError(format!("`{key}` must be true or false, not {other}"))),
    }
}

fn strings(v: &Value, key: &str) -> Result<Vec<String>, BuildError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_owned).ok_or_else(|| BuildError(format!("`{key}` holds strings"))))
            .collect(),
        Some(other) => Err(BuildError(format!("`{key}` must be a list of strings, not {other}"))),
    }
}

fn string_map(v: &Value, key: &str) -> Result<HashMap<String, String>, BuildError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(HashMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, x)| {
                x.as_str()
                    .map(|s| (k.clone(), s.to_owned()))
                    .ok_or_else(|| BuildError(format!("`{key}.{k}` must be a string")))
            })
            .collect(),
        Some(other) => Err(BuildError(format!("`{key}` must be a map, not {other}"))),
    }
}

fn known_keys(v: &Value, what: &str, keys: &[&str]) -> Result<(), BuildError> {
    if let Some(m) = v.as_object() {
        if let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(BuildError(format!("{what}: unknown field `{k}` (known: {})", keys.join(", "))));
        }
        Ok(())
    } else if v.is_null() {
        Ok(())
    } else {
        Err(BuildError(format!("{what} must be a map")))
    }
}

/// The body (without the arm's tag) of the arm `arm` written as `v`.
fn arm_body(arm: Arm, v: &Value) -> Result<Vec<u8>, BuildError> {
    let what = arm.name();
    Ok(match arm {
        Arm::InitializeRequest => {
            known_keys(v, what, &["protocol_version", "capabilities", "metadata"])?;
            let caps = match v.get("capabilities") {
                None | Some(Value::Null) => None,
                Some(c) => {
                    known_keys(
                        c,
                        "capabilities",
                        &["supports_bsr_refs", "supports_streaming", "encodings", "experimental"],
                    )?;
                    let experimental = match c.get("experimental") {
                        Some(Value::Object(m)) => m
                            .iter()
                            .map(|(k, x)| {
                                x.as_bool().map(|b| (k.clone(), b)).ok_or("experimental values are booleans".to_owned())
                            })
                            .collect::<Result<_, _>>()?,
                        _ => Default::default(),
                    };
                    Some(pb::ClientCapabilities {
                        supports_bsr_refs: flag(c, "supports_bsr_refs")?,
                        supports_streaming: flag(c, "supports_streaming")?,
                        encodings: strings(c, "encodings")?,
                        experimental,
                    })
                }
            };
            pb::InitializeRequest {
                protocol_version: text(v, "protocol_version")?,
                capabilities: caps,
                metadata: string_map(v, "metadata")?,
            }
            .encode_to_vec()
        }
        Arm::InitializeResponse => {
            known_keys(v, what, &["protocol_version"])?;
            pb::InitializeResponse { protocol_version: text(v, "protocol_version")?, ..Default::default() }
                .encode_to_vec()
        }
        Arm::ListToolsRequest => {
            known_keys(v, what, &["bsr_refs", "include_schemas", "cursor"])?;
            pb::ListToolsRequest {
                bsr_refs: strings(v, "bsr_refs")?,
                include_schemas: flag(v, "include_schemas")?,
                cursor: text(v, "cursor")?,
            }
            .encode_to_vec()
        }
        Arm::CallToolRequest => {
            known_keys(v, what, &["name", "arguments", "metadata"])?;
            let arguments = match v.get("arguments") {
                None | Some(Value::Null) => None,
                Some(a) => {
                    known_keys(a, "arguments", &["type_url", "value_hex"])?;
                    Some(Any { type_url: text(a, "type_url")?, value: hex(&text(a, "value_hex")?)? })
                }
            };
            pb::CallToolRequest { name: text(v, "name")?, arguments, metadata: string_map(v, "metadata")? }
                .encode_to_vec()
        }
        Arm::ListResourcesRequest => {
            known_keys(v, what, &["cursor"])?;
            pb::ListResourcesRequest { cursor: text(v, "cursor")? }.encode_to_vec()
        }
        Arm::ReadResourceRequest => {
            known_keys(v, what, &["uri"])?;
            pb::ReadResourceRequest { uri: text(v, "uri")? }.encode_to_vec()
        }
        Arm::ErrorResponse => {
            known_keys(v, what, &["code", "message"])?;
            let code = v.get("code").and_then(Value::as_i64).unwrap_or(0) as i32;
            pb::ErrorResponse { code, message: text(v, "message")?, data: None }.encode_to_vec()
        }
        other => return Err(BuildError(format!("the harness does not write {other}"))),
    })
}

/// An unknown length-delimited field 15 (`7a len bytes`) of `n` bytes of `z`.
fn unknown_15(n: usize) -> Vec<u8> {
    let mut out = vec![0x7a];
    varint(n as u64, &mut out);
    out.resize(out.len() + n, b'z');
    out
}

/// The frame of one message written by field name: `{id, <arm>: {...}}` plus the modifiers
/// `inner_extra_hex` (appended inside the arm), `outer_extra_hex` (appended to MCPMessage),
/// `inner_unknown_len` (an unknown field 15 of that many bytes inside the arm) and `pad_to`
/// (such a field sized so that the frame has at least that many bytes).
pub fn message_frame(v: &Value) -> Result<(Vec<u8>, String), BuildError> {
    let m = v.as_object().ok_or("a message is a map")?;
    let id = match m.get("id") {
        None => 0,
        Some(x) => x.as_u64().ok_or_else(|| BuildError(format!("id must be an unsigned integer, not {x}")))?,
    };
    let mut arms = m.keys().filter_map(|k| Arm::from_name(k));
    let arm = arms.next().ok_or("a message names one arm (e.g. list_tools_request)")?;
    if arms.next().is_some() {
        return Err("a message names one arm".into());
    }
    const MODIFIERS: &[&str] = &["id", "inner_extra_hex", "outer_extra_hex", "inner_unknown_len", "pad_to"];
    if let Some(k) = m.keys().find(|k| Arm::from_name(k).is_none() && !MODIFIERS.contains(&k.as_str())) {
        return Err(BuildError(format!("unknown field `{k}` in a message")));
    }
    let mut inner = arm_body(arm, &m[arm.name()])?;
    if let Some(x) = m.get("inner_extra_hex").and_then(Value::as_str) {
        inner.extend(hex(x)?);
    }
    if let Some(n) = m.get("inner_unknown_len").and_then(Value::as_u64) {
        inner.extend(unknown_15(n as usize));
    }
    let outer_extra = match m.get("outer_extra_hex").and_then(Value::as_str) {
        Some(x) => hex(x)?,
        None => Vec::new(),
    };
    let assemble = |inner: &[u8]| {
        let mut body = Vec::new();
        if id != 0 {
            body.push(0x08);
            varint(id, &mut body);
        }
        varint(u64::from(arm.number() << 3 | 2), &mut body);
        varint(inner.len() as u64, &mut body);
        body.extend_from_slice(inner);
        body.extend_from_slice(&outer_extra);
        body
    };
    let mut body = assemble(&inner);
    if let Some(pad_to) = m.get("pad_to").and_then(Value::as_u64) {
        // Grow an unknown field 15 until the frame (prefix included) reaches pad_to bytes.
        let mut n = 0usize;
        while 4 + body.len() < pad_to as usize {
            n += 1;
            let mut grown = inner.clone();
            grown.extend(unknown_15(n));
            body = assemble(&grown);
        }
    }
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend(body);
    Ok((frame, format!("{arm} id={id}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_profiles_list_tools_with_unknown_fields_is_written_byte_for_byte() {
        let v =
            json!({"id": 2, "list_tools_request": {}, "inner_extra_hex": "7a037a7a7a", "outer_extra_hex": "a00107"});
        let (frame, _) = message_frame(&v).unwrap();
        assert_eq!(frame, hex("0000000c 0802 2205 7a037a7a7a a00107").unwrap());
    }

    #[test]
    fn pad_to_reaches_at_least_the_size_asked() {
        let v = json!({"id": 5, "list_tools_request": {}, "pad_to": 64});
        let (frame, _) = message_frame(&v).unwrap();
        assert!(frame.len() >= 64 && frame.len() < 68, "{}", frame.len());
        let m = protomcp_proto::mcp::McpMessage::decode(&frame[4..]).unwrap();
        assert_eq!(m.arm(), Some(Arm::ListToolsRequest));
    }

    #[test]
    fn an_unknown_field_in_a_message_is_an_error() {
        assert!(message_frame(&json!({"id": 1, "list_tools_request": {"cursr": "x"}})).is_err());
    }
}
