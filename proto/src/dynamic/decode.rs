//! Decoding: protobuf bytes into a JSON tree, keeping unknown fields and error offsets.

use serde_json::{Map, Value};

use super::{
    Decoded, DynError, DynErrorKind, ENVELOPE, Envelope, FieldKind, FieldSchema, MESSAGES, MessageSchema, PathSeg,
    RECURSION_LIMIT, ReadErrorKind, UNKNOWN_FIELDS, err, hex_encode, is_default, varint,
};

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

    /// A read error of the shared reader, in this decoder's words.
    fn read_err<T>(&self, e: varint::ReadError) -> Result<T, DynError> {
        let at = e.offset;
        match e.kind {
            ReadErrorKind::TruncatedVarint => self.wire(at, "varint runs past the end"),
            ReadErrorKind::OverlongVarint => self.wire(at, "varint longer than 64 bits"),
            ReadErrorKind::InvalidKey(key) => self.wire(at, format!("invalid field key {key}")),
            ReadErrorKind::InvalidWireType(t) => self.wire(at, format!("invalid wire type {t}")),
            ReadErrorKind::FieldNumberZero => self.wire(at, "field number 0"),
            ReadErrorKind::LengthOverrun { len, left } => {
                self.wire(at, format!("length-delimited field of {len} bytes with only {left} left"))
            }
        }
    }

    fn varint(&self, pos: &mut usize, end: usize) -> Result<u64, DynError> {
        varint::read(self.body, pos, end).or_else(|e| self.read_err(e))
    }

    fn key(&self, pos: &mut usize, end: usize) -> Result<(u32, u8), DynError> {
        varint::read_key(self.body, pos, end).or_else(|e| self.read_err(e))
    }

    fn len_delimited(&self, pos: &mut usize, end: usize) -> Result<(usize, usize), DynError> {
        varint::read_len_delimited(self.body, pos, end).or_else(|e| self.read_err(e))
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
            let (name, inner) = self.arm_value(schema, number, &bytes, start, depth)?;
            obj.insert(name.to_owned(), inner);
        }
        if !unknown.is_empty() {
            obj.insert(UNKNOWN_FIELDS.to_owned(), Value::Array(unknown));
        }
        Ok(Value::Object(obj))
    }

    /// The oneof arm in effect, decoded from the bytes of its consecutive occurrences.
    fn arm_value(
        &self,
        schema: &MessageSchema,
        number: u32,
        bytes: &[u8],
        start: usize,
        depth: u32,
    ) -> Result<(&'static str, Value), DynError> {
        let field = schema.field(number).expect("arms are known");
        let FieldKind::Message(child) = field.kind else {
            return self.wire(start, format!("oneof member `{}` is not a message", field.name));
        };
        if depth == 0 {
            return self.wire(start, "nesting too deep");
        }
        let mut path = self.path.clone();
        path.push(PathSeg::Key(field.name.to_owned()));
        let inner = Decoder { body: bytes, path }.message(child, 0, bytes.len(), depth - 1)?;
        Ok((field.name, inner))
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
