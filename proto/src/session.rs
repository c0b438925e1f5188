//! A sans-IO model of a session with a tool process, for generated (property-based) exploration.
//!
//! Two halves:
//!
//! - [`Session`] turns a sequence of state-agnostic [`Op`]s into a [`Plan`]: the Envelopes (or raw
//!   frame bodies) to send and, for every request, the reply the spec requires (rid, arm and, where
//!   the fixture contract fixes it, `is_error` and the text). Ops are interpreted against the
//!   session state (handshake done, calls in flight, progress tokens, cancellations, tool-list
//!   state, streams), so every op sequence is valid and every sub-sequence of it is too: a shrinker
//!   can drop any op. Ops whose preconditions do not hold are dropped (a cancel with nothing to
//!   cancel names an unknown rid instead; a rid reuse with nothing answered yet takes a fresh rid).
//! - [`Checker`] is the oracle: fed with what the harness sent and what the peer sent, it reports
//!   every broken invariant as a [`Finding`] citing the requirement: every request answered exactly
//!   once under its rid with the matching reply arm (TP-CONCUR-01, TP-CALL-01, also after a cancel:
//!   TP-CANCEL-03), no reply to a notification (TP-CANCEL-02, TP-FRAME-05/06), progress only for
//!   calls with a token and before their result (TP-PROGRESS-02/03), never a task message in place
//!   of a result (TP-TASK-02). That the peer never crashes or hangs and stays responsive after any
//!   input (TP-SECURITY-01/02, TP-CALL-11) is what the [`Step::Alive`] steps check.
//!
//! What the model deliberately does not generate, because the spec allows either answer and a
//! scenario could not judge it deterministically: requests with an empty rid (TP-CALL-21,
//! TP-HANDSHAKE-16), a rid reused while its call is still in flight (TP-CONCUR-06 accepts one or two
//! results), ReloadRequest (its burst is optional in parts), reserved task requests (TP-TASK-01: MAY
//! ignore) and tools that send reverse requests (`narrow`, `ask`, `roots`).

use std::collections::{BTreeMap, BTreeSet};

use crate::envelopes::{self as env, Arm, EnvelopeExt, RawBody};
use crate::pb::{self, Envelope};

/// A tool of the fixture contract (Appendix B.1), or one that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    Echo,
    Add,
    Fail,
    FailSoft,
    Slow,
    Big,
    Toggle,
    Secret,
    Structured,
    Logit,
    StreamBig,
    /// A name no testee registers.
    Unknown,
}

impl Tool {
    pub const ALL: &'static [Tool] = &[
        Tool::Echo,
        Tool::Add,
        Tool::Fail,
        Tool::FailSoft,
        Tool::Slow,
        Tool::Big,
        Tool::Toggle,
        Tool::Secret,
        Tool::Structured,
        Tool::Logit,
        Tool::StreamBig,
        Tool::Unknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Echo => "echo",
            Tool::Add => "add",
            Tool::Fail => "fail",
            Tool::FailSoft => "fail_soft",
            Tool::Slow => "slow",
            Tool::Big => "big",
            Tool::Toggle => "toggle",
            Tool::Secret => "secret",
            Tool::Structured => "structured",
            Tool::Logit => "logit",
            Tool::StreamBig => "stream_big",
            Tool::Unknown => "no_such_tool",
        }
    }

    /// The feature (spec §1.3) a testee must claim to register the tool.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Tool::Secret => Some("hidden"),
            Tool::Structured => Some("structured"),
            Tool::Logit => Some("log"),
            Tool::StreamBig => Some("stream"),
            _ => None,
        }
    }
}

/// How the arguments of a call look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Args {
    /// What the tool's schema asks for.
    Valid,
    /// `""` (read as `{}`).
    Empty,
    /// Not JSON at all (TP-CALL-09).
    InvalidJson,
    /// JSON that is not an object (TP-CALL-10).
    NotObject,
    /// A required member left out (TP-CALL-12).
    MissingMember,
    /// A required member of the wrong primitive type (TP-CALL-12).
    WrongType,
    /// Valid plus a member the schema does not name.
    ExtraMember,
    /// Valid, with a string of 70,000 characters where the tool takes text (echo's result then
    /// goes to the sideband, TP-SIDEBAND-08).
    Huge,
}

impl Args {
    pub const ALL: &'static [Args] = &[
        Args::Valid,
        Args::Empty,
        Args::InvalidJson,
        Args::NotObject,
        Args::MissingMember,
        Args::WrongType,
        Args::ExtraMember,
        Args::Huge,
    ];
}

/// The rid of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RidKind {
    /// `c<n>`.
    Plain,
    /// 1,100 characters (TP-CONCUR-05: at least 1 KiB echoed exactly).
    Long,
    /// Non-ASCII (TP-CONCUR-05).
    Unicode,
    /// With control characters and spaces.
    Control,
    /// The rid of a request answered earlier (picked modulo their number): a duplicate rid that
    /// the spec requires to be served like a fresh one. With nothing answered yet, a plain rid.
    Reuse(u8),
}

/// Requests other than calls, each with its reply arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Request {
    ListTools,
    ListResources,
    ListTemplates,
    /// `fixture://static` when true, an unknown URI otherwise.
    ReadResource(bool),
    ListPrompts,
    /// `greet` with a valid `name` when true, with no arguments otherwise.
    GetPrompt(bool),
    /// Completes `greet`'s `name` from a prefix (`""`, `b`, `z`).
    Complete(u8),
}

impl Request {
    pub const ALL: &'static [Request] = &[
        Request::ListTools,
        Request::ListResources,
        Request::ListTemplates,
        Request::ReadResource(true),
        Request::ReadResource(false),
        Request::ListPrompts,
        Request::GetPrompt(true),
        Request::GetPrompt(false),
        Request::Complete(0),
        Request::Complete(1),
        Request::Complete(2),
    ];

    fn feature(self) -> Option<&'static str> {
        match self {
            Request::ListTools => None,
            Request::ListResources | Request::ListTemplates | Request::ReadResource(_) => Some("resources"),
            Request::ListPrompts | Request::GetPrompt(_) => Some("prompts"),
            Request::Complete(_) => Some("completions"),
        }
    }

    fn envelope(self) -> Envelope {
        match self {
            Request::ListTools => env::list_tools(),
            Request::ListResources => env::list_resources(),
            Request::ListTemplates => env::list_resource_templates(),
            Request::ReadResource(true) => env::read_resource("fixture://static"),
            Request::ReadResource(false) => env::read_resource("fixture://nowhere/at/all"),
            Request::ListPrompts => env::list_prompts(),
            Request::GetPrompt(true) => env::get_prompt("greet", r#"{"name":"Ada"}"#),
            Request::GetPrompt(false) => env::get_prompt("greet", "{}"),
            Request::Complete(p) => env::completion("ref/prompt", "greet", "name", ["", "b", "z"][usize::from(p % 3)]),
        }
    }
}

/// Frames no reply may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Noise {
    /// An arm only tool processes send (index into the tool→bridge arms, modulo), its fields
    /// filled from `seed`, with a fresh rid: must not be answered (TP-SECURITY-01).
    WrongDirection { arm: u8, seed: u64 },
    /// A reply to a reverse request the peer never made: ActiveToolsResponse, SamplingResponse,
    /// ListRootsResponse (TP-TOOLLIST-05, TP-SAMPLING-05, TP-ROOTS-02).
    UnsolicitedReply(u8),
    /// An Envelope holding only a field number the schema does not know (TP-FRAME-06).
    UnknownArm(u16),
    /// An Envelope with no arm set (TP-FRAME-06).
    EmptyEnvelope,
    /// A frame with length 0 (TP-FRAME-05).
    ZeroLength,
}

/// Something the harness does to the unknown arm field numbers: kept clear of the Envelope's.
fn unknown_field_number(n: u16) -> u32 {
    let n = 100 + u32::from(n) % 100_000;
    if (14..=63).contains(&n) { n + 64 } else { n }
}

/// What is added to a call besides its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Extra {
    None,
    /// An unknown varint and an unknown length-delimited field appended to the Envelope
    /// (TP-FRAME-07).
    UnknownFields,
    /// `namespace` set (TP-FRAME-08: ignored).
    Namespace,
}

/// One step of a generated session, state-agnostic: [`Session`] interprets it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Call {
        tool: Tool,
        args: Args,
        rid: RidKind,
        progress: bool,
        extra: Extra,
    },
    Request {
        req: Request,
        rid: RidKind,
    },
    /// A CancelRequest naming the `pick`-th call sent so far (modulo; in flight or answered), or
    /// an unknown rid when there is none. `envelope_rid`: also set the Envelope rid (TP-CANCEL-01
    /// says the body decides).
    Cancel {
        pick: u8,
        envelope_rid: bool,
    },
    Noise(Noise),
    /// Wait for every reply owed so far.
    Sync,
    /// Sync, then check the peer still answers an `echo` call (TP-SECURITY-02).
    Alive,
}

/// What to write.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Wire {
    /// One frame holding this Envelope.
    Envelope(Envelope),
    /// One frame holding these body bytes (not decodable as the Envelope they stand for, or
    /// with fields the schema does not know).
    Body(Vec<u8>),
}

/// A reply the spec requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub rid: String,
    pub arm: Arm,
    /// Where the contract fixes it.
    pub is_error: Option<bool>,
    /// The single text element, where the contract fixes it.
    pub text: Option<String>,
    /// The requirement that demands the reply.
    pub requirement: &'static str,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// Write a frame. `why` says what it tests.
    Send { wire: Wire, why: String },
    /// The replies owed, in any order, within `within_ms`; log, progress and tool-list
    /// notifications in between are allowed.
    Await { replies: Vec<Expected>, within_ms: u64 },
    /// Nothing but notifications for the time: no second reply, no reply to a notification.
    Quiet { for_ms: u64 },
    /// The peer answers an `echo` call.
    Alive,
}

/// A generated session: the steps after the standard handshake.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// Features the plan uses (the scenario's `needs`).
    pub needs: BTreeSet<&'static str>,
}

impl Plan {
    /// Number of frames written.
    pub fn sends(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Send { .. })).count()
    }
}

/// Calls at most in flight at once (TP-CONCUR-02 asks for 64).
pub const MAX_IN_FLIGHT: usize = 64;
/// Length of [`RidKind::Long`] rids.
pub const LONG_RID: usize = 1100;
/// Length of the text of [`Args::Huge`].
pub const HUGE_TEXT: usize = 70_000;
/// How long the plan's final quiet period lasts.
pub const QUIET_MS: u64 = 150;

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

/// The reply arm of a request arm (spec §2.3), `None` for arms that get no reply.
pub fn reply_arm(request: Arm) -> Option<Arm> {
    Some(match request {
        Arm::Reload => Arm::ReloadResponse,
        Arm::ListTools => Arm::ToolList,
        Arm::CallTool => Arm::CallResult,
        Arm::MiddlewareIntercept => Arm::MiddlewareInterceptResponse,
        Arm::ListResourcesRequest => Arm::ResourceListResponse,
        Arm::ListResourceTemplatesRequest => Arm::ResourceTemplateListResponse,
        Arm::ReadResourceRequest => Arm::ReadResourceResponse,
        Arm::ListPromptsRequest => Arm::PromptListResponse,
        Arm::GetPromptRequest => Arm::GetPromptResponse,
        Arm::CompletionRequest => Arm::CompletionResponse,
        _ => return None,
    })
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The requirement ID of the spec.
    pub requirement: &'static str,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.requirement, self.message)
    }
}

#[derive(Debug, Clone)]
struct Outstanding {
    reply: Arm,
    token: String,
    requirement: &'static str,
}

/// The invariant oracle, fed with both directions of a session after the handshake.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    outstanding: BTreeMap<String, Outstanding>,
    answered: BTreeSet<String>,
    /// Rids the harness put on frames that are not requests.
    notifications: BTreeSet<String>,
    /// Progress tokens of calls in flight.
    tokens: BTreeSet<String>,
    /// Every progress token the harness sent.
    all_tokens: BTreeSet<String>,
    /// Calls the harness cancelled while they were outstanding.
    cancelled: BTreeSet<String>,
    pub findings: Vec<Finding>,
}

fn short(s: &str) -> String {
    if s.chars().count() > 40 { format!("{:?}…", s.chars().take(40).collect::<String>()) } else { format!("{s:?}") }
}

impl Checker {
    pub fn new() -> Self {
        Checker::default()
    }

    fn find(&mut self, requirement: &'static str, message: String) {
        self.findings.push(Finding { requirement, message });
    }

    /// The harness sent an Envelope with this rid and arm (`None`: no arm, or not decodable as
    /// an Envelope); `progress_token` of a call.
    pub fn sent(&mut self, rid: &str, arm: Option<Arm>, progress_token: &str) {
        let reply = arm.and_then(reply_arm);
        match reply {
            Some(reply) if !rid.is_empty() => {
                let requirement = if arm == Some(Arm::CallTool) { "TP-CALL-01" } else { "TP-CONCUR-01" };
                self.answered.remove(rid);
                self.outstanding
                    .insert(rid.to_owned(), Outstanding { reply, token: progress_token.to_owned(), requirement });
                if !progress_token.is_empty() {
                    self.tokens.insert(progress_token.to_owned());
                    self.all_tokens.insert(progress_token.to_owned());
                }
            }
            _ => {
                if !rid.is_empty() && !self.outstanding.contains_key(rid) {
                    self.notifications.insert(rid.to_owned());
                }
            }
        }
    }

    /// The harness sent a CancelRequest naming `call_rid` (in its body).
    pub fn cancel(&mut self, call_rid: &str) {
        if self.outstanding.contains_key(call_rid) {
            self.cancelled.insert(call_rid.to_owned());
        }
    }

    /// The peer sent a frame (a sideband transfer or a stream counts as its call result).
    pub fn received(&mut self, rid: &str, arm: Option<Arm>, progress_token: &str) {
        let Some(arm) = arm else { return };
        if arm == Arm::Progress {
            if !self.tokens.contains(progress_token) {
                let (req, why) = if self.all_tokens.contains(progress_token) {
                    ("TP-PROGRESS-03", "after its call's result")
                } else {
                    ("TP-PROGRESS-02", "for a token no call in flight carries")
                };
                self.find(req, format!("a ProgressNotification {} {why}", short(progress_token)));
            }
            return;
        }
        if matches!(arm, Arm::CreateTask | Arm::TaskStatusResponse) && self.outstanding.contains_key(rid) {
            self.find("TP-TASK-02", format!("{} in place of the result of {}", arm.name(), short(rid)));
            return;
        }
        let is_reply =
            matches!(arm.kind(), crate::envelopes::Kind::Response | crate::envelopes::Kind::ResponseOrNotification);
        if !is_reply || (rid.is_empty() && arm.kind() == crate::envelopes::Kind::ResponseOrNotification) {
            return;
        }
        match self.outstanding.get(rid) {
            Some(o) if o.reply == arm => {
                let o = self.outstanding.remove(rid).expect("present");
                self.tokens.remove(&o.token);
                self.answered.insert(rid.to_owned());
            }
            Some(o) => {
                let msg = format!("{} answered with {}, expected {}", short(rid), arm.name(), o.reply.name());
                self.find("TP-CONCUR-01", msg);
            }
            None if self.answered.contains(rid) => self.find(
                "TP-CONCUR-01",
                format!("a second {} for {}: exactly one reply is allowed", arm.name(), short(rid)),
            ),
            None if self.notifications.contains(rid) => self.find(
                "TP-FRAME-06",
                format!("a {} under {}, the rid of a frame that must not be answered", arm.name(), short(rid)),
            ),
            None => {
                self.find("TP-CONCUR-01", format!("a {} under {}, which no request carried", arm.name(), short(rid)))
            }
        }
    }

    /// Requests still owed a reply.
    pub fn unanswered(&self) -> Vec<Finding> {
        self.outstanding
            .iter()
            .map(|(rid, o)| {
                let (requirement, after) = if self.cancelled.contains(rid) {
                    ("TP-CANCEL-03", " after a cancel")
                } else {
                    (o.requirement, "")
                };
                Finding { requirement, message: format!("{} never got its {}{after}", short(rid), o.reply.name()) }
            })
            .collect()
    }
}

impl Wire {
    /// The Envelope the frame stands for (unknown fields skipped; an undecodable body is an
    /// empty Envelope).
    pub fn envelope(&self) -> Envelope {
        match self {
            Wire::Envelope(e) => e.clone(),
            Wire::Body(b) => prost::Message::decode(b.as_slice()).unwrap_or_default(),
        }
    }
}

fn token_of(e: &Envelope) -> &str {
    match &e.msg {
        Some(pb::envelope::Msg::CallTool(c)) => &c.progress_token,
        Some(pb::envelope::Msg::Progress(p)) => &p.progress_token,
        _ => "",
    }
}

/// Plays `plan` against a simulated conforming peer (every owed reply once, progress before
/// results, nothing for notifications) through a [`Checker`]; with `duplicate = Some(i)` the
/// peer answers the `i`-th reply (modulo) twice. Returns the checker after the end of the
/// session, its unanswered requests added to its findings. For tests and the fuzz target.
pub fn simulate(plan: &Plan, duplicate: Option<usize>) -> Checker {
    let mut c = Checker::new();
    let mut tokens: BTreeMap<String, String> = BTreeMap::new();
    let total: usize =
        plan.steps.iter().map(|s| if let Step::Await { replies, .. } = s { replies.len() } else { 0 }).sum();
    let dup = duplicate.filter(|_| total > 0).map(|i| i % total);
    let mut k = 0usize;
    let mut alive = 0u32;
    for step in &plan.steps {
        match step {
            Step::Send { wire, .. } => {
                let e = wire.envelope();
                if e.arm().and_then(reply_arm).is_some() && !e.request_id.is_empty() {
                    tokens.insert(e.request_id.clone(), token_of(&e).to_owned());
                }
                c.sent(&e.request_id, e.arm(), token_of(&e));
                if let Some(pb::envelope::Msg::Cancel(x)) = &e.msg {
                    c.cancel(&x.request_id);
                }
            }
            Step::Await { replies, .. } => {
                for r in replies.iter().rev() {
                    if let Some(t) = tokens.get(&r.rid).filter(|t| !t.is_empty()) {
                        c.received("", Some(Arm::Progress), t);
                    }
                    c.received(&r.rid, Some(r.arm), "");
                    if dup == Some(k) {
                        c.received(&r.rid, Some(r.arm), "");
                    }
                    k += 1;
                }
            }
            Step::Quiet { .. } => {}
            Step::Alive => {
                alive += 1;
                let rid = format!("alive-{alive}");
                c.sent(&rid, Some(Arm::CallTool), "");
                c.received(&rid, Some(Arm::CallResult), "");
            }
        }
    }
    let left = c.unanswered();
    c.findings.extend(left);
    c
}

#[cfg(feature = "arbitrary")]
mod arb {
    //! `Arbitrary` for [`Op`], for the `session_ops` fuzz target.
    use super::*;
    use arbitrary::{Arbitrary, Result, Unstructured};

    fn pick<T: Copy>(u: &mut Unstructured<'_>, all: &[T]) -> Result<T> {
        Ok(*u.choose(all)?)
    }

    impl<'a> Arbitrary<'a> for RidKind {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            Ok(match u.int_in_range(0u8..=4)? {
                0 => RidKind::Plain,
                1 => RidKind::Long,
                2 => RidKind::Unicode,
                3 => RidKind::Control,
                _ => RidKind::Reuse(u.arbitrary()?),
            })
        }
    }

    impl<'a> Arbitrary<'a> for Op {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            Ok(match u.int_in_range(0u8..=5)? {
                0 => Op::Call {
                    tool: pick(u, Tool::ALL)?,
                    args: pick(u, Args::ALL)?,
                    rid: u.arbitrary()?,
                    progress: u.arbitrary()?,
                    extra: pick(u, &[Extra::None, Extra::UnknownFields, Extra::Namespace])?,
                },
                1 => Op::Request { req: pick(u, Request::ALL)?, rid: u.arbitrary()? },
                2 => Op::Cancel { pick: u.arbitrary()?, envelope_rid: u.arbitrary()? },
                3 => Op::Noise(match u.int_in_range(0u8..=4)? {
                    0 => Noise::WrongDirection { arm: u.arbitrary()?, seed: u.arbitrary()? },
                    1 => Noise::UnsolicitedReply(u.arbitrary()?),
                    2 => Noise::UnknownArm(u.arbitrary()?),
                    3 => Noise::EmptyEnvelope,
                    _ => Noise::ZeroLength,
                }),
                4 => Op::Sync,
                _ => Op::Alive,
            })
        }
    }
}
