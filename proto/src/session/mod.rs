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

use std::collections::BTreeSet;

use crate::envelopes::{self as env, Arm};
use crate::fixture::FixtureTool;
use crate::pb::Envelope;

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

    /// The fixture tool it is (`None` for [`Tool::Unknown`]).
    pub fn fixture(self) -> Option<FixtureTool> {
        Some(match self {
            Tool::Echo => FixtureTool::Echo,
            Tool::Add => FixtureTool::Add,
            Tool::Fail => FixtureTool::Fail,
            Tool::FailSoft => FixtureTool::FailSoft,
            Tool::Slow => FixtureTool::Slow,
            Tool::Big => FixtureTool::Big,
            Tool::Toggle => FixtureTool::Toggle,
            Tool::Secret => FixtureTool::Secret,
            Tool::Structured => FixtureTool::Structured,
            Tool::Logit => FixtureTool::Logit,
            Tool::StreamBig => FixtureTool::StreamBig,
            Tool::Unknown => return None,
        })
    }

    pub fn name(self) -> &'static str {
        self.fixture().map_or("no_such_tool", FixtureTool::name)
    }

    /// The feature (spec §1.3) a testee must claim to register the tool.
    pub fn feature(self) -> Option<&'static str> {
        self.fixture().and_then(FixtureTool::feature)
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

#[cfg(feature = "arbitrary")]
mod arb;
mod check;
mod model;

pub use check::{Checker, Finding, simulate};
pub use model::{Session, plan};
