//! MCP's Streamable HTTP transport, by hand on hyper: the guard, sessions by `Mcp-Session-Id`,
//! POSTs into the session's core, a response stream per request (what the request causes travels
//! on it, BR-HTTP-14, and its answer ends it), the session's GET stream for the rest, DELETE and
//! the idle end (BR-HTTP-26).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use protomcp_proto::fault::{self, Fault};
use protomcp_proto::host_core::msg::{Message, Request, Response};
use protomcp_proto::host_core::{Intake, Route, Transmit, modern};
use protomcp_proto::jsonrpc::RequestId;
use protomcp_proto::mcp_input::{MAX_POST_BODY, post_status};
use serde_json::Value;
use tokio::sync::mpsc;

use super::session::McpSession;
use crate::Bridge;
use crate::error::ServeError;

type HttpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// How long the head of a request's event stream waits for the answer, so that a quick call
/// goes out in one write (head, answer, end of the body) instead of two.
const HOLD_FOR_ANSWER: Duration = Duration::from_millis(2);

/// How long an orderly shutdown waits for the open modern responses to end with their complete
/// results (BR-STATELESS-33).
const SHUTDOWN_DRAIN: Duration = Duration::from_millis(500);

/// One event stream of a session: a request's or the GET's.
struct Stream {
    events: mpsc::UnboundedSender<Bytes>,
    /// Bytes on `events` not yet handed to the connection.
    queued: Arc<AtomicUsize>,
}

impl Stream {
    fn new() -> (Stream, Events) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        (Stream { events: tx, queued: queued.clone() }, Events { rx, queued, pump: None })
    }

    /// Puts `msg` on the stream as one event. A droppable one (a notification) is dropped while
    /// the host reads too slowly ([`crate::limits::BRIDGE_HOST_QUEUE`]'s bytes).
    fn send(&self, msg: &Value, droppable: bool) -> bool {
        let event = Bytes::from(format!("data: {msg}\n\n"));
        let bound = crate::limits::BRIDGE_HOST_QUEUE.head_bytes + crate::limits::BRIDGE_HOST_QUEUE.tail_bytes;
        if droppable && self.queued.load(Ordering::Relaxed) + event.len() > bound {
            return true;
        }
        self.queued.fetch_add(event.len(), Ordering::Relaxed);
        self.events.send(event).is_ok()
    }
}

/// Where a session's messages go.
#[derive(Default)]
struct Streams {
    /// The open POSTs' streams, by the id of their request.
    requests: HashMap<RequestId, Stream>,
    get: Option<Stream>,
    /// Messages for the GET stream before it opened, and their bytes (bounded like a stream).
    early: VecDeque<Value>,
    early_bytes: usize,
    /// The streams of a modern request's own session.
    modern: bool,
}

/// One session over HTTP.
struct HttpSession {
    session: Arc<McpSession>,
    streams: Mutex<Streams>,
    last_seen: Mutex<Instant>,
}

/// The sessions by `Mcp-Session-Id`.
#[derive(Default)]
struct Registry {
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// `--auth` is in force (BR-STATELESS-14).
    authenticated: bool,
    /// The one session every modern request shares (br.http.modern-shared-session only).
    shared_modern: Mutex<Option<Arc<HttpSession>>>,
    /// The version the latest initialize asked for (br.http.version-bridge-wide only).
    negotiated: Mutex<Option<String>>,
    /// The sessions of modern requests whose response is still open (a listen subscription's
    /// above all), for the orderly shutdown (BR-STATELESS-33).
    modern: Mutex<Vec<std::sync::Weak<HttpSession>>>,
}

impl Registry {
    fn get(&self, id: &str) -> Option<Arc<HttpSession>> {
        self.sessions.lock().unwrap().get(id).cloned()
    }

    /// Ends session `id` (DELETE, idle): its calls in flight are cancelled (BR-CANCEL-06), its
    /// streams end.
    fn end(&self, id: &str) -> bool {
        let Some(s) = self.sessions.lock().unwrap().remove(id) else { return false };
        s.session.end();
        *s.streams.lock().unwrap() = Streams::default();
        true
    }
}

/// Accepts the next connection of the HTTP endpoint, with `TCP_NODELAY` set: a response goes
/// out as a few small writes, and with Nagle's algorithm each after the first would wait for
/// the client's delayed acknowledgement.
pub async fn accept(listener: &tokio::net::TcpListener) -> std::io::Result<tokio::net::TcpStream> {
    let (stream, _) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Serves MCP's Streamable HTTP transport on `listener`, behind `guard` (Host, Origin,
/// credentials), until `stop` resolves. Sessions without a request for `idle` end.
pub async fn serve_http(
    bridge: Arc<Bridge>,
    listener: tokio::net::TcpListener,
    guard: crate::http::Guard,
    idle: Duration,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    let registry = Arc::new(Registry { authenticated: !guard.auth.is_empty(), ..Registry::default() });
    let guard = Arc::new(guard);
    let sweeper = tokio::spawn(sweep(registry.clone(), idle));
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            a = accept(&listener) => match a {
                Ok(s) => s,
                Err(e) => {
                    crate::diag(&format!("accept failed: {e}"));
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let (guard, registry, bridge) = (guard.clone(), registry.clone(), bridge.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (guard, registry, bridge) = (guard.clone(), registry.clone(), bridge.clone());
                async move {
                    bridge.spin.arrived();
                    let r = answer(req, &guard, &registry, &bridge).await;
                    bridge.spin.wrote();
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
        });
    }
    sweeper.abort();
    // BR-STATELESS-33: each open modern response (a listen subscription's stream) gets its
    // complete result and ends, before the process does (bounded by SHUTDOWN_DRAIN).
    let open: Vec<Arc<HttpSession>> = registry.modern.lock().unwrap().drain(..).filter_map(|w| w.upgrade()).collect();
    let open: Vec<Arc<HttpSession>> = open.into_iter().filter(|s| s.session.shutdown()).collect();
    let _ = tokio::time::timeout(SHUTDOWN_DRAIN, async {
        for s in &open {
            s.session.ended.cancelled().await;
        }
    })
    .await;
    let ids: Vec<String> = registry.sessions.lock().unwrap().keys().cloned().collect();
    for id in ids {
        registry.end(&id);
    }
    Ok(())
}

/// Ends the sessions idle for `idle` (BR-HTTP-26).
async fn sweep(registry: Arc<Registry>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        tokio::time::sleep(every).await;
        let stale: Vec<String> = {
            let sessions = registry.sessions.lock().unwrap();
            sessions
                .iter()
                .filter(|(_, s)| s.last_seen.lock().unwrap().elapsed() >= idle)
                .map(|(k, _)| k.clone())
                .collect()
        };
        for id in stale {
            registry.end(&id);
        }
    }
}

fn plain(status: u16, text: &str) -> hyper::Response<HttpBody> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    resp
}

fn json_response(status: u16, v: &Value) -> hyper::Response<HttpBody> {
    let mut resp = plain(status, &v.to_string());
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp
}

/// The answer to one HTTP request.
async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    guard: &crate::http::Guard,
    registry: &Arc<Registry>,
    bridge: &Arc<Bridge>,
) -> hyper::Response<HttpBody> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let refusal = guard.check(
        req.method().as_str(),
        req.uri().path(),
        header("host"),
        header("origin"),
        crate::http::Credentials { authorization: header("authorization"), api_key: header("x-api-key") },
    );
    // A session id looked up before the credentials (br.http.session-replaces-auth).
    let refusal = refusal.filter(|r| {
        !(fault::on(Fault::BrHttpSessionReplacesAuth)
            && r.status == 401
            && header("mcp-session-id").is_some_and(|id| registry.get(id).is_some()))
    });
    if let Some(r) = refusal {
        let mut resp = plain(r.status, r.reason);
        if r.challenge && !fault::on(Fault::BrHttpNoChallenge) {
            resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
        }
        if r.status == 405 && !fault::on(Fault::BrHttpNoAllow) {
            resp.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET, POST, DELETE"));
        }
        return resp;
    }
    // BR-HTTP-15, for legacy messages: a modern POST's version is judged by its body's checks
    // (BR-HTTP-28, then -32022 with the supported versions, BR-STATELESS-05).
    if let Some(v) = header("mcp-protocol-version")
        && !modern::SUPPORTED_VERSIONS.contains(&v)
        && *req.method() != http::Method::POST
        && !fault::on(Fault::BrHttpVersionHeaderIgnored)
    {
        return plain(400, &format!("Bad Request: unsupported MCP-Protocol-Version {v}"));
    }
    let session = header("mcp-session-id").map(str::to_owned);
    match *req.method() {
        http::Method::POST => post(req, session, registry, bridge).await,
        http::Method::GET => get(header("accept"), session.as_deref(), registry),
        http::Method::DELETE => match session {
            None => plain(400, "Bad Request: Mcp-Session-Id header is required"),
            Some(id) if fault::on(Fault::BrHttpDeleteKeepsSession) && registry.get(&id).is_some() => plain(200, ""),
            Some(id) if registry.end(&id) => plain(200, ""),
            // BR-HTTP-12: an ended or unknown session is gone.
            Some(_) => plain(404, "Not Found: Session not found"),
        },
        _ => plain(405, "Method Not Allowed"),
    }
}

/// GET: the session's event stream for messages not tied to a request (BR-HTTP-13).
fn get(accept: Option<&str>, session: Option<&str>, registry: &Registry) -> hyper::Response<HttpBody> {
    if !accept.is_some_and(|a| a.contains("text/event-stream") || a.contains("*/*")) {
        return plain(406, "Not Acceptable: the GET stream is text/event-stream");
    }
    let Some(id) = session else { return plain(400, "Bad Request: Mcp-Session-Id header is required") };
    let Some(s) = registry.get(id) else { return plain(404, "Not Found: Session not found") };
    let events = {
        let mut streams = s.streams.lock().unwrap();
        if streams.get.as_ref().is_some_and(|g| !g.events.is_closed()) {
            return plain(409, "Conflict: the session's GET stream is open already");
        }
        let (stream, events) = Stream::new();
        for v in streams.early.drain(..) {
            stream.send(&v, false);
        }
        streams.early_bytes = 0;
        streams.get = Some(stream);
        events
    };
    s.session.wake.notify_one();
    event_stream(Held::new(Vec::new(), events))
}

fn event_stream<B>(body: B) -> hyper::Response<HttpBody>
where
    B: hyper::body::Body<Data = Bytes, Error = std::convert::Infallible> + Send + Sync + Unpin + 'static,
{
    let mut resp = hyper::Response::new(body.boxed());
    let headers = resp.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
    resp
}

/// A new session for an initialize POST, its router started; `None` when the body is not one.
fn open_session(registry: &Arc<Registry>, bridge: &Arc<Bridge>, body: &Value) -> Option<(String, Arc<HttpSession>)> {
    if body.get("method").and_then(Value::as_str) != Some("initialize") || body.get("id").is_none() {
        return None;
    }
    if fault::on(Fault::BrHttpVersionBridgeWide) {
        let asked = body.pointer("/params/protocolVersion").and_then(Value::as_str).map(str::to_owned);
        *registry.negotiated.lock().unwrap() = asked;
    }
    let id = session_id();
    let s = Arc::new(HttpSession {
        session: McpSession::new(bridge.clone(), registry.authenticated, true),
        streams: Mutex::default(),
        last_seen: Mutex::new(Instant::now()),
    });
    registry.sessions.lock().unwrap().insert(id.clone(), s.clone());
    tokio::spawn(route(s.clone()));
    Some((id, s))
}

/// The request a POST body is when it is a modern one (MCP 2026-07-28, BR-STATELESS-02).
fn modern_request_of(v: &Value) -> Option<Request> {
    match Message::from_value(v) {
        Ok(Message::Request(r)) if protomcp_proto::mcp_input::is_modern(&r.method, r.params.as_ref()) => Some(r),
        _ => None,
    }
}

/// A session of its own for one modern request, not registered under any id; the registry
/// keeps a weak reference for the orderly shutdown (BR-STATELESS-33). It has no router task:
/// its request's response routes it ([`Pump`]), since nothing else can read it.
fn new_session(bridge: &Arc<Bridge>, registry: &Registry) -> Arc<HttpSession> {
    let s = Arc::new(HttpSession {
        session: McpSession::new(bridge.clone(), registry.authenticated, true),
        streams: Mutex::new(Streams { modern: true, ..Streams::default() }),
        last_seen: Mutex::new(Instant::now()),
    });
    let mut modern = registry.modern.lock().unwrap();
    modern.retain(|w| w.strong_count() > 0);
    modern.push(Arc::downgrade(&s));
    s
}

/// Ends a modern request's session when its response goes away (answered, or the host left).
struct EndOnDrop(Arc<McpSession>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A session id: 128 random bits as hex (BR-HTTP-10).
fn session_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_err() {
        // No /dev/urandom: the clock and a counter, distinct per session all the same.
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        bytes[..8].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
        bytes[8..].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    let bits = if fault::on(Fault::BrHttpSessionId64Bits) { &bytes[..8] } else { &bytes[..] };
    bits.iter().map(|b| format!("{b:02x}")).collect()
}

/// POST: one JSON-RPC message into the session's core.
async fn post(
    req: hyper::Request<hyper::body::Incoming>,
    session: Option<String>,
    registry: &Arc<Registry>,
    bridge: &Arc<Bridge>,
) -> hyper::Response<HttpBody> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    // BR-HTTP-08: application/json, with or without parameters.
    let json = header("content-type")
        .is_some_and(|c| c.get(..16).is_some_and(|prefix| prefix.eq_ignore_ascii_case("application/json")))
        && !(fault::on(Fault::BrHttpCharsetRefused) && header("content-type") != Some("application/json"));
    if !json {
        return plain(415, "Unsupported Media Type: the body must be application/json");
    }
    let accept = header("accept").map(str::to_owned);
    let accepts = |t: &str| {
        if fault::on(Fault::BrHttpAcceptParamsRefused) {
            // Each listed type compared whole, parameters and all.
            return accept.as_deref().is_none_or(|a| a.split(',').map(str::trim).any(|m| m == t || m == "*/*"));
        }
        accept.as_deref().is_none_or(|a| a.contains(t) || a.contains("*/*"))
    };
    if !accepts("application/json") && !accepts("text/event-stream") {
        return plain(406, "Not Acceptable: application/json or text/event-stream");
    }
    let sse = accepts("text/event-stream") || fault::on(Fault::BrHttpSseIgnoresAccept);
    let headers = req.headers().clone();
    let bytes = match Limited::new(req.into_body(), MAX_POST_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => return plain(413, &format!("cannot read the body: {e}")),
    };
    let parsed = serde_json::from_slice::<Value>(&bytes).ok();
    let modern_request = parsed.as_ref().and_then(modern_request_of);
    // BR-HTTP-36: a listen subscription's stream is kept open by comments.
    let keepalive = modern_request.as_ref().and_then(|r| modern::keepalive(&r.method));
    // BR-HTTP-15 (legacy messages).
    if modern_request.is_none()
        && let Some(v) = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok())
        && !modern::SUPPORTED_VERSIONS.contains(&v)
        && !fault::on(Fault::BrHttpVersionHeaderIgnored)
    {
        return plain(400, &format!("Bad Request: unsupported MCP-Protocol-Version {v}"));
    }
    if modern_request.is_some()
        && fault::on(Fault::BrHttpModernSessionChecked)
        && session.as_deref().is_some_and(|id| registry.get(id).is_none())
    {
        return plain(404, "Not Found: Session not found");
    }
    // br.http.version-bridge-wide: the header is held against the version negotiated last, in
    // whichever session.
    if fault::on(Fault::BrHttpVersionBridgeWide)
        && modern_request.is_none()
        && let Some(v) = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok())
        && registry.negotiated.lock().unwrap().as_deref().is_some_and(|n| n != v)
    {
        return plain(400, &format!("Bad Request: unsupported MCP-Protocol-Version {v}"));
    }
    // br.http.ids-bridge-wide: a request id in flight in any session counts as a duplicate.
    if fault::on(Fault::BrHttpIdsBridgeWide)
        && modern_request.is_none()
        && let Some(v) = parsed.as_ref().filter(|v| v.get("method").is_some())
        && let Some(id) = v.get("id").and_then(RequestId::of)
        && registry.sessions.lock().unwrap().values().any(|o| o.streams.lock().unwrap().requests.contains_key(&id))
    {
        let e = serde_json::json!({"jsonrpc": "2.0", "id": id.to_value(), "error": {"code": -32600, "message": "duplicate request id"}});
        return json_response(200, &e);
    }
    // br.http.modern-echoes-session: the request's Mcp-Session-Id is echoed on every response.
    let echoed = session.clone().filter(|_| fault::on(Fault::BrHttpModernEchoesSession));
    let (key, s, ephemeral) = match (modern_request, session) {
        // BR-HTTP-27: a modern request is served on its own, Mcp-Session-Id or not.
        (Some(r), _) => {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            // BR-HTTP-30: the Mcp-Param-* headers the tool's input schema asks for, checked
            // against the definition modern tools/list shows (the called tool's alone: building
            // the whole list per call cost more than the rest of the checks).
            let called = (r.method == "tools/call").then(|| r.param("name").and_then(Value::as_str)).flatten();
            let tool = called.and_then(|name| bridge.tool_modern(name));
            let checked = modern::check_headers(&r, header)
                .and_then(|()| modern::check(&r).map(|_| ()))
                .and_then(|()| modern::check_param_headers(&r, tool.as_slice(), header));
            if let Err(e) = checked {
                if bridge.tracing() {
                    bridge.trace_mcp(true, parsed.as_ref().unwrap_or(&Value::Null));
                }
                let status = modern::http_status(&e);
                return json_response(
                    status,
                    &Message::Response(Response { id: Some(r.id), outcome: Err(e) }).to_value(),
                );
            }
            if fault::on(Fault::BrHttpModernSharedSession) {
                // Shared, so no one response pumps it: it gets a router task as a legacy one.
                let mut shared = registry.shared_modern.lock().unwrap();
                let s = shared
                    .get_or_insert_with(|| {
                        let s = new_session(bridge, registry);
                        tokio::spawn(route(s.clone()));
                        s
                    })
                    .clone();
                (None, s, false)
            } else {
                (None, new_session(bridge, registry), true)
            }
        }
        (None, Some(id)) => match registry.get(&id) {
            Some(s) => (None, s, false),
            None if fault::on(Fault::BrHttpUnknownSession400) => return plain(400, "Bad Request: unknown session"),
            None => return plain(404, "Not Found: Session not found"),
        },
        // BR-HTTP-34: a notification without a session has no effect.
        (None, None)
            if !fault::on(Fault::BrHttpSessionlessNotification400)
                && parsed.as_ref().is_some_and(|v| v.get("method").is_some() && v.get("id").is_none()) =>
        {
            return plain(202, "");
        }
        (None, None) => match parsed.as_ref().and_then(|v| open_session(registry, bridge, v)) {
            Some((id, s)) => (Some(id), s, false),
            None if fault::on(Fault::BrHttpMissingSession404) => return plain(404, "Not Found: Session not found"),
            None => return plain(400, "Bad Request: Mcp-Session-Id header is required"),
        },
    };
    *s.last_seen.lock().unwrap() = Instant::now();
    if bridge.tracing() {
        match &parsed {
            Some(v) => bridge.trace_mcp(true, v),
            None => bridge.trace_host_line(true, &String::from_utf8_lossy(&bytes)),
        }
    }
    let (intake, events) = {
        // The request's stream is there before its answer can be routed.
        let mut streams = s.streams.lock().unwrap();
        // A cancellation of a request in flight (BR-CANCEL-02: it gets no response).
        let cancels = parsed
            .as_ref()
            .filter(|v| v.get("method").and_then(Value::as_str) == Some("notifications/cancelled"))
            .and_then(|v| v.pointer("/params/requestId"))
            .and_then(RequestId::of);
        let (intake, cancelled) = s.session.with(|c, now| {
            let was_pending = cancels.as_ref().is_some_and(|id| c.is_pending(id));
            let intake = match &parsed {
                Some(v) => c.handle_value(now, v),
                None => c.handle_bytes(now, &bytes).0,
            };
            (intake, cancels.filter(|id| was_pending && !c.is_pending(id)))
        });
        // Its POST's stream ends now instead of staying open for an answer that never comes
        // (an open connection per cancelled call otherwise).
        if let Some(id) = cancelled {
            streams.requests.remove(&id);
        }
        let events = match &intake {
            Intake::Request(id) => {
                let (stream, events) = Stream::new();
                streams.requests.insert(id.clone(), stream);
                Some(events)
            }
            _ => None,
        };
        (intake, events)
    };
    // A modern request's session lives as long as its response: a host that goes away cancels
    // what it asked (BR-CANCEL-08, BR-STATELESS-32).
    let ends = (ephemeral && !protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrCancelHttpCloseIgnored))
        .then(|| EndOnDrop(s.session.clone()));
    let events = events.map(|mut e| {
        if ephemeral {
            e.pump = Some(Pump::new(s.clone()));
        }
        e
    });
    let mut resp = match (intake, events) {
        (Intake::Request(_), Some(events)) if sse => {
            let mut held = Held::gather(events).await;
            held.ends = ends;
            held.keepalive = keepalive.map(|every| (every, Box::pin(tokio::time::sleep(every))));
            event_stream(held)
        }
        (Intake::Request(_), Some(events)) => json_answer(events).await,
        (Intake::Refused(v), _) => {
            let status = post_status(&protomcp_proto::mcp_input::Admission::Answer(v.clone())).unwrap_or(200);
            json_response(status, &v)
        }
        // BR-HTTP-07: nothing to answer.
        _ if fault::on(Fault::BrHttpNotification200) => plain(200, ""),
        _ => plain(202, ""),
    };
    if let Some(id) = key.or(echoed)
        && let Ok(v) = http::HeaderValue::from_str(&id)
    {
        resp.headers_mut().insert("mcp-session-id", v);
    }
    resp
}

/// The answer of a request whose host reads JSON only: the response alone, as JSON.
async fn json_answer(mut events: Events) -> hyper::Response<HttpBody> {
    let mut last = None;
    while let Some(e) = events.next().await {
        last = Some(e);
    }
    let text = last.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
    let data = text.trim().strip_prefix("data: ").unwrap_or_default();
    match serde_json::from_str::<Value>(data) {
        Ok(v) => json_response(200, &v),
        Err(_) => plain(500, "the request ended without an answer"),
    }
}

/// The router of one session: the core's messages onto its streams.
async fn route(s: Arc<HttpSession>) {
    let bridge = s.session.bridge.clone();
    loop {
        let woken = s.session.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let batch = s.session.take(64);
        if batch.is_empty() {
            if s.session.ended.is_cancelled() {
                return;
            }
            woken.await;
            continue;
        }
        deliver_batch(&s, &bridge, batch);
    }
}

/// A batch of the core's messages onto the session's streams.
fn deliver_batch(s: &HttpSession, bridge: &Bridge, batch: Vec<Transmit>) {
    let mut streams = s.streams.lock().unwrap();
    for t in batch {
        let v = t.message.to_value();
        if bridge.tracing() {
            bridge.trace_mcp(false, &v);
        }
        deliver(&mut streams, t, &v);
    }
}

/// The router of a modern request's own session, run by its response whenever the response is
/// polled ([`Events::poll_next`]): what [`route`] does for a session, without a task of its own
/// (a task per request cost a spawn and two more wake-ups per call).
struct Pump {
    s: Arc<HttpSession>,
    /// Woken when messages wait in the session's core.
    woken: std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>,
}

impl Pump {
    fn new(s: Arc<HttpSession>) -> Pump {
        let woken = Box::pin(s.session.wake.clone().notified_owned());
        Pump { s, woken }
    }

    /// Delivers what waits in the core; registers `cx` to be woken when more does.
    fn pump(&mut self, cx: &mut std::task::Context<'_>) {
        loop {
            let batch = self.s.session.take(64);
            if !batch.is_empty() {
                deliver_batch(&self.s, &self.s.session.bridge, batch);
                continue;
            }
            // `notify_one` leaves a permit when nobody waits: a message queued after the take
            // makes this ready.
            if self.woken.as_mut().poll(cx).is_pending() {
                return;
            }
            self.woken = Box::pin(self.s.session.wake.clone().notified_owned());
        }
    }
}

/// One message onto the stream its route names: a response ends its request's stream; what a
/// request causes goes on its stream while it is open, else on the session's.
fn deliver(streams: &mut Streams, t: Transmit, v: &Value) {
    let droppable = matches!(t.message, protomcp_proto::host_core::msg::Message::Notification(_));
    match t.route {
        Route::Answer(id) => {
            if let Some(stream) = streams.requests.remove(&id) {
                stream.send(v, false);
                return;
            }
        }
        Route::Cause(id) => {
            if let Some(stream) = streams.requests.get(&id).filter(|_| !fault::on(Fault::BrHttpCauseOnGet)) {
                stream.send(v, droppable);
                let cut = if streams.modern { Fault::BrHttpModernStreamCut } else { Fault::BrHttpLegacyStreamCut };
                if fault::on(cut) {
                    // The stream ends after what the request caused, before its answer.
                    streams.requests.remove(&id);
                }
                return;
            }
        }
        Route::Session => {}
    }
    match &streams.get {
        Some(g) if !g.events.is_closed() && !fault::on(Fault::BrHttpGetStreamStarved) => {
            g.send(v, droppable);
        }
        _ => {
            // No GET stream (yet): kept for it, bounded in items and bytes; the oldest goes first.
            let b = crate::limits::BRIDGE_HOST_QUEUE;
            streams.early_bytes += crate::bounded::value_size(v);
            streams.early.push_back(v.clone());
            while streams.early.len() > b.head_items || streams.early_bytes > b.head_bytes {
                let Some(old) = streams.early.pop_front() else { break };
                streams.early_bytes -= crate::bounded::value_size(&old);
            }
        }
    }
}

/// A stream's events as the body of its response; it ends when the stream's sender is gone
/// (after the answer, or with the session).
struct Events {
    rx: mpsc::UnboundedReceiver<Bytes>,
    queued: Arc<AtomicUsize>,
    /// A modern request's session, routed by this stream.
    pump: Option<Pump>,
}

impl Events {
    /// The next event; `None` when the stream ended.
    fn poll_next(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Bytes>> {
        if let Some(p) = self.pump.as_mut() {
            p.pump(cx);
        }
        self.rx.poll_recv(cx).map(|e| {
            e.inspect(|b| {
                self.queued.fetch_sub(b.len(), Ordering::Relaxed);
            })
        })
    }

    async fn next(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }
}

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.poll_next(cx).map(|e| e.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

/// An event stream whose first events, those that came within [`HOLD_FOR_ANSWER`] (up to the
/// answer), go out as one frame with the head; then the rest as it comes.
struct Held {
    first: Option<Bytes>,
    rest: Events,
    /// The stream ended within the hold.
    done: bool,
    /// A modern request's session, ended with the body.
    ends: Option<EndOnDrop>,
    /// How long the stream may stay without an event before a comment keeps it open, and the
    /// timer (BR-HTTP-36).
    keepalive: Option<(Duration, std::pin::Pin<Box<tokio::time::Sleep>>)>,
}

impl Held {
    fn new(first: Vec<u8>, rest: Events) -> Held {
        Held { first: (!first.is_empty()).then(|| first.into()), rest, done: false, ends: None, keepalive: None }
    }

    async fn gather(mut rest: Events) -> Held {
        let mut first = Vec::new();
        let deadline = tokio::time::sleep(HOLD_FOR_ANSWER);
        tokio::pin!(deadline);
        let mut done = false;
        loop {
            tokio::select! {
                e = rest.next() => match e {
                    Some(b) => first.extend_from_slice(&b),
                    None => {
                        done = true;
                        break;
                    }
                },
                _ = &mut deadline => break,
            }
        }
        Held { done, ..Held::new(first, rest) }
    }
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if let Some(first) = self.first.take() {
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(first))));
        }
        if self.done {
            return std::task::Poll::Ready(None);
        }
        let polled = std::pin::Pin::new(&mut self.rest).poll_frame(cx);
        let Some((every, timer)) = self.keepalive.as_mut() else { return polled };
        if polled.is_ready() {
            let at = tokio::time::Instant::now() + *every;
            timer.as_mut().reset(at);
            return polled;
        }
        if timer.as_mut().poll(cx).is_ready() {
            let at = tokio::time::Instant::now() + *every;
            timer.as_mut().reset(at);
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(b": keep-alive\n\n")))));
        }
        std::task::Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BR-HTTP-36: a quiet listen stream gets a comment each interval; an event restarts it.
    #[tokio::test]
    async fn a_quiet_kept_alive_stream_gets_comments() {
        let (stream, events) = Stream::new();
        let every = Duration::from_millis(40);
        let mut held = Held::new(Vec::new(), events);
        held.keepalive = Some((every, Box::pin(tokio::time::sleep(every))));
        let started = Instant::now();
        let frame = held.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&frame[..], b": keep-alive\n\n");
        assert!(started.elapsed() >= every);
        stream.send(&serde_json::json!({"jsonrpc": "2.0", "method": "x"}), false);
        let frame = held.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(frame.starts_with(b"data: "));
        let frame = held.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&frame[..], b": keep-alive\n\n");
    }
}
