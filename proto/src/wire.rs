//! A protobuf wire scanner driven by the schema table: it walks an Envelope body the way prost
//! does, but keeps what prost throws away — the byte offset where decoding fails, and every
//! unknown field (with its raw bytes), so the harness can report them.
//!
//! The frame decoder only runs it when prost fails, or when the decoded Envelope re-encodes to a
//! different length than it arrived with (the sign of unknown, repeated or non-canonical fields),
//! so the common path pays nothing for it.

use std::fmt;

use bytes::Bytes;

use crate::schema::{FieldKind, MESSAGES, MessageSchema};
use crate::varint::{self, RECURSION_LIMIT, ReadErrorKind};

/// A field the schema does not know, kept with its raw bytes (tag included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Where it was found: `Envelope`, or e.g. `Envelope.call_tool` for a field inside the
    /// CallToolRequest of an Envelope.
    pub path: String,
    pub number: u32,
    pub wire_type: u8,
    /// Offset of its tag within the frame body.
    pub offset: usize,
    /// The whole field as it was on the wire, tag included.
    pub raw: Bytes,
}

impl UnknownField {
    /// A length-delimited field the Envelope itself does not know: an arm of a newer protocol.
    pub fn is_unknown_arm(&self) -> bool {
        self.path == "Envelope" && self.wire_type == 2
    }
}

/// What the scanner found in a body that decodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WireReport {
    pub unknown: Vec<UnknownField>,
    /// Field numbers of the oneof arms in wire order, when more than one arm occurrence was
    /// present (the last one wins, TP-FRAME-10).
    pub arms: Vec<u32>,
}

impl WireReport {
    pub fn is_empty(&self) -> bool {
        self.unknown.is_empty() && self.arms.len() <= 1
    }
}

/// Why a body is not a valid Envelope, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset within the frame body.
    pub offset: usize,
    /// The message being read (`Envelope.tool_list.tools`).
    pub path: String,
    pub kind: WireErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireErrorKind {
    TruncatedVarint,
    OverlongVarint,
    InvalidKey(u64),
    InvalidWireType(u8),
    FieldNumberZero,
    /// A length-delimited field announces more bytes than its enclosing message has left.
    LengthOverrun {
        len: u64,
        left: usize,
    },
    TruncatedFixed {
        need: usize,
        left: usize,
    },
    WrongWireType {
        field: &'static str,
        expected: u8,
        got: u8,
    },
    InvalidUtf8 {
        field: &'static str,
        valid_up_to: usize,
    },
    UnexpectedEndGroup,
    UnterminatedGroup,
    RecursionLimit,
    /// prost refused what the scanner accepted (should not happen; kept for honesty).
    Other(String),
}

impl fmt::Display for WireErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireErrorKind::TruncatedVarint => write!(f, "varint runs past the end"),
            WireErrorKind::OverlongVarint => write!(f, "varint longer than 10 bytes or above 64 bits"),
            WireErrorKind::InvalidKey(k) => write!(f, "invalid field key {k}"),
            WireErrorKind::InvalidWireType(t) => write!(f, "invalid wire type {t}"),
            WireErrorKind::FieldNumberZero => write!(f, "field number 0"),
            WireErrorKind::LengthOverrun { len, left } => {
                write!(f, "length-delimited field of {len} bytes with only {left} left")
            }
            WireErrorKind::TruncatedFixed { need, left } => {
                write!(f, "fixed-width field needs {need} bytes, {left} left")
            }
            WireErrorKind::WrongWireType { field, expected, got } => {
                write!(f, "field `{field}` has wire type {got}, expected {expected}")
            }
            WireErrorKind::InvalidUtf8 { field, valid_up_to } => {
                write!(f, "string field `{field}` is not UTF-8 (valid up to byte {valid_up_to} of the string)")
            }
            WireErrorKind::UnexpectedEndGroup => write!(f, "end-group tag without a start"),
            WireErrorKind::UnterminatedGroup => write!(f, "group without its end-group tag"),
            WireErrorKind::RecursionLimit => write!(f, "nesting deeper than {RECURSION_LIMIT}"),
            WireErrorKind::Other(why) => write!(f, "{why}"),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at body byte {} (in {}): {}", self.offset, self.path, self.kind)
    }
}

impl std::error::Error for WireError {}

/// Scans `body` as an Envelope.
pub fn scan(body: &Bytes) -> Result<WireReport, WireError> {
    let mut report = WireReport::default();
    let mut arms_seen = Vec::new();
    let mut s = Scanner { body, report: &mut report, arms: &mut arms_seen };
    s.message(&MESSAGES[crate::schema::ENVELOPE], "Envelope", 0, body.len(), RECURSION_LIMIT)?;
    if arms_seen.len() > 1 {
        report.arms = arms_seen;
    }
    Ok(report)
}

/// Where the last oneof arm of an Envelope body begins (the offset of its tag), each field read
/// and stepped over as [`scan`] does; `None` when the body has no arm or does not scan. For the
/// fault `tp.frame.arm-resets` (a decoder that starts afresh at the arm).
pub fn last_arm_at(body: &Bytes) -> Option<usize> {
    let (mut report, mut arms) = (WireReport::default(), Vec::new());
    let s = Scanner { body, report: &mut report, arms: &mut arms };
    let schema = &MESSAGES[crate::schema::ENVELOPE];
    let (mut pos, mut last) = (0, None);
    while pos < body.len() {
        let at = pos;
        let (number, wire_type) = s.key(&mut pos, body.len(), "Envelope").ok()?;
        if schema.field(number).is_some_and(|f| f.in_oneof) {
            last = Some(at);
        }
        s.skip(&mut pos, body.len(), "Envelope", number, wire_type, RECURSION_LIMIT).ok()?;
    }
    last
}

struct Scanner<'a> {
    body: &'a Bytes,
    report: &'a mut WireReport,
    arms: &'a mut Vec<u32>,
}

impl Scanner<'_> {
    fn err(&self, offset: usize, path: &str, kind: WireErrorKind) -> WireError {
        WireError { offset, path: path.to_owned(), kind }
    }

    fn read_err(&self, path: &str, e: varint::ReadError) -> WireError {
        let kind = match e.kind {
            ReadErrorKind::TruncatedVarint => WireErrorKind::TruncatedVarint,
            ReadErrorKind::OverlongVarint => WireErrorKind::OverlongVarint,
            ReadErrorKind::InvalidKey(k) => WireErrorKind::InvalidKey(k),
            ReadErrorKind::InvalidWireType(t) => WireErrorKind::InvalidWireType(t),
            ReadErrorKind::FieldNumberZero => WireErrorKind::FieldNumberZero,
            ReadErrorKind::LengthOverrun { len, left } => WireErrorKind::LengthOverrun { len, left },
        };
        self.err(e.offset, path, kind)
    }

    fn varint(&self, pos: &mut usize, end: usize, path: &str) -> Result<u64, WireError> {
        varint::read(self.body, pos, end).map_err(|e| self.read_err(path, e))
    }

    /// Reads a key; returns (field number, wire type).
    fn key(&self, pos: &mut usize, end: usize, path: &str) -> Result<(u32, u8), WireError> {
        varint::read_key(self.body, pos, end).map_err(|e| self.read_err(path, e))
    }

    fn len_delimited(&self, pos: &mut usize, end: usize, path: &str) -> Result<(usize, usize), WireError> {
        varint::read_len_delimited(self.body, pos, end).map_err(|e| self.read_err(path, e))
    }

    fn message(
        &mut self,
        schema: &'static MessageSchema,
        path: &str,
        mut pos: usize,
        end: usize,
        depth: u32,
    ) -> Result<(), WireError> {
        let is_envelope = std::ptr::eq(schema, &MESSAGES[crate::schema::ENVELOPE]);
        while pos < end {
            let field_at = pos;
            let (number, wire_type) = self.key(&mut pos, end, path)?;
            match schema.field(number) {
                Some(field) => {
                    let expected = field.kind.wire_type();
                    if wire_type != expected {
                        return Err(self.err(
                            field_at,
                            path,
                            WireErrorKind::WrongWireType { field: field.name, expected, got: wire_type },
                        ));
                    }
                    if is_envelope && field.in_oneof {
                        self.arms.push(number);
                    }
                    match field.kind {
                        FieldKind::Message(idx) => {
                            if depth == 0 {
                                return Err(self.err(field_at, path, WireErrorKind::RecursionLimit));
                            }
                            let (s, e) = self.len_delimited(&mut pos, end, path)?;
                            let child = format!("{path}.{}", field.name);
                            self.message(&MESSAGES[idx], &child, s, e, depth - 1)?;
                        }
                        FieldKind::String => {
                            let (s, e) = self.len_delimited(&mut pos, end, path)?;
                            if let Err(u) = std::str::from_utf8(&self.body[s..e]) {
                                return Err(self.err(
                                    s + u.valid_up_to(),
                                    path,
                                    WireErrorKind::InvalidUtf8 { field: field.name, valid_up_to: u.valid_up_to() },
                                ));
                            }
                        }
                        FieldKind::Bytes => {
                            self.len_delimited(&mut pos, end, path)?;
                        }
                        _ => {
                            self.varint(&mut pos, end, path)?;
                        }
                    }
                }
                None => {
                    self.skip(&mut pos, end, path, number, wire_type, depth)?;
                    self.report.unknown.push(UnknownField {
                        path: path.to_owned(),
                        number,
                        wire_type,
                        offset: field_at,
                        raw: self.body.slice(field_at..pos),
                    });
                }
            }
        }
        Ok(())
    }

    /// Skips the value of an unknown field, as prost's `skip_field` does.
    fn skip(
        &self,
        pos: &mut usize,
        end: usize,
        path: &str,
        number: u32,
        wire_type: u8,
        depth: u32,
    ) -> Result<(), WireError> {
        if depth == 0 {
            return Err(self.err(*pos, path, WireErrorKind::RecursionLimit));
        }
        match wire_type {
            0 => {
                self.varint(pos, end, path)?;
            }
            1 | 5 => {
                let need = if wire_type == 1 { 8 } else { 4 };
                let left = end - *pos;
                if left < need {
                    return Err(self.err(*pos, path, WireErrorKind::TruncatedFixed { need, left }));
                }
                *pos += need;
            }
            2 => {
                self.len_delimited(pos, end, path)?;
            }
            3 => loop {
                if *pos >= end {
                    return Err(self.err(*pos, path, WireErrorKind::UnterminatedGroup));
                }
                let (inner, inner_type) = self.key(pos, end, path)?;
                if inner_type == 4 {
                    if inner != number {
                        return Err(self.err(*pos, path, WireErrorKind::UnexpectedEndGroup));
                    }
                    break;
                }
                self.skip(pos, end, path, inner, inner_type, depth - 1)?;
            },
            _ => return Err(self.err(*pos, path, WireErrorKind::UnexpectedEndGroup)),
        }
        Ok(())
    }
}
