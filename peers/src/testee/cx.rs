//! What a running call can reach, and what every task of a connection shares: the table of
//! calls in flight (for cancellation), the waiters of reverse requests, a handler's context
//! ([`CallCx`]: progress, log, reverse requests, cancellation) and the forms of its reply. A leaf
//! of the testee: the call task, the session, the tools and the fixture variants build on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{CallToolResponse, Envelope};
use serde_json::json;
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use protomcp_proto::fault::{Fault, on};

use super::Options;
use super::writer::Out;

/// What every task of the connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub opts: Options,
    pub out: Out,
    pub calls: Mutex<CallTable>,
    pub reverse: Mutex<HashMap<String, Waiter>>,
    pub heavy: Semaphore,
    pub next_rid: AtomicU64,
    /// `tp.concur.latest-rid`: the rid of the latest call received.
    pub latest_call_rid: Mutex<String>,
}

impl Shared {
    /// A rid for a reverse request: non-empty and never reused on this connection
    /// (TP-CONCUR-07). It may equal a bridge rid; the two spaces are told apart by type.
    pub fn fresh_rid(&self) -> String {
        let step = if on(Fault::TpConcurReverseRidReused) { 0 } else { 1 };
        format!("tp-{}", self.next_rid.fetch_add(step, Ordering::Relaxed) + 1)
    }
}

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

    /// Whether a call is in flight under `rid`.
    pub fn contains(&self, rid: &str) -> bool {
        self.by_rid.contains_key(rid)
    }

    /// Calls in flight.
    pub fn len(&self) -> usize {
        self.count
    }

    /// `tp.cancel.all`: cancels every call in flight; false when there is none.
    pub fn cancel_all(&self) -> bool {
        self.by_rid.values().flatten().for_each(|(_, token)| token.cancel());
        !self.by_rid.is_empty()
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
pub(crate) struct Admitted<'a> {
    pub shared: &'a Shared,
    pub rid: &'a str,
    pub id: u64,
    pub bytes: usize,
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
    let mut waiters = lock(&shared.reverse);
    let rid = stray_taken(&waiters, rid, kind).unwrap_or_else(|| rid.to_owned());
    let rid = rid.as_str();
    if rid.is_empty() {
        return;
    }
    let any_kind = on(Fault::TpToollistOtherTypeAccepted);
    if waiters.get(rid).is_some_and(|w| w.kind == kind || any_kind)
        && let Some(w) = waiters.remove(rid)
    {
        // The handler may have stopped waiting a moment ago: then the answer is dropped.
        let _ = w.tx.send(Envelope { msg: Some(msg), request_id: rid.to_owned(), ..Default::default() });
    }
}

/// The faults that take a reply whose rid matches no waiter for the only waiter of its kind
/// (`tp.toollist.other-rid-accepted`, `tp.toollist.empty-rid-accepted`,
/// `tp.sampling.stray-accepted`, `tp.roots.stray-accepted`): that waiter's rid.
fn stray_taken(waiters: &HashMap<String, Waiter>, rid: &str, kind: ReverseKind) -> Option<String> {
    if waiters.contains_key(rid) {
        return None;
    }
    let faulty = match kind {
        ReverseKind::ActiveTools if rid.is_empty() => on(Fault::TpToollistEmptyRidAccepted),
        ReverseKind::ActiveTools => on(Fault::TpToollistOtherRidAccepted),
        ReverseKind::Sampling => on(Fault::TpSamplingStrayAccepted) && !rid.is_empty(),
        ReverseKind::Roots => on(Fault::TpRootsStrayAccepted) && !rid.is_empty(),
    };
    let mut of_kind = waiters.iter().filter(|(_, w)| w.kind == kind);
    match (faulty, of_kind.next(), of_kind.next()) {
        (true, Some((only, _)), None) => Some(only.clone()),
        _ => None,
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
    pub fn new(shared: Arc<Shared>, rid: &str, progress_token: String, token: CancellationToken) -> CallCx {
        CallCx { shared, rid: rid.to_owned(), progress_token, token }
    }

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
        if !self.progress_token.is_empty() || on(Fault::TpProgressWithoutToken) {
            let (progress, total) = if on(Fault::TpProgressSwapped) { (total, progress) } else { (progress, total) };
            let mut e = env::progress(&self.progress_token, progress, total, message);
            if on(Fault::TpProgressRidSet) {
                e.request_id = self.rid.clone();
            }
            if on(Fault::TpProgressAfterResult) && progress == total {
                // The last report goes out from a task of its own, a moment later.
                let out = self.shared.out.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    out.send(e).await;
                });
                return;
            }
            self.shared.out.send(e).await;
        }
    }

    /// Logs one entry: a LogMessage with empty rid (TP-LOG-01).
    pub async fn log(&self, level: &str, logger: &str, data_json: &str) {
        let level = if on(Fault::TpLogLevelUpper) { level.to_uppercase() } else { level.to_owned() };
        let mut e = env::log(&level, logger, data_json);
        if on(Fault::TpLogRidSet) {
            e.request_id = self.rid.clone();
        }
        self.shared.out.send(e).await;
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
        let unbounded = match kind {
            ReverseKind::Sampling => on(Fault::TpSamplingUnbounded),
            ReverseKind::Roots => on(Fault::TpRootsUnbounded),
            ReverseKind::ActiveTools => false,
        };
        let timeout = if unbounded { Duration::from_secs(86_400) } else { self.shared.opts.reverse_timeout };
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

/// `[{"type":"text","text":<t>}]`.
pub(crate) fn text_json(t: &str) -> String {
    if on(Fault::TpCallResultNotArray) {
        return json!({"type": "text", "text": t}).to_string();
    }
    json!([{"type": "text", "text": t}]).to_string()
}
