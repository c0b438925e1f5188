//! A captured [`Session`] as scenario files (sans-IO): one where the harness plays the bridge
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
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Map, Value, json};

use protomcp_proto::Party;
use protomcp_proto::sideband::{StreamAssembler, StreamEvent, StreamLimits};

use super::{CaptureError, Chan, Session, TOOL_PLACEHOLDER};
use crate::explore::yaml_out::{escape, flow_verbatim};
use crate::scenario::pattern::KEYWORDS;
use crate::transcript::{Dir, Item};

/// `T_PROMPT` and `T_START` of the spec, in ms.
const T_PROMPT: u64 = 1000;
const T_START: u64 = 10_000;
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

/// Something the peer under test did.
#[derive(Debug, Clone)]
enum Peer {
    /// A frame on the tool side (the tree as recorded).
    Frame(Value),
    /// A message on the host side.
    Message(Value),
    /// The peer closed the tool-side connection.
    Closed,
    /// The bridge exited with this status.
    Exit(i32),
}

/// Something the harness's side does.
#[derive(Debug, Clone)]
enum Action {
    /// A frame: its tree, or its body as hex when the tree does not give the same bytes.
    Frame {
        tree: Option<Value>,
        hex: Option<String>,
    },
    /// Bytes as they are (a sideband payload).
    Raw(String),
    /// Close the tool-side connection (`mode` write: the harness still reads).
    Close {
        write_only: bool,
    },
    HostSend(Value),
    HostLine(String),
    HostClose,
}

/// The step lines being written and what they add up to.
#[derive(Debug, Default)]
struct Steps {
    lines: Vec<String>,
    budget_ms: u64,
    /// Whether a tool-side / host-side expectation was written yet (the first waits `T_START`).
    tool_waited: bool,
    host_waited: bool,
}

fn within(delay: Duration, first: bool) -> u64 {
    let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    let scaled = ms.saturating_mul(3).saturating_add(1000);
    let rounded = scaled.div_ceil(100) * 100;
    rounded.max(if first { T_START } else { T_PROMPT }).min(WITHIN_MAX)
}

impl Steps {
    fn push(&mut self, line: String, budget: u64) {
        self.lines.push(format!("  - {line}"));
        self.budget_ms += budget;
    }

    fn comment(&mut self, text: &str) {
        self.lines.push(format!("  # {}", text.replace('\n', " ")));
    }

    fn action(&mut self, a: &Action, vars: &mut Vars) {
        match a {
            Action::Frame { hex: Some(h), .. } => {
                self.push(format!("send_frame: {{body_hex: \"{}\"}}", h.replace(' ', "")), 50);
            }
            Action::Frame { tree: Some(t), .. } => {
                let v = vars.send_envelope(t);
                self.push(format!("send: {}", flow_verbatim(&v)), 50);
            }
            Action::Frame { tree: None, hex: None } => self.push("send_frame: {length: 0}".into(), 50),
            Action::Raw(h) => self.push(format!("send_raw: {{hex: \"{}\"}}", h.replace(' ', "")), 50),
            Action::Close { write_only: true } => self.push("close: {mode: write}".into(), 0),
            Action::Close { write_only: false } => self.push("close: {}".into(), 0),
            Action::HostSend(m) => {
                let v = vars.send_message(m);
                self.push(format!("host_send: {}", flow_verbatim(&json!({"message": v}))), 50);
            }
            Action::HostLine(l) => self.push(
                format!("host_send: {}", flow_verbatim(&json!({"line": literal(&Value::String(l.clone()))}))),
                50,
            ),
            Action::HostClose => self.push("host_close: {}".into(), 0),
        }
        vars.end_step();
    }

    /// The peer's items since the harness's last action (`since`), as steps.
    fn peer(&mut self, pending: &[(Duration, Peer)], since: Duration, vars: &mut Vars) {
        let ignore = flow_verbatim(&json!(UNSOLICITED));
        let mut tool_done = false;
        for (i, (at, p)) in pending.iter().enumerate() {
            match p {
                Peer::Frame(_) if tool_done => {}
                Peer::Frame(_) => {
                    tool_done = true;
                    let frames: Vec<(Duration, &Value)> = pending[i..]
                        .iter()
                        .filter_map(|(t, p)| match p {
                            Peer::Frame(v) => Some((*t, v)),
                            _ => None,
                        })
                        .collect();
                    let last = frames.last().map_or(*at, |(t, _)| *t);
                    let w = within(last.saturating_sub(since), !self.tool_waited);
                    self.tool_waited = true;
                    let patterns: Vec<Value> = frames.iter().map(|(_, v)| vars.expect_envelope(v)).collect();
                    if let [one] = patterns.as_slice() {
                        self.push(format!("expect: {}", flow_verbatim(&json!({"within_ms": w, "envelope": one}))), w);
                    } else {
                        let step = json!({"within_ms": w, "envelopes": patterns});
                        self.push(format!("expect_any_order: {}", flow_verbatim(&step)), w);
                    }
                    vars.end_step();
                }
                Peer::Message(m) => {
                    let w = within(at.saturating_sub(since), !self.host_waited);
                    self.host_waited = true;
                    let pattern = vars.expect_message(m);
                    self.push(
                        format!(
                            "host_expect: {{within_ms: {w}, ignore: {ignore}, message: {}}}",
                            flow_verbatim(&pattern)
                        ),
                        w,
                    );
                    vars.end_step();
                }
                Peer::Closed => {
                    let w = within(at.saturating_sub(since), false);
                    self.push(format!("expect_close: {{within_ms: {w}}}"), w);
                }
                Peer::Exit(code) => {
                    let w = within(at.saturating_sub(since), false).max(5000);
                    self.push(format!("expect_exit: {{within_ms: {w}, code: {code}}}"), w);
                }
            }
        }
    }
}

/// The events of one role in order: the harness's actions and the peer's items.
enum Ev {
    Act(Action),
    Peer(Peer),
    Comment(String),
}

fn arm(tree: &Value) -> Option<&'static str> {
    protomcp_proto::dynamic::arm_of(tree)
}

/// A stream frame of the tool process fed to `streams`: at the final chunk, the pattern of the
/// result it stands for; `None` before.
fn stream_result(
    streams: &mut StreamAssembler,
    tree: &Value,
    hex: Option<&str>,
) -> Result<Option<Value>, CaptureError> {
    use protomcp_proto::dynamic;
    let bad = |why: String| CaptureError::Unsupported(format!("a stream frame of the tool process: {why}"));
    let body = match hex {
        Some(h) => dynamic::hex_decode(&h.replace(' ', "")).map_err(bad)?,
        None => dynamic::encode(tree).map_err(|e| bad(e.to_string()))?,
    };
    let envelope =
        <protomcp_proto::Envelope as prost::Message>::decode(body.as_slice()).map_err(|e| bad(e.to_string()))?;
    match streams.handle(&envelope) {
        None | Some(StreamEvent::Progress { .. }) => Ok(None),
        Some(ev @ StreamEvent::Complete { .. }) => {
            let v = crate::scenario::normalize::stream_value(&ev).unwrap_or_default();
            let mut p = Map::new();
            for k in ["request_id", "call_result"] {
                if let Some(x) = v.get(k) {
                    p.insert(k.into(), x.clone());
                }
            }
            Ok(Some(Value::Object(p)))
        }
        Some(StreamEvent::Failed { rid, error, .. }) => Err(bad(format!("the stream of rid {rid:?} failed: {error}"))),
        Some(StreamEvent::Orphan { violation, .. }) => Err(bad(violation.to_string())),
    }
}

/// At the item that says the capture ended the bridge: the comment that ends the steps.
fn ended_by_capture(e: &super::Event) -> Option<Ev> {
    match &e.item {
        Item::Signal { name } if e.chan == Chan::Bridge && name == ENDED_BY_CAPTURE => Some(Ev::Comment(
            "the capture ended the bridge here (--grace, --max-time or a signal): what followed is not replayed".into(),
        )),
        _ => None,
    }
}

fn exit_code(status: &str) -> Option<i32> {
    status.strip_prefix("exit status ").and_then(|c| c.trim().parse().ok())
}

/// The header of a scenario file and its steps.
fn file(
    id: &str,
    title: &str,
    requirements: &[&str],
    role: &str,
    extra: &[String],
    notes: &str,
    steps: &Steps,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Written by `protomcp-conform capture` (docs/capture.md). Edit freely.");
    let _ = writeln!(out, "id: {id}");
    let _ = writeln!(out, "title: {}", flow_verbatim(&literal(&Value::String(title.into()))));
    let _ = writeln!(out, "requirements: [{}]", requirements.join(", "));
    let _ = writeln!(out, "level: MUST");
    let _ = writeln!(out, "role: {role}");
    for e in extra {
        let _ = writeln!(out, "{e}");
    }
    let _ = writeln!(out, "notes: {}", flow_verbatim(&literal(&Value::String(notes.into()))));
    let _ = writeln!(out, "timeout_ms: {}", 20_000 + steps.budget_ms);
    let _ = writeln!(out, "steps:");
    for l in &steps.lines {
        let _ = writeln!(out, "{l}");
    }
    out
}

/// Runs the events through [`Steps`]: peer items wait in a group until the next action.
fn write_steps(events: &[(Duration, Ev)], vars: &mut Vars) -> Steps {
    let mut steps = Steps::default();
    let mut pending: Vec<(Duration, Peer)> = Vec::new();
    let mut since = Duration::ZERO;
    for (at, e) in events {
        match e {
            Ev::Peer(p) => pending.push((*at, p.clone())),
            Ev::Act(a) => {
                steps.peer(&pending, since, vars);
                pending.clear();
                steps.action(a, vars);
                since = *at;
            }
            Ev::Comment(c) => {
                steps.peer(&pending, since, vars);
                pending.clear();
                steps.comment(c);
            }
        }
    }
    steps.peer(&pending, since, vars);
    steps
}

fn command(argv: &[String]) -> String {
    argv.join(" ")
}

/// The tool-process scenario: the harness plays the bridge against the first tool process's
/// connection.
pub fn tool_process(s: &Session, id: &str) -> Result<String, CaptureError> {
    let conns: Vec<u32> = s
        .events
        .iter()
        .filter_map(|e| match (e.chan, &e.item) {
            (Chan::Tool(n), Item::Connected) => Some(n),
            _ => None,
        })
        .collect();
    let Some(&first) = conns.first() else {
        return Err(CaptureError::Unsupported(
            "no tool process connected during the capture, so there is no tool-process scenario".into(),
        ));
    };
    let mut events: Vec<(Duration, Ev)> = Vec::new();
    let mut frames = 0usize;
    let (mut handshake, mut call) = (false, false);
    let host_eof = s
        .events
        .iter()
        .find(|e| matches!(&e.item, Item::Host { dir: Dir::ToTestee, raw: Some(r), .. } if r == HOST_EOF))
        .map(|e| e.at);
    let (mut bridge_closed, mut tool_closed) = (false, false);
    let mut streams = StreamAssembler::new(Party::ToolProcess, StreamLimits::default());
    for e in s.events.iter().filter(|e| e.chan == Chan::Tool(first) || e.chan == Chan::Bridge) {
        if let Some(c) = ended_by_capture(e) {
            events.push((e.at, c));
            break;
        }
        let ev = match &e.item {
            Item::Frame { dir: Dir::FromTestee, tree, hex, .. } => {
                let a = tree.as_ref().and_then(arm);
                handshake |= a == Some("list_tools");
                call |= a == Some("call_tool");
                frames += 1;
                Ev::Act(Action::Frame { tree: tree.clone(), hex: hex.clone() })
            }
            Item::Frame { dir: Dir::ToTestee, note: Some(n), .. } if n == SIDEBAND_HEADER => continue,
            Item::Frame { dir: Dir::ToTestee, tree: Some(t), note: Some(n), .. } if n == SIDEBAND_PAYLOAD => {
                // The runner turns a sideband transfer into the equivalent result (TP-STREAM-01):
                // expect that, whatever form it takes on replay.
                let mut p = Map::new();
                for k in ["request_id", "call_result"] {
                    if let Some(v) = t.get(k) {
                        p.insert(k.into(), v.clone());
                    }
                }
                frames += 1;
                Ev::Peer(Peer::Frame(Value::Object(p)))
            }
            Item::Frame { dir: Dir::ToTestee, tree: Some(t), hex, .. } => {
                frames += 1;
                if !matches!(arm(t), Some("stream_header" | "stream_chunk")) {
                    Ev::Peer(Peer::Frame(t.clone()))
                } else {
                    // The runner reassembles a stream into the equivalent result (TP-STREAM-01)
                    // and shows the steps no chunk: expect that result at the final chunk.
                    match stream_result(&mut streams, t, hex.as_deref())? {
                        Some(p) => Ev::Peer(Peer::Frame(p)),
                        None => continue,
                    }
                }
            }
            Item::Frame { dir: Dir::ToTestee, tree: None, .. } | Item::Malformed { .. } => {
                return Err(CaptureError::Unsupported(
                    "the tool process sent a frame that does not decode: a replay of it would only show the same error; see the capture file".into(),
                ));
            }
            Item::Eof if tool_closed => continue,
            Item::Eof => {
                bridge_closed = true;
                Ev::Act(Action::Close { write_only: true })
            }
            Item::Shutdown { .. } => {
                tool_closed = true;
                if !bridge_closed && host_eof.is_some_and(|t| e.at >= t) {
                    // The bridge ends its tool process when the host is gone (by a signal,
                    // which the capture does not see): no part of the tool process's behaviour.
                    events.push((
                        e.at,
                        Ev::Comment(
                            "the connection ended here, after the host closed stdin: the bridge ended the tool process"
                                .into(),
                        ),
                    ));
                    break;
                }
                Ev::Peer(Peer::Closed)
            }
            Item::StreamError { error } => Ev::Comment(format!("the connection broke here: {error}")),
            _ => continue,
        };
        events.push((e.at, ev));
    }
    if frames == 0 {
        return Err(CaptureError::Unsupported("the tool process's connection carried no frame".into()));
    }
    let mut vars = Vars::new(&s.paths);
    let steps = write_steps(&events, &mut vars);
    let mut reqs = vec!["TP-CONCUR-01"];
    if handshake {
        reqs.push("TP-HANDSHAKE-02");
    }
    if call {
        reqs.push("TP-CALL-01");
    }
    let more = if conns.len() > 1 {
        format!(" The session had {} tool-process connections; this scenario replays the first.", conns.len())
    } else {
        String::new()
    };
    let notes = format!(
        "Captured from the bridge `{}` with the tool process `{}`. The harness plays the bridge: it sends what the bridge sent and expects what the tool process answered (fields a pattern leaves out are ignored; ids the tool process chose are captured). A failure means the tool process answered differently from the capture; judge it against the cited requirements.{more} Replay: protomcp-conform --testee '{}' --scenarios THIS_FILE",
        command(&s.bridge),
        command(&s.tool),
        command(&s.tool),
    );
    Ok(file(
        &format!("{id}.tool-process"),
        "The tool process answers the captured session as it did when it was captured",
        &reqs,
        "tool-process",
        &[],
        &notes,
        &steps,
    ))
}

/// The bridge command for a replay: `{tool}` becomes the mock.
pub fn replay_bridge(bridge: &[String]) -> Vec<String> {
    bridge.iter().map(|a| a.replace(TOOL_PLACEHOLDER, "{mock}")).collect()
}

/// The bridge scenario: the harness plays the host and the tool process(es) against the bridge.
pub fn bridge(s: &Session, id: &str) -> Result<String, CaptureError> {
    // The end of stdin alone is no session (an HTTP bridge, whose host side is not interposed).
    let host_message = |e: &&super::Event| match &e.item {
        Item::Host { raw: Some(r), .. } => r != HOST_EOF,
        Item::Host { .. } => true,
        _ => false,
    };
    if !s.events.iter().any(|e| e.chan == Chan::Host && host_message(&e)) {
        return Err(CaptureError::Unsupported(
            "nothing crossed the host's stdin or stdout, so there is no bridge scenario".into(),
        ));
    }
    let mut events: Vec<(Duration, Ev)> = Vec::new();
    let mut open: Option<u32> = None;
    let mut bridge_closed: HashSet<u32> = HashSet::new();
    let mut tool_closed: HashSet<u32> = HashSet::new();
    let mut host_closed = false;
    let (mut handshake, mut call, mut manual) = (false, false, false);
    for e in &s.events {
        if let Some(c) = ended_by_capture(e) {
            events.push((e.at, c));
            break;
        }
        if let Chan::Tool(n) = e.chan {
            match (&e.item, open) {
                (Item::Connected, Some(o)) if o != n => {
                    return Err(CaptureError::Unsupported(format!(
                        "tool process connection {n} began while connection {o} was open: a bridge scenario plays one tool process at a time"
                    )));
                }
                (Item::Connected, _) => open = Some(n),
                (_, Some(o)) if o != n => {
                    return Err(CaptureError::Unsupported(format!(
                        "tool process connections {o} and {n} were open at once: a bridge scenario plays one tool process at a time"
                    )));
                }
                _ => {}
            }
        }
        let ev = match (e.chan, &e.item) {
            (Chan::Host, Item::Host { dir: Dir::ToTestee, message: Some(m), .. }) => {
                Ev::Act(Action::HostSend(m.clone()))
            }
            (Chan::Host, Item::Host { dir: Dir::ToTestee, raw: Some(r), .. }) if r == HOST_EOF => {
                host_closed = true;
                Ev::Act(Action::HostClose)
            }
            (Chan::Host, Item::Host { dir: Dir::ToTestee, raw: Some(r), .. }) => Ev::Act(Action::HostLine(r.clone())),
            (Chan::Host, Item::Host { dir: Dir::FromTestee, message: Some(m), .. }) => {
                let method = m.get("method").and_then(Value::as_str);
                if method.is_some_and(|x| UNSOLICITED.contains(&x)) {
                    continue;
                }
                if method == Some("tools/call") || m.pointer("/result/content").is_some() {
                    call = true;
                }
                manual |= method.is_some() && m.get("id").is_some();
                Ev::Peer(Peer::Message(m.clone()))
            }
            (Chan::Host, Item::Host { dir: Dir::FromTestee, raw: Some(r), .. }) => {
                Ev::Comment(format!("the bridge wrote a line that is not JSON here: {r}"))
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::FromTestee, tree: Some(t), .. }) => {
                let a = arm(t);
                handshake |= a == Some("list_tools");
                call |= a == Some("call_tool");
                Ev::Peer(Peer::Frame(t.clone()))
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::FromTestee, tree: None, .. })
            | (Chan::Tool(_), Item::Malformed { .. }) => {
                return Err(CaptureError::Unsupported(
                    "the bridge sent the tool process a frame that does not decode: a replay of it would only show the same error; see the capture file".into(),
                ));
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::ToTestee, hex: Some(h), note: Some(n), .. })
                if n == SIDEBAND_PAYLOAD =>
            {
                Ev::Act(Action::Raw(h.clone()))
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::ToTestee, tree, hex, .. }) => {
                Ev::Act(Action::Frame { tree: tree.clone(), hex: hex.clone() })
            }
            (Chan::Tool(n), Item::Eof) => {
                if tool_closed.contains(&n) {
                    continue;
                }
                bridge_closed.insert(n);
                Ev::Peer(Peer::Closed)
            }
            (Chan::Tool(n), Item::Shutdown { .. }) => {
                open = None;
                tool_closed.insert(n);
                if bridge_closed.contains(&n) {
                    continue;
                }
                // After the host closed stdin the bridge ends its tool process (the mock, on
                // replay): the connection's end is the bridge's doing. Before, the tool process
                // went away by itself: the harness's tool side closes.
                if host_closed { Ev::Peer(Peer::Closed) } else { Ev::Act(Action::Close { write_only: false }) }
            }
            (Chan::Tool(n), Item::StreamError { error }) => {
                open = None;
                Ev::Comment(format!("tool process connection {n} broke here: {error}"))
            }
            (Chan::Bridge, Item::Exit { status }) => match exit_code(status) {
                Some(code) if host_closed || code != 0 => Ev::Peer(Peer::Exit(code)),
                _ => Ev::Comment(format!("the bridge ended here: {status}")),
            },
            _ => continue,
        };
        events.push((e.at, ev));
    }
    let mut vars = Vars::new(&s.paths);
    let steps = write_steps(&events, &mut vars);
    let mut reqs = vec!["BR-MCP-01"];
    if handshake {
        reqs.push("BR-HANDSHAKE-01");
    }
    if call {
        reqs.push("BR-CALL-01");
    }
    let mut extra = vec!["transports: [stdio]".to_owned()];
    if manual {
        extra.push("host_requests: manual".into());
    }
    let notes = format!(
        "Captured from the bridge `{}` with the tool process `{}`. The harness plays the host (what the host sent) and the tool process (what it sent, through the mock), and expects what the bridge sent on either side (fields a pattern leaves out are ignored; ids the bridge chose are captured; list_changed notifications are not judged). A failure means the bridge behaved differently from the capture; judge it against the cited requirements. Replay: protomcp-conform --bridge '{}' --scenarios THIS_FILE",
        command(&s.bridge),
        command(&s.tool),
        command(&replay_bridge(&s.bridge)),
    );
    Ok(file(
        &format!("{id}.bridge"),
        "The bridge carries the captured session as it did when it was captured",
        &reqs,
        "bridge",
        &extra,
        &notes,
        &steps,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Event;
    use std::path::Path;

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn ev(ms: u64, chan: Chan, item: Item) -> Event {
        Event { at: at(ms), chan, item }
    }

    fn frame(dir: Dir, tree: Value) -> Item {
        Item::Frame { dir, tree: Some(tree), hex: None, note: None }
    }

    fn host(dir: Dir, m: Value) -> Item {
        Item::Host { dir, message: Some(m), raw: None }
    }

    /// A pmcp-like session: the bridge picks rids, the host its JSON-RPC ids, the tool process
    /// asks the host for a sample under a rid of its own.
    fn session() -> Session {
        use Dir::{FromTestee as FromBridge, ToTestee as ToBridge};
        let tp = Chan::Tool(1);
        Session {
            bridge: vec!["pmcp".into(), "run".into(), "{tool}".into()],
            tool: vec!["python3".into(), "testee.py".into()],
            paths: vec!["/tmp/protomcp-conform-abc".into()],
            events: vec![
                ev(
                    0,
                    Chan::Host,
                    host(ToBridge, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})),
                ),
                ev(5, tp, Item::Connected),
                ev(6, tp, frame(FromBridge, json!({"request_id": "b-7f3a", "list_tools": {}}))),
                ev(
                    40,
                    tp,
                    frame(ToBridge, json!({"request_id": "b-7f3a", "tool_list": {"tools": [{"name": "echo"}]}})),
                ),
                ev(41, tp, frame(ToBridge, json!({"reload_response": {"success": true}}))),
                ev(
                    50,
                    Chan::Host,
                    host(FromBridge, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
                ),
                ev(
                    60,
                    Chan::Host,
                    host(FromBridge, json!({"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {"name": "x"}}})),
                ),
                ev(
                    100,
                    Chan::Host,
                    host(
                        ToBridge,
                        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a$b"}, "_meta": {"progressToken": "p1"}}}),
                    ),
                ),
                ev(
                    110,
                    tp,
                    frame(
                        FromBridge,
                        json!({"request_id": "b-8e2c", "call_tool": {"name": "echo", "arguments_json": "{\"text\":\"a$b\"}", "progress_token": "b-tok-1"}}),
                    ),
                ),
                ev(120, tp, frame(ToBridge, json!({"request_id": "tp-s1", "sampling_request": {"max_tokens": 5}}))),
                ev(
                    130,
                    Chan::Host,
                    host(
                        FromBridge,
                        json!({"jsonrpc": "2.0", "id": 900, "method": "sampling/createMessage", "params": {"maxTokens": 5}}),
                    ),
                ),
                ev(
                    140,
                    Chan::Host,
                    host(ToBridge, json!({"jsonrpc": "2.0", "id": 900, "result": {"role": "assistant"}})),
                ),
                ev(
                    150,
                    tp,
                    frame(FromBridge, json!({"request_id": "tp-s1", "sampling_response": {"role": "assistant"}})),
                ),
                ev(160, tp, frame(ToBridge, json!({"progress": {"progress_token": "b-tok-1", "progress": 1}}))),
                ev(
                    170,
                    tp,
                    frame(
                        ToBridge,
                        json!({"request_id": "b-8e2c", "call_result": {"result_json": "[{\"type\":\"text\",\"text\":\"/tmp/protomcp-conform-abc/tp-1.sock\"}]"}}),
                    ),
                ),
                ev(
                    180,
                    Chan::Host,
                    host(
                        FromBridge,
                        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p1", "progress": 1}}),
                    ),
                ),
                ev(
                    190,
                    Chan::Host,
                    host(
                        FromBridge,
                        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "ok"}]}}),
                    ),
                ),
                ev(300, Chan::Host, Item::Host { dir: ToBridge, message: None, raw: Some(HOST_EOF.into()) }),
                ev(310, tp, Item::Eof),
                ev(320, tp, Item::Shutdown { how: "end of file".into() }),
                ev(400, Chan::Bridge, Item::Exit { status: "exit status 0".into() }),
            ],
            dropped: 0,
        }
    }

    fn loads(text: &str) {
        crate::scenario::parse_str(Path::new("captured.yaml"), text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }

    #[test]
    fn ids_the_peer_chose_are_captured_once_and_used_as_placeholders_after() {
        let mut v = Vars::new(&[]);
        let p = v.expect_envelope(&json!({"request_id": "x1", "sampling_request": {}}));
        assert_eq!(p["request_id"], json!({"capture": "rid_1"}));
        // The same value in the same step is captured again, not used as a placeholder yet.
        assert_eq!(v.expect_envelope(&json!({"request_id": "x1"}))["request_id"], json!({"capture": "rid_1"}));
        v.end_step();
        assert_eq!(v.send_envelope(&json!({"request_id": "x1"}))["request_id"], json!("${rid_1}"));
        assert_eq!(v.expect_envelope(&json!({"request_id": "x1"}))["request_id"], json!("${rid_1}"));
    }

    #[test]
    fn ids_the_harness_sent_first_stay_literal_and_empty_ids_are_no_ids() {
        let mut v = Vars::new(&[]);
        assert_eq!(v.send_envelope(&json!({"request_id": "c1"}))["request_id"], json!("c1"));
        v.end_step();
        assert_eq!(v.expect_envelope(&json!({"request_id": "c1"}))["request_id"], json!("c1"));
        assert_eq!(v.expect_envelope(&json!({"request_id": ""}))["request_id"], json!(""));
        // JSON-RPC: a numeric id of the host stays a number; the bridge's own is captured.
        assert_eq!(v.send_message(&json!({"id": 3, "method": "ping"}))["id"], json!(3));
        assert_eq!(v.expect_message(&json!({"id": 3, "result": {}}))["id"], json!(3));
        assert_eq!(v.expect_message(&json!({"id": 4, "method": "ping"}))["id"], json!({"capture": "id_1"}));
        v.end_step();
        assert_eq!(v.send_message(&json!({"id": 4, "result": {}}))["id"], json!("${id_1}"));
        // Kinds do not mix: a rid "4" is not the JSON-RPC id 4.
        assert_eq!(v.expect_envelope(&json!({"request_id": "4"}))["request_id"], json!({"capture": "rid_1"}));
    }

    #[test]
    fn literal_dollars_are_doubled_paths_become_regexes_and_matcher_shaped_data_is_quoted() {
        let mut v = Vars::new(&["/tmp/cap-1".into()]);
        assert_eq!(v.send_envelope(&json!({"call_tool": {"name": "a$b"}})), json!({"call_tool": {"name": "a$$b"}}));
        let p = v.expect_envelope(&json!({"log": {"data_json": "{\"path\":\"/tmp/cap-1/tp.sock\",\"regex\":\"x\"}"}}));
        assert_eq!(p["log"]["data_json"]["path"], json!({"regex": "^.*/tp\\.sock$$"}));
        let p = v.expect_envelope(&json!({"call_result": {"result_json": "{\"regex\":\"x\"}"}}));
        assert_eq!(p["call_result"]["result_json"], json!({"equals": {"regex": "x"}}));
        // A date-time takes any date-time; the rest stays literal.
        let p = v.expect_envelope(
            &json!({"log": {"data_json": "{\"msg\":\"at 2026-11-25T20:07:14.958Z in /tmp/cap-1/x\"}"}}),
        );
        let re = p["log"]["data_json"]["msg"]["regex"].as_str().unwrap().replace("$$", "$");
        let re = regex::Regex::new(&re).unwrap();
        assert!(re.is_match("at 2031-01-02T03:04:05Z in /tmp/other/x"), "{re}");
        assert!(!re.is_match("at noon in /tmp/other/x"), "{re}");
        // Keys are no placeholders' places (the loader leaves them alone): kept as they are.
        assert_eq!(v.expect_message(&json!({"result": {"a$b": "x$y"}})), json!({"result": {"a$b": "x$$y"}}));
        assert_eq!(v.send_message(&json!({"params": {"a$b": "x$y"}})), json!({"params": {"a$b": "x$$y"}}));
        // JSON text that is no structure stays text (a string pattern of a *_json field is JSON).
        let p = v.expect_envelope(&json!({"log": {"data_json": "\"hi\""}}));
        assert_eq!(p["log"]["data_json"], json!("\"hi\""));
    }

    #[test]
    fn the_field_order_of_a_peer_frame_is_not_expected_but_the_harness_sends_its_own() {
        let mut v = Vars::new(&[]);
        let t = json!({"request_id": "r", "list_tools": {}, "field_order": ["request_id", "list_tools"]});
        assert_eq!(v.expect_envelope(&t), json!({"request_id": {"capture": "rid_1"}, "list_tools": {}}));
        v.end_step();
        assert_eq!(v.send_envelope(&t)["field_order"], json!(["request_id", "list_tools"]));
    }

    #[test]
    fn waits_are_three_times_the_delay_seen_plus_a_second_within_bounds() {
        assert_eq!(within(at(0), false), T_PROMPT);
        assert_eq!(within(at(10), false), 1100);
        assert_eq!(within(at(10), true), T_START);
        assert_eq!(within(at(1234), false), 4800);
        assert_eq!(within(Duration::from_secs(3600), false), WITHIN_MAX);
    }

    #[test]
    fn the_tool_process_scenario_sends_what_the_bridge_sent_and_expects_what_the_tool_answered() {
        let text = tool_process(&session(), "capture.t").unwrap();
        loads(&text);
        assert!(text.contains("id: capture.t.tool-process\n"), "{text}");
        assert!(text.contains("requirements: [TP-CONCUR-01, TP-HANDSHAKE-02, TP-CALL-01]"), "{text}");
        assert!(text.contains(r#"  - send: {"list_tools":{},"request_id":"b-7f3a"}"#), "{text}");
        // The handshake burst is one group; the first wait is T_START.
        assert!(text.contains(r#"  - expect_any_order: {"envelopes":[{"request_id":"b-7f3a","tool_list""#), "{text}");
        assert!(text.contains(r#""within_ms":10000}"#), "{text}");
        // The tool process's own rid is captured and answered under the placeholder; the
        // bridge's `$` in the arguments is doubled.
        assert!(text.contains(r#"{"request_id":{"capture":"rid_1"},"sampling_request""#), "{text}");
        assert!(text.contains(r#"  - send: {"request_id":"${rid_1}","sampling_response""#), "{text}");
        assert!(text.contains(r#"a$$b"#), "{text}");
        assert!(text.contains(r#"{"regex":"^.*/tp\\-1\\.sock$$"}"#), "{text}");
        // The bridge closed first, then the tool process.
        assert!(text.contains("  - close: {mode: write}\n  - expect_close: {within_ms: 1100}\n"), "{text}");
        assert!(!text.contains("host_"), "{text}");
    }

    #[test]
    fn the_bridge_scenario_plays_host_and_tool_and_captures_what_the_bridge_chose() {
        let text = bridge(&session(), "capture.t").unwrap();
        loads(&text);
        assert!(text.contains("id: capture.t.bridge\nt"), "{text}");
        assert!(text.contains("role: bridge\ntransports: [stdio]\nhost_requests: manual\n"), "{text}");
        assert!(text.contains("requirements: [BR-MCP-01, BR-HANDSHAKE-01, BR-CALL-01]"), "{text}");
        assert!(
            text.contains(
                r#"  - expect: {"envelope":{"list_tools":{},"request_id":{"capture":"rid_1"}},"within_ms":10000}"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"  - send: {"request_id":"${rid_1}","tool_list""#), "{text}");
        // The startup list_changed is not judged.
        assert!(!text.contains(r#""method":"notifications/tools/list_changed""#), "{text}");
        // The bridge's rid and token of the call are captured; the host's token stays literal.
        assert!(text.contains(r#""progress_token":{"capture":"token_1"}"#), "{text}");
        assert!(text.contains(r#""request_id":{"capture":"rid_2"}"#), "{text}");
        assert!(text.contains(r#"  - send: {"progress":{"progress":1,"progress_token":"${token_1}"}}"#), "{text}");
        assert!(text.contains(r#""params":{"progress":1,"progressToken":"p1"}"#), "{text}");
        // The tool process's sampling rid is the harness's own here: literal.
        assert!(text.contains(r#"  - send: {"request_id":"tp-s1","sampling_request""#), "{text}");
        // The bridge's request to the host: its id captured, answered under the placeholder.
        assert!(
            text.contains(r#""id":{"capture":"id_1"},"jsonrpc":"2.0","method":"sampling/createMessage""#),
            "{text}"
        );
        assert!(text.contains(r#"  - host_send: {"message":{"id":"${id_1}""#), "{text}");
        assert!(text.contains("  - host_close: {}\n"), "{text}");
        assert!(
            text.contains("  - expect_close: {within_ms: 1100}\n  - expect_exit: {within_ms: 5000, code: 0}\n"),
            "{text}"
        );
        assert!(text.contains("--bridge 'pmcp run {mock}'"), "{text}");
    }

    #[test]
    fn a_tool_process_the_bridge_ended_after_the_host_left_is_not_expected_to_close_by_itself() {
        // pmcp: on the end of stdin it ends the tool process, whose connection closes first.
        let mut s = session();
        let n = s.events.len();
        s.events.swap(n - 3, n - 2);
        let t = tool_process(&s, "capture.t").unwrap();
        loads(&t);
        assert!(!t.contains("expect_close") && !t.contains("close: {mode: write}"), "{t}");
        assert!(t.contains("# the connection ended here, after the host closed stdin"), "{t}");
        let b = bridge(&s, "capture.t").unwrap();
        loads(&b);
        assert!(b.contains("  - host_close: {}\n  - expect_close: {within_ms: 1100}\n  - expect_exit:"), "{b}");
        // Before the host left, the tool process's going away is the harness's `close`.
        let mut s = session();
        s.events.retain(|e| !matches!(e.item, Item::Eof | Item::Shutdown { .. }));
        s.events.insert(n - 4, ev(295, Chan::Tool(1), Item::Shutdown { how: "x".into() }));
        let b = bridge(&s, "capture.t").unwrap();
        assert!(b.contains("  - close: {}\n  - host_close: {}\n  - expect_exit:"), "{b}");
        let t = tool_process(&s, "capture.t").unwrap();
        assert!(t.contains("  - expect_close: {within_ms: 1500}\n"), "{t}");
    }

    #[test]
    fn a_chunked_stream_is_expected_as_the_result_it_stands_for() {
        let mut s = session();
        let tp = Chan::Tool(1);
        let i = s
            .events
            .iter()
            .position(|e| matches!(&e.item, Item::Frame { tree: Some(t), .. } if t.get("call_result").is_some()))
            .unwrap();
        s.events.splice(
            i..=i,
            [
                ev(165, tp, frame(Dir::ToTestee, json!({"request_id": "b-8e2c", "stream_header": {"field_name": "result_json", "total_size": 4, "chunk_size": 2}}))),
                ev(166, tp, frame(Dir::ToTestee, json!({"request_id": "b-8e2c", "stream_chunk": {"data": {"text": "[{"}}}))),
                ev(170, tp, frame(Dir::ToTestee, json!({"request_id": "b-8e2c", "stream_chunk": {"data": {"text": "}]"}, "final": true}}))),
            ],
        );
        let t = tool_process(&s, "capture.t").unwrap();
        loads(&t);
        assert!(t.contains(r#"{"call_result":{"result_json":[{}]},"request_id":"b-8e2c"}"#), "{t}");
        assert!(!t.contains("stream_chunk"), "{t}");
        // The bridge scenario sends the frames as they were.
        let b = bridge(&s, "capture.t").unwrap();
        loads(&b);
        assert_eq!(b.matches("stream_chunk").count(), 2, "{b}");
    }

    #[test]
    fn what_followed_the_capture_ending_the_bridge_is_not_replayed() {
        let mut s = session();
        let n = s.events.len();
        let signal = ev(305, Chan::Bridge, Item::Signal { name: ENDED_BY_CAPTURE.into() });
        s.events.insert(n - 3, signal);
        for t in [tool_process(&s, "capture.t").unwrap(), bridge(&s, "capture.t").unwrap()] {
            loads(&t);
            assert!(t.ends_with("  # the capture ended the bridge here (--grace, --max-time or a signal): what followed is not replayed\n"), "{t}");
            assert!(!t.contains("expect_close") && !t.contains("expect_exit"), "{t}");
        }
        // A comment comes after the peer's items before it.
        let b = bridge(&s, "capture.t").unwrap();
        assert!(b.contains(r#""text":"ok","type":"text"}]}}}"#), "{b}");
    }

    #[test]
    fn sessions_a_scenario_cannot_replay_are_refused_with_the_reason() {
        let mut s = session();
        s.events.retain(|e| !matches!(e.chan, Chan::Tool(_)));
        let e = tool_process(&s, "capture.t").unwrap_err().to_string();
        assert!(e.contains("no tool process connected"), "{e}");
        let mut s = session();
        s.events
            .retain(|e| e.chan != Chan::Host || matches!(&e.item, Item::Host { raw: Some(r), .. } if r == HOST_EOF));
        assert!(bridge(&s, "capture.t").unwrap_err().to_string().contains("host's stdin or stdout"));
        let mut s = session();
        s.events.insert(3, ev(7, Chan::Tool(2), Item::Connected));
        let e = bridge(&s, "capture.t").unwrap_err().to_string();
        assert!(e.contains("one tool process at a time"), "{e}");
        let mut s = session();
        s.events.insert(
            4,
            ev(30, Chan::Tool(1), frame(Dir::ToTestee, json!({"request_id": "zz", "stream_chunk": {"final": true}}))),
        );
        let e = tool_process(&s, "capture.t").unwrap_err().to_string();
        assert!(e.contains("a stream frame of the tool process") && e.contains("without a StreamHeader"), "{e}");
    }
}
