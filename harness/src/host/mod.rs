//! A hand-rolled MCP host (JSON-RPC 2.0 client) that drives a bridge over stdio. Hand-rolled on
//! purpose: it must be able to send what no MCP library would (broken lines, wrong ids,
//! batches), and it records everything the bridge writes.
//!
//! The bridge runs as a child process in its own process group. Responses are matched by id;
//! notifications are kept in arrival order; requests from the bridge (sampling, roots, ping)
//! are answered by a handler the test installs.
//!
//! What the bridge writes is kept within the bounds of [`crate::limits`]: the messages
//! ([`limits::HOST_MESSAGES`]: the first and the last ones, a count of the rest; a reader that
//! forgets what it read, [`StdioHost::forget_before`], bounds what waits), lines that are not
//! JSON-RPC ([`limits::HOST_GARBAGE`], each cut), one line at most [`limits::MESSAGE_BYTES`];
//! [`StdioHost::flood`] names a flood.

pub mod http;
pub mod session;

use std::collections::HashMap;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::bounded::{Kept, thousands};
use crate::jsonrpc::ErrorCode;
use crate::limits;

/// What went wrong while driving the bridge.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
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
pub type ServerReply = Result<Value, (ErrorCode, String)>;

type Handler = Box<dyn Fn(&str, &Value) -> ServerReply + Send + Sync>;

struct Shared {
    pending: Mutex<HashMap<i64, oneshot::Sender<Value>>>,
    /// Notifications before this message number are forgotten ([`StdioHost::clear_notifications`]).
    notifications_from: std::sync::atomic::AtomicU64,
    /// Every line the bridge wrote that is not JSON (stdout must carry only MCP, BR-MCP-01),
    /// cut to [`limits::GARBAGE_LINE`] bytes.
    garbage: Mutex<Kept<String>>,
    /// Every message the bridge wrote, in order.
    log: Mutex<Kept<Value>>,
    /// The length of the longest line above [`limits::MESSAGE_BYTES`], if there was one.
    overlong: Mutex<Option<usize>>,
    /// Answers to requests from the bridge queued for its stdin and not yet written.
    replies: std::sync::atomic::AtomicUsize,
    arrived: Notify,
    handler: Mutex<Option<Handler>>,
    /// When false, requests from the bridge are left for the caller to answer (scenarios with
    /// `host_requests: manual`).
    answer: std::sync::atomic::AtomicBool,
}

/// One bridge process driven over its stdin/stdout.
pub struct StdioHost {
    child: Child,
    out: mpsc::UnboundedSender<Line>,
    close: tokio::sync::watch::Sender<bool>,
    shared: Arc<Shared>,
    next_id: std::sync::atomic::AtomicI64,
    /// How long [`StdioHost::request`] waits for a response.
    pub timeout: Duration,
}

impl StdioHost {
    /// Starts `argv` (the bridge) with stdin and stdout piped and stderr inherited.
    pub fn spawn(argv: &[String], env: &[(String, String)]) -> Result<StdioHost, DriverError> {
        Self::spawn_with_stderr(argv, env, Stdio::inherit())
    }

    /// [`StdioHost::spawn`] with stderr going to `stderr` (e.g. a file).
    pub fn spawn_with_stderr(
        argv: &[String],
        env: &[(String, String)],
        stderr: Stdio,
    ) -> Result<StdioHost, DriverError> {
        Self::spawn_in(argv, env, stderr, None)
    }

    /// [`StdioHost::spawn_with_stderr`] in the working directory `cwd` (the harness's when `None`).
    pub fn spawn_in(
        argv: &[String],
        env: &[(String, String)],
        stderr: Stdio,
        cwd: Option<&std::path::Path>,
    ) -> Result<StdioHost, DriverError> {
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
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            notifications_from: std::sync::atomic::AtomicU64::new(0),
            garbage: Mutex::new(Kept::new(limits::HOST_GARBAGE)),
            log: Mutex::new(Kept::new(limits::HOST_MESSAGES)),
            overlong: Mutex::new(None),
            replies: std::sync::atomic::AtomicUsize::new(0),
            arrived: Notify::new(),
            handler: Mutex::new(None),
            answer: std::sync::atomic::AtomicBool::new(true),
        });
        let (out, out_rx) = mpsc::unbounded_channel::<Line>();
        let (close, closed) = tokio::sync::watch::channel(false);
        tokio::spawn(write_stdin(stdin, out_rx, closed, shared.clone()));
        tokio::spawn(read_stdout(stdout, shared.clone(), out.clone()));
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

    /// The bridge's stderr, when it was started with `Stdio::piped()` for it (once).
    pub fn take_stderr(&mut self) -> Option<tokio::process::ChildStderr> {
        self.child.stderr.take()
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
        let _ = self.out.send(Line { text: format!("{line}\n"), reply: false });
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
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, DriverError> {
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
    ) -> Result<Value, DriverError> {
        match tokio::time::timeout(within, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(DriverError::Closed { method: method.into(), id }),
            Err(_) => {
                self.shared.pending.lock().unwrap().remove(&id);
                Err(DriverError::Timeout { method: method.into(), id, within })
            }
        }
    }

    /// initialize + notifications/initialized with these client capabilities; returns the
    /// initialize result.
    pub async fn initialize(&self, version: &str, capabilities: Value) -> Result<Value, DriverError> {
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

    /// Notifications received so far, in order (past [`limits::HOST_NOTIFICATIONS`]: the first
    /// and the last ones).
    pub fn notifications(&self) -> Vec<Value> {
        let from = self.shared.notifications_from.load(std::sync::atomic::Ordering::Relaxed);
        let log = self.shared.log.lock().unwrap();
        log.since(from)
            .map(|(_, m)| m)
            .filter(|m| m.get("method").is_some() && m.get("id").is_none())
            .cloned()
            .collect()
    }

    /// Notifications with this method received so far.
    pub fn notifications_of(&self, method: &str) -> Vec<Value> {
        self.notifications().into_iter().filter(|n| n["method"] == method).collect()
    }

    /// Forgets the notifications received so far.
    pub fn clear_notifications(&self) {
        let end = self.shared.log.lock().unwrap().total();
        self.shared.notifications_from.store(end, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every message the bridge wrote, in order (past [`limits::HOST_MESSAGES`]: the first and
    /// the last ones).
    pub fn messages(&self) -> Vec<Value> {
        self.shared.log.lock().unwrap().iter().cloned().collect()
    }

    /// The messages kept whose number (from 0, in arrival order, dropped ones counted) is `seq`
    /// or later, with their numbers: a reader goes on where it stopped.
    pub fn messages_since(&self, seq: u64) -> Vec<(u64, Value)> {
        self.shared.log.lock().unwrap().since(seq).map(|(n, v)| (n, v.clone())).collect()
    }

    /// Forgets the messages numbered below `seq` (a reader that has taken them): from then on
    /// [`limits::HOST_MESSAGES`] bounds the messages not taken yet.
    pub fn forget_before(&self, seq: u64) {
        self.shared.log.lock().unwrap().forget_before(seq);
    }

    /// Lines on the bridge's stdout that are not JSON-RPC messages (each cut to
    /// [`limits::GARBAGE_LINE`] bytes).
    pub fn garbage(&self) -> Vec<String> {
        self.shared.garbage.lock().unwrap().iter().cloned().collect()
    }

    /// When the bridge wrote more than the host driver keeps: the failure message naming the
    /// flood (messages past [`limits::HOST_MESSAGES`], a line longer than
    /// [`limits::MESSAGE_BYTES`], or lines that are not JSON-RPC past [`limits::HOST_GARBAGE`]).
    pub fn flood(&self) -> Option<String> {
        if let Some(f) = self.shared.log.lock().unwrap().flood("the bridge", "messages on stdout") {
            return Some(f);
        }
        if let Some(len) = *self.shared.overlong.lock().unwrap() {
            return Some(format!(
                "flood: the bridge wrote a line of {} bytes on stdout, more than the harness takes as one message ({} bytes)",
                thousands(len as u64),
                thousands(limits::MESSAGE_BYTES as u64)
            ));
        }
        self.shared.garbage.lock().unwrap().flood("the bridge", "lines that are not JSON-RPC on stdout")
    }

    /// Waits until at least `count` notifications with `method` have arrived.
    pub async fn wait_notifications(
        &self,
        method: &str,
        count: usize,
        within: Duration,
    ) -> Result<Vec<Value>, DriverError> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let arrived = self.shared.arrived.notified();
            let have = self.notifications_of(method);
            if have.len() >= count {
                return Ok(have);
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return Err(DriverError::NoNotification { method: method.into(), within });
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
            crate::os::signal_process(pid as i32, sig);
        }
    }

    /// Waits for the bridge to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(within, self.child.wait()).await.ok().and_then(Result::ok)
    }
}

/// One line for the bridge's stdin; `reply` when it answers a request of the bridge.
struct Line {
    text: String,
    reply: bool,
}

/// The first [`limits::GARBAGE_LINE`] bytes of `line` (at a character boundary).
fn excerpt(mut line: String) -> String {
    if line.len() > limits::GARBAGE_LINE {
        let mut end = limits::GARBAGE_LINE;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        let len = line.len();
        line.truncate(end);
        line.push_str(&format!("… ({} bytes)", thousands(len as u64)));
    }
    line
}

/// The next line of `r` without its `\n` (and `\r`), at most `max` bytes; `buf` is scratch
/// space. A longer line is read to its end and comes back as `Err` with its first
/// [`limits::GARBAGE_LINE`] bytes and its length. `None` at the end of the output (a last line
/// without a newline is still a line).
pub async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Option<Result<String, (String, usize)>> {
    buf.clear();
    let mut len = 0usize;
    let mut any = false;
    loop {
        let chunk = r.fill_buf().await.ok()?;
        if chunk.is_empty() {
            if !any {
                return None;
            }
            break;
        }
        any = true;
        let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        let n = part.len();
        len += n;
        if len <= max {
            buf.extend_from_slice(part);
        } else if buf.len() > limits::GARBAGE_LINE {
            buf.truncate(limits::GARBAGE_LINE);
            buf.shrink_to_fit();
        }
        r.consume(n + usize::from(newline));
        if newline {
            break;
        }
    }
    if buf.last() == Some(&b'\r') && len <= max {
        buf.pop();
        len -= 1;
    }
    if len > max {
        let first: String = String::from_utf8_lossy(buf).chars().take(limits::GARBAGE_LINE).collect();
        return Some(Err((first, len)));
    }
    // The line moves out of `buf` (no copy of a large message).
    Some(Ok(
        String::from_utf8(std::mem::take(buf)).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    ))
}

impl Drop for StdioHost {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // The whole group: the bridge and its tool process.
            crate::os::signal_group(pid as i32, libc::SIGKILL);
        }
    }
}

/// The writer task of a [`StdioHost`]: the lines queued on `out_rx` to the bridge's stdin, until
/// `closed` says so or the pipe breaks; dropping stdin then is the bridge's end of file.
async fn write_stdin(
    mut stdin: tokio::process::ChildStdin,
    mut out_rx: mpsc::UnboundedReceiver<Line>,
    mut closed: tokio::sync::watch::Receiver<bool>,
    shared: Arc<Shared>,
) {
    loop {
        tokio::select! {
            line = out_rx.recv() => {
                let Some(line) = line else { break };
                if line.reply {
                    shared.replies.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                }
                if stdin.write_all(line.text.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
            _ = closed.changed() => break,
        }
    }
    // Dropping stdin closes it: end-of-file for the bridge.
}

/// The reader task of a [`StdioHost`]: every line of the bridge's stdout, kept (bounded), handed
/// to the caller waiting for its id, or answered (requests of the bridge, through `reply_out`);
/// what is not JSON-RPC is kept as garbage.
async fn read_stdout(stdout: tokio::process::ChildStdout, shared: Arc<Shared>, reply_out: mpsc::UnboundedSender<Line>) {
    let mut stdout = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::new();
    while let Some(line) = read_line(&mut stdout, &mut buf, limits::MESSAGE_BYTES).await {
        let line = match line {
            Ok(line) => line,
            Err((first, len)) => {
                let mut o = shared.overlong.lock().unwrap();
                *o = Some(o.unwrap_or(0).max(len));
                drop(o);
                let cut = format!("{first}… (a line of {} bytes: dropped)", thousands(len as u64));
                shared.garbage.lock().unwrap().push(cut);
                continue;
            }
        };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            shared.garbage.lock().unwrap().push(excerpt(line));
            continue;
        };
        // A message may be as large as LARGE_LIMIT: one copy is kept (the log's), and
        // only a response that a caller waits for is copied once more.
        drop(line);
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let waiter = match (&method, msg.get("id").and_then(Value::as_i64)) {
            (None, Some(id)) => shared.pending.lock().unwrap().remove(&id),
            _ => None,
        };
        let copy = waiter.as_ref().map(|_| msg.clone());
        let answer = shared.answer.load(std::sync::atomic::Ordering::Relaxed);
        // A bridge that sends requests faster than it reads the answers gets no more
        // answers once HOST_MESSAGES.tail_items of them wait for its stdin.
        let queued = shared.replies.load(std::sync::atomic::Ordering::Relaxed);
        let answer = answer && queued < limits::HOST_MESSAGES.tail_items;
        match (method, msg.get("id")) {
            (Some(_), Some(_)) if !answer => {}
            (Some(method), Some(id)) => {
                let reply = {
                    let h = shared.handler.lock().unwrap();
                    match (h.as_ref(), method.as_str()) {
                        (_, "ping") => Ok(json!({})),
                        (Some(h), _) => h(&method, msg.get("params").unwrap_or(&Value::Null)),
                        (None, _) => Err((ErrorCode::METHOD_NOT_FOUND, format!("method not found: {method}"))),
                    }
                };
                let resp = match reply {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, message)) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                    }
                };
                shared.replies.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = reply_out.send(Line { text: format!("{resp}\n"), reply: true });
            }
            (Some(_), None) | (None, Some(_)) => {}
            (None, None) => shared.garbage.lock().unwrap().push(excerpt(msg.to_string())),
        }
        shared.log.lock().unwrap().push(msg);
        if let (Some(tx), Some(copy)) = (waiter, copy) {
            let _ = tx.send(copy);
        }
        shared.arrived.notify_waiters();
    }
    // Output closed: every waiter learns it.
    shared.pending.lock().unwrap().clear();
    shared.arrived.notify_waiters();
}

/// The words of the transcript line that stands before the response the harness puts together
/// from the pages it followed (`nextCursor`): that response is the harness's, not the bridge's
/// (the observers skip it).
pub const PAGES_JOINED: &str = "put together by the harness";
