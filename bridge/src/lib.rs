//! The reference bridge: MCP hosts on one side, one tool process on the other (spec §22, §24).
//! An async shell over the sans-IO core [`protomcp_proto::bridge_core`], which takes every
//! protocol decision (rids, middleware order, progress routes, cancellation and the call
//! timeout, the handshake and list pulls, list diffs, reverse-request routing); this crate
//! does the I/O around it:
//!
//! - [`link`]: one tool-process connection (reader and writer tasks);
//! - [`process`]: the tool process and its socket (start, accept, terminate);
//! - [`mcp`]: the MCP side: a shell over the sans-IO host core [`protomcp_proto::host_core`],
//!   on stdio and Streamable HTTP;
//! - `dispatch`: feeding the core and carrying out what it asks (Envelopes to the link,
//!   answers to waiting host requests, notifications to sessions, reverse requests to a host),
//!   with one timer task for its deadlines;
//! - `serve`: the host operations as async calls; `lifecycle`: start, supervision with
//!   restarts and backoff, reloads, shutdown.
//!
//! The core speaks JSON values towards the MCP side ([`HostSession`]). This crate is the only
//! one of the workspace that depends on hyper.

#![deny(unsafe_code)]

use protomcp_common::{bounded, io, limits, os, transcript};
use protomcp_scenario as scenario;

pub mod error;
pub mod host_lines;
pub mod http;
pub mod link;
pub mod mcp;
pub mod process;
pub mod spin;
/// The MCP shapes, under their old path for the MCP side.
pub use protomcp_proto::bridge_core::shapes as state;
pub mod stdio;
pub mod trace;
pub mod watch;

mod dispatch;
mod lifecycle;
mod serve;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use protomcp_proto::bridge_core::{self as bcore, Core, OpId, SessionCaps};
use serde_json::Value;
use tokio::sync::oneshot;

use link::Link;

pub use protomcp_proto::bridge_core::{HostError, ListKind, SessionId};

/// `HANDSHAKE_QUIET` (spec §1.5) and the default `CALL_TIMEOUT` (BR-LIFECYCLE-12).
pub use protomcp_proto::spec::{DEFAULT_CALL_TIMEOUT, HANDSHAKE_QUIET};
/// Consecutive restart attempts after a failure (BR-LIFECYCLE-05).
pub const RESTART_ATTEMPTS: u32 = 3;
/// How long a shutting-down bridge lets the tool process leave on its own after closing the
/// connection, before it terminates it.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// Delay before the first restart attempt; doubled for each further one.
pub const RESTART_DELAY: Duration = Duration::from_millis(250);

/// A hidden switch of the reference bridge for the harness's own tests
/// (tests/testsuite/bridge_poll.rs): when set, the bridge says on stderr at exit how many
/// polling windows ([`spin`]) it opened, how many of them it polled and how many of those were
/// answered while it polled.
pub const POLL_STATS: &str = "PROTOMCP_CONFORM_BRIDGE_POLL_STATS";

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
    /// How long the bridge polls for an answer before it sleeps ([`spin`]); zero: never.
    /// Takes effect on a current-thread runtime only.
    pub poll: Duration,
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
            poll: Duration::ZERO,
        }
    }
}

/// Why the bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the tool process failed to start: {0}")]
    Failed(#[from] error::StartFailure),
}

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The bridge's view of one MCP session; implemented by the MCP side. Notifications are queued
/// in order; [`HostSession::flush`] resolves when everything queued before it has been sent.
pub trait HostSession: Send + Sync {
    fn id(&self) -> SessionId;
    fn list_changed(&self, kind: ListKind);
    /// `notifications/message`, already filtered by nothing: the session applies its threshold.
    /// `for_call`: the session holds the modern request attached to the single call owner
    /// (BR-LOG-08), which gets the entry when its logLevel admits it.
    fn log(&self, level: &'static str, logger: Option<String>, data: Value, for_call: bool);
    /// An initialized legacy session (logs are forwarded to it, BR-LOG-01).
    fn legacy(&self) -> bool;
    fn progress(&self, token: Value, progress: i64, total: Option<i64>, message: Option<String>);
    /// `notifications/resources/updated` when the session subscribed to `uri`.
    fn resource_updated(&self, uri: &str);
    fn flush(&self) -> BoxFuture<()>;
    fn can_sample(&self) -> bool;
    fn can_list_roots(&self) -> bool;
    /// `sampling/createMessage` with these params; the result as JSON.
    fn sample(&self, params: Value) -> BoxFuture<Result<Value, error::ReverseError>>;
    /// `roots/list`; the result as JSON.
    fn list_roots(&self) -> BoxFuture<Result<Value, error::ReverseError>>;
    /// Only with the fault `br.lifecycle.listen-ended-at-failure`: the session's listen
    /// subscriptions are ended as at shutdown.
    fn end_listens(&self);
}

/// What the shell keeps beside the core, under the same lock.
struct Shared {
    core: Core,
    /// The connection the core's Envelopes go to.
    link: Option<Arc<Link>>,
    process: Option<process::ToolProcess>,
    sessions: BTreeMap<SessionId, Arc<dyn HostSession>>,
    /// Host operations waiting for their answer.
    waiters: HashMap<OpId, oneshot::Sender<Result<Value, HostError>>>,
    /// Starts waiting for their connection to be served, by generation.
    starts: HashMap<u64, oneshot::Sender<Result<(), error::StartFailure>>>,
    /// A reload by ReloadRequest waiting for its end.
    reload: Option<oneshot::Sender<Result<(), error::StartFailure>>>,
    /// The deadline the timer task sleeps towards.
    armed: Option<Instant>,
}

/// The bridge, shared by every session.
pub struct Bridge {
    pub(crate) cfg: Config,
    shared: Mutex<Shared>,
    /// Wakes the timer task when the core's next deadline moved earlier.
    timer: tokio::sync::Notify,
    shutdown: tokio_util::sync::CancellationToken,
    trace: Option<trace::Trace>,
    me: std::sync::Weak<Bridge>,
    /// Bumped whenever a new link is served; the supervisor waits on it.
    served: tokio::sync::watch::Sender<u64>,
    /// Reloads never overlap (BR-RELOAD-07); while one runs the supervisor stands aside.
    reload_lock: tokio::sync::Mutex<()>,
    reloading: std::sync::atomic::AtomicBool,
    /// Polling before sleeping ([`spin`]).
    pub(crate) spin: Arc<spin::Spin>,
}

fn diag(line: &str) {
    if protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrMcpDiagOnStdout) {
        return println!("protomcp-conform bridge: {line}");
    }
    eprintln!("protomcp-conform bridge: {line}");
}

/// The key of this process's requestStates: 256 bits from the operating system, never output
/// (BR-STATELESS-21).
fn state_key() -> Result<bcore::StateKey, StartError> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| StartError::Io(std::io::Error::other(format!("no random key: {e}"))))?;
    Ok(bcore::StateKey::new(key))
}

impl Bridge {
    /// Starts the tool process and completes the handshake and list pulls; a failure here is a
    /// failed start (BR-LIFECYCLE-02). Then supervises it: restarts with backoff after a failure.
    pub async fn start(cfg: Config) -> Result<Arc<Bridge>, StartError> {
        Bridge::start_until(cfg, std::future::pending()).await
    }

    /// [`Bridge::start`], given up when `stop` resolves first (the host closed stdin, a signal:
    /// BR-LIFECYCLE-09/10 hold during the start too): the tool process is terminated, and the
    /// error is [`error::StartFailure::Stopped`].
    pub async fn start_until(cfg: Config, stop: impl Future<Output = ()>) -> Result<Arc<Bridge>, StartError> {
        let trace = match &cfg.trace {
            Some(p) => Some(trace::Trace::create(p)?),
            None => None,
        };
        let core_cfg =
            bcore::Config { call_timeout: cfg.call_timeout, handshake_quiet: HANDSHAKE_QUIET, state_key: state_key()? };
        let spin = Arc::new(spin::Spin::new(cfg.poll));
        let bridge = Arc::new_cyclic(|me| Bridge {
            cfg,
            shared: Mutex::new(Shared {
                core: Core::new(core_cfg),
                link: None,
                process: None,
                sessions: BTreeMap::new(),
                waiters: HashMap::new(),
                starts: HashMap::new(),
                reload: None,
                armed: None,
            }),
            timer: tokio::sync::Notify::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            trace,
            me: me.clone(),
            served: tokio::sync::watch::channel(0).0,
            reload_lock: tokio::sync::Mutex::new(()),
            reloading: std::sync::atomic::AtomicBool::new(false),
            spin: spin.clone(),
        });
        tokio::spawn(bridge.clone().run_timer());
        let ended = bridge.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = spin.run() => {}
                _ = ended.cancelled() => {}
            }
        });
        let start = bridge.clone().start_instance();
        tokio::pin!(start, stop);
        let started = tokio::select! {
            r = &mut start => r,
            // The start sees the shutdown, ends its tool process and says it stopped.
            _ = &mut stop => {
                bridge.shutdown.cancel();
                start.await
            }
        };
        if let Err(e) = started {
            // The timer task holds the bridge while it waits: a failed start ends it too.
            bridge.shutdown.cancel();
            return Err(e.into());
        }
        tokio::spawn(bridge.clone().supervise());
        Ok(bridge)
    }

    /// Polling windows so far: (opened, polled, answered while polling)
    /// ([`spin::Spin::counts`]).
    pub fn poll_counts(&self) -> (u64, u64, u64) {
        self.spin.counts()
    }

    pub fn call_timeout(&self) -> Duration {
        self.cfg.call_timeout
    }

    pub(crate) fn self_arc(&self) -> Arc<Bridge> {
        self.me.upgrade().expect("the bridge is alive while its tasks run")
    }

    /// Adds a session, or updates what its client declared (called at initialize and again
    /// at notifications/initialized).
    pub fn add_session(&self, s: Arc<dyn HostSession>) {
        let caps = SessionCaps { sampling: s.can_sample(), roots: s.can_list_roots(), legacy: s.legacy() };
        self.drive(|sh, _| {
            sh.core.add_session(s.id(), caps);
            sh.sessions.insert(s.id(), s);
        });
    }

    pub fn remove_session(&self, id: SessionId) {
        self.drive(|sh, _| {
            sh.core.remove_session(id);
            sh.sessions.remove(&id);
        });
    }

    fn read<R>(&self, f: impl FnOnce(&Core) -> R) -> R {
        f(&self.shared.lock().unwrap().core)
    }

    // ----- lists -----

    pub fn tools(&self) -> Vec<Value> {
        self.read(Core::tools)
    }

    /// One item of the modern tools/list, by name ([`Core::tool_modern`]).
    pub fn tool_modern(&self, name: &str) -> Option<Value> {
        self.read(|c| c.tool_modern(name))
    }

    pub fn tools_modern(&self) -> Vec<Value> {
        self.read(Core::tools_modern)
    }

    pub fn resources(&self) -> Vec<Value> {
        self.read(Core::resources)
    }

    pub fn templates(&self) -> Vec<Value> {
        self.read(Core::templates)
    }

    pub fn prompts(&self) -> Vec<Value> {
        self.read(Core::prompts)
    }

    /// Whether the tool process registered any resource or template / prompt (BR-MCP-06).
    pub fn has_resources_prompts(&self) -> (bool, bool) {
        self.read(Core::has_resources_prompts)
    }

    // ----- trace -----

    fn trace(&self, from_tp: bool, envelope: &protomcp_proto::pb::Envelope) {
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
}
