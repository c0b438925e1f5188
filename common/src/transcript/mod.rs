//! The transcript of one scenario run (design §5): every item both ways, in order, with its
//! direction; decoded Envelopes as the trees of [`crate::scenario::normalize`]; raw bytes as hex
//! where the harness wrote them by hand; end-of-file, exit and signal events; step markers.
//!
//! The runner keeps one [`Transcript`]; a failure report shows its tail as raw lines
//! ([`Item::line`]), `--transcripts DIR` and the golden files show it normalized
//! ([`normalize::render`]).
//!
//! A transcript is bounded ([`crate::limits::TRANSCRIPT`]): past the bound it keeps its first and
//! its last items, and an [`Item::Dropped`] between them counts the rest; [`Transcript::flood`]
//! names the flood for the verdict.

pub mod normalize;
pub mod read;

use serde_json::Value;

use crate::bounded::{Dropped, Kept, Kind, thousands, value_size};

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
    /// The transcript went past its bound ([`crate::limits::TRANSCRIPT`]): this many items (of
    /// about this many bytes) between its first and its last part were dropped.
    Dropped { items: u64, bytes: u64 },
}

impl Kind for Item {
    /// For the count of dropped items: what went which way (`testee→harness log`,
    /// `bridge→host notifications/message`, …).
    fn kind(&self) -> String {
        match self {
            Item::Frame { dir, tree, .. } => {
                let arm = tree.as_ref().and_then(protomcp_proto::dynamic::arm_of).unwrap_or("bytes");
                format!("{} {arm}", dir.name())
            }
            Item::Host { dir: Dir::ToTestee, .. } => "host→bridge messages".into(),
            Item::Host { dir: Dir::FromTestee, message: Some(m), .. } => format!("bridge→host {}", m.kind()),
            Item::Host { dir: Dir::FromTestee, .. } => "bridge→host lines".into(),
            Item::Malformed { .. } => "malformed frames".into(),
            Item::Step { .. } => "step markers".into(),
            _ => "events".into(),
        }
    }

    fn size(&self) -> usize {
        const ITEM: usize = 96;
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        ITEM + match self {
            Item::Frame { tree, hex, note, .. } => tree.as_ref().map_or(0, value_size) + text(hex) + text(note),
            Item::Host { message, raw, .. } => message.as_ref().map_or(0, value_size) + text(raw),
            Item::Malformed { error, hex } => error.len() + text(hex),
            Item::Step { keyword, .. } => keyword.len(),
            Item::StreamError { error } => error.len(),
            Item::Shutdown { how: s } | Item::Signal { name: s } | Item::Exit { status: s } => s.len(),
            Item::Schedule { name } => name.len(),
            Item::Touch { path } => path.len(),
            Item::Connected | Item::Eof | Item::Dropped { .. } => 0,
        }
    }
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
            Item::Dropped { items, bytes } => dropped_line(*items, *bytes),
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

/// The line of an [`Item::Dropped`] (the same raw and normalized).
pub(crate) fn dropped_line(items: u64, bytes: u64) -> String {
    format!("-- … {} items dropped ({} bytes) …", thousands(items), thousands(bytes))
}

/// The items of one run, in order, bounded by [`crate::limits::TRANSCRIPT`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    pub items: Kept<Item>,
}

impl Transcript {
    pub fn push(&mut self, item: Item) {
        self.items.push(item);
    }

    /// Every item kept, in order, with an [`Item::Dropped`] where items were dropped.
    pub fn to_vec(&self) -> Vec<Item> {
        let d = self.items.dropped();
        let mut out: Vec<Item> = Vec::with_capacity(self.items.len() + 1);
        for (n, item) in self.items.since(0) {
            if d.items > 0 && n == self.items.tail_start() {
                out.push(Item::Dropped { items: d.items, bytes: d.bytes });
            }
            out.push(item.clone());
        }
        out
    }

    /// The last `n` items as raw lines (step markers left out).
    pub fn tail(&self, n: usize) -> Vec<String> {
        let lines: Vec<String> =
            self.to_vec().iter().filter(|i| !matches!(i, Item::Step { .. })).map(Item::line).collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }

    /// The normalized text (see [`normalize`]).
    pub fn render(&self) -> String {
        render(&self.to_vec())
    }

    /// What the transcript dropped, if anything.
    pub fn dropped(&self) -> Option<&Dropped> {
        self.items.overflowed().then(|| self.items.dropped())
    }

    /// When the transcript went past its bound: the failure message naming the flood, with
    /// `party` the peer under test (`the testee`, `the bridge`).
    pub fn flood(&self, party: &str) -> Option<String> {
        self.items.flood(party, "transcript items in one run")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log(i: u64) -> Item {
        Item::Frame {
            dir: Dir::FromTestee,
            tree: Some(json!({"request_id": "", "log": {"level": "info", "data_json": format!("\"{i}\"")}})),
            hex: None,
            note: None,
        }
    }

    #[test]
    fn a_transcript_past_its_bound_keeps_both_ends_and_names_the_flood() {
        let mut t = Transcript::default();
        let b = crate::limits::TRANSCRIPT;
        let n = (b.head_items + b.tail_items + 5_000) as u64;
        for i in 0..n {
            t.push(log(i));
        }
        let d = t.dropped().expect("dropped");
        assert_eq!(d.items, 5_000);
        assert_eq!(d.kinds, [("testee→harness log".to_owned(), 5_000)]);
        let items = t.to_vec();
        assert_eq!(items.len(), b.head_items + b.tail_items + 1);
        assert_eq!(items[b.head_items - 1], log(b.head_items as u64 - 1));
        assert!(matches!(items[b.head_items], Item::Dropped { items: 5_000, .. }), "{:?}", items[b.head_items]);
        assert_eq!(items[b.head_items + 1], log(b.head_items as u64 + 5_000));
        assert_eq!(items.last(), Some(&log(n - 1)));
        let text = t.render();
        assert!(text.contains("\n-- … 5,000 items dropped ("), "{}", &text[..200]);
        let f = t.flood("the testee").unwrap();
        assert!(f.starts_with("flood: the testee sent 7,500 transcript items in one run ("), "{f}");
        assert!(f.contains("the first 2,000 items (80 MiB) and the last 500 (8 MiB)): 5,000 dropped"), "{f}");
        assert!(f.ends_with("the latest: testee→harness log 500"), "{f}");
        assert!(t.tail(3).last().unwrap().contains(&format!("\\\"{}\\\"", n - 1)), "{:?}", t.tail(3));
    }

    #[test]
    fn a_transcript_within_its_bound_has_no_flood() {
        let mut t = Transcript::default();
        for i in 0..100 {
            t.push(log(i));
        }
        assert!(t.dropped().is_none() && t.flood("the testee").is_none());
        assert_eq!(t.to_vec().len(), 100);
    }
}
