//! A hand-rolled MCP host (JSON-RPC 2.0 client) that drives a bridge over stdio. Hand-rolled on
//! purpose: it must be able to send what no MCP library would (broken lines, wrong ids,
//! batches), and it records everything the bridge writes.
//!
//! The bridge runs as a child process in its own process group. Responses are matched by id;
//! notifications are kept in arrival order; requests from the bridge (sampling, roots, ping)
//! are answered by a handler the test installs.

pub mod http;
pub mod session;

use std::collections::HashMap;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, oneshot};

/// What went wrong while driving the bridge.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("starting the bridge: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("no response to {method} (id {id}) within {within:?}")]
    Timeout { method: String, id: i64, within: Duration },
    #[error("the bridge closed its output before answering {method} (id {id})")]
    Closed { method: String, id: i64 },
    #[error("no {method} notification within {within:?}")]
    NoNotification { method: String, within: Duration },
}

/// The answer to a request from the bridge: a result, or an error code and message.
pub type ServerReply = Result<Value, (i64, String)>;

type Handler = Box<dyn Fn(&str, &Value) -> ServerReply + Send + Sync>;

struct Shared {
    pending: Mutex<HashMap<i64, oneshot::Sender<Value>>>,
    notifications: Mutex<Vec<Value>>,
    /// Every line the bridge wrote that is not JSON (stdout must carry only MCP, BR-MCP-01).
    garbage: Mutex<Vec<String>>,
    /// Every message the bridge wrote, in order.
    log: Mutex<Vec<Value>>,
    arrived: Notify,
    handler: Mutex<Option<Handler>>,
    /// When false, requests from the bridge are left for the caller to answer (scenarios with
    /// `host_requests: manual`).
    answer: std::sync::atomic::AtomicBool,
}

/// One bridge process driven over its stdin/stdout.
pub struct StdioHost {
    child: Child,
    out: mpsc::UnboundedSender<String>,
    close: tokio::sync::watch::Sender<bool>,
    shared: Arc<Shared>,
    next_id: std::sync::atomic::AtomicI64,
    /// How long [`StdioHost::request`] waits for a response.
    pub timeout: Duration,
}

impl StdioHost {
    /// Starts `argv` (the bridge) with stdin and stdout piped and stderr inherited.
    pub fn spawn(argv: &[String], env: &[(String, String)]) -> Result<StdioHost, HostError> {
        Self::spawn_with_stderr(argv, env, Stdio::inherit())
    }

    /// [`StdioHost::spawn`] with stderr going to `stderr` (e.g. a file).
    pub fn spawn_with_stderr(argv: &[String], env: &[(String, String)], stderr: Stdio) -> Result<StdioHost, HostError> {
        Self::spawn_in(argv, env, stderr, None)
    }

    /// [`StdioHost::spawn_with_stderr`] in the working directory `cwd` (the harness's when `None`).
    pub fn spawn_in(
        argv: &[String],
        env: &[(String, String)],
        stderr: Stdio,
        cwd: Option<&std::path::Path>,
    ) -> Result<StdioHost, HostError> {
        let (program, args) = argv.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
        let mut cmd = Command::new(program);
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        cmd.args(args)
            .envs(env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            notifications: Mutex::new(Vec::new()),
            garbage: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            arrived: Notify::new(),
            handler: Mutex::new(None),
            answer: std::sync::atomic::AtomicBool::new(true),
        });
        let (out, mut out_rx) = mpsc::unbounded_channel::<String>();
        let (close, mut closed) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    line = out_rx.recv() => {
                        let Some(line) = line else { break };
                        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                            break;
                        }
                    }
                    _ = closed.changed() => break,
                }
            }
            // Dropping stdin closes it: end-of-file for the bridge.
        });
        let reader_shared = shared.clone();
        let reply_out = out.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    reader_shared.garbage.lock().unwrap().push(line);
                    continue;
                };
                reader_shared.log.lock().unwrap().push(msg.clone());
                let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
                let answer = reader_shared.answer.load(std::sync::atomic::Ordering::Relaxed);
                match (method, msg.get("id")) {
                    (Some(_), Some(_)) if !answer => {}
                    (Some(method), Some(id)) => {
                        let reply = {
                            let h = reader_shared.handler.lock().unwrap();
                            match (h.as_ref(), method.as_str()) {
                                (_, "ping") => Ok(json!({})),
                                (Some(h), _) => h(&method, msg.get("params").unwrap_or(&Value::Null)),
                                (None, _) => Err((-32601, format!("method not found: {method}"))),
                            }
                        };
                        let resp = match reply {
                            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                            Err((code, message)) => {
                                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                            }
                        };
                        let _ = reply_out.send(format!("{resp}\n"));
                    }
                    (Some(_), None) => reader_shared.notifications.lock().unwrap().push(msg),
                    (None, Some(id)) => {
                        let tx = id.as_i64().and_then(|id| reader_shared.pending.lock().unwrap().remove(&id));
                        if let Some(tx) = tx {
                            let _ = tx.send(msg);
                        }
                    }
                    (None, None) => reader_shared.garbage.lock().unwrap().push(line),
                }
                reader_shared.arrived.notify_waiters();
            }
            // Output closed: every waiter learns it.
            reader_shared.pending.lock().unwrap().clear();
            reader_shared.arrived.notify_waiters();
        });
        Ok(StdioHost {
            child,
            out,
            close,
            shared,
            next_id: std::sync::atomic::AtomicI64::new(1),
            timeout: Duration::from_secs(10),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Installs the answer to requests from the bridge (sampling/createMessage, roots/list).
    pub fn on_request(&self, handler: impl Fn(&str, &Value) -> ServerReply + Send + Sync + 'static) {
        *self.shared.handler.lock().unwrap() = Some(Box::new(handler));
    }

    /// Whether the driver answers requests from the bridge itself (the default) or leaves them
    /// to the caller, who sees them in [`StdioHost::messages`] and answers with
    /// [`StdioHost::send_line`].
    pub fn answer_requests(&self, on: bool) {
        self.shared.answer.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Writes one line exactly as given (a newline is appended).
    pub fn send_line(&self, line: &str) {
        let _ = self.out.send(format!("{line}\n"));
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_line(&msg.to_string());
    }

    /// Sends a request and returns its id and a receiver for the whole response message.
    pub fn start_request(&self, method: &str, params: Option<Value>) -> (i64, oneshot::Receiver<Value>) {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.shared.pending.lock().unwrap().insert(id, tx);
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_line(&msg.to_string());
        (id, rx)
    }

    /// Sends a request and waits for its response message (`result` or `error` inside).
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, HostError> {
        let (id, rx) = self.start_request(method, params);
        self.wait(method, id, rx, self.timeout).await
    }

    /// Waits for the response to a request sent with [`StdioHost::start_request`].
    pub async fn wait(
        &self,
        method: &str,
        id: i64,
        rx: oneshot::Receiver<Value>,
        within: Duration,
    ) -> Result<Value, HostError> {
        match tokio::time::timeout(within, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(HostError::Closed { method: method.into(), id }),
            Err(_) => {
                self.shared.pending.lock().unwrap().remove(&id);
                Err(HostError::Timeout { method: method.into(), id, within })
            }
        }
    }

    /// initialize + notifications/initialized with these client capabilities; returns the
    /// initialize result.
    pub async fn initialize(&self, version: &str, capabilities: Value) -> Result<Value, HostError> {
        let r = self
            .request(
                "initialize",
                Some(json!({
                    "protocolVersion": version,
                    "capabilities": capabilities,
                    "clientInfo": {"name": "protomcp-conform-host", "version": env!("CARGO_PKG_VERSION")},
                })),
            )
            .await?;
        self.notify("notifications/initialized", None);
        Ok(r)
    }

    /// Notifications received so far, in order.
    pub fn notifications(&self) -> Vec<Value> {
        self.shared.notifications.lock().unwrap().clone()
    }

    /// Notifications with this method received so far.
    pub fn notifications_of(&self, method: &str) -> Vec<Value> {
        self.notifications().into_iter().filter(|n| n["method"] == method).collect()
    }

    /// Forgets the notifications received so far.
    pub fn clear_notifications(&self) {
        self.shared.notifications.lock().unwrap().clear();
    }

    /// Every message the bridge wrote, in order.
    pub fn messages(&self) -> Vec<Value> {
        self.shared.log.lock().unwrap().clone()
    }

    /// Lines on the bridge's stdout that are not JSON-RPC messages.
    pub fn garbage(&self) -> Vec<String> {
        self.shared.garbage.lock().unwrap().clone()
    }

    /// Waits until at least `count` notifications with `method` have arrived.
    pub async fn wait_notifications(
        &self,
        method: &str,
        count: usize,
        within: Duration,
    ) -> Result<Vec<Value>, HostError> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let arrived = self.shared.arrived.notified();
            let have = self.notifications_of(method);
            if have.len() >= count {
                return Ok(have);
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return Err(HostError::NoNotification { method: method.into(), within });
            }
        }
    }

    /// Closes the bridge's stdin and waits for it to exit.
    pub async fn close(&mut self, within: Duration) -> Option<ExitStatus> {
        let _ = self.close.send(true);
        tokio::time::timeout(within, self.child.wait()).await.ok().and_then(Result::ok)
    }

    /// Sends a signal to the bridge process.
    pub fn signal(&self, sig: i32) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as i32, sig) };
        }
    }

    /// Waits for the bridge to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(within, self.child.wait()).await.ok().and_then(Result::ok)
    }
}

impl Drop for StdioHost {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // The whole group: the bridge and its tool process.
            // SAFETY: killpg has no memory-safety preconditions.
            unsafe { libc::killpg(pid as i32, libc::SIGKILL) };
        }
    }
}
