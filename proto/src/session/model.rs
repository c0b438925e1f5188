//! The session model: ops interpreted against the session state into a [`Plan`].

use std::collections::BTreeSet;

use super::{
    Args, Expected, Extra, HUGE_TEXT, LONG_RID, MAX_IN_FLIGHT, Noise, Op, Plan, QUIET_MS, RidKind, Step, Tool, Wire,
    reply_arm, unknown_field_number,
};
use crate::envelopes::{self as env, Arm, EnvelopeExt, RawBody};
use crate::pb::{self, Envelope};

/// The session model: interprets ops into a [`Plan`].
#[derive(Debug, Clone)]
pub struct Session {
    features: BTreeSet<String>,
    seq: u64,
    /// Replies owed since the last sync.
    pending: Vec<Expected>,
    /// Extra time the pending replies may need (slow calls).
    pending_ms: u64,
    /// Rids in flight (sent, reply not yet awaited).
    in_flight: BTreeSet<String>,
    /// Rids whose replies were awaited: reusable.
    answered: Vec<String>,
    /// Every call rid sent, for cancels.
    calls: Vec<String>,
    /// Whether `secret` is currently enabled (toggle).
    secret_enabled: bool,
    plan: Plan,
}

impl Session {
    /// A session with a peer that claims `features` (spec §1.3 names); the handshake is done.
    pub fn new<S: AsRef<str>>(features: &[S]) -> Self {
        Session {
            features: features.iter().map(|f| f.as_ref().to_owned()).collect(),
            seq: 0,
            pending: Vec::new(),
            pending_ms: 0,
            in_flight: BTreeSet::new(),
            answered: Vec::new(),
            calls: Vec::new(),
            secret_enabled: false,
            plan: Plan::default(),
        }
    }

    /// Whether `secret` is enabled after the toggles so far (it starts hidden; a hidden tool
    /// stays callable by name, see `calls.hidden-tool-callable`).
    pub fn secret_enabled(&self) -> bool {
        self.secret_enabled
    }

    /// Calls sent and not yet awaited.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn claims(&self, f: Option<&'static str>) -> bool {
        f.is_none_or(|f| self.features.contains(f))
    }

    fn need(&mut self, f: Option<&'static str>) {
        if let Some(f) = f {
            self.plan.needs.insert(f);
        }
    }

    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn rid(&mut self, kind: RidKind) -> String {
        let n = self.next();
        let rid = match kind {
            RidKind::Plain => format!("c{n}"),
            RidKind::Long => {
                let head = format!("long-{n}-");
                let pad = LONG_RID.saturating_sub(head.len());
                format!("{head}{}", "r".repeat(pad))
            }
            RidKind::Unicode => format!("ü-🦀-日本-{n}"),
            RidKind::Control => format!("c\t{n} \u{1}\u{7f}"),
            RidKind::Reuse(i) => {
                let free: Vec<&String> = self.answered.iter().filter(|r| !self.in_flight.contains(*r)).collect();
                match free.len() {
                    0 => format!("c{n}"),
                    len => free[usize::from(i) % len].clone(),
                }
            }
        };
        debug_assert!(!self.in_flight.contains(&rid), "rids are unique among requests in flight");
        rid
    }

    fn send(&mut self, wire: Wire, why: impl Into<String>) {
        self.plan.steps.push(Step::Send { wire, why: why.into() });
    }

    fn owe(&mut self, e: Expected, extra_ms: u64) {
        self.in_flight.insert(e.rid.clone());
        self.pending.push(e);
        self.pending_ms += extra_ms;
    }

    fn sync(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let replies = std::mem::take(&mut self.pending);
        let within_ms = 3000 + std::mem::take(&mut self.pending_ms);
        for r in &replies {
            self.in_flight.remove(&r.rid);
            if !self.answered.contains(&r.rid) {
                self.answered.push(r.rid.clone());
            }
        }
        self.plan.steps.push(Step::Await { replies, within_ms });
    }

    /// Applies one op (see [`Op`] for how preconditions are met).
    pub fn apply(&mut self, op: &Op) {
        if self.in_flight.len() >= MAX_IN_FLIGHT && !matches!(op, Op::Sync | Op::Alive) {
            self.sync();
        }
        match *op {
            Op::Call { tool, args, rid, progress, extra } => self.call(tool, args, rid, progress, extra),
            Op::Request { req, rid } => {
                if !self.claims(req.feature()) {
                    return;
                }
                self.need(req.feature());
                let rid = self.rid(rid);
                let e = req.envelope().with_rid(rid.clone());
                let arm = e.arm().and_then(reply_arm).expect("requests have replies");
                self.send(Wire::Envelope(e), format!("{req:?}"));
                self.owe(Expected { rid, arm, is_error: None, text: None, requirement: "TP-CONCUR-01" }, 0);
            }
            Op::Cancel { pick, envelope_rid } => {
                let target = match self.calls.len() {
                    0 => format!("unknown-{}", self.next()),
                    n => self.calls[usize::from(pick) % n].clone(),
                };
                let mut e = env::cancel(&target);
                if envelope_rid {
                    e = e.with_rid(format!("x{}", self.next()));
                }
                // A cancelled call may end either way (TP-CANCEL-03): only the reply is owed.
                if let Some(e) = self.pending.iter_mut().find(|e| e.rid == target) {
                    e.is_error = None;
                    e.text = None;
                }
                let why = if self.in_flight.contains(&target) {
                    "cancel a call in flight: it still gets exactly one result (TP-CANCEL-03)"
                } else {
                    "cancel naming no call in flight: no reply (TP-CANCEL-02)"
                };
                self.send(Wire::Envelope(e), why);
            }
            Op::Noise(n) => self.noise(n),
            Op::Sync => self.sync(),
            Op::Alive => {
                self.sync();
                self.plan.steps.push(Step::Alive);
            }
        }
    }

    fn call(&mut self, tool: Tool, args: Args, rid: RidKind, progress: bool, extra: Extra) {
        let tool = if self.claims(tool.feature()) { tool } else { Tool::Echo };
        self.need(tool.feature());
        let rid = self.rid(rid);
        let n = self.seq;
        let (arguments, is_error, text, extra_ms) = arguments(tool, args, n, &mut self.secret_enabled);
        let token = if progress { format!("tok-{n}") } else { String::new() };
        let call = env::call_tool_with_progress(tool.name(), &arguments, &token).with_rid(rid.clone());
        self.calls.push(rid.clone());
        let why = format!("call {} with {args:?} arguments", tool.name());
        let wire = match extra {
            Extra::None => Wire::Envelope(call),
            Extra::Namespace => Wire::Envelope(call.with_namespace("ns")),
            Extra::UnknownFields => Wire::Body(RawBody::of(&call).varint(1000, 7).bytes(2047, b"unknown").into_bytes()),
        };
        self.send(wire, why);
        let requirement = match (tool, args) {
            (Tool::Unknown, _) => "TP-CALL-04",
            (_, Args::InvalidJson) => "TP-CALL-09",
            _ => "TP-CALL-01",
        };
        self.owe(Expected { rid, arm: Arm::CallResult, is_error, text, requirement }, extra_ms);
    }

    fn noise(&mut self, n: Noise) {
        match n {
            Noise::WrongDirection { arm, seed } => {
                let arms: Vec<Arm> = Arm::ALL
                    .iter()
                    .copied()
                    .filter(|a| a.direction() == crate::envelopes::Direction::ToolToBridge)
                    .collect();
                let a = arms[usize::from(arm) % arms.len()];
                let mut s = seed;
                let mut next = move || {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    s >> 11
                };
                let rid = format!("w{}", self.next());
                let e = env::synthesize(a, &mut next).with_rid(rid);
                self.send(Wire::Envelope(e), format!("{} sent to a tool process: ignored", a.name()));
            }
            Noise::UnsolicitedReply(i) => {
                let rid = format!("u{}", self.next());
                let e = match i % 3 {
                    0 => env::active_tools(["echo"]),
                    1 => pb::SamplingResponse { role: "assistant".into(), ..Default::default() }.into(),
                    _ => env::list_roots_response([("file:///tmp", "tmp")]),
                };
                let a = e.arm().expect("set");
                self.send(Wire::Envelope(e.with_rid(rid)), format!("unsolicited {}: ignored", a.name()));
            }
            Noise::UnknownArm(k) => {
                let body = RawBody::default().bytes(unknown_field_number(k), b"\x0a\x01x").into_bytes();
                self.send(Wire::Body(body), "an unknown arm: ignored (TP-FRAME-06)");
            }
            Noise::EmptyEnvelope => {
                let rid = format!("e{}", self.next());
                self.send(Wire::Envelope(Envelope::default().with_rid(rid)), "no arm set: ignored (TP-FRAME-06)");
            }
            Noise::ZeroLength => self.send(Wire::Body(Vec::new()), "a zero-length frame: ignored (TP-FRAME-05)"),
        }
    }

    /// The plan so far, closed: every owed reply awaited, a quiet period, and an `echo` call.
    pub fn finish(mut self) -> Plan {
        self.sync();
        self.plan.steps.push(Step::Quiet { for_ms: QUIET_MS });
        self.plan.steps.push(Step::Alive);
        self.plan
    }
}

/// The plan of `ops` against a peer claiming `features`.
pub fn plan<S: AsRef<str>>(features: &[S], ops: &[Op]) -> Plan {
    let mut s = Session::new(features);
    for op in ops {
        s.apply(op);
    }
    s.finish()
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// arguments_json of a call, with what the contract fixes about the result: `is_error`, the
/// text, and extra time the call may take.
fn arguments(tool: Tool, args: Args, n: u64, secret: &mut bool) -> (String, Option<bool>, Option<String>, u64) {
    let text = format!("t{n}");
    // (valid arguments, the member to break, its wrong-typed value, the text of the valid result)
    let (valid, member, wrong, result): (String, Option<&str>, &str, Option<String>) = match tool {
        Tool::Echo => (format!(r#"{{"text":{}}}"#, json_string(&text)), Some("text"), "5", Some(text.clone())),
        Tool::Add => (format!(r#"{{"a":{n},"b":-2}}"#), Some("a"), "\"two\"", Some((n as i64 - 2).to_string())),
        Tool::Slow => (format!(r#"{{"steps":{}}}"#, 1 + n % 3), Some("steps"), "true", None),
        Tool::Big => (format!(r#"{{"n":{}}}"#, [0, 10, 70_000][(n % 3) as usize]), Some("n"), "\"x\"", None),
        Tool::StreamBig => (format!(r#"{{"n":{}}}"#, [0, 10, 70_000][(n % 3) as usize]), Some("n"), "[]", None),
        Tool::Toggle => {
            (format!(r#"{{"enable":{}}}"#, n.is_multiple_of(2)), Some("enable"), "\"yes\"", Some("ok".into()))
        }
        Tool::Secret => ("{}".to_owned(), None, "", Some("secret".to_owned())),
        Tool::Logit => ("{}".to_owned(), None, "", Some("logged".to_owned())),
        Tool::Fail | Tool::FailSoft | Tool::Structured | Tool::Unknown => ("{}".to_owned(), None, "", None),
    };
    let slow_ms = if tool == Tool::Slow { 100 * (1 + n % 3) } else { 0 };
    let fixed_error = match tool {
        Tool::Fail | Tool::FailSoft | Tool::Unknown => Some(true),
        _ => None,
    };
    let ok = |text: Option<String>| match fixed_error {
        Some(e) => (Some(e), None),
        None => (Some(false), text),
    };
    let (json, (is_error, text)) = match args {
        Args::Valid => {
            if tool == Tool::Toggle {
                *secret = n.is_multiple_of(2);
            }
            (valid.clone(), ok(result))
        }
        // `""` reads as `{}` (TP-CALL-08, a MUST), so a tool with a required member sees a
        // schema violation, which TP-CALL-12 (a SHOULD) asks to reject: only the reply is owed.
        Args::Empty => match member {
            Some(_) if tool != Tool::Unknown => (String::new(), (fixed_error, None)),
            _ => (String::new(), ok(result)),
        },
        // TP-CALL-09 is a MUST; the unknown tool is an error whatever the arguments.
        Args::InvalidJson => ("{\"text\": nope".to_owned(), (Some(true), None)),
        // TP-CALL-10/12 are SHOULDs: only the reply itself is required.
        Args::NotObject => ("[1,2,3]".to_owned(), (fixed_error, None)),
        Args::MissingMember => match member {
            Some(_) => ("{}".to_owned(), (fixed_error, None)),
            None => ("{}".to_owned(), ok(result)),
        },
        Args::WrongType => match member {
            Some(m) => (format!(r#"{{"{m}":{wrong}}}"#), (fixed_error, None)),
            None => ("{}".to_owned(), ok(result)),
        },
        Args::ExtraMember => {
            let with = if valid == "{}" {
                r#"{"zz_extra":[1,{"k":null}]}"#.to_owned()
            } else {
                format!(r#"{},"zz_extra":[1,{{"k":null}}]}}"#, &valid[..valid.len() - 1])
            };
            (with, ok(result))
        }
        Args::Huge => match tool {
            Tool::Echo => {
                let big: String = "h".repeat(HUGE_TEXT);
                (format!(r#"{{"text":"{big}"}}"#), (Some(false), None))
            }
            _ => (valid.clone(), (fixed_error, None)),
        },
    };
    // Toggling flips the tool list; the model only records the state (secret stays callable,
    // see calls.hidden-tool-callable).
    (json, is_error, text, slow_ms)
}
