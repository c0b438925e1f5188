//! A YAML value tree that remembers where every node came from, read through serde-saphyr's
//! `Spanned`. Envelopes and patterns are free-form in the scenario grammar, so they are kept as
//! this tree until the loader has checked them against the schema; the locations let every
//! error found then still point at `file:line:col`.

use std::fmt;

use protomcp_proto::dynamic::{self, PathSeg};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

/// A 1-based line and column in a scenario file; `0:0` when unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

impl Loc {
    pub fn new(line: u32, col: u32) -> Self {
        Loc { line, col }
    }

    pub fn is_known(self) -> bool {
        self.line > 0
    }

    pub(crate) fn of(l: &serde_saphyr::Location) -> Self {
        Loc { line: u32::try_from(l.line()).unwrap_or(u32::MAX), col: u32::try_from(l.column()).unwrap_or(u32::MAX) }
    }

    pub(crate) fn of_spanned<T>(s: &Spanned<T>) -> Self {
        Loc::of(&s.referenced)
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A mapping key and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub loc: Loc,
}

/// One YAML node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub loc: Loc,
    pub kind: NodeKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Keys in document order (YAML forbids duplicates; serde-saphyr rejects them).
    Map(Vec<(Key, Node)>),
}

impl NodeKind {
    /// "a string", "a list", … for messages.
    pub fn describe(&self) -> String {
        match self {
            NodeKind::Null => "null".into(),
            NodeKind::Bool(b) => format!("boolean {b}"),
            NodeKind::Int(i) => format!("integer {i}"),
            NodeKind::Float(f) => format!("number {f}"),
            NodeKind::Str(s) if s.chars().count() > 40 => {
                format!("string {:?}…", s.chars().take(40).collect::<String>())
            }
            NodeKind::Str(s) => format!("string {s:?}"),
            NodeKind::Seq(_) => "a list".into(),
            NodeKind::Map(_) => "a mapping".into(),
        }
    }
}

impl Node {
    pub fn new(loc: Loc, kind: NodeKind) -> Self {
        Node { loc, kind }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Key, Node)]> {
        match &self.kind {
            NodeKind::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?.iter().find(|(k, _)| k.name == key).map(|(_, v)| v)
    }

    /// The tree as JSON. Integers must fit `i64` or `u64`; the error names the node.
    pub fn to_value(&self) -> Result<Value, (Loc, String)> {
        Ok(match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Int(i) => match dynamic::number_from_i128(*i) {
                Some(n) => Value::Number(n),
                None => return Err((self.loc, format!("integer {i} does not fit 64 bits"))),
            },
            NodeKind::Float(f) => match Number::from_f64(*f) {
                Some(n) => Value::Number(n),
                None => return Err((self.loc, format!("{f} is not a JSON number"))),
            },
            NodeKind::Str(s) => Value::String(s.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect::<Result<_, _>>()?),
            NodeKind::Map(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k.name.clone(), v.to_value()?);
                }
                Value::Object(m)
            }
        })
    }

    /// A tree without locations, for patterns and templates built in code.
    pub fn from_value(v: &Value) -> Node {
        let kind = match v {
            Value::Null => NodeKind::Null,
            Value::Bool(b) => NodeKind::Bool(*b),
            Value::Number(n) => match n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)) {
                Some(i) => NodeKind::Int(i),
                None => NodeKind::Float(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => NodeKind::Str(s.clone()),
            Value::Array(a) => NodeKind::Seq(a.iter().map(Node::from_value).collect()),
            Value::Object(o) => NodeKind::Map(
                o.iter().map(|(k, v)| (Key { name: k.clone(), loc: Loc::default() }, Node::from_value(v))).collect(),
            ),
        };
        Node { loc: Loc::default(), kind }
    }

    /// The location of the deepest node on `path` (for errors that name a path).
    pub fn locate(&self, path: &[PathSeg]) -> Loc {
        let mut node = self;
        let mut loc = self.loc;
        for seg in path {
            let next = match (seg, &node.kind) {
                (PathSeg::Key(k), NodeKind::Map(entries)) => {
                    entries.iter().find(|(key, _)| &key.name == k).map(|(key, v)| {
                        // The key is where a reader looks for a field's problems; the value for its
                        // content. Both are on the path: prefer the value, fall back to the key.
                        (if v.loc.is_known() { v.loc } else { key.loc }, v)
                    })
                }
                (PathSeg::Index(i), NodeKind::Seq(items)) => items.get(*i).map(|v| (v.loc, v)),
                _ => None,
            };
            match next {
                Some((l, n)) => {
                    if l.is_known() {
                        loc = l;
                    }
                    node = n;
                }
                None => break,
            }
        }
        loc
    }

    /// The node at `path`, when the whole path exists.
    pub fn locate_node(&self, path: &[PathSeg]) -> Option<&Node> {
        let mut node = self;
        for seg in path {
            node = match (seg, &node.kind) {
                (PathSeg::Key(k), NodeKind::Map(entries)) => {
                    entries.iter().find(|(key, _)| &key.name == k).map(|(_, v)| v)?
                }
                (PathSeg::Index(i), NodeKind::Seq(items)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(node)
    }

    /// The location of the key `name` of this mapping, when present.
    pub fn key_loc(&self, name: &str) -> Option<Loc> {
        self.as_map()?.iter().find(|(k, _)| k.name == name).map(|(k, _)| k.loc)
    }
}

/// The YAML dialect of scenario files: only `true`/`false` are booleans (`yes`, `no`, `on`,
/// `n` are strings), numbers with leading zeros or underscores stay strings (`007`, `1_000`),
/// unknown tags are errors, duplicate keys are errors.
pub fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        reject_unsupported_tags: true,
    }
}

/// Parses YAML text into a [`Node`] tree with the scenario dialect ([`options`]).
pub fn parse_node(text: &str) -> Result<Node, (Loc, String)> {
    serde_saphyr::from_str_with_options::<Node>(text, options()).map_err(|e| {
        let loc = e.location().map(|l| Loc::of(&l)).filter(|l| l.is_known()).unwrap_or(Loc::new(1, 1));
        (loc, plain_message(&e))
    })
}

/// The message of a serde-saphyr error without its position (which the caller reports in the
/// `file:line:col` form) and without a source snippet.
pub(crate) fn plain_message(e: &serde_saphyr::Error) -> String {
    static POSITION: std::sync::OnceLock<(regex::Regex, regex::Regex)> = std::sync::OnceLock::new();
    let (prefix, suffix) = POSITION.get_or_init(|| {
        (
            regex::Regex::new(r"^(?:error: )?line \d+ column \d+: ").expect("valid"),
            regex::Regex::new(r" at line \d+,? column \d+$").expect("valid"),
        )
    });
    let rendered = e.without_snippet().render_with_options(serde_saphyr::render_options! {
        snippets: serde_saphyr::SnippetMode::Off,
    });
    let first = rendered.lines().next().unwrap_or("").trim();
    let first = prefix.replace(first, "");
    let first = suffix.replace(&first, "");
    if first.is_empty() { "invalid YAML".to_owned() } else { first.into_owned() }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<NodeKind>::deserialize(d)?;
        Ok(Node { loc: Loc::of_spanned(&s), kind: s.value })
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = NodeKind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }

    fn visit_none<E>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeKind, D::Error> {
        NodeKind::deserialize(d)
    }

    fn visit_bool<E>(self, v: bool) -> Result<NodeKind, E> {
        Ok(NodeKind::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeKind, E> {
        i128::try_from(v).map(NodeKind::Int).map_err(|_| E::custom("integer too large"))
    }

    fn visit_f64<E>(self, v: f64) -> Result<NodeKind, E> {
        Ok(NodeKind::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NodeKind, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = a.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeKind::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NodeKind, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = a.next_key::<Spanned<String>>()? {
            let v = a.next_value::<Node>()?;
            entries.push((Key { loc: Loc::of_spanned(&k), name: k.value }, v));
        }
        Ok(NodeKind::Map(entries))
    }
}
