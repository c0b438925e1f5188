//! Bounds on what a peer can make us hold: a [`Bound`] on a sequence (its first and last items,
//! the ones between dropped and counted), the memory estimate of a JSON value, and how such
//! counts are written. The bounds themselves are in the crates that hold the sequences.

use serde_json::Value;

/// A bound on a sequence of items: the first `head_items` items (while they hold at most
/// `head_bytes`) are kept; after them, the last `tail_items` items (at most `tail_bytes`; the
/// newest item is always kept); the ones between are dropped and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub head_items: usize,
    pub head_bytes: usize,
    pub tail_items: usize,
    pub tail_bytes: usize,
}

impl Bound {
    /// The bound in words, for reports: `the first 2,000 items (80 MiB) and the last 500 (8 MiB)`.
    pub fn describe(&self) -> String {
        format!(
            "the first {} items ({}) and the last {} ({})",
            thousands(self.head_items as u64),
            mib(self.head_bytes),
            thousands(self.tail_items as u64),
            mib(self.tail_bytes)
        )
    }
}

fn mib(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// About how many bytes of memory `v` holds: its strings and keys, and a node's own size for
/// every value.
pub fn value_size(v: &Value) -> usize {
    const NODE: usize = 32;
    match v {
        Value::String(s) => NODE + s.len(),
        Value::Array(a) => NODE + a.iter().map(value_size).sum::<usize>(),
        Value::Object(o) => NODE + o.iter().map(|(k, v)| NODE + k.len() + value_size(v)).sum::<usize>(),
        _ => NODE,
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
