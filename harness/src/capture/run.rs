//! The I/O of a capture: the bridge in its own process group with piped stdin/stdout, the host's
//! lines relayed both ways, the launcher's control socket, and one relay per tool-process
//! connection that copies every byte unchanged and records a decoded copy.
//!
//! A capture ends when the bridge exits, when the host closed stdin and the bridge did not exit
//! within the grace time, at `max_time`, or at SIGINT/SIGTERM. Then the bridge's group gets
//! SIGTERM, 2 s of grace and SIGKILL ([`crate::runner::process::Testee::teardown`]), and so does
//! every tool process a launcher reported (it may run in a group of its own).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use protomcp_proto::frame::{Frame, FrameDecoder};
use protomcp_proto::violation::Party;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use super::launcher::{Answer, Hello};
use super::scenario::{HOST_EOF, SIDEBAND_HEADER, SIDEBAND_PAYLOAD};
use super::{CaptureError, Chan, ENV_CAPTURE, LAUNCHER_NAME, MAX_EVENTS, Recorded, Recording, TOOL_PLACEHOLDER};
use crate::runner::process::{self, ExitInfo, ScenarioDir, process_alive as alive};
use crate::scenario::normalize::sideband_value;
use crate::transcript::{Dir, Item, hex};

/// How long a relay waits to connect to the bridge's socket, and the launcher's first line.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);
/// After the bridge exited: how long the relays and the output reader get to finish.
const DRAIN: Duration = Duration::from_secs(2);
/// The bridge's time between SIGTERM and SIGKILL at the end, and the limit of the teardown.
const TERM_GRACE: Duration = Duration::from_secs(2);
const KILL_LIMIT: Duration = Duration::from_secs(5);

/// What to capture.
#[derive(Debug, Clone)]
pub struct Options {
    /// The bridge command, with [`TOOL_PLACEHOLDER`] where the tool goes.
    pub bridge: Vec<String>,
    /// The tool process's command (run in the capture's working directory).
    pub tool: Vec<String>,
    /// The capture file, written item by item.
    pub file: PathBuf,
    /// After the host closed stdin: how long the bridge has to exit.
    pub grace: Duration,
    /// The longest a capture runs.
    pub max_time: Option<Duration>,
    /// This binary (the launcher is a link to it).
    pub exe: PathBuf,
}

/// Why a capture ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The bridge exited by itself.
    Exited(ExitInfo),
    /// The host closed stdin and the bridge was still running after the grace time.
    Grace,
    MaxTime,
    Signal,
}

/// A finished capture.
#[derive(Debug)]
pub struct Captured {
    pub session: Recording,
    pub stop: Stop,
    /// False when a process survived the teardown.
    pub clean: bool,
}

/// The recorder: items with their times, written to the capture file at once.
struct Recorder {
    start: Instant,
    file: std::fs::File,
    events: Vec<Recorded>,
    dropped: u64,
    /// The bridge's sockets, as the launchers reported them.
    paths: Vec<String>,
}

#[derive(Clone)]
struct Rec(Arc<Mutex<Recorder>>);

impl Rec {
    fn push(&self, chan: Chan, item: Item) {
        use std::io::Write;
        let mut r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Whole microseconds: what the capture file keeps, so that `--from` sees the same times.
        let at = Duration::from_micros(u64::try_from(r.start.elapsed().as_micros()).unwrap_or(u64::MAX));
        let e = Recorded { at, chan, item };
        let _ = r.file.write_all(Recording::render_event(&e).as_bytes());
        if r.events.len() < MAX_EVENTS {
            r.events.push(e);
        } else {
            r.dropped += 1;
        }
    }

    fn path(&self, p: &str) {
        use std::io::Write;
        let mut r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(r.file, "# path: {}", Value::String(p.into()));
        if !r.paths.iter().any(|x| x == p) {
            r.paths.push(p.to_owned());
        }
    }
}

/// The bridge command with the launcher in place of `{tool}`; an error when it has none.
pub fn bridge_argv(bridge: &[String], launcher: &Path) -> Result<Vec<String>, CaptureError> {
    if bridge.is_empty() {
        return Err(CaptureError::EmptyCommand("the bridge command"));
    }
    if !bridge.iter().any(|a| a.contains(TOOL_PLACEHOLDER)) {
        return Err(CaptureError::NoToolPlaceholder);
    }
    Ok(bridge.iter().map(|a| a.replace(TOOL_PLACEHOLDER, &launcher.display().to_string())).collect())
}

/// The decoding copy of one direction of a tool-process connection.
struct Tap {
    dir: Dir,
    dec: FrameDecoder,
    buf: BytesMut,
    /// The bytes of the item being decoded, from stream offset `base`.
    raw: Vec<u8>,
    base: u64,
    failed: bool,
    /// The rid of the RawHeader frame whose payload comes next.
    raw_header_rid: Option<String>,
}

impl Tap {
    fn new(dir: Dir, party: Party) -> Tap {
        Tap {
            dir,
            dec: FrameDecoder::new(party),
            buf: BytesMut::new(),
            raw: Vec::new(),
            base: 0,
            failed: false,
            raw_header_rid: None,
        }
    }

    /// The bytes of the item just decoded.
    fn take(&mut self) -> Vec<u8> {
        let n = usize::try_from(self.dec.position() - self.base).unwrap_or(usize::MAX).min(self.raw.len());
        self.base += n as u64;
        self.raw.drain(..n).collect()
    }

    /// The items the bytes complete.
    fn feed(&mut self, chunk: &[u8]) -> Vec<Item> {
        let mut items = Vec::new();
        if self.failed {
            return items;
        }
        self.buf.extend_from_slice(chunk);
        self.raw.extend_from_slice(chunk);
        loop {
            match self.dec.decode(&mut self.buf) {
                Ok(None) => break,
                Ok(Some(Frame::Envelope(d))) => {
                    let bytes = self.take();
                    let body = bytes.get(4..).unwrap_or_default();
                    let tree = protomcp_proto::dynamic::from_decoded(&d).ok().map(|t| in_wire_order(t, body));
                    let same =
                        tree.as_ref().and_then(|t| protomcp_proto::dynamic::encode(t).ok()).is_some_and(|b| b == body);
                    let note = if tree.as_ref().and_then(protomcp_proto::dynamic::arm_of) == Some("raw_header") {
                        self.raw_header_rid = Some(d.envelope.request_id.clone());
                        Some(SIDEBAND_HEADER.to_owned())
                    } else {
                        None
                    };
                    items.push(Item::Frame { dir: self.dir, tree, hex: (!same).then(|| hex(body)), note });
                }
                Ok(Some(Frame::Sideband(sb))) => {
                    let bytes = self.take();
                    let rid = self.raw_header_rid.take().unwrap_or_default();
                    items.push(Item::Frame {
                        dir: self.dir,
                        tree: Some(sideband_value(&sb, &rid)),
                        hex: Some(hex(&bytes)),
                        note: Some(SIDEBAND_PAYLOAD.to_owned()),
                    });
                }
                Err(e) if e.is_recoverable() => {
                    let bytes = self.take();
                    items.push(Item::Malformed {
                        error: e.to_string(),
                        hex: Some(hex(bytes.get(4..).unwrap_or_default())),
                    });
                }
                Err(e) => {
                    items.push(Item::Malformed { error: format!("{e} (not decoded from here on)"), hex: None });
                    self.failed = true;
                    break;
                }
            }
        }
        items
    }
}

/// Every order of `items`.
fn permutations(items: &[String]) -> Vec<Vec<String>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first.clone());
            out.push(p);
        }
    }
    out
}

/// The tree of a frame whose sender wrote its top-level fields in another order than the
/// harness would (the Go and Python encoders write `request_id` first): with the `field_order`
/// that gives the same bytes, so that a scenario can send it as a tree. Unchanged when it
/// re-encodes as it is, or when no order of its fields does.
pub fn in_wire_order(tree: Value, body: &[u8]) -> Value {
    use protomcp_proto::dynamic::{FIELD_ORDER, encode};
    if encode(&tree).is_ok_and(|b| b == body) {
        return tree;
    }
    let Value::Object(o) = &tree else { return tree };
    let keys: Vec<String> =
        o.keys().filter(|k| k.as_str() != FIELD_ORDER && k.as_str() != "unknown_fields").cloned().collect();
    if keys.len() < 2 || keys.len() > 5 {
        return tree;
    }
    for order in permutations(&keys) {
        let mut t = tree.clone();
        t[FIELD_ORDER] = Value::from(order);
        if encode(&t).is_ok_and(|b| b == body) {
            return t;
        }
    }
    tree
}

/// Copies `from` to `to` until the end, recording what `tap` decodes; then shuts `to` down.
async fn pump<R, W>(mut from: R, mut to: W, mut tap: Tap, chan: Chan, rec: Rec, end: Item)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut chunk = vec![0u8; 64 * 1024];
    let mut writable = true;
    loop {
        match from.read(&mut chunk).await {
            Ok(0) => {
                rec.push(chan, end);
                break;
            }
            Ok(n) => {
                // Recorded before it is passed on: what the other side does about it comes after
                // it in the capture.
                for item in tap.feed(&chunk[..n]) {
                    rec.push(chan, item);
                }
                if writable && to.write_all(&chunk[..n]).await.is_err() {
                    writable = false;
                }
            }
            Err(e) => {
                rec.push(chan, Item::StreamError { error: e.to_string() });
                break;
            }
        }
    }
    let _ = to.shutdown().await;
}

/// One tool-process connection: accept it on the capture's socket, connect onward to the
/// bridge's socket, relay both ways.
async fn relay(n: u32, listener: UnixListener, bridge_socket: String, rec: Rec) {
    let Ok((tool, _)) = listener.accept().await else { return };
    drop(listener);
    let chan = Chan::Tool(n);
    rec.push(chan, Item::Connected);
    let bridge = match tokio::time::timeout(CONNECT_LIMIT, UnixStream::connect(&bridge_socket)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            rec.push(
                chan,
                Item::StreamError { error: format!("cannot connect to the bridge's socket {bridge_socket}: {e}") },
            );
            return;
        }
        Err(_) => {
            rec.push(
                chan,
                Item::StreamError { error: format!("connecting to the bridge's socket {bridge_socket} timed out") },
            );
            return;
        }
    };
    let (tr, tw) = tool.into_split();
    let (br, bw) = bridge.into_split();
    // The bridge is the testee of the transcript (as in its --trace): what the tool process sends
    // goes harness→testee, what the bridge sends testee→harness.
    let up = pump(
        tr,
        bw,
        Tap::new(Dir::ToTestee, Party::ToolProcess),
        chan,
        rec.clone(),
        Item::Shutdown { how: "the tool process closed the connection".into() },
    );
    let down = pump(br, tw, Tap::new(Dir::FromTestee, Party::Bridge), chan, rec.clone(), Item::Eof);
    tokio::join!(up, down);
}

/// The launchers' control socket: each launcher gets a socket of its own and a relay.
async fn control(
    listener: UnixListener,
    dir: PathBuf,
    tool: Vec<String>,
    rec: Rec,
    pids: Arc<Mutex<Vec<i32>>>,
    relays: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
) {
    let next = Arc::new(AtomicU32::new(1));
    let cwd = std::env::current_dir().ok().map(|d| d.display().to_string());
    while let Ok((conn, _)) = listener.accept().await {
        let (dir, tool, rec, pids, relays, next, cwd) =
            (dir.clone(), tool.clone(), rec.clone(), pids.clone(), relays.clone(), next.clone(), cwd.clone());
        tokio::spawn(async move {
            let (r, mut w) = conn.into_split();
            let mut line = String::new();
            // A launcher's hello is one short line: at most 64 KiB is read.
            let read =
                tokio::time::timeout(CONNECT_LIMIT, BufReader::new(r.take(64 * 1024)).read_line(&mut line)).await;
            let Ok(Ok(_)) = read else { return };
            let Ok(hello) = serde_json::from_str::<Hello>(&line) else { return };
            if let Ok(pid) = i32::try_from(hello.pid) {
                pids.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
            }
            let n = next.fetch_add(1, Ordering::Relaxed);
            let answer = match hello.socket.filter(|s| !s.is_empty()) {
                None => Answer {
                    error: Some(
                        "the bridge started its tool process without PROTOMCP_SOCKET: nothing to interpose".into(),
                    ),
                    ..Answer::default()
                },
                Some(bridge_socket) => {
                    let path = dir.join(format!("tp-{n}.sock"));
                    match UnixListener::bind(&path) {
                        Ok(l) => {
                            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
                            rec.path(&bridge_socket);
                            let h = tokio::spawn(relay(n, l, bridge_socket, rec.clone()));
                            relays.lock().unwrap_or_else(|e| e.into_inner()).push(h);
                            Answer { socket: Some(path.display().to_string()), argv: tool, cwd, error: None }
                        }
                        Err(e) => {
                            Answer { error: Some(format!("cannot bind {}: {e}", path.display())), ..Answer::default() }
                        }
                    }
                }
            };
            let mut text = serde_json::to_string(&answer).unwrap_or_default();
            text.push('\n');
            let _ = w.write_all(text.as_bytes()).await;
        });
    }
}

/// A host line as a transcript item.
fn host_item(dir: Dir, line: &[u8]) -> Item {
    let mut line = line;
    if line.last() == Some(&b'\n') {
        line = &line[..line.len() - 1];
    }
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(m) => Item::Host { dir, message: Some(m), raw: None },
        Err(_) => Item::Host { dir, message: None, raw: Some(String::from_utf8_lossy(line).into_owned()) },
    }
}

/// Copies the host's lines to the bridge's stdin, recording each; at the end of the host's
/// input closes the bridge's stdin and says so on `eof`.
async fn host_to_bridge<I: AsyncRead + Unpin>(
    host: I,
    stdin: tokio::process::ChildStdin,
    rec: Rec,
    eof: watch::Sender<bool>,
) {
    let stdin = relay_lines(host, stdin, &rec, Dir::ToTestee).await;
    // Recorded before the bridge can react to the end of its stdin.
    rec.push(Chan::Host, Item::Host { dir: Dir::ToTestee, message: None, raw: Some(HOST_EOF.into()) });
    drop(stdin);
    let _ = eof.send(true);
}

/// Copies the bridge's stdout to the host line by line, recording each.
async fn bridge_to_host<O: AsyncWrite + Unpin>(stdout: tokio::process::ChildStdout, host: O, rec: Rec) {
    relay_lines(stdout, host, &rec, Dir::FromTestee).await;
}

/// Copies `from` to `to` line by line, recording each line as it goes (`dir`: host→bridge is
/// `ToTestee`). Every byte is passed on; a line longer than [`crate::limits::BRIDGE_HOST_LINE`]
/// (what the reference bridge reads) is recorded as dropped, with its length, so a peer that
/// writes an endless line costs that much memory and no more. Once `to` is closed the rest is
/// read and recorded but not written, so the writer of `from` is never blocked. Returns `to` at
/// the end of `from`, for the caller to close.
async fn relay_lines<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(from: R, mut to: W, rec: &Rec, dir: Dir) -> W {
    use tokio::io::AsyncReadExt;
    let limit = crate::limits::BRIDGE_HOST_LINE;
    let mut r = BufReader::new(from);
    let mut line = Vec::new();
    let mut open = true;
    // Bytes of a line longer than `limit` passed on so far.
    let mut long = 0u64;
    loop {
        line.clear();
        let n = match (&mut r).take(limit as u64).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let ends = line.ends_with(b"\n") || n < limit;
        if long == 0 && ends {
            rec.push(Chan::Host, host_item(dir, &line));
        } else {
            long += n as u64;
            if ends {
                rec.push(Chan::Host, Item::Dropped { items: 1, bytes: long });
                long = 0;
            }
        }
        if open && (to.write_all(&line).await.is_err() || to.flush().await.is_err()) {
            open = false;
        }
    }
    if long > 0 {
        rec.push(Chan::Host, Item::Dropped { items: 1, bytes: long });
    }
    to
}

/// Whether `pid` is a tool process of this capture: its environment names a socket in the
/// capture's temp dir `dir` (a pid reused by another process since does not).
fn ours(pid: i32, dir: &Path) -> bool {
    let needle = format!("{}={}/", crate::testee::ENV_SOCKET, dir.display());
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv.starts_with(needle.as_bytes())))
}

/// SIGKILL to every tool process of this capture (and its group) still alive; true when none is
/// left.
async fn kill_tools(pids: &[i32], dir: &Path) -> bool {
    let deadline = tokio::time::Instant::now() + KILL_LIMIT;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p) && ours(p, dir)).collect();
        for &p in pids {
            if left.contains(&p) {
                crate::os::signal_process(p, libc::SIGKILL);
                if process::group_alive(p) {
                    crate::os::signal_group(p, libc::SIGKILL);
                }
            }
            // A tool process whose bridge died is this process's child (the subreaper): reap it.
            crate::os::reap(p);
        }
        if left.is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates the capture file with its header and the recorder that appends to it; returns the
/// recorder and the header's session.
fn open_capture_file(opts: &Options, d: &Path) -> Result<(Rec, Recording), CaptureError> {
    if let Some(parent) = opts.file.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CaptureError::io(format!("cannot create {}", parent.display()), e))?;
    }
    let file = std::fs::File::create(&opts.file)
        .map_err(|e| CaptureError::io(format!("cannot write {}", opts.file.display()), e))?;
    let header = Recording {
        bridge: opts.bridge.clone(),
        tool: opts.tool.clone(),
        paths: vec![d.display().to_string()],
        ..Recording::default()
    };
    {
        use std::io::Write;
        (&file)
            .write_all(header.render_header().as_bytes())
            .map_err(|e| CaptureError::io("writing the capture file", e))?;
    }
    let rec = Rec(Arc::new(Mutex::new(Recorder {
        start: Instant::now(),
        file,
        events: Vec::new(),
        dropped: 0,
        paths: Vec::new(),
    })));
    Ok((rec, header))
}

/// Runs the capture: the bridge between `host_in`/`host_out` and the tool process.
pub async fn capture<I, O>(opts: &Options, host_in: I, host_out: O) -> Result<Captured, CaptureError>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    if opts.tool.is_empty() {
        return Err(CaptureError::EmptyCommand("the tool command (--tool)"));
    }
    let dir = ScenarioDir::new().map_err(|e| CaptureError::io("cannot create the capture's temp dir", e))?;
    let d = dir.path().to_owned();
    let launcher = d.join(LAUNCHER_NAME);
    let argv = bridge_argv(&opts.bridge, &launcher)?;
    // A link, not a script: see the mock's `{mock}` in runner/bridge/mod.rs.
    std::os::unix::fs::symlink(&opts.exe, &launcher)
        .map_err(|e| CaptureError::io(format!("cannot link {}", launcher.display()), e))?;
    let control_path = d.join("control.sock");
    let listener = UnixListener::bind(&control_path)
        .map_err(|e| CaptureError::io(format!("cannot bind {}", control_path.display()), e))?;
    let (rec, header) = open_capture_file(opts, &d)?;
    process::become_subreaper();
    let env: BTreeMap<String, Option<String>> =
        [(ENV_CAPTURE.to_owned(), Some(control_path.display().to_string()))].into_iter().collect();
    let (mut bridge, pipes) =
        process::spawn_with(&argv, &env, None, [Stdio::piped(), Stdio::piped(), Stdio::inherit()])
            .map_err(|e| CaptureError::io(format!("cannot start the bridge `{}`", argv.join(" ")), e))?;
    let pids = Arc::new(Mutex::new(Vec::new()));
    let relays = Arc::new(Mutex::new(Vec::new()));
    let control_task =
        tokio::spawn(control(listener, d.clone(), opts.tool.clone(), rec.clone(), pids.clone(), relays.clone()));
    let (eof_tx, mut eof_rx) = watch::channel(false);
    let (Some(stdin), Some(stdout)) = (pipes.stdin, pipes.stdout) else {
        return Err(CaptureError::io("the bridge's pipes", std::io::Error::other("not piped")));
    };
    let host_task = tokio::spawn(host_to_bridge(host_in, stdin, rec.clone(), eof_tx));
    let out_task = tokio::spawn(bridge_to_host(stdout, host_out, rec.clone()));
    let grace = opts.grace;
    let max_time = opts.max_time;
    let stop = tokio::select! {
        Some(info) = bridge.wait(Duration::from_secs(365 * 86_400)) => Stop::Exited(info),
        _ = async {
            let _ = eof_rx.wait_for(|e| *e).await;
            tokio::time::sleep(grace).await;
        } => Stop::Grace,
        _ = async {
            match max_time {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        } => Stop::MaxTime,
        _ = process::interrupted() => Stop::Signal,
    };
    if !matches!(stop, Stop::Exited(_)) {
        rec.push(Chan::Bridge, Item::Signal { name: super::scenario::ENDED_BY_CAPTURE.into() });
    }
    let clean_bridge = bridge.teardown(TERM_GRACE, KILL_LIMIT).await;
    if let Some(info) = bridge.exited() {
        rec.push(Chan::Bridge, Item::Exit { status: info.to_string() });
    }
    // The bridge is gone, so its ends of the sockets and of stdout are closed: the relays end.
    let _ = tokio::time::timeout(DRAIN, out_task).await;
    let handles: Vec<_> = std::mem::take(&mut *relays.lock().unwrap_or_else(|e| e.into_inner()));
    let _ = tokio::time::timeout(DRAIN, futures_util::future::join_all(handles)).await;
    let pids: Vec<i32> = pids.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let clean_tools = kill_tools(&pids, &d).await;
    control_task.abort();
    host_task.abort();
    for h in std::mem::take(&mut *relays.lock().unwrap_or_else(|e| e.into_inner())) {
        h.abort();
    }
    let mut r = rec.0.lock().unwrap_or_else(|e| e.into_inner());
    let mut paths = header.paths.clone();
    paths.extend(r.paths.iter().cloned());
    let session = Recording {
        bridge: opts.bridge.clone(),
        tool: opts.tool.clone(),
        paths,
        events: std::mem::take(&mut r.events),
        dropped: r.dropped,
    };
    if r.dropped > 0 {
        use std::io::Write;
        let dropped = r.dropped;
        let _ = writeln!(r.file, "# dropped: {dropped}");
    }
    drop(r);
    drop(dir);
    Ok(Captured { session, stop, clean: clean_bridge && clean_tools })
}

#[cfg(test)]
mod tests;
