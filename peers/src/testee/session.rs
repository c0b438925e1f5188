//! One connection: the reader loop, the handshake and reload bursts, and dispatch of every
//! message the bridge sends.
//!
//! The task running [`Session::serve`] is the only reader. It answers list, resource, prompt,
//! completion and middleware requests itself (they are quick), starts a task per tool call, and
//! routes replies to reverse requests to the handlers waiting for them. One writer task owns the
//! write half (see `writer`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use protomcp_proto::envelopes::{self as env, Arm, Direction, EnvelopeExt, Kind};
use protomcp_proto::fault::{Fault, on};
use protomcp_proto::frame::{Frame, FrameError, Limits, MAX_FRAME};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{CallToolRequest, Envelope, RegisterMiddlewareResponse};
use protomcp_proto::violation::Party;
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::call;
use super::cx::{self, CallTable, Shared, lock};
use super::middleware::{self, MIDDLEWARE};
use super::writer::{self, Out};
use super::{Fixture, Misbehave, Options, diag, exit, mcp_conformance, resources, tools};
use crate::io::{CodecError, EnvelopeCodec, Incoming};

/// Requests held back while a middleware registration waits for its acknowledgement.
const MAX_QUEUED: usize = 4096;
/// Bytes of requests held back at most.
const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;
/// Heavy handlers (results up to 64 MiB) running at once.
const HEAVY_PERMITS: usize = 2;
/// How long the writer may go on after the bridge closed, to flush what is queued.
const FLUSH_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// Where the connection is in the handshake.
#[derive(Debug)]
enum Phase {
    /// Nothing sent yet (TP-HANDSHAKE-01); requests are ignored (TP-HANDSHAKE-16).
    AwaitingListTools,
    /// A RegisterMiddlewareRequest is waiting for its acknowledgement; these follow it.
    Burst {
        remaining: VecDeque<(&'static str, i32)>,
    },
    Serving,
    /// `tp.toollist.notification-waits`: requests are held back until an ActiveToolsResponse
    /// comes or `until` passes.
    AwaitingActive {
        until: tokio::time::Instant,
    },
}

/// A request held back during a burst (TP-HANDSHAKE-11).
#[derive(Debug)]
struct Queued {
    rid: String,
    msg: Msg,
    /// A CancelRequest named it while it waited (TP-CANCEL-05).
    cancelled: bool,
    bytes: usize,
}

/// Why the connection ended: the exit status, and whether queued output may still be flushed.
#[derive(Debug, Clone, Copy)]
struct End {
    code: i32,
    flush: bool,
}

pub(super) struct Session {
    shared: Arc<Shared>,
    tasks: JoinSet<()>,
    phase: Phase,
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    flooded: bool,
    /// `tp.frame.malformed-deaf`: set after an undecodable body (`tp.security.stray-reply-deaf`:
    /// after a reply only a tool process sends).
    deaf: bool,
}

impl Session {
    /// Serves `stream` until it ends; returns the exit status. Every task started here has
    /// ended when this returns.
    pub(super) async fn serve(stream: UnixStream, opts: Options) -> i32 {
        let (rd, wr) = stream.into_split();
        let mut frames = FramedRead::new(
            rd,
            EnvelopeCodec::new(
                Party::Bridge,
                Limits {
                    max_frame: if on(Fault::TpFrameMaxOffByOne) { MAX_FRAME - 1 } else { MAX_FRAME },
                    max_sideband: 0,
                    max_decompressed: 0,
                },
            ),
        );
        let (tx, rx) = mpsc::channel(writer::CAPACITY);
        let drip = opts.misbehave == Some(Misbehave::Drip);
        let mut writer = tokio::spawn(writer::write_loop(wr, rx, drip));
        let mut session = Session {
            shared: Arc::new(Shared {
                opts,
                out: Out::new(tx),
                calls: Mutex::new(CallTable::default()),
                reverse: Mutex::new(HashMap::new()),
                heavy: Semaphore::new(HEAVY_PERMITS),
                next_rid: AtomicU64::new(0),
                latest_call_rid: Mutex::new(String::new()),
            }),
            tasks: JoinSet::new(),
            phase: Phase::AwaitingListTools,
            queue: VecDeque::new(),
            queued_bytes: 0,
            flooded: false,
            deaf: false,
        };
        if on(Fault::TpHandshakeGreeting) {
            session.shared.out.send(env::log("info", "sdk", r#""ready""#)).await;
        }
        let (end, writer_done) = session.run(&mut frames, &mut writer).await;
        if on(Fault::TpConnEofHandlerHangs) && end.flush && !writer_done && !session.tasks.is_empty() {
            // Lets the handlers finish, then waits for the writer to drain while the session
            // still holds a sender: the writer never ends, nor does the process.
            while session.tasks.join_next().await.is_some() {}
            let _ = (&mut writer).await;
        }
        // TP-CONN-08/10: handlers still running are stopped now (the spec allows stopping
        // them early), so the process leaves within T_PROMPT.
        session.tasks.shutdown().await;
        drop(session);
        drop(frames);
        if !writer_done {
            // Every sender is gone now, so the writer ends once the queue is written; it gets a
            // moment for that when the bridge closed the connection, none otherwise.
            let grace = if end.flush { FLUSH_GRACE } else { std::time::Duration::ZERO };
            if tokio::time::timeout(grace, &mut writer).await.is_err() {
                writer.abort();
                let _ = writer.await;
            }
        }
        end.code
    }

    /// The reader loop. Returns why it ended, and whether the writer task has already ended.
    async fn run(
        &mut self,
        frames: &mut FramedRead<OwnedReadHalf, EnvelopeCodec>,
        writer: &mut JoinHandle<std::io::Result<()>>,
    ) -> (End, bool) {
        loop {
            // Requests held back during a burst are served first, in arrival order, once the
            // burst is over (TP-HANDSHAKE-11).
            if matches!(self.phase, Phase::Serving)
                && let Some(q) = self.queue.pop_front()
            {
                self.queued_bytes -= q.bytes;
                if let Some(end) = self.dispatch(q.rid, q.msg, q.cancelled).await {
                    return (end, false);
                }
                continue;
            }
            let idle = async {
                if on(Fault::TpConnIdleTimeout) {
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await
                } else {
                    std::future::pending().await
                }
            };
            let active_deadline = match self.phase {
                Phase::AwaitingActive { until } => Some(until),
                _ => None,
            };
            let awaiting_active = async {
                match active_deadline {
                    Some(until) => tokio::time::sleep_until(until).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = idle => return (End { code: exit::FAILURE, flush: false }, false),
                () = awaiting_active => self.phase = Phase::Serving,
                done = &mut *writer => {
                    let code = match done {
                        Ok(Err(e)) if matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset) => exit::BRIDGE_CLOSED,
                        Ok(Err(e)) => {
                            eprintln!("protomcp-conform testee: writing to the socket failed: {e}");
                            exit::FAILURE
                        }
                        _ => exit::FAILURE,
                    };
                    return (End { code, flush: false }, true);
                }
                Some(_) = self.tasks.join_next(), if !self.tasks.is_empty() => {}
                item = frames.next() => {
                    if let Some(end) = self.on_item(item).await {
                        return (end, false);
                    }
                }
            }
        }
    }

    /// One item from the decoder.
    async fn on_item(&mut self, item: Option<Result<Incoming, CodecError>>) -> Option<End> {
        match item {
            // TP-CONN-08/09: the bridge closed the connection; leave with status 0.
            None => Some(End { code: exit::BRIDGE_CLOSED, flush: true }),
            Some(Ok(Incoming::Frame(Frame::Envelope(d)))) => {
                if (on(Fault::TpFrameEmptyCloses) && d.len == 0)
                    || (on(Fault::TpFrameUnknownArmCloses) && d.len > 0 && d.envelope.msg.is_none())
                {
                    return Some(End { code: exit::FAILURE, flush: false });
                }
                if on(Fault::TpFrameUnknownFieldDrops) && d.wire.as_ref().is_some_and(|w| !w.unknown.is_empty()) {
                    // A strict decoder: fields it does not know make the message undecodable.
                    diag!("skipping a frame with fields this SDK does not know");
                    return None;
                }
                self.on_envelope(d.envelope).await
            }
            // The decoder expects no payloads from a bridge (§11).
            Some(Ok(Incoming::Frame(Frame::Sideband(_)))) => None,
            // TP-FRAME-13/14: an undecodable body is skipped and the connection stays in service.
            Some(Ok(Incoming::Malformed(e))) => {
                self.deaf |= on(Fault::TpFrameMalformedDeaf);
                diag!("skipping a frame: {e}");
                None
            }
            // TP-FRAME-11/12: an oversize prefix loses the framing. Nothing is allocated for
            // it; the connection is closed at once, with one line on stderr and status 1.
            Some(Err(CodecError::Frame(e @ FrameError::Oversize { .. }))) => {
                eprintln!("protomcp-conform testee: {e}; closing the connection");
                if on(Fault::TpFrameOversizeWaits) {
                    std::future::pending::<()>().await;
                }
                Some(End { code: exit::FAILURE, flush: false })
            }
            // TP-FRAME-15: end-of-file inside a frame; the partial frame is dropped. The bridge
            // closed the connection, so the status is 0 (TP-CONN-09).
            Some(Err(CodecError::Frame(e @ FrameError::Truncated { .. }))) => {
                eprintln!("protomcp-conform testee: {e}; the bridge closed the connection");
                if on(Fault::TpFrameTruncatedHangs) {
                    std::future::pending::<()>().await;
                }
                Some(End { code: exit::BRIDGE_CLOSED, flush: true })
            }
            Some(Err(e)) => {
                eprintln!("protomcp-conform testee: reading from the socket failed: {e}");
                Some(End { code: exit::FAILURE, flush: false })
            }
        }
    }

    /// One decoded Envelope. `namespace` is ignored (TP-FRAME-08); an Envelope without a
    /// known arm is ignored (TP-FRAME-05/06); proto3's "last arm wins" is prost's (TP-FRAME-10).
    async fn on_envelope(&mut self, envelope: Envelope) -> Option<End> {
        let Envelope { msg, request_id: rid, .. } = envelope;
        let msg = msg?;
        if self.deaf {
            return None;
        }
        match &self.phase {
            Phase::AwaitingListTools => {
                if let Msg::ListTools(_) = msg {
                    if on(Fault::TpHandshakeSlowStart) {
                        tokio::time::sleep(std::time::Duration::from_secs(11)).await;
                    }
                    // TP-HANDSHAKE-02: the first frame written is the ToolListResponse.
                    let rid = if on(Fault::TpHandshakeListRidDropped) { String::new() } else { rid };
                    self.begin_burst(rid).await;
                } else if is_request(&msg) {
                    if on(Fault::TpHandshakeEarlyRequestExits) {
                        return Some(End { code: exit::FAILURE, flush: false });
                    }
                    diag!("ignoring a {} that arrived before the first ListToolsRequest", Arm::of(&msg).message_name());
                }
                None
            }
            Phase::Burst { .. } => {
                match msg {
                    Msg::RegisterMiddlewareResponse(ack) => self.acknowledged(ack).await,
                    // Replies to handlers' reverse requests and cancellations cannot be taken for
                    // the acknowledgement; they are handled at once.
                    Msg::ActiveTools(_) | Msg::SamplingResponse(_) | Msg::ListRootsResponse(_) => {
                        cx::route_reverse(&self.shared, &rid, msg)
                    }
                    Msg::Cancel(c) => {
                        self.cancel(&c.request_id);
                    }
                    // TP-HANDSHAKE-11: a request is not the acknowledgement; it is held back and
                    // served when the burst is over.
                    msg if is_request(&msg) => self.hold_back(rid, msg),
                    _ => {}
                }
                None
            }
            Phase::AwaitingActive { .. } => {
                match msg {
                    // Whatever its rid: it is taken for the answer to the DisableToolsRequest.
                    Msg::ActiveTools(_) => self.phase = Phase::Serving,
                    Msg::SamplingResponse(_) | Msg::ListRootsResponse(_) => cx::route_reverse(&self.shared, &rid, msg),
                    Msg::Cancel(c) => {
                        self.cancel(&c.request_id);
                    }
                    msg if is_request(&msg) => self.hold_back(rid, msg),
                    _ => {}
                }
                None
            }
            Phase::Serving => self.dispatch(rid, msg, false).await,
        }
    }

    /// Serves one message after the handshake.
    async fn dispatch(&mut self, rid: String, msg: Msg, cancelled: bool) -> Option<End> {
        let out = self.shared.out.clone();
        if self.shared.opts.fixture == Fixture::McpConformance
            && let Some(reply) = mcp_conformance::answer(&msg)
        {
            out.send(reply.with_rid(rid)).await;
            return None;
        }
        match msg {
            // TP-HANDSHAKE-14 (and TP-HANDSHAKE-15: the rest of the burst is not repeated).
            Msg::ListTools(_) => {
                let rid = if on(Fault::TpHandshakeRelistNoRid) { String::new() } else { rid };
                out.send(env::tool_list(self.definitions()).with_rid(rid)).await;
            }
            // TP-RELOAD-01/02: success with the request's rid, then the whole burst with empty
            // rids. Calls in flight go on and are answered (TP-RELOAD-04).
            Msg::Reload(_) => {
                let rid = if on(Fault::TpReloadNoRid) { String::new() } else { rid };
                out.send(env::reload_response(true, "").with_rid(rid)).await;
                if !on(Fault::TpReloadNoBurst) {
                    self.begin_burst(String::new()).await;
                }
            }
            Msg::CallTool(req) => return self.start_call(rid, req, cancelled).await,
            Msg::Cancel(c) => {
                let target = if on(Fault::TpCancelEnvelopeRid) { rid.clone() } else { c.request_id.clone() };
                if !self.cancel(&target) && on(Fault::TpCancelUnknownAnswered) && !c.request_id.is_empty() {
                    out.send(env::call_error_text("no such call to cancel").with_rid(c.request_id)).await;
                }
            }
            Msg::ActiveTools(_) | Msg::SamplingResponse(_) | Msg::ListRootsResponse(_) => {
                cx::route_reverse(&self.shared, &rid, msg)
            }
            Msg::MiddlewareIntercept(req) => {
                let response = middleware::intercept(self.shared.opts.middleware, &rid, &req);
                out.send(Envelope::from(response).with_rid(rid)).await;
            }
            Msg::ListResourcesRequest(_) => {
                out.send(Envelope::from(resources::list_resources()).with_rid(rid)).await;
            }
            Msg::ListResourceTemplatesRequest(_) => {
                out.send(Envelope::from(resources::list_templates()).with_rid(rid)).await;
            }
            Msg::ReadResourceRequest(req) => {
                out.send(Envelope::from(resources::read(&req.uri)).with_rid(rid)).await;
            }
            Msg::ListPromptsRequest(_) => {
                out.send(Envelope::from(resources::list_prompts()).with_rid(rid)).await;
            }
            Msg::GetPromptRequest(req) => {
                out.send(Envelope::from(resources::get_prompt(&req)).with_rid(rid)).await;
            }
            Msg::CompletionRequest(req) => {
                let answer = resources::complete(&req);
                if on(Fault::TpCompleteUnregisteredUnanswered) && answer == Default::default() {
                    return None;
                }
                out.send(Envelope::from(answer).with_rid(rid)).await;
            }
            Msg::RegisterMiddlewareResponse(_) => diag!("ignoring a RegisterMiddlewareResponse that answers nothing"),
            Msg::TaskStatus(_) if on(Fault::TpTaskStatusExits) => {
                return Some(End { code: exit::FAILURE, flush: false });
            }
            msg if on(Fault::TpSecurityUnexpectedArmExits) && Arm::of(&msg).direction() == Direction::ToolToBridge => {
                return Some(End { code: exit::FAILURE, flush: false });
            }
            // A reply of the kind only a tool process sends jams the reader: it goes on reading
            // (and leaves at end-of-file) but serves nothing more.
            msg if on(Fault::TpSecurityStrayReplyDeaf)
                && Arm::of(&msg).direction() == Direction::ToolToBridge
                && matches!(Arm::of(&msg).kind(), Kind::Response | Kind::ResponseOrNotification) =>
            {
                self.deaf = true;
            }
            // TP-TASK-01: reserved task messages are ignored; so is everything that only a tool
            // process sends.
            _ => {}
        }
        None
    }

    /// TP-HANDSHAKE-02/03/09/10/12/13 and TP-RELOAD-02: the ToolListResponse (under `rid`),
    /// then each middleware registration waiting for its acknowledgement, then the marker and
    /// the hidden-tool DisableToolsRequest.
    async fn begin_burst(&mut self, rid: String) {
        self.shared.out.send(env::tool_list(self.definitions()).with_rid(rid)).await;
        let mut remaining: VecDeque<(&'static str, i32)> =
            if self.shared.opts.middleware { MIDDLEWARE.iter().copied().collect() } else { VecDeque::new() };
        if on(Fault::TpMiddlewareDuplicateName) && remaining.len() > 1 {
            remaining[1].0 = remaining[0].0;
        }
        if on(Fault::TpHandshakeNoAckWait) {
            for (name, priority) in remaining {
                self.shared.out.send(env::register_middleware(name, priority)).await;
            }
            return self.finish_burst().await;
        }
        match remaining.pop_front() {
            Some((name, priority)) => {
                self.shared.out.send(env::register_middleware(name, priority)).await;
                self.phase = Phase::Burst { remaining };
            }
            None => self.finish_burst().await,
        }
    }

    /// An acknowledgement: the next registration, or the end of the burst (TP-HANDSHAKE-09).
    async fn acknowledged(&mut self, ack: RegisterMiddlewareResponse) {
        if !ack.success {
            diag!("the bridge refused a middleware registration (success = false); going on");
        }
        let Phase::Burst { remaining } = &mut self.phase else { return };
        match remaining.pop_front() {
            Some((name, priority)) => {
                self.shared.out.send(env::register_middleware(name, priority)).await;
            }
            None => self.finish_burst().await,
        }
    }

    /// The marker and, right behind it with nothing in between, the one DisableToolsRequest
    /// naming every hidden tool (TP-HANDSHAKE-10/12); requests held back are served after it.
    async fn finish_burst(&mut self) {
        let hidden = match self.shared.opts.fixture {
            Fixture::AppendixB if self.shared.opts.hidden => tools::hidden(),
            Fixture::AppendixB | Fixture::McpConformance => Vec::new(),
        };
        let mut frames = if on(Fault::TpHandshakeNoMarker) { Vec::new() } else { vec![env::handshake_marker()] };
        let disables = !hidden.is_empty();
        if disables || on(Fault::TpHandshakeEmptyDisable) {
            frames.push(env::disable_tools(hidden));
        }
        if on(Fault::TpHandshakeDisableFirst) {
            frames.reverse();
        }
        self.shared.out.batch(&frames).await;
        self.phase = if disables && on(Fault::TpToollistNotificationWaits) {
            // The DisableToolsRequest taken for a request: requests wait for its answer.
            Phase::AwaitingActive { until: tokio::time::Instant::now() + self.shared.opts.reverse_timeout }
        } else {
            Phase::Serving
        };
        if self.shared.opts.misbehave == Some(Misbehave::Flood) && !self.flooded {
            self.flooded = true;
            let out = self.shared.out.clone();
            // Until the connection is over: the writer's channel bounds what waits for the socket,
            // so the flood goes exactly as fast as the peer reads.
            self.tasks.spawn(async move {
                let mut i: u64 = 0;
                while out.send(env::log("info", "flood", &format!("\"flood {i}\""))).await {
                    i += 1;
                }
            });
        }
    }

    /// The tool definitions of the fixture served.
    fn definitions(&self) -> Vec<protomcp_proto::pb::ToolDefinition> {
        match self.shared.opts.fixture {
            Fixture::AppendixB => tools::definitions(),
            Fixture::McpConformance => mcp_conformance::definitions(),
        }
    }

    fn hold_back(&mut self, rid: String, msg: Msg) {
        let bytes = msg.encoded_len() + rid.len();
        if self.queue.len() >= MAX_QUEUED || self.queued_bytes + bytes > MAX_QUEUED_BYTES {
            // TP-CONCUR-01 exempts requests that arrive while an acknowledgement is awaited.
            diag!(
                "dropping a {} that arrived during the registration burst: too many held back",
                Arm::of(&msg).message_name()
            );
            return;
        }
        self.queued_bytes += bytes;
        self.queue.push_back(Queued { rid, msg, cancelled: false, bytes });
    }

    /// TP-CANCEL-01/02/06: the call is named in the body; unknown, finished or empty names are
    /// ignored without a reply; only calls under that rid are affected.
    fn cancel(&mut self, call_rid: &str) -> bool {
        if call_rid.is_empty() {
            return false;
        }
        if self.shared.opts.misbehave == Some(Misbehave::LeakFdPerCancel)
            && let Ok(f) = std::env::current_exe().and_then(std::fs::File::open)
        {
            // The planted leak: the descriptor stays open until the process ends.
            std::mem::forget(f);
        }
        let known = if on(Fault::TpCancelAll) {
            lock(&self.shared.calls).cancel_all()
        } else {
            lock(&self.shared.calls).cancel(call_rid)
        };
        for q in self.queue.iter_mut().filter(|q| q.rid == call_rid && matches!(q.msg, Msg::CallTool(_))) {
            q.cancelled = true;
        }
        known
    }

    /// Starts a call in a task of its own (TP-CONCUR-03/04).
    async fn start_call(&mut self, rid: String, req: CallToolRequest, cancelled: bool) -> Option<End> {
        if rid.is_empty() {
            // TP-CALL-21: a call without rid cannot be answered usefully; it is ignored.
            diag!("ignoring a CallToolRequest for {:?} without rid", req.name);
            return None;
        }
        if on(Fault::TpCallHostileNameExits) && req.name.chars().any(char::is_control) {
            return Some(End { code: exit::FAILURE, flush: false });
        }
        if on(Fault::TpLifecycleErrorBudget) && call::error_budget_spent() {
            // Meant to hand over to a fresh process under a supervisor; the bridge has none.
            eprintln!("protomcp-conform testee: too many failed calls; exiting");
            return Some(End { code: exit::FAILURE, flush: false });
        }
        if on(Fault::TpConcurDuplicateRidExits) && lock(&self.shared.calls).contains(&rid) {
            return Some(End { code: exit::FAILURE, flush: false });
        }
        if on(Fault::TpConcurPipelineDrop) && lock(&self.shared.calls).len() >= 32 {
            return None;
        }
        if on(Fault::TpConcurLatestRid) {
            *lock(&self.shared.latest_call_rid) = rid.clone();
        }
        if self.shared.opts.misbehave == Some(Misbehave::CrashMidCall) && req.name == "slow" {
            eprintln!("protomcp-conform testee: misbehaving (crash-mid-call): crashing on a call of slow");
            return Some(End { code: exit::CRASH, flush: false });
        }
        let token = CancellationToken::new();
        if cancelled {
            token.cancel();
        }
        let bytes = req.name.len() + req.arguments_json.len() + req.progress_token.len() + rid.len();
        let admitted = lock(&self.shared.calls).admit(&rid, token.clone(), bytes);
        match admitted {
            // A "synchronous" handler that asks the host, run by the reader itself: nothing
            // is read until it returns.
            Some(id) if on(Fault::TpSamplingInlineHandler) && req.name == "ask" => {
                call::run_call(Arc::clone(&self.shared), id, rid, req, token, bytes).await;
            }
            Some(id) => {
                self.tasks.spawn(call::run_call(Arc::clone(&self.shared), id, rid, req, token, bytes));
            }
            // Still exactly one result (TP-CALL-01), without running anything.
            None => {
                let busy = tools::error("Too many calls in flight; try again later", None);
                call::deliver(&self.shared, &rid, busy).await;
            }
        }
        None
    }
}

/// A request the bridge sends and expects one reply to (§2.3).
fn is_request(msg: &Msg) -> bool {
    let arm = Arm::of(msg);
    arm.direction() == Direction::BridgeToTool && arm.kind() == Kind::Request
}
