//! Schema-driven conversion between Envelope bodies and a generic JSON tree, so that scenario
//! files, transcripts and generators can write and read *any* Envelope — including fields and
//! arms this schema does not know, several arms at once, and fields in any wire order — without
//! going through the prost types (which drop unknown fields and keep only the last arm).
//!
//! The tree is a [`serde_json::Value`] object keyed by field names, as in `protomcp.proto`:
//!
//! ```
//! use protomcp_proto::dynamic;
//! use serde_json::json;
//! let body = dynamic::encode(&json!({
//!     "request_id": "r1",
//!     "call_tool": {"name": "echo", "arguments_json": {"text": "hi"}},
//! })).unwrap();
//! let back = dynamic::decode(&body).unwrap();
//! assert_eq!(back["call_tool"]["arguments_json"], json!(r#"{"text":"hi"}"#));
//! ```
//!
//! | field kind | written as | read back as |
//! |---|---|---|
//! | string | a JSON string; a `*_json` field may also be any other JSON value, which is written as its compact JSON text | the string |
//! | bytes | `{hex: "0a ff"}` (whitespace ignored) or `{text: "utf-8"}`; both at once must agree | `{hex}`, plus `{text}` when the bytes are UTF-8 |
//! | bool | `true` / `false` | `true` (false is the default) |
//! | int32, int64, uint32, uint64 | an integer, or a decimal string; range-checked | a JSON integer |
//! | message | an object (`null` = empty message) | an object, also when empty (presence is kept) |
//! | repeated | an array | an array |
//!
//! Scalars equal to their default are not written and not read back, as proto3 does; message
//! fields (and so oneof arms) are written whenever they are present. Two special keys work at
//! every message level:
//!
//! - [`UNKNOWN_FIELDS`] (`unknown_fields`): a list of raw fields written after the known ones
//!   (`{number: 99, varint: 7}`, `{number: 99, fixed32: 1}`, `{number: 99, fixed64: 1}`,
//!   `{number: 1000, bytes_hex: "…"}`, `{number: 1000, text: "…"}`,
//!   `{number: 38, message: {…}, type: CallToolRequest}`, `{number: 5, wire_type: 3, raw_hex: "…"}`).
//!   A number the schema knows is allowed too and is written verbatim: that is how a scenario
//!   repeats an arm, sends a field with the wrong wire type or a string that is not UTF-8.
//!   [`decode`] lists every field the schema does not know here, in wire order.
//! - [`FIELD_ORDER`] (`field_order`): the wire order, as a list of field names and unknown-field
//!   numbers; fields it does not list follow in the usual order (known ones as prost writes them,
//!   then the unknown ones in list order).
//!
//! An object may hold several oneof arms: each is written (in field-number order unless
//! `field_order` says otherwise), and receivers apply the last one (TP-FRAME-10). [`decode`]
//! follows proto3 the same way: one arm, the last on the wire (occurrences of the same arm in a
//! row are merged), later scalars replace earlier ones and repeated occurrences of a message
//! field merge.

use std::fmt;

use serde_json::{Number, Value};

use crate::frame::Decoded;
use crate::pb::Envelope;
use crate::schema::{ENVELOPE, FieldKind, FieldSchema, MESSAGES, MessageSchema};
use crate::varint::{self, RECURSION_LIMIT, ReadErrorKind};

/// The key that lists raw (unknown) fields, at any message level.
pub const UNKNOWN_FIELDS: &str = "unknown_fields";
/// The key that fixes the wire order of a message's fields.
pub const FIELD_ORDER: &str = "field_order";

/// The keys an entry of [`UNKNOWN_FIELDS`] may have.
pub const UNKNOWN_ENTRY_KEYS: &[&str] =
    &["number", "varint", "fixed32", "fixed64", "bytes_hex", "text", "message", "type", "wire_type", "raw_hex"];

/// Largest protobuf field number.
pub const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// One step of a path into the tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

/// `call_tool.arguments_json`, `tool_list.tools[1].name`; `(envelope)` for the root.
pub fn display_path(path: &[PathSeg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSeg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    if out.is_empty() { "(envelope)".to_owned() } else { out }
}

/// What is wrong with a tree (encoding) or a body (decoding), and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {kind}", display_path(path))]
pub struct DynError {
    /// Where: the keys and indexes leading to the offending value (empty for the root).
    pub path: Vec<PathSeg>,
    pub kind: DynErrorKind,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DynErrorKind {
    #[error("{message} has no field `{name}`; valid: {}", valid.join(", "))]
    UnknownField { message: String, name: String, valid: Vec<String> },
    #[error("expected {expected}, found {found}")]
    WrongType { expected: &'static str, found: String },
    #[error("{value} is out of range for {kind}")]
    OutOfRange { kind: &'static str, value: String },
    #[error("invalid hex: {0}")]
    BadHex(HexError),
    #[error("`hex` and `text` disagree")]
    BytesDisagree,
    #[error("{0}")]
    Invalid(String),
    /// The body is not a valid Envelope (decoding only).
    #[error("at body byte {offset}: {why}")]
    Wire { offset: usize, why: String },
}

fn err(path: &[PathSeg], kind: DynErrorKind) -> DynError {
    DynError { path: path.to_vec(), kind }
}

/// A short description of a JSON value's type, with the value when it is short.
pub fn describe(v: &Value) -> String {
    let text = v.to_string();
    let shown =
        if text.chars().count() > 40 { format!("{}…", text.chars().take(40).collect::<String>()) } else { text };
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(_) => format!("boolean {shown}"),
        Value::Number(_) => format!("number {shown}"),
        Value::String(_) => format!("string {shown}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn message_index(name: &str) -> Option<usize> {
    MESSAGES.iter().position(|m| m.name == name)
}

fn message_names() -> Vec<&'static str> {
    MESSAGES.iter().map(|m| m.name).collect()
}

/// The field names of a message plus the special keys, for "valid: …" lists.
fn valid_keys(schema: Option<&MessageSchema>) -> Vec<String> {
    let mut v: Vec<String> = schema.map(|s| s.fields.iter().map(|f| f.name.to_owned()).collect()).unwrap_or_default();
    v.push(UNKNOWN_FIELDS.to_owned());
    v.push(FIELD_ORDER.to_owned());
    v
}

/// Where prost puts a field: oneof members sit at the oneof's smallest number.
fn prost_rank(schema: &MessageSchema, f: &FieldSchema) -> u32 {
    if f.in_oneof {
        schema.fields.iter().filter(|g| g.in_oneof).map(|g| g.number).min().unwrap_or(f.number)
    } else {
        f.number
    }
}

fn put_key(number: u32, wire_type: u8, out: &mut Vec<u8>) {
    varint::put((u64::from(number) << 3) | u64::from(wire_type), out);
}

fn put_len_delimited(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    put_key(number, 2, out);
    varint::put(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// Why hex text does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    #[error("odd number of hex digits ({0})")]
    OddDigits(usize),
    #[error("`{}` is not a hex digit", char::from(*.0).escape_default())]
    NotHex(u8),
}

/// Decodes hex text; ASCII whitespace is ignored.
pub fn hex_decode(text: &str) -> Result<Vec<u8>, HexError> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(HexError::OddDigits(digits.len()));
    }
    let nibble = |b: u8| -> Result<u8, HexError> {
        match b {
            b'0'..=b'9' => Ok(b - b'0'),
            b'a'..=b'f' => Ok(b - b'a' + 10),
            b'A'..=b'F' => Ok(b - b'A' + 10),
            other => Err(HexError::NotHex(other)),
        }
    };
    digits.chunks(2).map(|p| Ok((nibble(p[0])? << 4) | nibble(p[1])?)).collect()
}

/// Lowercase hex without separators.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// A proto3 default scalar: `""`, `0`, `false`, empty bytes.
fn is_default(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0) || n.as_u64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Object(o) => o.get("hex").and_then(Value::as_str).is_some_and(str::is_empty),
        Value::Array(a) => a.is_empty(),
    }
}

impl fmt::Display for PathSeg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathSeg::Key(k) => f.write_str(k),
            PathSeg::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A JSON number from an `i128` when it fits `i64` or `u64`.
pub fn number_from_i128(n: i128) -> Option<Number> {
    i64::try_from(n).map(Number::from).ok().or_else(|| u64::try_from(n).map(Number::from).ok())
}

mod decode;
mod encode;

pub use decode::{arm_of, decode, from_decoded, from_envelope};
pub use encode::{check, encode, encode_message};

#[cfg(test)]
mod tests;
