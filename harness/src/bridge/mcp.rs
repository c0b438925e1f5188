//! The MCP side of the reference bridge: rmcp's server over the [`Bridge`] core. This is the only
//! module that knows rmcp; it converts between rmcp's types and the JSON values of the core.

// Sampling, roots and logging are deprecated in rmcp (SEP-2577) but part of the protocol
// revisions this bridge serves (up to 2025-11-25).
#![allow(deprecated)]

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{self as m, ErrorCode, ErrorData};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{Peer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::gate::{Gate, Gates, Verdict};
use super::notes::Popped;
use super::{BoxFuture, Bridge, HostError, HostSession, ListKind, SessionId, state};

/// The newest protocol revision offered (older ones down to 2024-11-05 are accepted).
pub const NEWEST_VERSION: &str = "2025-11-25";

/// By default an HTTP session without any request for this long is ended (BR-HTTP-26).
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

static SESSION_IDS: AtomicU64 = AtomicU64::new(1);

/// The prefix of the cursors `--page-size` hands out (the offset of the next item follows).
const PAGE_CURSOR: &str = "conform-offset-";

/// One page of a list answer under `key` (BR-MCP-12): everything without `--page-size`,
/// else `page_size` items from the offset the cursor names, with a `nextCursor` while items
/// remain. A cursor this bridge did not issue is -32602 (BR-MCP-13).
fn page(size: Option<usize>, key: &str, items: Vec<Value>, cursor: Option<&str>) -> Result<Value, ErrorData> {
    let from = match cursor {
        None => 0,
        Some(c) => match c.strip_prefix(PAGE_CURSOR).and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if size.is_some() && n <= items.len() => n,
            _ => return Err(ErrorData::invalid_params("unknown cursor", None)),
        },
    };
    let Some(size) = size else { return Ok(json!({ (key): items })) };
    let end = (from + size).min(items.len());
    let mut page = json!({ (key): items[from..end] });
    if end < items.len() {
        page["nextCursor"] = json!(format!("{PAGE_CURSOR}{end}"));
    }
    Ok(page)
}

fn from_json<T: DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(format!("building the MCP result: {e}"), None))
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn host_error(e: HostError) -> ErrorData {
    ErrorData::new(ErrorCode(e.code()), e.to_string(), None)
}

enum Note {
    ListChanged(ListKind),
    Log(Value),
    Progress(Value),
    ResourceUpdated(String),
    Flush(oneshot::Sender<()>),
}

impl super::notes::Queued for Note {
    fn droppable(&self) -> bool {
        matches!(self, Note::Log(_) | Note::Progress(_) | Note::ResourceUpdated(_))
    }

    fn size(&self) -> usize {
        match self {
            Note::Log(v) | Note::Progress(v) => crate::bounded::value_size(v),
            Note::ResourceUpdated(uri) => 32 + uri.len(),
            Note::ListChanged(_) | Note::Flush(_) => 32,
        }
    }

    fn same(&self, other: &Self) -> bool {
        matches!((self, other), (Note::ListChanged(a), Note::ListChanged(b)) if a == b)
    }
}

/// One MCP session as the core sees it.
struct Session {
    id: SessionId,
    peer: OnceLock<Peer<RoleServer>>,
    /// Notifications for the host, bounded ([`crate::limits::BRIDGE_HOST_QUEUE`]).
    notes: Arc<super::notes::Queue<Note>>,
    /// Rank of the lowest level forwarded (BR-LOG-05); 0 forwards everything (BR-LOG-06).
    threshold: Arc<AtomicUsize>,
    subscriptions: Mutex<HashSet<String>>,
    bridge: Arc<Bridge>,
    /// Trace MCP messages here (HTTP); on stdio the transport filter traces the raw lines.
    trace: bool,
    /// Cancelled when the session ends (stdin EOF, HTTP DELETE, idle end): its calls in flight
    /// are cancelled at the tool process (BR-CANCEL-06).
    ended: tokio_util::sync::CancellationToken,
    /// Cancelled on notifications/initialized.
    ready: tokio_util::sync::CancellationToken,
    /// The JSON-RPC ids of this session's tools/call requests in flight, oldest first.
    calls: Mutex<Vec<m::RequestId>>,
    /// Stdio only: notifications go out as lines through the output of [`serve_stdio`], in
    /// order with the tools/call answers of [`fast_call`], instead of through rmcp's peer.
    lines: OnceLock<mpsc::UnboundedSender<Out>>,
}

impl Session {
    fn new(bridge: Arc<Bridge>, trace: bool) -> Arc<Session> {
        Arc::new(Session {
            id: SESSION_IDS.fetch_add(1, Ordering::Relaxed),
            peer: OnceLock::new(),
            notes: Arc::new(super::notes::Queue::new(crate::limits::BRIDGE_HOST_QUEUE)),
            threshold: Arc::new(AtomicUsize::new(0)),
            subscriptions: Mutex::new(HashSet::new()),
            bridge,
            trace,
            ended: tokio_util::sync::CancellationToken::new(),
            ready: tokio_util::sync::CancellationToken::new(),
            calls: Mutex::new(Vec::new()),
            lines: OnceLock::new(),
        })
    }

    /// The one tools/call of this session in flight, if there is exactly one: the call that
    /// caused a sampling or roots request of the tool process (the core sends those only to the
    /// session with calls in flight). Over HTTP such a request then travels on that call's
    /// response stream (BR-HTTP-14); with several calls in flight the cause is unknown and it
    /// goes on the session's GET stream.
    fn sole_call(&self) -> Option<m::RequestId> {
        let calls = self.calls.lock().unwrap();
        (calls.len() == 1).then(|| calls[0].clone())
    }

    /// Ends the session: its calls in flight are cancelled (BR-CANCEL-06).
    fn end(&self) {
        self.ended.cancel();
    }

    /// Binds the session to its peer and starts the task that sends its notifications in order.
    /// `list_changed` waits for notifications/initialized ([`Session::ready`]): a change between
    /// initialize and initialized is announced right after it, never before, and never lost.
    fn attach(&self, peer: Peer<RoleServer>) {
        if self.peer.set(peer.clone()).is_err() {
            return;
        }
        let rx = self.notes.clone();
        let threshold = self.threshold.clone();
        let bridge = self.bridge.clone();
        let trace = self.trace;
        let ready = self.ready.clone();
        let lines = self.lines.get().cloned();
        tokio::spawn(async move {
            let mut held: Vec<ListKind> = Vec::new();
            loop {
                let note = tokio::select! {
                    note = rx.recv() => match note {
                        None => break,
                        // The host reads slower than the tool process sends (the queue's bound):
                        // it learns how many notifications it missed, where it missed them.
                        Some(Popped::Dropped(n)) => {
                            let n = crate::bounded::thousands(n);
                            let why = "the host reads slower than the tool process sends";
                            super::diag(&format!("dropped {n} notifications for a host session: {why}"));
                            if state::level_rank("warning") < threshold.load(Ordering::Relaxed) {
                                continue;
                            }
                            let text = format!("… {n} notifications dropped: {why} …");
                            let p = json!({"level": "warning", "logger": "protomcp-conform bridge", "data": text});
                            vec![Note::Log(p)]
                        }
                        Some(Popped::Item(Note::ListChanged(kind))) if !ready.is_cancelled() => {
                            if !held.contains(&kind) {
                                held.push(kind);
                            }
                            continue;
                        }
                        Some(Popped::Item(note)) => vec![note],
                    },
                    _ = ready.cancelled(), if !held.is_empty() => held.drain(..).map(Note::ListChanged).collect(),
                };
                for note in note {
                    if !send_note(&peer, lines.as_ref(), &bridge, trace, note).await {
                        return;
                    }
                }
            }
        });
    }

    /// The host sent notifications/initialized: held `list_changed` notifications go out.
    fn initialized(&self) {
        self.ready.cancel();
    }

    fn caps(&self) -> Option<m::ClientCapabilities> {
        self.peer.get().and_then(|p| p.peer_info()).map(|i| i.capabilities.clone())
    }
}

impl Drop for Session {
    /// The task sending the notes ends once it has sent the ones queued.
    fn drop(&mut self) {
        self.notes.close();
    }
}

/// Sends one note to the host, through `lines` when given (stdio) or else rmcp's peer, and
/// waits until it is written; false when the session is gone.
async fn send_note(
    peer: &Peer<RoleServer>,
    lines: Option<&mpsc::UnboundedSender<Out>>,
    bridge: &Bridge,
    trace: bool,
    note: Note,
) -> bool {
    let (method, params) = match note {
        Note::Flush(done) => {
            let _ = done.send(());
            return true;
        }
        Note::ListChanged(ListKind::Tools) => ("notifications/tools/list_changed", None),
        Note::ListChanged(ListKind::Resources) => ("notifications/resources/list_changed", None),
        Note::ListChanged(ListKind::Prompts) => ("notifications/prompts/list_changed", None),
        Note::Log(p) => ("notifications/message", Some(p)),
        Note::Progress(p) => ("notifications/progress", Some(p)),
        Note::ResourceUpdated(uri) => ("notifications/resources/updated", Some(json!({"uri": uri}))),
    };
    let mut msg = json!({"method": method});
    if let Some(p) = params {
        msg["params"] = p;
    }
    if trace {
        bridge.trace_mcp(false, &msg);
    }
    match serde_json::from_value::<m::ServerNotification>(msg) {
        Ok(n) if let Some(out) = lines => {
            let message = m::JsonRpcNotification { jsonrpc: m::JsonRpcVersion2_0, notification: n };
            let Ok(line) = serde_json::to_string(&message) else { return true };
            let (written, done) = oneshot::channel();
            out.send(Out { line, answers: None, written: Some(written) }).is_ok() && done.await.is_ok()
        }
        Ok(n) => peer.send_notification(n).await.is_ok(),
        Err(e) => {
            eprintln!("protomcp-conform bridge: cannot build {method}: {e}");
            true
        }
    }
}

impl HostSession for Session {
    fn id(&self) -> SessionId {
        self.id
    }

    fn list_changed(&self, kind: ListKind) {
        let _ = self.notes.send(Note::ListChanged(kind));
    }

    fn log(&self, level: &'static str, logger: Option<String>, data: Value) {
        if state::level_rank(level) < self.threshold.load(Ordering::Relaxed) {
            return;
        }
        let mut p = json!({"level": level, "data": data});
        if let Some(l) = logger {
            p["logger"] = Value::String(l);
        }
        let _ = self.notes.send(Note::Log(p));
    }

    fn progress(&self, token: Value, progress: i64, total: Option<i64>, message: Option<String>) {
        let mut p = json!({"progressToken": token, "progress": progress});
        if let Some(t) = total {
            p["total"] = json!(t);
        }
        if let Some(msg) = message {
            p["message"] = Value::String(msg);
        }
        let _ = self.notes.send(Note::Progress(p));
    }

    fn resource_updated(&self, uri: &str) {
        if self.subscriptions.lock().unwrap().contains(uri) {
            let _ = self.notes.send(Note::ResourceUpdated(uri.to_owned()));
        }
    }

    fn flush(&self) -> BoxFuture<()> {
        let (tx, rx) = oneshot::channel();
        let queued = self.notes.send(Note::Flush(tx)).is_ok() && self.peer.get().is_some();
        Box::pin(async move {
            if queued {
                let _ = rx.await;
            }
        })
    }

    fn can_sample(&self) -> bool {
        self.caps().is_some_and(|c| c.sampling.is_some())
    }

    fn can_list_roots(&self) -> bool {
        self.caps().is_some_and(|c| c.roots.is_some())
    }

    fn sample(&self, params: Value) -> BoxFuture<Result<Value, String>> {
        let origin = self.sole_call();
        let peer = self.peer.get().cloned();
        let bridge = self.bridge.clone();
        let trace = self.trace;
        Box::pin(async move {
            let peer = peer.ok_or("the session is not initialized")?;
            if trace {
                bridge.trace_mcp(false, &json!({"method": "sampling/createMessage", "params": params}));
            }
            let params: m::CreateMessageRequestParams =
                serde_json::from_value(params).map_err(|e| format!("invalid sampling request: {e}"))?;
            // The checks rmcp's `create_message` makes before it sends.
            let invalid = |e: String| rmcp::ServiceError::McpError(ErrorData::invalid_params(e, None)).to_string();
            if (params.tools.is_some() || params.tool_choice.is_some()) && !peer.supports_sampling_tools() {
                return Err(invalid(
                    "tools or toolChoice provided but client does not support sampling tools capability".into(),
                ));
            }
            params.validate().map_err(invalid)?;
            let req = m::ServerRequest::CreateMessageRequest(m::CreateMessageRequest::new(params));
            let r = match ask_host(&peer, req, origin).await? {
                m::ClientResult::CreateMessageResult(r) => to_json(&r),
                other => return Err(format!("sampling/createMessage answered with {}", to_json(&other))),
            };
            if trace {
                bridge.trace_mcp(true, &json!({"result": r}));
            }
            Ok(r)
        })
    }

    fn list_roots(&self) -> BoxFuture<Result<Value, String>> {
        let origin = self.sole_call();
        let peer = self.peer.get().cloned();
        let bridge = self.bridge.clone();
        let trace = self.trace;
        Box::pin(async move {
            let peer = peer.ok_or("the session is not initialized")?;
            if trace {
                bridge.trace_mcp(false, &json!({"method": "roots/list"}));
            }
            let req = m::ServerRequest::ListRootsRequest(m::ListRootsRequest {
                method: Default::default(),
                extensions: Default::default(),
            });
            let r = match ask_host(&peer, req, origin).await? {
                m::ClientResult::ListRootsResult(r) => to_json(&r),
                other => return Err(format!("roots/list answered with {}", to_json(&other))),
            };
            if trace {
                bridge.trace_mcp(true, &json!({"result": r}));
            }
            Ok(r)
        })
    }
}

/// Sends a request to the host and waits for its answer; `origin`, the tools/call that caused
/// it, makes rmcp's HTTP transport send it on that call's response stream (BR-HTTP-14).
async fn ask_host(
    peer: &Peer<RoleServer>,
    mut req: m::ServerRequest,
    origin: Option<m::RequestId>,
) -> Result<m::ClientResult, String> {
    use rmcp::model::GetExtensions;
    if let Some(id) = origin {
        req.extensions_mut().insert(rmcp::service::OriginatingRequestId(id));
    }
    peer.send_request(req).await.map_err(|e| e.to_string())
}

/// Removes a tools/call from its session's calls in flight when the handler ends.
struct InFlight<'a> {
    session: &'a Session,
    id: m::RequestId,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut calls = self.session.calls.lock().unwrap();
        if let Some(i) = calls.iter().position(|c| *c == self.id) {
            calls.remove(i);
        }
    }
}

/// The HTTP sessions by `Mcp-Session-Id`, so that DELETE ends ours at once (BR-CANCEL-06),
/// and their gates.
#[derive(Default)]
struct HttpSessions {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    gates: Gates,
}

type Registry = Arc<HttpSessions>;

/// Ends the session when rmcp drops the last clone of its handler (the transport ended: stdin
/// closed, HTTP DELETE or rmcp's idle timeout): the core forgets it, so nothing leaks.
struct Life {
    bridge: Arc<Bridge>,
    session: Arc<Session>,
    registry: Option<(Registry, Arc<OnceLock<String>>)>,
}

impl Drop for Life {
    fn drop(&mut self) {
        self.session.end();
        self.bridge.remove_session(self.session.id);
        if let Some((registry, key)) = &self.registry
            && let Some(k) = key.get()
        {
            registry.sessions.lock().unwrap().remove(k);
            registry.gates.remove(k);
        }
    }
}

/// The rmcp server handler of one session.
#[derive(Clone)]
pub struct Handler {
    bridge: Arc<Bridge>,
    session: Arc<Session>,
    /// HTTP only: where on_initialized records the session under its `Mcp-Session-Id`.
    registry: Option<(Registry, Arc<OnceLock<String>>)>,
    _life: Arc<Life>,
}

impl Handler {
    /// `trace`: record MCP messages at the handler (transports that do not trace raw lines).
    pub fn new(bridge: Arc<Bridge>, trace: bool) -> Handler {
        Handler::with_registry(bridge, trace, None)
    }

    fn with_registry(bridge: Arc<Bridge>, trace: bool, registry: Option<Registry>) -> Handler {
        let session = Session::new(bridge.clone(), trace);
        let registry = registry.map(|r| (r, Arc::new(OnceLock::new())));
        let life = Arc::new(Life { bridge: bridge.clone(), session: session.clone(), registry: registry.clone() });
        Handler { bridge, session, registry, _life: life }
    }

    fn as_host(&self) -> Arc<dyn HostSession> {
        self.session.clone()
    }

    /// Records a host request as the JSON-RPC message it was (transports that do not trace raw lines).
    /// A list method's answer (`tools/list`, …): one page of `items` under `key`, traced.
    fn list_page<T: serde::Serialize + DeserializeOwned>(
        &self,
        id: &m::RequestId,
        method: &str,
        key: &str,
        items: Vec<Value>,
        request: &Option<m::PaginatedRequestParams>,
    ) -> Result<T, ErrorData> {
        self.trace_request(id, method, request);
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        self.traced(id, page(self.bridge.cfg.page_size, key, items, cursor).and_then(from_json))
    }

    fn trace_request(&self, id: &m::RequestId, method: &str, params: &impl serde::Serialize) {
        if !self.session.trace {
            return;
        }
        let msg = json!({"jsonrpc": "2.0", "id": to_json(id), "method": method, "params": to_json(params)});
        self.bridge.trace_mcp(true, &msg);
    }

    /// Records the answer to request `id` as the JSON-RPC response it becomes.
    fn traced<T: serde::Serialize>(&self, id: &m::RequestId, r: Result<T, ErrorData>) -> Result<T, ErrorData> {
        if !self.session.trace {
            return r;
        }
        let msg = match &r {
            Ok(v) => json!({"jsonrpc": "2.0", "id": to_json(id), "result": to_json(v)}),
            Err(e) => json!({"jsonrpc": "2.0", "id": to_json(id), "error": to_json(e)}),
        };
        self.bridge.trace_mcp(false, &msg);
        r
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> m::ServerConfig {
        // BR-MCP-05/07: everything advertised always; subscriptions are implemented
        // (BR-RESOURCE-08); never tasks (BR-TASK-03).
        serde_json::from_value(json!({
            "protocolVersion": NEWEST_VERSION,
            "capabilities": {
                "tools": {"listChanged": true},
                "completions": {},
                "logging": {},
                "resources": {"listChanged": true, "subscribe": true},
                "prompts": {"listChanged": true},
            },
            "serverInfo": {"name": "protomcp-conform-bridge", "version": env!("CARGO_PKG_VERSION")},
        }))
        .expect("static server info")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [m::ProtocolVersion]> {
        Cow::Borrowed(m::ProtocolVersion::known_up_to(&m::ProtocolVersion::V_2025_11_25))
    }

    async fn initialize(
        &self,
        request: m::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::InitializeResult, ErrorData> {
        self.trace_request(&context.id, "initialize", &request);
        context.peer.set_peer_info(request.clone());
        self.session.attach(context.peer.clone());
        // The session follows the lists from initialize on; what changes before
        // notifications/initialized is announced right after it (see `Session::attach`).
        self.bridge.add_session(self.as_host());
        self.traced(&context.id, self.negotiate_initialize(&request))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.session.trace {
            self.bridge.trace_mcp(true, &json!({"method": "notifications/initialized"}));
        }
        self.session.attach(context.peer.clone());
        if let Some((registry, key)) = &self.registry
            && let Some(id) = context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())
            && key.set(id.to_owned()).is_ok()
        {
            registry.sessions.lock().unwrap().insert(id.to_owned(), self.session.clone());
        }
        self.bridge.add_session(self.as_host());
        self.session.initialized();
    }

    async fn list_tools(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListToolsResult, ErrorData> {
        self.list_page(&context.id, "tools/list", "tools", self.bridge.tools(), &request)
    }

    async fn call_tool(
        &self,
        request: m::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::CallToolResponse, ErrorData> {
        self.trace_request(&context.id, "tools/call", &request);
        let progress = context.meta.get_progress_token().map(|t| to_json(&t));
        let arguments = request.arguments.map(Value::Object);
        let ct = context.ct.clone();
        let ended = self.session.ended.clone();
        let cancel = async move {
            tokio::select! {
                _ = ct.cancelled() => {}
                _ = ended.cancelled() => {}
            }
        };
        self.session.calls.lock().unwrap().push(context.id.clone());
        let _in_flight = InFlight { session: &self.session, id: context.id.clone() };
        let r = self.bridge.call_tool(&self.as_host(), &request.name, arguments, progress, cancel).await;
        let r = match r {
            Ok(v) => from_json::<m::CallToolResult>(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r).map(m::CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListResourcesResult, ErrorData> {
        self.list_page(&context.id, "resources/list", "resources", self.bridge.resources(), &request)
    }

    async fn list_resource_templates(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListResourceTemplatesResult, ErrorData> {
        self.list_page(&context.id, "resources/templates/list", "resourceTemplates", self.bridge.templates(), &request)
    }

    async fn read_resource(
        &self,
        request: m::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ReadResourceResponse, ErrorData> {
        self.trace_request(&context.id, "resources/read", &request);
        let r = match self.bridge.read_resource(&request.uri).await {
            Ok(v) => from_json::<m::ReadResourceResult>(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r).map(Into::into)
    }

    async fn subscribe(
        &self,
        request: m::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.trace_request(&context.id, "resources/subscribe", &request);
        self.session.subscriptions.lock().unwrap().insert(request.uri);
        self.traced(&context.id, Ok(json!({})))?;
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: m::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.trace_request(&context.id, "resources/unsubscribe", &request);
        self.session.subscriptions.lock().unwrap().remove(&request.uri);
        self.traced(&context.id, Ok(json!({})))?;
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListPromptsResult, ErrorData> {
        self.list_page(&context.id, "prompts/list", "prompts", self.bridge.prompts(), &request)
    }

    async fn get_prompt(
        &self,
        request: m::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::GetPromptResponse, ErrorData> {
        self.trace_request(&context.id, "prompts/get", &request);
        let r = match self.bridge.get_prompt(&request.name, request.arguments.map(Value::Object)).await {
            Ok(v) => from_json::<m::GetPromptResult>(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r).map(Into::into)
    }

    async fn complete(
        &self,
        request: m::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::CompleteResult, ErrorData> {
        self.trace_request(&context.id, "completion/complete", &request);
        let reference = to_json(&request.r#ref);
        let r = match self.bridge.complete(&reference, &request.argument.name, &request.argument.value).await {
            Ok(v) => from_json(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r)
    }

    async fn set_level(
        &self,
        request: m::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.trace_request(&context.id, "logging/setLevel", &request);
        let level = to_json(&request.level);
        let Some(rank) = level.as_str().and_then(|l| state::LEVELS.iter().position(|x| *x == l)) else {
            return self.traced(&context.id, Err(ErrorData::invalid_params("unknown log level", None)));
        };
        self.session.threshold.store(rank, Ordering::Relaxed);
        self.traced(&context.id, Ok(json!({})))?;
        Ok(())
    }
}

/// One line for the host on stdio, written whole by the output task of [`serve_stdio`].
struct Out {
    line: String,
    /// The line answers the host's request with this id: written, the id is free in the gate.
    answers: Option<Value>,
    /// Resolved once the line is written (a notification waits for it, as rmcp's peer does).
    written: Option<oneshot::Sender<()>>,
}

/// The stdio session's tools/call requests answered by [`fast_call`], by gate key of their id:
/// a notifications/cancelled for one of them cancels it here (rmcp never saw the request).
type FastCalls = Arc<Mutex<HashMap<String, tokio_util::sync::CancellationToken>>>;

/// The hot path of stdio: a `tools/call` of an initialized session that the gate passed goes to
/// the core directly, its answer (or error) straight to the output as a line, in order with the
/// session's notifications ([`Session::lines`]). rmcp would parse the line again into its
/// message types and hand the request and its response through a task and a channel each; it
/// keeps serving initialize, every other method, the notifications from the host and the
/// bridge's own requests (sampling, roots) and their answers. Returns the message when it is not
/// such a call.
///
/// What rmcp does with such a call, this does too: the progress token of `_meta` (as rmcp reads
/// it), the call's id in the session's calls in flight, cancellation by the host (no answer,
/// BR-CANCEL-02) and by the session's end, the result built as rmcp's `CallToolResult` (a result
/// that does not fit is an internal error) and written as rmcp writes a response.
fn fast_call(session: &Arc<Session>, calls: &FastCalls, out: &mpsc::UnboundedSender<Out>, v: Value) -> Option<Value> {
    let fits = session.ready.is_cancelled()
        && v.get("method").and_then(Value::as_str) == Some("tools/call")
        && v.get("id").is_some_and(|id| id.is_string() || id.is_i64())
        && v.get("params").and_then(Value::as_object).is_some_and(|p| {
            p.get("name").is_some_and(Value::is_string)
                && p.get("arguments").is_none_or(|a| a.is_object() || a.is_null())
                && p.get("_meta").is_none_or(Value::is_object)
                && p.keys().all(|k| k == "name" || k == "arguments" || k == "_meta")
        });
    if !fits {
        return Some(v);
    }
    let Value::Object(mut msg) = v else { return None };
    let id = msg.remove("id").unwrap_or_default();
    let Some(Value::Object(mut params)) = msg.remove("params") else { return None };
    let Some(Value::String(name)) = params.remove("name") else { return None };
    let arguments = params.remove("arguments").filter(|a| !a.is_null());
    let progress = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .and_then(|t| serde_json::from_value::<m::ProgressToken>(t.clone()).ok())
        .map(|t| to_json(&t));
    let Ok(rid) = serde_json::from_value::<m::RequestId>(id.clone()) else { return None };
    let ct = tokio_util::sync::CancellationToken::new();
    let key = id.to_string();
    calls.lock().unwrap().insert(key.clone(), ct.clone());
    let (session, calls, out) = (session.clone(), calls.clone(), out.clone());
    tokio::spawn(async move {
        let ended = session.ended.clone();
        let cancel = async move {
            tokio::select! {
                _ = ct.cancelled() => {}
                _ = ended.cancelled() => {}
            }
        };
        session.calls.lock().unwrap().push(rid.clone());
        let in_flight = InFlight { session: &session, id: rid };
        let host: Arc<dyn HostSession> = session.clone();
        let r = session.bridge.call_tool(&host, &name, arguments, progress, cancel).await;
        drop(in_flight);
        calls.lock().unwrap().remove(&key);
        let body = match r.map(from_json::<m::CallToolResult>) {
            Err(HostError::Cancelled) => return,
            Ok(Ok(result)) => serde_json::to_string(&result).map(|r| format!("\"result\":{r}")),
            Ok(Err(e)) => serde_json::to_string(&e).map(|e| format!("\"error\":{e}")),
            Err(e) => serde_json::to_string(&host_error(e)).map(|e| format!("\"error\":{e}")),
        };
        let body = body.unwrap_or_else(|e| format!(r#""error":{{"code":-32603,"message":"writing the answer: {e}"}}"#));
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#);
        let _ = out.send(Out { line, answers: Some(id), written: None });
    });
    None
}

/// Serves one MCP session on stdin/stdout until the host closes stdin or `stop` resolves.
/// Lines pass through the session's [`Gate`] and, with `--trace`, into the trace; stdout gets
/// whole lines only (the server's, the gate's answers and the hot path's never interleave).
pub async fn serve_stdio(bridge: Arc<Bridge>, stop: impl std::future::Future<Output = ()>) -> Result<(), String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let handler = Handler::new(bridge.clone(), false);
    let session = handler.session.clone();
    let session_id = session.id;
    let (server_in, mut feed) = tokio::io::duplex(1 << 16);
    let (server_out, from_server) = tokio::io::duplex(1 << 16);
    let (answers, mut answers_rx) = mpsc::unbounded_channel::<Out>();
    let _ = session.lines.set(answers.clone());
    let gate = Arc::new(Mutex::new(Gate::new()));
    // Output: the server's lines, the gate's answers, the hot path's answers and the session's
    // notifications, one whole line at a time.
    let out_bridge = bridge.clone();
    let out_gate = gate.clone();
    let output = tokio::spawn(async move {
        let mut stdout = super::stdio::stdout();
        let mut lines = BufReader::new(from_server).lines();
        // A notification waits for the server's first line, the answer to initialize: before it
        // the host has no session to take a notification in (a tool process that logs right
        // after its handshake would otherwise be heard before the bridge's initialize result).
        // The session's sender waits for each note to be written, so at most one is held here.
        let mut opened = false;
        let mut held: Option<Out> = None;
        loop {
            let (line, from_server, written) = tokio::select! {
                l = lines.next_line() => match l { Ok(Some(l)) => (l, true, None), _ => break },
                a = answers_rx.recv() => match a {
                    Some(note @ Out { written: Some(_), .. }) if !opened => {
                        held = Some(note);
                        continue;
                    }
                    Some(Out { line, answers, written }) => {
                        // The gate's own answers never end a request of the server's.
                        if let Some(id) = answers {
                            out_gate.lock().unwrap().answered(&id);
                        }
                        (line, false, written)
                    }
                    None => continue,
                },
            };
            if from_server {
                out_gate.lock().unwrap().outbound_line(&line);
            }
            let mut batch = vec![(line, written)];
            if from_server && !opened {
                opened = true;
                batch.extend(held.take().map(|o| (o.line, o.written)));
            }
            for (mut line, written) in batch {
                if out_bridge.tracing()
                    && let Ok(v) = serde_json::from_str::<Value>(&line)
                {
                    out_bridge.trace_mcp(false, &v);
                }
                line.push('\n');
                if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                    return;
                }
                if let Some(w) = written {
                    let _ = w.send(());
                }
            }
        }
    });
    let in_bridge = bridge.clone();
    let in_session = handler.session.clone();
    let fast: FastCalls = Arc::default();
    let input = tokio::spawn(async move {
        let mut lines = super::host_lines::HostLines::new(super::stdio::stdin(), crate::limits::BRIDGE_HOST_LINE);
        while let Some(line) = lines.next().await {
            let mut line = match line {
                super::host_lines::HostLine::Text(l) => l,
                bad => {
                    // BR-MCP-16/17: answered with id null, and the session goes on.
                    let Some(v) = bad.answer(lines.max()) else { continue };
                    if in_bridge.tracing() {
                        in_bridge.trace_host_line(true, &format!("<{}>", v["error"]["message"].as_str().unwrap_or("")));
                    }
                    let _ = answers.send(Out { line: v.to_string(), answers: None, written: None });
                    continue;
                }
            };
            let (verdict, parsed) = gate.lock().unwrap().inbound_parsed(&line);
            if in_bridge.tracing() {
                match &parsed {
                    Some(v) => in_bridge.trace_mcp(true, v),
                    None => in_bridge.trace_host_line(true, &line),
                }
            }
            match verdict {
                Verdict::Pass => {
                    let Some(v) = parsed else { continue };
                    // The host cancels a call of the hot path: rmcp never saw it.
                    if v.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
                        && let Some(rid) = v.get("params").and_then(|p| p.get("requestId"))
                        && let Some(ct) = fast.lock().unwrap().remove(&rid.to_string())
                    {
                        ct.cancel();
                        continue;
                    }
                    if fast_call(&in_session, &fast, &answers, v).is_none() {
                        continue;
                    }
                    line.push('\n');
                    if feed.write_all(line.as_bytes()).await.is_err() {
                        break;
                    }
                }
                Verdict::Answer(v) => {
                    let _ = answers.send(Out { line: v.to_string(), answers: None, written: None });
                }
                Verdict::Drop => {}
            }
        }
        // End-of-file on stdin ends the session: its calls in flight are cancelled
        // (BR-CANCEL-06), and the server sees end-of-file too (BR-LIFECYCLE-09).
        in_session.end();
        let _ = feed.shutdown().await;
    });
    tokio::pin!(stop);
    let served = async {
        match handler.serve((server_in, server_out)).await {
            Ok(running) => running.waiting().await.map(|_| ()).map_err(|e| e.to_string()),
            // The host went away before initializing: an orderly end all the same.
            Err(e) => {
                eprintln!("protomcp-conform bridge: the MCP session ended before it started: {e}");
                Ok(())
            }
        }
    };
    let r = tokio::select! {
        r = served => r,
        _ = &mut stop => Ok(()),
    };
    input.abort();
    session.end();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), output).await;
    bridge.remove_session(session_id);
    r
}

/// Accepts the next connection of the HTTP endpoint, with `TCP_NODELAY` set. A response goes
/// out as several small writes (the head with the SSE priming event, then the message, then the
/// end of the chunked body); with Nagle's algorithm on, each write after the first waits for the
/// client's (delayed) acknowledgement, about 40 ms per call on a keep-alive connection.
pub async fn accept(listener: &tokio::net::TcpListener) -> std::io::Result<tokio::net::TcpStream> {
    let (stream, _) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Serves MCP's Streamable HTTP transport on `listener` (rmcp's server, one session per
/// `Mcp-Session-Id`), behind `guard` (Host, Origin, credentials), until `stop` resolves.
pub async fn serve_http(
    bridge: Arc<Bridge>,
    listener: tokio::net::TcpListener,
    guard: super::http::Guard,
    idle: std::time::Duration,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{SessionManager, StreamableHttpServerConfig, StreamableHttpService};

    let ct = tokio_util::sync::CancellationToken::new();
    // Host and Origin are checked by `guard`, in front of rmcp, as the spec words them.
    let config =
        StreamableHttpServerConfig::default().disable_allowed_hosts().with_cancellation_token(ct.child_token());
    let factory_bridge = bridge.clone();
    let registry: Registry = Arc::default();
    let factory_registry = registry.clone();
    // Idle sessions end after `idle` (BR-HTTP-26); rmcp then drops the handler (`Life`).
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(idle);
    let manager = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(Handler::with_registry(factory_bridge.clone(), true, Some(factory_registry.clone()))),
        manager.clone(),
        config,
    );
    let guard = Arc::new(guard);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            a = accept(&listener) => match a {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("protomcp-conform bridge: accept failed: {e}");
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let service = service.clone();
        let guard = guard.clone();
        let registry = registry.clone();
        let bridge = bridge.clone();
        let manager = manager.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let service = service.clone();
                let guard = guard.clone();
                let registry = registry.clone();
                let bridge = bridge.clone();
                let manager = manager.clone();
                async move {
                    let header = |name: http::header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
                    let refusal = guard.check(
                        req.method().as_str(),
                        req.uri().path(),
                        header(http::header::HOST),
                        header(http::header::ORIGIN),
                        super::http::Credentials {
                            authorization: header(http::header::AUTHORIZATION),
                            api_key: header(http::header::HeaderName::from_static("x-api-key")),
                        },
                    );
                    let response = match refusal {
                        Some(r) => {
                            let mut resp = hyper::Response::new(Full::new(Bytes::from(r.reason)).boxed());
                            *resp.status_mut() = http::StatusCode::from_u16(r.status).unwrap_or_default();
                            let headers = resp.headers_mut();
                            if r.challenge {
                                headers
                                    .insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
                            }
                            if r.status == 405 {
                                headers
                                    .insert(http::header::ALLOW, http::HeaderValue::from_static("GET, POST, DELETE"));
                            }
                            resp
                        }
                        None => {
                            // DELETE ends the session at once: its calls in flight are cancelled
                            // (BR-CANCEL-06) and it gets no more notifications; rmcp then closes it.
                            if req.method() == http::Method::DELETE
                                && let Some(id) = header(http::header::HeaderName::from_static("mcp-session-id"))
                                && let Some(session) = registry.sessions.lock().unwrap().remove(id)
                            {
                                session.end();
                                bridge.remove_session(session.id);
                                registry.gates.remove(id);
                            }
                            if req.method() == http::Method::POST {
                                gated_post(req, &service, &manager, &registry).await
                            } else if req.method() == http::Method::DELETE
                                && let Some(id) = header(http::header::HeaderName::from_static("mcp-session-id"))
                                && !manager.has_session(&Arc::from(id)).await.unwrap_or(false)
                            {
                                // BR-HTTP-12: an ended or unknown session is gone (rmcp answers
                                // a DELETE of an unknown id with 202).
                                let body = Full::new(Bytes::from("Not Found: Session not found")).boxed();
                                let mut resp = hyper::Response::new(body);
                                *resp.status_mut() = http::StatusCode::NOT_FOUND;
                                resp
                            } else {
                                service.handle(req).await
                            }
                        }
                    };
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
        });
    }
    ct.cancel();
    Ok(())
}

type HttpService = rmcp::transport::streamable_http_server::StreamableHttpService<
    Handler,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
>;
type HttpBody = http_body_util::combinators::BoxBody<hyper::body::Bytes, std::convert::Infallible>;

// The largest POST body the gate reads (rmcp's own limit).
use protomcp_proto::mcp_input::MAX_POST_BODY;

/// Frees the id of a request passed on to rmcp when the body of its POST's response ends.
struct Release {
    registry: Registry,
    session: String,
    id: Value,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.registry.gates.done(&self.session, &self.id);
    }
}

/// The body of the response to a POSTed request, ending with the event that answers it.
///
/// rmcp closes a request's event stream after the answer from another task, a little later:
/// the end of the chunked body then goes out in a write of its own, one more segment and one
/// more wake-up of the client per call. Nothing follows the answer on that stream, so the body
/// ends with the answer's frame, and hyper writes the answer and the end together. The request's
/// id is free in the gate ([`Release`]) from then on (or when the body is dropped unanswered).
struct UntilAnswer {
    inner: HttpBody,
    /// `None` once the answer went out.
    release: Option<Release>,
}

impl UntilAnswer {
    /// Whether `data` (events of the stream) holds the response to request `id`.
    fn answers(data: &[u8], id: &Value) -> bool {
        use serde::de::IgnoredAny;
        #[derive(serde::Deserialize)]
        struct Head {
            id: Option<Value>,
            method: Option<IgnoredAny>,
            result: Option<IgnoredAny>,
            error: Option<IgnoredAny>,
        }
        let text = String::from_utf8_lossy(data);
        text.lines().filter_map(|l| l.strip_prefix("data:")).any(|d| {
            matches!(serde_json::from_str::<Head>(d.trim()),
                Ok(Head { id: Some(i), method: None, result, error }) if &i == id && (result.is_some() || error.is_some()))
        })
    }
}

impl hyper::body::Body for UntilAnswer {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let Some(release) = &self.release else { return Poll::Ready(None) };
        let id = release.id.clone();
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && frame.data_ref().is_some_and(|d| UntilAnswer::answers(d, &id))
        {
            self.release = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.release.is_none() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// How long the head of a request's event stream waits for the answer, so that a quick call
/// goes out in one write (head, priming event, answer, end of the body) instead of two; a
/// slower call's stream starts after this as it would have.
const HOLD_FOR_ANSWER: std::time::Duration = std::time::Duration::from_millis(2);

/// A request's event stream whose first events, those that came within [`HOLD_FOR_ANSWER`]
/// (up to the answer), go out as one frame with the head.
struct Held {
    first: Option<hyper::body::Bytes>,
    rest: UntilAnswer,
}

impl Held {
    async fn gather(mut rest: UntilAnswer) -> Held {
        use http_body_util::BodyExt;
        let mut first = Vec::new();
        let deadline = tokio::time::sleep(HOLD_FOR_ANSWER);
        tokio::pin!(deadline);
        while rest.release.is_some() {
            let frame = tokio::select! {
                f = rest.frame() => f,
                _ = &mut deadline => break,
            };
            match frame.map(|f| f.map(|f| f.into_data())) {
                Some(Ok(Ok(data))) => first.extend_from_slice(&data),
                // rmcp's event streams carry data only; anything else ends the stream here.
                _ => {
                    rest.release = None;
                    break;
                }
            }
        }
        Held { first: (!first.is_empty()).then(|| first.into()), rest }
    }
}

impl hyper::body::Body for Held {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if let Some(first) = self.first.take() {
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(first))));
        }
        std::pin::Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }
}

/// A POST of an established session goes through the session's [`Gate`] (as stdio lines do);
/// anything else (initialize, a missing or unknown session, an unsupported protocol version,
/// another media type) is left to rmcp, which answers it as BR-HTTP-08/11/15 want.
async fn gated_post(
    req: hyper::Request<hyper::body::Incoming>,
    service: &HttpService,
    manager: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    registry: &Registry,
) -> hyper::Response<HttpBody> {
    use http_body_util::{BodyExt, Full, Limited};
    use hyper::body::Bytes;
    use rmcp::transport::streamable_http_server::SessionManager;

    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let json = header("content-type").is_some_and(|c| c.to_ascii_lowercase().starts_with("application/json"));
    let accepts_json = header("accept").is_none_or(|a| a.contains("application/json") || a.contains("*/*"));
    let known = m::ProtocolVersion::known_up_to(&m::ProtocolVersion::V_2025_11_25);
    let version_ok = header("mcp-protocol-version").is_none_or(|v| known.iter().any(|k| k.as_str() == v));
    let session = match header("mcp-session-id") {
        Some(id) if json && accepts_json && version_ok => id,
        _ => return service.handle(req).await,
    };
    if !manager.has_session(&Arc::from(session.as_str())).await.unwrap_or(false) {
        return service.handle(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_POST_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let mut resp = hyper::Response::new(Full::new(Bytes::from(format!("cannot read the body: {e}"))).boxed());
            *resp.status_mut() = http::StatusCode::PAYLOAD_TOO_LARGE;
            return resp;
        }
    };
    let (verdict, id) = registry.gates.check(&session, &bytes);
    // A message without an id to answer (parse error, invalid request) is a bad request; an error
    // answer to a request is an ordinary JSON-RPC response; nothing to answer is 202 (BR-HTTP-07).
    let status = protomcp_proto::mcp_input::post_status(&verdict).and_then(|s| http::StatusCode::from_u16(s).ok());
    match verdict {
        Verdict::Answer(v) => {
            let status = status.unwrap_or(http::StatusCode::OK);
            let mut resp = hyper::Response::new(Full::new(Bytes::from(v.to_string())).boxed());
            *resp.status_mut() = status;
            resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
            resp
        }
        Verdict::Drop => {
            let mut resp = hyper::Response::new(Full::new(Bytes::new()).boxed());
            *resp.status_mut() = status.unwrap_or(http::StatusCode::ACCEPTED);
            resp
        }
        Verdict::Pass => {
            let resp = service.handle(hyper::Request::from_parts(parts, Full::new(bytes))).await;
            match id {
                None => resp,
                Some(id) => {
                    let release = Release { registry: registry.clone(), session, id };
                    let stream = resp
                        .headers()
                        .get(http::header::CONTENT_TYPE)
                        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
                    let (head, body) = resp.into_parts();
                    let body = UntilAnswer { inner: body, release: Some(release) };
                    let body = if stream { Held::gather(body).await.boxed() } else { body.boxed() };
                    hyper::Response::from_parts(head, body)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::body::{Bytes, Frame};

    /// A response body as rmcp's event stream of one request: `events`, then nothing more and
    /// no end (rmcp would close it later, from another task).
    fn stream_of(events: &[&str]) -> HttpBody {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
            events.iter().map(|e| Ok(Frame::data(Bytes::from(e.to_string())))).collect();
        let s =
            futures_util::stream::StreamExt::chain(futures_util::stream::iter(frames), futures_util::stream::pending());
        http_body_util::StreamBody::new(s).boxed()
    }

    fn until_answer(events: &[&str], id: Value) -> (UntilAnswer, Registry) {
        let registry: Registry = Arc::default();
        let call = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).unwrap();
        assert_eq!(registry.gates.check("s", &call), (Verdict::Pass, Some(id.clone())));
        let release = Release { registry: registry.clone(), session: "s".into(), id };
        (UntilAnswer { inner: stream_of(events), release: Some(release) }, registry)
    }

    #[tokio::test]
    async fn a_request_stream_ends_with_its_answer_and_frees_the_id() {
        let priming = "data: \nid: 0/1\nretry: 3000\n\n";
        let answer = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1/1\n\n";
        let (body, registry) = until_answer(&[priming, answer], json!(7));
        let all = tokio::time::timeout(std::time::Duration::from_secs(5), body.collect()).await;
        let all = all.expect("the body ends after the answer, without waiting for rmcp").unwrap().to_bytes();
        assert_eq!(all, format!("{priming}{answer}").as_bytes());
        // The id is free again.
        let again = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})).unwrap();
        assert_eq!(registry.gates.check("s", &again), (Verdict::Pass, Some(json!(7))));
    }

    #[tokio::test]
    async fn a_quick_answer_goes_out_in_one_frame_with_the_priming_event() {
        let priming = "data: \nid: 0/1\nretry: 3000\n\n";
        let answer = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1/1\n\n";
        let (body, _registry) = until_answer(&[priming, answer], json!(7));
        let mut held = Held::gather(body).await;
        let first = held.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, format!("{priming}{answer}").as_bytes());
        assert!(held.frame().await.is_none());
        // A slow call: its stream starts with what came, and stays open.
        let (body, _registry) = until_answer(&[priming], json!(7));
        let mut held = Held::gather(body).await;
        assert_eq!(held.frame().await.unwrap().unwrap().into_data().unwrap(), priming.as_bytes());
        assert!(!hyper::body::Body::is_end_stream(&held));
    }

    #[tokio::test]
    async fn a_request_stream_stays_open_until_its_own_answer() {
        // A progress notification, a request of the bridge's with the same id, another id's answer.
        let events = [
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":7,\"progress\":1}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}\n\n",
        ];
        let (mut body, _registry) = until_answer(&events, json!(7));
        for _ in events {
            assert!(body.frame().await.is_some());
        }
        assert!(!hyper::body::Body::is_end_stream(&body));
        let more = tokio::time::timeout(std::time::Duration::from_millis(100), body.frame()).await;
        assert!(more.is_err(), "the stream is still open");
    }
}
