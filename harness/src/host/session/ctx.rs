//! The background side of an [`HttpSession`]: the queued sender, POST and DELETE, and the
//! readers of responses and event streams.

use super::{
    Arc, Arrival, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, AtomicUsize, BufReader, Duration, Endpoint, HttpError,
    HttpSend, Instant, Mutex, Ordering, SETTLE, State, TcpStream, Value, limits, thousands, wait_listening,
};

/// What a background reader needs.
#[derive(Clone)]
pub(super) struct Ctx {
    pub(super) endpoint: Endpoint,
    pub(super) state: Arc<Mutex<State>>,
    pub(super) next_stream: Arc<AtomicUsize>,
}

impl Ctx {
    /// The queued sender of [`HttpSession::send`].
    pub(super) async fn sender(
        self,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<HttpSend>,
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
                HttpSend::Post(body) => {
                    if let Err((stream, e)) = self.post(body, &[], timeout).await {
                        self.note(stream, format!("POST failed: {e}"));
                    }
                }
                HttpSend::PostWith(body, extra) => {
                    if let Err((stream, e)) = self.post(body, &extra, timeout).await {
                        self.note(stream, format!("POST failed: {e}"));
                    }
                }
                HttpSend::Delete => {
                    // The host goes away: the responses of its modern requests close.
                    let modern: Vec<_> = self.state.lock().unwrap().modern.drain(..).collect();
                    for t in modern {
                        t.abort();
                    }
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
    pub(super) async fn post(
        &self,
        body: Vec<u8>,
        extra: &[(String, String)],
        timeout: Duration,
    ) -> Result<usize, (usize, HttpError)> {
        let parsed = serde_json::from_slice::<Value>(&body).ok();
        let modern = parsed.as_ref().and_then(modern_headers);
        let is_modern = modern.is_some();
        let mut headers = match modern {
            // A modern (2026-07-28) request is a POST of its own: no session, its headers say
            // what its body says (spec §26.7).
            Some(h) => h,
            None => self.session_headers("application/json, text/event-stream"),
        };
        headers.push(("Content-Type".into(), "application/json".into()));
        for (name, value) in extra {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            if !value.is_empty() {
                headers.push((name.clone(), value.clone()));
            }
        }
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        if let Some(v) = &parsed
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
        // A legacy request's event stream that ends before its response is resumed (BR-HTTP-33);
        // a modern one is not (BR-HTTP-32: its stream never ends early).
        let resume = if is_modern { None } else { parsed.as_ref().and_then(|v| v.get("id")).cloned() };
        let task = tokio::spawn(async move {
            let last = ctx.clone().read_response(conn, stream, Some(headed_tx)).await;
            if let Some(id) = resume {
                ctx.resume(stream, &id, last).await;
            }
        });
        {
            let mut st = self.state.lock().unwrap();
            if is_modern {
                st.modern.retain(|t| !t.is_finished());
                st.modern.push(task);
            } else {
                st.tasks.push(task);
            }
        }
        let _ = tokio::time::timeout(SETTLE, headed_rx).await;
        Ok(stream)
    }

    /// DELETE with the session id; the status (a note unless 2xx).
    pub(super) async fn delete(&self, timeout: Duration) -> Result<(u16, usize), (usize, HttpError)> {
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
        let mut stream = crate::host::http::connect(addr).await?;
        let mut all: Vec<(&str, &str)> = vec![("Host", &self.endpoint.authority)];
        all.extend(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        // One write: head and body together (see [`crate::host::http::request`]).
        let bytes = crate::host::http::request_bytes(&self.endpoint.authority, method, &self.endpoint.path, &all, body);
        stream.write_all(&bytes).await?;
        Ok(stream)
    }

    fn push(&self, e: Arrival) {
        let mut st = self.state.lock().unwrap();
        if let Arrival::Message { value, .. } = &e
            && let (Some(method), Some(id)) = (value.get("method").and_then(Value::as_str), value.get("id"))
            && !st.manual
        {
            if st.answers >= limits::HTTP_ANSWERS_IN_FLIGHT {
                let text = format!("{method} not answered: {} answers in flight", st.answers);
                let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
                st.events.push(e);
                st.events.push(Arrival::Note { stream, text });
                return;
            }
            st.answers += 1;
            st.tasks.retain(|t| !t.is_finished());
            let reply = if method == "ping" {
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                let code = crate::jsonrpc::ErrorCode::METHOD_NOT_FOUND;
                serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": format!("method not found: {method}")}})
            };
            let ctx = self.clone();
            let method = method.to_owned();
            let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
            st.tasks.push(tokio::spawn(async move {
                let mut headers = ctx.session_headers("application/json, text/event-stream");
                headers.push(("Content-Type".into(), "application/json".into()));
                match ctx.open("POST", &headers, reply.to_string().as_bytes()).await {
                    Ok(conn) => {
                        ctx.clone().read_response(conn, stream, None).await;
                    }
                    Err(e) => ctx.note(stream, format!("POST of the answer to {method} failed: {e}")),
                }
                ctx.state.lock().unwrap().answers -= 1;
            }));
        }
        if let Arrival::Message { value, .. } = &e {
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
        self.push(Arrival::Note { stream, text: text.into() });
    }

    /// Reads one response: status and headers, then the body as JSON or as an event stream.
    /// Whether the response to request `id` arrived on `stream`.
    fn answered(&self, stream: usize, id: &Value) -> bool {
        self.state.lock().unwrap().events.iter().any(|e| {
            matches!(e, Arrival::Message { stream: s, value } if *s == stream && value.get("id") == Some(id)
                && value.get("method").is_none())
        })
    }

    /// A POST's event stream ended before the response to its request `id`, after the SSE
    /// event id `last`: the rest comes on a GET carrying `Last-Event-ID` (2025-11-25 resumption,
    /// BR-HTTP-33), read as the same stream; without an event id the stream cannot be resumed.
    async fn resume(&self, stream: usize, id: &Value, mut last: Option<String>) {
        for _ in 0..limits::HTTP_RESUMPTIONS {
            if self.answered(stream, id) {
                return;
            }
            let Some(event_id) = last.take() else { return };
            self.note(stream, format!("the stream ended before the response: GET with Last-Event-ID: {event_id}"));
            let mut headers = self.session_headers("text/event-stream");
            headers.push(("Last-Event-ID".into(), event_id));
            match self.open("GET", &headers, &[]).await {
                Ok(conn) => last = Box::pin(self.clone().read_response(conn, stream, None)).await,
                Err(e) => return self.note(stream, format!("GET with Last-Event-ID: {e}")),
            }
        }
    }

    /// Reads one response; returns the last SSE event id of an event stream.
    async fn read_response(
        self,
        conn: TcpStream,
        stream: usize,
        headed: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> Option<String> {
        let mut reader = BufReader::new(conn);
        let (status, headers) = match read_head(&mut reader).await {
            Ok(h) => h,
            Err(e) => {
                self.note(stream, format!("no HTTP response: {e}"));
                return None;
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
            return self.read_events(&mut body, stream).await;
        }
        let mut all = Vec::new();
        while let Some(b) = body.next().await {
            if all.len() + b.len() > limits::MESSAGE_BYTES {
                self.overlong(stream, all.len() + b.len(), "a body");
                return None;
            }
            all.extend_from_slice(&b);
        }
        let text = String::from_utf8_lossy(&all);
        if text.trim().is_empty() {
            return None;
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if ctype.starts_with("application/json") || status >= 400 => {
                self.push(Arrival::Message { stream, value: v })
            }
            _ => self.note(stream, format!("body: {}", excerpt(&text))),
        }
        None
    }

    /// Parses an event stream: `data:` lines up to a blank line form one event, a line starting
    /// with `:` is a comment ([`Arrival::Comment`]); returns the last event id (`id:`) it carried.
    async fn read_events(&self, body: &mut Body, stream: usize) -> Option<String> {
        let mut last_id = None;
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
                } else if let Some(c) = line.strip_prefix(':') {
                    let text = excerpt(c.strip_prefix(' ').unwrap_or(c));
                    self.push(Arrival::Comment { stream, text });
                } else if let Some(id) = line.strip_prefix("id:") {
                    last_id = Some(id.strip_prefix(' ').unwrap_or(id).to_owned());
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
        last_id
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
            Ok(v) => self.push(Arrival::Message { stream, value: v }),
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
            Ok(conn) => {
                self.read_response(conn, stream, Some(headed)).await;
            }
            Err(e) => self.note(stream, format!("GET event stream: {e}")),
        }
    }
}

/// The headers of a modern request's POST (spec §26.7, BR-HTTP-28): `MCP-Protocol-Version`
/// from its `_meta`, `Mcp-Method`, and `Mcp-Name` for `tools/call`, `prompts/get` (the name)
/// and `resources/read` (the URI); `None` for a legacy message.
pub(crate) fn modern_headers(v: &Value) -> Option<Vec<(String, String)>> {
    let method = v.get("method")?.as_str()?;
    let params = v.get("params");
    if !protomcp_proto::mcp_input::is_modern(method, params) {
        return None;
    }
    let mut h = vec![("Accept".to_owned(), "application/json, text/event-stream".to_owned())];
    let meta = params.and_then(|p| p.get("_meta"));
    let version = meta.and_then(|m| m.get(protomcp_proto::mcp_input::META_VERSION)).and_then(Value::as_str);
    h.push(("MCP-Protocol-Version".into(), version.unwrap_or("2026-07-28").to_owned()));
    h.push(("Mcp-Method".into(), method.to_owned()));
    let name = match method {
        "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
        "resources/read" => params.and_then(|p| p.get("uri")),
        _ => None,
    };
    if let Some(n) = name.and_then(Value::as_str) {
        h.push(("Mcp-Name".into(), n.to_owned()));
    }
    Some(h)
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
