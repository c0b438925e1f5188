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
//!
//! `${fill:N:C}` pads to an exact size: the one ASCII character C written as many times as it
//! takes for the whole message around it to be exactly N bytes: the Envelope body (without the
//! 4-byte prefix) of a `send` or `send_frame: {body}`, the compact JSON text (without a newline)
//! of a `host_send: {message}`. One per message; anything else refuses it (the loader says so).

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
    /// `${fill:N:C}`: `ch` written as often as makes the enclosing message `total` bytes.
    Fill {
        total: usize,
        ch: char,
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

/// The largest message `${fill:…}` may size (64 MiB, as [`MAX_REPEAT`]).
pub const MAX_FILL: usize = MAX_REPEAT;

/// Why a `${fill:…}` stands where it does not size a whole message.
pub const FILL_MISPLACED: &str = "`${fill:N:C}` sizes a whole message: only `send`, `send_frame: {body}` and `host_send: {message}` take it, once per message";

/// A placeholder that does not read, and what is malformed in it (the loader adds `file:line:col`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

/// `N:C` of `${fill:N:C}`.
fn parse_fill(spec: &str) -> Result<Piece, SyntaxError> {
    let bad = || {
        SyntaxError(format!(
            "`${{fill:{spec}}}`: write `${{fill:N:C}}` (N the size in bytes of the whole message, C one printable ASCII character other than `\"` and `\\`)"
        ))
    };
    let (n, c) = spec.split_once(':').ok_or_else(bad)?;
    let total: usize = n.parse().map_err(|_| bad())?;
    let mut chars = c.chars();
    let (Some(ch), None) = (chars.next(), chars.next()) else { return Err(bad()) };
    if !(ch == ' ' || ch.is_ascii_graphic()) || ch == '"' || ch == '\\' {
        return Err(bad());
    }
    if total > MAX_FILL {
        return Err(SyntaxError(format!("`${{fill:{spec}}}` asks for a message of more than {MAX_FILL} bytes")));
    }
    Ok(Piece::Fill { total, ch })
}

/// `N:TEXT` of `${repeat:N:TEXT}`.
fn parse_repeat(spec: &str) -> Result<Piece, SyntaxError> {
    let bad = || SyntaxError(format!("`${{repeat:{spec}}}`: write `${{repeat:N:TEXT}}` (N a count, TEXT not empty)"));
    let (n, text) = spec.split_once(':').ok_or_else(bad)?;
    let count: usize = n.parse().map_err(|_| bad())?;
    if text.is_empty() {
        return Err(bad());
    }
    if count.checked_mul(text.len()).is_none_or(|total| total > MAX_REPEAT) {
        return Err(SyntaxError(format!("`${{repeat:{spec}}}` generates more than {MAX_REPEAT} bytes")));
    }
    Ok(Piece::Repeat { count, text: text.to_owned() })
}

/// Splits `s` into literal text and placeholders; the error says what is malformed.
pub(crate) fn parse(s: &str) -> Result<Vec<Piece>, SyntaxError> {
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
                    return Err(SyntaxError(format!("unterminated placeholder `{}`", &s[i..])));
                };
                let name = &rest[..end];
                let generated = if let Some(spec) = name.strip_prefix("repeat:") {
                    Some(parse_repeat(spec)?)
                } else if let Some(spec) = name.strip_prefix("fill:") {
                    Some(parse_fill(spec)?)
                } else {
                    None
                };
                if let Some(piece) = generated {
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(piece);
                    for _ in 0..name.chars().count() + 1 {
                        chars.next();
                    }
                    continue;
                }
                if !is_name(name) {
                    return Err(SyntaxError(format!(
                        "`${{{name}}}` is not a placeholder: names are letters, digits and `_`, not starting with a digit (write `$$` for a literal `$`)"
                    )));
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
/// otherwise. A `${fill:…}` is an error here: only a whole message is sized ([`substitute`],
/// [`Template::render`]).
pub fn fill(pieces: &[Piece], captures: &Captures) -> Result<Value, RenderError> {
    fill_n(pieces, captures, None)
}

/// [`fill`] with `${fill:…}` written `fill` times (`None`: refused).
fn fill_n(pieces: &[Piece], captures: &Captures, fill: Option<usize>) -> Result<Value, RenderError> {
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
            Piece::Fill { ch, .. } => {
                let n = fill.ok_or_else(|| RenderError::Malformed(FILL_MISPLACED.into()))?;
                out.extend(std::iter::repeat_n(*ch, n));
            }
        }
    }
    Ok(Value::String(out))
}

/// [`fill`] for a string that must stay a string.
pub fn fill_text(pieces: &[Piece], captures: &Captures) -> Result<String, RenderError> {
    fill(pieces, captures).map(|v| text_of(&v))
}

/// Replaces the placeholders in every string of `v` (object keys are left alone). A
/// `${fill:N:C}` makes the compact JSON text of the whole result (`v.to_string()`, what a
/// `host_send` writes) exactly N bytes.
pub fn substitute(v: &Value, captures: &Captures) -> Result<Value, RenderError> {
    sized(v, captures, |out| Ok(out.to_string().len())).map(|(out, _)| out)
}

/// [`substitute`] with every `${fill:…}` written `fill` times.
fn substitute_n(v: &Value, captures: &Captures, fill: Option<usize>) -> Result<Value, RenderError> {
    Ok(match v {
        Value::String(s) => fill_n(&parse(s).map_err(|e| RenderError::Malformed(e.0))?, captures, fill)?,
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute_n(x, captures, fill)).collect::<Result<_, _>>()?),
        Value::Object(o) => {
            let mut m = serde_json::Map::new();
            for (k, x) in o {
                // A member name may hold placeholders too (a name the peer chose, captured).
                let key = if has_placeholders(k) {
                    fill_text(&parse(k).map_err(|e| RenderError::Malformed(e.0))?, captures)?
                } else {
                    k.clone()
                };
                m.insert(key, substitute_n(x, captures, fill)?);
            }
            Value::Object(m)
        }
        other => other.clone(),
    })
}

/// The N of the first `${fill:N:C}` in the strings of `v`.
pub fn fill_total(v: &Value) -> Option<usize> {
    match v {
        Value::String(s) => parse(s).ok()?.into_iter().find_map(|p| match p {
            Piece::Fill { total, .. } => Some(total),
            _ => None,
        }),
        Value::Array(a) => a.iter().find_map(fill_total),
        Value::Object(o) => o.values().find_map(fill_total),
        _ => None,
    }
}

/// How many `${fill:…}` pieces the strings of `v` hold.
pub fn fill_count(v: &Value) -> usize {
    match v {
        Value::String(s) => parse(s).map_or(0, |p| p.iter().filter(|p| matches!(p, Piece::Fill { .. })).count()),
        Value::Array(a) => a.iter().map(fill_count).sum(),
        Value::Object(o) => o.values().map(fill_count).sum(),
        _ => 0,
    }
}

/// What `v` measures with every `${fill:…}` empty: its encoded Envelope body (`envelope`) or
/// its compact JSON text, so that a loader can refuse an N the message exceeds already.
pub fn size_without_fill(v: &Value, captures: &Captures, envelope: bool) -> Result<usize, RenderError> {
    let out = substitute_n(v, captures, Some(0))?;
    Ok(if envelope { dynamic::encode(&out)?.len() } else { out.to_string().len() })
}

/// Substitutes `v` and, when it holds a `${fill:N:C}`, finds the fill length for which
/// `measure` says N: the size grows by at least one byte per character (more where a length
/// prefix inside the message gains a byte), so a few steps from the unpadded size reach it, or
/// show that no length does. Returns the value and its measured size.
fn sized(
    v: &Value,
    captures: &Captures,
    measure: impl Fn(&Value) -> Result<usize, RenderError>,
) -> Result<(Value, usize), RenderError> {
    let Some(total) = fill_total(v) else {
        let out = substitute_n(v, captures, None)?;
        let size = measure(&out)?;
        return Ok((out, size));
    };
    let mut k = 0usize;
    let mut tried = std::collections::BTreeMap::new();
    loop {
        let out = substitute_n(v, captures, Some(k))?;
        let size = measure(&out)?;
        if size == total {
            return Ok((out, size));
        }
        if k == 0 && size > total {
            return Err(RenderError::Malformed(format!(
                "`${{fill:{total}:…}}`: the message is {size} bytes without any fill, more than {total}"
            )));
        }
        if tried.insert(k, size).is_some() || tried.len() > 16 {
            let (below, above) = (
                tried.iter().filter(|(_, s)| **s < total).map(|(_, s)| *s).max(),
                tried.iter().filter(|(_, s)| **s > total).map(|(_, s)| *s).min(),
            );
            return Err(RenderError::Malformed(format!(
                "`${{fill:{total}:…}}`: no fill length makes the message exactly {total} bytes (it goes from {} to {} there, where a length prefix gains a byte): choose another size or move the fill",
                below.map_or("?".into(), |s| s.to_string()),
                above.map_or("?".into(), |s| s.to_string()),
            )));
        }
        k = if size > total { k - (size - total).min(k) } else { k + (total - size) };
        if k > MAX_FILL {
            return Err(RenderError::Malformed(format!(
                "`${{fill:{total}:…}}` would write more than {MAX_FILL} bytes"
            )));
        }
    }
}

/// Every placeholder name used in the strings of `v`.
pub fn names_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.extend(names(s)),
        Value::Array(a) => a.iter().for_each(|x| names_in(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.extend(names(k));
            names_in(x, out)
        }),
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

    /// The tree with the placeholders filled in; a `${fill:N:C}` makes the encoded Envelope
    /// body exactly N bytes.
    pub fn render(&self, captures: &Captures) -> Result<Value, RenderError> {
        sized(&self.tree, captures, |out| Ok(dynamic::encode(out)?.len())).map(|(out, _)| out)
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
    #[test]
    fn a_fill_makes_the_envelope_body_exactly_the_size_asked_for() {
        for n in [40usize, 127, 128, 129, 300, 16_383, 16_384, 16_385, 70_000] {
            let t = Template::new(json!({"request_id": "f", "call_tool": {"name": "echo", "arguments_json": {"text": format!("<${{fill:{n}:x}}>")}}}))
                .unwrap();
            let body = t.body(&Captures::new()).unwrap();
            assert_eq!(body.len(), n, "body of {n}");
            assert_eq!(t.frame(&Captures::new()).unwrap().len(), n + 4);
            let text = protomcp_proto::dynamic::decode(&body).unwrap()["call_tool"]["arguments_json"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(text.starts_with(r#"{"text":"<x"#) && text.ends_with(r#"x>"}"#), "{text}");
        }
    }

    #[test]
    fn a_fill_reaches_max_frame_and_one_byte_more() {
        for n in [10_485_760usize, 10_485_761] {
            let t = Template::new(json!({"request_id": "m", "call_tool": {"name": "echo", "arguments_json": {"text": format!("${{fill:{n}:a}}")}}}))
                .unwrap();
            assert_eq!(t.body(&Captures::new()).unwrap().len(), n);
        }
    }

    #[test]
    fn a_fill_makes_the_json_text_of_a_host_message_exactly_the_size_asked_for() {
        for n in [80usize, 1000, 65_536, 65_537] {
            let v =
                json!({"jsonrpc": "2.0", "id": "${id}", "params": {"arguments": {"text": format!("${{fill:{n}:z}}")}}});
            let caps: Captures = [("id".to_owned(), json!(7))].into();
            let out = substitute(&v, &caps).unwrap();
            assert_eq!(out.to_string().len(), n);
            assert_eq!(out["id"], json!(7));
        }
    }

    #[test]
    fn a_fill_counts_the_bytes_of_captures_and_other_text_around_it() {
        let t = Template::new(json!({"request_id": "${rid}", "log": {"data_json": "\"${fill:500:-}\""}})).unwrap();
        for rid in ["r", "a-much-longer-request-id-é"] {
            let caps: Captures = [("rid".to_owned(), json!(rid))].into();
            assert_eq!(t.body(&caps).unwrap().len(), 500);
        }
    }

    #[test]
    fn a_message_already_larger_than_the_fill_size_is_an_error_that_says_so() {
        let t =
            Template::new(json!({"request_id": "rid", "call_tool": {"name": "echo", "arguments_json": "${fill:5:x}"}}))
                .unwrap();
        let e = t.body(&Captures::new()).unwrap_err().to_string();
        assert!(e.contains("without any fill, more than 5"), "{e}");
        // An empty string is not written (proto3): arm and name (8 bytes), rid (5 bytes).
        assert_eq!(size_without_fill(t.tree(), &Captures::new(), true).unwrap(), 13);
    }

    #[test]
    fn a_size_that_a_growing_length_prefix_skips_is_an_error_not_a_near_miss() {
        // The string field's length goes from 127 to 128 bytes, its prefix from 1 byte to 2,
        // and the nested message's prefix as well: no fill length gives these sizes.
        let t = Template::new(json!({"call_tool": {"name": "${fill:132:x}"}})).unwrap();
        let sizes: Vec<usize> = (0..200)
            .map(|k| {
                protomcp_proto::dynamic::encode(&substitute_n(t.tree(), &Captures::new(), Some(k)).unwrap())
                    .unwrap()
                    .len()
            })
            .collect();
        let skipped = (1..200).find(|n| !sizes.contains(n) && *n > sizes[0]).unwrap();
        let t = Template::new(json!({"call_tool": {"name": format!("${{fill:{skipped}:x}}")}})).unwrap();
        let e = t.body(&Captures::new()).unwrap_err().to_string();
        assert!(e.contains(&format!("no fill length makes the message exactly {skipped} bytes")), "{e}");
    }

    #[test]
    fn malformed_fills_are_refused_with_the_form_to_write() {
        assert_eq!(parse("a${fill:10:x}b").unwrap()[1], Piece::Fill { total: 10, ch: 'x' });
        for bad in [
            "${fill:10}",
            "${fill:10:}",
            "${fill:10:xy}",
            "${fill:x:a}",
            "${fill:10:\"}",
            "${fill:10:\\}",
            "${fill:10:é}",
            "${fill:10:\n}",
        ] {
            let e = parse(bad).unwrap_err().0;
            assert!(e.contains("${fill:N:C}"), "{bad}: {e}");
        }
        assert!(parse("${fill:67108865:a}").unwrap_err().0.contains("more than"));
        assert!(!has_placeholders("${fill:9:a}"));
    }

    #[test]
    fn a_fill_outside_a_whole_message_is_an_error_at_run_time_too() {
        let e = fill(&parse("${fill:9:a}").unwrap(), &Captures::new()).unwrap_err().to_string();
        assert!(e.contains("sizes a whole message"), "{e}");
    }
}
