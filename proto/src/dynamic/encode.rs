//! Encoding: a JSON tree into protobuf bytes, with raw fields, several arms and any wire order.

use serde_json::{Map, Value};

use super::{
    DynError, DynErrorKind, ENVELOPE, FIELD_ORDER, FieldKind, FieldSchema, MAX_FIELD_NUMBER, MESSAGES, MessageSchema,
    PathSeg, UNKNOWN_ENTRY_KEYS, UNKNOWN_FIELDS, describe, err, hex_decode, message_index, message_names, prost_rank,
    put_key, put_len_delimited, valid_keys, varint,
};

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
                        varint::put(varint, &mut packed);
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
                    varint::put(x, &mut out);
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
        let out = self.with(PathSeg::Key((*kind).to_owned()), |e| e.raw_value(schema, obj, number, kind, val))?;
        Ok(Chunk { rank: u32::MAX, number, name: None, bytes: out })
    }

    /// The bytes of one raw field: its key and the value written as `kind` says.
    fn raw_value(
        &mut self,
        schema: Option<&MessageSchema>,
        obj: &Map<String, Value>,
        number: u32,
        kind: &str,
        val: &Value,
    ) -> Result<Vec<u8>, DynError> {
        let mut out = Vec::new();
        match kind {
            "varint" => {
                let x = self.raw_integer(val, 64)?;
                put_key(number, 0, &mut out);
                varint::put(x, &mut out);
            }
            "fixed32" => {
                let x = self.raw_integer(val, 32)?;
                put_key(number, 5, &mut out);
                out.extend_from_slice(&(x as u32).to_le_bytes());
            }
            "fixed64" => {
                let x = self.raw_integer(val, 64)?;
                put_key(number, 1, &mut out);
                out.extend_from_slice(&x.to_le_bytes());
            }
            "bytes_hex" | "raw_hex" | "text" => {
                let Value::String(s) = val else {
                    if self.is_wildcard(val) {
                        return Ok(out);
                    }
                    return self.fail(DynErrorKind::WrongType { expected: "a string", found: describe(val) });
                };
                if self.is_wildcard(val) {
                    return Ok(out);
                }
                let bytes = if kind == "text" {
                    s.as_bytes().to_vec()
                } else {
                    hex_decode(s).map_err(|why| err(&self.path, DynErrorKind::BadHex(why)))?
                };
                if kind == "raw_hex" {
                    let wire_type = match obj.get("wire_type") {
                        Some(w) => match w.as_u64().filter(|w| *w <= 5) {
                            Some(w) => w as u8,
                            None => {
                                return self.fail(DynErrorKind::Invalid("`wire_type` must be 0..=5".into()));
                            }
                        },
                        None => return self.fail(DynErrorKind::Invalid("`raw_hex` needs `wire_type`".into())),
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
                let idx = self.raw_message_type(schema, obj, number)?;
                let bytes = self.message(idx, val)?;
                put_len_delimited(number, &bytes, &mut out);
            }
            _ => unreachable!("kinds filtered above"),
        }
        Ok(out)
    }

    /// A raw field's integer, range-checked for a field of `bits` bits (negatives as two's complement).
    fn raw_integer(&self, val: &Value, bits: u32) -> Result<u64, DynError> {
        let n = integer_of(val)
            .ok_or_else(|| err(&self.path, DynErrorKind::WrongType { expected: "an integer", found: describe(val) }))?;
        let (min, max) = if bits == 64 {
            (i128::from(i64::MIN), i128::from(u64::MAX))
        } else {
            (i128::from(i32::MIN), i128::from(u32::MAX))
        };
        if n < min || n > max {
            return Err(err(&self.path, DynErrorKind::OutOfRange { kind: "this raw field", value: n.to_string() }));
        }
        Ok(if n < 0 { n as i64 as u64 } else { n as u64 })
    }

    /// The message type of a raw `message` entry: its `type`, else the schema's for `number`.
    fn raw_message_type(
        &self,
        schema: Option<&MessageSchema>,
        obj: &Map<String, Value>,
        number: u32,
    ) -> Result<Option<usize>, DynError> {
        Ok(match obj.get("type") {
            Some(Value::String(t)) => match message_index(t) {
                Some(i) => Some(i),
                None => {
                    return self.fail(DynErrorKind::Invalid(format!(
                        "no message type `{t}`; valid: {}",
                        message_names().join(", ")
                    )));
                }
            },
            Some(other) => {
                return self.fail(DynErrorKind::WrongType { expected: "a message type name", found: describe(other) });
            }
            None => schema.and_then(|s| s.field(number)).and_then(|f| match f.kind {
                FieldKind::Message(i) => Some(i),
                _ => None,
            }),
        })
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
