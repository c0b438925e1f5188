//! One tool call from CallToolRequest to its single result: the table of calls in flight (for
//! cancellation), the task that runs a call, what a handler can do while it runs (progress, log,
//! reverse requests, cancellation), and how its result is put on the wire.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{CallToolRequest, CallToolResponse, Envelope, ToolError};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::session::Shared;
use super::sideband::{self, encode_result_sideband, fit_call_result, stream_chunk_size, use_sideband};
use super::tools::{self, Args};
use super::{Fixture, Misbehave, diag, mcp_conformance};
use crate::io::Outgoing;

/// Most calls admitted at once (running or waiting): far above the 64 that TP-CONCUR-02 asks
/// for, and a bound on what a flood of calls can hold.
pub(crate) const MAX_CALLS: usize = 1024;
/// Most argument bytes held by admitted calls together.
pub(crate) const MAX_CALL_BYTES: usize = 256 * 1024 * 1024;

/// `std::sync::Mutex::lock`, shrugging off poisoning (every critical section is a few map
/// operations that leave the map consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Calls in flight by rid. A rid may be in flight more than once (TP-CONCUR-06); a cancel then
/// reaches every call with that rid.
#[derive(Debug, Default)]
pub(crate) struct CallTable {
    by_rid: HashMap<String, Vec<(u64, CancellationToken)>>,
    next_id: u64,
    count: usize,
    bytes: usize,
}

impl CallTable {
    /// Registers a call; `None` when the limits are reached.
    pub fn admit(&mut self, rid: &str, token: CancellationToken, bytes: usize) -> Option<u64> {
        if self.count >= MAX_CALLS || self.bytes + bytes > MAX_CALL_BYTES {
            return None;
        }
        self.next_id += 1;
        self.count += 1;
        self.bytes += bytes;
        self.by_rid.entry(rid.to_owned()).or_default().push((self.next_id, token));
        Some(self.next_id)
    }

    fn remove(&mut self, rid: &str, id: u64, bytes: usize) {
        if let Some(calls) = self.by_rid.get_mut(rid) {
            let before = calls.len();
            calls.retain(|(i, _)| *i != id);
            if calls.len() < before {
                self.count -= 1;
                self.bytes -= bytes;
            }
            if calls.is_empty() {
                self.by_rid.remove(rid);
            }
        }
    }

    /// Cancels every call in flight under `rid`; false when there is none (TP-CANCEL-02).
    pub fn cancel(&self, rid: &str) -> bool {
        let Some(calls) = self.by_rid.get(rid) else { return false };
        for (_, token) in calls {
            token.cancel();
        }
        true
    }
}

/// Removes a call from the table when its task ends, however it ends.
struct Admitted<'a> {
    shared: &'a Shared,
    rid: &'a str,
    id: u64,
    bytes: usize,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        lock(&self.shared.calls).remove(self.rid, self.id, self.bytes);
    }
}

/// What a handler returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// A result: sent as a CallToolResponse, or through the sideband when it qualifies.
    Response(CallToolResponse),
    /// A successful result_json sent as a StreamHeader and StreamChunks (`stream_big`).
    Stream(String),
}

/// A handler failure: the Rust form of a handler that raises. It becomes is_error with the
/// message as text (TP-CALL-07).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    message: String,
    cancellation: bool,
}

impl Failure {
    pub fn new(message: impl Into<String>) -> Self {
        Failure { message: message.into(), cancellation: false }
    }

    /// The failure a handler sees when its call is cancelled while it waits.
    pub fn cancelled() -> Self {
        Failure { message: "cancelled".into(), cancellation: true }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn is_cancellation(&self) -> bool {
        self.cancellation
    }
}

/// Which reply a reverse request waits for. The reply must have this type and carry the
/// request's rid; nothing else is taken as the answer (TP-TOOLLIST-02/03/05, TP-SAMPLING-05,
/// TP-ROOTS-02).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReverseKind {
    ActiveTools,
    Sampling,
    Roots,
}

impl ReverseKind {
    /// The kind a received reverse response answers.
    pub fn of(msg: &Msg) -> Option<ReverseKind> {
        match msg {
            Msg::ActiveTools(_) => Some(ReverseKind::ActiveTools),
            Msg::SamplingResponse(_) => Some(ReverseKind::Sampling),
            Msg::ListRootsResponse(_) => Some(ReverseKind::Roots),
            _ => None,
        }
    }

    fn reply_name(self) -> &'static str {
        match self {
            ReverseKind::ActiveTools => "ActiveToolsResponse",
            ReverseKind::Sampling => "SamplingResponse",
            ReverseKind::Roots => "ListRootsResponse",
        }
    }
}

/// A handler waiting for the answer to its reverse request.
#[derive(Debug)]
pub(crate) struct Waiter {
    kind: ReverseKind,
    tx: oneshot::Sender<Envelope>,
}

/// Hands a reverse response to the handler waiting for it. Responses with an empty rid, an
/// unknown rid or the wrong type are ignored (TP-TOOLLIST-05, TP-SAMPLING-05, TP-ROOTS-02).
pub(crate) fn route_reverse(shared: &Shared, rid: &str, msg: Msg) {
    let Some(kind) = ReverseKind::of(&msg) else { return };
    if rid.is_empty() {
        return;
    }
    let mut waiters = lock(&shared.reverse);
    if waiters.get(rid).is_some_and(|w| w.kind == kind)
        && let Some(w) = waiters.remove(rid)
    {
        // The handler may have stopped waiting a moment ago: then the answer is dropped.
        let _ = w.tx.send(Envelope { msg: Some(msg), request_id: rid.to_owned(), ..Default::default() });
    }
}

/// Removes a waiter when its wait ends, however it ends (answer, timeout, cancellation, abort).
struct Waiting<'a> {
    shared: &'a Shared,
    rid: &'a str,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.shared.reverse).remove(self.rid);
    }
}

/// What a running handler can reach.
pub(crate) struct CallCx {
    shared: Arc<Shared>,
    rid: String,
    progress_token: String,
    token: CancellationToken,
}

impl CallCx {
    /// The call rid.
    pub fn rid(&self) -> &str {
        &self.rid
    }

    /// Resolves when the call is cancelled (TP-CANCEL-04).
    pub async fn cancelled(&self) {
        self.token.cancelled().await
    }

    /// Reports progress: a ProgressNotification with the call's token unchanged and an empty
    /// rid (TP-PROGRESS-01/04); nothing when the call has no token (TP-PROGRESS-02).
    pub async fn progress(&self, progress: i64, total: i64, message: &str) {
        if !self.progress_token.is_empty() {
            self.shared.out.send(env::progress(&self.progress_token, progress, total, message)).await;
        }
    }

    /// Logs one entry: a LogMessage with empty rid (TP-LOG-01).
    pub async fn log(&self, level: &str, logger: &str, data_json: &str) {
        self.shared.out.send(env::log(level, logger, data_json)).await;
    }

    /// Sends `request` with a fresh non-empty rid (TP-CONCUR-07) and waits for the reply of
    /// `kind` with that rid, while the reader goes on serving everything else (TP-TOOLLIST-03,
    /// TP-SAMPLING-02). The wait is bounded (TP-TOOLLIST-04, TP-SAMPLING-04, TP-ROOTS-01) and
    /// ends early when the call is cancelled.
    pub async fn reverse(&self, kind: ReverseKind, request: Envelope) -> Result<Envelope, Failure> {
        let rid = self.shared.fresh_rid();
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.reverse).insert(rid.clone(), Waiter { kind, tx });
        let _waiting = Waiting { shared: &self.shared, rid: &rid };
        if !self.shared.out.send(request.with_rid(rid.clone())).await {
            return Err(Failure::new("the connection is closed"));
        }
        let timeout = self.shared.opts.reverse_timeout;
        tokio::select! {
            answer = rx => answer.map_err(|_| Failure::new("the connection is closed")),
            _ = tokio::time::sleep(timeout) => Err(Failure::new(format!(
                "no {} arrived within {}",
                kind.reply_name(),
                human(timeout)
            ))),
            _ = self.token.cancelled() => Err(Failure::cancelled()),
        }
    }
}

fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}

/// The task of one admitted call: runs it and sends its one result (TP-CALL-01).
pub(crate) async fn run_call(
    shared: Arc<Shared>,
    id: u64,
    rid: String,
    req: CallToolRequest,
    token: CancellationToken,
    bytes: usize,
) {
    let _admitted = Admitted { shared: &shared, rid: &rid, id, bytes };
    let reply = execute(&shared, &rid, req, &token).await;
    deliver(&shared, &rid, reply).await;
}

/// The result of a call cancelled before its handler started (TP-CANCEL-03/05).
fn cancelled_before_start() -> Reply {
    tools::error("Call cancelled before it started", None)
}

async fn execute(shared: &Arc<Shared>, rid: &str, req: CallToolRequest, token: &CancellationToken) -> Reply {
    // TP-CANCEL-05: cancelled before it started, so it does not start.
    if token.is_cancelled() {
        return cancelled_before_start();
    }
    if shared.opts.fixture == Fixture::McpConformance {
        let cx = CallCx {
            shared: Arc::clone(shared),
            rid: rid.to_owned(),
            progress_token: req.progress_token,
            token: token.clone(),
        };
        return match mcp_conformance::call(&cx, &req.name, &req.arguments_json).await {
            Ok(reply) => reply,
            Err(failure) => tools::error(failure.message(), None),
        };
    }
    // TP-CALL-04/05/06: unknown names are an error result with a NOT_FOUND ToolError.
    let Some(spec) = tools::find(&req.name) else {
        let text = format!("Tool not found: {}", req.name);
        let tool_error = ToolError {
            error_code: "NOT_FOUND".into(),
            message: text.clone(),
            suggestion: String::new(),
            retryable: false,
        };
        return tools::error(&text, Some(tool_error));
    };
    // TP-CALL-08..12: arguments are checked before the handler runs.
    let args: Args = match tools::check_args(spec, &req.arguments_json) {
        Ok(a) => a,
        Err(text) => return tools::error(&text, None),
    };
    let _permit = if spec.heavy {
        tokio::select! {
            biased;
            _ = token.cancelled() => return cancelled_before_start(),
            permit = shared.heavy.acquire() => permit.ok(),
        }
    } else {
        None
    };
    let cx = CallCx {
        shared: Arc::clone(shared),
        rid: rid.to_owned(),
        progress_token: req.progress_token,
        token: token.clone(),
    };
    // D-01 / TP-CALL-07: a failure or a panic in the handler is an error result carrying its
    // message (no backtrace in the result, TP-SECURITY-03), and the testee goes on serving.
    match AssertUnwindSafe(tools::handle(spec.kind, &cx, args)).catch_unwind().await {
        Ok(Ok(reply)) => reply,
        Ok(Err(failure)) => tools::error(failure.message(), None),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the handler panicked".to_owned());
            tools::error(&message, None)
        }
    }
}

/// Puts the result of call `rid` on the wire: through the sideband when it qualifies, as a
/// stream for [`Reply::Stream`], otherwise as one CallToolResponse that fits a frame.
pub(crate) async fn deliver(shared: &Shared, rid: &str, reply: Reply) {
    let rid = match shared.opts.misbehave {
        Some(Misbehave::WrongRid) => format!("wrong-{rid}"),
        _ => rid.to_owned(),
    };
    let items = encode_reply(shared, &rid, reply).await;
    let times = if shared.opts.misbehave == Some(Misbehave::AnswerTwice) { 2 } else { 1 };
    for _ in 0..times {
        for item in &items {
            let sent = match item {
                Outgoing::Envelope(e) => shared.out.send(e.clone()).await,
                Outgoing::Raw(b) => shared.out.raw(b.clone()).await,
            };
            if !sent {
                return;
            }
        }
    }
}

async fn encode_reply(shared: &Shared, rid: &str, reply: Reply) -> Vec<Outgoing> {
    match reply {
        Reply::Response(resp) if use_sideband(rid, &resp, shared.opts.raw_threshold) => {
            let threshold = shared.opts.compress_threshold;
            let value = bytes::Bytes::from(resp.result_json.into_bytes());
            let call_rid = rid.to_owned();
            // Compression of up to 64 MiB is CPU work: off the async threads.
            let encoded = tokio::task::spawn_blocking(move || {
                encode_result_sideband(&call_rid, value, threshold, sideband::zstd_compress)
            })
            .await;
            match encoded {
                Ok(Ok(bytes)) => vec![Outgoing::Raw(bytes)],
                Ok(Err(e)) => {
                    diag!("cannot send the result of call {rid:?} through the sideband: {e}");
                    Vec::new()
                }
                Err(e) => {
                    diag!("encoding the result of call {rid:?} failed: {e}");
                    Vec::new()
                }
            }
        }
        Reply::Response(resp) => vec![Outgoing::Envelope(Envelope::from(fit_call_result(rid, resp)).with_rid(rid))],
        Reply::Stream(value) => {
            // TP-STREAM-02..04: header with the exact total, chunks of at most chunk_size,
            // final on the last one only, every frame under the call rid.
            let chunk = stream_chunk_size(rid, shared.opts.stream_chunk);
            protomcp_proto::sideband::encode_stream(rid, "result_json", value.as_bytes(), chunk, true)
                .into_iter()
                .map(Outgoing::Envelope)
                .collect()
        }
    }
}
