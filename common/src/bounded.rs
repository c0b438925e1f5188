//! A sequence that keeps its first and its last items and counts the ones between
//! ([`Kept`]), for every buffer a peer fills; the bounds themselves are in [`crate::limits`].

use std::collections::VecDeque;

use serde_json::Value;

use crate::limits::Bound;
pub use protomcp_proto::bound::{thousands, value_size};

/// What an item is, for the count of what was dropped (`notifications/message`, `log`, …).
pub trait Kind {
    /// A short name of the item's kind; peer-chosen text is fine (only a few distinct names are
    /// counted, see [`Dropped::kinds`]).
    fn kind(&self) -> String;
    /// About how many bytes of memory the item holds.
    fn size(&self) -> usize;
}

impl Kind for Value {
    fn kind(&self) -> String {
        match self.get("method").and_then(Value::as_str) {
            Some(m) => m.chars().take(80).collect(),
            None if self.get("id").is_some() => "response".into(),
            None if self.is_array() => "batch".into(),
            None => "other".into(),
        }
    }

    fn size(&self) -> usize {
        value_size(self)
    }
}

impl Kind for String {
    fn kind(&self) -> String {
        "line".into()
    }

    fn size(&self) -> usize {
        self.len() + 24
    }
}

/// Most distinct kinds counted by name in [`Dropped::kinds`]; the rest are counted as `other`.
const KINDS: usize = 8;

/// What a [`Kept`] dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped {
    pub items: u64,
    pub bytes: u64,
    /// Items dropped by kind, in order of first appearance (at most 8 names and `other`).
    pub kinds: Vec<(String, u64)>,
}

impl Dropped {
    fn count(&mut self, kind: String, bytes: usize) {
        self.items += 1;
        self.bytes += bytes as u64;
        if let Some(k) = self.kinds.iter_mut().find(|(n, _)| *n == kind) {
            k.1 += 1;
        } else if self.kinds.len() < KINDS {
            self.kinds.push((kind, 1));
        } else if let Some(k) = self.kinds.iter_mut().find(|(n, _)| n == "other") {
            k.1 += 1;
        } else {
            self.kinds.push(("other".into(), 1));
        }
    }

    /// `1,234,567 items (98,765,432 bytes; log 1,234,560, call_result 7)`.
    pub fn describe(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k} {}", thousands(*n))).collect();
        format!("{} items ({} bytes; {})", thousands(self.items), thousands(self.bytes), kinds.join(", "))
    }
}

/// A sequence bounded by a [`Bound`]: the first items, then the last ones, and a count of the
/// ones dropped between. Every item has a sequence number (from 0, in push order), also the
/// dropped ones, so that a reader can go on where it stopped ([`Kept::since`]). A reader that
/// needs no more than what it has not read yet forgets the rest ([`Kept::forget_before`]): then
/// the bound is on what waits to be read.
#[derive(Debug, Clone)]
pub struct Kept<T> {
    bound: Bound,
    head: VecDeque<(T, usize)>,
    /// The sequence number of the first item of `head`.
    head_start: u64,
    head_bytes: usize,
    tail: VecDeque<(T, usize)>,
    tail_bytes: usize,
    dropped: Dropped,
    total: u64,
    total_bytes: u64,
}

impl<T: PartialEq> PartialEq for Kept<T> {
    fn eq(&self, other: &Self) -> bool {
        self.head.iter().map(|(t, _)| t).eq(other.head.iter().map(|(t, _)| t))
            && self.tail.iter().map(|(t, _)| t).eq(other.tail.iter().map(|(t, _)| t))
            && self.dropped == other.dropped
    }
}

impl<T: Kind> Kept<T> {
    pub fn new(bound: Bound) -> Self {
        Kept {
            bound,
            head: VecDeque::new(),
            head_start: 0,
            head_bytes: 0,
            tail: VecDeque::new(),
            tail_bytes: 0,
            dropped: Dropped::default(),
            total: 0,
            total_bytes: 0,
        }
    }

    /// Appends `item`; past the bound the oldest item after the head is dropped (and counted).
    pub fn push(&mut self, item: T) {
        let size = item.size();
        let seq = self.total;
        self.total += 1;
        self.total_bytes += size as u64;
        let b = &self.bound;
        if self.tail.is_empty() && self.head.len() < b.head_items && self.head_bytes + size <= b.head_bytes {
            if self.head.is_empty() {
                self.head_start = seq;
            }
            self.head.push_back((item, size));
            self.head_bytes += size;
            return;
        }
        self.tail.push_back((item, size));
        self.tail_bytes += size;
        while self.tail.len() > 1 && (self.tail.len() > b.tail_items || self.tail_bytes > b.tail_bytes) {
            let Some((old, n)) = self.tail.pop_front() else { break };
            self.tail_bytes -= n;
            self.dropped.count(old.kind(), n);
        }
    }

    /// What was dropped so far.
    pub fn dropped(&self) -> &Dropped {
        &self.dropped
    }

    /// Whether anything was dropped.
    pub fn overflowed(&self) -> bool {
        self.dropped.items > 0
    }

    pub fn bound(&self) -> &Bound {
        &self.bound
    }

    /// Items pushed so far, dropped ones included.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Items kept.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether nothing was ever pushed.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Whether nothing is kept now (everything forgotten, or nothing pushed).
    pub fn is_empty_now(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// The sequence number of the first item of the last part (items were dropped just before
    /// it, when any were).
    pub fn tail_start(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    /// The items kept, in order (the gap, if any, is between the head and the tail).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.head.iter().chain(self.tail.iter()).map(|(t, _)| t)
    }

    /// The items kept whose sequence number is `seq` or later, with their numbers.
    pub fn since(&self, seq: u64) -> impl Iterator<Item = (u64, &T)> {
        let (h, t) = (self.head_start, self.tail_start());
        let head = self.head.iter().enumerate().map(move |(i, (x, _))| (h + i as u64, x));
        let tail = self.tail.iter().enumerate().map(move |(i, (x, _))| (t + i as u64, x));
        head.chain(tail).filter(move |(n, _)| *n >= seq)
    }

    /// Forgets the items numbered below `seq` (read and no longer needed); what was dropped
    /// stays counted.
    pub fn forget_before(&mut self, seq: u64) {
        while self.head_start < seq
            && let Some((_, n)) = self.head.pop_front()
        {
            self.head_bytes -= n;
            self.head_start += 1;
        }
        while self.tail_start() < seq
            && let Some((_, n)) = self.tail.pop_front()
        {
            self.tail_bytes -= n;
        }
    }

    /// When something was dropped: the failure message naming the flood, e.g. `flood: the bridge
    /// sent 2,501 messages on stdout (1,234,567 bytes), more than the harness keeps (the first
    /// 2,000 items (80 MiB) and the last 500 (8 MiB)): 1 dropped; the latest:
    /// notifications/message 500`.
    pub fn flood(&self, party: &str, what: &str) -> Option<String> {
        if !self.overflowed() {
            return None;
        }
        let mut latest = Dropped::default();
        for (t, n) in self.head.iter().chain(&self.tail).rev().take(self.bound.tail_items) {
            latest.count(t.kind(), *n);
        }
        let latest: Vec<String> = latest.kinds.iter().map(|(k, n)| format!("{k} {}", thousands(*n))).collect();
        Some(format!(
            "flood: {party} sent {} {what} ({} bytes), more than the harness keeps ({}): {} dropped; the latest: {}",
            thousands(self.total),
            thousands(self.total_bytes),
            self.bound.describe(),
            thousands(self.dropped.items),
            latest.join(", ")
        ))
    }
}

impl<T: Kind> Default for Kept<T> {
    /// A buffer with the bound of the transcript ([`crate::limits::TRANSCRIPT`]).
    fn default() -> Self {
        Kept::new(crate::limits::TRANSCRIPT)
    }
}

/// Bytes bounded like a [`Kept`] (stderr): the first `head` bytes, the last `tail` bytes, and a
/// count of the ones between.
#[derive(Debug, Clone, Default)]
pub struct KeptBytes {
    head_max: usize,
    tail_max: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
}

impl KeptBytes {
    pub fn new(head: usize, tail: usize) -> Self {
        KeptBytes { head_max: head, tail_max: tail, ..KeptBytes::default() }
    }

    pub fn extend(&mut self, mut bytes: &[u8]) {
        if self.tail.is_empty() && self.head.len() < self.head_max {
            let n = bytes.len().min(self.head_max - self.head.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() > self.tail_max {
            let skip = bytes.len() - self.tail_max;
            self.dropped += (skip + self.tail.len()) as u64;
            self.tail.clear();
            bytes = &bytes[skip..];
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
        self.tail.drain(..over);
        self.dropped += over as u64;
        self.tail.extend(bytes);
    }

    /// Bytes dropped between the head and the tail.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Every byte received, dropped ones included.
    pub fn total(&self) -> u64 {
        (self.head.len() + self.tail.len()) as u64 + self.dropped
    }

    /// The text kept (lossy UTF-8), with `… N bytes dropped …` on a line of its own at the gap.
    pub fn text(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("… {} bytes dropped …\n", thousands(self.dropped)));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = a.to_vec();
        tail.extend_from_slice(b);
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bound(head: usize, tail: usize) -> Bound {
        Bound { head_items: head, head_bytes: usize::MAX / 2, tail_items: tail, tail_bytes: usize::MAX / 2 }
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn the_first_and_the_last_items_are_kept_and_the_rest_counted() {
        let mut k = Kept::new(bound(3, 2));
        for i in 0..10 {
            k.push(json!({"method": if i % 2 == 0 { "a" } else { "b" }, "i": i}));
        }
        let kept: Vec<i64> = k.iter().map(|v| v["i"].as_i64().unwrap()).collect();
        assert_eq!(kept, [0, 1, 2, 8, 9]);
        assert_eq!(k.total(), 10);
        assert_eq!(k.dropped().items, 5);
        assert_eq!(k.dropped().kinds, [("b".to_owned(), 3), ("a".to_owned(), 2)]);
        assert!(k.dropped().describe().starts_with("5 items ("), "{}", k.dropped().describe());
        let since: Vec<(u64, i64)> = k.since(2).map(|(n, v)| (n, v["i"].as_i64().unwrap())).collect();
        assert_eq!(since, [(2, 2), (8, 8), (9, 9)]);
        assert_eq!(k.tail_start(), 8);
        k.forget_before(9);
        let since: Vec<u64> = k.since(0).map(|(n, _)| n).collect();
        assert_eq!(since, [9]);
        assert!(k.overflowed());
    }

    #[test]
    fn a_reader_that_forgets_what_it_read_bounds_only_what_waits() {
        let mut k = Kept::new(bound(3, 2));
        for i in 0..100 {
            k.push(json!(i));
            k.forget_before(i + 1);
        }
        assert!(!k.overflowed() && k.is_empty_now());
        for i in 100..104 {
            k.push(json!(i));
        }
        let kept: Vec<(u64, i64)> = k.since(0).map(|(n, v)| (n, v.as_i64().unwrap())).collect();
        assert_eq!(kept, [(100, 100), (101, 101), (102, 102), (103, 103)]);
        k.forget_before(102);
        k.push(json!(104));
        let kept: Vec<u64> = k.since(0).map(|(n, _)| n).collect();
        assert_eq!(kept, [102, 103, 104]);
    }

    #[test]
    fn nothing_is_dropped_within_the_bound() {
        let mut k = Kept::new(bound(3, 2));
        for i in 0..5 {
            k.push(json!(i));
        }
        assert!(!k.overflowed());
        assert_eq!(k.iter().count(), 5);
    }

    #[test]
    fn bytes_bound_the_head_and_the_tail_but_the_newest_item_stays() {
        let b = Bound { head_items: 100, head_bytes: 100, tail_items: 100, tail_bytes: 100 };
        let mut k = Kept::new(b);
        k.push("x".repeat(60));
        k.push("y".repeat(60)); // does not fit the head: the tail starts
        k.push("z".repeat(500)); // alone above the tail's bytes: kept, the older one dropped
        let kept: Vec<char> = k.iter().map(|s| s.chars().next().unwrap()).collect();
        assert_eq!(kept, ['x', 'z']);
        assert_eq!(k.dropped().items, 1);
        assert_eq!(k.dropped().bytes, 84);
    }

    #[test]
    fn a_few_kinds_are_named_and_the_rest_are_other() {
        let mut k = Kept::new(bound(0, 1));
        for i in 0..20 {
            k.push(json!({"method": format!("m{i}")}));
        }
        let d = k.dropped();
        assert_eq!(d.items, 19);
        assert_eq!(d.kinds.len(), KINDS + 1);
        assert_eq!(d.kinds.last().unwrap(), &("other".to_owned(), 19 - KINDS as u64));
    }

    #[test]
    fn bytes_keep_their_head_and_tail() {
        let mut b = KeptBytes::new(4, 3);
        b.extend(b"abcdefgh");
        b.extend(b"ij");
        assert_eq!(b.dropped(), 3);
        assert_eq!(b.total(), 10);
        assert_eq!(b.text(), "abcd\n… 3 bytes dropped …\nhij");
        let mut b = KeptBytes::new(4, 3);
        b.extend(b"ab");
        b.extend(b"cd");
        assert_eq!((b.text().as_str(), b.dropped()), ("abcd", 0));
        b.extend(&[b'x'; 100]);
        assert_eq!(b.dropped(), 97);
        assert!(b.text().ends_with("xxx"));
    }
}
