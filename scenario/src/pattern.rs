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
//!   `absent`, `not_empty`, `contains`, `unordered`, `includes`, `equals`, `not`, `json`
//!   (several keywords in one mapping must all hold);
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

impl Compiler {
    /// An Envelope pattern (the `envelope:` of an `expect`).
    pub fn envelope(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        self.compile(node, Ctx::Msg(ENVELOPE, true))
    }

    /// A pattern of the message type `message` (`"ToolListResponse"`).
    pub fn message(&mut self, node: &Node, message: &str) -> Result<Pattern, PatternError> {
        let idx = MESSAGES
            .iter()
            .position(|m| m.name == message)
            .ok_or_else(|| PatternError { loc: node.loc, message: format!("no message type `{message}`") })?;
        self.compile(node, Ctx::Msg(idx, false))
    }

    /// A pattern of any value (no schema): for stderr text and the like.
    pub fn value(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        self.compile(node, Ctx::Free)
    }

    fn pieces(&mut self, s: &str, loc: Loc) -> Result<Vec<Piece>, PatternError> {
        let pieces = template::parse(s).map_err(|m| PatternError { loc, message: m })?;
        for p in &pieces {
            match p {
                Piece::Var(name) => self.used.push((name.clone(), loc)),
                Piece::Repeat { .. } => {
                    let message = "`${repeat:…}` generates text to send; patterns do not take it".to_owned();
                    return Err(PatternError { loc, message });
                }
                Piece::Lit(_) => {}
            }
        }
        Ok(pieces)
    }

    fn compile(&mut self, node: &Node, ctx: Ctx) -> Result<Pattern, PatternError> {
        if let NodeKind::Map(entries) = &node.kind {
            let keywords = entries.iter().filter(|(k, _)| KEYWORDS.contains(&k.name.as_str())).count();
            if keywords > 0 && keywords == entries.len() {
                return self.matchers(node, ctx);
            }
            let is_message = match ctx {
                Ctx::Msg(..) => true,
                Ctx::Field(f) | Ctx::Elem(f) => {
                    matches!(f.kind, FieldKind::Message(_)) && !(f.repeated && matches!(ctx, Ctx::Field(_)))
                }
                Ctx::Free => false,
            };
            if keywords > 0 && !is_message {
                let (k, _) = entries.iter().find(|(k, _)| KEYWORDS.contains(&k.name.as_str())).expect("counted");
                let others: Vec<&str> = entries
                    .iter()
                    .filter(|(k, _)| !KEYWORDS.contains(&k.name.as_str()))
                    .map(|(k, _)| k.name.as_str())
                    .collect();
                return fail(
                    k.loc,
                    format!(
                        "`{}` is a matcher keyword and cannot be mixed with other keys ({}); write {{equals: …}} to match a literal mapping",
                        k.name,
                        others.join(", ")
                    ),
                );
            }
        }
        match ctx {
            Ctx::Msg(idx, top) => self.message_fields(node, idx, top),
            Ctx::Field(f) if f.repeated => match &node.kind {
                NodeKind::Seq(items) => {
                    Ok(Pattern::List(items.iter().map(|n| self.compile(n, Ctx::Elem(f))).collect::<Result<_, _>>()?))
                }
                other => fail(
                    node.loc,
                    format!(
                        "`{}` is a list: expected a list (or a matcher such as {{includes: […]}}), found {}",
                        f.name,
                        other.describe()
                    ),
                ),
            },
            Ctx::Field(f) | Ctx::Elem(f) => self.typed(node, f),
            Ctx::Free => self.free(node),
        }
    }

    fn message_fields(&mut self, node: &Node, idx: usize, top: bool) -> Result<Pattern, PatternError> {
        let schema = &MESSAGES[idx];
        let entries: &[(super::yaml::Key, Node)] = match &node.kind {
            NodeKind::Map(e) => e,
            NodeKind::Null => &[],
            other => {
                return fail(
                    node.loc,
                    format!("expected a mapping of {} fields, found {}", schema.name, other.describe()),
                );
            }
        };
        let mut out = Vec::new();
        for (key, value) in entries {
            let name = key.name.as_str();
            if top && name == "arm" {
                out.push((
                    None,
                    Pattern::Arm(self.names_of(
                        value,
                        "an arm name",
                        &|n| Arm::from_name(n).is_some(),
                        &arm_names(),
                    )?),
                ));
            } else if top && name == "size_rule" {
                out.push((None, Pattern::SizeRule(self.size_rule(value)?)));
            } else if top && name == "via" {
                let vias: Vec<String> = VIAS.iter().map(|s| (*s).to_owned()).collect();
                out.push((None, Pattern::Via(self.names_of(value, "a result form", &|n| VIAS.contains(&n), &vias)?)));
            } else if (top && (name == "sideband" || name == "stream")) || name == dynamic::UNKNOWN_FIELDS {
                out.push((Some(key.name.clone()), self.compile(value, Ctx::Free)?));
            } else if let Some(f) = schema.field_by_name(name) {
                let p = self.compile(value, Ctx::Field(f))?;
                let p = match default_of(f) {
                    Some(d) => Pattern::Default(d, Box::new(p)),
                    None => p,
                };
                out.push((Some(key.name.clone()), p));
            } else {
                let mut valid: Vec<&str> = schema.fields.iter().map(|f| f.name).collect();
                valid.push(dynamic::UNKNOWN_FIELDS);
                if top {
                    valid.extend(ENVELOPE_PATTERN_KEYS);
                }
                let what = if top { "Envelope pattern".to_owned() } else { schema.name.to_owned() };
                return fail(key.loc, format!("{what} has no field `{name}`; valid: {}", valid.join(", ")));
            }
        }
        Ok(Pattern::Object(out))
    }

    /// A name or a list of names, each accepted by `ok`.
    /// `{sideband_over: N}` or `{compress_over: N}`.
    fn size_rule(&mut self, node: &Node) -> Result<SizeRule, PatternError> {
        const HELP: &str = "size_rule is {sideband_over: N} or {compress_over: N}";
        let NodeKind::Map(entries) = &node.kind else { return fail(node.loc, HELP.to_owned()) };
        let [(key, value)] = entries.as_slice() else { return fail(node.loc, HELP.to_owned()) };
        let n = match &value.kind {
            NodeKind::Int(n) => u64::try_from(*n).map_err(|_| PatternError { loc: value.loc, message: HELP.into() })?,
            other => return fail(value.loc, format!("{HELP}: expected a number, found {}", other.describe())),
        };
        match key.name.as_str() {
            "sideband_over" => Ok(SizeRule::SidebandOver(n)),
            "compress_over" => Ok(SizeRule::CompressOver(n)),
            other => fail(key.loc, format!("unknown size rule `{other}`; {HELP}")),
        }
    }

    fn names_of(
        &mut self,
        node: &Node,
        what: &str,
        ok: &dyn Fn(&str) -> bool,
        valid: &[String],
    ) -> Result<Vec<String>, PatternError> {
        let items: Vec<&Node> = match &node.kind {
            NodeKind::Seq(items) if !items.is_empty() => items.iter().collect(),
            NodeKind::Str(_) => vec![node],
            other => return fail(node.loc, format!("expected {what} or a list of them, found {}", other.describe())),
        };
        items
            .into_iter()
            .map(|n| match n.as_str() {
                Some(s) if ok(s) => Ok(s.to_owned()),
                Some(s) => fail(n.loc, format!("unknown {what} `{s}`; valid: {}", valid.join(", "))),
                None => fail(n.loc, format!("expected {what}, found {}", n.kind.describe())),
            })
            .collect()
    }

    /// The value of one (non-list) field of a known kind.
    fn typed(&mut self, node: &Node, f: &'static FieldSchema) -> Result<Pattern, PatternError> {
        let lone_placeholder = |c: &mut Self| -> Option<Result<Pattern, PatternError>> {
            let s = node.as_str()?;
            let pieces = template::parse(s).ok()?;
            matches!(pieces.as_slice(), [Piece::Var(_)]).then(|| c.pieces(s, node.loc).map(Pattern::Text))
        };
        match f.kind {
            FieldKind::Message(idx) => self.compile(node, Ctx::Msg(idx, false)),
            FieldKind::String if f.name.ends_with("_json") => self.json(node),
            FieldKind::String => match &node.kind {
                NodeKind::Str(s) => Ok(Pattern::Text(self.pieces(s, node.loc)?)),
                other => fail(
                    node.loc,
                    format!(
                        "`{}` is a string: expected a string, found {}{}",
                        f.name,
                        other.describe(),
                        if matches!(other, NodeKind::Null) {
                            " (write {absent: true} for an empty field)"
                        } else {
                            " (quote it)"
                        }
                    ),
                ),
            },
            FieldKind::Bytes => self.bytes(node, f),
            FieldKind::Bool => match &node.kind {
                NodeKind::Bool(b) => Ok(Pattern::Literal(Value::Bool(*b))),
                _ => lone_placeholder(self).unwrap_or_else(|| {
                    fail(
                        node.loc,
                        format!("`{}` is a boolean: expected true or false, found {}", f.name, node.kind.describe()),
                    )
                }),
            },
            kind => {
                let (name, min, max): (&str, i128, i128) = match kind {
                    FieldKind::Int32 => ("int32", i32::MIN.into(), i32::MAX.into()),
                    FieldKind::Int64 => ("int64", i64::MIN.into(), i64::MAX.into()),
                    FieldKind::Uint32 => ("uint32", 0, u32::MAX.into()),
                    _ => ("uint64", 0, u64::MAX.into()),
                };
                match &node.kind {
                    NodeKind::Int(i) if (min..=max).contains(i) => {
                        Ok(Pattern::Literal(Value::Number(dynamic::number_from_i128(*i).expect("in range"))))
                    }
                    NodeKind::Int(i) => fail(node.loc, format!("{i} is out of range for `{}` ({name})", f.name)),
                    _ => lone_placeholder(self).unwrap_or_else(|| {
                        fail(
                            node.loc,
                            format!("`{}` is an {name}: expected an integer, found {}", f.name, node.kind.describe()),
                        )
                    }),
                }
            }
        }
    }

    /// A bytes field: `{hex: …}` and/or `{text: …}` (matched against the decoded `{hex, text}`).
    fn bytes(&mut self, node: &Node, f: &FieldSchema) -> Result<Pattern, PatternError> {
        let Some(entries) = node.as_map() else {
            return fail(
                node.loc,
                format!("`{}` is bytes: expected {{hex: …}} or {{text: …}}, found {}", f.name, node.kind.describe()),
            );
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let p = match (k.name.as_str(), &v.kind) {
                ("hex", NodeKind::Str(s)) if !template::has_placeholders(s) => {
                    let bytes = dynamic::hex_decode(s)
                        .map_err(|m| PatternError { loc: v.loc, message: format!("invalid hex: {m}") })?;
                    Pattern::Text(vec![Piece::Lit(dynamic::hex_encode(&bytes))])
                }
                ("hex" | "text", _) => self.compile(v, Ctx::Free)?,
                (other, _) => {
                    return fail(k.loc, format!("bytes pattern has no key `{other}`; valid: hex, text"));
                }
            };
            out.push((Some(k.name.clone()), p));
        }
        Ok(Pattern::Object(out))
    }

    /// A `*_json` field (or a `json:` matcher): a string is JSON text, anything else a structure.
    fn json(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        match &node.kind {
            NodeKind::Str(s) if template::has_placeholders(s) => Ok(Pattern::JsonText(self.pieces(s, node.loc)?)),
            NodeKind::Str(s) => {
                // Validate placeholder syntax (`$$` escapes) before parsing.
                let text = template::fill_text(&self.pieces(s, node.loc)?, &Captures::new())
                    .map_err(|e| PatternError { loc: node.loc, message: e.to_string() })?;
                match serde_json::from_str::<Value>(&text) {
                    Ok(v) => Ok(Pattern::Json(Box::new(literal(&v)))),
                    Err(e) => fail(
                        node.loc,
                        format!(
                            "a string here is JSON text, and this one does not parse ({e}); match raw text with {{regex: …}}, {{contains: …}} or {{equals: …}}"
                        ),
                    ),
                }
            }
            _ => Ok(Pattern::Json(Box::new(self.compile(node, Ctx::Free)?))),
        }
    }

    fn free(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        Ok(match &node.kind {
            NodeKind::Null => Pattern::Literal(Value::Null),
            NodeKind::Bool(b) => Pattern::Literal(Value::Bool(*b)),
            NodeKind::Int(_) | NodeKind::Float(_) => {
                Pattern::Literal(node.to_value().map_err(|(loc, message)| PatternError { loc, message })?)
            }
            NodeKind::Str(s) => Pattern::Text(self.pieces(s, node.loc)?),
            NodeKind::Seq(items) => {
                Pattern::List(items.iter().map(|n| self.compile(n, Ctx::Free)).collect::<Result<_, _>>()?)
            }
            NodeKind::Map(entries) => Pattern::Object(
                entries.iter().map(|(k, v)| Ok((Some(k.name.clone()), self.compile(v, Ctx::Free)?))).collect::<Result<
                    _,
                    PatternError,
                >>(
                )?,
            ),
        })
    }

    fn matchers(&mut self, node: &Node, ctx: Ctx) -> Result<Pattern, PatternError> {
        let entries = node.as_map().expect("checked by the caller");
        let elem_ctx = |k: &super::yaml::Key| -> Result<Ctx, PatternError> {
            match ctx {
                Ctx::Field(f) if f.repeated => Ok(Ctx::Elem(f)),
                Ctx::Free => Ok(Ctx::Free),
                _ => fail(k.loc, format!("`{}` applies to lists, and this value is not one", k.name)),
            }
        };
        let mut all = Vec::new();
        for (k, v) in entries {
            let p = match k.name.as_str() {
                "regex" => {
                    let Some(s) = v.as_str() else { return fail(v.loc, "`regex` takes a string") };
                    if template::has_placeholders(s) {
                        let pieces = self.pieces(s, v.loc)?;
                        let probe: String =
                            pieces.iter().map(|p| if let Piece::Lit(l) = p { l.as_str() } else { "x" }).collect();
                        build_regex(&probe).map_err(|m| PatternError { loc: v.loc, message: m })?;
                        Pattern::Regex(RegexPattern::Template(pieces))
                    } else {
                        let text = template::fill_text(&self.pieces(s, v.loc)?, &Captures::new())
                            .map_err(|e| PatternError { loc: v.loc, message: e.to_string() })?;
                        Pattern::Regex(RegexPattern::Fixed(
                            build_regex(&text).map_err(|m| PatternError { loc: v.loc, message: m })?,
                        ))
                    }
                }
                "contains" => {
                    let Some(s) = v.as_str() else { return fail(v.loc, "`contains` takes a string") };
                    Pattern::Contains(self.pieces(s, v.loc)?)
                }
                "capture" => match v.as_str() {
                    Some(name) if template::is_name(name) => {
                        self.defined.push(name.to_owned());
                        Pattern::Capture(name.to_owned())
                    }
                    _ => {
                        return fail(
                            v.loc,
                            "`capture` takes a name: letters, digits and `_`, not starting with a digit",
                        );
                    }
                },
                "any_of" => match &v.kind {
                    NodeKind::Seq(items) if !items.is_empty() => {
                        Pattern::AnyOf(items.iter().map(|n| self.compile(n, ctx)).collect::<Result<_, _>>()?)
                    }
                    _ => return fail(v.loc, "`any_of` takes a non-empty list of patterns"),
                },
                "absent" => match v.kind {
                    NodeKind::Bool(b) => Pattern::Absent(b),
                    _ => return fail(v.loc, "`absent` takes true or false"),
                },
                "not_empty" => match v.kind {
                    NodeKind::Bool(true) => Pattern::NotEmpty,
                    _ => return fail(v.loc, "`not_empty` takes true (use {absent: true} for the opposite)"),
                },
                "unordered" | "includes" => {
                    let ectx = elem_ctx(k)?;
                    let NodeKind::Seq(items) = &v.kind else {
                        return fail(v.loc, format!("`{}` takes a list of patterns", k.name));
                    };
                    let ps = items.iter().map(|n| self.compile(n, ectx)).collect::<Result<_, _>>()?;
                    if k.name == "unordered" { Pattern::Unordered(ps) } else { Pattern::Includes(ps) }
                }
                "equals" => {
                    let value = v.to_value().map_err(|(loc, message)| PatternError { loc, message })?;
                    let mut names = Vec::new();
                    template::names_in(&value, &mut names);
                    self.used.extend(names.into_iter().map(|n| (n, v.loc)));
                    check_placeholders(&value).map_err(|message| PatternError { loc: v.loc, message })?;
                    Pattern::Equals(value)
                }
                "not" => Pattern::Not(Box::new(self.compile(v, ctx)?)),
                "json" => self.json(v)?,
                _ => unreachable!("only keywords come here"),
            };
            all.push(p);
        }
        Ok(if all.len() == 1 { all.pop().expect("one") } else { Pattern::All(all) })
    }
}

fn check_placeholders(v: &Value) -> Result<(), String> {
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

fn build_regex(text: &str) -> Result<Regex, String> {
    RegexBuilder::new(text).size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(REGEX_SIZE_LIMIT).build().map_err(|e| {
        format!("invalid regex: {}", e.to_string().replace('\n', " ").split_whitespace().collect::<Vec<_>>().join(" "))
    })
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

// ---------------------------------------------------------------------------------------------
// Matching

/// Matches an Envelope tree (from [`dynamic::decode`] or [`super::normalize`]). On success the
/// captures the pattern binds are added to `captures`; on failure `captures` is unchanged.
pub fn match_envelope(pattern: &Pattern, actual: &Value, captures: &mut Captures) -> Result<(), Mismatch> {
    match_value(pattern, Some(actual), captures)
}

/// Matches any value; `None` is "nothing there" (a missing field).
pub fn match_value(pattern: &Pattern, actual: Option<&Value>, captures: &mut Captures) -> Result<(), Mismatch> {
    let mut caps = captures.clone();
    let mut path = Vec::new();
    m(pattern, actual, &mut path, &mut caps)?;
    *captures = caps;
    Ok(())
}

/// Matches each pattern against a different one of `actuals`, in any order (`expect_any_order`);
/// there must be as many values as patterns. Returns, for each pattern, the index of the value
/// it matched.
pub fn match_any_order(
    patterns: &[Pattern],
    actuals: &[Value],
    captures: &mut Captures,
) -> Result<Vec<usize>, Mismatch> {
    if patterns.len() != actuals.len() {
        return Err(Mismatch {
            path: Vec::new(),
            expected: format!("{} Envelopes", patterns.len()),
            actual: format!("{}", actuals.len()),
        });
    }
    let refs: Vec<&Value> = actuals.iter().collect();
    let mut caps = captures.clone();
    let assignment = assign(patterns, &refs, &mut Vec::new(), &mut caps)?;
    *captures = caps;
    Ok(assignment)
}

/// Finds a distinct element for every pattern (bipartite matching), binding captures along the
/// found assignment.
fn assign(
    patterns: &[Pattern],
    items: &[&Value],
    path: &mut Vec<PathSeg>,
    caps: &mut Captures,
) -> Result<Vec<usize>, Mismatch> {
    // Which element each pattern can match, judged with the captures as they are: captures bind
    // names for later steps only, so pairs do not depend on each other.
    let mut ok = vec![vec![false; items.len()]; patterns.len()];
    for (i, p) in patterns.iter().enumerate() {
        let mut first_err = None;
        for (j, item) in items.iter().enumerate() {
            let mut c = caps.clone();
            path.push(PathSeg::Index(j));
            match m(p, Some(item), path, &mut c) {
                Ok(()) => ok[i][j] = true,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
            path.pop();
        }
        if !ok[i].iter().any(|x| *x) {
            let detail = first_err.map(|e| format!(" (first element: {e})")).unwrap_or_default();
            return Err(Mismatch {
                path: path.clone(),
                expected: format!("an element matching pattern {} ({p})", i + 1),
                actual: format!("none of the {} elements{detail}", items.len()),
            });
        }
    }
    // Kuhn's augmenting paths.
    let mut owner: Vec<Option<usize>> = vec![None; items.len()];
    fn augment(i: usize, ok: &[Vec<bool>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for j in 0..owner.len() {
            if ok[i][j] && !seen[j] {
                seen[j] = true;
                if owner[j].is_none_or(|k| augment(k, ok, seen, owner)) {
                    owner[j] = Some(i);
                    return true;
                }
            }
        }
        false
    }
    for i in 0..patterns.len() {
        let mut seen = vec![false; items.len()];
        if !augment(i, &ok, &mut seen, &mut owner) {
            return Err(Mismatch {
                path: path.clone(),
                expected: format!("a distinct element for each of {} patterns", patterns.len()),
                actual: format!(
                    "no arrangement of the {} elements fits (pattern {} has none left)",
                    items.len(),
                    i + 1
                ),
            });
        }
    }
    let mut result = vec![0; patterns.len()];
    for (j, o) in owner.iter().enumerate() {
        if let Some(i) = o {
            result[*i] = j;
        }
    }
    for (i, j) in result.iter().enumerate() {
        path.push(PathSeg::Index(*j));
        let r = m(&patterns[i], Some(items[*j]), path, caps);
        path.pop();
        r?;
    }
    Ok(result)
}

const SHOWN: usize = 200;

/// A value for a mismatch message.
pub fn show(v: Option<&Value>) -> String {
    match v {
        None => "nothing (not present)".to_owned(),
        Some(v) => {
            let text = v.to_string();
            if text.chars().count() > SHOWN {
                format!("{}… ({} bytes)", text.chars().take(SHOWN).collect::<String>(), text.len())
            } else {
                text
            }
        }
    }
}

fn mismatch(path: &[PathSeg], p: &dyn fmt::Display, actual: Option<&Value>) -> Mismatch {
    Mismatch { path: path.to_vec(), expected: p.to_string(), actual: show(actual) }
}

fn render_err(path: &[PathSeg], e: RenderError) -> Mismatch {
    Mismatch { path: path.to_vec(), expected: format!("a pattern that can be filled in ({e})"), actual: "-".into() }
}

/// Numbers by value, everything else structurally.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
            match (int(x), int(y)) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| values_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Missing, null, false, 0, "", [] or bytes `{hex: ""}`: what proto3 does not send.
fn is_default(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => {
            o.get("hex").and_then(Value::as_str) == Some("") && o.keys().all(|k| k == "hex" || k == "text")
        }
    }
}

fn m(p: &Pattern, actual: Option<&Value>, path: &mut Vec<PathSeg>, caps: &mut Captures) -> Result<(), Mismatch> {
    match p {
        Pattern::Default(def, inner) => m(inner, Some(actual.unwrap_or(def)), path, caps),
        Pattern::Literal(v) => match actual {
            Some(a) if values_equal(v, a) => Ok(()),
            _ => Err(mismatch(path, p, actual)),
        },
        Pattern::Text(pieces) => {
            let want = template::fill(pieces, caps).map_err(|e| render_err(path, e))?;
            match actual {
                Some(a) if values_equal(&want, a) => Ok(()),
                _ => Err(Mismatch { path: path.clone(), expected: show(Some(&want)), actual: show(actual) }),
            }
        }
        Pattern::Equals(v) => {
            let want = template::substitute(v, caps).map_err(|e| render_err(path, e))?;
            match actual {
                Some(a) if values_equal(&want, a) => Ok(()),
                _ => Err(Mismatch {
                    path: path.clone(),
                    expected: format!("exactly {}", show(Some(&want))),
                    actual: show(actual),
                }),
            }
        }
        Pattern::Object(fields) => {
            let Some(Value::Object(obj)) = actual else {
                return Err(Mismatch { path: path.clone(), expected: "an object".into(), actual: show(actual) });
            };
            for (key, sub) in fields {
                match key {
                    Some(k) => {
                        path.push(PathSeg::Key(k.clone()));
                        let r = m(sub, obj.get(k), path, caps);
                        path.pop();
                        r?;
                    }
                    None => m(sub, actual, path, caps)?,
                }
            }
            Ok(())
        }
        Pattern::List(items) => {
            let Some(Value::Array(arr)) = actual else {
                return Err(Mismatch {
                    path: path.clone(),
                    expected: format!("a list of {}", items.len()),
                    actual: show(actual),
                });
            };
            if arr.len() != items.len() {
                return Err(Mismatch {
                    path: path.clone(),
                    expected: format!("{} elements ({p})", items.len()),
                    actual: format!("{} elements: {}", arr.len(), show(actual)),
                });
            }
            for (i, (sub, a)) in items.iter().zip(arr).enumerate() {
                path.push(PathSeg::Index(i));
                let r = m(sub, Some(a), path, caps);
                path.pop();
                r?;
            }
            Ok(())
        }
        Pattern::Unordered(items) | Pattern::Includes(items) => {
            let Some(Value::Array(arr)) = actual else {
                return Err(Mismatch { path: path.clone(), expected: "a list".into(), actual: show(actual) });
            };
            if matches!(p, Pattern::Unordered(_)) && arr.len() != items.len() {
                return Err(Mismatch {
                    path: path.clone(),
                    expected: format!("{} elements in any order", items.len()),
                    actual: format!("{} elements: {}", arr.len(), show(actual)),
                });
            }
            let refs: Vec<&Value> = arr.iter().collect();
            assign(items, &refs, path, caps).map(drop)
        }
        Pattern::Regex(r) => {
            let Some(Value::String(s)) = actual else { return Err(mismatch(path, p, actual)) };
            let hit = match r {
                RegexPattern::Fixed(re) => re.is_match(s),
                RegexPattern::Template(pieces) => {
                    let mut text = String::new();
                    for piece in pieces {
                        match piece {
                            Piece::Lit(l) => text.push_str(l),
                            Piece::Var(name) => {
                                let v = caps
                                    .get(name)
                                    .ok_or_else(|| render_err(path, RenderError::Unbound(name.clone())))?;
                                text.push_str(&regex::escape(&template::text_of(v)));
                            }
                            Piece::Repeat { .. } => {
                                text.push_str(&regex::escape(&piece.generated().unwrap_or_default()))
                            }
                        }
                    }
                    build_regex(&text).map_err(|e| render_err(path, RenderError::Malformed(e)))?.is_match(s)
                }
            };
            if hit { Ok(()) } else { Err(mismatch(path, p, actual)) }
        }
        Pattern::Contains(pieces) => {
            let needle = template::fill_text(pieces, caps).map_err(|e| render_err(path, e))?;
            match actual {
                Some(Value::String(s)) if s.contains(&needle) => Ok(()),
                _ => Err(Mismatch {
                    path: path.clone(),
                    expected: format!("a string containing {needle:?}"),
                    actual: show(actual),
                }),
            }
        }
        Pattern::Capture(name) => match actual {
            Some(v) => {
                caps.insert(name.clone(), v.clone());
                Ok(())
            }
            None => Err(mismatch(path, p, actual)),
        },
        Pattern::AnyOf(alts) => {
            let mut reasons = Vec::new();
            for alt in alts {
                let mut c = caps.clone();
                match m(alt, actual, path, &mut c) {
                    Ok(()) => {
                        *caps = c;
                        return Ok(());
                    }
                    Err(e) => reasons.push(e.to_string()),
                }
            }
            Err(Mismatch {
                path: path.clone(),
                expected: format!("any of {} alternatives [{}]", alts.len(), reasons.join("; ")),
                actual: show(actual),
            })
        }
        Pattern::All(ps) => ps.iter().try_for_each(|sub| m(sub, actual, path, caps)),
        Pattern::Not(inner) => {
            let mut c = caps.clone();
            match m(inner, actual, path, &mut c) {
                Ok(()) => Err(mismatch(path, p, actual)),
                Err(_) => Ok(()),
            }
        }
        Pattern::Absent(want_absent) => {
            if is_default(actual) == *want_absent {
                Ok(())
            } else {
                Err(mismatch(path, p, actual))
            }
        }
        Pattern::NotEmpty => {
            let empty = is_default(actual) || matches!(actual, Some(Value::Object(o)) if o.is_empty());
            if empty { Err(mismatch(path, p, actual)) } else { Ok(()) }
        }
        Pattern::Json(inner) => {
            let parsed = parse_json(path, actual)?;
            m(inner, Some(&parsed), path, caps)
        }
        Pattern::JsonText(pieces) => {
            let text = template::fill_text(pieces, caps).map_err(|e| render_err(path, e))?;
            let want: Value = serde_json::from_str(&text).map_err(|e| Mismatch {
                path: path.clone(),
                expected: format!("JSON text (the pattern {text:?} does not parse once filled in: {e})"),
                actual: "-".into(),
            })?;
            let parsed = parse_json(path, actual)?;
            m(&literal(&want), Some(&parsed), path, caps)
        }
        Pattern::Arm(names) => {
            let arm = actual.and_then(dynamic::arm_of);
            if arm.is_some_and(|a| names.iter().any(|n| n == a)) {
                Ok(())
            } else {
                Err(Mismatch {
                    path: path.clone(),
                    expected: format!("arm {}", names.join(" or ")),
                    actual: arm.map_or_else(|| "no arm".to_owned(), |a| format!("arm {a}")),
                })
            }
        }
        Pattern::SizeRule(rule) => {
            let via = match actual.and_then(|a| a.get(super::normalize::VIA)) {
                Some(Value::String(s)) => s.as_str(),
                _ => "frame",
            };
            let len = actual
                .and_then(|a| a.get("call_result"))
                .and_then(|r| r.get("result_json"))
                .and_then(Value::as_str)
                .map(|s| s.len() as u64);
            let Some(len) = len else {
                return Err(Mismatch {
                    path: path.clone(),
                    expected: "a call_result with result_json (size_rule)".into(),
                    actual: show(actual),
                });
            };
            let compression =
                actual.and_then(|a| a.get("sideband")).and_then(|s| s.get("compression")).and_then(Value::as_str);
            let (ok, expected, got) = match rule {
                SizeRule::SidebandOver(n) => {
                    let want = if len > *n { "sideband" } else { "frame" };
                    (
                        via == want,
                        format!("via {want} (result_json is {len} bytes, threshold {n})"),
                        format!("via {via}"),
                    )
                }
                SizeRule::CompressOver(n) => {
                    let want = if len > *n { "zstd" } else { "" };
                    let c = compression.unwrap_or("");
                    (
                        via == "sideband" && c == want,
                        format!("via sideband with compression {want:?} (payload is {len} bytes, threshold {n})"),
                        format!("via {via} with compression {c:?}"),
                    )
                }
            };
            if ok { Ok(()) } else { Err(Mismatch { path: path.clone(), expected, actual: got }) }
        }
        Pattern::Via(vias) => {
            let via = match actual.and_then(|a| a.get(super::normalize::VIA)) {
                Some(Value::String(s)) => s.as_str(),
                _ => "frame",
            };
            if vias.iter().any(|v| v == via) {
                Ok(())
            } else {
                Err(Mismatch {
                    path: path.clone(),
                    expected: format!("via {}", vias.join(" or ")),
                    actual: format!("via {via}"),
                })
            }
        }
    }
}

fn parse_json(path: &[PathSeg], actual: Option<&Value>) -> Result<Value, Mismatch> {
    let Some(Value::String(s)) = actual else {
        return Err(Mismatch { path: path.to_vec(), expected: "a string holding JSON".into(), actual: show(actual) });
    };
    serde_json::from_str(s).map_err(|e| Mismatch {
        path: path.to_vec(),
        expected: "a string holding JSON".into(),
        actual: format!("{} (not JSON: {e})", show(actual)),
    })
}

// ---------------------------------------------------------------------------------------------
// Display: the pattern in a compact YAML-like flow form, for mismatch messages.

fn pieces_text(pieces: &[Piece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Lit(l) => l.replace('$', "$$"),
            Piece::Var(n) => format!("${{{n}}}"),
            Piece::Repeat { count, text } => format!("${{repeat:{count}:{text}}}"),
        })
        .collect()
}

fn list(f: &mut fmt::Formatter<'_>, items: &[Pattern]) -> fmt::Result {
    f.write_str("[")?;
    for (i, p) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{p}")?;
    }
    f.write_str("]")
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Literal(v) => write!(f, "{v}"),
            Pattern::Text(pieces) => write!(f, "{:?}", pieces_text(pieces)),
            Pattern::Object(fields) => {
                f.write_str("{")?;
                for (i, (k, p)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match k {
                        Some(k) => write!(f, "{k}: {p}")?,
                        None => write!(f, "{p}")?,
                    }
                }
                f.write_str("}")
            }
            Pattern::List(items) => list(f, items),
            Pattern::Unordered(items) => {
                f.write_str("{unordered: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Includes(items) => {
                f.write_str("{includes: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Regex(RegexPattern::Fixed(r)) => write!(f, "{{regex: {:?}}}", r.as_str()),
            Pattern::Regex(RegexPattern::Template(p)) => write!(f, "{{regex: {:?}}}", pieces_text(p)),
            Pattern::Contains(p) => write!(f, "{{contains: {:?}}}", pieces_text(p)),
            Pattern::Capture(n) => write!(f, "{{capture: {n}}}"),
            Pattern::AnyOf(items) => {
                f.write_str("{any_of: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::All(items) => {
                f.write_str("{all: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Not(p) => write!(f, "{{not: {p}}}"),
            Pattern::Absent(b) => write!(f, "{{absent: {b}}}"),
            Pattern::NotEmpty => f.write_str("{not_empty: true}"),
            Pattern::Equals(v) => write!(f, "{{equals: {v}}}"),
            Pattern::Json(p) => write!(f, "{p}"),
            Pattern::JsonText(p) => write!(f, "{:?}", pieces_text(p)),
            Pattern::Default(_, p) => write!(f, "{p}"),
            Pattern::Arm(names) => write!(f, "arm: {}", names.join(" | ")),
            Pattern::Via(vias) => write!(f, "via: {}", vias.join(" | ")),
            Pattern::SizeRule(SizeRule::SidebandOver(n)) => write!(f, "size_rule: {{sideband_over: {n}}}"),
            Pattern::SizeRule(SizeRule::CompressOver(n)) => write!(f, "size_rule: {{compress_over: {n}}}"),
        }
    }
}

/// Short description of a JSON value's type (re-exported for the loader's messages).
pub fn describe_value(v: &Value) -> String {
    describe(v)
}
