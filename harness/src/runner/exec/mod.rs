//! Executes the steps of one scenario against a live testee over the harness's socket. The
//! protocol decisions are the scenario module's (matching) and `verdict`'s (levels); this file
//! only moves bytes, keeps time and records the transcript.

use std::os::fd::AsFd;
use std::time::Duration;

use futures_util::StreamExt;
use protomcp_proto::dynamic::arm_of;
use protomcp_proto::envelopes::{self as env, Arm, EnvelopeExt};
use protomcp_proto::frame::{Frame, Limits};
use protomcp_proto::sideband::{StreamAssembler, StreamEvent, StreamLimits};
use protomcp_proto::violation::{Party, Violation};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

use super::process::{ExitInfo, Testee};
use crate::io::{EnvelopeCodec, Incoming};
use crate::scenario::normalize::{frame_value, sideband_value, stream_value};
use crate::scenario::{
    Action, Captures, CloseMode, FrameBody, Handshake, Scenario, Signal, T_PROMPT, T_START, match_any_order,
    match_envelope, match_value,
};
use crate::transcript::{Dir, Item, Transcript, compact, hex};

/// How many transcript lines a report shows.
pub const TRANSCRIPT_TAIL: usize = 12;

/// Why a step did not pass.
#[derive(Debug)]
pub enum StepError {
    /// The testee did not do what the scenario checks.
    Fail(String),
    /// The harness could not judge.
    Error(String),
    /// The target took a path that a MAY requirement allows and the scenario does not cover
    /// (a bridge reloading by restart in a scenario about ReloadRequest, BR-RELOAD-01): the
    /// scenario is skipped with this reason, never failed.
    NotApplicable(String),
}

impl StepError {
    /// This error as the failure of round `round` of `of` of a repeated step (a soak).
    pub(crate) fn in_round(self, round: u64, of: u64) -> StepError {
        match self {
            StepError::Fail(m) => StepError::Fail(format!("round {round} of {of}: {m}")),
            StepError::Error(m) => StepError::Error(format!("round {round} of {of}: {m}")),
            na @ StepError::NotApplicable(_) => na,
        }
    }
}

/// The process under test: a real child, or (for tests of the harness) a task in this process.
pub enum Proc {
    Child(Testee),
    Task { handle: tokio::task::JoinHandle<i32>, ended: Option<ExitInfo> },
}

impl Proc {
    async fn wait(&mut self, within: Duration) -> Option<ExitInfo> {
        match self {
            Proc::Child(t) => t.wait(within).await,
            Proc::Task { handle, ended } => {
                if ended.is_none()
                    && let Ok(r) = tokio::time::timeout(within, &mut *handle).await
                {
                    *ended = Some(ExitInfo { code: Some(r.unwrap_or(-1)), signal: None });
                }
                *ended
            }
        }
    }

    fn exited(&self) -> Option<ExitInfo> {
        match self {
            Proc::Child(t) => t.exited(),
            Proc::Task { ended, .. } => *ended,
        }
    }

    pub async fn stderr(&self) -> String {
        match self {
            Proc::Child(t) => t.stderr().await,
            Proc::Task { .. } => String::new(),
        }
    }

    fn stderr_flood(&self) -> Option<String> {
        match self {
            Proc::Child(t) => t.stderr_flood(),
            Proc::Task { .. } => None,
        }
    }
}

struct Conn {
    rx: Option<FramedRead<OwnedReadHalf, EnvelopeCodec>>,
    tx: Option<OwnedWriteHalf>,
    streams: StreamAssembler,
    /// The rid of the RawHeader frame whose payload comes next.
    raw_header_rid: Option<String>,
}

enum Got {
    Value(Value),
    Eof,
    Timeout,
}

/// The state of one scenario run.
pub struct Exec<'a> {
    pub scenario: &'a Scenario,
    pub scale: f64,
    /// The features the target claims (the handshake's default hidden tools depend on them).
    pub features: &'a [String],
    /// Whether the testee is the middleware variant.
    pub middleware: bool,
    pub listener: UnixListener,
    pub proc: Proc,
    conn: Option<Conn>,
    accepted: bool,
    /// A connection was accepted before in this run: a later one that does not come is a
    /// restart that did not happen (the step's requirement), not the connect precondition.
    reconnecting: bool,
    /// The pid of the process on the other end of the connection accepted last (its peer
    /// credentials; in bridge scenarios the mock tool process).
    pub(crate) peer_pid: Option<i32>,
    /// The pids of the processes whose connections ended ([`Exec::forget_conn`]), in order.
    pub(crate) ended_peers: Vec<i32>,
    pub(crate) caps: Captures,
    pub transcript: Transcript,
    alive: u32,
    /// How writes reach the socket (see [`super::schedule`]).
    schedule: super::schedule::Schedule,
    /// The random schedule's generator state.
    rng: u64,
    /// Bytes the `coalesce` schedule holds back until the harness next waits for the peer.
    held: Vec<u8>,
    /// The index of the step running (after a failure: the step that failed); `None` before the
    /// first step and after the last.
    pub(crate) current: Option<usize>,
    /// What the running step found out about the requirement it saw broken, when the step checks
    /// more than one thing (the handshake: the first reply, the marker, the hidden tools).
    pub(crate) found: &'static [&'static str],
    /// A rule the peer broke in the bytes it sent (a broken frame, a sideband payload of the
    /// wrong length, a stream that does not add up), and the step whose failure it is: it names
    /// what broke, whatever the step checks ([`Exec::broken`]).
    pub(crate) violated: Option<(Option<usize>, Violation)>,
    /// A write that failed because the peer had closed or reset the connection: the step it
    /// happened in and the message. Not a failure by itself: the next step that reads sees the
    /// end and is the one judged, so the verdict does not depend on whether the peer's end
    /// reached the harness before or after a write (see [`Exec::write`]).
    pub(crate) lost_write: Option<(Option<usize>, String)>,
    /// Whether a step that is not a send completed after `lost_write`.
    pub(crate) read_since_lost: bool,
    /// In bridge scenarios, after `tool_handshake`: the answers to the list pulls (the body of a
    /// `resource_list_response`, `resource_template_list_response` and `prompt_list_response`)
    /// that the harness gives whenever the bridge asks on this connection. A bridge may pull
    /// at startup or on demand (BR-HANDSHAKE-09), so a pull is no step's business; cleared with
    /// the connection ([`Exec::forget_conn`]).
    pub(crate) lists: Option<PullAnswers>,
    /// What [`Exec::poll_pulls`] read that was not a pull, for the next step that reads.
    stash: std::collections::VecDeque<Result<Got, StepError>>,
    /// What the testee's process group held when its first connection was accepted.
    pub(crate) resources_start: Option<crate::io::resources::Figures>,
    /// Whose resources are sampled ([`crate::io::resources::Sampler`]); `None`: nothing is (a testee in
    /// this process).
    pub sampler: Option<crate::io::resources::Sampler>,
    /// Bridge runs: the file the mocks write their [`crate::mock::SocketReport`]s into, read
    /// while a tool process is awaited (a `PROTOMCP_SOCKET` that is not absolute, BR-CONN-02).
    pub mock_reports: Option<std::path::PathBuf>,
    /// The samples `soak` steps took, in order.
    pub samples: Vec<crate::io::resources::Sample>,
    /// A soak that found resources growing: the step's index and the message of the LEAK.
    pub leak: Option<(Option<usize>, String)>,
    /// The samples taken every second from the first connection on ([`crate::io::resources::During`]).
    pub during: Option<crate::io::resources::During>,
    /// While [`Exec::poll_pulls`] reads: the transcript items of a frame that is not a pull go
    /// to `deferred` and reach the transcript when a step takes the frame from the stash (and
    /// never, when no step does), so the transcript shows tool-side frames where the steps read
    /// them, as before polling existed: golden transcripts do not depend on when the harness
    /// polled.
    deferring: bool,
    /// A connection reset reads as the peer closing (`expect … or_close`): a peer that closes
    /// its socket with bytes of ours unread makes the kernel reset the connection.
    reset_is_close: bool,
    deferred: Vec<Item>,
}

/// At most this many items wait in [`Exec::deferred`]; past it they go to the transcript at once
/// (a peer that floods while a host step waits).
const MAX_DEFERRED: usize = 64;

/// Records a transcript item of a frame read from the tool process: into `deferred` while
/// [`Exec::poll_pulls`] reads (see [`Exec::deferred`]), else into the transcript.
fn record(deferred: &mut Vec<Item>, transcript: &mut Transcript, deferring: bool, item: Item) {
    if deferring && deferred.len() < MAX_DEFERRED {
        deferred.push(item);
    } else {
        for d in deferred.drain(..) {
            transcript.push(d);
        }
        transcript.push(item);
    }
}

/// The tool process's answers to the bridge's list pulls (see [`Exec::lists`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct PullAnswers {
    pub resources: Value,
    pub templates: Value,
    pub prompts: Value,
}

impl PullAnswers {
    /// The answer (without its rid) to the Envelope `v`, when `v` is a list pull.
    fn answer(&self, v: &Value) -> Option<Value> {
        match arm_of(v)? {
            "list_resources_request" => Some(json!({"resource_list_response": {"resources": self.resources}})),
            "list_resource_templates_request" => {
                Some(json!({"resource_template_list_response": {"templates": self.templates}}))
            }
            "list_prompts_request" => Some(json!({"prompt_list_response": {"prompts": self.prompts}})),
            _ => None,
        }
    }
}

fn signo(s: Signal) -> i32 {
    match s {
        Signal::Term => libc::SIGTERM,
        Signal::Int => libc::SIGINT,
        Signal::Hup => libc::SIGHUP,
        Signal::Kill => libc::SIGKILL,
    }
}

impl<'a> Exec<'a> {
    pub fn new(
        scenario: &'a Scenario,
        scale: f64,
        features: &'a [String],
        middleware: bool,
        listener: UnixListener,
        proc: Proc,
    ) -> Self {
        Exec {
            scenario,
            scale: scale.max(1.0),
            features,
            middleware,
            listener,
            proc,
            conn: None,
            accepted: false,
            reconnecting: false,
            peer_pid: None,
            ended_peers: Vec::new(),
            caps: Captures::new(),
            transcript: Transcript::default(),
            alive: 0,
            schedule: super::schedule::current(),
            rng: 0,
            held: Vec::new(),
            current: None,
            found: &[],
            violated: None,
            lost_write: None,
            read_since_lost: false,
            lists: None,
            stash: Default::default(),
            resources_start: None,
            sampler: None,
            mock_reports: None,
            samples: Vec::new(),
            leak: None,
            during: None,
            deferring: false,
            reset_is_close: false,
            deferred: Vec::new(),
        }
        .recording_schedule()
    }

    pub(crate) fn t(&self, d: Duration) -> Duration {
        d.mul_f64(self.scale)
    }

    /// Runs every step; the error names the step's `file:line:col`.
    pub async fn run_steps(&mut self) -> Result<(), StepError> {
        for (i, step) in self.scenario.steps.iter().enumerate() {
            self.current = Some(i);
            self.found = &[];
            let at = self.scenario.at(step.loc);
            let kw = step.keyword();
            self.transcript.push(Item::Step { index: i + 1, keyword: kw.to_owned(), line: step.loc.line });
            if step.action.needs_connection() {
                self.ensure_conn().await.map_err(|e| prefix(e, &at.to_string(), kw))?;
            }
            if !matches!(step.action, Action::Send(_) | Action::SendRaw(_) | Action::SendFrame(_)) {
                self.flush_held().await.map_err(|e| prefix(e, &at.to_string(), kw))?;
            }
            self.step(&step.action).await.map_err(|e| prefix(e, &at.to_string(), kw))?;
            self.note_step_done(&step.action);
        }
        self.lost_write_unjudged()?;
        self.current = None;
        self.found = &[];
        if let Some(f) = self.flood().or_else(|| self.proc.stderr_flood()) {
            return Err(StepError::Fail(f));
        }
        self.flush_held().await
    }

    /// The peer under test, for messages: `the tool process` or `the bridge`. On the harness's
    /// socket it sends every byte the harness reads (in bridge runs through the mock's relay).
    pub(crate) fn party(&self) -> &'static str {
        match self.peer() {
            Party::Bridge => "the bridge",
            Party::ToolProcess => "the tool process",
        }
    }

    /// Who sends the frames the harness reads on its socket: the tool process under test, or
    /// in a bridge run the bridge (the mock only relays its bytes).
    pub(crate) fn peer(&self) -> Party {
        self.scenario.role.party()
    }

    /// What connects to the harness's socket, for messages: the tool process under test, or in a
    /// bridge run the tool process the bridge starts (the mock).
    fn connector(&self) -> &'static str {
        match self.peer() {
            Party::Bridge => "the bridge's tool process",
            Party::ToolProcess => "the tool process",
        }
    }

    /// The failure of the running step by `v`, a rule the peer broke in its bytes: the message
    /// names the requirement, its level and the party, and [`Exec::broken`] the requirement.
    pub(crate) fn violation(&mut self, v: Violation) -> StepError {
        let m = v.to_string();
        self.violated = Some((self.current, v));
        StepError::Fail(m)
    }

    /// A failure of [`Exec::next`] that the step reads as the end of the connection, not as its
    /// own failure: the violation it recorded is no longer what broke.
    pub(crate) fn forget_violation(&mut self) {
        self.violated = None;
    }

    /// When the transcript went past its bound ([`crate::limits::TRANSCRIPT`]): the failure
    /// naming the flood.
    pub(crate) fn flood(&self) -> Option<String> {
        self.transcript.flood(self.party())
    }

    /// After a step passed: a step that is not a send has looked at the connection since a lost
    /// write.
    pub(crate) fn note_step_done(&mut self, action: &Action) {
        if self.lost_write.is_some() && !matches!(action, Action::Send(_) | Action::SendRaw(_) | Action::SendFrame(_)) {
            self.read_since_lost = true;
        }
    }

    /// A lost write that no later step judged (the scenario ended with sends): it fails the run
    /// at its own step.
    pub(crate) fn lost_write_unjudged(&mut self) -> Result<(), StepError> {
        match self.lost_write.take() {
            Some((index, message)) if !self.read_since_lost => {
                self.current = index;
                self.found = &[];
                let at = index
                    .and_then(|i| self.scenario.steps.get(i))
                    .map(|st| format!("{}: {}: ", self.scenario.at(st.loc), st.keyword()));
                Err(StepError::Fail(format!("{}{message}", at.unwrap_or_default())))
            }
            _ => Ok(()),
        }
    }

    /// Where the failure of this run was decided: the step running, or `end` after the last.
    pub fn check(&self) -> super::verdict::Check {
        super::verdict::Check::at(self.current)
    }

    /// The requirements the failure of this run broke: the rule the peer broke in its bytes
    /// when that failed the step, else see [`Scenario::broken_by`].
    pub fn broken(&self) -> Vec<String> {
        match &self.violated {
            Some((step, v)) if *step == self.current => vec![v.requirement().to_owned()],
            _ => self.scenario.broken_by(self.current, self.found),
        }
    }

    /// The line of the step running (after a failure: the step that failed) in the scenario's file.
    pub fn step_line(&self) -> Option<u32> {
        self.current.and_then(|i| self.scenario.steps.get(i)).map(|st| st.loc.line)
    }

    /// The requirements steps before the failing one showed to hold (see
    /// [`Scenario::held_before`]).
    pub fn held(&self) -> Vec<String> {
        self.scenario.held_before(self.current, &self.broken())
    }

    fn recording_schedule(mut self) -> Self {
        if self.schedule != super::schedule::Schedule::Whole {
            self.transcript.push(Item::Schedule { name: self.schedule.name() });
        }
        self
    }

    /// Writes what the `coalesce` schedule held back, as one write.
    async fn flush_held(&mut self) -> Result<(), StepError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.held);
        let within = self.t(Duration::from_secs(5));
        let Some(tx) = self.conn.as_mut().and_then(|c| c.tx.as_mut()) else { return Ok(()) };
        match tokio::time::timeout(within, tx.write_all(&bytes)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StepError::Fail(format!("writing to {} failed: {e}", self.party()))),
            Err(_) => {
                Err(StepError::Fail(format!("{} did not read {} bytes within {within:?}", self.party(), bytes.len())))
            }
        }
    }

    pub(crate) async fn ensure_conn(&mut self) -> Result<(), StepError> {
        if self.accepted {
            return Ok(());
        }
        let within = self.t(T_START);
        let deadline = Instant::now() + within;
        // A peer that never connects breaks the connect (a precondition of most scenarios): the
        // tool process's own, or the bridge's, which starts it. One that connected before and
        // does not come back breaks what the step checks (a restart, say).
        let connect: &'static [&'static str] = match self.scenario.role {
            _ if self.reconnecting => &[],
            // The harness planted a stale file at the socket path (BR-CONN-04): a tool process
            // that then never connects shows the bridge did not clear it before listening.
            crate::scenario::Role::Bridge if self.scenario.stale_socket => &["BR-CONN-04"],
            crate::scenario::Role::ToolProcess => &["TP-CONN-01"],
            crate::scenario::Role::Bridge => &["BR-CONN-01"],
        };
        let mut look = tokio::time::interval(Duration::from_millis(20));
        let stream = loop {
            tokio::select! {
                biased;
                // BR-CONN-02: the mock reports the PROTOMCP_SOCKET it was given before it refuses
                // one that is not absolute; such a tool process never connects, and the path's
                // form is what broke, not the connect.
                _ = look.tick(), if self.mock_reports.is_some() => {
                    if let Some(socket) = self.relative_socket() {
                        self.found = &["BR-CONN-02"];
                        return Err(StepError::Fail(format!(
                            "the bridge started its tool process with PROTOMCP_SOCKET={socket:?}, which is not an absolute path (the mock refused it and exited)"
                        )));
                    }
                }
                r = tokio::time::timeout_at(deadline, self.listener.accept()) => match r {
                    Ok(Ok((s, _))) => break s,
                    Ok(Err(e)) => return Err(StepError::Error(format!("accept failed: {e}"))),
                    Err(_) => {
                        self.found = connect;
                        let listens = self.someone_else_listens().await;
                        return Err(StepError::Fail(format!("{} did not connect within {within:?}{listens}", self.connector())));
                    }
                },
                x = self.proc.wait(within) => if let Some(x) = x {
                    // It may have connected just before it ended: the connection waits in the
                    // backlog.
                    match tokio::time::timeout(Duration::from_millis(50), self.listener.accept()).await {
                        Ok(Ok((s, _))) => break s,
                        _ => {
                            // A tool process that ends before connecting in a scenario that gives it
                            // environment of its own (a malformed threshold, say): that environment
                            // is what the scenario checks, so its requirements are named, not the
                            // connect's.
                            let own_env = self.scenario.role == crate::scenario::Role::ToolProcess
                                && !self.scenario.testee.env.is_empty();
                            self.found = if own_env { &[] } else { connect };
                            return Err(StepError::Fail(format!("{} ended ({x}) without connecting", self.connector())));
                        }
                    }
                }
            }
        };
        self.accepted = true;
        self.reconnecting = true;
        if self.resources_start.is_none() {
            self.resources_start = self.sampler.as_ref().and_then(crate::io::resources::Sampler::sample);
            if self.resources_start.is_some() {
                self.during = self.sampler.clone().map(crate::io::resources::During::start);
            }
        }
        self.peer_pid = stream.peer_cred().ok().and_then(|c| c.pid());
        self.transcript.push(Item::Connected);
        let (rd, wr) = stream.into_split();
        let rx = FramedRead::new(rd, EnvelopeCodec::new(self.peer(), Limits::default()));
        self.conn = Some(Conn {
            rx: Some(rx),
            tx: Some(wr),
            streams: StreamAssembler::new(self.peer(), StreamLimits::default()),
            raw_header_rid: None,
        });
        Ok(())
    }

    /// After a tool process did not connect: whether the socket path now leads to a listener
    /// other than the harness's (a tool process that replaced the socket file and listens
    /// there instead of connecting), said as a clause for the failure; empty otherwise.
    async fn someone_else_listens(&self) -> &'static str {
        if self.scenario.role != crate::scenario::Role::ToolProcess || self.reconnecting {
            return "";
        }
        let Some(path) = self.listener.local_addr().ok().and_then(|a| a.as_pathname().map(ToOwned::to_owned)) else {
            return "";
        };
        if !path.exists() {
            return "; the socket file at PROTOMCP_SOCKET is gone (removed by the tool process?)";
        }
        let Ok(probe) = tokio::net::UnixStream::connect(&path).await else { return "" };
        // The harness's own listener gets the probe at once; another one does not.
        match tokio::time::timeout(Duration::from_millis(200), self.listener.accept()).await {
            Ok(_) => "",
            Err(_) => {
                drop(probe);
                "; another socket listens at PROTOMCP_SOCKET now: the tool process replaced the harness's socket file \
                 and listens there instead of connecting"
            }
        }
    }

    /// The `PROTOMCP_SOCKET` of a mock report that is not an absolute path, if any.
    fn relative_socket(&self) -> Option<String> {
        let path = self.mock_reports.as_ref()?;
        crate::mock::read_reports(path).into_iter().map(|r| r.socket).find(|s| !std::path::Path::new(s).is_absolute())
    }

    /// Writes `bytes`; `tree` is what they encode (if they are one Envelope frame), otherwise
    /// the transcript shows them as hex.
    pub(crate) async fn write(
        &mut self,
        bytes: &[u8],
        tree: Option<Value>,
        note: Option<String>,
    ) -> Result<(), StepError> {
        let within = self.t(Duration::from_secs(5));
        let raw = if tree.is_none() { Some(hex(bytes)) } else { None };
        self.transcript.push(Item::Frame { dir: Dir::ToTestee, tree, hex: raw, note });
        let tx = self
            .conn
            .as_mut()
            .and_then(|c| c.tx.as_mut())
            .ok_or_else(|| StepError::Error("the connection is closed for writing".into()))?;
        if self.schedule == super::schedule::Schedule::Coalesce {
            self.held.extend_from_slice(bytes);
            return Ok(());
        }
        let pieces = self.schedule.pieces(bytes.len(), &mut self.rng);
        match tokio::time::timeout(within, deliver(tx, bytes, pieces)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if peer_gone(&e) => {
                // The peer is gone: the next step that reads sees that and is judged.
                self.transcript.push(Item::StreamError { error: format!("write: {e}") });
                if self.lost_write.is_none() {
                    self.lost_write = Some((self.current, format!("writing to the peer failed: {e}")));
                    self.read_since_lost = false;
                }
                Ok(())
            }
            Ok(Err(e)) => Err(StepError::Fail(format!("writing to {} failed: {e}", self.party()))),
            Err(_) => {
                Err(StepError::Fail(format!("{} did not read {} bytes within {within:?}", self.party(), bytes.len())))
            }
        }
    }

    pub(crate) async fn send_value(&mut self, v: Value) -> Result<(), StepError> {
        let body = protomcp_proto::dynamic::encode(&v).map_err(|e| StepError::Error(e.to_string()))?;
        let bytes = protomcp_proto::frame::frame_bytes(&body);
        self.write(&bytes, Some(v), None).await
    }

    fn shutdown(&mut self, how: i32) {
        if let Some(c) = &self.conn {
            let fd = c.tx.as_ref().map(|t| t.as_ref().as_fd()).or(c.rx.as_ref().map(|r| r.get_ref().as_ref().as_fd()));
            if let Some(fd) = fd {
                let _ = crate::os::shutdown(fd, how);
            }
        }
    }

    /// Closes the connection as spec B.4 asks: shutdown(SHUT_RDWR), then drop.
    pub fn close(&mut self) {
        // What no step read stays out of the transcript, as before polling existed.
        self.deferred.clear();
        self.shutdown(libc::SHUT_RDWR);
        self.conn = None;
    }

    /// Forgets the tool-side connection, so that the next tool-side step accepts a new one (the
    /// bridge restarted its tool process).
    pub(crate) fn forget_conn(&mut self) {
        self.close();
        self.accepted = false;
        self.lists = None;
        self.deferred.clear();
        self.stash.clear();
        if let Some(pid) = self.peer_pid.take() {
            self.ended_peers.push(pid);
        }
    }

    /// The last lines of the transcript.
    pub fn transcript_tail(&self) -> Vec<String> {
        self.transcript.tail(TRANSCRIPT_TAIL)
    }

    /// Whether the testee has ended.
    pub fn ended(&self) -> bool {
        self.proc.exited().is_some()
    }
}

/// Writes `bytes` cut into `pieces` (length, pause before it).
/// Whether a write failed because the peer closed or reset the connection.
fn peer_gone(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted | NotConnected)
}

async fn deliver(tx: &mut OwnedWriteHalf, bytes: &[u8], pieces: Vec<(usize, Duration)>) -> std::io::Result<()> {
    let mut at = 0;
    for (n, pause) in pieces {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        tx.write_all(&bytes[at..at + n]).await?;
        at += n;
    }
    Ok(())
}

fn from(tree: Value, note: &str) -> Item {
    Item::Frame { dir: Dir::FromTestee, tree: Some(tree), hex: None, note: Some(note.to_owned()) }
}

fn prefix(e: StepError, at: &str, kw: &str) -> StepError {
    match e {
        StepError::Fail(m) => StepError::Fail(format!("{at}: {kw}: {m}")),
        StepError::Error(m) => StepError::Error(format!("{at}: {kw}: {m}")),
        StepError::NotApplicable(m) => StepError::NotApplicable(format!("{at}: {kw}: {m}")),
    }
}

/// `T_PROMPT`, re-exported for the runner's defaults.
pub const DEFAULT_STEP: Duration = T_PROMPT;

mod read;
mod steps;

/// A run whose steps all passed but whose soak found resources growing becomes
/// [`Outcome::Leaked`], judged at the soak step (its `checks:`, else the scenario's
/// requirements).
pub(crate) fn leaked(outcome: super::Outcome, ex: &mut Exec<'_>) -> super::Outcome {
    match (outcome, ex.leak.take()) {
        (super::Outcome::Passed, Some((step, message))) => {
            ex.current = step;
            ex.found = &[];
            super::Outcome::Leaked(message)
        }
        (o, _) => o,
    }
}

#[cfg(test)]
mod tests;
