//! One MCP session as the core sees it: its notifications to the host, and its requests to
//! the host (sampling, roots).

use super::{
    Arc, AtomicU64, AtomicUsize, BoxFuture, Bridge, ErrorData, HashMap, HashSet, HostSession, ListKind, Mutex, Note,
    OnceLock, Ordering, Out, Peer, Popped, ReverseError, RoleServer, SESSION_IDS, Session, SessionId, Value, json, m,
    mpsc, oneshot, state, to_json,
};

impl crate::notes::Queued for Note {
    fn droppable(&self) -> bool {
        matches!(self, Note::Log(_) | Note::Progress(_) | Note::ResourceUpdated(_))
    }

    fn size(&self) -> usize {
        match self {
            Note::Log(v) | Note::Progress(v) => crate::bounded::value_size(v),
            Note::ResourceUpdated(uri) => 32 + uri.len(),
            Note::ListChanged(_) | Note::Flush(_) => 32,
        }
    }

    fn same(&self, other: &Self) -> bool {
        matches!((self, other), (Note::ListChanged(a), Note::ListChanged(b)) if a == b)
    }
}

impl Session {
    pub(super) fn new(bridge: Arc<Bridge>, trace: bool) -> Arc<Session> {
        Arc::new(Session {
            id: SESSION_IDS.fetch_add(1, Ordering::Relaxed),
            peer: OnceLock::new(),
            notes: Arc::new(crate::notes::Queue::new(crate::limits::BRIDGE_HOST_QUEUE)),
            threshold: Arc::new(AtomicUsize::new(0)),
            subscriptions: Mutex::new(HashSet::new()),
            bridge,
            trace,
            ended: tokio_util::sync::CancellationToken::new(),
            ready: tokio_util::sync::CancellationToken::new(),
            calls: Mutex::new(Vec::new()),
            lines: OnceLock::new(),
            http_calls: Mutex::new(HashMap::new()),
            asked: Arc::default(),
            asks: AtomicU64::new(0),
        })
    }

    /// The one tools/call of this session in flight, if there is exactly one: the call that
    /// caused a sampling or roots request of the tool process (the core sends those only to the
    /// session with calls in flight). Over HTTP such a request then travels on that call's
    /// response stream (BR-HTTP-14); with several calls in flight the cause is unknown and it
    /// goes on the session's GET stream.
    fn sole_call(&self) -> Option<m::RequestId> {
        let calls = self.calls.lock().unwrap();
        (calls.len() == 1).then(|| calls[0].clone())
    }

    /// Ends the session: its calls in flight are cancelled (BR-CANCEL-06).
    pub(super) fn end(&self) {
        self.ended.cancel();
    }

    /// Binds the session to its peer and starts the task that sends its notifications in order.
    /// `list_changed` waits for notifications/initialized ([`Session::ready`]): a change between
    /// initialize and initialized is announced right after it, never before, and never lost.
    pub(super) fn attach(&self, peer: Peer<RoleServer>) {
        if self.peer.set(peer.clone()).is_err() {
            return;
        }
        let rx = self.notes.clone();
        let threshold = self.threshold.clone();
        let bridge = self.bridge.clone();
        let trace = self.trace;
        let ready = self.ready.clone();
        let lines = self.lines.get().cloned();
        tokio::spawn(async move {
            let mut held: Vec<ListKind> = Vec::new();
            loop {
                let note = tokio::select! {
                    note = rx.recv() => match note {
                        None => break,
                        // The host reads slower than the tool process sends (the queue's bound):
                        // it learns how many notifications it missed, where it missed them.
                        Some(Popped::Dropped(n)) => {
                            let n = crate::bounded::thousands(n);
                            let why = "the host reads slower than the tool process sends";
                            crate::diag(&format!("dropped {n} notifications for a host session: {why}"));
                            if state::level_rank("warning") < threshold.load(Ordering::Relaxed) {
                                continue;
                            }
                            let text = format!("… {n} notifications dropped: {why} …");
                            let p = json!({"level": "warning", "logger": "protomcp-conform bridge", "data": text});
                            vec![Note::Log(p)]
                        }
                        Some(Popped::Item(Note::ListChanged(kind))) if !ready.is_cancelled() => {
                            if !held.contains(&kind) {
                                held.push(kind);
                            }
                            continue;
                        }
                        Some(Popped::Item(note)) => vec![note],
                    },
                    _ = ready.cancelled(), if !held.is_empty() => held.drain(..).map(Note::ListChanged).collect(),
                };
                for note in note {
                    if !send_note(&peer, lines.as_ref(), &bridge, trace, note).await {
                        return;
                    }
                }
            }
        });
    }

    /// The host sent notifications/initialized: held `list_changed` notifications go out.
    pub(super) fn initialized(&self) {
        self.ready.cancel();
    }

    fn caps(&self) -> Option<m::ClientCapabilities> {
        self.peer.get().and_then(|p| p.peer_info()).map(|i| i.capabilities.clone())
    }
}

impl Drop for Session {
    /// The task sending the notes ends once it has sent the ones queued.
    fn drop(&mut self) {
        self.notes.close();
    }
}

/// Sends one note to the host, through `lines` when given (stdio) or else rmcp's peer, and
/// waits until it is written; false when the session is gone.
async fn send_note(
    peer: &Peer<RoleServer>,
    lines: Option<&mpsc::UnboundedSender<Out>>,
    bridge: &Bridge,
    trace: bool,
    note: Note,
) -> bool {
    let (method, params) = match note {
        Note::Flush(done) => {
            let _ = done.send(());
            return true;
        }
        Note::ListChanged(ListKind::Tools) => ("notifications/tools/list_changed", None),
        Note::ListChanged(ListKind::Resources) => ("notifications/resources/list_changed", None),
        Note::ListChanged(ListKind::Prompts) => ("notifications/prompts/list_changed", None),
        Note::Log(p) => ("notifications/message", Some(p)),
        Note::Progress(p) => ("notifications/progress", Some(p)),
        Note::ResourceUpdated(uri) => ("notifications/resources/updated", Some(json!({"uri": uri}))),
    };
    let mut msg = json!({"method": method});
    if let Some(p) = params {
        msg["params"] = p;
    }
    if trace {
        bridge.trace_mcp(false, &msg);
    }
    match serde_json::from_value::<m::ServerNotification>(msg) {
        Ok(n) if let Some(out) = lines => {
            let message = m::JsonRpcNotification { jsonrpc: m::JsonRpcVersion2_0, notification: n };
            let Ok(line) = serde_json::to_string(&message) else { return true };
            let (written, done) = oneshot::channel();
            out.send(Out { line, answers: None, written: Some(written) }).is_ok() && done.await.is_ok()
        }
        Ok(n) => peer.send_notification(n).await.is_ok(),
        Err(e) => {
            eprintln!("protomcp-conform bridge: cannot build {method}: {e}");
            true
        }
    }
}

impl HostSession for Session {
    fn id(&self) -> SessionId {
        self.id
    }

    fn list_changed(&self, kind: ListKind) {
        let _ = self.notes.send(Note::ListChanged(kind));
    }

    fn log(&self, level: &'static str, logger: Option<String>, data: Value) {
        if state::level_rank(level) < self.threshold.load(Ordering::Relaxed) {
            return;
        }
        let mut p = json!({"level": level, "data": data});
        if let Some(l) = logger {
            p["logger"] = Value::String(l);
        }
        let _ = self.notes.send(Note::Log(p));
    }

    fn progress(&self, token: Value, progress: i64, total: Option<i64>, message: Option<String>) {
        let mut p = json!({"progressToken": token, "progress": progress});
        if let Some(t) = total {
            p["total"] = json!(t);
        }
        if let Some(msg) = message {
            p["message"] = Value::String(msg);
        }
        // A call of the HTTP hot path has its own stream (BR-HTTP-14).
        if self.http_progress(&token, &p) {
            return;
        }
        let _ = self.notes.send(Note::Progress(p));
    }

    fn resource_updated(&self, uri: &str) {
        if self.subscriptions.lock().unwrap().contains(uri) {
            let _ = self.notes.send(Note::ResourceUpdated(uri.to_owned()));
        }
    }

    fn flush(&self) -> BoxFuture<()> {
        // Nothing queued and nothing being sent: what came before is out already (a flush
        // marker would come straight back, two task hand-offs later).
        if self.notes.idle() {
            return Box::pin(std::future::ready(()));
        }
        let (tx, rx) = oneshot::channel();
        let queued = self.notes.send(Note::Flush(tx)).is_ok() && self.peer.get().is_some();
        Box::pin(async move {
            if queued {
                let _ = rx.await;
            }
        })
    }

    fn can_sample(&self) -> bool {
        self.caps().is_some_and(|c| c.sampling.is_some())
    }

    fn can_list_roots(&self) -> bool {
        self.caps().is_some_and(|c| c.roots.is_some())
    }

    fn sample(&self, params: Value) -> BoxFuture<Result<Value, ReverseError>> {
        let origin = self.sole_call();
        let on_stream = self.call_stream_asker(origin.as_ref());
        let peer = self.peer.get().cloned();
        let bridge = self.bridge.clone();
        let trace = self.trace;
        Box::pin(async move {
            let peer = peer.ok_or(ReverseError::NotInitialized)?;
            if trace {
                bridge.trace_mcp(false, &json!({"method": "sampling/createMessage", "params": params}));
            }
            let params: m::CreateMessageRequestParams = serde_json::from_value(params)
                .map_err(|e| ReverseError::Invalid(format!("invalid sampling request: {e}")))?;
            // The checks rmcp's `create_message` makes before it sends.
            let invalid = |e: String| {
                ReverseError::Invalid(rmcp::ServiceError::McpError(ErrorData::invalid_params(e, None)).to_string())
            };
            if (params.tools.is_some() || params.tool_choice.is_some()) && !peer.supports_sampling_tools() {
                return Err(invalid(
                    "tools or toolChoice provided but client does not support sampling tools capability".into(),
                ));
            }
            params.validate().map_err(invalid)?;
            let r = if let Some(asker) = on_stream {
                let answer = asker.ask("sampling/createMessage", Some(to_json(&params))).await?;
                match serde_json::from_value::<m::CreateMessageResult>(answer.clone()) {
                    Ok(r) => to_json(&r),
                    Err(_) => {
                        let answer = answer.to_string();
                        return Err(ReverseError::Unexpected { method: "sampling/createMessage", answer });
                    }
                }
            } else {
                let req = m::ServerRequest::CreateMessageRequest(m::CreateMessageRequest::new(params));
                match ask_host(&peer, req, origin).await? {
                    m::ClientResult::CreateMessageResult(r) => to_json(&r),
                    other => {
                        let answer = to_json(&other).to_string();
                        return Err(ReverseError::Unexpected { method: "sampling/createMessage", answer });
                    }
                }
            };
            if trace {
                bridge.trace_mcp(true, &json!({"result": r}));
            }
            Ok(r)
        })
    }

    fn list_roots(&self) -> BoxFuture<Result<Value, ReverseError>> {
        let origin = self.sole_call();
        let on_stream = self.call_stream_asker(origin.as_ref());
        let peer = self.peer.get().cloned();
        let bridge = self.bridge.clone();
        let trace = self.trace;
        Box::pin(async move {
            let peer = peer.ok_or(ReverseError::NotInitialized)?;
            if trace {
                bridge.trace_mcp(false, &json!({"method": "roots/list"}));
            }
            let r = if let Some(asker) = on_stream {
                let answer = asker.ask("roots/list", None).await?;
                match serde_json::from_value::<m::ListRootsResult>(answer.clone()) {
                    Ok(r) => to_json(&r),
                    Err(_) => {
                        return Err(ReverseError::Unexpected { method: "roots/list", answer: answer.to_string() });
                    }
                }
            } else {
                let req = m::ServerRequest::ListRootsRequest(m::ListRootsRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                });
                match ask_host(&peer, req, origin).await? {
                    m::ClientResult::ListRootsResult(r) => to_json(&r),
                    other => {
                        let answer = to_json(&other).to_string();
                        return Err(ReverseError::Unexpected { method: "roots/list", answer });
                    }
                }
            };
            if trace {
                bridge.trace_mcp(true, &json!({"result": r}));
            }
            Ok(r)
        })
    }
}

/// Sends a request to the host and waits for its answer; `origin`, the tools/call that caused
/// it, makes rmcp's HTTP transport send it on that call's response stream (BR-HTTP-14).
async fn ask_host(
    peer: &Peer<RoleServer>,
    mut req: m::ServerRequest,
    origin: Option<m::RequestId>,
) -> Result<m::ClientResult, ReverseError> {
    use rmcp::model::GetExtensions;
    if let Some(id) = origin {
        req.extensions_mut().insert(rmcp::service::OriginatingRequestId(id));
    }
    peer.send_request(req).await.map_err(|e| ReverseError::Host(e.to_string()))
}
