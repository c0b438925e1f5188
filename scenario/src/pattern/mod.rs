//! Envelope patterns: compiled from the YAML of an `expect` step (checked against the schema),
//! and matched against the [`dynamic`] tree of what the peer sent.
//!
//! Rules (scenarios/README.md has the full reference):
//! - a mapping matches an object that has at least its keys: keys the pattern leaves out are
//!   ignored, keys it names must match. A scalar field the peer left at its default (and so did
//!   not send) matches as that default (`is_error: false` matches a result without is_error);
//! - a list matches element-wise, in order, with the same length;
//! - strings, numbers and booleans match by value (numbers by numeric value);
//! - `*_json` fields are parsed and compared as JSON: the pattern may be any YAML structure
//!   (with matchers inside) or a string holding JSON text;
//! - matchers are mappings whose keys are all matcher keywords: `regex`, `capture`, `any_of`,
//!   `absent`, `not_empty`, `contains`, `unordered`, `includes`, `equals`, `not`, `json`,
//!   `entries` (several keywords in one mapping must all hold);
//! - at the top of an Envelope pattern, `arm: name` (or a list of names) requires that arm, and
//!   `via: frame | sideband | stream` (or a list) the form a result came in (see
//!   [`super::normalize`]).

use std::fmt;

use protomcp_proto::dynamic::{self, PathSeg, describe};
use protomcp_proto::envelopes::Arm;
use protomcp_proto::schema::{ENVELOPE, FieldKind, FieldSchema, MESSAGES};
use regex::{Regex, RegexBuilder};
use serde_json::Value;

use super::template::{self, Captures, Piece, RenderError};
use super::yaml::{Loc, Node, NodeKind};

mod compile;
mod display;
mod matching;

pub use matching::{match_any_order, match_envelope, match_value, show, values_equal};

/// The matcher keywords.
pub const KEYWORDS: &[&str] = &[
    "regex",
    "capture",
    "any_of",
    "absent",
    "not_empty",
    "contains",
    "unordered",
    "includes",
    "equals",
    "not",
    "json",
    "entries",
];

/// The forms a call result can take (TP-STREAM-01).
pub const VIAS: &[&str] = &["frame", "sideband", "stream"];

/// Keys allowed at the top of an Envelope pattern besides the Envelope's fields.
pub const ENVELOPE_PATTERN_KEYS: &[&str] = &["arm", "via", "sideband", "stream", "size_rule"];

/// Largest compiled regex (bytes of program), so that no scenario can make the harness compile
/// something huge.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// `null`, a boolean or a number, compared by value.
    Literal(Value),
    /// A string, possibly with placeholders; a lone placeholder compares the captured value.
    Text(Vec<Piece>),
    /// Keys that must match (`None`: a constraint on the object itself, such as `arm`).
    Object(Vec<(Option<String>, Pattern)>),
    List(Vec<Pattern>),
    Unordered(Vec<Pattern>),
    Includes(Vec<Pattern>),
    /// An object whose members, as `{key, value}` pairs, match these patterns in some order, as
    /// many as there are (a name the peer chose can be captured: `key: {capture: k}`).
    Entries(Vec<Pattern>),
    Regex(RegexPattern),
    Contains(Vec<Piece>),
    Capture(String),
    AnyOf(Vec<Pattern>),
    All(Vec<Pattern>),
    Not(Box<Pattern>),
    /// `absent: true` (missing or default) / `absent: false` (present, not default).
    Absent(bool),
    NotEmpty,
    /// Exact equality with this value (placeholders in its strings filled in).
    Equals(Value),
    /// The actual value is a string holding JSON; the inner pattern matches the parsed value.
    Json(Box<Pattern>),
    /// JSON text with placeholders: filled in, parsed, then compared like a literal structure.
    JsonText(Vec<Piece>),
    /// A proto3 scalar field: when the peer did not send it, it matches as this default.
    Default(Value, Box<Pattern>),
    /// The Envelope's arm is one of these.
    Arm(Vec<String>),
    /// The result came as one of these forms.
    Via(Vec<String>),
    /// A size threshold rule judged against the received result's own length (so that SDKs
    /// spelling the same JSON with other whitespace are judged by their own bytes).
    SizeRule(SizeRule),
}

/// `size_rule` at the top of an Envelope pattern: L is the UTF-8 length of the received
/// `call_result.result_json` (after reassembly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeRule {
    /// `{sideband_over: N}`: via sideband when L > N, else via frame (TP-SIDEBAND-08).
    SidebandOver(u64),
    /// `{compress_over: N}`: a sideband transfer with compression zstd when L > N, else plain
    /// (TP-SIDEBAND-09).
    CompressOver(u64),
}

/// A regex, compiled at load time, or at match time when it holds placeholders (their values
/// are inserted escaped).
#[derive(Debug, Clone)]
pub enum RegexPattern {
    Fixed(Regex),
    Template(Vec<Piece>),
}

/// Why a pattern does not compile, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatternError {
    pub loc: Loc,
    pub message: String,
}

/// Why a value does not match: where, what was expected, what was there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: expected {expected}, got {actual}", dynamic::display_path(path))]
pub struct Mismatch {
    pub path: Vec<PathSeg>,
    pub expected: String,
    pub actual: String,
}

/// The schema context a pattern is compiled in.
#[derive(Debug, Clone, Copy)]
enum Ctx {
    /// A message of this schema; `true` for the Envelope itself (where `arm`, `via`, … go).
    Msg(usize, bool),
    /// The value of a field (a list when the field is repeated).
    Field(&'static FieldSchema),
    /// One element of a repeated field.
    Elem(&'static FieldSchema),
    /// Inside parsed JSON, or any other schema-less value.
    Free,
}

/// Compiles patterns and records the captures they define and the placeholders they use.
#[derive(Debug, Default)]
pub struct Compiler {
    /// Capture names bound by the patterns compiled so far.
    pub defined: Vec<String>,
    /// Placeholder names used, with where.
    pub used: Vec<(String, Loc)>,
}

fn fail<T>(loc: Loc, message: impl Into<String>) -> Result<T, PatternError> {
    Err(PatternError { loc, message: message.into() })
}

fn check_placeholders(v: &Value) -> Result<(), template::SyntaxError> {
    match v {
        Value::String(s) => template::parse(s).map(drop),
        Value::Array(a) => a.iter().try_for_each(check_placeholders),
        Value::Object(o) => o.values().try_for_each(check_placeholders),
        _ => Ok(()),
    }
}

fn arm_names() -> Vec<String> {
    Arm::ALL.iter().map(|a| a.name().to_owned()).collect()
}

/// A `regex:` pattern that does not compile (within the size limits), with the regex crate's
/// reason on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regex: {0}")]
pub struct RegexError(String);

fn build_regex(text: &str) -> Result<Regex, RegexError> {
    RegexBuilder::new(text)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| RegexError(e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")))
}

/// The value a proto3 field has when it is not on the wire; `None` for message fields, which
/// have presence.
fn default_of(f: &FieldSchema) -> Option<Value> {
    if f.repeated {
        return Some(Value::Array(Vec::new()));
    }
    match f.kind {
        FieldKind::Message(_) => None,
        FieldKind::String => Some(Value::String(String::new())),
        FieldKind::Bytes => Some(serde_json::json!({"hex": "", "text": ""})),
        FieldKind::Bool => Some(Value::Bool(false)),
        _ => Some(Value::from(0)),
    }
}

/// A literal structure (from JSON text): objects match as subsets, lists element-wise.
fn literal(v: &Value) -> Pattern {
    match v {
        Value::String(s) => Pattern::Text(vec![Piece::Lit(s.clone())]),
        Value::Array(a) => Pattern::List(a.iter().map(literal).collect()),
        Value::Object(o) => Pattern::Object(o.iter().map(|(k, v)| (Some(k.clone()), literal(v))).collect()),
        other => Pattern::Literal(other.clone()),
    }
}

impl Pattern {
    /// Compiles an Envelope pattern from a JSON tree (no source locations): for patterns built
    /// in code.
    pub fn envelope_from_value(v: &Value) -> Result<Pattern, PatternError> {
        Compiler::default().envelope(&Node::from_value(v))
    }

    /// Compiles a schema-less pattern from a JSON tree.
    pub fn value_from_value(v: &Value) -> Result<Pattern, PatternError> {
        Compiler::default().value(&Node::from_value(v))
    }
}

/// Short description of a JSON value's type (re-exported for the loader's messages).
pub fn describe_value(v: &Value) -> String {
    describe(v)
}
