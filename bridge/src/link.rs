//! One tool-process connection, I/O only: the writer task (frames never interleave,
//! BR-FRAME-01; bounded by [`crate::limits::BRIDGE_TOOL_QUEUE_BYTES`]) and the reader task,
//! which hands every frame to a [`Sink`] (the bridge, which feeds its sans-IO core). What a
//! frame means is decided there, not here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use protomcp_proto::fault::{self, Fault};
use protomcp_proto::frame::{Frame, Limits, Sideband};
use protomcp_proto::pb::Envelope;
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::violation::Party;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::error::SendError;
use crate::io::{EnvelopeCodec, Incoming, Outgoing};
use crate::transcript::{Dir, Item};

/// Where the reader hands what arrives, tagged with the connection's generation.
pub trait Sink: Send + Sync + 'static {
    fn envelope(&self, generation: u64, envelope: Envelope);
    fn sideband(&self, generation: u64, sideband: Sideband);
    /// The connection ended (end-of-file, a read or write error, or [`Link::close`]'s reason
    /// when the reader sees the end); called once.
    fn closed(&self, generation: u64, reason: String);
    /// A diagnostic line for stderr.
    fn diag(&self, line: String);
    /// A frame crossed the socket (for the trace): `from_tp` tells the direction.
    fn trace(&self, from_tp: bool, envelope: &Envelope);
    /// The writer handed frames to the socket (the tool process will answer them).
    fn wrote(&self) {}
    /// Anything else for the trace (connection start and end, sideband payloads), built only
    /// when tracing.
    fn trace_item(&self, _item: &dyn Fn() -> Item) {}
    /// Whether the bridge waits for a host's answer to a reverse request (only
    /// `br.concur.reader-waits-for-host` asks).
    fn waiting_on_host(&self) -> bool {
        false
    }
}

pub struct Link {
    /// Incarnation number of the tool process.
    pub generation: u64,
    /// Frames for the writer, each with its encoded size.
    out: mpsc::UnboundedSender<(Outgoing, usize)>,
    /// Bytes in `out` not yet handed to the socket ([`crate::limits::BRIDGE_TOOL_QUEUE_BYTES`]).
    queued: std::sync::atomic::AtomicUsize,
    closed: AtomicBool,
    /// Why the connection ended, once it has.
    pub end: Mutex<Option<String>>,
    ended: tokio::sync::Notify,
    /// The reader has seen the connection end and traced it ([`Link::reader_finished`]).
    reader_done: AtomicBool,
    reader_end: tokio::sync::Notify,
}

impl Link {
    /// Starts the reader and writer tasks on an accepted connection.
    pub fn start(stream: UnixStream, generation: u64, sink: Arc<dyn Sink>) -> Arc<Link> {
        let (read, write) = stream.into_split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<(Outgoing, usize)>();
        let link = Arc::new(Link {
            generation,
            out,
            queued: std::sync::atomic::AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            end: Mutex::new(None),
            ended: tokio::sync::Notify::new(),
            reader_done: AtomicBool::new(false),
            reader_end: tokio::sync::Notify::new(),
        });
        let writer_link = link.clone();
        let writer_sink = sink.clone();
        tokio::spawn(async move {
            let mut frames = FramedWrite::new(write, EnvelopeCodec::new(Party::Bridge, Limits::default()));
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
                    let r = frames.feed(item).await;
                    writer_link.queued.fetch_sub(size, Ordering::Relaxed);
                    if let Err(e) = r {
                        failed = Some(e.to_string());
                        break;
                    }
                }
                if failed.is_none()
                    && let Err(e) = frames.flush().await
                {
                    failed = Some(e.to_string());
                }
                if failed.is_none() {
                    writer_sink.wrote();
                }
                if let Some(e) = failed {
                    let reason = format!("writing to the tool process failed: {e}");
                    if writer_link.close(reason.clone()) {
                        writer_sink.closed(writer_link.generation, reason);
                    }
                    break;
                }
            }
            let _ = frames.get_mut().shutdown().await;
        });
        let reader_link = link.clone();
        sink.trace_item(&|| Item::Connected);
        tokio::spawn(async move {
            let limits = if fault::on(Fault::BrSidebandLimitMaxFrame) {
                let max = u64::from(protomcp_proto::frame::MAX_FRAME);
                Limits { max_sideband: max, max_decompressed: max, ..Limits::default() }
            } else {
                Limits::default()
            };
            let mut frames = FramedRead::new(read, EnvelopeCodec::new(Party::ToolProcess, limits));
            // Results taken since the tasks waiting for them last had a chance to run.
            let mut owed = false;
            let reason = loop {
                let next = match std::future::poll_fn(|cx| std::task::Poll::Ready(frames.poll_next_unpin(cx))).await {
                    std::task::Poll::Ready(next) => next,
                    // Nothing more to read now: everything else runs before the next frame.
                    std::task::Poll::Pending => {
                        owed = false;
                        frames.next().await
                    }
                };
                let result = matches!(&next, Some(Ok(Incoming::Frame(Frame::Envelope(d))))
                    if matches!(d.envelope.msg, Some(Msg::CallResult(_))));
                // Whatever else comes after a result waits until the result's caller has run:
                // the host hears the answer before a notification sent after it.
                if owed && !result {
                    tokio::task::yield_now().await;
                }
                match next {
                    None => break "the tool process closed the connection".to_owned(),
                    Some(Err(_)) if fault::on(Fault::BrFrameOversizeDeaf) => std::future::pending::<()>().await,
                    Some(Err(e)) => break format!("the connection to the tool process failed: {e}"),
                    Some(Ok(Incoming::Malformed(e))) if fault::on(Fault::BrFrameUndecodableCloses) => {
                        break format!("undecodable frame: {e}");
                    }
                    Some(Ok(Incoming::Malformed(e))) if fault::on(Fault::BrFrameUndecodableDeaf) => {
                        sink.diag(format!("undecodable frame, not reading any more: {e}"));
                        std::future::pending::<()>().await
                    }
                    Some(Ok(Incoming::Malformed(e))) => sink.diag(format!("discarded a frame: {e}")),
                    Some(Ok(Incoming::Frame(Frame::Envelope(d))))
                        if d.len == 0 && fault::on(Fault::BrFrameEmptyCloses) =>
                    {
                        break "the tool process sent an empty frame: end of the connection".to_owned();
                    }
                    Some(Ok(Incoming::Frame(Frame::Sideband(sb)))) => {
                        sink.trace_item(&|| Item::Frame {
                            dir: Dir::ToTestee,
                            tree: Some(crate::scenario::normalize::sideband_value(&sb, &sb.header.request_id)),
                            hex: None,
                            note: None,
                        });
                        sink.sideband(generation, *sb)
                    }
                    Some(Ok(Incoming::Frame(Frame::Envelope(d)))) => {
                        sink.trace(true, &d.envelope);
                        sink.envelope(generation, d.envelope);
                    }
                }
                while fault::on(Fault::BrConcurReaderWaitsForHost) && sink.waiting_on_host() {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                // The bridge runs on one thread: a tool process that sends without pause must
                // not starve the tasks that write to the host (notifications, results), so the
                // reader lets them run after every frame, except between results that arrived
                // together: their callers then run one after another in the order of the
                // results, and what they write goes out in one write per batch (still within
                // the runtime's budget per turn of a task).
                if result {
                    owed = true;
                    tokio::task::coop::consume_budget().await;
                } else {
                    owed = false;
                    tokio::task::yield_now().await;
                }
            };
            sink.trace_item(&|| Item::Shutdown { how: reason.clone() });
            let reason = if reader_link.close(reason.clone()) {
                reason
            } else {
                reader_link.end.lock().unwrap().clone().unwrap_or(reason)
            };
            sink.closed(generation, reason);
            reader_link.reader_done.store(true, Ordering::SeqCst);
            reader_link.reader_end.notify_waiters();
        });
        link
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

    /// Ends the connection's writing side (what is queued is still written); returns whether
    /// this call ended it. The [`Sink`] hears of the end from the reader, which sees it next.
    pub fn close(&self, reason: String) -> bool {
        if self.closed.swap(true, Ordering::SeqCst) {
            return false;
        }
        *self.end.lock().unwrap() = Some(reason);
        self.ended.notify_waiters();
        true
    }

    /// Queues one frame. Fails when the connection has ended.
    pub fn send(&self, mut envelope: Envelope) -> Result<(), SendError> {
        if let Some(Msg::CallTool(call)) = &mut envelope.msg
            && call.arguments_json.len() > protomcp_proto::spec::DEFAULT_THRESHOLD
            && (fault::on(Fault::BrSidebandArgsRaw) || fault::on(Fault::BrStreamArgsStreamed))
        {
            // The faults: large arguments take the large-result paths towards the tool process.
            let args = std::mem::take(&mut call.arguments_json).into_bytes();
            let rid = envelope.request_id.clone();
            if fault::on(Fault::BrSidebandArgsRaw) {
                let header = protomcp_proto::pb::RawHeader {
                    request_id: rid,
                    field_name: "arguments_json".into(),
                    size: args.len() as u64,
                    ..Default::default()
                };
                self.send_item(Outgoing::Envelope(header.into()))?;
                self.send_item(Outgoing::Raw(args.into()))?;
            } else {
                for e in protomcp_proto::sideband::encode_stream(&rid, "arguments_json", &args, 16 * 1024, true) {
                    self.send_item(Outgoing::Envelope(e))?;
                }
            }
        }
        self.send_item(Outgoing::Envelope(envelope))
    }

    fn send_item(&self, item: Outgoing) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed(
                self.end.lock().unwrap().clone().unwrap_or_else(|| "connection closed".into()),
            ));
        }
        // A tool process that stops reading does not make the bridge queue without end.
        let size = match &item {
            Outgoing::Envelope(envelope) => prost::Message::encoded_len(envelope),
            Outgoing::Raw(bytes) => bytes.len(),
        };
        let queued = self.queued.load(Ordering::Relaxed);
        if queued > 0 && queued + size > crate::limits::BRIDGE_TOOL_QUEUE_BYTES {
            return Err(SendError::NotReading { queued });
        }
        self.queued.fetch_add(size, Ordering::Relaxed);
        self.out.send((item, size)).map_err(|_| SendError::WriterStopped)
    }
}

use tokio::io::AsyncWriteExt;

#[cfg(test)]
mod tests {
    use super::*;
    use protomcp_proto::EnvelopeExt;

    /// Records the order in which the reader hands over frames and the tasks it wakes run.
    struct Order {
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl Sink for Order {
        fn envelope(&self, _generation: u64, envelope: Envelope) {
            let rid = envelope.request_id.clone();
            self.seen.lock().unwrap().push(format!("frame {rid}"));
            if matches!(envelope.msg, Some(Msg::CallResult(_))) {
                // As the bridge does with an answer: the task waiting for it is woken.
                let seen = self.seen.clone();
                tokio::spawn(async move { seen.lock().unwrap().push(format!("caller of {rid}")) });
            }
        }
        fn sideband(&self, _generation: u64, _sideband: Sideband) {}
        fn closed(&self, _generation: u64, _reason: String) {}
        fn diag(&self, _line: String) {}
        fn trace(&self, _from_tp: bool, _envelope: &Envelope) {}
    }

    #[tokio::test]
    async fn results_that_arrive_together_are_taken_together_and_their_callers_run_before_what_follows() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let link = Link::start(ours, 1, Arc::new(Order { seen: seen.clone() }));
        let mut tp = FramedWrite::new(theirs, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
        // Two results, then a notification sent after them, in one write.
        let frames = [
            protomcp_proto::envelopes::call_result_text("a").with_rid("r1"),
            protomcp_proto::envelopes::call_result_text("b").with_rid("r2"),
            protomcp_proto::envelopes::log("info", "", "{}").with_rid("log"),
        ];
        for f in frames {
            tp.feed(Outgoing::Envelope(f)).await.unwrap();
        }
        tp.flush().await.unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while seen.lock().unwrap().len() < 5 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen, ["frame r1", "frame r2", "caller of r1", "caller of r2", "frame log"]);
        link.close("done".into());
    }

    /// Counts the writer's reports, and takes everything else without a word.
    #[derive(Default)]
    struct Writes(std::sync::atomic::AtomicUsize);

    impl Sink for Writes {
        fn envelope(&self, _generation: u64, _envelope: Envelope) {}
        fn sideband(&self, _generation: u64, _sideband: Sideband) {}
        fn closed(&self, _generation: u64, _reason: String) {}
        fn diag(&self, _line: String) {}
        fn trace(&self, _from_tp: bool, _envelope: &Envelope) {}
        fn wrote(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn the_writer_tells_the_sink_once_a_frame_is_on_the_socket() {
        // What opens the bridge's polling window (`spin`): the tool process will answer.
        let (ours, theirs) = UnixStream::pair().unwrap();
        let sink = Arc::new(Writes::default());
        let link = Link::start(ours, 1, sink.clone());
        assert_eq!(sink.0.load(Ordering::SeqCst), 0);
        link.send(protomcp_proto::envelopes::list_tools().with_rid("r1")).unwrap();
        let mut frames = FramedRead::new(theirs, EnvelopeCodec::new(Party::Bridge, Limits::default()));
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), frames.next()).await.unwrap();
        assert!(matches!(got, Some(Ok(Incoming::Frame(Frame::Envelope(_))))), "{got:?}");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while sink.0.load(Ordering::SeqCst) == 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(sink.0.load(Ordering::SeqCst), 1);
        link.close("done".into());
    }

    #[tokio::test]
    async fn a_tool_process_that_does_not_read_makes_requests_fail_once_the_queue_is_full() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let link = Link::start(ours, 1, Arc::new(Writes::default()));
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
        assert!(matches!(refused, SendError::NotReading { .. }), "{refused}");
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
