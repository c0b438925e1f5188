//! The transcript of one scenario run (design §5): every item both ways, in order, with its
//! direction; decoded Envelopes as the trees of [`crate::scenario::normalize`]; raw bytes as hex
//! where the harness wrote them by hand; end-of-file, exit and signal events; step markers.
//!
//! The runner keeps one [`Transcript`]; a failure report shows its tail as raw lines
//! ([`Item::line`]), `--transcripts DIR` and the golden files show it normalized
//! ([`normalize::render`]).

pub mod normalize;
pub mod read;

use serde_json::Value;

pub use normalize::{Normalizer, render};
pub use read::{ReadError, read};

/// Which way an item went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// `harness→testee`
    ToTestee,
    /// `testee→harness`
    FromTestee,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::ToTestee => "harness→testee",
            Dir::FromTestee => "testee→harness",
        }
    }

    fn arrow(self) -> &'static str {
        match self {
            Dir::ToTestee => "→",
            Dir::FromTestee => "←",
        }
    }
}

/// One item of a transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A step begins: its index (from 1), keyword and line in the scenario file.
    Step { index: usize, keyword: String, line: u32 },
    /// The testee connected to the harness's socket.
    Connected,
    /// A frame or bytes: the decoded tree when there is one, the bytes as hex when they were
    /// written by hand (`send_raw`, `send_frame`), and a note (`ignored`, `sideband header`, …).
    Frame { dir: Dir, tree: Option<Value>, hex: Option<String>, note: Option<String> },
    /// A frame from the testee that did not decode (the framing held): the error and the body
    /// as hex.
    Malformed { error: String, hex: Option<String> },
    /// End-of-file from the testee.
    Eof,
    /// The connection broke.
    StreamError { error: String },
    /// The harness shut the connection down (`SHUT_RDWR` or `SHUT_WR`).
    Shutdown { how: String },
    /// The harness sent a signal.
    Signal { name: String },
    /// The testee ended.
    Exit { status: String },
    /// The delivery schedule of the harness's writes, when not `whole` (first item).
    Schedule { name: String },
    /// Bridge scenarios: one line on the host side. `ToTestee` is host→bridge (stdin),
    /// `FromTestee` bridge→host (stdout); `message` when the line is JSON, `raw` otherwise.
    Host { dir: Dir, message: Option<Value>, raw: Option<String> },
    /// Bridge scenarios: the harness created or modified a file (path relative to the
    /// scenario's temp dir).
    Touch { path: String },
}

/// Longest raw line kept in a failure report, in characters.
const LINE_MAX: usize = 400;

/// A tree as one compact line, cut at [`LINE_MAX`] characters.
pub fn compact(v: &Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    if s.chars().count() > LINE_MAX {
        let cut: String = s.chars().take(LINE_MAX).collect();
        format!("{cut}… ({} bytes)", s.len())
    } else {
        s
    }
}

/// Bytes as lowercase hex, a space every byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

impl Item {
    /// The item as one raw (not normalized) line, as failure reports show it.
    pub fn line(&self) -> String {
        match self {
            Item::Step { index, keyword, line } => format!("-- step {index}: {keyword} (line {line})"),
            Item::Connected => "-- connected".into(),
            Item::Frame { dir, tree, hex, note } => {
                let body = match (tree, hex) {
                    (Some(t), _) => compact(t),
                    (None, Some(h)) => {
                        let n = h.split(' ').filter(|s| !s.is_empty()).count();
                        format!("raw {n} bytes")
                    }
                    (None, None) => String::new(),
                };
                match note {
                    Some(n) => format!("{} {body} ({n})", dir.arrow()),
                    None => format!("{} {body}", dir.arrow()),
                }
            }
            Item::Malformed { error, .. } => format!("← malformed: {error}"),
            Item::Eof => "← end of file".into(),
            Item::StreamError { error } => format!("← stream error: {error}"),
            Item::Shutdown { how } => format!("→ shutdown({how})"),
            Item::Signal { name } => format!("-- sent signal {name}"),
            Item::Exit { status } => format!("-- testee {status}"),
            Item::Schedule { name } => format!("-- delivery schedule {name}"),
            Item::Touch { path } => format!("-- touched {path}"),
            Item::Host { dir, message, raw } => {
                let arrow = match dir {
                    Dir::ToTestee => "host→",
                    Dir::FromTestee => "host←",
                };
                match (message, raw) {
                    (Some(m), _) => format!("{arrow} {}", compact(m)),
                    (None, Some(r)) => format!("{arrow} line {r:?}"),
                    (None, None) => arrow.to_owned(),
                }
            }
        }
    }
}

/// The items of one run, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    pub items: Vec<Item>,
}

impl Transcript {
    pub fn push(&mut self, item: Item) {
        self.items.push(item);
    }

    /// The last `n` items as raw lines (step markers left out).
    pub fn tail(&self, n: usize) -> Vec<String> {
        let lines: Vec<String> =
            self.items.iter().filter(|i| !matches!(i, Item::Step { .. })).map(Item::line).collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }

    /// The normalized text (see [`normalize`]).
    pub fn render(&self) -> String {
        render(&self.items)
    }
}
