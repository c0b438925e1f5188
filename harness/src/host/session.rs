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
pub enum Event {
    /// A JSON-RPC message (or batch) on stream `stream`.
    Message { stream: usize, value: Value },
    /// Something that is not a message: an HTTP status other than 200/202, a body or event that
    /// is not JSON, a failed connection. Shown in the transcript.
    Note { stream: usize, text: String },
}

impl Kind for Event {
    fn kind(&self) -> String {
        match self {
            Event::Message { value, .. } => value.kind(),
            Event::Note { .. } => "notes".into(),
        }
    }

    fn size(&self) -> usize {
        match self {
            Event::Message { value, .. } => 16 + value_size(value),
            Event::Note { text, .. } => 40 + text.len(),
        }
    }
}

impl Event {
    pub fn stream(&self) -> usize {
        match self {
            Event::Message { stream, .. } | Event::Note { stream, .. } => *stream,
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

impl Endpoint {
    /// Parses `http://HOST[:PORT][/PATH]` (port 80 and path `/` by default; `[v6]` hosts).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url:?}: only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => {
                (h, p.parse::<u16>().map_err(|_| format!("{url:?}: port {p:?} is not a number"))?)
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{url:?}: no host"));
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
    events: Kept<Event>,
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
pub enum Outgoing {
    /// POST these bytes.
    Post(Vec<u8>),
    /// DELETE the session.
    Delete,
}

/// One MCP session over Streamable HTTP (see the module documentation).
pub struct HttpSession {
    pub endpoint: Endpoint,
    state: Arc<Mutex<State>>,
    next_stream: Arc<AtomicUsize>,
    /// How long a POST may take to connect and write.
    pub send_timeout: Duration,
    queue: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Outgoing>>>,
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
    pub fn send(&self, item: Outgoing, watchdog: Instant) {
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

    /// Polls a TCP connect until the endpoint accepts one, or `deadline`.
    pub async fn wait_listening(&self, deadline: Instant) -> Result<(), String> {
        wait_listening(&self.endpoint, deadline).await
    }
}

/// Polls a TCP connect until `endpoint` accepts one, or `deadline`; the last error otherwise.
async fn wait_listening(endpoint: &Endpoint, deadline: Instant) -> Result<(), String> {
    loop {
        let last = match endpoint.addr().await {
            Ok(a) => match super::http::connect(a).await {
                Ok(_) => return Ok(()),
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
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
    pub fn events(&self) -> Vec<Event> {
        self.state.lock().unwrap().events.iter().cloned().collect()
    }

    /// The events kept whose number (from 0, in arrival order, dropped ones counted) is `seq` or
    /// later, with their numbers: a reader goes on where it stopped.
    pub fn events_since(&self, seq: u64) -> Vec<(u64, Event)> {
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
        self.ctx().post(body, self.send_timeout).await.map(|_| ()).map_err(|(_, e)| e)
    }

    /// DELETE with the session id; returns the status (the session's streams stay read).
    pub async fn delete(&self) -> Result<u16, HttpError> {
        self.ctx().delete(self.send_timeout).await.map(|(status, _)| status).map_err(|(_, e)| e)
    }

    /// Stops every background read.
    pub fn abort(&self) {
        for t in self.state.lock().unwrap().tasks.drain(..) {
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

/// What a background reader needs.
#[derive(Clone)]
struct Ctx {
    endpoint: Endpoint,
    state: Arc<Mutex<State>>,
    next_stream: Arc<AtomicUsize>,
}

impl Ctx {
    /// The queued sender of [`HttpSession::send`].
    async fn sender(
        self,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
        watchdog: Instant,
        timeout: Duration,
    ) {
        let started = Instant::now();
        if let Err(last) = wait_listening(&self.endpoint, watchdog).await {
            let e = &self.endpoint;
            self.state.lock().unwrap().failure = Some(format!(
                "start-up watchdog: the bridge did not accept connections at http://{}{} within {:?} (last error: {last})",
                e.authority,
                e.path,
                started.elapsed()
            ));
            return;
        }
        self.state.lock().unwrap().listening = true;
        while let Some(item) = rx.recv().await {
            match item {
                Outgoing::Post(body) => {
                    if let Err((stream, e)) = self.post(body, timeout).await {
                        self.note(stream, format!("POST failed: {e}"));
                    }
                }
                Outgoing::Delete => {
                    let no_session = self.state.lock().unwrap().session.is_none();
                    if no_session {
                        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
                        self.note(stream, "no session id to DELETE");
                    } else if let Err((stream, e)) = self.delete(timeout).await {
                        self.note(stream, format!("DELETE failed: {e}"));
                    }
                }
            }
            self.state.lock().unwrap().pending -= 1;
        }
    }

    /// POSTs `body`; returns its stream once the status line arrived (or [`SETTLE`] passed), the
    /// rest of the response is read in the background.
    async fn post(&self, body: Vec<u8>, timeout: Duration) -> Result<usize, (usize, HttpError)> {
        let mut headers = self.session_headers("application/json, text/event-stream");
        headers.push(("Content-Type".into(), "application/json".into()));
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        if let Ok(v) = serde_json::from_slice::<Value>(&body)
            && let (Some(id), true) = (v.get("id"), v.get("method").is_some())
        {
            self.state.lock().unwrap().requests.push((id.clone(), stream));
        }
        let conn = match tokio::time::timeout(timeout, self.open("POST", &headers, &body)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err((stream, e)),
            Err(_) => return Err((stream, HttpError::Timeout(timeout))),
        };
        let (headed_tx, headed_rx) = tokio::sync::oneshot::channel();
        let ctx = self.clone();
        let task = tokio::spawn(async move { ctx.read_response(conn, stream, Some(headed_tx)).await });
        self.state.lock().unwrap().tasks.push(task);
        let _ = tokio::time::timeout(SETTLE, headed_rx).await;
        Ok(stream)
    }

    /// DELETE with the session id; the status (a note unless 2xx).
    async fn delete(&self, timeout: Duration) -> Result<(u16, usize), (usize, HttpError)> {
        let headers = self.session_headers("application/json, text/event-stream");
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let run = async {
            let conn = self.open("DELETE", &headers, &[]).await?;
            let mut reader = BufReader::new(conn);
            read_head(&mut reader).await.map(|(status, _)| status)
        };
        let status = match tokio::time::timeout(timeout, run).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err((stream, e)),
            Err(_) => return Err((stream, HttpError::Timeout(timeout))),
        };
        if !(200..300).contains(&status) {
            self.note(stream, format!("DELETE: HTTP {status}"));
        }
        Ok((status, stream))
    }

    async fn open(&self, method: &str, headers: &[(String, String)], body: &[u8]) -> Result<TcpStream, HttpError> {
        let addr = self.endpoint.addr().await?;
        let mut stream = super::http::connect(addr).await?;
        let mut all: Vec<(&str, &str)> = vec![("Host", &self.endpoint.authority)];
        all.extend(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        // One write: head and body together (see [`super::http::request`]).
        let bytes = super::http::request_bytes(&self.endpoint.authority, method, &self.endpoint.path, &all, body);
        stream.write_all(&bytes).await?;
        Ok(stream)
    }

    fn push(&self, e: Event) {
        let mut st = self.state.lock().unwrap();
        if let Event::Message { value, .. } = &e
            && let (Some(method), Some(id)) = (value.get("method").and_then(Value::as_str), value.get("id"))
            && !st.manual
        {
            if st.answers >= limits::HTTP_ANSWERS_IN_FLIGHT {
                let text = format!("{method} not answered: {} answers in flight", st.answers);
                let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
                st.events.push(e);
                st.events.push(Event::Note { stream, text });
                return;
            }
            st.answers += 1;
            st.tasks.retain(|t| !t.is_finished());
            let reply = if method == "ping" {
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("method not found: {method}")}})
            };
            let ctx = self.clone();
            let method = method.to_owned();
            let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
            st.tasks.push(tokio::spawn(async move {
                let mut headers = ctx.session_headers("application/json, text/event-stream");
                headers.push(("Content-Type".into(), "application/json".into()));
                match ctx.open("POST", &headers, reply.to_string().as_bytes()).await {
                    Ok(conn) => ctx.clone().read_response(conn, stream, None).await,
                    Err(e) => ctx.note(stream, format!("POST of the answer to {method} failed: {e}")),
                }
                ctx.state.lock().unwrap().answers -= 1;
            }));
        }
        if let Event::Message { value, .. } = &e {
            // The negotiated version goes into MCP-Protocol-Version from now on.
            let r = &value["result"];
            if let (Some(v), true) = (r["protocolVersion"].as_str(), r.get("serverInfo").is_some()) {
                st.version = Some(v.to_owned());
            }
        }
        st.events.push(e);
    }

    fn session_headers(&self, accept: &str) -> Vec<(String, String)> {
        let st = self.state.lock().unwrap();
        let mut h = vec![("Accept".to_owned(), accept.to_owned())];
        if let Some(s) = &st.session {
            h.push(("Mcp-Session-Id".into(), s.clone()));
        }
        if let Some(v) = &st.version {
            h.push(("MCP-Protocol-Version".into(), v.clone()));
        }
        h
    }

    fn note(&self, stream: usize, text: impl Into<String>) {
        self.push(Event::Note { stream, text: text.into() });
    }

    /// Reads one response: status and headers, then the body as JSON or as an event stream.
    async fn read_response(self, conn: TcpStream, stream: usize, headed: Option<tokio::sync::oneshot::Sender<()>>) {
        let mut reader = BufReader::new(conn);
        let (status, headers) = match read_head(&mut reader).await {
            Ok(h) => h,
            Err(e) => {
                self.note(stream, format!("no HTTP response: {e}"));
                return;
            }
        };
        let header = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        if let Some(id) = header("mcp-session-id") {
            let open_get = {
                let mut st = self.state.lock().unwrap();
                let first = st.session.is_none();
                if first {
                    st.session = Some(id);
                }
                let open = first && !st.get_opened;
                st.get_opened |= open;
                open
            };
            if open_get {
                // The GET stream is open before the next send goes out: the response that gave
                // the id counts as headed once the GET's status line arrived too (the sender
                // waits at most SETTLE for both), so the bridge has the stream for whatever the
                // scenario does next (BR-HTTP-13/19).
                let (get_tx, get_rx) = tokio::sync::oneshot::channel();
                let ctx = self.clone();
                let task = tokio::spawn(async move { ctx.event_stream(get_tx).await });
                self.state.lock().unwrap().tasks.push(task);
                let _ = tokio::time::timeout(SETTLE, get_rx).await;
            }
        }
        if let Some(tx) = headed {
            let _ = tx.send(());
        }
        let ctype = header("content-type").unwrap_or_default();
        if status != 200 && status != 202 {
            self.note(
                stream,
                format!("HTTP {status}{}", if ctype.is_empty() { String::new() } else { format!(" ({ctype})") }),
            );
        }
        let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let length = header("content-length").and_then(|v| v.parse::<usize>().ok());
        let mut body = Body { reader, chunked, left: length, chunk_left: 0, done: length == Some(0) };
        if ctype.starts_with("text/event-stream") {
            self.read_events(&mut body, stream).await;
            return;
        }
        let mut all = Vec::new();
        while let Some(b) = body.next().await {
            if all.len() + b.len() > limits::MESSAGE_BYTES {
                self.overlong(stream, all.len() + b.len(), "a body");
                return;
            }
            all.extend_from_slice(&b);
        }
        let text = String::from_utf8_lossy(&all);
        if text.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if ctype.starts_with("application/json") || status >= 400 => {
                self.push(Event::Message { stream, value: v })
            }
            _ => self.note(stream, format!("body: {}", excerpt(&text))),
        }
    }

    /// Parses an event stream: `data:` lines up to a blank line form one event.
    async fn read_events(&self, body: &mut Body, stream: usize) {
        let mut pending = Vec::<u8>::new();
        let mut data: Vec<String> = Vec::new();
        // Bytes of `pending` already known to hold no newline: a long line arriving in many
        // chunks is scanned once, not once per chunk.
        let mut scanned = 0;
        // Bytes of the event so far, and whether it is past MESSAGE_BYTES (then it is skipped
        // up to its end, the blank line).
        let (mut size, mut skipping) = (0usize, false);
        // Whether `pending` starts inside a line whose beginning was dropped.
        let mut rest_of_line = false;
        while let Some(b) = body.next().await {
            pending.extend_from_slice(&b);
            while let Some(i) = pending[scanned..].iter().position(|&c| c == b'\n').map(|i| i + scanned) {
                scanned = 0;
                let line: Vec<u8> = pending.drain(..=i).collect();
                if std::mem::take(&mut rest_of_line) {
                    size += line.len();
                    continue;
                }
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if std::mem::take(&mut skipping) {
                        self.overlong(stream, size, "an event");
                        data.clear();
                    } else {
                        self.event(stream, &mut data);
                    }
                    size = 0;
                } else if let Some(d) = line.strip_prefix("data:") {
                    size += d.len();
                    if size > limits::MESSAGE_BYTES {
                        skipping = true;
                        data.clear();
                    }
                    if !skipping {
                        data.push(d.strip_prefix(' ').unwrap_or(d).to_owned());
                    }
                }
            }
            scanned = pending.len();
            if size + pending.len() > limits::MESSAGE_BYTES {
                // A line longer than a message: dropped as it arrives.
                size += pending.len();
                skipping = true;
                rest_of_line = true;
                data.clear();
                pending.clear();
                scanned = 0;
            }
        }
        if skipping {
            self.overlong(stream, size, "an event");
        } else {
            self.event(stream, &mut data);
        }
    }

    /// Drops a body or event of `len` bytes (at least), longer than [`limits::MESSAGE_BYTES`]:
    /// a note, and a flood ([`HttpSession::flood`]).
    fn overlong(&self, stream: usize, len: usize, what: &str) {
        {
            let mut st = self.state.lock().unwrap();
            st.overlong = Some(st.overlong.unwrap_or(0).max(len));
        }
        self.note(stream, format!("{what} of more than {} bytes: dropped", thousands(limits::MESSAGE_BYTES as u64)));
    }

    fn event(&self, stream: usize, data: &mut Vec<String>) {
        let text = data.join("\n");
        data.clear();
        if text.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => self.push(Event::Message { stream, value: v }),
            Err(_) => self.note(stream, format!("event data that is not JSON: {}", excerpt(&text))),
        }
    }

    /// The session's GET event stream (server-initiated messages not tied to a POST); boxed, as
    /// reading a response may start it.
    fn event_stream(
        self,
        headed: tokio::sync::oneshot::Sender<()>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(self.get_events(headed))
    }

    async fn get_events(self, headed: tokio::sync::oneshot::Sender<()>) {
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        self.state.lock().unwrap().get_stream = Some(stream);
        let headers = self.session_headers("text/event-stream");
        match self.open("GET", &headers, &[]).await {
            Ok(conn) => self.read_response(conn, stream, Some(headed)).await,
            Err(e) => self.note(stream, format!("GET event stream: {e}")),
        }
    }
}

fn excerpt(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Reads the status line and headers (names in lower case).
async fn read_head(reader: &mut BufReader<TcpStream>) -> Result<(u16, Vec<(String, String)>), HttpError> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Err(HttpError::Malformed("connection closed before the status line".into()));
    }
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| HttpError::Malformed(format!("status line {:?}", line.trim_end())))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Err(HttpError::Malformed("connection closed inside the headers".into()));
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    // 1xx responses are followed by the real one.
    if (100..200).contains(&status) {
        return Box::pin(read_head(reader)).await;
    }
    Ok((status, headers))
}

/// A response body, read piece by piece: Content-Length, chunked, or up to the close.
struct Body {
    reader: BufReader<TcpStream>,
    chunked: bool,
    left: Option<usize>,
    chunk_left: usize,
    done: bool,
}

impl Body {
    async fn next(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if self.chunked {
            if self.chunk_left == 0 {
                let mut line = String::new();
                // The CRLF after the previous chunk, then the size line.
                loop {
                    line.clear();
                    if self.reader.read_line(&mut line).await.ok()? == 0 {
                        self.done = true;
                        return None;
                    }
                    if !line.trim().is_empty() {
                        break;
                    }
                }
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("").trim(), 16).ok()?;
                if size == 0 {
                    self.done = true;
                    return None;
                }
                self.chunk_left = size;
            }
            let mut buf = vec![0u8; self.chunk_left.min(16 * 1024)];
            let n = self.reader.read(&mut buf).await.ok()?;
            if n == 0 {
                self.done = true;
                return None;
            }
            self.chunk_left -= n;
            buf.truncate(n);
            return Some(buf);
        }
        let want = self.left.map_or(16 * 1024, |l| l.min(16 * 1024));
        let mut buf = vec![0u8; want];
        let n = self.reader.read(&mut buf).await.ok()?;
        if n == 0 {
            self.done = true;
            return None;
        }
        if let Some(l) = &mut self.left {
            *l -= n;
            if *l == 0 {
                self.done = true;
            }
        }
        buf.truncate(n);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8080/mcp").unwrap();
        assert_eq!((e.host.as_str(), e.port, e.path.as_str()), ("127.0.0.1", 8080, "/mcp"));
        assert_eq!(e.authority, "127.0.0.1:8080");
        let e = Endpoint::parse("http://[::1]:9/x/y").unwrap();
        assert_eq!((e.host.as_str(), e.port, e.path.as_str()), ("::1", 9, "/x/y"));
        assert_eq!(Endpoint::parse("http://localhost").unwrap().port, 80);
        assert!(Endpoint::parse("https://x:1/").is_err());
        assert!(Endpoint::parse("http://x:no/").is_err());
    }

    /// A server that answers one POST with an event stream in two pieces, and a GET with a
    /// notification: both land in the log, on their own streams, in order.
    #[tokio::test]
    async fn posts_and_event_streams() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = s.read(&mut buf).await.unwrap();
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    if req.starts_with("GET") {
                        assert!(req.contains("Mcp-Session-Id: s1"), "{req}");
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n")
                            .await;
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        return;
                    }
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\ntransfer-encoding: chunked\r\n\r\n";
                    s.write_all(head.as_bytes()).await.unwrap();
                    let e1 = "data: {\"jsonrpc\":\"2.0\",\"method\":\"p\"}\n\n";
                    s.write_all(format!("{:x}\r\n{e1}\r\n", e1.len()).as_bytes()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let e2 = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
                    s.write_all(format!("{:x}\r\n{e2}\r\n0\r\n\r\n", e2.len()).as_bytes()).await.unwrap();
                });
            }
        });
        let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
        h.wait_listening(Instant::now() + Duration::from_secs(2)).await.unwrap();
        h.post(b"{}".to_vec()).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while h.events().len() < 3 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ev = h.events();
        assert_eq!(h.session_id().as_deref(), Some("s1"));
        let post: Vec<&Event> = ev.iter().filter(|e| e.stream() == 1).collect();
        assert_eq!(post.len(), 2, "{ev:?}");
        assert!(matches!(post[0], Event::Message { value, .. } if value["method"] == "p"));
        assert!(matches!(post[1], Event::Message { value, .. } if value["id"] == 1));
        assert!(
            ev.iter().any(|e| matches!(e, Event::Message { stream: 2, value } if value["method"] == "n")),
            "{ev:?}"
        );
    }

    /// JSON bodies (with a length), error statuses with and without a JSON-RPC body, the queued
    /// sender (in order, after the endpoint listens), DELETE, and the automatic answer to a
    /// request from the bridge.
    #[tokio::test]
    async fn json_bodies_statuses_and_the_queue() {
        let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
        // Queued before anything listens: sent once the server is up.
        let watchdog = Instant::now() + Duration::from_secs(5);
        h.send(Outgoing::Post(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#.to_vec()), watchdog);
        h.send(Outgoing::Post(b"{not json".to_vec()), watchdog);
        h.send(Outgoing::Post(br#"{"jsonrpc":"2.0","id":3,"method":"x"}"#.to_vec()), watchdog);
        h.send(Outgoing::Delete, watchdog);
        assert!(!h.listening() && h.pending() == 4);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return; // the listening probe
                    }
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let first = req.lines().next().unwrap_or("").to_owned();
                    let body = req.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
                    log.lock().unwrap().push(format!("{first} {body}"));
                    let reply = if first.starts_with("DELETE") {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned()
                    } else if body.contains("initialize") {
                        let b = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","serverInfo":{}}}"#;
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: abc\r\ncontent-length: {}\r\n\r\n{b}",
                            b.len()
                        )
                    } else if body.starts_with("{not") {
                        let b = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#;
                        format!(
                            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
                            b.len()
                        )
                    } else if first.starts_with("GET") {
                        // The session's stream carries a request from the bridge.
                        let e = "data: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"roots/list\"}\n\n";
                        let _ = s
                            .write_all(
                                format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{e}").as_bytes(),
                            )
                            .await;
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        return;
                    } else if body.contains("\"s1\"") {
                        "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned()
                    } else {
                        "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\noops".to_owned()
                    };
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while (h.pending() > 0 || seen.lock().unwrap().len() < 6) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(h.listening() && h.failure().is_none());
        let seen = seen.lock().unwrap().clone();
        let posts: Vec<&String> = seen.iter().filter(|l| l.starts_with("POST") && !l.contains("s1")).collect();
        assert_eq!(posts.len(), 3, "{seen:?}");
        assert!(
            posts[0].contains("initialize") && posts[1].contains("{not") && posts[2].contains("\"id\":3"),
            "in order: {seen:?}"
        );
        assert!(seen.iter().any(|l| l.starts_with("DELETE")), "{seen:?}");
        assert!(
            seen.iter().any(|l| l.contains("\"id\":\"s1\"") && l.contains("-32601")),
            "roots/list answered: {seen:?}"
        );
        let ev = h.events();
        let has = |f: &dyn Fn(&Event) -> bool| ev.iter().any(f);
        assert!(has(&|e| matches!(e, Event::Message { value, .. } if value["id"] == 1)), "{ev:?}");
        assert!(has(&|e| matches!(e, Event::Message { value, .. } if value["error"]["code"] == -32700)), "{ev:?}");
        assert!(has(&|e| matches!(e, Event::Note { text, .. } if text == "HTTP 400 (application/json)")), "{ev:?}");
        assert!(has(&|e| matches!(e, Event::Note { text, .. } if text == "HTTP 500")), "{ev:?}");
        assert!(has(&|e| matches!(e, Event::Note { text, .. } if text == "body: oops")), "{ev:?}");
        assert!(has(&|e| matches!(e, Event::Note { text, .. } if text == "DELETE: HTTP 404")), "{ev:?}");
        assert_eq!(h.session_id().as_deref(), Some("abc"));
    }

    #[tokio::test]
    async fn the_watchdog_gives_up_on_an_endpoint_that_never_listens() {
        let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
        h.send(Outgoing::Post(b"{}".to_vec()), Instant::now() + Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(700)).await;
        let f = h.failure().expect("the watchdog fired");
        assert!(
            f.starts_with(&format!(
                "start-up watchdog: the bridge did not accept connections at http://127.0.0.1:{port}/mcp within"
            )),
            "{f}"
        );
        assert!(!h.listening());
    }
}
