//! Executes the steps of one scenario against a live testee over the harness's socket. The
//! protocol decisions are the scenario module's (matching) and `verdict`'s (levels); this file
//! only moves bytes, keeps time and records the transcript.

use std::os::fd::AsRawFd;
use std::time::Duration;

use futures_util::StreamExt;
use protomcp_proto::dynamic::arm_of;
use protomcp_proto::envelopes::{self as env, Arm, EnvelopeExt};
use protomcp_proto::frame::{Frame, Limits};
use protomcp_proto::sideband::{StreamAssembler, StreamEvent, StreamLimits};
use protomcp_proto::violation::Party;
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
            lost_write: None,
            read_since_lost: false,
            lists: None,
            stash: Default::default(),
            resources_start: None,
            sampler: None,
            samples: Vec::new(),
            leak: None,
            during: None,
            deferring: false,
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

    /// The peer under test, for messages: `the testee` or `the bridge`.
    pub(crate) fn party(&self) -> &'static str {
        match self.scenario.role {
            crate::scenario::Role::Bridge => "the bridge",
            crate::scenario::Role::ToolProcess => "the testee",
        }
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

    /// The requirements the failure of this run broke (see [`Scenario::broken_by`]).
    pub fn broken(&self) -> Vec<String> {
        self.scenario.broken_by(self.current, self.found)
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
            Ok(Err(e)) => Err(StepError::Fail(format!("writing to the testee failed: {e}"))),
            Err(_) => Err(StepError::Fail(format!("the testee did not read {} bytes within {within:?}", bytes.len()))),
        }
    }

    pub(crate) async fn ensure_conn(&mut self) -> Result<(), StepError> {
        if self.accepted {
            return Ok(());
        }
        let within = self.t(T_START);
        let deadline = Instant::now() + within;
        let stream = loop {
            tokio::select! {
                biased;
                r = tokio::time::timeout_at(deadline, self.listener.accept()) => match r {
                    Ok(Ok((s, _))) => break s,
                    Ok(Err(e)) => return Err(StepError::Error(format!("accept failed: {e}"))),
                    Err(_) => return Err(StepError::Fail(format!("the testee did not connect within {within:?}"))),
                },
                x = self.proc.wait(within) => if let Some(x) = x {
                    // It may have connected just before it ended: the connection waits in the
                    // backlog.
                    match tokio::time::timeout(Duration::from_millis(50), self.listener.accept()).await {
                        Ok(Ok((s, _))) => break s,
                        _ => return Err(StepError::Fail(format!("the testee ended ({x}) without connecting"))),
                    }
                }
            }
        };
        self.accepted = true;
        if self.resources_start.is_none() {
            self.resources_start = self.sampler.as_ref().and_then(crate::io::resources::Sampler::sample);
            if self.resources_start.is_some() {
                self.during = self.sampler.clone().map(crate::io::resources::During::start);
            }
        }
        self.peer_pid = stream.peer_cred().ok().and_then(|c| c.pid());
        self.transcript.push(Item::Connected);
        let (rd, wr) = stream.into_split();
        let rx = FramedRead::new(rd, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
        self.conn = Some(Conn {
            rx: Some(rx),
            tx: Some(wr),
            streams: StreamAssembler::new(Party::ToolProcess, StreamLimits::default()),
            raw_header_rid: None,
        });
        Ok(())
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
            Ok(Err(e)) => Err(StepError::Fail(format!("writing to the testee failed: {e}"))),
            Err(_) => Err(StepError::Fail(format!("the testee did not read {} bytes within {within:?}", bytes.len()))),
        }
    }

    pub(crate) async fn send_value(&mut self, v: Value) -> Result<(), StepError> {
        let body = protomcp_proto::dynamic::encode(&v).map_err(|e| StepError::Error(e.to_string()))?;
        let bytes = protomcp_proto::frame::frame_bytes(&body);
        self.write(&bytes, Some(v), None).await
    }

    /// The next tree (not in `ignore`) until `deadline`; sideband transfers and completed streams
    /// arrive as their equivalent result.
    async fn next(&mut self, deadline: Instant, ignore: &[Arm]) -> Result<Got, StepError> {
        self.flush_held().await?;
        while let Some(got) = self.stash.pop_front() {
            self.flush_deferred();
            match got? {
                Got::Value(v) if arm_of(&v).and_then(Arm::from_name).is_some_and(|a| ignore.contains(&a)) => {}
                got => return Ok(got),
            }
        }
        loop {
            // A peer that sends without end ends the step here, not at its deadline.
            if let Some(f) = self.flood() {
                return Err(StepError::Fail(f));
            }
            let conn = self.conn.as_mut().ok_or_else(|| StepError::Error("no connection".into()))?;
            let rx = conn.rx.as_mut().ok_or_else(|| StepError::Error("the connection is closed".into()))?;
            let item = match tokio::time::timeout_at(deadline, rx.next()).await {
                Err(_) => return Ok(Got::Timeout),
                Ok(None) => {
                    record(&mut self.deferred, &mut self.transcript, self.deferring, Item::Eof);
                    return Ok(Got::Eof);
                }
                Ok(Some(Err(e))) => {
                    record(
                        &mut self.deferred,
                        &mut self.transcript,
                        self.deferring,
                        Item::StreamError { error: e.to_string() },
                    );
                    return Err(StepError::Fail(format!("the connection broke: {e}")));
                }
                Ok(Some(Ok(i))) => i,
            };
            let v = match item {
                Incoming::Malformed(e) => {
                    let body = match &e {
                        protomcp_proto::frame::FrameError::Undecodable { body, .. } => Some(hex(body)),
                        _ => None,
                    };
                    record(
                        &mut self.deferred,
                        &mut self.transcript,
                        self.deferring,
                        Item::Malformed { error: e.to_string(), hex: body },
                    );
                    return Err(StepError::Fail(format!("the testee sent a malformed frame: {e}")));
                }
                Incoming::Frame(Frame::Sideband(sb)) => {
                    let rid = conn.raw_header_rid.take().unwrap_or_default();
                    sideband_value(&sb, &rid)
                }
                Incoming::Frame(Frame::Envelope(d)) => {
                    let tree = frame_value(&d).map_err(|e| StepError::Error(e.to_string()))?;
                    if arm_of(&tree) == Some("raw_header") {
                        // The payload follows as a Sideband item, which stands for the result.
                        record(&mut self.deferred, &mut self.transcript, self.deferring, from(tree, "sideband header"));
                        conn.raw_header_rid = Some(d.envelope.request_id.clone());
                        continue;
                    }
                    match conn.streams.handle(&d.envelope) {
                        None => tree,
                        Some(ev @ StreamEvent::Complete { .. }) => {
                            record(
                                &mut self.deferred,
                                &mut self.transcript,
                                self.deferring,
                                from(tree.clone(), "stream end"),
                            );
                            stream_value(&ev).unwrap_or(tree)
                        }
                        Some(StreamEvent::Progress { .. }) => {
                            record(&mut self.deferred, &mut self.transcript, self.deferring, from(tree, "stream"));
                            continue;
                        }
                        Some(StreamEvent::Failed { rid, error, .. }) => {
                            json!({"request_id": rid, "via": "stream", "stream": {"error": error.to_string()}})
                        }
                        // A chunk without an open stream (one after the final chunk, or under a
                        // rid that never had a header) breaks TP-STREAM-02: it is a frame the
                        // steps see, so `expect` and `expect_nothing` catch it.
                        Some(StreamEvent::Orphan { violation, .. }) => {
                            let mut tree = tree;
                            if let Some(obj) = tree.as_object_mut() {
                                obj.insert("stream".into(), json!({"orphan": violation.to_string()}));
                            }
                            tree
                        }
                    }
                }
            };
            let ignored = arm_of(&v).and_then(Arm::from_name).is_some_and(|a| ignore.contains(&a));
            let pulled = self.lists.as_ref().and_then(|l| l.answer(&v));
            let note = if pulled.is_some() {
                Some("a list pull: answered by the harness".to_owned())
            } else {
                ignored.then(|| "ignored".to_owned())
            };
            let item = Item::Frame { dir: Dir::FromTestee, tree: Some(v.clone()), hex: None, note };
            if pulled.is_some() {
                self.transcript.push(item);
            } else {
                record(&mut self.deferred, &mut self.transcript, self.deferring, item);
            }
            if let Some(mut reply) = pulled {
                reply["request_id"] = v.get("request_id").cloned().unwrap_or(json!(""));
                self.send_value(reply).await?;
                continue;
            }
            if !ignored {
                return Ok(Got::Value(v));
            }
        }
    }

    /// The next frame before `deadline`, or `None` when the connection ends (end of file, or it
    /// broke, as `expect_close` counts it); nothing within the time is a failure.
    pub(crate) async fn next_or_end(
        &mut self,
        deadline: Instant,
        within: Duration,
    ) -> Result<Option<Value>, StepError> {
        match self.next(deadline, &[]).await {
            Ok(Got::Value(v)) => Ok(Some(v)),
            Ok(Got::Eof) | Err(StepError::Fail(_)) => Ok(None),
            Ok(Got::Timeout) => Err(StepError::Fail(format!("nothing arrived within {within:?}"))),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn next_required(
        &mut self,
        deadline: Instant,
        within: Duration,
        ignore: &[Arm],
    ) -> Result<Value, StepError> {
        match self.next(deadline, ignore).await? {
            Got::Value(v) => Ok(v),
            Got::Eof => Err(StepError::Fail("the testee closed the connection".into())),
            Got::Timeout => Err(StepError::Fail(format!("nothing arrived within {within:?}"))),
        }
    }

    fn flush_deferred(&mut self) {
        for item in std::mem::take(&mut self.deferred) {
            self.transcript.push(item);
        }
    }

    /// Reads what the tool process has sent without waiting, so that list pulls the bridge makes
    /// on demand (BR-HANDSHAKE-09) are answered while host steps wait for the bridge; anything
    /// else is kept for the next step that reads. Does nothing before `tool_handshake` set
    /// [`Exec::lists`] or while a step's result is already kept.
    pub(crate) async fn poll_pulls(&mut self) {
        if self.lists.is_none() || !self.stash.is_empty() || self.conn.as_ref().is_none_or(|c| c.rx.is_none()) {
            return;
        }
        self.deferring = true;
        let got = self.next(Instant::now(), &[]).await;
        self.deferring = false;
        match got {
            // Chunks of a stream still open stay deferred: they belong to its end.
            Ok(Got::Timeout) => {}
            got => self.stash.push_back(got),
        }
    }

    fn shutdown(&mut self, how: i32) {
        if let Some(c) = &self.conn {
            let fd =
                c.tx.as_ref()
                    .map(|t| t.as_ref().as_raw_fd())
                    .or(c.rx.as_ref().map(|r| r.get_ref().as_ref().as_raw_fd()));
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

    async fn handshake(&mut self, h: &Handshake) -> Result<(), StepError> {
        let within = self.t(h.within);
        let deadline = Instant::now() + within;
        self.found = &["TP-HANDSHAKE-02"];
        self.send_value(json!({"request_id": h.rid, "list_tools": {}})).await?;
        let v = self.next_required(deadline, within, &[]).await?;
        if v.get("request_id").and_then(Value::as_str).unwrap_or("") != h.rid || arm_of(&v) != Some("tool_list") {
            return Err(StepError::Fail(format!(
                "expected the tool_list under rid {:?} first, got {}",
                h.rid,
                compact(&v)
            )));
        }
        if let Some(p) = &h.tool_list {
            // What the scenario's own pattern checks is the scenario's.
            self.found = &[];
            match_value(p, v.get("tool_list"), &mut self.caps)
                .map_err(|m| StepError::Fail(format!("tool_list: {m}")))?;
        }
        let mut registered = Vec::new();
        self.found = if self.middleware { &["TP-HANDSHAKE-09", "TP-HANDSHAKE-10"] } else { &["TP-HANDSHAKE-10"] };
        loop {
            let v = self.next_required(deadline, within, &[]).await?;
            let rid = v.get("request_id").and_then(Value::as_str).unwrap_or("");
            match arm_of(&v) {
                Some("register_middleware") if rid.is_empty() => {
                    registered.push(v["register_middleware"]["name"].as_str().unwrap_or("").to_owned());
                    let ack = env::register_middleware_response(true);
                    let tree = json!({"request_id": "", "register_middleware_response": {"success": true}});
                    self.write(&ack.to_frame(), Some(tree), None).await?;
                }
                Some("reload_response") if rid.is_empty() && v["reload_response"]["success"] == json!(true) => break,
                _ => {
                    return Err(StepError::Fail(format!(
                        "expected a register_middleware or the reload_response marker, got {}",
                        compact(&v)
                    )));
                }
            }
        }
        let want_mw = h.middleware.clone().unwrap_or_else(|| {
            if self.middleware { ["guard", "mirror", "broken"].map(String::from).to_vec() } else { Vec::new() }
        });
        if registered != want_mw {
            self.found = &["TP-HANDSHAKE-09"];
            return Err(StepError::Fail(format!("middleware registered: {registered:?}, expected {want_mw:?}")));
        }
        let hidden = h.hidden.clone().unwrap_or_else(|| {
            if self.features.iter().any(|f| f == "hidden") { vec!["secret".to_owned()] } else { Vec::new() }
        });
        if !hidden.is_empty() {
            self.found = &["TP-HANDSHAKE-12"];
            let v = self.next_required(deadline, within, &[]).await?;
            let rid = v.get("request_id").and_then(Value::as_str).unwrap_or("");
            let mut got: Vec<String> = v["disable_tools"]["tool_names"]
                .as_array()
                .map(|a| a.iter().filter_map(|n| n.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let mut want = hidden.clone();
            got.sort();
            want.sort();
            if arm_of(&v) != Some("disable_tools") || !rid.is_empty() || got != want {
                return Err(StepError::Fail(format!(
                    "expected disable_tools {hidden:?} with an empty rid, got {}",
                    compact(&v)
                )));
            }
        }
        Ok(())
    }

    pub(crate) async fn step(&mut self, action: &Action) -> Result<(), StepError> {
        let render = |e: crate::scenario::RenderError| StepError::Error(e.to_string());
        match action {
            Action::Handshake(h) => self.handshake(h).await,
            Action::Send(t) => {
                let v = t.render(&self.caps).map_err(render)?;
                let bytes = t.frame(&self.caps).map_err(render)?;
                self.write(&bytes, Some(v), None).await
            }
            Action::SendRaw(b) => self.write(b, None, None).await,
            Action::SendFrame(f) => {
                let body = match &f.body {
                    FrameBody::Hex(b) => b.clone(),
                    FrameBody::Envelope(t) => t.body(&self.caps).map_err(render)?,
                };
                let len = f.length.unwrap_or(u32::try_from(body.len()).unwrap_or(u32::MAX));
                let mut bytes = len.to_be_bytes().to_vec();
                bytes.extend(&body);
                let note = format!("frame: prefix {len}, {} body bytes", body.len());
                self.write(&bytes, None, Some(note)).await
            }
            Action::Expect(e) => {
                let within = self.t(e.within);
                let v = self.next_required(Instant::now() + within, within, &e.ignore).await?;
                match_envelope(&e.pattern, &v, &mut self.caps)
                    .map_err(|m| StepError::Fail(format!("{m}\n  arrived: {}", compact(&v))))
            }
            Action::ExpectAnyOrder(e) => {
                let within = self.t(e.within);
                let deadline = Instant::now() + within;
                let mut values = Vec::new();
                for _ in &e.patterns {
                    values.push(self.next_required(deadline, within, &e.ignore).await?);
                }
                match_any_order(&e.patterns, &values, &mut self.caps).map(|_| ()).map_err(|m| {
                    let got: Vec<String> = values.iter().map(compact).collect();
                    StepError::Fail(format!("{m}\n  arrived: {}", got.join("\n           ")))
                })
            }
            Action::ExpectNothing(e) => {
                let d = self.t(e.duration);
                match self.next(Instant::now() + d, &e.ignore).await? {
                    Got::Timeout => Ok(()),
                    Got::Eof => Err(StepError::Fail(format!("the testee closed the connection within {d:?}"))),
                    Got::Value(v) => Err(StepError::Fail(format!("expected nothing for {d:?}, got {}", compact(&v)))),
                }
            }
            Action::ExpectClose { within } => {
                let within = self.t(*within);
                let deadline = Instant::now() + within;
                loop {
                    match self.next(deadline, &[]).await {
                        Ok(Got::Eof) | Err(StepError::Fail(_)) => return Ok(()),
                        Ok(Got::Value(_)) => continue,
                        Ok(Got::Timeout) => {
                            return Err(StepError::Fail(format!("the connection was still open after {within:?}")));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Action::ExpectExit(x) => {
                let within = self.t(x.within);
                let Some(info) = self.proc.wait(within).await else {
                    return Err(StepError::Fail(format!("the testee was still running after {within:?}")));
                };
                self.transcript.push(Item::Exit { status: info.to_string() });
                let sent = match &self.proc {
                    Proc::Child(t) => t.sent_signals.clone(),
                    Proc::Task { .. } => Vec::new(),
                };
                // A death by a signal the harness sent counts as 128 + signal; by any other
                // signal as "no status" (spec §1.6: non-zero).
                let status = match (info.code, info.signal) {
                    (Some(c), _) => Some(c),
                    (None, Some(s)) if sent.contains(&s) => Some(128 + s),
                    _ => None,
                };
                if !x.code.accepts(status) {
                    return Err(StepError::Fail(format!("the testee ended with {info}, expected {:?}", x.code)));
                }
                if let Some(p) = &x.stderr {
                    let text = self.proc.stderr().await;
                    match_value(p, Some(&Value::String(text)), &mut self.caps)
                        .map_err(|m| StepError::Fail(format!("stderr: {m}")))?;
                }
                Ok(())
            }
            Action::ExpectAlive { within } => {
                let within = self.t(*within);
                self.alive += 1;
                let rid = format!("alive-{}", self.alive);
                self.send_value(
                    json!({"request_id": rid, "call_tool": {"name": "echo", "arguments_json": "{\"text\":\"alive\"}"}}),
                )
                .await?;
                let deadline = Instant::now() + within;
                loop {
                    let v = self.next_required(deadline, within, &[]).await?;
                    if v.get("request_id").and_then(Value::as_str) == Some(rid.as_str()) {
                        return if v.get("call_result").is_some() {
                            Ok(())
                        } else {
                            Err(StepError::Fail(format!("the echo call {rid} got {}", compact(&v))))
                        };
                    }
                }
            }
            Action::ExpectNoConnect { duration } => {
                let d = self.t(*duration);
                match tokio::time::timeout(d, self.listener.accept()).await {
                    Ok(Ok(_)) => {
                        Err(StepError::Fail(format!("a connection reached the harness's socket within {d:?}")))
                    }
                    Ok(Err(e)) => Err(StepError::Error(format!("accept failed: {e}"))),
                    Err(_) => Ok(()),
                }
            }
            Action::Sleep(d) => {
                tokio::time::sleep(self.t(*d)).await;
                Ok(())
            }
            Action::Close(CloseMode::Both) => {
                self.transcript.push(Item::Shutdown { how: "SHUT_RDWR".into() });
                self.close();
                Ok(())
            }
            Action::Close(CloseMode::Write) => {
                self.transcript.push(Item::Shutdown { how: "SHUT_WR".into() });
                self.shutdown(libc::SHUT_WR);
                if let Some(c) = self.conn.as_mut() {
                    c.tx = None;
                }
                Ok(())
            }
            Action::Signal(s) => match &mut self.proc {
                Proc::Child(t) => {
                    t.signal(signo(*s));
                    self.transcript.push(Item::Signal { name: format!("{s:?}") });
                    Ok(())
                }
                Proc::Task { .. } => Err(StepError::Error("signals need a testee process".into())),
            },
            Action::Check { capture, pattern } => {
                let v = self.caps.get(capture).cloned();
                match_value(pattern, v.as_ref(), &mut self.caps).map_err(|m| {
                    StepError::Fail(format!(
                        "{m}\n  `{capture}` holds: {}",
                        v.as_ref().map(compact).unwrap_or_default()
                    ))
                })
            }
            Action::Soak(k) => self.soak(k).await,
            Action::HostSend(_)
            | Action::HostExpect(_)
            | Action::HostExpectNothing(_)
            | Action::HostHttp(_)
            | Action::HostClose
            | Action::ToolHandshake(_)
            | Action::ReloadBegins(_)
            | Action::Touch(_)
            | Action::ExpectSocket { .. }
            | Action::ExpectSocketPrivate
            | Action::ToolConnectAgain { .. }
            | Action::ExpectToolExit { .. } => {
                Err(StepError::Error(format!("`{}` runs only against a bridge", action.keyword())))
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A bridge (played here on the other end of the socket) that pulls a list on demand while
    /// the harness waits for something else: the pull is answered at once by `poll_pulls`, and
    /// the frame after it is kept for the step that reads next.
    #[tokio::test]
    async fn a_list_pull_after_the_handshake_is_answered_while_other_frames_wait_for_their_step() {
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let scenario = crate::scenario::parse_str(
            std::path::Path::new("t.yaml"),
            "id: t.pull\ntitle: t\nrequirements: [BR-HANDSHAKE-09]\nlevel: MUST\nrole: bridge\nsteps:\n  - expect: {envelope: {arm: call_tool}}\n",
        )
        .unwrap();
        let proc = Proc::Task { handle: tokio::spawn(std::future::pending::<i32>()), ended: None };
        let mut ex = Exec::new(&scenario, 1.0, &[], false, listener, proc);
        ex.lists =
            Some(PullAnswers { resources: json!([]), templates: json!([]), prompts: json!([{"name": "greet"}]) });
        let bridge = tokio::spawn(async move {
            let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
            let pull = env::list_prompts().with_rid("req-7");
            let call = env::call_tool_with_progress("echo", "{}", "").with_rid("req-8");
            for e in [pull, call] {
                s.write_all(&e.to_frame()).await.unwrap();
            }
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await.unwrap();
            let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut body).await.unwrap();
            let reply: protomcp_proto::pb::Envelope = prost::Message::decode(&body[..]).unwrap();
            (reply.request_id.clone(), reply.arm().map(|a| a.name()))
        });
        ex.ensure_conn().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while ex.stash.is_empty() && Instant::now() < deadline {
            ex.poll_pulls().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (rid, arm) = tokio::time::timeout(Duration::from_secs(5), bridge)
            .await
            .expect("the pull was answered within 5 s")
            .unwrap();
        assert_eq!((rid.as_str(), arm), ("req-7", Some("prompt_list_response")), "the pull got its answer");
        let v = ex.next_required(Instant::now() + Duration::from_secs(1), Duration::from_secs(1), &[]).await.unwrap();
        assert_eq!(arm_of(&v), Some("call_tool"), "the frame after the pull waits for the next step: {v}");
        assert!(
            ex.transcript.tail(10).iter().any(|l| l.contains("a list pull: answered by the harness")),
            "{:?}",
            ex.transcript.tail(10)
        );
    }
}
