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

mod dispatch;
mod lifecycle;
mod serve;

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
}

fn describe(r: &Reply) -> String {
    match r {
        Ok(m) => format!("unexpected reply {}", protomcp_proto::Arm::of(m).name()),
        Err(e) => e.clone(),
    }
}
