//! The hot path of Streamable HTTP ([`super::fast`]): a POSTed `tools/call` of an initialized
//! session is answered on an event stream of the bridge's own, not through rmcp's session
//! worker. What the call causes travels on that stream (BR-HTTP-14): its progress, and the
//! sampling and roots requests of the tool process while it is the session's only call in
//! flight, whose answers (POSTed responses) are taken here ([`intercept`]), as is the host's
//! `notifications/cancelled` for such a call. The stream ends with the event that answers the
//! call; its head and a quick answer go out in one write ([`HOLD_FOR_ANSWER`]).

use std::sync::atomic::AtomicUsize;

use http_body_util::BodyExt;
use hyper::body::Bytes;

use super::fast::FastRequest;
use super::{
    Arc, BoxFuture, HOLD_FOR_ANSWER, HashMap, Held, HttpBody, Mutex, Ordering, Release, ReverseError, Session, Value,
    json, m, mpsc, oneshot, to_json,
};

/// The prefix of the ids of our requests on a call's stream (rmcp numbers its own).
const ASK_PREFIX: &str = "protomcp-conform-";

/// Our requests on call streams waiting for the host's answer, by id.
pub(super) type Asks = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, ReverseError>>>>>;

/// One call of the hot path: its event stream and its cancellation.
pub(super) struct HttpCall {
    events: mpsc::UnboundedSender<Bytes>,
    cancel: tokio_util::sync::CancellationToken,
    /// The host's progress token of the call, if it has one.
    token: Option<Value>,
    /// The call's JSON-RPC id (the origin of a sampling or roots request, BR-HTTP-14).
    rid: m::RequestId,
    /// Bytes on `events` not yet handed to the connection.
    queued: Arc<AtomicUsize>,
}

impl HttpCall {
    /// Puts `msg` on the call's stream as one event. A droppable one (progress) is dropped
    /// while the host reads too slowly ([`crate::limits::BRIDGE_HOST_QUEUE`]'s bytes).
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

/// The rest of a hot-path call's response after what came within [`HOLD_FOR_ANSWER`] (sent
/// with the head by [`Held`]): the events as they come; it ends after the answer.
struct Events {
    rx: mpsc::UnboundedReceiver<Bytes>,
    queued: Arc<AtomicUsize>,
}

impl Events {
    /// The body, with the events already on the stream as its first frame.
    fn held(mut rx: mpsc::UnboundedReceiver<Bytes>, queued: Arc<AtomicUsize>) -> Held<Events> {
        let mut first = Vec::new();
        while let Ok(b) = rx.try_recv() {
            queued.fetch_sub(b.len(), Ordering::Relaxed);
            first.extend_from_slice(&b);
        }
        Held::new(first, Events { rx, queued })
    }
}

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.rx.poll_recv(cx).map(|e| {
            e.map(|b| {
                self.queued.fetch_sub(b.len(), Ordering::Relaxed);
                Ok(hyper::body::Frame::data(b))
            })
        })
    }
}

/// The timer the responses of one connection wait on for their answer ([`HOLD_FOR_ANSWER`]).
///
/// Kept from one request to the next and moved forward each time, rather than a new one per
/// request: a new timer nearer than any the runtime knows makes it wake its I/O driver (one
/// more write and one more wake-up per call); a timer moved later does not.
#[derive(Default)]
pub(super) struct Hold(Mutex<Option<std::pin::Pin<Box<tokio::time::Sleep>>>>);

impl Hold {
    /// The timer, due [`HOLD_FOR_ANSWER`] from now.
    fn start(&self) -> std::pin::Pin<Box<tokio::time::Sleep>> {
        let due = tokio::time::Instant::now() + HOLD_FOR_ANSWER;
        match self.0.lock().unwrap().take() {
            Some(mut timer) => {
                timer.as_mut().reset(due);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(due)),
        }
    }

    fn put_back(&self, timer: std::pin::Pin<Box<tokio::time::Sleep>>) {
        *self.0.lock().unwrap() = Some(timer);
    }
}

/// A call the response is not waiting for any more: it goes on in a task of its own when
/// dropped unfinished (past the hold, or when the host went away: a dropped connection is not
/// a cancellation, so the call runs to its end as it would have in a task of its own).
struct Detach(Option<BoxFuture<()>>);

impl Drop for Detach {
    fn drop(&mut self) {
        if let Some(call) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(call);
        }
    }
}

/// Answers `call` of `session` on a stream of its own; `release` frees its id in the gate when
/// the answer goes out (or the call ends unanswered).
pub(super) async fn post(
    session: Arc<Session>,
    call: FastRequest,
    release: Release,
    hold: &Hold,
) -> hyper::Response<HttpBody> {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let cancel = tokio_util::sync::CancellationToken::new();
    let key = call.key();
    let rid = call.rid.clone();
    session.http_calls.lock().unwrap().insert(
        key.clone(),
        HttpCall {
            events: tx.clone(),
            cancel: cancel.clone(),
            token: call.progress.clone(),
            rid,
            queued: queued.clone(),
        },
    );
    let body_queued = queued.clone();
    let call = Box::pin(async move {
        let line = call.run(&session, cancel).await;
        session.http_calls.lock().unwrap().remove(&key);
        // The id is free before the host can read the answer and use it again (BR-MCP-20).
        drop(release);
        if let Some(line) = line {
            if session.trace
                && let Ok(v) = serde_json::from_str::<Value>(&line)
            {
                session.bridge.trace_mcp(false, &v);
            }
            queued.fetch_add(line.len(), Ordering::Relaxed);
            let _ = tx.send(Bytes::from(format!("data: {line}\n\n")));
            // The host's next request answers this one; when the answer comes after the head
            // went out, the service's own `wrote` was too early to stand for it.
            session.bridge.spin.wrote();
        }
    });
    // The call runs here while the head waits (a quick one is answered without a task of its
    // own); one that takes longer than HOLD_FOR_ANSWER goes on in a task, and its stream starts.
    let mut call = Detach(Some(call));
    let mut timer = hold.start();
    if let Some(running) = call.0.as_mut() {
        tokio::select! {
            biased;
            _ = running => call.0 = None,
            _ = timer.as_mut() => {}
        }
    }
    hold.put_back(timer);
    drop(call);
    let body = Events::held(rx, body_queued);
    let mut resp = hyper::Response::new(body.boxed());
    let headers = resp.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
    resp
}

/// Takes what the host POSTs for the hot path: the answer to a request of ours on a call's
/// stream, or `notifications/cancelled` for a call of the hot path (rmcp never saw either's
/// request). True when taken (the POST is then answered 202, BR-HTTP-07).
pub(super) fn intercept(session: &Session, message: &Value) -> bool {
    if let Some(id) = message.get("id").and_then(Value::as_str)
        && id.starts_with(ASK_PREFIX)
        && message.get("method").is_none()
        && let Some(tx) = session.asked.lock().unwrap().remove(id)
    {
        let answer = match (message.get("result"), message.get("error")) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(ReverseError::Host(format!(
                "the host answered with error {}: {}",
                e.get("code").unwrap_or(&Value::Null),
                e.get("message").and_then(Value::as_str).unwrap_or_default()
            ))),
            (None, None) => Err(ReverseError::Host("the host's answer has neither result nor error".into())),
        };
        let _ = tx.send(answer);
        return true;
    }
    if message.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
        && let Some(rid) = message.get("params").and_then(|p| p.get("requestId"))
        && let Some(call) = session.http_calls.lock().unwrap().get(&rid.to_string())
    {
        call.cancel.cancel();
        return true;
    }
    false
}

/// A request of ours about to go on a hot-path call's stream ([`Session::call_stream_asker`]).
pub(super) struct Asker {
    call: HttpCall,
    asked: Asked,
}

/// Forgets a request of ours when its asker goes away unanswered.
struct Asked {
    map: Asks,
    id: String,
}

impl Drop for Asked {
    fn drop(&mut self) {
        self.map.lock().unwrap().remove(&self.id);
    }
}

impl Asker {
    /// Asks the host `method` on the call's stream and waits for its answer (taken by
    /// [`intercept`]).
    pub async fn ask(self, method: &'static str, params: Option<Value>) -> Result<Value, ReverseError> {
        let (tx, rx) = oneshot::channel();
        self.asked.map.lock().unwrap().insert(self.asked.id.clone(), tx);
        let mut msg = json!({"jsonrpc": "2.0", "id": self.asked.id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        if !self.call.send(&msg, false) {
            return Err(ReverseError::Host("the call's event stream has ended".into()));
        }
        let answer = rx.await.unwrap_or_else(|_| Err(ReverseError::Host("the session ended".into())));
        drop(self.asked);
        answer
    }
}

impl Session {
    /// Progress for a hot-path call goes on its stream; false when `token` is no such call's.
    pub(super) fn http_progress(&self, token: &Value, params: &Value) -> bool {
        let calls = self.http_calls.lock().unwrap();
        let Some(call) = calls.values().find(|c| c.token.as_ref() == Some(token)) else { return false };
        let note = json!({"method": "notifications/progress", "params": params});
        if self.trace {
            self.bridge.trace_mcp(false, &note);
        }
        // Written as rmcp writes it on any other stream (its types: progress as a float).
        let msg = match serde_json::from_value::<m::ServerNotification>(note) {
            Ok(n) => to_json(&m::JsonRpcNotification { jsonrpc: m::JsonRpcVersion2_0, notification: n }),
            Err(_) => return true,
        };
        call.send(&msg, true);
        true
    }

    /// When `origin` is a call of the hot path: an asker for a request on its stream
    /// (BR-HTTP-14), under an id of ours.
    pub(super) fn call_stream_asker(&self, origin: Option<&m::RequestId>) -> Option<Asker> {
        let origin = origin?;
        let calls = self.http_calls.lock().unwrap();
        let c = calls.values().find(|c| &c.rid == origin)?;
        let call = HttpCall {
            events: c.events.clone(),
            cancel: c.cancel.clone(),
            token: None,
            rid: origin.clone(),
            queued: c.queued.clone(),
        };
        let id = format!("{ASK_PREFIX}{}", self.asks.fetch_add(1, Ordering::Relaxed));
        Some(Asker { call, asked: Asked { map: self.asked.clone(), id } })
    }
}
