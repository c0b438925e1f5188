//! The one normalization policy of transcripts (design §5), so that two runs of a scenario give
//! the same text:
//!
//! - request ids (`request_id` anywhere in a tree — the Envelope's, `CancelRequest.request_id`,
//!   `RawHeader.request_id` — and the sideband summary's `envelope_rid`) are renamed by first
//!   appearance to `[ID:1]`, `[ID:2]`, …; the empty rid stays empty;
//! - progress tokens (`progress_token`) likewise to `[TOKEN:1]`, …;
//! - MRTR states (`requestState`, drawn under a key the bridge draws at random) likewise to
//!   `[STATE:1]`, …, and a reference bridge's state inside raw text (an HTTP body) to `[STATE]`;
//! - JSON carried in strings (fields named `*_json`) shown parsed, when it parses;
//! - in every string: temp and socket paths → `[TMP]`, PIDs (`pid 123`, `group 123`, `process
//!   123`) → `[PID]`, durations (`12ms`, `1.5s`, `3µs`) → `[ELAPSED]`, loopback ports
//!   (`127.0.0.1:40123`, a `tcp_listen` port in a schema) → `127.0.0.1:[PORT]`;
//! - strings longer than [`STRING_MAX`] characters are cut, with their length;
//! - object keys in sorted order, one line per item;
//! - within an `expect_any_order` step the received lines are sorted (the order is the testee's
//!   choice there, and the scenario does not care).

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::{Dir, Item};

/// Longest string value shown in full.
pub const STRING_MAX: usize = 160;
/// Longest hex shown in full, in bytes.
pub const HEX_MAX: usize = 64;

/// Keys whose values are request ids.
const RID_KEYS: [&str; 2] = ["request_id", "envelope_rid"];
/// Keys whose values are progress tokens.
const TOKEN_KEYS: [&str; 1] = ["progress_token"];
/// Keys whose values are MRTR states.
const STATE_KEYS: [&str; 1] = ["requestState"];

struct Patterns {
    tmp: Regex,
    pid: Regex,
    elapsed: Regex,
    state: Regex,
    port: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let mut roots = vec!["/tmp".to_owned(), "/var/tmp".to_owned()];
        for r in
            [std::env::temp_dir().display().to_string(), std::env::var(crate::tmpdir::ENV_TMPDIR).unwrap_or_default()]
        {
            let r = r.trim_end_matches('/').to_owned();
            if !r.is_empty() && !roots.contains(&r) {
                roots.push(r);
            }
        }
        // Longest first, so that a root inside another is replaced whole.
        roots.sort_by_key(|r| std::cmp::Reverse(r.len()));
        let alt: Vec<String> = roots.iter().map(|r| regex::escape(r)).collect();
        Patterns {
            tmp: Regex::new(&format!(r#"(?:{})/[^\s"',;:)\]]*"#, alt.join("|"))).expect("tmp pattern"),
            pid: Regex::new(r"(?i)\b(pid[ =:]?|process |group )\d+").expect("pid pattern"),
            elapsed: Regex::new(r"\b\d+(?:\.\d+)?(?:ns|µs|us|ms|s)\b").expect("elapsed pattern"),
            state: Regex::new(r"\br1\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{10,}").expect("state pattern"),
            port: Regex::new(r"\b127\.0\.0\.1:\d+\b").expect("port pattern"),
        }
    })
}

/// Renames ids and tokens by first appearance and scrubs strings; one per transcript.
#[derive(Debug, Default)]
pub struct Normalizer {
    ids: HashMap<String, String>,
    tokens: HashMap<String, String>,
    states: HashMap<String, String>,
    /// Lines in the same format with nothing renamed, scrubbed or cut (the bridge's `--trace`).
    verbatim: bool,
}

fn rename(map: &mut HashMap<String, String>, kind: &str, v: &str) -> String {
    if v.is_empty() {
        return String::new();
    }
    let n = map.len() + 1;
    map.entry(v.to_owned()).or_insert_with(|| format!("[{kind}:{n}]")).clone()
}

impl Normalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes the same line format but keeps every value as it was (ids, paths, full strings
    /// and hex); a line break inside a text becomes `\n`, so one item stays one line.
    pub fn verbatim() -> Self {
        Normalizer { verbatim: true, ..Self::default() }
    }

    /// The normalized name of a request id.
    pub fn rid(&mut self, rid: &str) -> String {
        rename(&mut self.ids, "ID", rid)
    }

    /// The normalized name of a progress token.
    pub fn token(&mut self, token: &str) -> String {
        rename(&mut self.tokens, "TOKEN", token)
    }

    /// Paths, PIDs and durations of a text bracketed.
    pub fn text(&self, s: &str) -> String {
        if self.verbatim {
            return s.replace('\n', "\\n");
        }
        let p = patterns();
        let s = p.tmp.replace_all(s, "[TMP]");
        let s = p.pid.replace_all(&s, "${1}[PID]");
        let s = p.state.replace_all(&s, "[STATE]");
        let s = p.port.replace_all(&s, "127.0.0.1:[PORT]");
        p.elapsed.replace_all(&s, "[ELAPSED]").into_owned()
    }

    fn string(&self, s: &str) -> String {
        let s = self.text(s);
        let n = s.chars().count();
        if n > STRING_MAX {
            let cut: String = s.chars().take(STRING_MAX).collect();
            format!("{cut}…[{n} chars]")
        } else {
            s
        }
    }

    /// The tree normalized, keys sorted. Ids are renamed in document order (keys sorted).
    pub fn value(&mut self, v: &Value) -> Value {
        if self.verbatim {
            return v.clone();
        }
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    let x = &m[k];
                    let y = match (k.as_str(), x) {
                        (k, Value::String(s)) if RID_KEYS.contains(&k) => Value::String(self.rid(s)),
                        (k, Value::String(s)) if TOKEN_KEYS.contains(&k) => Value::String(self.token(s)),
                        (k, Value::String(s)) if STATE_KEYS.contains(&k) => {
                            Value::String(rename(&mut self.states, "STATE", s))
                        }
                        (k, Value::String(s)) if k.ends_with("_json") => match serde_json::from_str::<Value>(s) {
                            Ok(parsed) => self.value(&parsed),
                            Err(_) => self.value(x),
                        },
                        _ => self.value(x),
                    };
                    out.insert(k.clone(), y);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value(x)).collect()),
            Value::String(s) => Value::String(self.string(s)),
            other => other.clone(),
        }
    }

    fn hex(&self, h: &str) -> String {
        let bytes: Vec<&str> = h.split(' ').filter(|s| !s.is_empty()).collect();
        if bytes.len() > HEX_MAX && !self.verbatim {
            format!("{} …[{} bytes]", bytes[..HEX_MAX].join(" "), bytes.len())
        } else {
            bytes.join(" ")
        }
    }

    /// One item as one normalized line.
    pub fn line(&mut self, item: &Item) -> String {
        match item {
            Item::Step { index, keyword, .. } => format!("== step {index}: {keyword}"),
            Item::Connected => "-- connected".into(),
            Item::Frame { dir, tree, hex, note } => {
                let mut s = dir.name().to_owned();
                if let Some(t) = tree {
                    let v = self.value(t);
                    s.push(' ');
                    s.push_str(&serde_json::to_string(&v).unwrap_or_default());
                }
                if let Some(h) = hex {
                    s.push_str(" raw: ");
                    s.push_str(&self.hex(h));
                }
                if let Some(n) = note {
                    s.push_str("  # ");
                    s.push_str(&self.text(n));
                }
                s
            }
            Item::Malformed { error, hex } => {
                let mut s = format!("{} malformed: {}", Dir::FromTestee.name(), self.text(error));
                if let Some(h) = hex {
                    s.push_str(" raw body: ");
                    s.push_str(&self.hex(h));
                }
                s
            }
            Item::Eof => format!("{} end of file", Dir::FromTestee.name()),
            Item::StreamError { error } => format!("{} stream error: {}", Dir::FromTestee.name(), self.text(error)),
            Item::Shutdown { how } => format!("{} shutdown({how})", Dir::ToTestee.name()),
            Item::Signal { name } => format!("-- signal {name}"),
            Item::Exit { status } => format!("-- testee {}", self.text(status)),
            Item::Schedule { name } => format!("-- delivery schedule {name}"),
            Item::Touch { path } => format!("-- touched {path}"),
            Item::Dropped { items, bytes } => super::dropped_line(*items, *bytes),
            Item::Host { dir, message, raw } => {
                let name = match dir {
                    Dir::ToTestee => "host→bridge",
                    Dir::FromTestee => "bridge→host",
                };
                match (message, raw) {
                    (Some(m), _) => format!("{name} {}", serde_json::to_string(&self.value(m)).unwrap_or_default()),
                    (None, Some(r)) => format!("{name} line: {}", self.text(r)),
                    (None, None) => name.to_owned(),
                }
            }
        }
    }
}

/// The normalized text of a transcript: one line per item, a step marker line before each step;
/// within `expect_any_order` steps the lines are sorted.
pub fn render(items: &[Item]) -> String {
    let mut n = Normalizer::new();
    let mut out: Vec<String> = Vec::new();
    let mut block: Vec<String> = Vec::new();
    let mut sort_block = false;
    let flush = |out: &mut Vec<String>, block: &mut Vec<String>, sort: bool| {
        if sort {
            block.sort();
        }
        out.append(block);
    };
    for item in items {
        if let Item::Step { keyword, .. } = item {
            flush(&mut out, &mut block, sort_block);
            sort_block = keyword == "expect_any_order";
            out.push(n.line(item));
            continue;
        }
        block.push(n.line(item));
    }
    flush(&mut out, &mut block, sort_block);
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::hex;
    use serde_json::json;

    #[test]
    fn rids_are_renamed_by_first_appearance_everywhere() {
        let mut n = Normalizer::new();
        let a = n.value(&json!({"request_id": "c2", "call_tool": {"name": "echo"}}));
        assert_eq!(a, json!({"request_id": "[ID:1]", "call_tool": {"name": "echo"}}));
        let b = n.value(&json!({"request_id": "", "cancel": {"request_id": "c2"}}));
        assert_eq!(b, json!({"request_id": "", "cancel": {"request_id": "[ID:1]"}}));
        let c = n.value(&json!({"request_id": "c1", "raw_header": {"request_id": "c2"}}));
        assert_eq!(c, json!({"request_id": "[ID:2]", "raw_header": {"request_id": "[ID:1]"}}));
        let d = n.value(&json!({"sideband": {"envelope_rid": "c1"}}));
        assert_eq!(d["sideband"]["envelope_rid"], "[ID:2]");
    }

    #[test]
    fn json_fields_are_shown_parsed() {
        let mut n = Normalizer::new();
        let v = n.value(&json!({"call_result": {"result_json": "[{\"type\":\"text\",\"text\":\"hi\"}]"}}));
        assert_eq!(v, json!({"call_result": {"result_json": [{"text": "hi", "type": "text"}]}}));
        let v = n.value(&json!({"call_tool": {"arguments_json": "{not json"}}));
        assert_eq!(v["call_tool"]["arguments_json"], "{not json");
    }

    #[test]
    fn mrtr_states_get_their_own_numbers_and_are_bracketed_in_raw_text() {
        let mut n = Normalizer::new();
        let st = "r1.AZmllCReCoSrAAAAAAAAAAEIbmnvz1m5dfXSyqGy1-kaAAAAAQ.f5NaPNZSceHxlSXnXk_bjA";
        let v = n.value(&json!({"result": {"requestState": st}}));
        assert_eq!(v["result"]["requestState"], "[STATE:1]");
        let w = n.value(&json!({"params": {"requestState": format!("{st}A")}}));
        assert_eq!(w["params"]["requestState"], "[STATE:2]");
        assert_eq!(n.text(&format!("POST | {{\"requestState\":\"{st}\"}}")), "POST | {\"requestState\":\"[STATE]\"}");
    }

    #[test]
    fn tokens_get_their_own_numbers() {
        let mut n = Normalizer::new();
        let v = n.value(&json!({"request_id": "x", "call_tool": {"progress_token": "tok-abc"}}));
        assert_eq!(v["call_tool"]["progress_token"], "[TOKEN:1]");
        let v = n.value(&json!({"request_id": "x", "progress": {"progress_token": "tok-abc"}}));
        assert_eq!(v["progress"]["progress_token"], "[TOKEN:1]");
        assert_eq!(n.token("other"), "[TOKEN:2]");
        assert_eq!(v["request_id"], "[ID:1]");
    }

    #[test]
    fn paths_pids_and_times_are_bracketed() {
        let n = Normalizer::new();
        assert_eq!(n.text("connect /tmp/protomcp-conform-aB3x/protomcp.sock: refused"), "connect [TMP]: refused");
        assert_eq!(
            n.text("processes of the group 4711 survived; pid=12"),
            "processes of the group [PID] survived; pid=[PID]"
        );
        assert_eq!(
            n.text("nothing arrived within 1.5s (took 12ms, 3µs)"),
            "nothing arrived within [ELAPSED] (took [ELAPSED], [ELAPSED])"
        );
        assert_eq!(n.text("hi there 42"), "hi there 42");
        assert_eq!(
            n.text(r#"{"$ref":"http://127.0.0.1:40123/s.json"}"#),
            r#"{"$ref":"http://127.0.0.1:[PORT]/s.json"}"#
        );
    }

    #[test]
    fn keys_are_sorted_and_long_strings_cut() {
        let mut n = Normalizer::new();
        let long = "x".repeat(500);
        let v = n.value(&json!({"b": 1, "a": {"z": long, "c": 2}}));
        let s = serde_json::to_string(&v).unwrap();
        assert!(s.starts_with(r#"{"a":{"c":2,"z":"xxx"#), "{s}");
        assert!(s.contains("…[500 chars]"), "{s}");
    }

    #[test]
    fn rendering_sorts_only_any_order_steps() {
        let from = |rid: &str| Item::Frame {
            dir: Dir::FromTestee,
            tree: Some(json!({"request_id": rid, "call_result": {}})),
            hex: None,
            note: None,
        };
        let to = |rid: &str| Item::Frame {
            dir: Dir::ToTestee,
            tree: Some(json!({"request_id": rid, "call_tool": {"name": "echo"}})),
            hex: None,
            note: None,
        };
        let step = |i: usize, k: &str| Item::Step { index: i, keyword: k.into(), line: i as u32 };
        let run = |first: &str, second: &str| {
            render(&[
                step(1, "send"),
                to("a"),
                step(2, "send"),
                to("b"),
                step(3, "expect_any_order"),
                from(first),
                from(second),
                step(4, "expect"),
                from(second),
                Item::Eof,
            ])
        };
        assert_eq!(run("a", "b").lines().nth(6), run("b", "a").lines().nth(6));
        let t = run("b", "a");
        assert!(t.contains("== step 3: expect_any_order\ntestee→harness {\"call_result\":{},\"request_id\":\"[ID:1]\"}\ntestee→harness {\"call_result\":{},\"request_id\":\"[ID:2]\"}\n"), "{t}");
        assert!(t.ends_with("testee→harness end of file\n"), "{t}");
    }

    #[test]
    fn raw_bytes_are_shown_as_hex() {
        let mut n = Normalizer::new();
        let l =
            n.line(&Item::Frame { dir: Dir::ToTestee, tree: None, hex: Some("00 00 00 02 12 00".into()), note: None });
        assert_eq!(l, "harness→testee raw: 00 00 00 02 12 00");
        let l = n.line(&Item::Malformed { error: "bad".into(), hex: Some(hex(&[0xff; 100])) });
        assert!(l.starts_with("testee→harness malformed: bad raw body: ff ff"), "{l}");
        assert!(l.ends_with("ff …[100 bytes]"), "{l}");
    }
}
