//! The reference bridge: MCP hosts on one side, one tool process on the other (spec §22, §24).
//!
//! - [`state`]: sans-IO state (active set and list modes, MCP shapes of Envelope lists);
//! - [`link`]: one tool-process connection (reader, writer, pending requests);
//! - [`process`]: the tool process and its socket (start, accept, terminate);
//! - [`mcp`]: the MCP side, the only module that knows rmcp;
//! - this module: [`Bridge`], the core that the MCP side calls: handshake, list pulls, call
//!   forwarding with middleware, progress, cancellation, routing of reverse requests to the
//!   calling session, restarts with backoff.
//!
//! The core speaks JSON values towards the MCP side ([`HostSession`]), so rmcp stays behind
//! one module.

pub mod gate;
pub mod host_lines;
pub mod http;
pub mod link;
pub mod mcp;
pub mod notes;
pub mod process;
pub mod state;
pub mod stdio;
pub mod trace;
pub mod watch;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message as _;
use protomcp_proto::EnvelopeExt;
use protomcp_proto::envelopes as env;
use protomcp_proto::frame::MAX_FRAME;
use protomcp_proto::pb::{self, Envelope, envelope::Msg};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use link::{Dispatch, HsEvent, Link, Reply};
use state::ToolSet;

/// `HANDSHAKE_QUIET` (spec §1.5) and the default `CALL_TIMEOUT` (BR-LIFECYCLE-12).
pub use protomcp_proto::spec::{DEFAULT_CALL_TIMEOUT, HANDSHAKE_QUIET};
/// Consecutive restart attempts after a failure (BR-LIFECYCLE-05).
pub const RESTART_ATTEMPTS: u32 = 3;
/// How long a shutting-down bridge lets the tool process leave on its own after closing the
/// connection, before it terminates it.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// Delay before the first restart attempt; doubled for each further one.
pub const RESTART_DELAY: Duration = Duration::from_millis(250);

/// A hidden switch of the reference bridge for the harness's own tests (tests/testsuite/explore_bridge.rs):
/// `unanswered-after-restart`: a tools/call that arrives after the tool process was restarted is
/// never answered (a planted bug `explore --bridge` must find); `unknown-tool-as-result`: a
/// tools/call of an unknown tool gets an isError result instead of an error (a difference a
/// differential run must show).
pub const PLANTED_BUG: &str = "PROTOMCP_CONFORM_BRIDGE_PLANTED_BUG";

/// How the bridge runs its tool process.
#[derive(Debug, Clone)]
pub struct Config {
    /// The tool process's argv.
    pub command: Vec<String>,
    /// `CALL_TIMEOUT`: bounds every wait for the tool process.
    pub call_timeout: Duration,
    /// Socket path; default: `tp.sock` in a private temp dir.
    pub socket: Option<PathBuf>,
    /// Decoded transcript of both sides (`--trace FILE`).
    pub trace: Option<PathBuf>,
    /// Items per page of the list methods (`--page-size`); `None`: one page.
    pub page_size: Option<usize>,
    /// Reload by sending ReloadRequest to the running tool process (`--reload request`)
    /// instead of restarting it.
    pub reload_by_request: bool,
}

impl Config {
    pub fn new(command: Vec<String>) -> Self {
        Config {
            command,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            socket: None,
            trace: None,
            page_size: None,
            reload_by_request: false,
        }
    }
}

/// Why the bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the tool process failed to start: {0}")]
    Failed(String),
}

/// An error answer towards a host, with the JSON-RPC code it maps to (§22.2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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
    pub fn code(&self) -> i32 {
        match self {
            HostError::InvalidParams(_) => -32602,
            HostError::ResourceNotFound(_) => -32002,
            HostError::Internal(_) | HostError::Cancelled => -32603,
        }
    }
}

/// Identity of a host session.
pub type SessionId = u64;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Which list changed (for `notifications/*/list_changed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// The bridge's view of one MCP session; implemented by the MCP side. Notifications are queued
/// in order; [`HostSession::flush`] resolves when everything queued before it has been sent.
pub trait HostSession: Send + Sync {
    fn id(&self) -> SessionId;
    fn list_changed(&self, kind: ListKind);
    /// `notifications/message`, already filtered by nothing: the session applies its threshold.
    fn log(&self, level: &'static str, logger: Option<String>, data: Value);
    fn progress(&self, token: Value, progress: i64, total: Option<i64>, message: Option<String>);
    /// `notifications/resources/updated` when the session subscribed to `uri`.
    fn resource_updated(&self, uri: &str);
    fn flush(&self) -> BoxFuture<()>;
    fn can_sample(&self) -> bool;
    fn can_list_roots(&self) -> bool;
    /// `sampling/createMessage` with these params; the result as JSON.
    fn sample(&self, params: Value) -> BoxFuture<Result<Value, String>>;
    /// `roots/list`; the result as JSON.
    fn list_roots(&self) -> BoxFuture<Result<Value, String>>;
}

#[derive(Debug, Clone, PartialEq)]
enum Status {
    Starting,
    Ready,
    Down(String),
}

struct ProgressRoute {
    session: Arc<dyn HostSession>,
    token: Value,
    last: Option<i64>,
}

#[derive(Default)]
struct Lists {
    resources: Vec<pb::ResourceDefinition>,
    templates: Vec<pb::ResourceTemplateDefinition>,
    prompts: Vec<pb::PromptDefinition>,
}

struct Inner {
    status: Status,
    link: Option<Arc<Link>>,
    tools: ToolSet,
    lists: Lists,
    progress: HashMap<String, ProgressRoute>,
    /// Calls in flight per session (sampling and roots routing, BR-SAMPLING-02).
    calls: HashMap<SessionId, usize>,
    sessions: Vec<Arc<dyn HostSession>>,
    process: Option<process::ToolProcess>,
}

/// The bridge core, shared by every session.
pub struct Bridge {
    pub(crate) cfg: Config,
    rids: AtomicU64,
    generation: AtomicU64,
    inner: Mutex<Inner>,
    shutdown: tokio_util::sync::CancellationToken,
    trace: Option<trace::Trace>,
    me: std::sync::Weak<Bridge>,
    /// Bumped whenever a new link is served; the supervisor waits on it.
    served: tokio::sync::watch::Sender<u64>,
    /// Reloads never overlap (BR-RELOAD-07); while one runs the supervisor stands aside.
    reload_lock: tokio::sync::Mutex<()>,
    reloading: std::sync::atomic::AtomicBool,
}

/// Decrements the in-flight count of a session when a call ends.
struct CallGuard<'a> {
    bridge: &'a Bridge,
    session: SessionId,
    token: Option<String>,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let mut g = self.bridge.inner.lock().unwrap();
        if let Some(n) = g.calls.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                g.calls.remove(&self.session);
            }
        }
        if let Some(t) = &self.token {
            g.progress.remove(t);
        }
    }
}

fn diag(line: &str) {
    eprintln!("protomcp-conform bridge: {line}");
}

impl Bridge {
    /// Starts the tool process and completes the handshake and list pulls; a failure here is a
    /// failed start (BR-LIFECYCLE-02). Then supervises it: restarts with backoff after a failure.
    pub async fn start(cfg: Config) -> Result<Arc<Bridge>, StartError> {
        let trace = match &cfg.trace {
            Some(p) => Some(trace::Trace::create(p)?),
            None => None,
        };
        let bridge = Arc::new_cyclic(|me| Bridge {
            cfg,
            rids: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                status: Status::Starting,
                link: None,
                tools: ToolSet::default(),
                lists: Lists::default(),
                progress: HashMap::new(),
                calls: HashMap::new(),
                sessions: Vec::new(),
                process: None,
            }),
            shutdown: tokio_util::sync::CancellationToken::new(),
            trace,
            me: me.clone(),
            served: tokio::sync::watch::channel(0).0,
            reload_lock: tokio::sync::Mutex::new(()),
            reloading: std::sync::atomic::AtomicBool::new(false),
        });
        bridge.clone().start_instance().await.map_err(StartError::Failed)?;
        tokio::spawn(bridge.clone().supervise());
        Ok(bridge)
    }

    fn next_rid(&self) -> String {
        format!("req-{}", self.rids.fetch_add(1, Ordering::Relaxed))
    }

    pub fn call_timeout(&self) -> Duration {
        self.cfg.call_timeout
    }

    /// One start: process, connection, handshake, list pulls. On success the link is served.
    async fn start_instance(self: Arc<Self>) -> Result<(), String> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let mut proc = process::ToolProcess::spawn(&self.cfg.command, self.cfg.socket.as_deref())
            .map_err(|e| format!("cannot start {:?}: {e}", self.cfg.command))?;
        let stream = match proc.accept(self.cfg.call_timeout).await {
            Ok(s) => s,
            Err(e) => {
                proc.terminate().await;
                return Err(e);
            }
        };
        let (link, hs) = Link::start(stream, generation, self.clone());
        match self.handshake(&link, hs).await {
            Ok(lists) => {
                self.install(&link, lists, Some(proc));
                Ok(())
            }
            Err(e) => {
                link.close(format!("failed start: {e}"));
                proc.terminate().await;
                Err(e)
            }
        }
    }

    /// Serves `link` with the tool set it staged and `lists` (and `proc`, after a start), and
    /// sends `list_changed` for every list that differs from what was served (BR-RELOAD-05).
    fn install(&self, link: &Arc<Link>, lists: Lists, proc: Option<process::ToolProcess>) {
        let mut changed = Vec::new();
        {
            let mut g = self.inner.lock().unwrap();
            let new_tools = link.staging.lock().unwrap().take().unwrap_or_default();
            if g.tools.snapshot() != new_tools.snapshot() {
                changed.push(ListKind::Tools);
            }
            if g.lists.resources != lists.resources || g.lists.templates != lists.templates {
                changed.push(ListKind::Resources);
            }
            if g.lists.prompts != lists.prompts {
                changed.push(ListKind::Prompts);
            }
            g.tools = new_tools;
            g.lists = lists;
            g.link = Some(link.clone());
            g.status = Status::Ready;
            if let Some(p) = proc {
                g.process = Some(p);
            }
        }
        self.served.send_modify(|n| *n += 1);
        for kind in changed {
            self.broadcast_list_changed(kind);
        }
    }

    async fn wait_reply(&self, link: &Link, rid: &str, rx: tokio::sync::oneshot::Receiver<Reply>) -> Reply {
        match tokio::time::timeout(self.cfg.call_timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err("the tool-process connection ended".into()),
            Err(_) => {
                link.forget(rid);
                Err(format!("no reply from the tool process within {:?}", self.cfg.call_timeout))
            }
        }
    }

    async fn request(&self, link: &Link, envelope: Envelope) -> Reply {
        let rid = self.next_rid();
        let envelope = envelope.with_rid(rid.clone());
        self.trace(false, &envelope);
        let rx = link.request(&rid, envelope);
        self.wait_reply(link, &rid, rx).await
    }

    /// §5: ListToolsRequest, the burst (marker or `HANDSHAKE_QUIET`), then the list pulls.
    async fn handshake(&self, link: &Arc<Link>, mut hs: mpsc::UnboundedReceiver<HsEvent>) -> Result<Lists, String> {
        match self.request(link, env::list_tools()).await? {
            Msg::ToolList(t) => {
                let mut staging = link.staging.lock().unwrap();
                let set = staging.get_or_insert_with(ToolSet::default);
                for r in set.register(&t.tools) {
                    diag(&format!("tool {:?} left out of tools/list: {}", r.name, r.reason));
                }
            }
            other => {
                return Err(format!(
                    "the tool process answered ListToolsRequest with {}",
                    protomcp_proto::Arm::of(&other).name()
                ));
            }
        }
        // BR-HANDSHAKE-06/07: the marker ends it at once; otherwise 500 ms of quiet, restarted
        // by each registration.
        loop {
            match tokio::time::timeout(HANDSHAKE_QUIET, hs.recv()).await {
                Ok(Some(HsEvent::Registration)) => continue,
                Ok(Some(HsEvent::Marker)) => break,
                Ok(Some(HsEvent::BurstToolList)) => continue,
                Ok(None) => {
                    return Err(link.end.lock().unwrap().clone().unwrap_or_else(|| "connection ended".into()));
                }
                Err(_) => break,
            }
        }
        link.end_handshake();
        self.pull_lists(link).await
    }

    /// Step (7) of §5, concurrently; an unanswered list counts as empty (BR-HANDSHAKE-10).
    async fn pull_lists(&self, link: &Arc<Link>) -> Result<Lists, String> {
        let (r, t, p) = tokio::join!(
            self.request(link, env::list_resources()),
            self.request(link, env::list_resource_templates()),
            self.request(link, env::list_prompts()),
        );
        if link.is_closed() {
            return Err(link.end.lock().unwrap().clone().unwrap_or_default());
        }
        let mut lists = Lists::default();
        match r {
            Ok(Msg::ResourceListResponse(r)) => lists.resources = r.resources,
            other => diag(&format!("resource list: {}", describe(&other))),
        }
        match t {
            Ok(Msg::ResourceTemplateListResponse(t)) => lists.templates = t.templates,
            other => diag(&format!("resource template list: {}", describe(&other))),
        }
        match p {
            Ok(Msg::PromptListResponse(p)) => lists.prompts = p.prompts,
            other => diag(&format!("prompt list: {}", describe(&other))),
        }
        Ok(lists)
    }

    /// Waits for the served link to end, fails everything pending, and restarts with backoff.
    async fn supervise(self: Arc<Self>) {
        let mut served = self.served.subscribe();
        loop {
            let link = self.inner.lock().unwrap().link.clone();
            let Some(link) = link.filter(|l| !l.is_closed() || !self.reloading.load(Ordering::SeqCst)) else {
                // No tool process (given up, or a reload is replacing it): wait for the next.
                tokio::select! {
                    r = served.changed() => if r.is_err() { return },
                    _ = self.shutdown.cancelled() => return,
                }
                continue;
            };
            tokio::select! {
                _ = link.closed() => {}
                _ = self.shutdown.cancelled() => return,
            }
            if self.shutdown.is_cancelled() {
                return;
            }
            if self.reloading.load(Ordering::SeqCst) {
                continue;
            }
            let reason = link.end.lock().unwrap().clone().unwrap_or_default();
            diag(&format!("tool process {} failed: {reason}", link.generation));
            let proc = {
                let mut g = self.inner.lock().unwrap();
                g.link = None;
                g.status = Status::Down(reason.clone());
                g.progress.clear();
                g.process.take()
            };
            // BR-LIFECYCLE-08: a process that closed the connection but lives on is ended.
            if let Some(mut p) = proc {
                if let Some(status) = p.exit_status() {
                    diag(&format!("tool process {} exited: {status}", link.generation));
                }
                p.terminate().await;
            }
            let mut restarted = false;
            for attempt in 0..RESTART_ATTEMPTS {
                let delay = RESTART_DELAY * 2u32.pow(attempt);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.shutdown.cancelled() => return,
                }
                diag(&format!("restarting the tool process (attempt {} of {RESTART_ATTEMPTS})", attempt + 1));
                self.inner.lock().unwrap().status = Status::Starting;
                match self.clone().start_instance().await {
                    Ok(()) => {
                        diag("tool process restarted");
                        restarted = true;
                        break;
                    }
                    Err(e) => {
                        diag(&format!("restart failed: {e}"));
                        self.inner.lock().unwrap().status = Status::Down(e);
                    }
                }
            }
            if !restarted {
                // BR-LIFECYCLE-07: an empty tool list, announced.
                diag("giving up on the tool process; serving an empty tool list");
                let changed = {
                    let mut g = self.inner.lock().unwrap();
                    let had = !g.tools.active_names().is_empty();
                    g.tools.clear();
                    had
                };
                if changed {
                    self.broadcast_list_changed(ListKind::Tools);
                }
            }
        }
    }

    /// Restarts the tool process (watch mode, BR-RELOAD-01): calls in flight finish first
    /// (bounded by `CALL_TIMEOUT`); new calls get an error meanwhile; then a fresh process with
    /// a full handshake, and `list_changed` for every list that changed (BR-RELOAD-04/05).
    /// A failed start keeps the bridge up and waits for the next trigger (BR-RELOAD-08).
    pub async fn reload(&self) {
        let _one = self.reload_lock.lock().await;
        if self.cfg.reload_by_request {
            let link = self.inner.lock().unwrap().link.clone().filter(|l| !l.is_closed());
            if let Some(link) = link {
                diag("reloading the tool process (ReloadRequest)");
                match self.reload_in_place(&link).await {
                    Ok(()) => diag("tool process reloaded"),
                    Err(e) => diag(&format!("reload failed, the previous lists stay: {e}")),
                }
                return;
            }
        }
        self.reloading.store(true, Ordering::SeqCst);
        let link = {
            let mut g = self.inner.lock().unwrap();
            g.status = Status::Starting;
            g.link.clone()
        };
        if let Some(link) = &link {
            let deadline = tokio::time::Instant::now() + self.cfg.call_timeout;
            while link.pending_count() > 0 && !link.is_closed() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let proc = {
            let mut g = self.inner.lock().unwrap();
            g.link = None;
            g.progress.clear();
            g.process.take()
        };
        if let Some(link) = link {
            link.close("reloading the tool process".into());
        }
        if let Some(mut p) = proc {
            p.terminate().await;
        }
        diag("reloading the tool process");
        match self.self_arc().start_instance().await {
            Ok(()) => diag("tool process reloaded"),
            Err(e) => {
                diag(&format!("reload failed: {e}"));
                self.inner.lock().unwrap().status = Status::Down(e);
            }
        }
        self.reloading.store(false, Ordering::SeqCst);
    }

    /// A reload by ReloadRequest (`--reload request`, BR-RELOAD-01): the running tool process
    /// answers, sends its burst (BR-RELOAD-02: the ToolListResponse with empty rid is the new
    /// list, registrations are acknowledged, nothing else is sent before the marker or
    /// `HANDSHAKE_QUIET` of silence), then the lists are pulled again and served. Calls in
    /// flight go on (TP-RELOAD-04); calls that arrive meanwhile get an error. A refusal keeps
    /// the previous lists and registrations (BR-RELOAD-03).
    async fn reload_in_place(&self, link: &Arc<Link>) -> Result<(), String> {
        let (mut hs, before) = link.begin_reload();
        self.inner.lock().unwrap().status = Status::Starting;
        let fail = |e: String| {
            link.abort_reload(before.clone());
            let mut g = self.inner.lock().unwrap();
            if !link.is_closed() {
                g.status = Status::Ready;
            }
            Err(e)
        };
        match self.request(link, env::reload()).await {
            Ok(Msg::ReloadResponse(r)) if r.success => {}
            Ok(Msg::ReloadResponse(r)) => return fail(format!("the tool process refused: {}", r.error)),
            Ok(other) => {
                return fail(format!(
                    "the tool process answered ReloadRequest with {}",
                    protomcp_proto::Arm::of(&other).name()
                ));
            }
            Err(e) => return fail(e),
        }
        let mut list = false;
        loop {
            match tokio::time::timeout(HANDSHAKE_QUIET, hs.recv()).await {
                Ok(Some(HsEvent::BurstToolList)) => list = true,
                Ok(Some(HsEvent::Registration)) => {}
                Ok(Some(HsEvent::Marker)) => break,
                Ok(None) => return fail("the connection ended during the reload".into()),
                Err(_) => break,
            }
        }
        link.end_handshake();
        if !list {
            return fail("the burst had no ToolListResponse".into());
        }
        let lists = match self.pull_lists(link).await {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        self.install(link, lists, None);
        Ok(())
    }

    /// Ends the bridge: the connection closed, the tool process gone, the socket removed
    /// (BR-LIFECYCLE-09/10/11).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let (link, proc) = {
            let mut g = self.inner.lock().unwrap();
            g.status = Status::Down("the bridge is shutting down".into());
            (g.link.take(), g.process.take())
        };
        if let Some(l) = &link {
            l.close("the bridge is shutting down".into());
        }
        if let Some(mut p) = proc {
            // What is still queued (CancelRequest for the calls of an ended session,
            // BR-CANCEL-06) is written and the connection closed; a process that leaves on
            // end-of-file is not signalled (BR-LIFECYCLE-09).
            p.wait_exit(SHUTDOWN_GRACE).await;
            p.terminate().await;
        }
        // The reader records the connection's end in the trace; the process must not exit
        // before it has (the tool process is gone, so its end of the socket is closed).
        if let Some(l) = link {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, l.reader_finished()).await;
        }
    }

    // ----- sessions -----

    /// Adds a session (once: adding it again changes nothing).
    pub fn add_session(&self, s: Arc<dyn HostSession>) {
        let mut g = self.inner.lock().unwrap();
        if !g.sessions.iter().any(|x| x.id() == s.id()) {
            g.sessions.push(s);
        }
    }

    pub fn remove_session(&self, id: SessionId) {
        self.inner.lock().unwrap().sessions.retain(|s| s.id() != id);
    }

    fn sessions(&self) -> Vec<Arc<dyn HostSession>> {
        self.inner.lock().unwrap().sessions.clone()
    }

    fn broadcast_list_changed(&self, kind: ListKind) {
        for s in self.sessions() {
            s.list_changed(kind);
        }
    }

    fn served_link(&self) -> Result<Arc<Link>, HostError> {
        let g = self.inner.lock().unwrap();
        match (&g.status, &g.link) {
            (Status::Ready, Some(l)) if !l.is_closed() => Ok(l.clone()),
            (Status::Down(r), _) => Err(HostError::Internal(format!("no tool process is connected ({r})"))),
            _ => Err(HostError::Internal("no tool process is connected (it is restarting)".into())),
        }
    }

    // ----- lists -----

    pub fn tools(&self) -> Vec<Value> {
        self.inner.lock().unwrap().tools.active().map(state::mcp_tool).collect()
    }

    pub fn resources(&self) -> Vec<Value> {
        state::mcp_resources(&self.inner.lock().unwrap().lists.resources)
    }

    pub fn templates(&self) -> Vec<Value> {
        state::mcp_templates(&self.inner.lock().unwrap().lists.templates)
    }

    pub fn prompts(&self) -> Vec<Value> {
        state::mcp_prompts(&self.inner.lock().unwrap().lists.prompts)
    }

    /// Whether the tool process registered any resource or template / prompt (BR-MCP-06).
    pub fn has_resources_prompts(&self) -> (bool, bool) {
        let g = self.inner.lock().unwrap();
        (!g.lists.resources.is_empty() || !g.lists.templates.is_empty(), !g.lists.prompts.is_empty())
    }

    // ----- tools/call -----

    /// Forwards one tools/call (§6, §9, §13). `progress` is the host's progressToken;
    /// `cancel` resolves when the host cancels the request.
    pub async fn call_tool(
        &self,
        session: &Arc<dyn HostSession>,
        name: &str,
        arguments: Option<Value>,
        progress: Option<Value>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Value, HostError> {
        let args = match arguments {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(HostError::InvalidParams("arguments must be a JSON object".into())),
        };
        let link = self.served_link()?;
        let has_output_schema = {
            let g = self.inner.lock().unwrap();
            match g.tools.get_active(name) {
                Some(d) => !d.output_schema_json.is_empty(),
                None if std::env::var_os(PLANTED_BUG).is_some_and(|v| v == "unknown-tool-as-result") => {
                    // The planted divergence (tests/testsuite/explore_bridge.rs): an isError result where
                    // BR-CALL-04 wants error -32602.
                    return Ok(json!({"content": [{"type": "text", "text": format!("unknown tool: {name}")}], "isError": true}));
                }
                None => return Err(HostError::InvalidParams(format!("unknown tool: {name}"))),
            }
        };
        if std::env::var_os(PLANTED_BUG).is_some_and(|v| v == "unanswered-after-restart")
            && link.generation > 1
        {
            // The planted bug (tests/testsuite/explore_bridge.rs): after a restart, calls are never
            // answered (BR-MCP-19), as a bridge that lost its new link's call table would do.
            std::future::pending::<()>().await;
        }
        let mut middleware = link.middleware.lock().unwrap().clone();
        middleware.sort_by_key(|(_, p)| *p); // stable: ties keep registration order
        let mut args_json = args.to_string();
        tokio::pin!(cancel);
        for (mw, _) in &middleware {
            let req = pb::MiddlewareInterceptRequest {
                middleware_name: mw.clone(),
                phase: "before".into(),
                tool_name: name.into(),
                arguments_json: args_json.clone(),
                ..Default::default()
            };
            match self.request(&link, req.into()).await {
                Ok(Msg::MiddlewareInterceptResponse(r)) => {
                    if r.reject {
                        let text = format!("rejected by middleware {mw}: {}", r.reject_reason);
                        return Ok(json!({"content": [{"type": "text", "text": text}], "isError": true}));
                    }
                    if !r.arguments_json.is_empty() {
                        args_json = r.arguments_json;
                    }
                }
                other => return Err(HostError::Internal(format!("middleware {mw}: {}", describe(&other)))),
            }
        }
        let rid = self.next_rid();
        let token = progress.as_ref().map(|_| format!("pt-{rid}"));
        let call = pb::CallToolRequest {
            name: name.into(),
            arguments_json: args_json.clone(),
            progress_token: token.clone().unwrap_or_default(),
        };
        let envelope = Envelope::from(call).with_rid(rid.clone());
        if envelope.encoded_len() > MAX_FRAME as usize {
            // BR-FRAME-04
            return Err(HostError::InvalidParams("the arguments do not fit into one frame".into()));
        }
        {
            let mut g = self.inner.lock().unwrap();
            *g.calls.entry(session.id()).or_default() += 1;
            if let (Some(t), Some(host)) = (&token, progress) {
                g.progress.insert(t.clone(), ProgressRoute { session: session.clone(), token: host, last: None });
            }
        }
        let guard = CallGuard { bridge: self, session: session.id(), token };
        self.trace(false, &envelope);
        let rx = link.request(&rid, envelope);
        let reply = tokio::select! {
            r = rx => r.unwrap_or_else(|_| Err("the tool-process connection ended".into())),
            _ = &mut cancel => {
                // BR-CANCEL-01/03
                link.forget(&rid);
                let c = env::cancel(&rid);
                self.trace(false, &c);
                let _ = link.send(c);
                return Err(HostError::Cancelled);
            }
            _ = tokio::time::sleep(self.cfg.call_timeout) => {
                // BR-CALL-15, BR-CANCEL-05
                link.forget(&rid);
                let c = env::cancel(&rid);
                self.trace(false, &c);
                let _ = link.send(c);
                return Err(HostError::Internal(format!("the tool did not answer within {:?}", self.cfg.call_timeout)));
            }
        };
        drop(guard); // no progress after the result (BR-PROGRESS-03)
        let mut result = match reply {
            Ok(Msg::CallResult(r)) => r,
            other => return Err(HostError::Internal(format!("tools/call {name}: {}", describe(&other)))),
        };
        // BR-CALL-14: the lists take effect before the response.
        if !result.enable_tools.is_empty() || !result.disable_tools.is_empty() {
            let changed = {
                let mut g = self.inner.lock().unwrap();
                let current = g.link.as_ref().is_some_and(|l| Arc::ptr_eq(l, &link));
                current && g.tools.apply_result_lists(&result.enable_tools, &result.disable_tools)
            };
            if changed {
                self.broadcast_list_changed(ListKind::Tools);
            }
        }
        for (mw, _) in middleware.iter().rev() {
            let req = pb::MiddlewareInterceptRequest {
                middleware_name: mw.clone(),
                phase: "after".into(),
                tool_name: name.into(),
                arguments_json: args_json.clone(),
                result_json: result.result_json.clone(),
                is_error: result.is_error,
            };
            match self.request(&link, req.into()).await {
                Ok(Msg::MiddlewareInterceptResponse(r)) => {
                    if !r.result_json.is_empty() {
                        result.result_json = r.result_json;
                    }
                }
                other => return Err(HostError::Internal(format!("middleware {mw}: {}", describe(&other)))),
            }
        }
        session.flush().await;
        Ok(state::call_result(&result, has_output_schema))
    }

    // ----- resources, prompts, completion -----

    pub async fn read_resource(&self, uri: &str) -> Result<Value, HostError> {
        let link = self.served_link()?;
        match self.request(&link, env::read_resource(uri)).await {
            Ok(Msg::ReadResourceResponse(r)) => match state::mcp_contents(uri, &r) {
                Some(c) => Ok(json!({"contents": c})),
                None => Err(HostError::ResourceNotFound(format!("resource not found: {uri}"))),
            },
            other => Err(HostError::Internal(format!("resources/read: {}", describe(&other)))),
        }
    }

    pub async fn get_prompt(&self, name: &str, arguments: Option<Value>) -> Result<Value, HostError> {
        let def = {
            let g = self.inner.lock().unwrap();
            g.lists.prompts.iter().find(|p| p.name == name).cloned()
        };
        let Some(def) = def else { return Err(HostError::InvalidParams(format!("unknown prompt: {name}"))) };
        let args = match arguments {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(HostError::InvalidParams("arguments must be an object".into())),
        };
        for a in def.arguments.iter().filter(|a| a.required) {
            if !args.contains_key(&a.name) {
                return Err(HostError::InvalidParams(format!("missing required argument: {}", a.name)));
            }
        }
        let link = self.served_link()?;
        let args_json = Value::Object(args).to_string();
        match self.request(&link, env::get_prompt(name, &args_json)).await {
            Ok(Msg::GetPromptResponse(r)) => {
                let mut messages = Vec::new();
                for m in &r.messages {
                    if m.role != "user" && m.role != "assistant" {
                        return Err(HostError::Internal(format!("prompt message with role {:?}", m.role)));
                    }
                    let content = match serde_json::from_str::<Value>(&m.content_json) {
                        Ok(v) if v.get("type").is_some_and(Value::is_string) => v,
                        _ => json!({"type": "text", "text": m.content_json}),
                    };
                    messages.push(json!({"role": m.role, "content": content}));
                }
                let mut out = json!({"messages": messages});
                if !r.description.is_empty() {
                    out["description"] = Value::String(r.description.clone());
                }
                Ok(out)
            }
            other => Err(HostError::Internal(format!("prompts/get: {}", describe(&other)))),
        }
    }

    /// completion/complete (§16): `reference` is the MCP `ref` object.
    pub async fn complete(&self, reference: &Value, arg_name: &str, arg_value: &str) -> Result<Value, HostError> {
        let ref_type = reference.get("type").and_then(Value::as_str).unwrap_or_default();
        let ref_name = match ref_type {
            "ref/prompt" => reference.get("name"),
            "ref/resource" => reference.get("uri"),
            other => return Err(HostError::InvalidParams(format!("unknown reference type {other:?}"))),
        }
        .and_then(Value::as_str)
        .unwrap_or_default();
        let link = self.served_link()?;
        match self.request(&link, env::completion(ref_type, ref_name, arg_name, arg_value)).await {
            Ok(Msg::CompletionResponse(r)) => {
                let more = r.values.len() > 100;
                let values: Vec<&String> = r.values.iter().take(100).collect();
                let mut c = json!({"values": values});
                if r.total > 0 && r.total as usize >= values.len() {
                    c["total"] = json!(r.total);
                }
                if r.has_more || more {
                    c["hasMore"] = json!(true);
                }
                Ok(json!({"completion": c}))
            }
            other => Err(HostError::Internal(format!("completion/complete: {}", describe(&other)))),
        }
    }

    // ----- trace -----

    fn trace(&self, from_tp: bool, envelope: &Envelope) {
        if let Some(t) = &self.trace {
            t.frame(from_tp, envelope);
        }
    }

    /// Whether `--trace` is on.
    pub fn tracing(&self) -> bool {
        self.trace.is_some()
    }

    /// Records one MCP message in the trace (`from_host` tells the direction).
    pub fn trace_mcp(&self, from_host: bool, message: &Value) {
        if let Some(t) = &self.trace {
            t.host(from_host, message);
        }
    }

    /// Records a host line that is not JSON.
    pub fn trace_host_line(&self, from_host: bool, line: &str) {
        if let Some(t) = &self.trace {
            t.host_line(from_host, line);
        }
    }

    fn sole_caller(&self) -> Option<Arc<dyn HostSession>> {
        let g = self.inner.lock().unwrap();
        let mut with_calls = g.calls.iter().filter(|(_, n)| **n > 0).map(|(id, _)| *id);
        let only = with_calls.next()?;
        if with_calls.next().is_some() {
            return None;
        }
        g.sessions.iter().find(|s| s.id() == only).cloned()
    }

    async fn sampling(&self, req: pb::SamplingRequest) -> pb::SamplingResponse {
        let fail = |e: String| pb::SamplingResponse { error: e, ..Default::default() };
        let Some(session) = self.sole_caller() else {
            return fail("no single MCP session with a call in flight to ask for sampling".into());
        };
        if !session.can_sample() {
            return fail("the MCP client did not declare the sampling capability".into());
        }
        let messages = match serde_json::from_str::<Value>(&req.messages_json) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .map(|mut m| {
                    if let Some(Value::String(s)) = m.get("content") {
                        m["content"] = json!({"type": "text", "text": s});
                    }
                    m
                })
                .collect::<Vec<_>>(),
            _ => return fail("messages_json is not a JSON array".into()),
        };
        let mut params = json!({
            "messages": messages,
            "maxTokens": if req.max_tokens > 0 { req.max_tokens } else { 1024 },
        });
        if !req.system_prompt.is_empty() {
            params["systemPrompt"] = Value::String(req.system_prompt.clone());
        }
        if let Ok(prefs @ Value::Object(_)) = serde_json::from_str::<Value>(&req.model_preferences_json) {
            params["modelPreferences"] = prefs;
        }
        match tokio::time::timeout(self.cfg.call_timeout, session.sample(params)).await {
            Err(_) => fail("the MCP client did not answer sampling/createMessage in time".into()),
            Ok(Err(e)) => fail(e),
            Ok(Ok(r)) => pb::SamplingResponse {
                role: r.get("role").and_then(Value::as_str).unwrap_or("assistant").to_owned(),
                content_json: r.get("content").map(Value::to_string).unwrap_or_default(),
                model: r.get("model").and_then(Value::as_str).unwrap_or_default().to_owned(),
                stop_reason: r.get("stopReason").and_then(Value::as_str).unwrap_or_default().to_owned(),
                error: String::new(),
            },
        }
    }

    async fn roots(&self) -> pb::ListRootsResponse {
        let Some(session) = self.sole_caller().filter(|s| s.can_list_roots()) else {
            return pb::ListRootsResponse::default();
        };
        match tokio::time::timeout(self.cfg.call_timeout, session.list_roots()).await {
            Ok(Ok(r)) => pb::ListRootsResponse {
                roots: r
                    .get("roots")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|root| pb::RootDef {
                        uri: root.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        name: root.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    })
                    .collect(),
            },
            _ => pb::ListRootsResponse::default(),
        }
    }
}

fn describe(r: &Reply) -> String {
    match r {
        Ok(m) => format!("unexpected reply {}", protomcp_proto::Arm::of(m).name()),
        Err(e) => e.clone(),
    }
}

impl Dispatch for Bridge {
    fn control(&self, op: &state::ToolOp) -> Vec<String> {
        let (changed, active) = {
            let mut g = self.inner.lock().unwrap();
            let changed = g.tools.apply(op);
            (changed, g.tools.active_names())
        };
        if changed {
            self.broadcast_list_changed(ListKind::Tools);
        }
        active
    }

    fn progress(&self, p: pb::ProgressNotification) {
        let target = {
            let mut g = self.inner.lock().unwrap();
            match g.progress.get_mut(&p.progress_token) {
                // BR-PROGRESS-05: only increasing values.
                Some(route) if route.last.is_none_or(|l| p.progress > l) => {
                    route.last = Some(p.progress);
                    Some((route.session.clone(), route.token.clone()))
                }
                _ => None,
            }
        };
        if let Some((session, token)) = target {
            let total = (p.total != 0).then_some(p.total);
            let message = (!p.message.is_empty()).then_some(p.message);
            session.progress(token, p.progress, total, message);
        }
    }

    fn log(&self, l: pb::LogMessage) {
        let level = state::log_level(&l.level);
        let data = state::log_data(&l.data_json);
        let logger = (!l.logger.is_empty()).then_some(l.logger);
        for s in self.sessions() {
            s.log(level, logger.clone(), data.clone());
        }
    }

    fn resource_changed(&self, uri: String) {
        for s in self.sessions() {
            s.resource_updated(&uri);
        }
    }

    fn reverse(&self, link: Arc<Link>, rid: String, msg: Msg) {
        // The answer may take a while (a human at the host): never block the reader
        // (BR-CONCUR-06). A weak handle is not needed: the task ends within CALL_TIMEOUT.
        let this = self.self_arc();
        tokio::spawn(async move {
            let reply: Envelope = match msg {
                Msg::SamplingRequest(r) => this.sampling(r).await.into(),
                _ => this.roots().await.into(),
            };
            let reply = reply.with_rid(rid);
            this.trace(false, &reply);
            let _ = link.send(reply);
        });
    }

    fn diag(&self, line: String) {
        diag(&line);
    }

    fn trace(&self, from_tp: bool, envelope: &Envelope) {
        Bridge::trace(self, from_tp, envelope);
    }

    fn trace_item(&self, item: &dyn Fn() -> crate::transcript::Item) {
        if let Some(t) = &self.trace {
            t.item(&item());
        }
    }
}

impl Bridge {
    fn self_arc(&self) -> Arc<Bridge> {
        self.me.upgrade().expect("the bridge is alive while its reader runs")
    }
}
