//! The reference bridge's protocol core, sans-IO (in the manner of quinn-proto): every decision
//! the bridge takes between its MCP hosts and its tool process, driven by the I/O shell
//! (`bridge/src/`) and, in tests, by plain sequences of operations.
//!
//! The shell feeds it what happened and passes the time in:
//! - host operations: [`Core::start_call`], [`Core::start_read`], [`Core::start_prompt`],
//!   [`Core::start_complete`], [`Core::cancel`]; sessions by [`Core::add_session`];
//! - the tool process: [`Core::handle_connected`], [`Core::handle_envelope`],
//!   [`Core::handle_sideband`], [`Core::handle_closed`], [`Core::handle_send_failed`];
//! - the host's answers to reverse requests: [`Core::handle_sample_answer`],
//!   [`Core::handle_roots_answer`];
//! - time: [`Core::handle_timeout`] at (or after) [`Core::poll_timeout`];
//! - the life of the tool process: [`Core::begin_restart`], [`Core::begin_reload`],
//!   [`Core::give_up`];
//!
//! and takes what to do: [`Core::poll_transmit`] (Envelopes for the tool process, in order) and
//! [`Core::poll_event`] (answers to host operations, notifications for the sessions, reverse
//! requests to ask a host, the connection served or failed, diagnostics).
//!
//! - [`tools`]: the registered tools and the active set (§10);
//! - [`shapes`]: the MCP shapes built from Envelopes (§22.1);
//! - `ops`: the host operations (tools/call with its middleware chain, resources/read,
//!   prompts/get, completion/complete);
//! - `incoming`: what the tool process sends, dispatched by message type, then by rid;
//! - `handshake`: discovery, the burst, the list pulls, installing a connection, reload by
//!   ReloadRequest;
//! - `reverse`: sampling and roots routed to the calling session.

pub mod shapes;
pub mod tools;

mod handshake;
mod incoming;
pub mod mrtr;
mod ops;
mod reverse;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::envelopes::EnvelopeExt;
use crate::fault::{self, Fault};
use crate::jsonrpc::ErrorCode;
use crate::pb::{self, Envelope, envelope::Msg};
use crate::sideband::{StreamAssembler, StreamLimits};
use crate::spec::{DEFAULT_CALL_TIMEOUT, HANDSHAKE_QUIET};
use crate::violation::Party;

pub use mrtr::{ModernCall, ModernCaps, StateKey};
pub use reverse::{MessagesNotArray, NoAnswer};
pub use tools::{Invalid, ListMode, Rejected, ToolOp, ToolSet};

/// Identity of a host session (the shell's numbering).
pub type SessionId = u64;

/// One host operation in flight ([`Core::start_call`] and its siblings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// Whose an input request of the tool process is (BR-SAMPLING-09): a legacy session with a call
/// in flight, or a modern call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Session(SessionId),
    Call(OpId),
}

/// Which list changed (for `notifications/*/list_changed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// What the core needs to know of the bridge's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `CALL_TIMEOUT`: bounds every wait for the tool process and for a host's reverse answer.
    pub call_timeout: Duration,
    /// `HANDSHAKE_QUIET` (§1.5).
    pub handshake_quiet: Duration,
    /// The key of the `requestState`s (spec §26.4): the shell draws it at random when the bridge
    /// starts. `T_MRTR` is `call_timeout`.
    pub state_key: StateKey,
}

impl Default for Config {
    /// A fixed state key: for tests only (the shell draws a random one).
    fn default() -> Self {
        Config {
            call_timeout: DEFAULT_CALL_TIMEOUT,
            handshake_quiet: HANDSHAKE_QUIET,
            state_key: StateKey::new([0x5a; 32]),
        }
    }
}

/// An error answer towards a host, with the JSON-RPC code it maps to (§22.2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// -32602
    #[error("{0}")]
    InvalidParams(String),
    /// -32002
    #[error("{0}")]
    ResourceNotFound(String),
    /// -32603
    #[error("{0}")]
    Internal(String),
    /// The host cancelled the request: it gets no response (BR-CANCEL-02).
    #[error("cancelled")]
    Cancelled,
}

impl HostError {
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::InvalidParams(_) => ErrorCode::INVALID_PARAMS,
            HostError::ResourceNotFound(_) => ErrorCode::RESOURCE_NOT_FOUND,
            HostError::Internal(_) if crate::fault::on(crate::fault::Fault::BrMcpInternalCodeZero) => ErrorCode(0),
            // br.stateless.missing-capability-32021: MissingRequiredClientCapability.
            HostError::Internal(m)
                if crate::fault::on(crate::fault::Fault::BrStatelessMissingCapability32021)
                    && m.contains("did not declare") =>
            {
                ErrorCode(-32021)
            }
            HostError::Internal(_) | HostError::Cancelled => ErrorCode::INTERNAL_ERROR,
        }
    }
}

/// What a session's client declared (initialize's capabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionCaps {
    pub sampling: bool,
    pub roots: bool,
    /// An initialized legacy session (a stream that only sent modern requests is not one).
    pub legacy: bool,
}

/// What the shell must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The answer to a host operation; the last event of that operation.
    Answer { op: OpId, session: SessionId, result: Result<Value, HostError> },
    /// `notifications/progress` for `session`.
    Progress { session: SessionId, token: Value, progress: i64, total: Option<i64>, message: Option<String> },
    /// `notifications/message` for every legacy session (each applies its own threshold), and
    /// for `call`'s session when the single call owner is a modern call attached to a request of
    /// that session whose logLevel admits it (BR-LOG-08; the session finds the request).
    Log { level: &'static str, logger: Option<String>, data: Value, call: Option<SessionId> },
    /// `notifications/*/list_changed` for every session.
    ListChanged(ListKind),
    /// `notifications/resources/updated` for the sessions that subscribed to the URI.
    ResourceUpdated(String),
    /// Ask `session` `sampling/createMessage` with these params; answer with
    /// [`Core::handle_sample_answer`] under `rid`.
    Sample { session: SessionId, rid: String, params: Value },
    /// Ask `session` `roots/list`; answer with [`Core::handle_roots_answer`] under `rid`.
    ListRoots { session: SessionId, rid: String },
    /// The connection `generation` serves (after its handshake or a reload by ReloadRequest).
    Served { generation: u64 },
    /// The start of `generation` failed: the shell ends its connection and process.
    StartFailed { generation: u64, reason: String },
    /// A reload by ReloadRequest failed; the previous lists and registrations stay (BR-RELOAD-03).
    ReloadFailed { reason: String },
    /// A line for the bridge's stderr.
    Diag(String),
}

/// Whether the bridge can serve calls now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Starting,
    Ready,
    Down(String),
}

/// The lists pulled at the end of a handshake (§5 step 7).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lists {
    pub resources: Vec<pb::ResourceDefinition>,
    pub templates: Vec<pb::ResourceTemplateDefinition>,
    pub prompts: Vec<pb::PromptDefinition>,
}

/// A request of ours to the tool process waiting for its answer.
#[derive(Debug)]
struct Pending {
    what: Waiting,
    deadline: Instant,
    /// The call is parked (spec §26.4): its deadline does not run (BR-STATELESS-28).
    parked: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    Discovery,
    Pull(Pull),
    Reload,
    Op(OpId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pull {
    Resources,
    Templates,
    Prompts,
}

/// The answer to a pending request: the reply's message, or why there is none.
type Reply = Result<Msg, NoReply>;

/// Why a request the bridge sent to its tool process got no usable reply. Each is the tool
/// process's side of the connection; the text is what the host's error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoReply {
    /// Nothing within the call timeout (BR-CALL-15).
    #[error("no reply from the tool process within {0:?}")]
    Timeout(Duration),
    /// The connection ended first (BR-LIFECYCLE-03), as the shell saw it end.
    #[error("{0}")]
    Closed(String),
    /// The frame could not be queued for the tool process (it does not read).
    #[error("{0}")]
    NotSent(String),
    /// A stream of the reply failed (BR-STREAM-*).
    #[error("stream: {0}")]
    Stream(String),
    /// A sideband transfer of the reply failed (BR-SIDEBAND-*).
    #[error("sideband payload: {0}")]
    Sideband(String),
    #[error("sideband payload is not UTF-8")]
    SidebandNotUtf8,
    #[error("sideband field_name {0:?} is not a result field")]
    SidebandField(String),
}

fn describe(r: &Reply) -> String {
    match r {
        Ok(m) => format!("unexpected reply {}", crate::Arm::of(m).name()),
        Err(e) => e.to_string(),
    }
}

/// The connection to the current tool process.
#[derive(Debug)]
struct Conn {
    generation: u64,
    /// The tool set being built while a handshake or a reload's burst runs; `None` once served.
    staging: Option<ToolSet>,
    /// Middleware registered on this connection, in arrival order (BR-MIDDLEWARE-07).
    middleware: Vec<(String, i32)>,
    phase: handshake::Phase,
    streams: StreamAssembler,
    /// The Envelope rid of the last RawHeader frame, kept only under br.sideband.envelope-rid.
    raw_rid: String,
}

/// A reverse request of the tool process waiting for a host's answer.
#[derive(Debug)]
struct Reverse {
    sampling: bool,
    deadline: Instant,
}

/// The bridge's protocol state; see the module documentation.
#[derive(Debug)]
pub struct Core {
    cfg: Config,
    status: Status,
    generations: u64,
    rids: u64,
    ops_issued: u64,
    conn: Option<Conn>,
    tools: ToolSet,
    lists: Lists,
    sessions: BTreeMap<SessionId, SessionCaps>,
    pending: HashMap<String, Pending>,
    ops: HashMap<OpId, ops::Op>,
    /// Progress routes by the token we sent: the session and the host's token.
    progress: HashMap<String, ops::Route>,
    /// Calls at the tool process per session (sampling and roots routing, BR-SAMPLING-02).
    calling: BTreeMap<SessionId, usize>,
    reverse: HashMap<String, Reverse>,
    /// Modern calls by their MRTR handle (spec §26.4).
    handles: HashMap<[u8; 16], OpId>,
    handles_issued: u64,
    /// The time origin of requestState expiries (the first state issued).
    epoch: Option<Instant>,
    /// A restart is under way: the end of the current connection is expected.
    restarting: bool,
    /// The middleware of the connection that ended (kept only by `br.middleware.kept-after-restart`).
    last_middleware: Vec<(String, i32)>,
    transmit: VecDeque<Envelope>,
    events: VecDeque<Event>,
}

impl Core {
    pub fn new(cfg: Config) -> Self {
        Core {
            cfg,
            status: Status::Starting,
            generations: 0,
            rids: 0,
            ops_issued: 0,
            conn: None,
            tools: ToolSet::default(),
            lists: Lists::default(),
            sessions: BTreeMap::new(),
            pending: HashMap::new(),
            ops: HashMap::new(),
            progress: HashMap::new(),
            calling: BTreeMap::new(),
            reverse: HashMap::new(),
            handles: HashMap::new(),
            handles_issued: 0,
            epoch: None,
            restarting: false,
            last_middleware: Vec::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The generation of the current connection (0 before the first).
    pub fn generation(&self) -> u64 {
        self.conn.as_ref().map_or(0, |c| c.generation)
    }

    // ----- what the shell takes -----

    /// The next Envelope for the tool process.
    pub fn poll_transmit(&mut self) -> Option<Envelope> {
        let mut e = self.transmit.pop_front()?;
        if fault::on(Fault::BrFrameNamespaceSet) {
            e.namespace = "protomcp".into();
        }
        Some(e)
    }

    /// The next thing to do on the host side (or for the shell).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Core::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let pending = self.pending.values().filter(|p| !p.parked).map(|p| p.deadline);
        let reverse = self.reverse.values().map(|r| r.deadline);
        let burst = self.conn.as_ref().and_then(|c| c.phase.deadline());
        pending.chain(reverse).chain(burst).chain(self.mrtr_deadline()).min()
    }

    /// Whether a reverse request of the tool process waits for a host's answer.
    pub fn waiting_on_host(&self) -> bool {
        !self.reverse.is_empty()
    }

    /// Requests to the tool process still waiting for their answer.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Host operations not answered yet.
    pub fn ops_in_flight(&self) -> usize {
        self.ops.len()
    }

    // ----- sessions -----

    /// Adds a session, or updates what its client declared.
    pub fn add_session(&mut self, id: SessionId, caps: SessionCaps) {
        if crate::fault::on(crate::fault::Fault::BrMcpInitializeSendsFrame) && !self.sessions.contains_key(&id) {
            let rid = self.next_rid();
            self.transmit.push_back(crate::envelopes::get_active_tools().with_rid(rid));
        }
        self.sessions.insert(id, caps);
    }

    /// Forgets a session (its operations are cancelled by the shell, BR-CANCEL-06).
    pub fn remove_session(&mut self, id: SessionId) {
        self.sessions.remove(&id);
    }

    // ----- the lists a host reads -----

    /// tools/list: the active set as MCP tools (BR-MCP-11).
    pub fn tools(&self) -> Vec<Value> {
        self.tools.legacy_active().map(shapes::mcp_tool).collect()
    }

    /// The item of [`Core::tools_modern`] named `name`, alone: what a modern call's header check
    /// (BR-HTTP-30) needs, without building the whole list. A tool only modern requests see
    /// (BR-STATELESS-35) is found too: its headers are checked like any other's.
    pub fn tool_modern(&self, name: &str) -> Option<Value> {
        self.tools.get_active_modern(name).map(shapes::mcp_tool)
    }

    /// tools/list for a modern request: also the tools whose output schema is not of type
    /// object (BR-STATELESS-35).
    pub fn tools_modern(&self) -> Vec<Value> {
        if crate::fault::on(crate::fault::Fault::BrStatelessModernOnlyHidden) {
            return self.tools();
        }
        self.tools.active().map(shapes::mcp_tool).collect()
    }

    pub fn resources(&self) -> Vec<Value> {
        shapes::mcp_resources(&self.lists.resources)
    }

    pub fn templates(&self) -> Vec<Value> {
        shapes::mcp_templates(&self.lists.templates)
    }

    pub fn prompts(&self) -> Vec<Value> {
        shapes::mcp_prompts(&self.lists.prompts)
    }

    /// Whether the tool process registered any resource or template / prompt (BR-MCP-06).
    pub fn has_resources_prompts(&self) -> (bool, bool) {
        (!self.lists.resources.is_empty() || !self.lists.templates.is_empty(), !self.lists.prompts.is_empty())
    }

    // ----- internals shared by the parts -----

    fn next_rid(&mut self) -> String {
        if fault::on(Fault::BrConcurRidByPending) {
            return format!("req-{}", self.pending.len());
        }
        let rid = format!("req-{}", self.rids);
        self.rids += 1;
        rid
    }

    /// Sends `envelope` as a request under a fresh rid and waits for its answer until the call
    /// timeout.
    fn request(&mut self, now: Instant, envelope: Envelope, what: Waiting) -> String {
        let rid = self.next_rid();
        let mut deadline = now + self.cfg.call_timeout;
        if fault::on(Fault::BrCallTimeoutNeverArmed) && matches!(envelope.msg, Some(Msg::CallTool(_))) {
            deadline = now + Duration::from_secs(365 * 86_400);
        }
        self.pending.insert(rid.clone(), Pending { what, deadline, parked: false });
        self.transmit.push_back(envelope.with_rid(rid.clone()));
        rid
    }

    fn diag(&mut self, line: String) {
        self.events.push_back(Event::Diag(line));
    }

    /// A reply (or the reason there is none) for `rid`; anything under an rid we do not wait
    /// for is discarded (BR-CALL-17, BR-FRAME-05).
    fn resolve(&mut self, now: Instant, rid: &str, reply: Reply) {
        let result = matches!(reply, Ok(Msg::CallResult(_)));
        let misrouted = result
            && (fault::on(Fault::BrConcurFifoMatch)
                || (fault::on(Fault::BrCallStrayAnswersOldest) && !self.pending.contains_key(rid)));
        let oldest = misrouted.then(|| self.oldest_op_rid()).flatten();
        let rid = oldest.as_deref().unwrap_or(rid);
        let Some(p) = self.pending.remove(rid) else { return };
        match p.what {
            Waiting::Op(op) => self.op_reply(now, op, reply),
            Waiting::Discovery => self.discovery_reply(now, reply),
            Waiting::Pull(which) => self.pull_reply(now, which, reply),
            Waiting::Reload => self.reload_reply(now, reply),
        }
    }

    /// The oldest request of a host operation still waiting (only faults ask).
    fn oldest_op_rid(&self) -> Option<String> {
        let n = |r: &str| r.strip_prefix("req-").and_then(|n| n.parse::<u64>().ok()).unwrap_or(u64::MAX);
        self.pending
            .iter()
            .filter(|(_, p)| matches!(p.what, Waiting::Op(_)))
            .map(|(r, _)| r)
            .min_by_key(|r| n(r))
            .cloned()
    }

    /// A frame could not be queued for the tool process (it does not read): the request it
    /// carried fails now.
    pub fn handle_send_failed(&mut self, now: Instant, rid: &str, reason: String) {
        self.resolve(now, rid, Err(NoReply::NotSent(reason)));
    }

    /// Everything whose time has come: requests unanswered within the call timeout, the end of
    /// a quiet burst, reverse requests the host did not answer.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut due: Vec<(Instant, String, Waiting)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now && !p.parked)
            .map(|(r, p)| (p.deadline, r.clone(), p.what))
            .collect();
        due.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (_, rid, what) in due {
            match what {
                Waiting::Op(op) => self.op_timed_out(now, op, &rid),
                _ => {
                    if let Some(c) = self.conn.as_mut() {
                        c.streams.abort(&rid, "the request timed out");
                    }
                    self.resolve(now, &rid, Err(NoReply::Timeout(self.cfg.call_timeout)));
                }
            }
        }
        let mut late: Vec<String> =
            self.reverse.iter().filter(|(_, r)| r.deadline <= now).map(|(rid, _)| rid.clone()).collect();
        late.sort();
        for rid in late {
            self.reverse_timed_out(&rid);
        }
        self.mrtr_expired(now);
        if self.conn.as_ref().and_then(|c| c.phase.deadline()).is_some_and(|d| d <= now) {
            self.end_burst(now);
        }
    }

    /// The connection ended (the reader saw end-of-file or an error, or the shell closed it):
    /// every host operation waiting for it is answered at once (BR-LIFECYCLE-03), and a start
    /// or reload under way fails.
    pub fn handle_closed(&mut self, now: Instant, generation: u64, reason: &str) {
        if self.conn.as_ref().is_none_or(|c| c.generation != generation) {
            return;
        }
        let Some(mut conn) = self.conn.take() else { return };
        if fault::on(Fault::BrMiddlewareKeptAfterRestart) {
            self.last_middleware = conn.middleware.clone();
        }
        conn.streams.abort_all(reason);
        let left: Vec<(String, Pending)> = if fault::on(Fault::BrReloadInFlightLeft) && self.restarting {
            self.pending.extract_if(|_, p| matches!(p.what, Waiting::Op(_))).collect()
        } else {
            Vec::new()
        };
        let mut pending: Vec<(String, Pending)> =
            if fault::on(Fault::BrLifecyclePendingNotFailed) { Vec::new() } else { self.pending.drain().collect() };
        self.pending.extend(left);
        pending.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, p) in pending {
            if let Waiting::Op(op) = p.what {
                self.op_reply(now, op, Err(NoReply::Closed(reason.to_owned())));
            }
        }
        self.reverse.clear();
        self.progress.clear();
        // Parked calls die with their connection: their states are refused (BR-STATELESS-22).
        let mut parked: Vec<OpId> = self.handles.values().copied().collect();
        parked.sort();
        for op in parked {
            self.forget_call(op, false);
        }
        if let Some(e) = conn.phase.ended(generation, reason) {
            self.events.push_back(e);
        }
        self.status = if self.restarting { Status::Starting } else { Status::Down(reason.to_owned()) };
    }

    /// The shell is about to start a new tool process (a restart attempt or a reload by
    /// restart): new calls are refused as "restarting" until it serves, and the end of the
    /// current connection is expected.
    pub fn begin_restart(&mut self) {
        self.restarting = true;
        self.status = Status::Starting;
    }

    /// The restart failed for `reason` (the bridge stays up without a tool process).
    pub fn restart_failed(&mut self, reason: &str) {
        self.restarting = false;
        self.status = Status::Down(reason.to_owned());
    }

    /// The shell gave up restarting (BR-LIFECYCLE-07): an empty tool list, announced.
    pub fn give_up(&mut self) {
        let had = self.tools.active().next().is_some();
        if fault::on(Fault::BrLifecycleGiveUpKeepsTools) {
            return;
        }
        self.tools.clear();
        if had {
            self.events.push_back(Event::ListChanged(ListKind::Tools));
        }
    }
}

/// A stream assembler for a fresh connection.
fn streams() -> StreamAssembler {
    StreamAssembler::new(Party::ToolProcess, StreamLimits::default())
}
