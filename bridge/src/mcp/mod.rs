//! The MCP side of the reference bridge: rmcp's server over the [`Bridge`] core. This is the only
//! module that knows rmcp; it converts between rmcp's types and the JSON values of the core.

// Sampling, roots and logging are deprecated in rmcp (SEP-2577) but part of the protocol
// revisions this bridge serves (up to 2025-11-25).
#![allow(deprecated)]

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{self as m, ErrorCode, ErrorData};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{Peer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::error::{ReverseError, ServeError};
use super::gate::{Gate, Gates, Verdict};
use super::notes::Popped;
use super::{BoxFuture, Bridge, HostError, HostSession, ListKind, SessionId, state};

mod fast;
mod handler;
mod on_http;
mod on_http_fast;
mod on_stdio;
mod session;

pub use on_http::{accept, serve_http};
pub use on_stdio::serve_stdio;

/// The newest protocol revision offered (older ones down to 2024-11-05 are accepted).
pub const NEWEST_VERSION: &str = "2025-11-25";

/// By default an HTTP session without any request for this long is ended (BR-HTTP-26).
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

static SESSION_IDS: AtomicU64 = AtomicU64::new(1);

/// How long the head of a request's event stream waits for the answer, so that a quick call
/// goes out in one write (head, priming event, answer, end of the body) instead of two; a
/// slower call's stream starts after this as it would have.
const HOLD_FOR_ANSWER: std::time::Duration = std::time::Duration::from_millis(2);

/// The prefix of the cursors `--page-size` hands out (the offset of the next item follows).
const PAGE_CURSOR: &str = "conform-offset-";

/// One page of a list answer under `key` (BR-MCP-12): everything without `--page-size`,
/// else `page_size` items from the offset the cursor names, with a `nextCursor` while items
/// remain. A cursor this bridge did not issue is -32602 (BR-MCP-13).
fn page(size: Option<usize>, key: &str, items: Vec<Value>, cursor: Option<&str>) -> Result<Value, ErrorData> {
    let from = match cursor {
        None => 0,
        Some(c) => match c.strip_prefix(PAGE_CURSOR).and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if size.is_some() && n <= items.len() => n,
            _ => return Err(ErrorData::invalid_params("unknown cursor", None)),
        },
    };
    let Some(size) = size else { return Ok(json!({ (key): items })) };
    let end = (from + size).min(items.len());
    let mut page = json!({ (key): items[from..end] });
    if end < items.len() {
        page["nextCursor"] = json!(format!("{PAGE_CURSOR}{end}"));
    }
    Ok(page)
}

fn from_json<T: DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(format!("building the MCP result: {e}"), None))
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn host_error(e: HostError) -> ErrorData {
    ErrorData::new(ErrorCode(e.code().code()), e.to_string(), None)
}

enum Note {
    ListChanged(ListKind),
    Log(Value),
    Progress(Value),
    ResourceUpdated(String),
    Flush(oneshot::Sender<()>),
}

/// One MCP session as the core sees it.
struct Session {
    id: SessionId,
    peer: OnceLock<Peer<RoleServer>>,
    /// Notifications for the host, bounded ([`crate::limits::BRIDGE_HOST_QUEUE`]).
    notes: Arc<super::notes::Queue<Note>>,
    /// Rank of the lowest level forwarded (BR-LOG-05); 0 forwards everything (BR-LOG-06).
    threshold: Arc<AtomicUsize>,
    subscriptions: Mutex<HashSet<String>>,
    bridge: Arc<Bridge>,
    /// Trace MCP messages here (HTTP); on stdio the transport filter traces the raw lines.
    trace: bool,
    /// Cancelled when the session ends (stdin EOF, HTTP DELETE, idle end): its calls in flight
    /// are cancelled at the tool process (BR-CANCEL-06).
    ended: tokio_util::sync::CancellationToken,
    /// Cancelled on notifications/initialized.
    ready: tokio_util::sync::CancellationToken,
    /// The JSON-RPC ids of this session's tools/call requests in flight, oldest first.
    calls: Mutex<Vec<m::RequestId>>,
    /// Stdio only: notifications go out as lines through the output of [`serve_stdio`], in
    /// order with the tools/call answers of the hot path, instead of through rmcp's peer.
    lines: OnceLock<mpsc::UnboundedSender<Out>>,
    /// HTTP only: the tools/call requests the hot path answers on event streams of its own
    /// ([`on_http_fast`]), by gate key of their id.
    http_calls: Mutex<HashMap<String, on_http_fast::HttpCall>>,
    /// HTTP only: requests of ours on such a stream (sampling, roots) waiting for the host's
    /// answer, by their id.
    asked: on_http_fast::Asks,
    asks: AtomicU64,
}

/// Removes a tools/call from its session's calls in flight when the handler ends.
struct InFlight<'a> {
    session: &'a Session,
    id: m::RequestId,
}

/// The HTTP sessions by `Mcp-Session-Id`, so that DELETE ends ours at once (BR-CANCEL-06),
/// and their gates.
#[derive(Default)]
struct HttpSessions {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    gates: Gates,
}

type Registry = Arc<HttpSessions>;

/// Ends the session when rmcp drops the last clone of its handler (the transport ended: stdin
/// closed, HTTP DELETE or rmcp's idle timeout): the core forgets it, so nothing leaks.
struct Life {
    bridge: Arc<Bridge>,
    session: Arc<Session>,
    registry: Option<(Registry, Arc<OnceLock<String>>)>,
}

/// The rmcp server handler of one session.
#[derive(Clone)]
pub struct Handler {
    bridge: Arc<Bridge>,
    session: Arc<Session>,
    /// HTTP only: where on_initialized records the session under its `Mcp-Session-Id`.
    registry: Option<(Registry, Arc<OnceLock<String>>)>,
    _life: Arc<Life>,
}

/// One line for the host on stdio, written whole by the output task of [`serve_stdio`].
struct Out {
    line: String,
    /// The line answers the host's request with this id: written, the id is free in the gate.
    answers: Option<Value>,
    /// Resolved once the line is written (a notification waits for it, as rmcp's peer does).
    written: Option<oneshot::Sender<()>>,
}

/// The stdio session's tools/call requests answered by [`fast_call`], by gate key of their id:
/// a notifications/cancelled for one of them cancels it here (rmcp never saw the request).
type FastCalls = Arc<Mutex<HashMap<String, tokio_util::sync::CancellationToken>>>;

type HttpService = rmcp::transport::streamable_http_server::StreamableHttpService<
    Handler,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
>;
type HttpBody = http_body_util::combinators::BoxBody<hyper::body::Bytes, std::convert::Infallible>;

// The largest POST body the gate reads (rmcp's own limit).
use protomcp_proto::mcp_input::MAX_POST_BODY;

/// Frees the id of a request passed on to rmcp when the body of its POST's response ends.
struct Release {
    registry: Registry,
    session: String,
    id: Value,
}

/// The body of the response to a POSTed request, ending with the event that answers it.
///
/// rmcp closes a request's event stream after the answer from another task, a little later:
/// the end of the chunked body then goes out in a write of its own, one more segment and one
/// more wake-up of the client per call. Nothing follows the answer on that stream, so the body
/// ends with the answer's frame, and hyper writes the answer and the end together. The request's
/// id is free in the gate ([`Release`]) from then on (or when the body is dropped unanswered).
struct UntilAnswer {
    inner: HttpBody,
    /// `None` once the answer went out.
    release: Option<Release>,
}

/// An event stream whose first events, those that came within [`HOLD_FOR_ANSWER`] (up to the
/// answer), go out as one frame with the head; then `rest` as it comes. Both HTTP paths answer
/// with it: rmcp's request streams ([`UntilAnswer`]) and the hot path's own.
struct Held<B = UntilAnswer> {
    first: Option<hyper::body::Bytes>,
    rest: B,
}

impl<B> Held<B> {
    fn new(first: Vec<u8>, rest: B) -> Held<B> {
        Held { first: (!first.is_empty()).then(|| first.into()), rest }
    }
}

impl<B> hyper::body::Body for Held<B>
where
    B: hyper::body::Body<Data = hyper::body::Bytes, Error = std::convert::Infallible> + Unpin,
{
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if let Some(first) = self.first.take() {
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(first))));
        }
        std::pin::Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }
}

#[cfg(test)]
mod tests;
