//! A captured [`Recording`] as scenario files (sans-IO): one where the harness plays the bridge
//! against the tool process ([`tool_process`]), one where it plays the host and the tool process
//! against the bridge ([`bridge`]).
//!
//! What the side the harness plays sent becomes sends (`send`, `send_frame`, `send_raw`,
//! `host_send`); what the side under test sent becomes patterns (`expect`, `expect_any_order`,
//! `host_expect`). The parts that differ from run to run:
//!
//! - **ids**: request ids (`request_id`, `envelope_rid`), progress tokens (`progress_token`,
//!   `progressToken`) and JSON-RPC ids (`id`, `params.requestId`). A value the harness's side sent
//!   first stays literal (the harness chooses it again); a value the peer chose is captured where
//!   it first appears (`{capture: rid_1}`) and written as `${rid_1}` after that, in sends and in
//!   patterns;
//! - **paths** of this capture (its temp dir, the sockets) and **date-times** inside strings the
//!   peer sent become a regex that takes any text (any date-time) there;
//! - **times**: every wait is `within_ms` of three times the delay seen plus a second (at least
//!   `T_PROMPT`, the first on each channel at least `T_START`); pauses of the side the harness
//!   plays are not replayed.
//!
//! Peer items with no send of the harness's side between them are one group: the tool side's as
//! one `expect_any_order` (their order is the peer's choice), the host side's as `host_expect`s
//! in order. Literal strings have `$` doubled ([`escape`]); the YAML is written with the writer of
//! [`crate::explore::yaml_out`].

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{Map, Value, json};

use protomcp_proto::Party;
use protomcp_proto::sideband::{StreamAssembler, StreamEvent, StreamLimits};

use super::{CaptureError, Chan, Recording, TOOL_PLACEHOLDER};
use crate::explore::yaml_out::{escape, flow_verbatim};
use crate::scenario::pattern::KEYWORDS;
use crate::transcript::{Dir, Item};

/// `T_PROMPT` and `T_START` of the spec ([`protomcp_proto::spec`]), in ms.
const T_PROMPT: u64 = protomcp_proto::spec::T_PROMPT.as_millis() as u64;
const T_START: u64 = protomcp_proto::spec::T_START.as_millis() as u64;
/// The longest wait written for one step.
const WITHIN_MAX: u64 = 120_000;
/// The note of a RawHeader frame and of the payload item after it (as the relay records them).
pub const SIDEBAND_HEADER: &str = "sideband header";
pub const SIDEBAND_PAYLOAD: &str = "sideband payload";
/// The name of the signal item recorded when the capture itself ends the bridge (`--grace`,
/// `--max-time`, SIGINT): nothing after it is the peers' own doing.
pub const ENDED_BY_CAPTURE: &str = "TERM to the bridge's group: the capture ended it";
/// The host item that stands for the end of the host's stdin.
pub const HOST_EOF: &str = "<end of file>";
/// Notifications a bridge may send when nothing changed (pmcp announces its lists once after
/// start-up, racing with `initialize`): left out of the bridge scenario and ignored by its waits.
pub const UNSOLICITED: &[&str] =
    &["notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed"];

/// A date-time as clocks write it: `2026-11-25T20:07:14.958Z`, `2026-11-25 20:07:14+01:00`.
const DATETIME: &str = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?";

fn datetime() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(DATETIME).expect("date-time pattern"))
}

/// Which value an id position holds; values match only within a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Rid,
    Token,
    JsonId,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Rid => "rid",
            Kind::Token => "token",
            Kind::JsonId => "id",
        }
    }
}

/// The ids seen so far and who chose them.
#[derive(Debug, Default)]
pub struct Vars {
    /// Values the harness's side sent first: literal wherever they come back.
    ours: HashSet<(Kind, String)>,
    /// Values the peer chose: their capture names.
    names: HashMap<(Kind, String), String>,
    counts: HashMap<Kind, usize>,
    /// Names captured by the step being written: not placeholders before the next step.
    fresh: HashSet<String>,
    /// Paths of the capture (longest first).
    paths: Vec<String>,
}

fn key(kind: Kind, v: &Value) -> Option<(Kind, String)> {
    match v {
        Value::String(s) if !s.is_empty() => Some((kind, format!("s:{s}"))),
        Value::Number(n) => Some((kind, format!("n:{n}"))),
        _ => None,
    }
}

fn literal(v: &Value) -> Value {
    let mut v = v.clone();
    escape(&mut v);
    v
}

fn placeholder(name: &str) -> Value {
    Value::String(format!("${{{name}}}"))
}

impl Vars {
    pub fn new(paths: &[String]) -> Vars {
        let mut paths: Vec<String> = paths.iter().filter(|p| p.len() > 1).cloned().collect();
        paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
        Vars { paths, ..Vars::default() }
    }

    /// The step being written is done: what it captured may be used from now on.
    pub fn end_step(&mut self) {
        self.fresh.clear();
    }

    /// An id the harness's side sends.
    fn send_id(&mut self, kind: Kind, v: &Value) -> Value {
        let Some(k) = key(kind, v) else { return literal(v) };
        match self.names.get(&k) {
            Some(name) if !self.fresh.contains(name) => placeholder(name),
            _ => {
                self.ours.insert(k);
                literal(v)
            }
        }
    }

    /// An id the peer sent, as a pattern.
    fn expect_id(&mut self, kind: Kind, v: &Value) -> Value {
        let Some(k) = key(kind, v) else { return literal(v) };
        if let Some(name) = self.names.get(&k) {
            return if self.fresh.contains(name) { json!({"capture": name}) } else { placeholder(name) };
        }
        if self.ours.contains(&k) {
            return literal(v);
        }
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let name = format!("{}_{n}", kind.prefix());
        self.names.insert(k, name.clone());
        self.fresh.insert(name.clone());
        json!({"capture": name})
    }

    /// A string the peer sent, as a pattern: literal, or a regex when a path of the capture or a
    /// date-time (ISO 8601, as a clock writes it) is in it: the path takes any text there, the
    /// date-time any date-time.
    fn expect_string(&self, s: &str) -> Value {
        // Spans (start, end, the regex that takes their place), in order, not overlapping.
        let mut spans: Vec<(usize, usize, &str)> = Vec::new();
        for p in &self.paths {
            for (i, _) in s.match_indices(p.as_str()) {
                spans.push((i, i + p.len(), ".*"));
            }
        }
        for m in datetime().find_iter(s) {
            spans.push((m.start(), m.end(), DATETIME));
        }
        if spans.is_empty() {
            return literal(&Value::String(s.into()));
        }
        spans.sort_by_key(|&(a, b, _)| (a, std::cmp::Reverse(b)));
        let mut re = String::from("^");
        let mut at = 0;
        for (a, b, r) in spans {
            if a < at {
                continue;
            }
            re.push_str(&regex::escape(&s[at..a]));
            re.push_str(r);
            at = b;
        }
        re.push_str(&regex::escape(&s[at..]));
        re.push('$');
        json!({"regex": re.replace('$', "$$")})
    }

    /// Free JSON the peer sent, as a pattern: strings as [`Vars::expect_string`], a mapping whose
    /// keys would all read as matchers under `equals`.
    fn expect_free(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => self.expect_string(s),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.expect_free(x)).collect()),
            Value::Object(o) => {
                let inner: Map<String, Value> = o.iter().map(|(k, x)| (k.clone(), self.expect_free(x))).collect();
                if !o.is_empty() && o.keys().all(|k| KEYWORDS.contains(&k.as_str())) {
                    json!({"equals": literal(v)})
                } else {
                    Value::Object(inner)
                }
            }
            other => other.clone(),
        }
    }

    /// An Envelope tree the harness's side sends.
    pub fn send_envelope(&mut self, v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut out = Map::new();
                for (k, x) in o {
                    let y = match (k.as_str(), x) {
                        ("request_id" | "envelope_rid", Value::String(_)) => self.send_id(Kind::Rid, x),
                        ("progress_token", Value::String(_)) => self.send_id(Kind::Token, x),
                        (k, _) if k.ends_with("_json") => literal(x),
                        _ => self.send_envelope(x),
                    };
                    out.insert(k.clone(), y);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.send_envelope(x)).collect()),
            other => literal(other),
        }
    }

    /// An Envelope tree the peer sent, as a pattern. `*_json` fields holding a JSON object or
    /// list are written as structures (compared as parsed JSON), other JSON as its text.
    pub fn expect_envelope(&mut self, v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut out = Map::new();
                for (k, x) in o {
                    let y = match (k.as_str(), x) {
                        ("request_id" | "envelope_rid", Value::String(_)) => self.expect_id(Kind::Rid, x),
                        ("progress_token", Value::String(_)) => self.expect_id(Kind::Token, x),
                        // How the peer ordered its fields is no part of what is expected.
                        (protomcp_proto::dynamic::FIELD_ORDER, _) => continue,
                        (k, Value::String(s)) if k.ends_with("_json") => match serde_json::from_str::<Value>(s) {
                            Ok(j @ (Value::Object(_) | Value::Array(_))) => self.expect_free(&j),
                            _ => literal(x),
                        },
                        _ => self.expect_envelope(x),
                    };
                    out.insert(k.clone(), y);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.expect_envelope(x)).collect()),
            Value::String(s) => self.expect_string(s),
            other => other.clone(),
        }
    }

    /// A JSON-RPC message: its ids through `id` (sends) or the pattern rules (expects).
    fn message(&mut self, m: &Value, send: bool) -> Value {
        let Value::Object(o) = m else { return if send { literal(m) } else { self.expect_free(m) } };
        let id = |vars: &mut Vars, kind: Kind, x: &Value| {
            if send { vars.send_id(kind, x) } else { vars.expect_id(kind, x) }
        };
        let mut out = Map::new();
        for (k, x) in o {
            let y = match (k.as_str(), x) {
                ("id", _) => id(self, Kind::JsonId, x),
                ("params", Value::Object(p)) => {
                    let mut po = Map::new();
                    for (pk, px) in p {
                        let py = match (pk.as_str(), px) {
                            ("progressToken", _) => id(self, Kind::Token, px),
                            ("requestId", _) => id(self, Kind::JsonId, px),
                            ("_meta", Value::Object(meta)) => {
                                let mut mo = Map::new();
                                for (mk, mx) in meta {
                                    let my = if mk == "progressToken" {
                                        id(self, Kind::Token, mx)
                                    } else if send {
                                        literal(mx)
                                    } else {
                                        self.expect_free(mx)
                                    };
                                    mo.insert(mk.clone(), my);
                                }
                                Value::Object(mo)
                            }
                            _ if send => literal(px),
                            _ => self.expect_free(px),
                        };
                        po.insert(pk.clone(), py);
                    }
                    Value::Object(po)
                }
                _ if send => literal(x),
                _ => self.expect_free(x),
            };
            out.insert(k.clone(), y);
        }
        Value::Object(out)
    }

    /// A JSON-RPC message the host side sends.
    pub fn send_message(&mut self, m: &Value) -> Value {
        self.message(m, true)
    }

    /// A JSON-RPC message the bridge sent, as a pattern.
    pub fn expect_message(&mut self, m: &Value) -> Value {
        self.message(m, false)
    }
}

mod bridge;
mod steps;
mod tool_process;

pub use bridge::{bridge, replay_bridge};
pub use tool_process::tool_process;

#[cfg(test)]
mod tests;
