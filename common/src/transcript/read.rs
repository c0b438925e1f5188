//! Reads transcript text back into items: the lines [`super::render`] writes (normalized), and
//! the verbatim ones of the bridge's `--trace` ([`super::Normalizer::verbatim`]). A trace read
//! here can be normalized with [`super::render`] and compared with a scenario's transcript.
//!
//! What the text does not keep is left empty: step lines carry no scenario line (0).

use serde_json::Value;

use super::{Dir, Item};

/// A line of transcript text that is not an item, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("a step line without a keyword")]
    StepWithoutKeyword,
    #[error("step number {0:?}")]
    StepNumber(String),
    #[error("a dropped line without counts")]
    DroppedWithoutCounts,
    #[error("count {0:?}")]
    Count(String),
    #[error("an unknown event")]
    UnknownEvent,
    #[error("no direction or event")]
    NoDirection,
    #[error("no space after the direction")]
    NoSpace,
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("no JSON")]
    NoJson,
    #[error("text after the message: {0:?}")]
    AfterMessage(String),
    #[error("text after the frame: {0:?}")]
    AfterFrame(String),
}

/// A line that is not a transcript item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}: {text:?}")]
pub struct ReadError {
    /// From 1.
    pub line: usize,
    pub error: LineError,
    pub text: String,
}

/// Every item of `text`, in order; empty lines are skipped.
pub fn read(text: &str) -> Result<Vec<Item>, ReadError> {
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item = parse_line(line).map_err(|error| ReadError {
            line: i + 1,
            error,
            text: line.chars().take(200).collect(),
        })?;
        items.push(item);
    }
    Ok(items)
}

/// One line as an item.
pub fn parse_line(line: &str) -> Result<Item, LineError> {
    if let Some(rest) = line.strip_prefix("== step ") {
        let (index, keyword) = rest.split_once(": ").ok_or(LineError::StepWithoutKeyword)?;
        let index = index.parse().map_err(|_| LineError::StepNumber(index.to_owned()))?;
        return Ok(Item::Step { index, keyword: keyword.to_owned(), line: 0 });
    }
    if let Some(rest) = line.strip_prefix("-- ") {
        if rest == "connected" {
            return Ok(Item::Connected);
        }
        if let Some(name) = rest.strip_prefix("signal ") {
            return Ok(Item::Signal { name: name.to_owned() });
        }
        if let Some(status) = rest.strip_prefix("testee ") {
            return Ok(Item::Exit { status: status.to_owned() });
        }
        if let Some(name) = rest.strip_prefix("delivery schedule ") {
            return Ok(Item::Schedule { name: name.to_owned() });
        }
        if let Some(path) = rest.strip_prefix("touched ") {
            return Ok(Item::Touch { path: path.to_owned() });
        }
        if let Some(counts) = rest.strip_prefix("… ").and_then(|r| r.strip_suffix(" bytes) …")) {
            let number = |s: &str| s.replace(',', "").parse::<u64>().map_err(|_| LineError::Count(s.to_owned()));
            let (items, bytes) = counts.split_once(" items dropped (").ok_or(LineError::DroppedWithoutCounts)?;
            return Ok(Item::Dropped { items: number(items)?, bytes: number(bytes)? });
        }
        return Err(LineError::UnknownEvent);
    }
    for (prefix, dir) in [("host→bridge", Dir::ToTestee), ("bridge→host", Dir::FromTestee)] {
        if let Some(rest) = line.strip_prefix(prefix) {
            return host(dir, rest);
        }
    }
    let to = Dir::ToTestee.name();
    let from = Dir::FromTestee.name();
    if let Some(rest) = line.strip_prefix(to) {
        if let Some(how) = rest.strip_prefix(" shutdown(").and_then(|r| r.strip_suffix(')')) {
            return Ok(Item::Shutdown { how: how.to_owned() });
        }
        return frame(Dir::ToTestee, rest);
    }
    if let Some(rest) = line.strip_prefix(from) {
        if rest == " end of file" {
            return Ok(Item::Eof);
        }
        if let Some(error) = rest.strip_prefix(" stream error: ") {
            return Ok(Item::StreamError { error: error.to_owned() });
        }
        if let Some(m) = rest.strip_prefix(" malformed: ") {
            let (error, hex) = match m.split_once(" raw body: ") {
                Some((e, h)) => (e, Some(h.to_owned())),
                None => (m, None),
            };
            return Ok(Item::Malformed { error: error.to_owned(), hex });
        }
        return frame(Dir::FromTestee, rest);
    }
    Err(LineError::NoDirection)
}

/// The first JSON value of `s` and what follows it.
fn json_prefix(s: &str) -> Result<(Value, &str), LineError> {
    let mut values = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    match values.next() {
        Some(Ok(v)) => {
            let end = values.byte_offset();
            Ok((v, &s[end..]))
        }
        Some(Err(e)) => Err(LineError::Json(e.to_string())),
        None => Err(LineError::NoJson),
    }
}

fn host(dir: Dir, rest: &str) -> Result<Item, LineError> {
    if rest.is_empty() {
        return Ok(Item::Host { dir, message: None, raw: None });
    }
    if let Some(raw) = rest.strip_prefix(" line: ") {
        return Ok(Item::Host { dir, message: None, raw: Some(raw.to_owned()) });
    }
    let body = rest.strip_prefix(' ').ok_or(LineError::NoSpace)?;
    let (v, tail) = json_prefix(body)?;
    if !tail.trim().is_empty() {
        return Err(LineError::AfterMessage(tail.to_owned()));
    }
    Ok(Item::Host { dir, message: Some(v), raw: None })
}

fn frame(dir: Dir, rest: &str) -> Result<Item, LineError> {
    // The tree first: a note marker inside one of its strings is not a note.
    let (tree, rest) = if rest.is_empty() || rest.starts_with(" raw: ") || rest.starts_with("  # ") {
        (None, rest)
    } else {
        let body = rest.strip_prefix(' ').ok_or(LineError::NoSpace)?;
        let (v, tail) = json_prefix(body)?;
        (Some(v), tail)
    };
    let (rest, note) = match rest.split_once("  # ") {
        Some((r, n)) => (r, Some(n.to_owned())),
        None => (rest, None),
    };
    let hex = match rest.strip_prefix(" raw: ") {
        Some(h) => Some(h.to_owned()),
        None if rest.is_empty() => None,
        None => return Err(LineError::AfterFrame(rest.to_owned())),
    };
    Ok(Item::Frame { dir, tree, hex, note })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Normalizer, render};
    use serde_json::json;

    fn every_kind() -> Vec<Item> {
        vec![
            Item::Step { index: 1, keyword: "send".into(), line: 0 },
            Item::Schedule { name: "bytewise".into() },
            Item::Touch { path: "watched/tool.py".into() },
            Item::Dropped { items: 1_234_567, bytes: 98_765_432 },
            Item::Connected,
            Item::Frame {
                dir: Dir::FromTestee,
                tree: Some(json!({"request_id": "req-1", "list_tools": {}})),
                hex: None,
                note: None,
            },
            Item::Frame {
                dir: Dir::ToTestee,
                tree: Some(json!({"request_id": "req-1", "raw_header": {"request_id": "req-1"}})),
                hex: None,
                note: Some("sideband header".into()),
            },
            Item::Frame { dir: Dir::ToTestee, tree: None, hex: Some("00 00 00 02 12 00".into()), note: None },
            Item::Frame { dir: Dir::ToTestee, tree: Some(json!({"a": "b  # c"})), hex: Some("01".into()), note: None },
            Item::Malformed { error: "bad tag".into(), hex: Some("ff ff".into()) },
            Item::Malformed { error: "too long".into(), hex: None },
            Item::StreamError { error: "reset by peer".into() },
            Item::Eof,
            Item::Shutdown { how: "SHUT_WR".into() },
            Item::Signal { name: "SIGTERM".into() },
            Item::Exit { status: "exited with code 0".into() },
            Item::Host { dir: Dir::ToTestee, message: Some(json!({"id": 1, "method": "ping"})), raw: None },
            Item::Host { dir: Dir::ToTestee, message: None, raw: Some("not json {".into()) },
            Item::Host { dir: Dir::FromTestee, message: Some(json!({"id": 1, "result": {}})), raw: None },
        ]
    }

    #[test]
    fn verbatim_lines_read_back_to_the_same_items() {
        let mut n = Normalizer::verbatim();
        for item in every_kind() {
            let line = n.line(&item);
            assert_eq!(parse_line(&line), Ok(item), "{line}");
        }
    }

    #[test]
    fn normalized_text_reads_and_renders_again_unchanged() {
        let text = render(&every_kind());
        let items = read(&text).unwrap();
        assert_eq!(render(&items), text);
    }

    #[test]
    fn other_lines_are_refused_with_their_number() {
        let e = read("-- connected\n\nwhat is this\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(read("host→bridge {\"id\":").is_err());
        assert!(read("testee→harness {} trailing").is_err());
        assert!(read("-- unknown").is_err());
    }
}
