//! `${name}` placeholders and the Envelopes a scenario sends.
//!
//! A string that is exactly one placeholder (`"${rid}"`) becomes the captured value itself, of
//! whatever JSON type it is; a placeholder inside a longer string is replaced by the captured
//! value's text (a string as it is, anything else as compact JSON). `$$` writes one `$`; a `$`
//! not followed by `{` or `$` is an ordinary character.
//!
//! `${repeat:N:TEXT}` is generated text, not a capture: TEXT (up to the `}`, not empty) written
//! N times, so that a scenario can send a payload larger than a scenario file may be (at most
//! [`MAX_REPEAT`] bytes). Only sends take it; patterns refuse it.

use std::collections::BTreeMap;

use bytes::Bytes;
use protomcp_proto::dynamic;
use serde_json::Value;

/// Values bound by `{capture: name}` in earlier steps, by name.
pub type Captures = BTreeMap<String, Value>;

/// A piece of a string with placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Lit(String),
    Var(String),
    /// `${repeat:N:TEXT}`: `text` written `count` times.
    Repeat {
        count: usize,
        text: String,
    },
}

/// The most bytes one `${repeat:…}` may generate (64 MiB).
pub const MAX_REPEAT: usize = 64 << 20;

impl Piece {
    /// The generated text of a `Repeat` (`None` for the other pieces).
    pub fn generated(&self) -> Option<String> {
        match self {
            Piece::Repeat { count, text } => Some(text.repeat(*count)),
            _ => None,
        }
    }
}

/// `N:TEXT` of `${repeat:N:TEXT}`.
fn parse_repeat(spec: &str) -> Result<Piece, String> {
    let bad = || format!("`${{repeat:{spec}}}`: write `${{repeat:N:TEXT}}` (N a count, TEXT not empty)");
    let (n, text) = spec.split_once(':').ok_or_else(bad)?;
    let count: usize = n.parse().map_err(|_| bad())?;
    if text.is_empty() {
        return Err(bad());
    }
    if count.checked_mul(text.len()).is_none_or(|total| total > MAX_REPEAT) {
        return Err(format!("`${{repeat:{spec}}}` generates more than {MAX_REPEAT} bytes"));
    }
    Ok(Piece::Repeat { count, text: text.to_owned() })
}

/// Splits `s` into literal text and placeholders; the error says what is malformed.
pub(crate) fn parse(s: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            lit.push(c);
            continue;
        }
        match chars.peek() {
            Some((_, '$')) => {
                chars.next();
                lit.push('$');
            }
            Some((_, '{')) => {
                chars.next();
                let rest = &s[i + 2..];
                let Some(end) = rest.find('}') else {
                    return Err(format!("unterminated placeholder `{}`", &s[i..]));
                };
                let name = &rest[..end];
                if let Some(spec) = name.strip_prefix("repeat:") {
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(parse_repeat(spec)?);
                    for _ in 0..name.chars().count() + 1 {
                        chars.next();
                    }
                    continue;
                }
                if !is_name(name) {
                    return Err(format!(
                        "`${{{name}}}` is not a placeholder: names are letters, digits and `_`, not starting with a digit (write `$$` for a literal `$`)"
                    ));
                }
                if !lit.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                pieces.push(Piece::Var(name.to_owned()));
                for _ in 0..name.chars().count() + 1 {
                    chars.next();
                }
            }
            _ => lit.push('$'),
        }
    }
    if !lit.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Ok(pieces)
}

/// A capture name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `s` holds at least one placeholder (and parses).
pub fn has_placeholders(s: &str) -> bool {
    parse(s).is_ok_and(|p| p.iter().any(|p| matches!(p, Piece::Var(_))))
}

/// The names `s` refers to (empty when it does not parse).
pub fn names(s: &str) -> Vec<String> {
    parse(s)
        .map(|p| p.into_iter().filter_map(|p| if let Piece::Var(n) = p { Some(n) } else { None }).collect())
        .unwrap_or_default()
}

/// A captured value as text: a string as it is, anything else as compact JSON.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Why a template could not be filled in at run time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("`${{{0}}}` is not bound: no earlier step captured it")]
    Unbound(String),
    #[error("{0}")]
    Malformed(String),
    #[error("the Envelope does not encode: {0}")]
    Encode(#[from] dynamic::DynError),
}

/// Fills in the placeholders of pieces: the captured value itself for a lone placeholder, text
/// otherwise.
pub fn fill(pieces: &[Piece], captures: &Captures) -> Result<Value, RenderError> {
    if let [Piece::Var(name)] = pieces {
        return captures.get(name).cloned().ok_or_else(|| RenderError::Unbound(name.clone()));
    }
    let mut out = String::new();
    for p in pieces {
        match p {
            Piece::Lit(s) => out.push_str(s),
            Piece::Var(name) => {
                out.push_str(&text_of(captures.get(name).ok_or_else(|| RenderError::Unbound(name.clone()))?))
            }
            Piece::Repeat { count, text } => (0..*count).for_each(|_| out.push_str(text)),
        }
    }
    Ok(Value::String(out))
}

/// [`fill`] for a string that must stay a string.
pub fn fill_text(pieces: &[Piece], captures: &Captures) -> Result<String, RenderError> {
    fill(pieces, captures).map(|v| text_of(&v))
}

/// Replaces the placeholders in every string of `v` (object keys are left alone).
pub fn substitute(v: &Value, captures: &Captures) -> Result<Value, RenderError> {
    Ok(match v {
        Value::String(s) => fill(&parse(s).map_err(RenderError::Malformed)?, captures)?,
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, captures)).collect::<Result<_, _>>()?),
        Value::Object(o) => {
            let mut m = serde_json::Map::new();
            for (k, x) in o {
                m.insert(k.clone(), substitute(x, captures)?);
            }
            Value::Object(m)
        }
        other => other.clone(),
    })
}

/// Every placeholder name used in the strings of `v`.
pub fn names_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.extend(names(s)),
        Value::Array(a) => a.iter().for_each(|x| names_in(x, out)),
        Value::Object(o) => o.values().for_each(|x| names_in(x, out)),
        _ => {}
    }
}

/// An Envelope to send, as written in the scenario (a [`dynamic`] tree whose strings may hold
/// placeholders). The loader has checked it against the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    tree: Value,
}

impl Template {
    /// A template from a tree; checks it against the schema (placeholders accepted anywhere a
    /// scalar goes).
    pub fn new(tree: Value) -> Result<Self, dynamic::DynError> {
        dynamic::check(&tree, &has_placeholders)?;
        Ok(Template { tree })
    }

    /// The tree as written.
    pub fn tree(&self) -> &Value {
        &self.tree
    }

    /// The tree with the placeholders filled in.
    pub fn render(&self, captures: &Captures) -> Result<Value, RenderError> {
        substitute(&self.tree, captures)
    }

    /// The Envelope body.
    pub fn body(&self, captures: &Captures) -> Result<Vec<u8>, RenderError> {
        Ok(dynamic::encode(&self.render(captures)?)?)
    }

    /// `[len][body]`, ready for the socket.
    pub fn frame(&self, captures: &Captures) -> Result<Bytes, RenderError> {
        let body = self.body(captures)?;
        u32::try_from(body.len())
            .map(|_| protomcp_proto::frame::frame_bytes(&body))
            .map_err(|_| RenderError::Malformed("the Envelope is larger than 4 GiB".into()))
    }

    /// The placeholder names the template uses.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        names_in(&self.tree, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders() {
        assert_eq!(
            parse("a${b}c").unwrap(),
            vec![Piece::Lit("a".into()), Piece::Var("b".into()), Piece::Lit("c".into())]
        );
        assert_eq!(parse("$$x $y ${_1}").unwrap(), vec![Piece::Lit("$x $y ".into()), Piece::Var("_1".into())]);
        assert_eq!(parse("").unwrap(), vec![Piece::Lit(String::new())]);
        assert!(parse("${").is_err());
        assert!(parse("${1a}").is_err());
        assert!(parse("${a-b}").is_err());
        assert!(parse("é${ü}").is_err());
        let caps: Captures = [("n".to_owned(), json!(5)), ("s".to_owned(), json!("x"))].into();
        assert_eq!(fill(&parse("${n}").unwrap(), &caps).unwrap(), json!(5));
        assert_eq!(fill(&parse("n=${n},s=${s}").unwrap(), &caps).unwrap(), json!("n=5,s=x"));
        assert_eq!(fill(&parse("${zz}").unwrap(), &caps).unwrap_err(), RenderError::Unbound("zz".into()));
    }

    #[test]
    fn repeat_generates_text() {
        let rep = |count, text: &str| Piece::Repeat { count, text: text.into() };
        assert_eq!(parse("${repeat:3:ab}").unwrap(), vec![rep(3, "ab")]);
        assert_eq!(
            parse("<${repeat:2:a:b}${x}>").unwrap(),
            vec![Piece::Lit("<".into()), rep(2, "a:b"), Piece::Var("x".into()), Piece::Lit(">".into())]
        );
        assert_eq!(parse("${repeat:0:a}").unwrap(), vec![rep(0, "a")]);
        for bad in ["${repeat:3}", "${repeat:3:}", "${repeat:x:a}", "${repeat:-1:a}", "${repeat:67108865:a}"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("${repeat:67108864:a}").is_ok());
        assert!(!has_placeholders("${repeat:2:a}"));
        let caps: Captures = [("x".to_owned(), json!(1))].into();
        assert_eq!(fill(&parse("${repeat:3:ab}").unwrap(), &caps).unwrap(), json!("ababab"));
        assert_eq!(fill(&parse("[${repeat:2:a}${x}]").unwrap(), &caps).unwrap(), json!("[aa1]"));
        let big = substitute(&json!({"text": "${repeat:11000000:a}"}), &caps).unwrap();
        assert_eq!(big["text"].as_str().map(str::len), Some(11_000_000));
        assert_eq!(rep(2, "xy").generated().as_deref(), Some("xyxy"));
    }

    #[test]
    fn templates_encode_after_substitution() {
        let t = Template::new(json!({"request_id": "${rid}", "progress": {"progress": "${n}"}})).unwrap();
        assert_eq!(t.names(), vec!["n".to_owned(), "rid".to_owned()]);
        let caps: Captures = [("rid".to_owned(), json!("r9")), ("n".to_owned(), json!(3))].into();
        let body = t.body(&caps).unwrap();
        assert_eq!(
            protomcp_proto::dynamic::decode(&body).unwrap(),
            json!({"request_id": "r9", "progress": {"progress": 3}})
        );
        let caps: Captures = [("rid".to_owned(), json!("r9")), ("n".to_owned(), json!("x"))].into();
        assert!(matches!(t.body(&caps), Err(RenderError::Encode(_))));
    }
}
