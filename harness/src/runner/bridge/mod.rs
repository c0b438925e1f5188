//! Runs one `role: bridge` scenario against a bridge under test (`--bridge 'CMD …'`).
//!
//! Per scenario: a private temp dir holding the harness's control socket, the mock's launcher
//! script and the bridge's socket path; the bridge started by the host driver
//! ([`crate::host::StdioHost`]) in its own process group, with `PROTOMCP_CONFORM_CONTROL` in its
//! environment (its tool process, the mock, inherits it). Over stdio, host steps talk to the
//! bridge's stdin and stdout. Over HTTP ([`BridgeTransport::Http`]) host sends are queued like
//! writes into a pipe ([`crate::host::session::HttpSession::send`]): the queue waits until the URL
//! accepts a TCP connection (a start-up watchdog bounds the wait), then POSTs in order; responses
//! arrive as JSON or event streams, the session's GET event stream carries the rest, `host_close`
//! is a DELETE of the session.
//! Order is kept per stream; a `host_expect` over HTTP takes the first matching message among
//! the oldest unread message of each stream. Tool-side steps run on the mock's control
//! connection through [`Exec`], exactly as in tool-process scenarios. Teardown: stdin closed (and
//! SIGINT over HTTP), a grace period, SIGKILL to the bridge's group and to every mock that
//! registered its pid, and a check that none of them survived.

mod host;
mod soak;
mod tool;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use protomcp_proto::dynamic::arm_of;
use serde_json::{Value, json};
use tokio::net::UnixListener;
use tokio::time::Instant;

use super::exec::leaked;
use super::exec::{Exec, Proc, PullAnswers, StepError};
use super::process::{self, ScenarioDir, process_alive as alive};
use super::{
    CaseResult, Config, DEFAULT_SCENARIO_TIMEOUT, GRACE, KILL_LIMIT, Outcome, STDERR_TAIL, Target, tail_lines,
};
use crate::host::StdioHost;
use crate::host::session::{Arrival, Endpoint, HttpSend, HttpSession};
use crate::mock::{ENV_CONTROL, ENV_PIDFILE, ENV_REPORT};
use crate::scenario::template::substitute;
use crate::scenario::{
    Action, HostStream, Pattern, ReloadBegins, ReloadForm, Scenario, SendLine, ToolHandshake, match_value,
};
use crate::transcript::{Dir, Item, compact};

/// The placeholders of a `--bridge` command line, each replaced inside any argument.
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("{mock}", "absolute path of an executable (no extension) that runs `protomcp-conform mock`"),
    ("{socket}", "absolute path for the bridge's tool-process socket, inside the scenario's temp dir"),
    ("{dir}", "the scenario's private temp dir"),
    ("{port}", "a free TCP port on 127.0.0.1 chosen for the scenario (for --bridge-transport http)"),
    ("{exe}", "absolute path of this protomcp-conform binary (its reference bridge: `{exe} bridge …`)"),
];

/// The values of [`PLACEHOLDERS`] for one scenario.
pub struct Values<'a> {
    pub mock: &'a Path,
    pub socket: &'a Path,
    pub dir: &'a Path,
    pub port: u16,
    pub exe: &'a Path,
}

/// How the harness reaches the bridge (defined with the target it describes).
pub use super::target::{BridgeTransport, DEFAULT_URL};

/// A free port on 127.0.0.1 (bound, read, released: a small race with other programs remains),
/// never one of the last 1024 this process handed out, so parallel scenarios cannot share one.
fn free_port() -> std::io::Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..64 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            if given.len() >= 1024 {
                given.remove(0);
            }
            given.push(port);
            return Ok(port);
        }
    }
    Err(std::io::Error::other("no port that was not handed out before"))
}

/// Replaces the placeholders in every argument.
pub fn expand(template: &[String], v: &Values) -> Vec<String> {
    template.iter().map(|a| expand_one(a, v)).collect()
}

/// Replaces the placeholders in one string.
pub fn expand_one(a: &str, v: &Values) -> String {
    a.replace("{mock}", &v.mock.display().to_string())
        .replace("{socket}", &v.socket.display().to_string())
        .replace("{dir}", &v.dir.display().to_string())
        .replace("{port}", &v.port.to_string())
        .replace("{exe}", &v.exe.display().to_string())
}

fn step_err(e: StepError, at: &str, kw: &str) -> StepError {
    match e {
        StepError::Fail(m) => StepError::Fail(format!("{at}: {kw}: {m}")),
        StepError::Error(m) => StepError::Error(format!("{at}: {kw}: {m}")),
        StepError::NotApplicable(m) => StepError::NotApplicable(format!("{at}: {kw}: {m}")),
    }
}

/// The HTTP side of a run.
struct Http {
    session: HttpSession,
    url: String,
}

/// A further host session (`host: b`), parked while the steps act on another one.
struct Other {
    http: Option<Http>,
    consumed: std::collections::BTreeSet<u64>,
    cursor: u64,
    pages: Pages,
}

/// Pagination (BR-MCP-12: a bridge MAY paginate the four list methods; the harness follows
/// `nextCursor` until it is absent): which host requests were list requests, and the whole lists
/// put together from their pages, so a `host_expect` sees one response with everything.
#[derive(Default)]
struct Pages {
    /// The method of each list request the host sent, by its id (compact JSON).
    requests: BTreeMap<String, &'static str>,
    /// The requests the host sent, by id (compact JSON), and the responses seen, for replies to
    /// no request (BR-MCP-19, [`Run::unmatched`]).
    asked: BTreeMap<String, u32>,
    answered: BTreeMap<String, u32>,
    /// The host sent something whose requests the harness does not know (a raw line, a batch,
    /// a `host_http` request): replies are not matched.
    opaque: bool,
    /// The first page's message number → the response with every page's items.
    merged: BTreeMap<u64, Value>,
    /// Ids of the harness's own follow-up requests so far.
    sent: u64,
}

/// The list methods and the key of their items in a result.
const LIST_METHODS: &[(&str, &str)] = &[
    ("tools/list", "tools"),
    ("resources/list", "resources"),
    ("resources/templates/list", "resourceTemplates"),
    ("prompts/list", "prompts"),
];

/// At most this many pages per list: a bridge that never stops handing out cursors fails.
const MAX_PAGES: usize = 10_000;

struct Run<'a> {
    ex: Exec<'a>,
    /// The bridge process (over HTTP its stdin stays open and its stdout is not judged).
    host: StdioHost,
    http: Option<Http>,
    /// Which bridge messages ([`Run::inbox`], by number) a step has looked at: every one below
    /// `cursor`, and these above it.
    consumed: std::collections::BTreeSet<u64>,
    cursor: u64,
    sent_signals: Vec<i32>,
    /// The bridge's stderr (bounded, [`crate::limits::STDERR_HEAD`]).
    stderr: process::StderrTail,
    /// The scenario's private temp dir (`{dir}`; `touch` paths are relative to it).
    dir: std::path::PathBuf,
    /// The end of the scenario's budget (the start-up watchdog fires before it).
    budget_end: Instant,
    /// The environment the target and the scenario give the bridge (`{env:NAME}` in `host_http`).
    bridge_env: BTreeMap<String, String>,
    /// The other host sessions by name (`host: b`), in order of first use.
    others: Vec<(String, Other)>,
    /// The current host session's list requests and their pages.
    pages: Pages,
    /// The rid of a ReloadRequest that `reload_begins` answered with success: the next
    /// `tool_handshake` plays the reload's burst on the same connection.
    reload_rid: Option<Value>,
    /// The TCP listeners of `tcp_listen`, by their capture's name.
    listeners: Vec<(String, TcpWatch)>,
    /// What the bridge's own processes held (resident, KiB) at the last `memory_mark`.
    memory_mark: Option<u64>,
}

/// A `tcp_listen` port: who connected to it (peer and first line), and the task that accepts.
struct TcpWatch {
    port: u16,
    connections: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TcpWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Run<'_> {
    async fn steps(&mut self) -> Result<(), StepError> {
        let s = self.ex.scenario;
        for (i, step) in s.steps.iter().enumerate() {
            self.ex.current = Some(i);
            self.ex.found = &[];
            let at = s.at(step.loc).to_string();
            let kw = match &step.host {
                Some(h) => format!("{} (host {h})", step.keyword()),
                None => step.keyword().to_owned(),
            };
            let kw = kw.as_str();
            self.ex.transcript.push(Item::Step { index: i + 1, keyword: kw.to_owned(), line: step.loc.line });
            if step.action.needs_connection() {
                self.ex.ensure_conn().await.map_err(|e| step_err(e, &at, kw))?;
            }
            // A step of another host acts on that host's session: swapped in, and back out.
            if let Some(h) = &step.host {
                self.switch_host(h);
            }
            let r = self.step(&step.action).await;
            if let Some(h) = &step.host {
                self.switch_host(h);
            }
            r.map_err(|e| step_err(e, &at, kw))?;
            self.ex.note_step_done(&step.action);
        }
        self.ex.lost_write_unjudged()?;
        self.ex.current = None;
        self.ex.found = &[];
        self.http_drain_all().await?;
        match self.flood() {
            Some(f) => Err(StepError::Fail(f)),
            None => Ok(()),
        }
    }

    async fn step(&mut self, action: &Action) -> Result<(), StepError> {
        match action {
            Action::HostSend(line, headers) => self.host_send_step(line, headers),
            Action::HostExpect(e) => {
                let within = self.ex.t(e.within);
                self.expect_host(&e.pattern, within, &e.ignore, e.stream.as_ref()).await
            }
            Action::HostExpectNothing(e) => {
                let d = self.ex.t(e.duration);
                self.expect_no_host(d, &e.ignore).await
            }
            Action::HostHttp(h) => self.host_http(h).await,
            Action::HostClose => self.host_close().await,
            Action::ToolHandshake(h) => self.tool_handshake(h).await,
            Action::ReloadBegins(r) => self.reload_begins(r).await,
            Action::Signal(sig) => {
                self.signal(sig);
                Ok(())
            }
            Action::ExpectExit(x) => self.expect_exit(x).await,
            Action::Close(_) | Action::ExpectClose { .. } => {
                // The tool process goes away (or the bridge ended it): a later tool-side step
                // waits for the next one.
                self.ex.step(action).await?;
                self.ex.forget_conn();
                Ok(())
            }
            Action::Touch(rel) => {
                let path = self.dir.join(rel);
                self.ex.transcript.push(Item::Touch { path: rel.display().to_string() });
                touch(&path).map_err(|e| StepError::Error(format!("touch {}: {e}", path.display())))
            }
            Action::ExpectSocket { exists } => self.expect_socket(*exists),
            Action::ExpectSocketPrivate => {
                let uid = crate::os::uid();
                self.tool_report()?.private(uid).map_err(|e| StepError::Fail(e.to_string()))
            }
            Action::ToolConnectAgain { within } => {
                let within = self.ex.t(*within);
                let socket = self.tool_report()?.socket;
                second_connection(&socket, within).await
            }
            Action::ExpectToolExit { within } => self.expect_tool_exit(*within).await,
            Action::HostExpectComment { stream, within } => {
                let within = self.ex.t(*within);
                self.expect_comment(within, stream.as_ref()).await
            }
            Action::TcpListen { capture } => self.tcp_listen(capture).await,
            Action::ExpectNoTcpConnect { listener, duration } => {
                let d = self.ex.t(*duration);
                self.expect_no_tcp_connect(listener, d).await
            }
            Action::Expect(e) if e.or_host.is_some() => self.expect_or_host(e).await,
            Action::MemoryMark => self.memory_mark(),
            Action::ExpectMemory { peak_growth_below_kib } => self.expect_memory(*peak_growth_below_kib),
            Action::Soak(k) => self.soak(k).await,
            _ => self.ex.step(action).await,
        }
    }

    /// `memory_mark`: the peak resident memory of the bridge's own processes (its group less the
    /// mocks) is reset to what they hold now, and that is remembered.
    fn memory_mark(&mut self) -> Result<(), StepError> {
        let Some(sampler) = &self.ex.sampler else {
            return Err(StepError::Error("memory_mark: the bridge's processes are not known".into()));
        };
        self.memory_mark = Some(sampler.reset_peak().map_err(|e| StepError::Error(format!("memory_mark: {e}")))?);
        Ok(())
    }

    /// `expect_memory`: the peak resident memory of the bridge's own processes since the
    /// `memory_mark` exceeds what they held then by less than the bound (BR-SECURITY-03: a size
    /// from the tool process must not cause an allocation above `MAX_FRAME` or `LARGE_LIMIT`;
    /// pages a process never wrote do not count, so only memory it filled shows).
    fn expect_memory(&mut self, below_kib: u64) -> Result<(), StepError> {
        let (Some(mark), Some(sampler)) = (self.memory_mark, &self.ex.sampler) else {
            return Err(StepError::Error("expect_memory: no memory_mark was taken".into()));
        };
        let Some(peak) = sampler.peak_kib() else {
            return Err(StepError::Error("expect_memory: no process of the bridge runs".into()));
        };
        let growth = peak.saturating_sub(mark);
        let mib = |k: u64| k as f64 / 1024.0;
        if growth >= below_kib {
            return Err(StepError::Fail(format!(
                "the bridge's peak resident memory grew by {:.1} MiB since the memory_mark ({:.1} → {:.1} MiB), not less than {:.0} MiB",
                mib(growth),
                mib(mark),
                mib(peak),
                mib(below_kib)
            )));
        }
        Ok(())
    }

    /// `host_send`: a JSON-RPC message (placeholders filled in; a list request is remembered for
    /// paging) or a raw line, to the current host's bridge.
    fn host_send_step(&mut self, line: &SendLine, headers: &[(String, String)]) -> Result<(), StepError> {
        match line {
            SendLine::Json(v) => {
                let v = substitute(v, &self.ex.caps).map_err(|e| StepError::Error(e.to_string()))?;
                let method = v.get("method").and_then(Value::as_str);
                if let (Some(id), Some((m, _))) = (v.get("id"), LIST_METHODS.iter().find(|(m, _)| Some(*m) == method)) {
                    self.pages.requests.insert(compact(id), m);
                }
                self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: Some(v.clone()), raw: None });
                self.host_send_with(v.to_string(), headers);
            }
            SendLine::Raw(line) => {
                self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: None, raw: Some(line.clone()) });
                self.host_send_with(line.clone(), headers);
            }
        }
        Ok(())
    }

    /// `host_http`: one hand-made HTTP request, after every queued send (so that the session id
    /// is known and the order holds); the first step of the session waits for the port within
    /// the start-up watchdog.
    async fn host_http(&mut self, h: &crate::scenario::HostHttp) -> Result<(), StepError> {
        self.pages.opaque = true;
        self.http_drain().await?;
        let within = self.ex.t(h.within);
        let watchdog = self.watchdog();
        let Some(http) = &self.http else {
            return Err(StepError::Error("host_http needs --bridge-transport http".into()));
        };
        if !http.session.listening() {
            let url = &http.url;
            http.session.wait_listening(watchdog).await.map_err(|last| {
                StepError::Fail(format!(
                    "start-up watchdog: the bridge did not accept connections at {url} (last error: {last})"
                ))
            })?;
        }
        let ctx = super::host_http::Ctx { within, env: &self.bridge_env };
        super::host_http::run(&http.session, h, ctx, &mut self.ex.caps, &mut self.ex.transcript).await
    }

    /// `host_close`: a DELETE of the session over HTTP, the end of the bridge's stdin over stdio.
    async fn host_close(&mut self) -> Result<(), StepError> {
        if let Some(h) = &self.http {
            h.session.send(HttpSend::Delete, self.watchdog());
            self.ex.transcript.push(Item::Host {
                dir: Dir::ToTestee,
                message: None,
                raw: Some("<end of session: DELETE>".into()),
            });
            return Ok(());
        }
        self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: None, raw: Some("<end of file>".into()) });
        let _ = self.host.close(Duration::ZERO).await;
        Ok(())
    }

    /// `signal`: to the bridge's process (remembered: an exit by it is not a crash).
    fn signal(&mut self, sig: &crate::scenario::Signal) {
        let n = match sig {
            crate::scenario::Signal::Term => libc::SIGTERM,
            crate::scenario::Signal::Int => libc::SIGINT,
            crate::scenario::Signal::Hup => libc::SIGHUP,
            crate::scenario::Signal::Kill => libc::SIGKILL,
        };
        self.sent_signals.push(n);
        self.host.signal(n);
        self.ex.transcript.push(Item::Signal { name: format!("{sig:?}") });
    }

    /// `expect_exit`: the bridge ends within the step's time with an accepted status (128 + N
    /// for a signal the scenario sent), and its stderr matches.
    async fn expect_exit(&mut self, x: &crate::scenario::ExpectExit) -> Result<(), StepError> {
        use std::os::unix::process::ExitStatusExt;
        let within = self.ex.t(x.within);
        let Some(st) = self.host.wait_exit(within).await else {
            return Err(StepError::Fail(format!("the bridge was still running after {within:?}")));
        };
        self.ex.transcript.push(Item::Exit { status: format!("{st}") });
        let status = match (st.code(), st.signal()) {
            (Some(c), _) => Some(c),
            (None, Some(s)) if self.sent_signals.contains(&s) => Some(128 + s),
            _ => None,
        };
        if !x.code.accepts(status) {
            return Err(StepError::Fail(format!("the bridge ended with {st}, expected {:?}", x.code)));
        }
        if let Some(p) = &x.stderr {
            self.stderr.drained(Duration::from_millis(500)).await;
            let text = self.stderr.text();
            match_value(p, Some(&Value::String(text)), &mut self.ex.caps)
                .map_err(|m| StepError::Fail(format!("stderr: {m}")))?;
        }
        Ok(())
    }

    /// `expect_socket`: whether a file is at `{socket}` (the scenario needs the feature
    /// `socket`: the bridge was given it).
    fn expect_socket(&self, exists: bool) -> Result<(), StepError> {
        let path = tmp_dir(&self.dir, self.ex.scenario).join("tp.sock");
        let found = std::fs::symlink_metadata(&path).is_ok();
        match (found, exists) {
            (true, false) => Err(StepError::Fail(format!("a file is still at the socket path {}", path.display()))),
            (false, true) => Err(StepError::Fail(format!("no file at the socket path {}", path.display()))),
            _ => Ok(()),
        }
    }

    /// `tcp_listen`: a TCP listener on 127.0.0.1 (a port of its own), its number bound to
    /// `capture`; every connection to it is accepted and remembered (its peer and first line).
    async fn tcp_listen(&mut self, capture: &str) -> Result<(), StepError> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| StepError::Error(format!("listening on 127.0.0.1: {e}")))?;
        let port = listener.local_addr().map_err(|e| StepError::Error(e.to_string()))?.port();
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, peer)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut first = String::new();
                    let mut reader = tokio::io::BufReader::new(conn.take(512));
                    let _ = tokio::time::timeout(Duration::from_millis(200), reader.read_line(&mut first)).await;
                    let first = first.trim_end();
                    let what = if first.is_empty() { String::new() } else { format!(", first line {first:?}") };
                    let mut seen = seen.lock().unwrap();
                    if seen.len() < 16 {
                        seen.push(format!("from {peer}{what}"));
                    }
                });
            }
        });
        self.ex.caps.insert(capture.to_owned(), json!(port));
        self.listeners.retain(|(n, _)| n != capture);
        self.listeners.push((capture.to_owned(), TcpWatch { port, connections, task }));
        Ok(())
    }

    /// `expect_no_tcp_connect`: nothing connected to the port of `tcp_listen` `name` since it was
    /// opened, and nothing does for `d` (a connection ends the step at once).
    async fn expect_no_tcp_connect(&mut self, name: &str, d: Duration) -> Result<(), StepError> {
        let Some((_, w)) = self.listeners.iter().find(|(n, _)| n == name) else {
            return Err(StepError::Error(format!("no `tcp_listen` bound `{name}`")));
        };
        let (port, connections) = (w.port, w.connections.clone());
        let deadline = Instant::now() + d;
        loop {
            let seen = connections.lock().unwrap().clone();
            if let Some(first) = seen.first() {
                return Err(StepError::Fail(format!(
                    "{} connection(s) to 127.0.0.1:{port} (the harness's port `{name}`, which nothing may fetch from): the first {first}",
                    seen.len()
                )));
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
            self.ex.poll_pulls().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `expect_tool_exit`: the tool process whose connection ended last is gone within `within`.
    async fn expect_tool_exit(&mut self, within: Duration) -> Result<(), StepError> {
        let within = self.ex.t(within);
        let Some(&pid) = self.ex.ended_peers.last() else {
            return Err(StepError::Error(
                "no tool process's connection has ended yet (`close` or `expect_close` first)".into(),
            ));
        };
        let deadline = Instant::now() + within;
        while alive(pid) {
            if Instant::now() >= deadline {
                return Err(StepError::Fail(format!(
                    "the tool process (pid {pid}) whose connection ended still runs after {within:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }
}

/// The mock's reports ([`crate::mock::SocketReport`]) in the scenario's dir.
const REPORT: &str = "mock.report";

/// Where `{socket}` goes and what `TMPDIR` and `XDG_RUNTIME_DIR` name: the scenario's private dir,
/// or with `shared_tmp` a directory in it that everyone may enter and write.
fn tmp_dir(dir: &Path, s: &Scenario) -> std::path::PathBuf {
    if s.shared_tmp { dir.join("shared") } else { dir.to_owned() }
}

/// Runs `s` against the bridge command `template` (placeholders not yet expanded).
/// Creates the file (and its directories) or appends a line to it: its length and modification
/// time both change, so a watcher that compares either sees it.
fn touch(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(b"# touched by protomcp-conform\n")?;
    f.sync_all()
}

/// What a bridge scenario's private directory holds before the bridge starts.
struct Prepared {
    dir: ScenarioDir,
    /// The harness's control socket, where the mock tool processes connect.
    listener: UnixListener,
    control: std::path::PathBuf,
    /// `{mock}`: a symbolic link named `mock` to this binary.
    mock: std::path::PathBuf,
    home: std::path::PathBuf,
    /// Where the tool process's socket goes (`shared_tmp`: a directory open to everyone).
    tmp: std::path::PathBuf,
    socket: std::path::PathBuf,
    transport: BridgeTransport,
    /// `{port}` (0 over stdio).
    port: u16,
}

/// Makes the scenario's private directory: the control socket, `{mock}`, a home, the watched
/// directory, the socket's directory (a leftover file there for BR-CONN-04), a free port over
/// HTTP. An `Err` is the harness's failure (ERROR).
fn prepare(s: &Scenario, target: &Target, exe: &Path) -> Result<Prepared, Outcome> {
    let error = |what: String| Outcome::Error(what);
    let dir =
        super::process::ScenarioDir::new().map_err(|e| error(format!("cannot create the scenario's temp dir: {e}")))?;
    let d = dir.path().to_owned();
    let control = d.join("control.sock");
    let listener =
        UnixListener::bind(&control).map_err(|e| error(format!("cannot bind {}: {e}", control.display())))?;
    // `{mock}`: a symbolic link named `mock` to this binary, which runs `mock` when started
    // under that name (src/main.rs). Not a script written here: a process that another
    // scenario's thread forks while the script is open for writing would hold it open until its
    // exec, and the bridge's exec of `{mock}` would fail with ETXTBSY ("Text file busy").
    let mock = d.join("mock");
    let home = d.join("home");
    std::os::unix::fs::symlink(exe, &mock)
        .and_then(|()| std::fs::create_dir_all(&home))
        // A bridge in watch mode watches `{dir}/watched` (harness/bridges/reference*): it exists
        // from the start, empty, so the bridge starts as usual; `touch` steps write into it.
        .and_then(|()| std::fs::create_dir_all(d.join("watched")))
        .map_err(|e| error(format!("cannot prepare the scenario's temp dir: {e}")))?;
    let transport = match &target.kind {
        super::TargetKind::Bridge { transport, .. } => transport.clone(),
        _ => BridgeTransport::Stdio,
    };
    let port = match &transport {
        BridgeTransport::Stdio => 0,
        BridgeTransport::Http { .. } => free_port().map_err(|e| error(format!("cannot find a free port: {e}")))?,
    };
    // `shared_tmp`: the socket path and the bridge's temp dirs in a directory open to everyone.
    let tmp = tmp_dir(&d, s);
    if s.shared_tmp {
        std::fs::create_dir(&tmp)
            .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)))
            .map_err(|e| error(format!("cannot create {}: {e}", tmp.display())))?;
    }
    let socket = tmp.join("tp.sock");
    // BR-CONN-04: a leftover plain file where the bridge is told to listen.
    if s.stale_socket {
        std::fs::write(&socket, b"stale file left by protomcp-conform\n")
            .map_err(|e| error(format!("cannot write the stale file {}: {e}", socket.display())))?;
    }
    Ok(Prepared { dir, listener, control, mock, home, tmp, socket, transport, port })
}

/// The bridge's environment: the target's and the scenario's variables, then where the mock
/// reports and connects, and temp dirs and home inside the scenario's directory.
fn environment(s: &Scenario, target: &Target, p: &Prepared, pidfile: &Path) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in target.env.iter().chain(s.testee.env.iter()) {
        if let Some(v) = v {
            env.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in [
        (ENV_CONTROL, p.control.display().to_string()),
        (ENV_PIDFILE, pidfile.display().to_string()),
        (ENV_REPORT, p.dir.path().join(REPORT).display().to_string()),
        ("XDG_RUNTIME_DIR", p.tmp.display().to_string()),
        ("TMPDIR", p.tmp.display().to_string()),
        ("HOME", p.home.display().to_string()),
    ] {
        env.insert(k.to_owned(), v);
    }
    env.into_iter().collect()
}

/// Runs scenario `s` against the bridge `template` (its command line with placeholders):
/// prepares the directory, starts the bridge, plays the steps within the budget, then collects
/// what the run left and tears everything down.
pub(crate) async fn execute(
    s: &Scenario,
    target: &Target,
    cfg: &Config,
    template: &[String],
    exe: &Path,
    res: &mut CaseResult,
) -> Outcome {
    let p = match prepare(s, target, exe) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let d = p.dir.path().to_owned();
    let values = Values { mock: &p.mock, socket: &p.socket, dir: &d, port: p.port, exe };
    let argv = expand(template, &values);
    res.command = argv.clone();
    let http = match &p.transport {
        BridgeTransport::Stdio => None,
        BridgeTransport::Http { url } => {
            let url = expand_one(url, &values);
            match Endpoint::parse(&url) {
                Ok(e) => Some(Http { session: HttpSession::new(e), url }),
                Err(e) => return Outcome::Error(format!("--bridge-url: {e}")),
            }
        }
    };
    let pidfile = d.join("mock.pids");
    let env = environment(s, target, &p, &pidfile);
    let Prepared { dir, listener, .. } = p;
    let mut host = match StdioHost::spawn_in(&argv, &env, Stdio::piped(), target.cwd.as_deref()) {
        Ok(h) => h,
        Err(e) => return Outcome::Error(format!("cannot start the bridge `{}`: {e}", argv.join(" "))),
    };
    let stderr = process::StderrTail::read(host.take_stderr());
    let auto = s.host_requests == crate::scenario::HostRequests::Auto;
    host.answer_requests(auto);
    if let Some(h) = &http {
        h.session.answer_requests(auto);
    }
    let pgid = host.pid().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    if pgid > 0 {
        process::track_group(pgid);
    }
    let scale = cfg.timeout_scale.max(1.0);
    let budget = s.timeout.unwrap_or(DEFAULT_SCENARIO_TIMEOUT).mul_f64(scale);
    let proc = Proc::Task { handle: tokio::spawn(std::future::pending::<i32>()), ended: None };
    let mut ex = Exec::new(s, scale, &target.features, false, listener, proc);
    // What the bridge's group and its tool processes hold: when the first tool process
    // connects, after the steps, and during a soak.
    if pgid > 0 {
        ex.sampler = Some(crate::io::resources::Sampler { pgid, pidfile: Some(pidfile.clone()) });
    }
    ex.mock_reports = Some(d.join(REPORT));
    let mut run = Run {
        ex,
        host,
        http,
        consumed: Default::default(),
        cursor: 0,
        sent_signals: Vec::new(),
        stderr: stderr.clone(),
        dir: d.clone(),
        budget_end: Instant::now() + budget,
        bridge_env: env.iter().cloned().collect(),
        others: Vec::new(),
        pages: Pages::default(),
        reload_rid: None,
        listeners: Vec::new(),
        memory_mark: None,
    };
    if s.stale_socket {
        run.ex.transcript.push(Item::Touch { path: "tp.sock".into() });
    }
    let outcome = run.play(budget).await;
    let outcome = run.collect(outcome, res);
    let clean = run.end(pgid, &pidfile).await;
    res.broken = run.ex.broken();
    res.held = run.ex.held();
    res.check = Some(run.ex.check());
    res.step_line = run.ex.step_line();
    res.transcript_tail = run.ex.transcript_tail();
    res.transcript = std::mem::take(&mut run.ex.transcript);
    stderr.drained(Duration::from_millis(500)).await;
    res.stderr_tail = tail_lines(&stderr.text(), STDERR_TAIL);
    drop(run);
    drop(dir);
    match (clean, outcome) {
        (false, Outcome::Passed) => {
            Outcome::Error(format!("processes of the bridge's group {pgid} or a mock survived SIGKILL"))
        }
        (_, o) => o,
    }
}

impl Run<'_> {
    /// The steps within `budget`, then the check that stdout held only MCP lines.
    async fn play(&mut self, budget: Duration) -> Outcome {
        match tokio::time::timeout(budget, self.steps()).await {
            Ok(Ok(())) => match self.stdout_clean() {
                Ok(()) => Outcome::Passed,
                Err(StepError::Fail(m) | StepError::Error(m) | StepError::NotApplicable(m)) => Outcome::Failed(m),
            },
            Ok(Err(StepError::Fail(m))) => Outcome::Failed(m),
            Ok(Err(StepError::Error(m))) => Outcome::Error(m),
            Ok(Err(StepError::NotApplicable(m))) => Outcome::Skipped(m),
            Err(_) => Outcome::Error(format!("the scenario exceeded its budget of {budget:?}")),
        }
    }

    /// After the steps: the resources the bridge's group held (a soak's growth makes `outcome`
    /// a leak), and every message no step looked at, each host's, into the transcript.
    fn collect(&mut self, outcome: Outcome, res: &mut CaseResult) -> Outcome {
        let end = self.ex.sampler.as_ref().and_then(crate::io::resources::Sampler::sample);
        let samples = std::mem::take(&mut self.ex.samples);
        let during = self.ex.during.take().map(crate::io::resources::During::stop).unwrap_or_default();
        res.resources = self.ex.resources_start.zip(end).map(|(start, end)| crate::io::resources::Use {
            start,
            end,
            samples,
            during,
        });
        let outcome = leaked(outcome, &mut self.ex);
        for (i, e) in self.inbox() {
            if !self.consumed.contains(&i) {
                self.record(&e);
            }
        }
        for n in self.others.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>() {
            self.switch_host(&n);
            let left: Vec<_> = self.inbox().into_iter().filter(|(i, _)| !self.consumed.contains(i)).collect();
            if !left.is_empty() {
                self.ex.transcript.push(Item::Host {
                    dir: Dir::FromTestee,
                    message: None,
                    raw: Some(format!("<host {n}>")),
                });
            }
            for (_, e) in left {
                self.record(&e);
            }
            if let Some(h) = &self.http {
                h.session.abort();
            }
            self.switch_host(&n);
        }
        outcome
    }

    /// Ends the run: the HTTP sessions, the tool-side connection, then the bridge's group
    /// (SIGTERM, grace, SIGKILL). Whether every process of it is gone.
    async fn end(&mut self, pgid: i32, pidfile: &Path) -> bool {
        if let Some(h) = &self.http {
            h.session.abort();
            // Over HTTP the end of stdin need not end the bridge: SIGINT asks it to.
            self.host.signal(libc::SIGINT);
        }
        self.ex.close();
        if let Proc::Task { handle, .. } = &self.ex.proc {
            handle.abort();
        }
        teardown(&mut self.host, pgid, pidfile).await
    }
}

/// BR-CONN-05: a second connection to the tool process's `socket` is refused (connecting fails:
/// nobody listens, or the file is gone), or the bridge closes it within `within`.
async fn second_connection(socket: &str, within: Duration) -> Result<(), StepError> {
    use tokio::io::AsyncReadExt;
    let Ok(mut c) = tokio::net::UnixStream::connect(socket).await else { return Ok(()) };
    let deadline = Instant::now() + within;
    let mut got = 0usize;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, c.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Ok(()),
            Ok(Ok(n)) => got += n,
            Err(_) => {
                let sent = if got > 0 { format!(", and the bridge sent {got} bytes on it") } else { String::new() };
                return Err(StepError::Fail(format!(
                    "a second connection to the tool process's socket {socket} is still open after {within:?}{sent}: later connection attempts must be refused or closed"
                )));
            }
        }
    }
}

/// Pids the mocks of this run registered.
fn mock_pids(pidfile: &Path) -> Vec<i32> {
    std::fs::read_to_string(pidfile).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Closes stdin, waits `GRACE`, then SIGKILLs the bridge's group and every registered mock (and
/// its group); true when nothing is left within `KILL_LIMIT`.
async fn teardown(host: &mut StdioHost, pgid: i32, pidfile: &Path) -> bool {
    let _ = host.close(GRACE).await;
    let deadline = Instant::now() + KILL_LIMIT;
    loop {
        let mocks = mock_pids(pidfile);
        if pgid > 0 {
            crate::os::signal_group(pgid, libc::SIGKILL);
            crate::os::reap_group(pgid);
        }
        for &m in &mocks {
            crate::os::signal_process(m, libc::SIGKILL);
            crate::os::signal_group(m, libc::SIGKILL);
            // A mock whose bridge died first is this process's child (the subreaper,
            // `process::become_subreaper`): reap it, so a long run leaves no zombies.
            crate::os::reap(m);
        }
        let _ = host.wait_exit(Duration::from_millis(20)).await;
        let left = (pgid > 0 && process::group_alive(pgid)) || mocks.iter().any(|&m| alive(m));
        if !left {
            if pgid > 0 {
                process::untrack_group(pgid);
            }
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
