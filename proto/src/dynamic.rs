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

use serde_json::{Map, Number, Value};

use crate::frame::Decoded;
use crate::pb::Envelope;
use crate::schema::{ENVELOPE, FieldKind, FieldSchema, MESSAGES, MessageSchema};

/// The key that lists raw (unknown) fields, at any message level.
pub const UNKNOWN_FIELDS: &str = "unknown_fields";
/// The key that fixes the wire order of a message's fields.
pub const FIELD_ORDER: &str = "field_order";

/// The keys an entry of [`UNKNOWN_FIELDS`] may have.
pub const UNKNOWN_ENTRY_KEYS: &[&str] =
    &["number", "varint", "fixed32", "fixed64", "bytes_hex", "text", "message", "type", "wire_type", "raw_hex"];

/// Largest protobuf field number.
pub const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// Nesting limit of [`decode`] (groups inside unknown fields); prost uses the same.
const RECURSION_LIMIT: u32 = 100;

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
    BadHex(String),
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

/// Encodes an Envelope tree into a frame body.
pub fn encode(value: &Value) -> Result<Vec<u8>, DynError> {
    let mut enc = Encoder { wildcard: None, path: Vec::new() };
    enc.message(Some(ENVELOPE), value)
}

/// Encodes a tree of the message named `message` (`"CallToolRequest"`) into its bytes.
pub fn encode_message(message: &str, value: &Value) -> Result<Vec<u8>, DynError> {
    let idx = message_index(message).ok_or_else(|| {
        err(&[], DynErrorKind::Invalid(format!("no message type `{message}`; valid: {}", message_names().join(", "))))
    })?;
    let mut enc = Encoder { wildcard: None, path: Vec::new() };
    enc.message(Some(idx), value)
}

/// Checks an Envelope tree as [`encode`] would, except that a string for which `wildcard` returns
/// true is accepted in every scalar position (for templates whose placeholders are filled in
/// later).
pub fn check(value: &Value, wildcard: &dyn Fn(&str) -> bool) -> Result<(), DynError> {
    let mut enc = Encoder { wildcard: Some(wildcard), path: Vec::new() };
    enc.message(Some(ENVELOPE), value).map(drop)
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

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(number: u32, wire_type: u8, out: &mut Vec<u8>) {
    put_varint((u64::from(number) << 3) | u64::from(wire_type), out);
}

fn put_len_delimited(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    put_key(number, 2, out);
    put_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// Decodes hex text; ASCII whitespace is ignored.
pub fn hex_decode(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    let nibble = |b: u8| -> Result<u8, String> {
        match b {
            b'0'..=b'9' => Ok(b - b'0'),
            b'a'..=b'f' => Ok(b - b'a' + 10),
            b'A'..=b'F' => Ok(b - b'A' + 10),
            other => Err(format!("`{}` is not a hex digit", char::from(other).escape_default())),
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

/// One field ready for the wire.
struct Chunk {
    rank: u32,
    number: u32,
    name: Option<String>,
    bytes: Vec<u8>,
}

struct Encoder<'a> {
    wildcard: Option<&'a dyn Fn(&str) -> bool>,
    path: Vec<PathSeg>,
}

impl Encoder<'_> {
    fn fail<T>(&self, kind: DynErrorKind) -> Result<T, DynError> {
        Err(err(&self.path, kind))
    }

    fn is_wildcard(&self, v: &Value) -> bool {
        match (self.wildcard, v) {
            (Some(w), Value::String(s)) => w(s),
            _ => false,
        }
    }

    fn with<T>(&mut self, seg: PathSeg, f: impl FnOnce(&mut Self) -> Result<T, DynError>) -> Result<T, DynError> {
        self.path.push(seg);
        let r = f(self);
        self.path.pop();
        r
    }

    /// A message: `idx` is its schema, or `None` for a message of unknown type (only the special
    /// keys are allowed then).
    fn message(&mut self, idx: Option<usize>, value: &Value) -> Result<Vec<u8>, DynError> {
        let schema = idx.map(|i| &MESSAGES[i]);
        let type_name = schema.map_or("a message of unknown type", |s| s.name);
        let empty = Map::new();
        let obj = match value {
            Value::Object(o) => o,
            Value::Null => &empty,
            other => return self.fail(DynErrorKind::WrongType { expected: "an object", found: describe(other) }),
        };
        let mut known: Vec<Chunk> = Vec::new();
        let mut unknown: Vec<Chunk> = Vec::new();
        let mut order: Option<&Value> = None;
        for (key, v) in obj {
            match key.as_str() {
                UNKNOWN_FIELDS => {
                    unknown = self.with(PathSeg::Key(key.clone()), |e| e.unknown_list(schema, v))?;
                }
                FIELD_ORDER => order = Some(v),
                _ => {
                    let Some(field) = schema.and_then(|s| s.field_by_name(key)) else {
                        return self.with(PathSeg::Key(key.clone()), |e| {
                            e.fail(DynErrorKind::UnknownField {
                                message: type_name.to_owned(),
                                name: key.clone(),
                                valid: valid_keys(schema),
                            })
                        });
                    };
                    let schema = schema.expect("a field was found");
                    let bytes = self.with(PathSeg::Key(key.clone()), |e| e.field(field, v))?;
                    if let Some(bytes) = bytes {
                        known.push(Chunk {
                            rank: prost_rank(schema, field),
                            number: field.number,
                            name: Some(key.clone()),
                            bytes,
                        });
                    }
                }
            }
        }
        known.sort_by_key(|c| (c.rank, c.number));
        let mut out = Vec::new();
        if let Some(order) = order {
            self.with(PathSeg::Key(FIELD_ORDER.to_owned()), |e| {
                e.apply_order(order, obj, &mut known, &mut unknown, &mut out)
            })?;
        }
        for c in known.into_iter().chain(unknown) {
            out.extend_from_slice(&c.bytes);
        }
        Ok(out)
    }

    /// Moves the fields `order` names to `out`, in that order.
    fn apply_order(
        &mut self,
        order: &Value,
        obj: &Map<String, Value>,
        known: &mut Vec<Chunk>,
        unknown: &mut Vec<Chunk>,
        out: &mut Vec<u8>,
    ) -> Result<(), DynError> {
        let Value::Array(items) = order else {
            return self.fail(DynErrorKind::WrongType {
                expected: "a list of field names and unknown-field numbers",
                found: describe(order),
            });
        };
        for (i, item) in items.iter().enumerate() {
            self.with(PathSeg::Index(i), |e| {
                match item {
                    Value::String(name) => {
                        if !obj.contains_key(name) || name == UNKNOWN_FIELDS || name == FIELD_ORDER {
                            return e
                                .fail(DynErrorKind::Invalid(format!("`{name}` is not a field set in this message")));
                        }
                        // A field at its default value writes nothing; then there is nothing to move.
                        if let Some(pos) = known.iter().position(|c| c.name.as_deref() == Some(name)) {
                            out.extend_from_slice(&known.remove(pos).bytes);
                        }
                    }
                    Value::Number(n) => {
                        let Some(number) = n.as_u64().filter(|n| (1..=MAX_FIELD_NUMBER).contains(n)) else {
                            return e.fail(DynErrorKind::Invalid(format!("{n} is not a field number")));
                        };
                        let before = unknown.len();
                        let mut rest = Vec::new();
                        for c in unknown.drain(..) {
                            if u64::from(c.number) == number {
                                out.extend_from_slice(&c.bytes);
                            } else {
                                rest.push(c);
                            }
                        }
                        *unknown = rest;
                        if unknown.len() == before {
                            return e.fail(DynErrorKind::Invalid(format!(
                                "no entry of `{UNKNOWN_FIELDS}` has number {number}"
                            )));
                        }
                    }
                    other => {
                        return e.fail(DynErrorKind::WrongType {
                            expected: "a field name or an unknown-field number",
                            found: describe(other),
                        });
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The bytes of one known field (key included), or `None` when nothing is written.
    fn field(&mut self, f: &FieldSchema, v: &Value) -> Result<Option<Vec<u8>>, DynError> {
        if !f.repeated {
            return self.single(f, v);
        }
        let items: &[Value] = match v {
            Value::Array(a) => a,
            Value::Null => &[],
            other => return self.fail(DynErrorKind::WrongType { expected: "a list", found: describe(other) }),
        };
        let mut out = Vec::new();
        if matches!(f.kind, FieldKind::String | FieldKind::Bytes | FieldKind::Message(_)) {
            for (i, item) in items.iter().enumerate() {
                let bytes = self.with(PathSeg::Index(i), |e| e.value(f, item, true))?;
                if let Some(b) = bytes {
                    put_len_delimited(f.number, &b, &mut out);
                }
            }
        } else {
            // Packed, as proto3 writes repeated scalars.
            let mut packed = Vec::new();
            for (i, item) in items.iter().enumerate() {
                self.with(PathSeg::Index(i), |e| {
                    if let Some(varint) = e.varint_value(f.kind, item)? {
                        put_varint(varint, &mut packed);
                    }
                    Ok(())
                })?;
            }
            if !items.is_empty() {
                put_len_delimited(f.number, &packed, &mut out);
            }
        }
        Ok(if items.is_empty() { None } else { Some(out) })
    }

    fn single(&mut self, f: &FieldSchema, v: &Value) -> Result<Option<Vec<u8>>, DynError> {
        let mut out = Vec::new();
        match f.kind {
            FieldKind::String | FieldKind::Bytes | FieldKind::Message(_) => {
                if let Some(b) = self.value(f, v, false)? {
                    put_len_delimited(f.number, &b, &mut out);
                } else {
                    return Ok(None);
                }
            }
            kind => match self.varint_value(kind, v)? {
                Some(0) | None => return Ok(None),
                Some(x) => {
                    put_key(f.number, 0, &mut out);
                    put_varint(x, &mut out);
                }
            },
        }
        Ok(Some(out))
    }

    /// The payload of a length-delimited value; `None` when it is a default scalar that proto3
    /// leaves out (never for list elements: `keep` is set there).
    fn value(&mut self, f: &FieldSchema, v: &Value, keep: bool) -> Result<Option<Vec<u8>>, DynError> {
        if self.is_wildcard(v) && !matches!(f.kind, FieldKind::Message(_)) {
            return Ok(None);
        }
        let bytes = match f.kind {
            FieldKind::String => match v {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Null if !f.name.ends_with("_json") => Vec::new(),
                other if f.name.ends_with("_json") => other.to_string().into_bytes(),
                other => return self.fail(DynErrorKind::WrongType { expected: "a string", found: describe(other) }),
            },
            FieldKind::Bytes => self.bytes_value(v)?,
            FieldKind::Message(idx) => return self.message(Some(idx), v).map(Some),
            _ => unreachable!("only length-delimited kinds come here"),
        };
        Ok(if bytes.is_empty() && !keep { None } else { Some(bytes) })
    }

    fn bytes_value(&mut self, v: &Value) -> Result<Vec<u8>, DynError> {
        let expected = "bytes as {hex: \"…\"} or {text: \"…\"}";
        let obj = match v {
            Value::Object(o) => o,
            Value::Null => return Ok(Vec::new()),
            other => return self.fail(DynErrorKind::WrongType { expected, found: describe(other) }),
        };
        let mut hex = None;
        let mut text = None;
        for (k, val) in obj {
            let slot = match k.as_str() {
                "hex" => &mut hex,
                "text" => &mut text,
                _ => {
                    return self.with(PathSeg::Key(k.clone()), |e| {
                        e.fail(DynErrorKind::UnknownField {
                            message: "bytes".into(),
                            name: k.clone(),
                            valid: vec!["hex".into(), "text".into()],
                        })
                    });
                }
            };
            match val {
                Value::String(s) => *slot = Some(s),
                other if self.is_wildcard(other) => {}
                other => {
                    return self.with(PathSeg::Key(k.clone()), |e| {
                        e.fail(DynErrorKind::WrongType { expected: "a string", found: describe(other) })
                    });
                }
            }
        }
        if hex.is_some_and(|h| self.is_wildcard(&Value::String(h.clone())))
            || text.is_some_and(|t| self.is_wildcard(&Value::String(t.clone())))
        {
            return Ok(vec![0]);
        }
        let from_hex = match hex {
            Some(h) => Some(hex_decode(h).map_err(|why| {
                err(&[self.path.clone(), vec![PathSeg::Key("hex".into())]].concat(), DynErrorKind::BadHex(why))
            })?),
            None => None,
        };
        match (from_hex, text) {
            (Some(h), Some(t)) if h != t.as_bytes() => self.fail(DynErrorKind::BytesDisagree),
            (Some(h), _) => Ok(h),
            (None, Some(t)) => Ok(t.as_bytes().to_vec()),
            (None, None) => self.fail(DynErrorKind::Invalid(format!("{expected}: neither key is given"))),
        }
    }

    /// A varint-encoded scalar; `None` for a wildcard.
    fn varint_value(&mut self, kind: FieldKind, v: &Value) -> Result<Option<u64>, DynError> {
        if self.is_wildcard(v) {
            return Ok(None);
        }
        if kind == FieldKind::Bool {
            return match v {
                Value::Bool(b) => Ok(Some(u64::from(*b))),
                Value::Null => Ok(Some(0)),
                other => self.fail(DynErrorKind::WrongType { expected: "true or false", found: describe(other) }),
            };
        }
        let (name, min, max): (&'static str, i128, i128) = match kind {
            FieldKind::Int32 => ("int32", i128::from(i32::MIN), i128::from(i32::MAX)),
            FieldKind::Int64 => ("int64", i128::from(i64::MIN), i128::from(i64::MAX)),
            FieldKind::Uint32 => ("uint32", 0, i128::from(u32::MAX)),
            FieldKind::Uint64 => ("uint64", 0, i128::from(u64::MAX)),
            _ => unreachable!("varint kinds only"),
        };
        let n = match v {
            Value::Null => 0,
            other => match integer_of(other) {
                Some(n) => n,
                None => {
                    return self.fail(DynErrorKind::WrongType {
                        expected: "an integer (a number or a decimal string)",
                        found: describe(other),
                    });
                }
            },
        };
        if n < min || n > max {
            return self.fail(DynErrorKind::OutOfRange { kind: name, value: n.to_string() });
        }
        // Negative int32 and int64 are sign-extended to ten bytes, as prost writes them.
        Ok(Some(if n < 0 { n as i64 as u64 } else { n as u64 }))
    }

    fn unknown_list(&mut self, schema: Option<&MessageSchema>, v: &Value) -> Result<Vec<Chunk>, DynError> {
        let Value::Array(items) = v else {
            return self.fail(DynErrorKind::WrongType { expected: "a list of raw fields", found: describe(v) });
        };
        let mut chunks = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let chunk = self.with(PathSeg::Index(i), |e| e.unknown_entry(schema, item))?;
            chunks.push(chunk);
        }
        Ok(chunks)
    }

    fn unknown_entry(&mut self, schema: Option<&MessageSchema>, v: &Value) -> Result<Chunk, DynError> {
        let Value::Object(obj) = v else {
            return self.fail(DynErrorKind::WrongType {
                expected: "a raw field such as {number: 99, varint: 7}",
                found: describe(v),
            });
        };
        for k in obj.keys() {
            if !UNKNOWN_ENTRY_KEYS.contains(&k.as_str()) {
                return self.with(PathSeg::Key(k.clone()), |e| {
                    e.fail(DynErrorKind::UnknownField {
                        message: "raw field".into(),
                        name: k.clone(),
                        valid: UNKNOWN_ENTRY_KEYS.iter().map(|s| (*s).to_owned()).collect(),
                    })
                });
            }
        }
        let number = match obj.get("number") {
            Some(n) => match n.as_u64().filter(|n| (1..=MAX_FIELD_NUMBER).contains(n)) {
                Some(n) => n as u32,
                None => {
                    return self.with(PathSeg::Key("number".into()), |e| {
                        e.fail(DynErrorKind::Invalid(format!("field number must be 1..={MAX_FIELD_NUMBER}")))
                    });
                }
            },
            None => return self.fail(DynErrorKind::Invalid("a raw field needs `number`".into())),
        };
        let values: Vec<&str> = ["varint", "fixed32", "fixed64", "bytes_hex", "text", "message", "raw_hex"]
            .into_iter()
            .filter(|k| obj.contains_key(*k))
            .collect();
        let [kind] = values.as_slice() else {
            return self.fail(DynErrorKind::Invalid(format!(
                "a raw field needs exactly one of varint, fixed32, fixed64, bytes_hex, text, message, raw_hex (found {})",
                if values.is_empty() { "none".to_owned() } else { values.join(", ") }
            )));
        };
        if obj.contains_key("type") && *kind != "message" {
            return self.fail(DynErrorKind::Invalid("`type` only goes with `message`".into()));
        }
        if obj.contains_key("wire_type") && *kind != "raw_hex" {
            return self.fail(DynErrorKind::Invalid("`wire_type` only goes with `raw_hex`".into()));
        }
        let val = &obj[*kind];
        let mut out = Vec::new();
        self.with(PathSeg::Key((*kind).to_owned()), |e| {
            let signed = |e: &Encoder, bits: u32| -> Result<u64, DynError> {
                let n = integer_of(val).ok_or_else(|| {
                    err(&e.path, DynErrorKind::WrongType { expected: "an integer", found: describe(val) })
                })?;
                let (min, max) = if bits == 64 {
                    (i128::from(i64::MIN), i128::from(u64::MAX))
                } else {
                    (i128::from(i32::MIN), i128::from(u32::MAX))
                };
                if n < min || n > max {
                    return Err(err(
                        &e.path,
                        DynErrorKind::OutOfRange { kind: "this raw field", value: n.to_string() },
                    ));
                }
                Ok(if n < 0 { n as i64 as u64 } else { n as u64 })
            };
            match *kind {
                "varint" => {
                    let x = signed(e, 64)?;
                    put_key(number, 0, &mut out);
                    put_varint(x, &mut out);
                }
                "fixed32" => {
                    let x = signed(e, 32)?;
                    put_key(number, 5, &mut out);
                    out.extend_from_slice(&(x as u32).to_le_bytes());
                }
                "fixed64" => {
                    let x = signed(e, 64)?;
                    put_key(number, 1, &mut out);
                    out.extend_from_slice(&x.to_le_bytes());
                }
                "bytes_hex" | "raw_hex" | "text" => {
                    let Value::String(s) = val else {
                        if e.is_wildcard(val) {
                            return Ok(());
                        }
                        return e.fail(DynErrorKind::WrongType { expected: "a string", found: describe(val) });
                    };
                    if e.is_wildcard(val) {
                        return Ok(());
                    }
                    let bytes = if *kind == "text" {
                        s.as_bytes().to_vec()
                    } else {
                        hex_decode(s).map_err(|why| err(&e.path, DynErrorKind::BadHex(why)))?
                    };
                    if *kind == "raw_hex" {
                        let wire_type = match obj.get("wire_type") {
                            Some(w) => match w.as_u64().filter(|w| *w <= 5) {
                                Some(w) => w as u8,
                                None => {
                                    return e.fail(DynErrorKind::Invalid("`wire_type` must be 0..=5".into()));
                                }
                            },
                            None => return e.fail(DynErrorKind::Invalid("`raw_hex` needs `wire_type`".into())),
                        };
                        put_key(number, wire_type, &mut out);
                        out.extend_from_slice(&bytes);
                        if wire_type == 3 {
                            // A group ends with its end-group key.
                            put_key(number, 4, &mut out);
                        }
                    } else {
                        put_len_delimited(number, &bytes, &mut out);
                    }
                }
                "message" => {
                    let idx = match obj.get("type") {
                        Some(Value::String(t)) => match message_index(t) {
                            Some(i) => Some(i),
                            None => {
                                return e.fail(DynErrorKind::Invalid(format!(
                                    "no message type `{t}`; valid: {}",
                                    message_names().join(", ")
                                )));
                            }
                        },
                        Some(other) => {
                            return e.fail(DynErrorKind::WrongType {
                                expected: "a message type name",
                                found: describe(other),
                            });
                        }
                        None => schema.and_then(|s| s.field(number)).and_then(|f| match f.kind {
                            FieldKind::Message(i) => Some(i),
                            _ => None,
                        }),
                    };
                    let bytes = e.message(idx, val)?;
                    put_len_delimited(number, &bytes, &mut out);
                }
                _ => unreachable!("kinds filtered above"),
            }
            Ok(())
        })?;
        Ok(Chunk { rank: u32::MAX, number, name: None, bytes: out })
    }
}

/// An integer from a JSON number without fraction or a decimal string.
fn integer_of(v: &Value) -> Option<i128> {
    match v {
        Value::Number(n) => {
            n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)).or_else(|| {
                // 2.0 is an integer; 2.5 and 1e30 are not.
                n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1.8e19).map(|f| f as i128)
            })
        }
        Value::String(s) => {
            let t = s.trim();
            let digits = t.strip_prefix('-').unwrap_or(t);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 30 {
                return None;
            }
            t.parse::<i128>().ok()
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Decodes a frame body into an Envelope tree.
pub fn decode(body: &[u8]) -> Result<Value, DynError> {
    let mut d = Decoder { body, path: Vec::new() };
    d.message(ENVELOPE, 0, body.len(), RECURSION_LIMIT)
}

/// The tree of an Envelope decoded by prost. prost drops unknown fields; use
/// [`from_decoded`] to keep the ones the frame decoder found.
pub fn from_envelope(envelope: &Envelope) -> Result<Value, DynError> {
    use prost::Message;
    decode(&envelope.encode_to_vec())
}

/// The tree of a decoded frame, with the unknown fields its wire report found listed under
/// [`UNKNOWN_FIELDS`] of the message they were in. A report path that runs through a list
/// (`Envelope.tool_list.tools`) does not say which element: such fields are listed at the
/// message that holds the list, with an extra `path` member naming the report path.
pub fn from_decoded(decoded: &Decoded) -> Result<Value, DynError> {
    let mut value = from_envelope(&decoded.envelope)?;
    let Some(report) = &decoded.wire else { return Ok(value) };
    for uf in &report.unknown {
        let mut entry = match raw_field_entry(&uf.raw) {
            Some(Value::Object(o)) => o,
            _ => continue,
        };
        let segments: Vec<&str> = uf.path.split('.').skip(1).collect();
        let mut target = &mut value;
        let mut reached = true;
        for seg in &segments {
            let next_is_object = target.get(*seg).is_some_and(Value::is_object);
            if !next_is_object {
                reached = false;
                break;
            }
            target = target.get_mut(*seg).expect("checked above");
        }
        if !reached {
            entry.insert("path".into(), Value::String(uf.path.clone()));
        }
        if let Value::Object(obj) = target {
            let list = obj.entry(UNKNOWN_FIELDS).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = list {
                a.push(Value::Object(entry));
            }
        }
    }
    Ok(value)
}

/// The [`UNKNOWN_FIELDS`] entry of one raw field (key included).
fn raw_field_entry(raw: &[u8]) -> Option<Value> {
    let d = Decoder { body: raw, path: Vec::new() };
    let mut pos = 0;
    let (number, wire_type) = d.key(&mut pos, raw.len()).ok()?;
    d.unknown_value(number, wire_type, &mut pos, raw.len(), RECURSION_LIMIT).ok()
}

/// The name of the arm set in an Envelope tree (the last one in field-number order when a
/// hand-made tree holds several), or `None`.
pub fn arm_of(value: &Value) -> Option<&'static str> {
    let obj = value.as_object()?;
    MESSAGES[ENVELOPE].fields.iter().filter(|f| f.in_oneof && obj.contains_key(f.name)).map(|f| f.name).next_back()
}

struct Decoder<'a> {
    body: &'a [u8],
    path: Vec<PathSeg>,
}

/// What has been read of one known field of a message.
enum Acc {
    Scalar(Value),
    Repeated(Vec<Value>),
    /// A singular message: the bytes of every occurrence, merged by concatenation as proto3 does.
    Message(Vec<u8>),
}

impl Decoder<'_> {
    fn wire<T>(&self, offset: usize, why: impl Into<String>) -> Result<T, DynError> {
        Err(err(&self.path, DynErrorKind::Wire { offset, why: why.into() }))
    }

    fn varint(&self, pos: &mut usize, end: usize) -> Result<u64, DynError> {
        let start = *pos;
        let mut value: u64 = 0;
        for i in 0..10 {
            if *pos >= end {
                return self.wire(start, "varint runs past the end");
            }
            let b = self.body[*pos];
            *pos += 1;
            if i == 9 && b > 1 {
                return self.wire(start, "varint longer than 64 bits");
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        self.wire(start, "varint longer than 10 bytes")
    }

    fn key(&self, pos: &mut usize, end: usize) -> Result<(u32, u8), DynError> {
        let at = *pos;
        let key = self.varint(pos, end)?;
        if key > u64::from(u32::MAX) {
            return self.wire(at, format!("invalid field key {key}"));
        }
        let wire_type = (key & 7) as u8;
        if wire_type > 5 {
            return self.wire(at, format!("invalid wire type {wire_type}"));
        }
        let number = (key >> 3) as u32;
        if number == 0 {
            return self.wire(at, "field number 0");
        }
        Ok((number, wire_type))
    }

    fn len_delimited(&self, pos: &mut usize, end: usize) -> Result<(usize, usize), DynError> {
        let at = *pos;
        let len = self.varint(pos, end)?;
        let left = end - *pos;
        if len > left as u64 {
            return self.wire(at, format!("length-delimited field of {len} bytes with only {left} left"));
        }
        let start = *pos;
        *pos += len as usize;
        Ok((start, *pos))
    }

    fn message(&mut self, idx: usize, start: usize, end: usize, depth: u32) -> Result<Value, DynError> {
        let schema = &MESSAGES[idx];
        let mut acc: Vec<(u32, Acc)> = Vec::new();
        let mut unknown: Vec<Value> = Vec::new();
        // The arm in effect and the bytes of its consecutive occurrences.
        let mut arm: Option<(u32, Vec<u8>)> = None;
        let mut pos = start;
        while pos < end {
            let at = pos;
            let (number, wire_type) = self.key(&mut pos, end)?;
            let Some(field) = schema.field(number) else {
                let entry = self.unknown_value(number, wire_type, &mut pos, end, depth)?;
                unknown.push(entry);
                continue;
            };
            let packed = field.repeated && wire_type == 2 && field.kind.wire_type() == 0;
            if wire_type != field.kind.wire_type() && !packed {
                return self.wire(
                    at,
                    format!("field `{}` has wire type {wire_type}, expected {}", field.name, field.kind.wire_type()),
                );
            }
            if field.in_oneof {
                let (s, e) = self.len_delimited(&mut pos, end)?;
                // Checked where it is, so that an error names its offset in the body; the
                // merged occurrences are decoded at the end.
                if let FieldKind::Message(child) = field.kind {
                    if depth == 0 {
                        return self.wire(s, "nesting too deep");
                    }
                    self.path.push(PathSeg::Key(field.name.to_owned()));
                    let checked = self.message(child, s, e, depth - 1);
                    self.path.pop();
                    checked?;
                }
                match &mut arm {
                    Some((n, bytes)) if *n == number => bytes.extend_from_slice(&self.body[s..e]),
                    _ => arm = Some((number, self.body[s..e].to_vec())),
                }
                continue;
            }
            let slot = match acc.iter().position(|(n, _)| *n == number) {
                Some(i) => i,
                None => {
                    let init = match (field.repeated, field.kind) {
                        (true, _) => Acc::Repeated(Vec::new()),
                        (false, FieldKind::Message(_)) => Acc::Message(Vec::new()),
                        (false, _) => Acc::Scalar(Value::Null),
                    };
                    acc.push((number, init));
                    acc.len() - 1
                }
            };
            self.path.push(PathSeg::Key(field.name.to_owned()));
            let read = self.known_value(field, wire_type, &mut pos, end, depth, &mut acc[slot].1);
            self.path.pop();
            read?;
        }
        let mut obj = Map::new();
        for (number, a) in acc {
            let field = schema.field(number).expect("accumulated fields are known");
            self.path.push(PathSeg::Key(field.name.to_owned()));
            let value = match a {
                Acc::Scalar(v) => Some(v).filter(|v| !is_default(v)),
                Acc::Repeated(items) => Some(Value::Array(items)),
                Acc::Message(bytes) => {
                    let FieldKind::Message(child) = field.kind else { unreachable!() };
                    if depth == 0 {
                        return self.wire(start, "nesting too deep");
                    }
                    let inner =
                        Decoder { body: &bytes, path: self.path.clone() }.message(child, 0, bytes.len(), depth - 1);
                    Some(inner?)
                }
            };
            self.path.pop();
            if let Some(v) = value {
                obj.insert(field.name.to_owned(), v);
            }
        }
        if let Some((number, bytes)) = arm {
            let field = schema.field(number).expect("arms are known");
            let FieldKind::Message(child) = field.kind else {
                return self.wire(start, format!("oneof member `{}` is not a message", field.name));
            };
            if depth == 0 {
                return self.wire(start, "nesting too deep");
            }
            let mut path = self.path.clone();
            path.push(PathSeg::Key(field.name.to_owned()));
            let inner = Decoder { body: &bytes, path }.message(child, 0, bytes.len(), depth - 1)?;
            obj.insert(field.name.to_owned(), inner);
        }
        if !unknown.is_empty() {
            obj.insert(UNKNOWN_FIELDS.to_owned(), Value::Array(unknown));
        }
        Ok(Value::Object(obj))
    }

    fn known_value(
        &mut self,
        field: &FieldSchema,
        wire_type: u8,
        pos: &mut usize,
        end: usize,
        depth: u32,
        acc: &mut Acc,
    ) -> Result<(), DynError> {
        let push = |acc: &mut Acc, v: Value| match acc {
            Acc::Scalar(slot) => *slot = v,
            Acc::Repeated(items) => items.push(v),
            Acc::Message(_) => {}
        };
        match field.kind {
            FieldKind::String => {
                let (s, e) = self.len_delimited(pos, end)?;
                match std::str::from_utf8(&self.body[s..e]) {
                    Ok(text) => push(acc, Value::String(text.to_owned())),
                    Err(u) => return self.wire(s + u.valid_up_to(), "string is not UTF-8"),
                }
            }
            FieldKind::Bytes => {
                let (s, e) = self.len_delimited(pos, end)?;
                push(acc, bytes_value(&self.body[s..e]));
            }
            FieldKind::Message(child) => {
                let (s, e) = self.len_delimited(pos, end)?;
                if depth == 0 {
                    return self.wire(s, "nesting too deep");
                }
                match acc {
                    Acc::Message(bytes) => {
                        self.message(child, s, e, depth - 1)?;
                        bytes.extend_from_slice(&self.body[s..e]);
                    }
                    Acc::Repeated(items) => {
                        self.path.push(PathSeg::Index(items.len()));
                        let v = self.message(child, s, e, depth - 1);
                        self.path.pop();
                        items.push(v?);
                    }
                    Acc::Scalar(_) => {}
                }
            }
            kind if wire_type == 2 => {
                // Packed repeated scalars.
                let (s, e) = self.len_delimited(pos, end)?;
                let mut p = s;
                while p < e {
                    let raw = self.varint(&mut p, e)?;
                    push(acc, scalar_value(kind, raw));
                }
            }
            kind => {
                let raw = self.varint(pos, end)?;
                push(acc, scalar_value(kind, raw));
            }
        }
        Ok(())
    }

    /// Reads the value of a field the schema does not know into its [`UNKNOWN_FIELDS`] entry.
    fn unknown_value(
        &self,
        number: u32,
        wire_type: u8,
        pos: &mut usize,
        end: usize,
        depth: u32,
    ) -> Result<Value, DynError> {
        let mut entry = Map::new();
        entry.insert("number".into(), Value::from(number));
        match wire_type {
            0 => {
                let v = self.varint(pos, end)?;
                entry.insert("varint".into(), Value::from(v));
            }
            1 | 5 => {
                let need = if wire_type == 1 { 8 } else { 4 };
                if end - *pos < need {
                    return self.wire(*pos, format!("fixed-width field needs {need} bytes, {} left", end - *pos));
                }
                let mut buf = [0u8; 8];
                buf[..need].copy_from_slice(&self.body[*pos..*pos + need]);
                *pos += need;
                let v = u64::from_le_bytes(buf);
                entry.insert(if wire_type == 1 { "fixed64" } else { "fixed32" }.into(), Value::from(v));
            }
            2 => {
                let (s, e) = self.len_delimited(pos, end)?;
                entry.insert("bytes_hex".into(), Value::String(hex_encode(&self.body[s..e])));
            }
            3 => {
                let start = *pos;
                let inner_end = self.skip_group(number, pos, end, depth)?;
                entry.insert("wire_type".into(), Value::from(3));
                entry.insert("raw_hex".into(), Value::String(hex_encode(&self.body[start..inner_end])));
            }
            _ => return self.wire(*pos, "end-group tag without a start"),
        }
        Ok(Value::Object(entry))
    }

    /// Skips a group's content and its end-group key; returns where the content ended.
    fn skip_group(&self, number: u32, pos: &mut usize, end: usize, depth: u32) -> Result<usize, DynError> {
        if depth == 0 {
            return self.wire(*pos, "nesting too deep");
        }
        loop {
            if *pos >= end {
                return self.wire(*pos, "group without its end-group tag");
            }
            let before = *pos;
            let (inner, inner_type) = self.key(pos, end)?;
            if inner_type == 4 {
                if inner != number {
                    return self.wire(before, "end-group tag does not match its group");
                }
                return Ok(before);
            }
            self.unknown_value(inner, inner_type, pos, end, depth - 1)?;
        }
    }
}

fn scalar_value(kind: FieldKind, raw: u64) -> Value {
    match kind {
        FieldKind::Bool => Value::Bool(raw != 0),
        FieldKind::Int32 => Value::from(raw as i32),
        FieldKind::Int64 => Value::from(raw as i64),
        FieldKind::Uint32 => Value::from(raw as u32),
        _ => Value::from(raw),
    }
}

/// `{hex}` plus `{text}` when the bytes are UTF-8.
fn bytes_value(bytes: &[u8]) -> Value {
    let mut o = Map::new();
    o.insert("hex".into(), Value::String(hex_encode(bytes)));
    if let Ok(text) = std::str::from_utf8(bytes) {
        o.insert("text".into(), Value::String(text.to_owned()));
    }
    Value::Object(o)
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

#[cfg(test)]
mod tests {
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
        assert!(
            e.to_string().starts_with("call_tul: Envelope has no field `call_tul`; valid: reload, list_tools"),
            "{e}"
        );
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
        let tree = json!({"request_id": "${rid}", "progress": {"progress": "${n}"}, "stream_chunk": {"data": {"text": "${d}"}}});
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
}
