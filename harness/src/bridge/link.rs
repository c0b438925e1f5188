//! One tool-process connection: the writer task (frames never interleave, BR-FRAME-01), the
//! reader task (dispatch by message type, then by rid), and the table of pending bridge
//! requests. Every pending request gets exactly one answer: its reply, or an error when the
//! connection ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use protomcp_proto::frame::{Frame, Limits};
use protomcp_proto::pb::{self, Envelope, envelope::Msg};
use protomcp_proto::sideband::{StreamAssembler, StreamEvent, StreamLimits};
use protomcp_proto::violation::Party;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use super::state::{ToolOp, ToolSet};
use crate::io::{EnvelopeCodec, Incoming, Outgoing};
use crate::transcript::{Dir, Item};

/// The answer to a pending request: the reply's message, or why there is none.
pub type Reply = Result<Msg, String>;

/// What the reader tells the handshake driver.
#[derive(Debug)]
pub enum HsEvent {
    Registration,
    Marker,
    /// The ToolListResponse (empty rid) of a reload's burst ([`Link::begin_reload`]).
    BurstToolList,
}

/// Everything the reader hands to the bridge (dispatched by message type).
pub trait Dispatch: Send + Sync + 'static {
    /// A tool-list control message after the handshake; returns the active set for the reply.
    fn control(&self, op: &ToolOp) -> Vec<String>;
    fn progress(&self, p: pb::ProgressNotification);
    fn log(&self, l: pb::LogMessage);
    fn resource_changed(&self, uri: String);
    /// A reverse request (#60, #62) with a non-empty rid; the bridge answers through `link`.
    fn reverse(&self, link: Arc<Link>, rid: String, msg: Msg);
    /// A diagnostic line for stderr.
    fn diag(&self, line: String);
    /// A frame crossed the socket (for the trace): `from_tp` tells the direction.
    fn trace(&self, from_tp: bool, envelope: &Envelope);
    /// Anything else for the trace (connection start and end, sideband payloads), built only
    /// when tracing.
    fn trace_item(&self, _item: &dyn Fn() -> Item) {}
}

pub struct Link {
    /// Incarnation number of the tool process.
    pub generation: u64,
    /// Frames for the writer, each with its encoded size.
    out: mpsc::UnboundedSender<(Outgoing, usize)>,
    /// Bytes in `out` not yet handed to the socket ([`crate::limits::BRIDGE_TOOL_QUEUE_BYTES`]).
    queued: std::sync::atomic::AtomicUsize,
    pending: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    streams: Mutex<StreamAssembler>,
    closed: AtomicBool,
    /// The tool set being built while the handshake runs; `None` once the bridge serves it.
    pub staging: Mutex<Option<ToolSet>>,
    /// Middleware registered on this connection, in arrival order (BR-MIDDLEWARE-07).
    pub middleware: Mutex<Vec<(String, i32)>>,
    hs: Mutex<Option<mpsc::UnboundedSender<HsEvent>>>,
    /// A reload's burst is under way ([`Link::begin_reload`]): an empty-rid ToolListResponse
    /// is its new tool list, not a stray one.
    burst: AtomicBool,
    /// Why the connection ended, once it has.
    pub end: Mutex<Option<String>>,
    ended: tokio::sync::Notify,
    /// The reader has seen the connection end and traced it ([`Link::reader_finished`]).
    reader_done: AtomicBool,
    reader_end: tokio::sync::Notify,
}

impl Link {
    /// Starts the reader and writer tasks on an accepted connection.
    pub fn start(
        stream: UnixStream,
        generation: u64,
        dispatch: Arc<dyn Dispatch>,
    ) -> (Arc<Link>, mpsc::UnboundedReceiver<HsEvent>) {
        let (read, write) = stream.into_split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<(Outgoing, usize)>();
        let (hs_tx, hs_rx) = mpsc::unbounded_channel();
        let link = Arc::new(Link {
            generation,
            out,
            pending: Mutex::new(HashMap::new()),
            streams: Mutex::new(StreamAssembler::new(Party::ToolProcess, StreamLimits::default())),
            closed: AtomicBool::new(false),
            staging: Mutex::new(Some(ToolSet::default())),
            middleware: Mutex::new(Vec::new()),
            hs: Mutex::new(Some(hs_tx)),
            burst: AtomicBool::new(false),
            queued: std::sync::atomic::AtomicUsize::new(0),
            end: Mutex::new(None),
            ended: tokio::sync::Notify::new(),
            reader_done: AtomicBool::new(false),
            reader_end: tokio::sync::Notify::new(),
        });
        let writer_link = link.clone();
        tokio::spawn(async move {
            let mut sink = FramedWrite::new(write, EnvelopeCodec::new(Party::Bridge, Limits::default()));
            loop {
                // Once the link is closed, what is queued is still written (a CancelRequest at
                // session end, BR-CANCEL-06); then the write side ends: the TP sees end-of-file.
                let item = tokio::select! {
                    biased;
                    item = out_rx.recv() => item,
                    _ = writer_link.closed() => out_rx.try_recv().ok(),
                };
                let Some(item) = item else { break };
                // Write whatever is queued, then flush once.
                let mut batch = vec![item];
                while let Ok(more) = out_rx.try_recv() {
                    batch.push(more);
                }
                let mut failed = None;
                for (item, size) in batch {
                    let r = sink.feed(item).await;
                    writer_link.queued.fetch_sub(size, Ordering::Relaxed);
                    if let Err(e) = r {
                        failed = Some(e.to_string());
                        break;
                    }
                }
                if failed.is_none()
                    && let Err(e) = sink.flush().await
                {
                    failed = Some(e.to_string());
                }
                if let Some(e) = failed {
                    writer_link.close(format!("writing to the tool process failed: {e}"));
                    break;
                }
            }
            let _ = sink.get_mut().shutdown().await;
        });
        let reader_link = link.clone();
        dispatch.trace_item(&|| Item::Connected);
        tokio::spawn(async move {
            let mut frames = FramedRead::new(read, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
            let reason = loop {
                match frames.next().await {
                    None => break "the tool process closed the connection".to_owned(),
                    Some(Err(e)) => break format!("the connection to the tool process failed: {e}"),
                    Some(Ok(Incoming::Malformed(e))) => dispatch.diag(format!("discarded a frame: {e}")),
                    Some(Ok(Incoming::Frame(Frame::Sideband(sb)))) => {
                        dispatch.trace_item(&|| Item::Frame {
                            dir: Dir::ToTestee,
                            tree: Some(crate::scenario::normalize::sideband_value(&sb, &sb.header.request_id)),
                            hex: None,
                            note: None,
                        });
                        reader_link.sideband(*sb)
                    }
                    Some(Ok(Incoming::Frame(Frame::Envelope(d)))) => {
                        dispatch.trace(true, &d.envelope);
                        reader_link.clone().incoming(d.envelope, &*dispatch);
                    }
                }
                // The bridge runs on one thread: a tool process that sends without pause must
                // not starve the tasks that write to the host (notifications, results), so the
                // reader lets them run after every frame.
                tokio::task::yield_now().await;
            };
            dispatch.trace_item(&|| Item::Shutdown { how: reason.clone() });
            reader_link.close(reason);
            reader_link.reader_done.store(true, Ordering::SeqCst);
            reader_link.reader_end.notify_waiters();
        });
        (link, hs_rx)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Resolves when the reader has seen the connection end (and traced it): after
    /// [`Link::close`], which only stops the writing side.
    pub async fn reader_finished(&self) {
        loop {
            let notified = self.reader_end.notified();
            if self.reader_done.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    /// Resolves when the connection has ended.
    pub async fn closed(&self) {
        loop {
            let notified = self.ended.notified();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }

    /// Ends the connection: every pending request fails at once (BR-LIFECYCLE-03).
    pub fn close(&self, reason: String) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.end.lock().unwrap() = Some(reason.clone());
        let pending: Vec<_> = self.pending.lock().unwrap().drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(reason.clone()));
        }
        self.streams.lock().unwrap().abort_all(&reason);
        self.hs.lock().unwrap().take();
        self.ended.notify_waiters();
    }

    /// Queues one frame. Fails when the connection has ended.
    pub fn send(&self, envelope: Envelope) -> Result<(), String> {
        if self.is_closed() {
            return Err(self.end.lock().unwrap().clone().unwrap_or_else(|| "connection closed".into()));
        }
        // A tool process that stops reading does not make the bridge queue without end.
        let size = prost::Message::encoded_len(&envelope);
        let queued = self.queued.load(Ordering::Relaxed);
        if queued > 0 && queued + size > crate::limits::BRIDGE_TOOL_QUEUE_BYTES {
            return Err(format!("the tool process is not reading: {queued} bytes are queued for it"));
        }
        self.queued.fetch_add(size, Ordering::Relaxed);
        self.out.send((Outgoing::Envelope(envelope), size)).map_err(|_| "the tool-process writer stopped".to_owned())
    }

    /// Registers `rid` as pending and sends the request; the receiver gets exactly one answer.
    pub fn request(&self, rid: &str, envelope: Envelope) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        if self.is_closed() {
            let _ = tx.send(Err(self.end.lock().unwrap().clone().unwrap_or_default()));
            return rx;
        }
        self.pending.lock().unwrap().insert(rid.to_owned(), tx);
        if let Err(e) = self.send(envelope)
            && let Some(tx) = self.pending.lock().unwrap().remove(rid)
        {
            let _ = tx.send(Err(e));
        }
        rx
    }

    /// Stops waiting for `rid` (timeout, cancellation): a later reply is discarded (BR-CALL-17).
    pub fn forget(&self, rid: &str) {
        self.pending.lock().unwrap().remove(rid);
        self.streams.lock().unwrap().abort(rid, "the call ended");
    }

    pub fn pending_count(&self) -> usize {
        self.pending.lock().unwrap().len()
    }

    fn resolve(&self, rid: &str, reply: Reply) -> bool {
        let tx = self.pending.lock().unwrap().remove(rid);
        match tx {
            Some(tx) => {
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }

    fn handshake_event(&self, ev: HsEvent) {
        if let Some(tx) = self.hs.lock().unwrap().as_ref() {
            let _ = tx.send(ev);
        }
    }

    /// The handshake is over: the reader stops reporting markers.
    pub fn end_handshake(&self) {
        self.hs.lock().unwrap().take();
        self.burst.store(false, Ordering::SeqCst);
    }

    /// A reload by ReloadRequest begins (BR-RELOAD-01): a fresh tool set is staged from the
    /// burst's ToolListResponse, registrations start over, and the reader reports the burst as
    /// it reports a handshake. Returns the registrations before it, for [`Link::abort_reload`].
    pub fn begin_reload(&self) -> (mpsc::UnboundedReceiver<HsEvent>, Vec<(String, i32)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.staging.lock().unwrap() = Some(ToolSet::default());
        *self.hs.lock().unwrap() = Some(tx);
        self.burst.store(true, Ordering::SeqCst);
        (rx, std::mem::take(&mut *self.middleware.lock().unwrap()))
    }

    /// A reload that failed: the previous registrations are back (BR-RELOAD-03) and nothing
    /// staged is kept.
    pub fn abort_reload(&self, middleware: Vec<(String, i32)>) {
        self.end_handshake();
        self.staging.lock().unwrap().take();
        *self.middleware.lock().unwrap() = middleware;
    }

    /// Whether a reload's burst is under way.
    fn in_burst(&self) -> bool {
        self.burst.load(Ordering::SeqCst)
    }

    fn sideband(&self, sb: protomcp_proto::frame::Sideband) {
        let rid = sb.header.request_id.clone();
        // BR-SIDEBAND-03/05/09: the payload becomes the named field, or fails the call; a
        // payload for no pending call was already read past by the decoder.
        let reply = match sb.payload {
            Err(e) => Err(format!("sideband payload: {e}")),
            Ok(bytes) => match String::from_utf8(bytes.to_vec()) {
                Err(_) => Err("sideband payload is not UTF-8".to_owned()),
                Ok(text) => match sb.header.field_name.as_str() {
                    "result_json" => {
                        Ok(Msg::CallResult(pb::CallToolResponse { result_json: text, ..Default::default() }))
                    }
                    "structured_content_json" => Ok(Msg::CallResult(pb::CallToolResponse {
                        structured_content_json: text,
                        ..Default::default()
                    })),
                    other => Err(format!("sideband field_name {other:?} is not a result field")),
                },
            },
        };
        self.resolve(&rid, reply);
    }

    fn incoming(self: Arc<Self>, env: Envelope, dispatch: &dyn Dispatch) {
        let rid = env.request_id.clone();
        let Some(msg) = env.msg else { return };
        match msg {
            Msg::RegisterMiddleware(r) => {
                // BR-HANDSHAKE-04: acknowledge every registration, in arrival order.
                self.middleware.lock().unwrap().push((r.name, r.priority));
                let ack = protomcp_proto::envelopes::register_middleware_response(true);
                dispatch.trace(false, &ack);
                let _ = self.send(ack);
                self.handshake_event(HsEvent::Registration);
            }
            Msg::ReloadResponse(r) if rid.is_empty() => {
                if r.success {
                    self.handshake_event(HsEvent::Marker);
                }
            }
            Msg::StreamHeader(_) | Msg::StreamChunk(_) => {
                let ev = self.streams.lock().unwrap().handle(&Envelope { msg: Some(msg), ..env });
                match ev {
                    Some(StreamEvent::Complete { rid, field_name, data, .. }) => {
                        let text = String::from_utf8_lossy(&data).into_owned();
                        let mut r = pb::CallToolResponse::default();
                        if field_name == "structured_content_json" {
                            r.structured_content_json = text;
                        } else {
                            r.result_json = text;
                        }
                        self.resolve(&rid, Ok(Msg::CallResult(r)));
                    }
                    Some(StreamEvent::Failed { rid, error, .. }) => {
                        self.resolve(&rid, Err(format!("stream: {error}")));
                    }
                    Some(StreamEvent::Orphan { violation, .. }) => dispatch.diag(violation.to_string()),
                    _ => {}
                }
            }
            m @ (Msg::EnableTools(_)
            | Msg::DisableTools(_)
            | Msg::SetAllowed(_)
            | Msg::SetBlocked(_)
            | Msg::GetActiveTools(_)
            | Msg::Batch(_)) => {
                let op = ToolOp::of(&m).expect("control message");
                let active = {
                    let mut staging = self.staging.lock().unwrap();
                    match staging.as_mut() {
                        Some(set) => {
                            set.apply(&op);
                            Some(set.active_names())
                        }
                        None => None,
                    }
                };
                let active = active.unwrap_or_else(|| dispatch.control(&op));
                if !rid.is_empty() {
                    let reply = protomcp_proto::envelopes::active_tools(active).with_rid(rid);
                    dispatch.trace(false, &reply);
                    let _ = self.send(reply);
                }
            }
            Msg::Progress(p) => dispatch.progress(p),
            Msg::Log(l) => dispatch.log(l),
            Msg::ResourceChanged(r) => dispatch.resource_changed(r.uri),
            m @ (Msg::SamplingRequest(_) | Msg::ListRootsRequest(_)) => {
                // BR-SAMPLING-01, BR-ROOTS-01: empty rid is ignored.
                if !rid.is_empty() {
                    dispatch.reverse(self.clone(), rid, m);
                }
            }
            // BR-SIDEBAND-02: the payload that follows is matched by RawHeader.request_id in
            // `sideband`; the Envelope rid of the RawHeader frame means nothing.
            Msg::RawHeader(_) => {}
            // BR-TASK-01: ignored.
            Msg::CreateTask(_) | Msg::TaskStatusResponse(_) => {}
            // The burst of a reload by ReloadRequest (BR-RELOAD-02): the new tool list.
            Msg::ToolList(t) if rid.is_empty() && self.in_burst() => {
                if let Some(set) = self.staging.lock().unwrap().as_mut() {
                    for r in set.register(&t.tools) {
                        dispatch.diag(format!("tool {:?} left out of tools/list: {}", r.name, r.reason));
                    }
                }
                self.handshake_event(HsEvent::BurstToolList);
            }
            // A tool list with empty rid outside a reload (BR-HANDSHAKE-14): ignored.
            Msg::ToolList(_) if rid.is_empty() => {}
            other => {
                // Replies (and wrong-typed messages under a pending rid, BR-CALL-16) go to the
                // waiter; anything else is discarded (BR-CALL-17, BR-FRAME-05).
                if !rid.is_empty() {
                    self.resolve(&rid, Ok(other));
                }
            }
        }
    }
}

use protomcp_proto::EnvelopeExt;
use tokio::io::AsyncWriteExt;

/// A [`Dispatch`] that drops everything but answers: for a link driven only through
/// [`Link::request`] (tests, benchmarks).
pub struct Quiet;

impl Dispatch for Quiet {
    fn control(&self, _op: &ToolOp) -> Vec<String> {
        Vec::new()
    }
    fn progress(&self, _p: pb::ProgressNotification) {}
    fn log(&self, _l: pb::LogMessage) {}
    fn resource_changed(&self, _uri: String) {}
    fn reverse(&self, _link: Arc<Link>, _rid: String, _msg: Msg) {}
    fn diag(&self, _line: String) {}
    fn trace(&self, _from_tp: bool, _envelope: &Envelope) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tool_process_that_does_not_read_makes_requests_fail_once_the_queue_is_full() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (link, _hs) = Link::start(ours, 1, Arc::new(Quiet));
        let big = "x".repeat(1 << 20);
        let mut sent = 0usize;
        let refused = loop {
            let call =
                protomcp_proto::envelopes::call_tool_with_progress("echo", &big, "").with_rid(format!("r{sent}"));
            match link.send(call) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 1000, "1 GiB queued and still no refusal");
            tokio::task::yield_now().await;
        };
        let limit = crate::limits::BRIDGE_TOOL_QUEUE_BYTES >> 20;
        assert!((limit - 2..=limit + 2).contains(&sent), "refused after {sent} MiB (limit {limit} MiB)");
        assert!(refused.contains("not reading"), "{refused}");
        // Once the tool process reads, the queue drains and requests go through again.
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut theirs = theirs;
            let mut buf = vec![0u8; 1 << 20];
            while theirs.read(&mut buf).await.is_ok_and(|n| n > 0) {}
        });
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while link.queued.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let call = protomcp_proto::envelopes::call_tool_with_progress("echo", "{}", "").with_rid("after");
        assert_eq!(link.send(call), Ok(()));
        link.close("done".into());
        reader.abort();
    }
}
