//! The step lines of a captured scenario: the events of one role in order, written as steps
//! with `within` budgets, and the file around them.

use std::fmt::Write as _;

use super::{
    CaptureError, Chan, Duration, ENDED_BY_CAPTURE, Item, Map, StreamAssembler, StreamEvent, T_PROMPT, T_START,
    UNSOLICITED, Value, Vars, WITHIN_MAX, flow_verbatim, json, literal,
};

/// Something the peer under test did.
#[derive(Debug, Clone)]
pub(super) enum Peer {
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
pub(super) enum Action {
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
pub(super) struct Steps {
    lines: Vec<String>,
    budget_ms: u64,
    /// Whether a tool-side / host-side expectation was written yet (the first waits `T_START`).
    tool_waited: bool,
    host_waited: bool,
}

pub(super) fn within(delay: Duration, first: bool) -> u64 {
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
pub(super) enum Ev {
    Act(Action),
    Peer(Peer),
    Comment(String),
}

pub(super) fn arm(tree: &Value) -> Option<&'static str> {
    protomcp_proto::dynamic::arm_of(tree)
}

/// A stream frame of the tool process fed to `streams`: at the final chunk, the pattern of the
/// result it stands for; `None` before.
pub(super) fn stream_result(
    streams: &mut StreamAssembler,
    tree: &Value,
    hex: Option<&str>,
) -> Result<Option<Value>, CaptureError> {
    use protomcp_proto::dynamic;
    let bad = |why: String| CaptureError::Unsupported(format!("a stream frame of the tool process: {why}"));
    let body = match hex {
        Some(h) => dynamic::hex_decode(&h.replace(' ', "")).map_err(|e| bad(e.to_string()))?,
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
pub(super) fn ended_by_capture(e: &crate::capture::Recorded) -> Option<Ev> {
    match &e.item {
        Item::Signal { name } if e.chan == Chan::Bridge && name == ENDED_BY_CAPTURE => Some(Ev::Comment(
            "the capture ended the bridge here (--grace, --max-time or a signal): what followed is not replayed".into(),
        )),
        _ => None,
    }
}

pub(super) fn exit_code(status: &str) -> Option<i32> {
    status.strip_prefix("exit status ").and_then(|c| c.trim().parse().ok())
}

/// The header of a scenario file and its steps.
pub(super) fn file(
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
pub(super) fn write_steps(events: &[(Duration, Ev)], vars: &mut Vars) -> Steps {
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

pub(super) fn command(argv: &[String]) -> String {
    argv.join(" ")
}
