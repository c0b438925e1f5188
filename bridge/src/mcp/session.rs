//! One MCP session of the shell: the sans-IO [`HostCore`] under a lock, the actions it asks for
//! carried out (requests to the bridge, cancellations, answers to our requests), and the
//! bridge's view of it ([`HostSession`]). The transports drain its outgoing messages.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use protomcp_proto::host_core::{Action, Ask, AskId, Config, Forward, HostCore, Listing, Note, Transmit};
use protomcp_proto::jsonrpc::RequestId;
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::error::ReverseError;
use crate::{BoxFuture, Bridge, HostError, HostSession, ListKind, SessionId};

static SESSION_IDS: AtomicU64 = AtomicU64::new(1);

/// One MCP session; see the module documentation.
pub struct McpSession {
    id: SessionId,
    pub(super) bridge: Arc<Bridge>,
    core: Mutex<HostCore>,
    /// Wakes the transport's writer when messages wait.
    pub(super) wake: Arc<Notify>,
    /// Requests forwarded to the bridge and running, by the host's id.
    running: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Our requests to the host waiting for the answer.
    asked: Mutex<HashMap<AskId, oneshot::Sender<Result<Value, ReverseError>>>>,
    /// Cancelled when the session ends.
    pub(super) ended: CancellationToken,
    me: Weak<McpSession>,
}

/// Forgets a request of ours when its caller goes away unanswered (the bridge's timeout).
struct Asked<'a> {
    session: &'a McpSession,
    ask: AskId,
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        self.session.asked.lock().unwrap().remove(&self.ask);
        self.session.core.lock().unwrap().forget(self.ask);
    }
}

impl McpSession {
    /// `private_cache`: HTTP authentication is in force (BR-STATELESS-14); `http`: the session is
    /// served over Streamable HTTP.
    pub fn new(bridge: Arc<Bridge>, private_cache: bool, http: bool) -> Arc<McpSession> {
        let cfg = Config {
            page_size: bridge.cfg.page_size,
            queue: crate::limits::BRIDGE_HOST_QUEUE,
            name: "protomcp-conform-bridge".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            private_cache,
            http,
        };
        Arc::new_cyclic(|me| McpSession {
            id: SESSION_IDS.fetch_add(1, Ordering::Relaxed),
            bridge,
            core: Mutex::new(HostCore::new(cfg)),
            wake: Arc::new(Notify::new()),
            running: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
            ended: CancellationToken::new(),
            me: me.clone(),
        })
    }

    /// Runs `f` on the core, then carries out what it asks for and wakes the writer.
    pub fn with<R>(&self, f: impl FnOnce(&mut HostCore, Instant) -> R) -> R {
        let r = f(&mut self.core.lock().unwrap(), Instant::now());
        self.act();
        self.wake.notify_one();
        r
    }

    /// Up to `max` messages for the host.
    pub fn take(&self, max: usize) -> Vec<Transmit> {
        let mut out: Vec<Transmit> = {
            let mut core = self.core.lock().unwrap();
            std::iter::from_fn(|| core.poll_transmit()).take(max).collect()
        };
        if protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrMcpListsOnlyWhenRegistered) {
            // The fault: the initialize result advertises resources and prompts only when the
            // tool process registered some.
            let (resources, prompts) = self.bridge.has_resources_prompts();
            for t in &mut out {
                if let protomcp_proto::host_core::msg::Message::Response(r) = &mut t.message
                    && let Ok(v) = &mut r.outcome
                    && v.get("protocolVersion").is_some()
                    && let Some(caps) = v.get_mut("capabilities").and_then(Value::as_object_mut)
                {
                    caps.retain(|k, _| (k != "resources" || resources) && (k != "prompts" || prompts));
                }
            }
        }
        // Taking may have dropped notifications: that is a diagnostic.
        self.act();
        out
    }

    /// Whether nothing waits to go out.
    pub fn is_idle(&self) -> bool {
        self.core.lock().unwrap().is_idle()
    }

    /// The bridge shuts down in order: the core ends the listen subscriptions itself
    /// (BR-STATELESS-33); the session goes on until [`McpSession::end`]. Whether it answered
    /// any.
    pub fn shutdown(&self) -> bool {
        self.with(|c, _| c.shutdown())
    }

    /// Ends the session: its requests in flight are cancelled (BR-CANCEL-06).
    pub fn end(&self) {
        self.with(|c, _| c.close());
        self.ended.cancel();
    }

    /// Waits (at most `bound`) until the requests forwarded to the bridge have ended: after
    /// [`McpSession::end`], until their cancellations reached the bridge core (BR-CANCEL-06).
    pub async fn settle(&self, bound: std::time::Duration) {
        let _ = tokio::time::timeout(bound, async {
            while !self.running.lock().unwrap().is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
        .await;
    }

    fn act(&self) {
        loop {
            let Some(action) = self.core.lock().unwrap().poll_action() else { return };
            match action {
                Action::Open(_) => {
                    if let Some(me) = self.me.upgrade() {
                        self.bridge.add_session(me);
                    }
                }
                Action::Forward { id, forward } => self.forward(id, forward),
                Action::Cancel { id } => {
                    // The task leaves `running` when its cancellation has reached the bridge.
                    if let Some(ct) = self.running.lock().unwrap().get(&id) {
                        ct.cancel();
                    } else if protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrCancelUnknownForwarded) {
                        // An operation the bridge does not know: the core is told all the same.
                        let unknown = protomcp_proto::bridge_core::OpId(u64::MAX);
                        self.bridge.drive(|sh, _| sh.core.cancel(unknown));
                    }
                }
                Action::Answer { ask, outcome } => {
                    if let Some(tx) = self.asked.lock().unwrap().remove(&ask) {
                        let _ = tx.send(outcome);
                    }
                }
                Action::Diag(line) => crate::diag(&line),
                Action::Closed => self.bridge.remove_session(self.id),
            }
        }
    }

    /// Asks the bridge for what request `id` needs; the outcome goes back to the core.
    fn forward(&self, id: RequestId, forward: Forward) {
        let b = &self.bridge;
        let items = match forward {
            Forward::List(Listing::Tools) => b.tools(),
            Forward::List(Listing::ModernTools) => b.tools_modern(),
            Forward::List(Listing::Resources) => b.resources(),
            Forward::List(Listing::Templates) => b.templates(),
            Forward::List(Listing::Prompts) => b.prompts(),
            other => return self.spawn(id, other),
        };
        self.core.lock().unwrap().handle_outcome(Instant::now(), id, Ok(Value::Array(items)));
    }

    fn spawn(&self, id: RequestId, forward: Forward) {
        let Some(me) = self.me.upgrade() else { return };
        let ct = CancellationToken::new();
        self.running.lock().unwrap().insert(id.clone(), ct.clone());
        tokio::spawn(async move {
            let b = me.bridge.clone();
            let sid = me.id;
            if protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrSecurityRefFetched) {
                let tool = match &forward {
                    Forward::Call { name, .. } => Some(name.as_str()),
                    Forward::ModernCall(call) => Some(call.name.as_str()),
                    _ => None,
                };
                if let Some(tool) = tool {
                    fetch_network_refs(&b, tool).await;
                }
            }
            let outcome = match forward {
                Forward::Call { name, arguments, progress } => {
                    let host: Arc<dyn HostSession> = me.clone();
                    b.call_tool(&host, &name, arguments, progress, ct.cancelled()).await
                }
                Forward::ModernCall(call) => {
                    let host: Arc<dyn HostSession> = me.clone();
                    b.call_modern(&host, call, ct.cancelled()).await
                }
                Forward::Read { uri } => cancellable(&ct, b.read_resource(sid, &uri)).await,
                Forward::Prompt { name, arguments } => cancellable(&ct, b.get_prompt(sid, &name, arguments)).await,
                Forward::Complete { reference, name, value } => {
                    cancellable(&ct, b.complete(sid, &reference, &name, &value)).await
                }
                Forward::List(_) => unreachable!("lists are answered at once"),
            };
            me.running.lock().unwrap().remove(&id);
            me.with(|c, now| c.handle_outcome(now, id, outcome));
        });
    }

    /// Puts a request of ours to the host and waits for its answer.
    async fn ask(&self, ask: Ask) -> Result<Value, ReverseError> {
        let (tx, rx) = oneshot::channel();
        let asked = {
            let mut core = self.core.lock().unwrap();
            let ask = core.ask(Instant::now(), ask)?;
            self.asked.lock().unwrap().insert(ask, tx);
            Asked { session: self, ask }
        };
        self.wake.notify_one();
        let answer = rx.await.unwrap_or_else(|_| Err(ReverseError::Host("the session ended".into())));
        drop(asked);
        answer
    }

    fn note(&self, note: Note) {
        self.with(|c, now| c.handle_note(now, note));
    }
}

/// The fault [`protomcp_proto::fault::Fault::BrSecurityRefFetched`]: a bridge that checks a call's
/// arguments against the tool's inputSchema and to do so fetches each `$ref` with an `http://`
/// URI (BR-SECURITY-09 forbids it): one GET each, bounded, whatever comes back unused.
async fn fetch_network_refs(bridge: &Bridge, tool: &str) {
    use tokio::io::AsyncWriteExt;
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    match (k.as_str(), x.as_str()) {
                        ("$ref", Some(uri)) if uri.starts_with("http://") => out.push(uri.to_owned()),
                        _ => refs(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut uris = Vec::new();
    if let Some(t) = bridge.tools().into_iter().find(|t| t["name"] == tool) {
        refs(&t["inputSchema"], &mut uris);
    }
    for uri in uris {
        let rest = uri.trim_start_matches("http://");
        let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
        let get = async {
            let mut s = tokio::net::TcpStream::connect(authority).await?;
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").as_bytes())
                .await
        };
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), get).await;
    }
}

/// `f`, or [`HostError::Cancelled`] once `ct` is cancelled.
async fn cancellable(
    ct: &CancellationToken,
    f: impl std::future::Future<Output = Result<Value, HostError>>,
) -> Result<Value, HostError> {
    tokio::select! {
        r = f => r,
        _ = ct.cancelled() => Err(HostError::Cancelled),
    }
}

impl HostSession for McpSession {
    fn id(&self) -> SessionId {
        self.id
    }

    fn list_changed(&self, kind: ListKind) {
        self.note(Note::ListChanged(kind));
    }

    fn log(&self, level: &'static str, logger: Option<String>, data: Value, for_call: bool) {
        self.note(Note::Log { level, logger, data, for_call });
    }

    fn legacy(&self) -> bool {
        self.core.lock().unwrap().session_caps().legacy
    }

    fn progress(&self, token: Value, progress: i64, total: Option<i64>, message: Option<String>) {
        self.note(Note::Progress { token, progress, total, message });
    }

    fn resource_updated(&self, uri: &str) {
        self.note(Note::ResourceUpdated(uri.to_owned()));
    }

    /// Everything queued before is in the core's queue ahead of what follows: nothing to wait
    /// for (one queue, in order, for notifications and responses).
    fn flush(&self) -> BoxFuture<()> {
        Box::pin(std::future::ready(()))
    }

    fn end_listens(&self) {
        let _ = self.shutdown();
    }

    fn can_sample(&self) -> bool {
        self.core.lock().unwrap().session_caps().sampling
    }

    fn can_list_roots(&self) -> bool {
        self.core.lock().unwrap().session_caps().roots
    }

    fn sample(&self, params: Value) -> BoxFuture<Result<Value, ReverseError>> {
        let Some(me) = self.me.upgrade() else {
            return Box::pin(std::future::ready(Err(ReverseError::NotInitialized)));
        };
        Box::pin(async move { me.ask(Ask::Sample(params)).await })
    }

    fn list_roots(&self) -> BoxFuture<Result<Value, ReverseError>> {
        let Some(me) = self.me.upgrade() else {
            return Box::pin(std::future::ready(Err(ReverseError::NotInitialized)));
        };
        Box::pin(async move { me.ask(Ask::ListRoots).await })
    }
}
