//! A Streamable HTTP session that behaves like a stdio pipe for the scenario runner: every POST
//! is sent in order, its response (JSON or an event stream) is read incrementally in the
//! background, and every message that arrives — on a POST's stream or on the session's GET
//! event stream — lands in one log, tagged with the stream it came on. Order is kept within a
//! stream; HTTP promises none across streams. Hand-rolled HTTP/1.1 (one connection per request)
//! so that any bytes, malformed JSON included, can be POSTed.
//!
//! Bounded ([`crate::limits`]): the log keeps the first and the last events
//! ([`limits::HOST_MESSAGES`]), a body or event longer than [`limits::MESSAGE_BYTES`] is dropped,
//! at most [`limits::HTTP_ANSWERS_IN_FLIGHT`] answers to requests from the bridge are sent at
//! once; [`HttpSession::flood`] names a flood.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::http::HttpError;
use crate::bounded::{Kept, Kind, thousands, value_size};
use crate::limits;

/// What arrived from the bridge.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// A JSON-RPC message (or batch) on stream `stream`.
    Message { stream: usize, value: Value },
    /// Something that is not a message: an HTTP status other than 200/202, a body or event that
    /// is not JSON, a failed connection. Shown in the transcript.
    Note { stream: usize, text: String },
    /// A comment line of an event stream (`: text`), e.g. a keep-alive (BR-HTTP-36); `text` is
    /// what follows the colon (and one space). Shown in the transcript.
    Comment { stream: usize, text: String },
}

impl Kind for Arrival {
    fn kind(&self) -> String {
        match self {
            Arrival::Message { value, .. } => value.kind(),
            Arrival::Note { .. } => "notes".into(),
            Arrival::Comment { .. } => "SSE comments".into(),
        }
    }

    fn size(&self) -> usize {
        match self {
            Arrival::Message { value, .. } => 16 + value_size(value),
            Arrival::Note { text, .. } | Arrival::Comment { text, .. } => 40 + text.len(),
        }
    }
}

impl Arrival {
    pub fn stream(&self) -> usize {
        match self {
            Arrival::Message { stream, .. } | Arrival::Note { stream, .. } | Arrival::Comment { stream, .. } => *stream,
        }
    }
}

/// Where the endpoint is: `http://HOST:PORT/PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `HOST:PORT` as written (the `Host` header).
    pub authority: String,
    pub host: String,
    pub port: u16,
    pub path: String,
}

/// Why a URL names no endpoint the host driver can reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    #[error("{0:?}: only http:// URLs are supported")]
    NotHttp(String),
    #[error("{url:?}: port {port:?} is not a number")]
    BadPort { url: String, port: String },
    #[error("{0:?}: no host")]
    NoHost(String),
}

impl Endpoint {
    /// Parses `http://HOST[:PORT][/PATH]` (port 80 and path `/` by default; `[v6]` hosts).
    pub fn parse(url: &str) -> Result<Endpoint, UrlError> {
        let rest = url.strip_prefix("http://").ok_or_else(|| UrlError::NotHttp(url.to_owned()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => {
                (h, p.parse::<u16>().map_err(|_| UrlError::BadPort { url: url.to_owned(), port: p.to_owned() })?)
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(UrlError::NoHost(url.to_owned()));
        }
        Ok(Endpoint { authority: authority.to_owned(), host: host.to_owned(), port, path: path.to_owned() })
    }

    /// The first address the host resolves to.
    pub async fn addr(&self) -> std::io::Result<SocketAddr> {
        tokio::net::lookup_host((self.host.as_str(), self.port))
            .await?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("{} resolves to no address", self.host)))
    }
}

#[derive(Default)]
struct State {
    events: Kept<Arrival>,
    /// The length of the longest body or event above [`limits::MESSAGE_BYTES`], if there was one.
    overlong: Option<usize>,
    /// Answers to requests from the bridge being sent.
    answers: usize,
    session: Option<String>,
    version: Option<String>,
    get_opened: bool,
    /// The stream of the GET event stream, once opened.
    get_stream: Option<usize>,
    /// The stream of each POST that carried a JSON-RPC request: (its id, the stream).
    requests: Vec<(Value, usize)>,
    tasks: Vec<JoinHandle<()>>,
    /// The readers of modern requests' responses (POSTs of their own, spec §26.7): the host
    /// closes them when it goes away ([`HttpSend::Delete`]).
    modern: Vec<JoinHandle<()>>,
    /// Requests from the bridge are answered at once (`ping` with `{}`, others with -32601),
    /// as [`super::StdioHost`] does; off: the script answers.
    manual: bool,
    /// The endpoint accepted a connection.
    listening: bool,
    /// Why the sender gave up (the start-up watchdog).
    failure: Option<String>,
    /// Queued sends not yet done.
    pending: usize,
}

/// What the queued sender does, in order ([`HttpSession::send`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpSend {
    /// POST these bytes.
    Post(Vec<u8>),
    /// POST these bytes with these headers: each replaces the driver's header of the same name
    /// (case-insensitive), an empty value removes it (`host_send.headers`).
    PostWith(Vec<u8>, Vec<(String, String)>),
    /// DELETE the session (when there is one), and close every modern request's response that
    /// is still open: the host goes away (BR-CANCEL-08).
    Delete,
}

/// One MCP session over Streamable HTTP (see the module documentation).
pub struct HttpSession {
    pub endpoint: Endpoint,
    state: Arc<Mutex<State>>,
    next_stream: Arc<AtomicUsize>,
    /// How long a POST may take to connect and write.
    pub send_timeout: Duration,
    queue: Mutex<Option<tokio::sync::mpsc::UnboundedSender<HttpSend>>>,
}

/// How long a send waits for the response's status line before the next step runs (keeps the
/// bridge's view of the order of host messages the scenario's, as on a pipe).
const SETTLE: Duration = Duration::from_millis(200);

impl HttpSession {
    pub fn new(endpoint: Endpoint) -> HttpSession {
        HttpSession {
            endpoint,
            state: Arc::new(Mutex::new(State { events: Kept::new(limits::HOST_MESSAGES), ..State::default() })),
            next_stream: Arc::new(AtomicUsize::new(1)),
            send_timeout: Duration::from_secs(5),
            queue: Mutex::new(None),
        }
    }

    /// Queues `item`, like a write into a pipe: the step that sends does not wait for the bridge.
    /// The first call starts the sender, which first waits until the endpoint accepts a TCP
    /// connection — until `watchdog` at most (the start-up watchdog, see [`HttpSession::failure`])
    /// — and then sends every queued item in order ([`HttpSession::post`], [`HttpSession::delete`]).
    pub fn send(&self, item: HttpSend, watchdog: Instant) {
        let mut q = self.queue.lock().unwrap();
        let tx = q.get_or_insert_with(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let ctx = self.ctx();
            let timeout = self.send_timeout;
            let task = tokio::spawn(async move { ctx.sender(rx, watchdog, timeout).await });
            self.state.lock().unwrap().tasks.push(task);
            tx
        });
        self.state.lock().unwrap().pending += 1;
        let _ = tx.send(item);
    }

    /// Why queued sends were given up: the endpoint did not accept a connection before the
    /// start-up watchdog.
    pub fn failure(&self) -> Option<String> {
        self.state.lock().unwrap().failure.clone()
    }

    /// Whether the endpoint accepted a connection.
    pub fn listening(&self) -> bool {
        self.state.lock().unwrap().listening
    }

    /// Queued sends not yet done.
    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().pending
    }

    /// Polls a TCP connect until the endpoint accepts one, or `deadline`: the last connect's
    /// error then.
    pub async fn wait_listening(&self, deadline: Instant) -> std::io::Result<()> {
        wait_listening(&self.endpoint, deadline).await
    }
}

/// Polls a TCP connect until `endpoint` accepts one, or `deadline`; the last error otherwise.
async fn wait_listening(endpoint: &Endpoint, deadline: Instant) -> std::io::Result<()> {
    loop {
        let last = match endpoint.addr().await {
            Ok(a) => match super::http::connect(a).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            },
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl HttpSession {
    /// Whether requests from the bridge are answered by the session (the default) or left to the
    /// caller.
    pub fn answer_requests(&self, on: bool) {
        self.state.lock().unwrap().manual = !on;
    }

    /// Every event so far, in arrival order (past [`limits::HOST_MESSAGES`]: the first and the
    /// last ones).
    pub fn events(&self) -> Vec<Arrival> {
        self.state.lock().unwrap().events.iter().cloned().collect()
    }

    /// The events kept whose number (from 0, in arrival order, dropped ones counted) is `seq` or
    /// later, with their numbers: a reader goes on where it stopped.
    pub fn events_since(&self, seq: u64) -> Vec<(u64, Arrival)> {
        self.state.lock().unwrap().events.since(seq).map(|(n, e)| (n, e.clone())).collect()
    }

    /// Forgets the events numbered below `seq` (a reader that has taken them): from then on
    /// [`limits::HOST_MESSAGES`] bounds the events not taken yet.
    pub fn forget_before(&self, seq: u64) {
        self.state.lock().unwrap().events.forget_before(seq);
    }

    /// When the bridge sent more than the session keeps: the failure message naming the flood.
    pub fn flood(&self) -> Option<String> {
        let st = self.state.lock().unwrap();
        if let Some(f) = st.events.flood("the bridge", "messages and events over HTTP") {
            return Some(f);
        }
        st.overlong.map(|len| {
            format!(
                "flood: the bridge sent a response body or event of {} bytes, more than the harness takes as one message ({} bytes)",
                thousands(len as u64),
                thousands(limits::MESSAGE_BYTES as u64)
            )
        })
    }

    /// The stream of the session's GET event stream, once the driver opened it.
    pub fn get_stream(&self) -> Option<usize> {
        self.state.lock().unwrap().get_stream
    }

    /// The stream of the response to the POST that carried the request with JSON-RPC id `id`
    /// (the last one, if the id was sent more than once).
    pub fn request_stream(&self, id: &Value) -> Option<usize> {
        self.state.lock().unwrap().requests.iter().rev().find(|(i, _)| i == id).map(|(_, s)| *s)
    }

    /// The JSON-RPC id of the request whose POST's response is stream `stream`.
    pub fn request_of_stream(&self, stream: usize) -> Option<Value> {
        self.state.lock().unwrap().requests.iter().find(|(_, s)| *s == stream).map(|(i, _)| i.clone())
    }

    /// The `Mcp-Session-Id` the bridge gave, once it did.
    pub fn session_id(&self) -> Option<String> {
        self.state.lock().unwrap().session.clone()
    }

    /// POSTs `body` (any bytes) as `application/json`; returns once the request is written and
    /// its status line arrived (or [`SETTLE`] passed); the response is read in the background.
    pub async fn post(&self, body: Vec<u8>) -> Result<(), HttpError> {
        self.ctx().post(body, &[], self.send_timeout).await.map(|_| ()).map_err(|(_, e)| e)
    }

    /// DELETE with the session id; returns the status (the session's streams stay read).
    pub async fn delete(&self) -> Result<u16, HttpError> {
        self.ctx().delete(self.send_timeout).await.map(|(status, _)| status).map_err(|(_, e)| e)
    }

    /// Stops every background read.
    pub fn abort(&self) {
        let mut st = self.state.lock().unwrap();
        let mut all: Vec<JoinHandle<()>> = st.tasks.drain(..).collect();
        all.append(&mut st.modern);
        drop(st);
        for t in all {
            t.abort();
        }
    }

    fn ctx(&self) -> Ctx {
        Ctx { endpoint: self.endpoint.clone(), state: self.state.clone(), next_stream: self.next_stream.clone() }
    }
}

impl Drop for HttpSession {
    fn drop(&mut self) {
        self.abort();
    }
}

mod ctx;

use ctx::Ctx;

#[cfg(test)]
mod tests;
