//! The MCP side of the reference bridge, sans-IO: one host session's protocol decisions, driven
//! by `handle_*` calls with the time passed in and read out with `poll_*` (quinn-proto's way).
//! The shell (`protomcp-bridge`) does the I/O on stdio or Streamable HTTP and carries out the
//! [`Action`]s; the tool-process side of every decision is [`crate::bridge_core`]'s.
//!
//! What it decides:
//! - classification and validation of every host message ([`crate::mcp_input`]'s gate, reading
//!   params as the MCP schema allows: -32700, -32600, -32602, ids in flight);
//! - the lifecycle: ping at any time, initialize and its version negotiation (BR-MCP-02/03/04),
//!   requests before initialize refused (BR-MCP-09), the session's end;
//! - the answers it gives itself: ping, logging/setLevel and the session's log threshold
//!   (BR-LOG-04/05), resources/(un)subscribe and the subscriptions (BR-RESOURCE-08/09), pages of
//!   the list methods with cursors of its own (BR-MCP-12/13), unknown methods (BR-MCP-15);
//! - which requests go to the tool process ([`Forward`]), and the response each outcome becomes;
//!   the host's cancellations (no response, BR-CANCEL-02);
//! - the notification queue's policy ([`outbox`]): bounded, list_changed held until
//!   notifications/initialized and never queued twice, a count of what a slow host missed;
//! - requests to the host (sampling, roots): checked, routed to the stream of the call that
//!   caused them (BR-HTTP-14), their answers matched by id and checked (BR-MCP-22);
//! - the era of every request (MCP 2026-07-28 beside the legacy revisions, [`modern`]): the
//!   checks of a modern request, `server/discover`, result decoration, `subscriptions/listen`.

pub mod checks;
pub mod modern;
pub mod msg;
pub mod outbox;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use serde_json::{Value, json};

use crate::bound::{Bound, thousands, value_size};
use crate::bridge_core::{HostError, ListKind, ModernCall, ModernCaps, SessionCaps};
use crate::fault::{self, Fault};
use crate::jsonrpc::{ErrorCode, RequestId};
use crate::mcp_input::{self, Admission, LOG_LEVELS, SpecReader};
use msg::{Message, Notification, Request, Response, ResponseError};
use outbox::{Outbox, Popped};

/// The newest protocol revision offered.
pub const NEWEST_VERSION: &str = "2025-11-25";

/// The revisions initialize accepts, newest first (BR-MCP-03/04).
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The prefix of the cursors the list methods hand out (the offset of the next item follows).
const PAGE_CURSOR: &str = "conform-offset-";

/// How a session is served.
#[derive(Debug, Clone)]
pub struct Config {
    /// Items per page of the list methods; `None`: one page.
    pub page_size: Option<usize>,
    /// The bound of the notification queue.
    pub queue: Bound,
    /// serverInfo's name and version (BR-MCP-10).
    pub name: String,
    pub version: String,
    /// HTTP authentication is in force: cacheable modern results say `cacheScope: "private"`
    /// (BR-STATELESS-14).
    pub private_cache: bool,
    /// The session is served over Streamable HTTP: modern tools/list leaves out tools whose
    /// `x-mcp-header` annotations are invalid (BR-HTTP-31).
    pub http: bool,
}

/// Why a host gave no result to a request of ours (sampling/createMessage, roots/list).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReverseError {
    #[error("the session is not initialized")]
    NotInitialized,
    /// The request could not be put to this host (invalid params, a capability it lacks).
    #[error("{0}")]
    Invalid(String),
    /// The host answered with an error, or the session ended.
    #[error("{0}")]
    Host(String),
    /// The host answered with something that is not the method's result.
    #[error("{method} answered with {answer}")]
    Unexpected { method: &'static str, answer: String },
}

/// A list method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Tools,
    /// tools/list for a modern request: also the tools only modern requests get
    /// (BR-STATELESS-35).
    ModernTools,
    Resources,
    Templates,
    Prompts,
}

impl Listing {
    fn of(method: &str) -> Option<Listing> {
        Some(match method {
            "tools/list" => Listing::Tools,
            "resources/list" => Listing::Resources,
            "resources/templates/list" => Listing::Templates,
            "prompts/list" => Listing::Prompts,
            _ => return None,
        })
    }

    /// The member of the result that holds the items.
    pub fn key(self) -> &'static str {
        match self {
            Listing::Tools | Listing::ModernTools => "tools",
            Listing::Resources => "resources",
            Listing::Templates => "resourceTemplates",
            Listing::Prompts => "prompts",
        }
    }
}

/// A host request that needs the bridge: the shell asks the bridge core and hands the outcome
/// to [`HostCore::handle_outcome`].
#[derive(Debug, Clone, PartialEq)]
pub enum Forward {
    /// The current items of a list (the outcome: a JSON array; the core pages it).
    List(Listing),
    Call {
        name: String,
        arguments: Option<Value>,
        progress: Option<Value>,
    },
    /// A modern tools/call, new or a retry of a parked one (spec §26.4).
    ModernCall(ModernCall),
    Read {
        uri: String,
    },
    Prompt {
        name: String,
        arguments: Option<Value>,
    },
    Complete {
        reference: Value,
        name: String,
        value: String,
    },
}

/// The number of a request of ours to the host, for [`HostCore::ask`]'s caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AskId(pub u64);

/// A request of ours to the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    Sample(Value),
    ListRoots,
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// initialize was answered: the session joins the bridge with what its client declared.
    Open(SessionCaps),
    /// Ask the bridge for what `id` needs.
    Forward { id: RequestId, forward: Forward },
    /// The request `id` forwarded earlier is cancelled (by the host or the session's end).
    Cancel { id: RequestId },
    /// The host answered a request of ours.
    Answer { ask: AskId, outcome: Result<Value, ReverseError> },
    /// A line for the bridge's diagnostics (stderr).
    Diag(String),
    /// The session ended: it leaves the bridge.
    Closed,
}

/// Where an outgoing message goes over Streamable HTTP (stdio has one stream for all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The response to the host's request: its stream ends with it.
    Answer(RequestId),
    /// Caused by the host's request (progress, a request of ours): on that request's stream
    /// while it is open (BR-HTTP-14).
    Cause(RequestId),
    /// Not tied to a request: the session's own stream.
    Session,
}

/// One outgoing message.
#[derive(Debug, Clone, PartialEq)]
pub struct Transmit {
    pub message: Message,
    pub route: Route,
}

/// A notification from the bridge core for this session.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    ListChanged(ListKind),
    /// `for_call`: this session holds the modern request attached to the single call owner
    /// (BR-LOG-08).
    Log {
        level: &'static str,
        logger: Option<String>,
        data: Value,
        for_call: bool,
    },
    Progress {
        token: Value,
        progress: i64,
        total: Option<i64>,
        message: Option<String>,
    },
    ResourceUpdated(String),
}

/// What the core made of a message from the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Intake {
    /// A request: it will get a response routed [`Route::Answer`] with its id.
    Request(RequestId),
    /// A notification or a response, taken (never answered).
    Taken,
    /// Refused by the gate with this error response, which is not queued: stdio writes it with
    /// [`HostCore::refuse`], HTTP answers the POST with it ([`mcp_input::post_status`]).
    Refused(Value),
    /// Nothing to do (an empty line, a message nobody reads).
    Dropped,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    New,
    /// initialize answered with this revision.
    Open(&'static str),
    /// notifications/initialized arrived.
    Ready(&'static str),
    Ended,
}

/// A forwarded request waiting for its outcome.
#[derive(Debug)]
struct Pending {
    /// `Some` for a list: the cursor's offset.
    list: Option<(Listing, usize)>,
    /// The progress token of a tools/call.
    progress: Option<Value>,
    /// A modern request (its result is decorated, spec §26.6).
    modern: bool,
    /// The URI of a resources/read (a modern one's missing resource names it, BR-RESOURCE-11).
    uri: Option<String>,
    /// A modern tools/call's `io.modelcontextprotocol/logLevel` as a rank (BR-LOG-08).
    log_level: Option<usize>,
}

impl Pending {
    fn new(list: Option<(Listing, usize)>, progress: Option<Value>, modern: bool, uri: Option<String>) -> Self {
        Pending { list, progress, modern, uri, log_level: None }
    }
}

/// One host session's MCP side; see the module documentation.
#[derive(Debug)]
pub struct HostCore {
    cfg: Config,
    gate: mcp_input::Gate<SpecReader>,
    phase: Phase,
    /// What the client declared in initialize.
    caps: Value,
    /// Rank of the lowest level forwarded (BR-LOG-05); 0 forwards everything (BR-LOG-06).
    threshold: usize,
    subscriptions: HashSet<String>,
    pending: HashMap<RequestId, Pending>,
    /// The tools/call requests in flight, oldest first.
    calls: Vec<RequestId>,
    /// Our requests to the host, by their id: what we asked and its number.
    asks: HashMap<RequestId, (AskId, &'static str)>,
    next_ask: u64,
    outbox: Outbox<Transmit>,
    /// list_changed notifications held until notifications/initialized.
    held: Vec<ListKind>,
    actions: VecDeque<Action>,
    /// The session joined the bridge ([`Action::Open`]): by initialize, or by the first modern
    /// request that needs the bridge's notifications (a call's progress, a listen subscription).
    joined: bool,
    /// Open `subscriptions/listen` requests, by their id (the subscriptionId).
    listens: Vec<(RequestId, modern::Listen)>,
    /// Only with the fault `br.toollist.session-cache`: this session's copy of the tools/list
    /// items, dropped when one of its own calls ends.
    tools_cache: Option<Vec<Value>>,
}

fn droppable(t: &Transmit) -> bool {
    matches!(&t.message, Message::Notification(n) if n.method != "notifications/tools/list_changed"
        && n.method != "notifications/resources/list_changed" && n.method != "notifications/prompts/list_changed")
}

fn list_changed_method(kind: ListKind) -> &'static str {
    match kind {
        ListKind::Tools => "notifications/tools/list_changed",
        ListKind::Resources => "notifications/resources/list_changed",
        ListKind::Prompts => "notifications/prompts/list_changed",
    }
}

/// A progress token as MCP allows it: a string or an integer.
fn progress_token(params: Option<&Value>) -> Option<Value> {
    let t = params?.get("_meta")?.get("progressToken")?;
    (t.is_string() || t.is_i64()).then(|| t.clone())
}

impl HostCore {
    pub fn new(cfg: Config) -> Self {
        let outbox = Outbox::new(cfg.queue);
        HostCore {
            cfg,
            gate: mcp_input::Gate::new(),
            phase: Phase::New,
            caps: Value::Null,
            threshold: 0,
            subscriptions: HashSet::new(),
            pending: HashMap::new(),
            calls: Vec::new(),
            asks: HashMap::new(),
            next_ask: 0,
            outbox,
            held: Vec::new(),
            actions: VecDeque::new(),
            joined: false,
            listens: Vec::new(),
            tools_cache: None,
        }
    }

    // ----- input from the host -----

    /// One message from the host as bytes (a stdio line, a POST body).
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) -> (Intake, Option<Value>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return (Intake::Dropped, None);
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => (self.handle_value(now, &v), Some(v)),
            Err(_) => {
                let id =
                    if crate::fault::on(crate::fault::Fault::BrMcpParseErrorIdZero) { json!(0) } else { Value::Null };
                let refusal = mcp_input::error_response(id, ErrorCode::PARSE_ERROR, "parse error");
                (Intake::Refused(refusal), None)
            }
        }
    }

    /// One message from the host, parsed.
    pub fn handle_value(&mut self, now: Instant, v: &Value) -> Intake {
        let _ = now;
        if self.phase == Phase::Ended {
            return Intake::Dropped;
        }
        match self.gate.inbound(v) {
            // The fault: the duplicate is refused, and the session ends with it.
            Admission::Answer(refusal)
                if crate::fault::on(crate::fault::Fault::BrMcpDuplicateEndsSession)
                    && v.get("id").and_then(RequestId::of).is_some_and(|id| self.pending.contains_key(&id)) =>
            {
                self.phase = Phase::Ended;
                return Intake::Refused(refusal);
            }
            Admission::Answer(refusal) => return Intake::Refused(refusal),
            Admission::Drop => return Intake::Dropped,
            Admission::Pass => {}
        }
        // The gate passed it: it is a message the schema allows.
        match Message::from_value(v) {
            Ok(Message::Request(r)) => {
                let id = r.id.clone();
                self.handle_request(r);
                Intake::Request(id)
            }
            Ok(Message::Notification(n)) => {
                self.handle_notification(n);
                Intake::Taken
            }
            Ok(Message::Response(r)) => {
                self.handle_response(r);
                Intake::Taken
            }
            Err(_) => Intake::Dropped,
        }
    }

    /// Queues a refusal of the gate ([`Intake::Refused`]) to go out in order (stdio).
    pub fn refuse(&mut self, refusal: Value) {
        if let Ok(Message::Response(r)) = Message::from_value(&refusal) {
            self.queue(Message::Response(r), Route::Session);
        }
    }

    fn answer(&mut self, id: RequestId, outcome: Result<Value, (ErrorCode, String)>) {
        self.reply(id, outcome.map_err(|(code, message)| ResponseError::new(code, message)));
    }

    fn reply(&mut self, id: RequestId, outcome: Result<Value, ResponseError>) {
        let r = Response { id: Some(id.clone()), outcome };
        self.queue(Message::Response(r), Route::Answer(id));
    }

    /// The session joins the bridge, once.
    fn join(&mut self) {
        if !self.joined {
            self.joined = true;
            self.actions.push_back(Action::Open(self.session_caps()));
        }
    }

    fn server_info(&self) -> Value {
        json!({"name": self.cfg.name, "version": self.cfg.version})
    }

    fn cache_scope(&self) -> &'static str {
        if self.cfg.private_cache { "private" } else { "public" }
    }

    fn version(&self) -> Option<&'static str> {
        match self.phase {
            Phase::Open(v) | Phase::Ready(v) => Some(v),
            Phase::New | Phase::Ended => None,
        }
    }

    fn handle_request(&mut self, r: Request) {
        // br.stateless.legacy-once-initialized: the era decided per stream, not per request.
        let legacy_stream = self.version().is_some() && fault::on(Fault::BrStatelessLegacyOnceInitialized);
        if mcp_input::is_modern(&r.method, r.params.as_ref()) && !legacy_stream {
            return self.modern_request(r);
        }
        match r.method.as_str() {
            "ping"
                if !(crate::fault::on(crate::fault::Fault::BrMcpPingBeforeInitRefused) && self.version().is_none()) =>
            {
                return self.answer(r.id, Ok(json!({})));
            }
            "initialize" => return self.initialize(r),
            _ => {}
        }
        if self.version().is_none() && !crate::fault::on(crate::fault::Fault::BrMcpForwardedBeforeInit) {
            // BR-MCP-09: no Envelope traffic before initialize.
            let why = format!("{} before initialize: the session is not initialized", r.method);
            return self.answer(r.id, Err((ErrorCode::INVALID_REQUEST, why)));
        }
        match r.method.as_str() {
            "logging/setLevel" => {
                let level = r.param("level").and_then(Value::as_str).unwrap_or_default();
                self.threshold = LOG_LEVELS.iter().position(|l| *l == level).unwrap_or(0);
                return self.answer(r.id, Ok(json!({})));
            }
            "resources/subscribe" | "resources/unsubscribe"
                if crate::fault::on(crate::fault::Fault::BrResourceSubscribeUnknown) =>
            {
                let why = format!("method not found: {}", r.method);
                return self.answer(r.id, Err((ErrorCode::METHOD_NOT_FOUND, why)));
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                let uri = r.param("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
                if r.method == "resources/subscribe" {
                    self.subscriptions.insert(uri);
                } else {
                    self.subscriptions.remove(&uri);
                }
                return self.answer(r.id, Ok(json!({})));
            }
            _ => {}
        }
        self.forward_request(r, None);
    }

    /// A request for the bridge: a list (paged here) or what [`HostCore::forward_of`] names;
    /// `modern`: what a modern request's `_meta` said.
    fn forward_request(&mut self, r: Request, meta: Option<modern::ModernMeta>) {
        let modern = meta.is_some();
        if r.method == "tools/call" && r.param("task").is_some() && fault::on(Fault::BrTaskAugmentedRefused) {
            return self.answer(r.id, Err((ErrorCode::INVALID_PARAMS, "task execution is not supported".into())));
        }
        let listing =
            Listing::of(&r.method).map(|l| if modern && l == Listing::Tools { Listing::ModernTools } else { l });
        let forward = match listing {
            Some(listing) => match self.cursor(&r) {
                // The fault: the session's copy of the list, however old (BR-TOOLLIST-14).
                Ok(from) if listing == Listing::Tools && self.tools_cache.is_some() => {
                    let items = self.tools_cache.clone().unwrap_or_default();
                    let page = self.page(listing, items, from);
                    return self.answer(r.id, page);
                }
                Ok(from) => {
                    self.pending.insert(r.id.clone(), Pending::new(Some((listing, from)), None, modern, None));
                    Forward::List(listing)
                }
                Err(e) => return self.answer(r.id, Err(e)),
            },
            None => match self.forward_of(&r, meta.as_ref()) {
                Some(f) => f,
                None => {
                    let why = format!("method not found: {}", r.method);
                    let code = if crate::fault::on(crate::fault::Fault::BrMcpUnknownMethodInternal) {
                        ErrorCode::INTERNAL_ERROR
                    } else {
                        ErrorCode::METHOD_NOT_FOUND
                    };
                    return self.answer(r.id, Err((code, why)));
                }
            },
        };
        match &forward {
            Forward::Call { progress, .. } => {
                self.calls.push(r.id.clone());
                self.pending.insert(r.id.clone(), Pending::new(None, progress.clone(), modern, None));
            }
            Forward::ModernCall(ModernCall { progress, caps, .. }) => {
                self.calls.push(r.id.clone());
                let mut p = Pending::new(None, progress.clone(), modern, None);
                p.log_level = caps.log_level;
                self.pending.insert(r.id.clone(), p);
            }
            Forward::Read { uri } => {
                self.pending.insert(r.id.clone(), Pending::new(None, None, modern, Some(uri.clone())));
            }
            Forward::List(_) => {}
            _ => {
                self.pending.insert(r.id.clone(), Pending::new(None, None, modern, None));
            }
        }
        // A modern call's progress and logs come through the bridge's view of this session: it
        // joins when the call can get any (a progressToken, a logLevel). Nothing else a modern
        // request asks needs the session known to the bridge (over HTTP each modern POST has a
        // session of its own, so joining costs a round through the bridge per request).
        if let Forward::ModernCall(c) = &forward
            && (c.progress.is_some() || c.caps.log_level.is_some())
        {
            self.join();
        }
        self.actions.push_back(Action::Forward { id: r.id, forward });
    }

    /// A modern request (spec §26): its checks in order, then `server/discover`, a listen
    /// subscription, or the method as Revision 1 forwards it. No session is needed or changed
    /// (BR-STATELESS-03).
    fn modern_request(&mut self, r: Request) {
        let meta = match modern::check(&r) {
            Ok(meta) => meta,
            Err(e) => return self.reply(r.id, Err(e)),
        };
        // BR-STATELESS-22: a state goes with tools/call only, answers only with a state.
        if let Err(e) = modern::check_retry(&r) {
            return self.reply(r.id, Err(e));
        }
        if fault::on(Fault::BrStatelessLevelIntoSession)
            && let Some(level) = meta.log_level
        {
            self.threshold = level;
        }
        match r.method.as_str() {
            "ping" if fault::on(Fault::BrStatelessPingServed) => {
                let v = modern::decorate(json!({}), &self.server_info(), None);
                self.reply(r.id, Ok(v))
            }
            "server/discover" => {
                let v = modern::decorate(modern::discover(), &self.server_info(), Some(self.cache_scope()));
                self.reply(r.id, Ok(v))
            }
            "subscriptions/listen" => match modern::Listen::of(&r) {
                Err(e) => self.reply(r.id, Err(e)),
                Ok(listen) => {
                    self.join();
                    let mut params = json!({"notifications": listen.acknowledged()});
                    params["_meta"] = json!({ (modern::META_SUBSCRIPTION): r.id.to_value() });
                    let n = Notification::new("notifications/subscriptions/acknowledged", Some(params));
                    self.queue(Message::Notification(n), Route::Cause(r.id.clone()));
                    self.listens.push((r.id, listen));
                }
            },
            _ => self.forward_request(r, Some(meta)),
        }
    }

    /// The offset a list request's cursor names (BR-MCP-13: only cursors of ours).
    fn cursor(&self, r: &Request) -> Result<usize, (ErrorCode, String)> {
        match r.param("cursor").and_then(Value::as_str) {
            None => Ok(0),
            Some(c) => match c.strip_prefix(PAGE_CURSOR).and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if self.cfg.page_size.is_some() => Ok(n),
                _ if crate::fault::on(crate::fault::Fault::BrMcpForeignCursorFirstPage) => Ok(0),
                _ => Err((ErrorCode::INVALID_PARAMS, "unknown cursor".into())),
            },
        }
    }

    /// The [`Forward`] of a request for the tool process, `None` for an unknown method.
    fn forward_of(&self, r: &Request, meta: Option<&modern::ModernMeta>) -> Option<Forward> {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let object = |v: Option<&Value>| v.filter(|a| a.is_object()).cloned();
        Some(match r.method.as_str() {
            "tools/call" if let Some(meta) = meta => Forward::ModernCall(ModernCall {
                name: s(r.param("name")),
                arguments: object(r.param("arguments")),
                progress: progress_token(r.params.as_ref()),
                caps: ModernCaps {
                    sampling: meta.caps.get("sampling").is_some(),
                    roots: meta.caps.get("roots").is_some(),
                    log_level: meta.log_level,
                },
                retry: r
                    .param("requestState")
                    .and_then(Value::as_str)
                    .map(|state| (state.to_owned(), r.param("inputResponses").cloned().unwrap_or(Value::Null))),
            }),
            "tools/call" => Forward::Call {
                name: s(r.param("name")),
                arguments: object(r.param("arguments")),
                progress: progress_token(r.params.as_ref()),
            },
            "resources/read" => Forward::Read { uri: s(r.param("uri")) },
            "prompts/get" => Forward::Prompt { name: s(r.param("name")), arguments: object(r.param("arguments")) },
            "completion/complete" => {
                let arg = r.param("argument");
                Forward::Complete {
                    reference: r.param("ref").cloned().unwrap_or(Value::Null),
                    name: s(arg.and_then(|a| a.get("name"))),
                    value: s(arg.and_then(|a| a.get("value"))),
                }
            }
            _ => return None,
        })
    }

    /// initialize: the host's revision when supported, else the newest (BR-MCP-02); everything
    /// advertised always (BR-MCP-05/07), subscriptions (BR-RESOURCE-08), never tasks.
    fn initialize(&mut self, r: Request) {
        if self.phase != Phase::New {
            let why = "the session is initialized already";
            return self.answer(r.id, Err((ErrorCode::INVALID_REQUEST, why.into())));
        }
        let asked = r.param("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let missing = |v: &str| match v {
            "2025-03-26" => crate::fault::on(crate::fault::Fault::BrMcpNo20250326),
            "2024-11-05" => crate::fault::on(crate::fault::Fault::BrMcpNo20241105),
            _ => false,
        };
        let mut version = VERSIONS.iter().copied().find(|v| *v == asked && !missing(v)).unwrap_or(NEWEST_VERSION);
        if crate::fault::on(crate::fault::Fault::BrMcpVersionAlwaysNewest) {
            version = NEWEST_VERSION;
        } else if version == "2025-11-25" && crate::fault::on(crate::fault::Fault::BrMcpNo20251125) {
            version = "2025-06-18";
        } else if asked == "2026-07-28" && crate::fault::on(crate::fault::Fault::BrMcpNegotiates20260728) {
            version = "2026-07-28";
        }
        self.caps = r.param("capabilities").cloned().unwrap_or(Value::Null);
        self.phase = Phase::Open(version);
        self.joined = true;
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": modern::capabilities(),
            "serverInfo": self.server_info(),
        });
        if crate::fault::on(crate::fault::Fault::BrMcpNoCompletionsCap) {
            result["capabilities"].as_object_mut().map(|c| c.remove("completions"));
        }
        if crate::fault::on(crate::fault::Fault::BrMcpNoPromptsCap) {
            result["capabilities"].as_object_mut().map(|c| c.remove("prompts"));
        }
        if crate::fault::on(crate::fault::Fault::BrMcpEmptyServerVersion) {
            result["serverInfo"]["version"] = json!("");
        }
        if fault::on(Fault::BrTaskCapabilityEchoed) && self.caps.get("tasks").is_some() {
            result["capabilities"]["tasks"] = json!({});
        }
        self.answer(r.id, Ok(result));
        self.actions.push_back(Action::Open(self.session_caps()));
    }

    /// What the client declared, as the bridge core needs it.
    pub fn session_caps(&self) -> SessionCaps {
        SessionCaps {
            sampling: self.caps.get("sampling").is_some(),
            roots: self.caps.get("roots").is_some(),
            legacy: self.version().is_some(),
        }
    }

    fn handle_notification(&mut self, n: Notification) {
        match n.method.as_str() {
            "notifications/initialized" => {
                if let Phase::Open(v) = self.phase {
                    self.phase = Phase::Ready(v);
                    for kind in std::mem::take(&mut self.held) {
                        self.queue_list_changed(kind);
                    }
                }
            }
            "notifications/cancelled" => {
                let Some(id) = n.params.as_ref().and_then(|p| p.get("requestId")).and_then(RequestId::of) else {
                    return;
                };
                // BR-STATELESS-32: a cancelled listen subscription ends, without a response.
                if let Some(i) = self.listens.iter().position(|(l, _)| *l == id) {
                    if !fault::on(Fault::BrStatelessCancelledListenTold) {
                        self.listens.remove(i);
                    }
                    self.gate.answered(&id.to_value());
                    return;
                }
                if fault::on(Fault::BrCancelLateResultDelivered) && self.pending.contains_key(&id) {
                    return self.actions.push_back(Action::Cancel { id });
                }
                // BR-CANCEL-02: a cancelled request gets no response.
                if self.pending.remove(&id).is_some() {
                    self.calls.retain(|c| *c != id);
                    self.gate.answered(&id.to_value());
                    if fault::on(Fault::BrCancelAnswered) {
                        self.answer(id.clone(), Err((ErrorCode::INTERNAL_ERROR, "request cancelled".into())));
                    }
                    self.actions.push_back(Action::Cancel { id });
                } else if fault::on(Fault::BrCancelUnknownForwarded) {
                    self.actions.push_back(Action::Cancel { id });
                }
            }
            "notifications/roots/list_changed" if crate::fault::on(crate::fault::Fault::BrRootsListChangedAnswered) => {
                let e = ResponseError::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "method not found: notifications/roots/list_changed",
                );
                self.queue(Message::Response(Response { id: None, outcome: Err(e) }), Route::Session);
            }
            "notifications/progress" | "notifications/roots/list_changed" => {}
            other if crate::fault::on(crate::fault::Fault::BrMcpUnknownNotificationAnswered) => {
                let e = ResponseError::new(ErrorCode::METHOD_NOT_FOUND, format!("method not found: {other}"));
                self.queue(Message::Response(Response { id: None, outcome: Err(e) }), Route::Session);
            }
            // Progress from a host, roots/list_changed, unknown notifications: ignored
            // (BR-MCP-15/22, BR-ROOTS-04).
            _ => {}
        }
    }

    fn handle_response(&mut self, r: Response) {
        // An answer to nothing we asked (or gave up on) is ignored (BR-MCP-22).
        let Some(id) = r.id else { return };
        let Some((ask, method)) = self.asks.remove(&id) else { return };
        let outcome = match r.outcome {
            Ok(v) if checks::result_fits(method, &v) => Ok(v),
            Ok(v) => Err(ReverseError::Unexpected { method, answer: v.to_string() }),
            Err(e) => Err(ReverseError::Host(format!("the host answered with error {}: {}", e.code.code(), e.message))),
        };
        self.actions.push_back(Action::Answer { ask, outcome });
    }

    // ----- input from the bridge -----

    /// The bridge's outcome of a [`Forward`]ed request. [`HostError::Cancelled`]: no response.
    pub fn handle_outcome(&mut self, now: Instant, id: RequestId, outcome: Result<Value, HostError>) {
        let _ = now;
        let Some(pending) = self.pending.remove(&id) else { return };
        let call = self.calls.contains(&id);
        self.calls.retain(|c| *c != id);
        if call {
            // A call of this session may have changed the active set: its copy goes.
            self.tools_cache = None;
        }
        let modern = pending.modern;
        let outcome = match (outcome, pending.list) {
            (Err(HostError::Cancelled), _) => {
                self.gate.answered(&id.to_value());
                return;
            }
            // BR-RESOURCE-11: a modern read of a missing resource is -32602 naming the URI.
            (Err(HostError::ResourceNotFound(why)), _)
                if modern && !crate::fault::on(crate::fault::Fault::BrResourceModernNotFound) =>
            {
                let mut e = ResponseError::new(ErrorCode::INVALID_PARAMS, why);
                e.data = Some(json!({"uri": pending.uri}));
                Err(e)
            }
            (Err(e), _) => Err(ResponseError::new(e.code(), e.to_string())),
            (Ok(Value::Array(mut items)), Some((listing, from))) => {
                // BR-TOOLLIST-16 (every revision): tools in byte-wise order of name, before the
                // page is cut, so the cursors of a legacy list walk the sorted list.
                let tools = matches!(listing, Listing::Tools | Listing::ModernTools);
                if tools && !crate::fault::on(crate::fault::Fault::BrToollistUnsorted) {
                    items.sort_by(|a, b| a["name"].as_str().unwrap_or("").cmp(b["name"].as_str().unwrap_or("")));
                }
                if listing == Listing::Tools && fault::on(Fault::BrToollistSessionCache) {
                    self.tools_cache = Some(items.clone());
                }
                if listing == Listing::ModernTools && self.cfg.http && !fault::on(Fault::BrHttpBadAnnotationKept) {
                    self.drop_bad_header_annotations(&mut items);
                }
                self.page(listing, items, from).map_err(|(code, message)| ResponseError::new(code, message))
            }
            (Ok(v), _) => Ok(v),
        };
        let outcome = match outcome {
            Ok(v) if modern => {
                let read = pending.uri.is_some();
                let cacheable = pending.list.is_some() || (read && !fault::on(Fault::BrStatelessReadNoCacheHints));
                let scope =
                    if read && !fault::on(Fault::BrStatelessReadPublic) { "private" } else { self.cache_scope() };
                let mut v = modern::decorate(v, &self.server_info(), cacheable.then_some(scope));
                let tools = pending.list.is_some_and(|(l, _)| l == Listing::ModernTools);
                let ttl_fault = if tools { Fault::BrStatelessToolsTtl } else { Fault::BrStatelessListTtl };
                if cacheable && fault::on(ttl_fault) {
                    v["ttlMs"] = json!(60000);
                }
                Ok(v)
            }
            other => other,
        };
        if call && crate::fault::on(crate::fault::Fault::BrMcpCallAnsweredTwice) {
            self.reply(id.clone(), outcome.clone());
        }
        self.reply(id, outcome);
    }

    /// BR-HTTP-31: a modern tools/list over HTTP leaves out the tools whose `x-mcp-header`
    /// annotations are invalid, each with a diagnostic.
    fn drop_bad_header_annotations(&mut self, items: &mut Vec<Value>) {
        let actions = &mut self.actions;
        items.retain(|t| {
            let (_, problems) = modern::header_annotations(t.get("inputSchema").unwrap_or(&Value::Null));
            if problems.is_empty() {
                return true;
            }
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            actions.push_back(Action::Diag(format!(
                "tool {name:?} left out of tools/list for 2026-07-28 requests over HTTP: {}",
                problems.join("; ")
            )));
            false
        });
    }

    /// One page of a list (BR-MCP-12): everything without a page size, else that many items
    /// from `from`, with a `nextCursor` while items remain.
    fn page(&self, listing: Listing, items: Vec<Value>, from: usize) -> Result<Value, (ErrorCode, String)> {
        let key = listing.key();
        let Some(size) = self.cfg.page_size else { return Ok(json!({ (key): items })) };
        if from > items.len() {
            return Err((ErrorCode::INVALID_PARAMS, "unknown cursor".into()));
        }
        let end = (from + size).min(items.len());
        let mut page = json!({ (key): items[from..end] });
        if end < items.len() {
            page["nextCursor"] = json!(format!("{PAGE_CURSOR}{end}"));
        }
        Ok(page)
    }

    /// A notification of the bridge core for this session.
    pub fn handle_note(&mut self, now: Instant, note: Note) {
        let _ = now;
        if self.phase == Phase::Ended {
            return;
        }
        let (method, params, route) = match note {
            Note::ListChanged(kind) => {
                self.tell_listens(kind);
                return self.queue_list_changed(kind);
            }
            Note::Log { level, logger, data, for_call } => {
                let rank = crate::bridge_core::shapes::level_rank(level);
                // A legacy session gets what its threshold admits (BR-LOG-01/05); a modern
                // request only as the attached request of the single call owner, which the
                // bridge core found admitting the entry (BR-LOG-07/08, BR-STATELESS-15).
                let admitted =
                    rank >= self.threshold || (fault::on(Fault::BrLogThresholdOffByOne) && rank + 1 == self.threshold);
                let route = if self.version().is_some() && admitted {
                    Route::Session
                } else if for_call
                    && let Some(id) = self.pending.iter().find(|(_, p)| p.log_level.is_some()).map(|(id, _)| id.clone())
                {
                    Route::Cause(id)
                } else if fault::on(Fault::BrLogOnListen)
                    && let Some((id, _)) = self.listens.first()
                {
                    Route::Cause(id.clone())
                } else {
                    return;
                };
                let mut p = json!({"level": level, "data": data});
                if let Some(l) = logger {
                    p["logger"] = Value::String(l);
                }
                ("notifications/message", p, route)
            }
            Note::Progress { token, progress, total, message } => {
                let mut p = json!({"progressToken": token, "progress": progress});
                if let Some(t) = total {
                    p["total"] = json!(t);
                }
                if let Some(m) = message {
                    p["message"] = Value::String(m);
                }
                let call = self.pending.iter().find(|(_, c)| c.progress.as_ref() == Some(&token));
                let route = call.map_or(Route::Session, |(id, _)| Route::Cause(id.clone()));
                ("notifications/progress", p, route)
            }
            Note::ResourceUpdated(uri) => {
                self.tell_listens_updated(&uri);
                if !self.subscriptions.contains(&uri) && !crate::fault::on(crate::fault::Fault::BrResourceUpdatedToAll)
                {
                    return;
                }
                ("notifications/resources/updated", json!({"uri": uri}), Route::Session)
            }
        };
        self.queue(Message::Notification(Notification::new(method, Some(params))), route);
    }

    /// A list change to every listen subscription whose filter holds it, tagged with its
    /// subscriptionId (BR-STATELESS-31).
    fn tell_listens(&mut self, kind: ListKind) {
        let wanted: Vec<RequestId> = self
            .listens
            .iter()
            .filter(|(_, l)| match kind {
                ListKind::Tools => l.tools,
                ListKind::Prompts => l.prompts,
                ListKind::Resources => l.resources,
            })
            .map(|(id, _)| id.clone())
            .take(if fault::on(Fault::BrStatelessListenFirstOnly) { 1 } else { usize::MAX })
            .collect();
        for id in wanted {
            let params = json!({"_meta": { (modern::META_SUBSCRIPTION): id.to_value() }});
            let n = Notification::new(list_changed_method(kind), Some(params));
            self.queue(Message::Notification(n), Route::Cause(id));
        }
    }

    /// A resource update to every listen subscription that holds its URI (BR-RESOURCE-12).
    fn tell_listens_updated(&mut self, uri: &str) {
        let wanted: Vec<RequestId> = self
            .listens
            .iter()
            .filter(|(_, l)| {
                l.uris.iter().any(|u| {
                    u == uri
                        || (uri.starts_with(u.as_str())
                            && crate::fault::on(crate::fault::Fault::BrResourceListenPrefix))
                })
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in wanted {
            let params = json!({"uri": uri, "_meta": { (modern::META_SUBSCRIPTION): id.to_value() }});
            let n = Notification::new("notifications/resources/updated", Some(params));
            self.queue(Message::Notification(n), Route::Cause(id));
        }
    }

    /// list_changed waits for notifications/initialized: a change between initialize and
    /// initialized is announced right after it, never before, and never lost.
    fn queue_list_changed(&mut self, kind: ListKind) {
        // br.stateless.untagged-list-changed: a stream that never initialized is served as one that did.
        let ready = matches!(self.phase, Phase::Ready(_))
            || (self.phase == Phase::New && fault::on(Fault::BrStatelessUntaggedListChanged));
        if !ready {
            // Held for a legacy session to come (a modern-only stream hears nothing untagged,
            // BR-STATELESS-15); a stream that never initializes holds at most the three kinds.
            if !self.held.contains(&kind) {
                self.held.push(kind);
            }
            return;
        }
        let n = Notification::new(list_changed_method(kind), None);
        let key = Some(kind as u8);
        let t = Transmit { message: Message::Notification(n), route: Route::Session };
        self.outbox.push(t, 32, false, key);
    }

    fn queue(&mut self, message: Message, route: Route) {
        let t = Transmit { message, route };
        let size = match &t.message {
            Message::Notification(n) => 64 + n.params.as_ref().map_or(0, value_size),
            Message::Request(r) => 64 + r.params.as_ref().map_or(0, value_size),
            Message::Response(_) => 64,
        };
        let drop = droppable(&t);
        self.outbox.push(t, size, drop, None);
    }

    /// Puts a request of ours to the host; its answer comes as [`Action::Answer`].
    pub fn ask(&mut self, now: Instant, ask: Ask) -> Result<AskId, ReverseError> {
        let _ = now;
        if self.version().is_none() {
            return Err(ReverseError::NotInitialized);
        }
        let (method, params) = match ask {
            Ask::Sample(params) => {
                let tools = self.caps.get("sampling").and_then(|s| s.get("tools")).is_some();
                checks::sampling_params(&params, tools)?;
                ("sampling/createMessage", Some(params))
            }
            Ask::ListRoots => ("roots/list", None),
        };
        let n = self.next_ask;
        self.next_ask += 1;
        let id = RequestId::Number(n as i64);
        self.asks.insert(id.clone(), (AskId(n), method));
        // The call that caused it: the session's only call in flight (the bridge core asks only
        // sessions with calls in flight); with several the cause is unknown.
        let route = match self.calls.as_slice() {
            [only] => Route::Cause(only.clone()),
            _ => Route::Session,
        };
        self.queue(Message::Request(Request::new(id, method, params)), route);
        Ok(AskId(n))
    }

    /// The caller of [`HostCore::ask`] gave up: a late answer is ignored (BR-MCP-22).
    pub fn forget(&mut self, ask: AskId) {
        self.asks.retain(|_, (a, _)| *a != ask);
    }

    /// The bridge shuts down in order (BR-LIFECYCLE-09/10) and ends the listen subscriptions
    /// itself: each is answered with a complete result carrying its subscriptionId and, on
    /// stdio, then cancelled by `notifications/cancelled` naming it (BR-STATELESS-33). The
    /// shell lets the output drain, then [`HostCore::close`]s the session. Whether it answered
    /// any.
    pub fn shutdown(&mut self) -> bool {
        let listens = std::mem::take(&mut self.listens);
        if crate::fault::on(crate::fault::Fault::BrStatelessListenDroppedAtShutdown) {
            return false;
        }
        let answered = !listens.is_empty();
        for (id, _) in listens {
            // serverInfo joins the subscriptionId in `_meta`, as on every modern result
            // (BR-STATELESS-10).
            let result = json!({"_meta": { (modern::META_SUBSCRIPTION): id.to_value() }});
            self.reply(id.clone(), Ok(modern::decorate(result, &self.server_info(), None)));
            if !self.cfg.http {
                let params = json!({"requestId": id.to_value()});
                let n = Notification::new("notifications/cancelled", Some(params));
                self.queue(Message::Notification(n), Route::Session);
            }
        }
        answered
    }

    /// The session ends (stdin closed, DELETE, idle): requests forwarded are cancelled
    /// (BR-CANCEL-06), requests of ours fail, nothing more goes out.
    pub fn close(&mut self) {
        if self.phase == Phase::Ended {
            return;
        }
        let joined = self.joined;
        self.phase = Phase::Ended;
        self.listens.clear();
        let mut ids: Vec<RequestId> = self.pending.drain().map(|(id, _)| id).collect();
        ids.sort();
        if !fault::on(Fault::BrCancelNotOnSessionEnd) {
            self.actions.extend(ids.into_iter().map(|id| Action::Cancel { id }));
        }
        let mut asks: Vec<AskId> = self.asks.drain().map(|(_, (a, _))| a).collect();
        asks.sort();
        let ended = || Err(ReverseError::Host("the session ended".into()));
        self.actions.extend(asks.into_iter().map(|ask| Action::Answer { ask, outcome: ended() }));
        self.calls.clear();
        self.outbox = Outbox::new(self.cfg.queue);
        if joined {
            self.actions.push_back(Action::Closed);
        }
    }

    // ----- output -----

    /// The next message for the host. A response frees its request's id.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        loop {
            match self.outbox.pop()? {
                Popped::Item(t) => {
                    if let Message::Response(Response { id: Some(id), .. }) = &t.message {
                        self.gate.answered(&id.to_value());
                    }
                    return Some(t);
                }
                Popped::Dropped(n) => {
                    // The host reads slower than the tool process sends: it learns how many
                    // notifications it missed, where it missed them.
                    let (n, why) = (thousands(n), "the host reads slower than the tool process sends");
                    self.actions
                        .push_back(Action::Diag(format!("dropped {n} notifications for a host session: {why}")));
                    if crate::bridge_core::shapes::level_rank("warning") < self.threshold {
                        continue;
                    }
                    let data = format!("… {n} notifications dropped: {why} …");
                    let p = json!({"level": "warning", "logger": "protomcp-conform bridge", "data": data});
                    let message = Message::Notification(Notification::new("notifications/message", Some(p)));
                    return Some(Transmit { message, route: Route::Session });
                }
            }
        }
    }

    /// The next thing the shell must do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether request `id` was forwarded and waits for its outcome (cancelling it then means
    /// it gets no response, BR-CANCEL-02).
    pub fn is_pending(&self, id: &RequestId) -> bool {
        self.pending.contains_key(id)
    }

    /// Whether nothing waits to go out.
    pub fn is_idle(&self) -> bool {
        self.outbox.is_empty()
    }
}
