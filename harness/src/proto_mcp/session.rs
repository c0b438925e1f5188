//! One proto-mcp session: the server under test as a child process (its own process group),
//! driven by the harness as the client over its stdin/stdout. Every frame the server writes is
//! decoded with the bounded [`MessageDecoder`] and checked against the rules that hold for every
//! answer (PM-FRAME-01, PM-LIFECYCLE-03/-04/-05, PM-ERROR-01/-02/-10/-11); what breaks is kept
//! as a violation (MUST) or a deviation (SHOULD) for the scenario's verdict.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use protomcp_proto::frame::{MessageDecoder, MessageFrameError};
use protomcp_proto::mcp::pb::mcp_message::Payload;
use protomcp_proto::mcp::{Arm, MCP_MAX_FRAME, McpMessage, code};

/// Items of the transcript kept in memory (the first ones and the last ones).
const TRANSCRIPT_HEAD: usize = 400;
const TRANSCRIPT_TAIL: usize = 200;
/// Bytes of stderr kept (the tail).
const STDERR_TAIL: usize = 8 * 1024;

/// What the first byte the harness sent selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Unknown,
    Binary,
    Json,
    /// A first byte that selects no protocol: any output is unexpected.
    Other,
}

/// A rule found broken: the requirement and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub requirement: String,
    pub message: String,
}

enum Chunk {
    Data(Vec<u8>),
    Eof,
}

/// A bounded transcript: the first items and the last items, with the count dropped between.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    pub head: Vec<String>,
    pub tail: VecDeque<String>,
    pub dropped: usize,
}

impl Transcript {
    fn push(&mut self, line: String) {
        if self.head.len() < TRANSCRIPT_HEAD {
            self.head.push(line);
            return;
        }
        if self.tail.len() == TRANSCRIPT_TAIL {
            self.tail.pop_front();
            self.dropped += 1;
        }
        self.tail.push_back(line);
    }

    pub fn lines(&self) -> Vec<String> {
        let mut out = self.head.clone();
        if self.dropped > 0 {
            out.push(format!("-- {} items not kept --", self.dropped));
        }
        out.extend(self.tail.iter().cloned());
        out
    }
}

/// A one-line rendering of a message for transcripts.
pub fn render(m: &McpMessage) -> String {
    let body = match &m.payload {
        None => "(no payload)".to_owned(),
        Some(p) => {
            let s = format!("{p:?}");
            if s.len() > 300 {
                format!("{}… ({} chars)", &s[..(0..=300).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0)], s.len())
            } else {
                s
            }
        }
    };
    format!("id={} {body}", m.id)
}

fn hex_preview(b: &[u8]) -> String {
    let shown: String = b.iter().take(48).map(|x| format!("{x:02x}")).collect();
    if b.len() > 48 { format!("{shown}… ({} bytes)", b.len()) } else { format!("{shown} ({} bytes)", b.len()) }
}

/// The server process and both ends of its pipes.
pub struct ServerProcess {
    child: Child,
    pgid: i32,
    stdin: Option<ChildStdin>,
    rx: Receiver<Chunk>,
    buf: BytesMut,
    decoder: MessageDecoder<McpMessage>,
    out_decoder: Option<MessageDecoder<McpMessage>>,
    out_buf: BytesMut,
    pending: VecDeque<McpMessage>,
    sent: HashMap<u64, Option<Arm>>,
    answers: HashMap<u64, usize>,
    pub mode: Framing,
    pub stdout_closed: bool,
    /// Bytes received on stdout, in total.
    pub received: u64,
    pub transcript: Transcript,
    pub violations: Vec<Finding>,
    pub deviations: Vec<Finding>,
    stderr: Arc<Mutex<Vec<u8>>>,
    pub exit: Option<ExitStatus>,
    started: Instant,
    _home: Option<tempfile::TempDir>,
}

/// Why a session could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start `{command}`: {error}")]
pub struct SpawnError {
    pub command: String,
    pub error: std::io::Error,
}

impl ServerProcess {
    /// Starts `command` (argv) in its own process group. `clean_env`: only PATH and HOME (a new
    /// temp dir) in its environment (PM-LIFECYCLE-02).
    pub fn spawn(command: &[String], clean_env: bool) -> Result<ServerProcess, SpawnError> {
        let spawn_err = |error| SpawnError { command: command.join(" "), error };
        let (prog, args) = command.split_first().ok_or_else(|| spawn_err(std::io::Error::other("empty command")))?;
        let mut cmd = Command::new(prog);
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let mut home = None;
        if clean_env {
            let dir = tempfile::tempdir().map_err(spawn_err)?;
            cmd.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default()).env("HOME", dir.path());
            home = Some(dir);
        }
        let mut child = cmd.spawn().map_err(spawn_err)?;
        let pgid = child.id() as i32;
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr_pipe = child.stderr.take().expect("piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Chunk::Eof);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Chunk::Data(chunk[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut chunk) {
                if n == 0 {
                    return;
                }
                let mut s = sink.lock().expect("stderr lock");
                s.extend_from_slice(&chunk[..n]);
                if s.len() > STDERR_TAIL {
                    let cut = s.len() - STDERR_TAIL;
                    s.drain(..cut);
                }
            }
        });
        Ok(ServerProcess {
            child,
            pgid,
            stdin,
            rx,
            buf: BytesMut::new(),
            decoder: MessageDecoder::new(MCP_MAX_FRAME),
            out_decoder: Some(MessageDecoder::new(u32::MAX)),
            out_buf: BytesMut::new(),
            pending: VecDeque::new(),
            sent: HashMap::new(),
            answers: HashMap::new(),
            mode: Framing::Unknown,
            stdout_closed: false,
            received: 0,
            transcript: Transcript::default(),
            violations: Vec::new(),
            deviations: Vec::new(),
            stderr,
            exit: None,
            started: Instant::now(),
            _home: home,
        })
    }

    fn note(&mut self, line: String) {
        let ms = self.started.elapsed().as_millis();
        self.transcript.push(format!("{ms:>6} ms {line}"));
    }

    pub fn note_harness(&mut self, line: &str) {
        self.note(format!("-- {line}"));
    }

    pub fn stderr_tail(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().expect("stderr lock")).into_owned()
    }

    fn violation(&mut self, requirement: &str, message: String) {
        self.note(format!("!! {requirement}: {message}"));
        self.violations.push(Finding { requirement: requirement.into(), message });
    }

    fn deviation(&mut self, requirement: &str, message: String) {
        self.note(format!("~~ {requirement}: {message}"));
        self.deviations.push(Finding { requirement: requirement.into(), message });
    }

    /// Writes `bytes` to the server's stdin (one write, or one byte per `pace`). The first byte
    /// of the session decides how output is read. A failed write is noted, not fatal: the next
    /// expectation judges.
    pub fn send(&mut self, bytes: &[u8], pace: Option<Duration>, label: &str) {
        if self.mode == Framing::Unknown
            && let Some(&b) = bytes.first()
        {
            self.mode = match b {
                0x00..=0x1f => Framing::Binary,
                b'{' => Framing::Json,
                _ => Framing::Other,
            };
        }
        self.note(format!(">> {label} [{}]", hex_preview(bytes)));
        if self.mode == Framing::Binary {
            self.track_outgoing(bytes);
        }
        let Some(stdin) = self.stdin.as_mut() else {
            self.note_harness("stdin already closed; nothing written");
            return;
        };
        let result = match pace {
            None => stdin.write_all(bytes).and_then(|()| stdin.flush()),
            Some(gap) => bytes.iter().enumerate().try_for_each(|(i, b)| {
                if i > 0 {
                    std::thread::sleep(gap);
                }
                stdin.write_all(&[*b]).and_then(|()| stdin.flush())
            }),
        };
        if let Err(e) = result {
            self.note_harness(&format!("write failed: {e}"));
        }
    }

    /// Decodes what the harness sends, to know which request each id carries.
    fn track_outgoing(&mut self, bytes: &[u8]) {
        let Some(dec) = self.out_decoder.as_mut() else { return };
        self.out_buf.extend_from_slice(bytes);
        loop {
            match dec.decode(&mut self.out_buf) {
                Ok(Some(d)) => {
                    self.sent.insert(d.message.id, d.message.arm());
                }
                Ok(None) => return,
                Err(e) if e.is_recoverable() => {}
                Err(_) => {
                    self.out_decoder = None;
                    return;
                }
            }
        }
    }

    /// The request arm the harness sent with `id`, if known.
    pub fn sent_arm(&self, id: u64) -> Option<Arm> {
        self.sent.get(&id).copied().flatten()
    }

    pub fn close_stdin(&mut self) {
        self.note_harness("stdin closed");
        self.stdin = None;
    }

    pub fn signal(&mut self, sig: i32) {
        self.note_harness(&format!("signal {sig} to the process group"));
        crate::os::signal_group(self.pgid, sig);
    }

    /// Waits up to `deadline` for one chunk of stdout; false when none came (or stdout closed).
    fn pump(&mut self, deadline: Instant) -> bool {
        if self.stdout_closed {
            return false;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let chunk = match self.rx.recv_timeout(wait) {
            Ok(c) => c,
            Err(RecvTimeoutError::Timeout) => return false,
            Err(RecvTimeoutError::Disconnected) => Chunk::Eof,
        };
        match chunk {
            Chunk::Data(d) => {
                self.received += d.len() as u64;
                self.buf.extend_from_slice(&d);
                match self.mode {
                    Framing::Binary => self.decode_frames(false),
                    Framing::Other | Framing::Unknown => {
                        let preview = hex_preview(&d);
                        self.note(format!("<< bytes [{preview}]"));
                        self.buf.clear();
                    }
                    Framing::Json => {}
                }
            }
            Chunk::Eof => {
                self.stdout_closed = true;
                self.note("<< stdout closed".into());
                if self.mode == Framing::Binary {
                    self.decode_frames(true);
                }
            }
        }
        true
    }

    fn decode_frames(&mut self, eof: bool) {
        loop {
            let step = if eof { self.decoder.decode_eof(&mut self.buf) } else { self.decoder.decode(&mut self.buf) };
            match step {
                Ok(Some(d)) => {
                    self.note(format!("<< {}", render(&d.message)));
                    self.check_answer(&d.message);
                    self.pending.push_back(d.message);
                }
                Ok(None) => return,
                Err(e @ MessageFrameError::Undecodable { .. }) => {
                    self.violation("PM-FRAME-01", format!("stdout: {e}"));
                }
                Err(e) => {
                    self.violation("PM-FRAME-01", format!("stdout: {e}"));
                    self.buf.clear();
                    return;
                }
            }
        }
    }

    /// The rules every frame from the server must keep.
    fn check_answer(&mut self, m: &McpMessage) {
        let Some(arm) = m.arm() else {
            self.violation("PM-LIFECYCLE-04", format!("a frame with no payload arm (id {})", m.id));
            return;
        };
        if arm.is_request() {
            self.violation("PM-LIFECYCLE-05", format!("the server sent a request arm, {arm} (id {})", m.id));
            return;
        }
        let request = self.sent.get(&m.id).copied();
        if m.id != 0 {
            match request {
                None => {
                    self.violation("PM-LIFECYCLE-03", format!("an answer (id {}) to no request the harness sent", m.id))
                }
                Some(_) => {
                    let n = self.answers.entry(m.id).or_default();
                    *n += 1;
                    if *n > 1 {
                        let n = *n;
                        self.violation("PM-LIFECYCLE-03", format!("answer number {n} to the request with id {}", m.id));
                    }
                }
            }
        }
        let request = request.flatten();
        if let Some(req) = request.filter(|r| r.is_request())
            && arm != Arm::ErrorResponse
            && Some(arm) != req.response()
        {
            if arm == Arm::CallToolResponse {
                self.violation("PM-ERROR-02", format!("{req} (id {}) answered by call_tool_response", m.id));
            } else {
                self.violation("PM-LIFECYCLE-04", format!("{req} (id {}) answered by {arm}", m.id));
            }
        }
        let error = match &m.payload {
            Some(Payload::ErrorResponse(e)) => Some((e.code, e.message.clone())),
            Some(Payload::CallToolResponse(r)) => match &r.result {
                Some(protomcp_proto::mcp::pb::call_tool_response::Result::Error(e)) => {
                    Some((e.code, e.message.clone()))
                }
                _ => None,
            },
            _ => None,
        };
        if let Some((c, message)) = error {
            if !code::is_known(c) {
                self.violation("PM-ERROR-01", format!("error code {c} (id {}) is not in §2.4 nor -32000…-32099", m.id));
            }
            if message.trim().is_empty() {
                self.deviation("PM-ERROR-10", format!("error {c} (id {}) has an empty message", m.id));
            }
            let ok = match c {
                code::VERSION_UNSUPPORTED => request.is_none_or(|r| r == Arm::InitializeRequest),
                code::BSR_UNRESOLVED | code::SCHEMA_VALIDATION | code::TOOL_TIMEOUT => {
                    request.is_none_or(|r| matches!(r, Arm::CallToolRequest | Arm::ListToolsRequest))
                }
                _ => true,
            };
            if !ok || (m.id == 0 && matches!(c, -33003..=-33000)) {
                let to = request.map_or("an unknown request".to_owned(), |r| r.to_string());
                self.violation("PM-ERROR-11", format!("code {c} in the answer to {to} (id {})", m.id));
            }
        }
    }

    /// The answer to `id`: from what already arrived, or the next that arrives before `deadline`.
    pub fn answer(&mut self, id: u64, deadline: Instant) -> Option<McpMessage> {
        loop {
            if let Some(i) = self.pending.iter().position(|m| m.id == id) {
                return self.pending.remove(i);
            }
            if !self.pump(deadline) && (Instant::now() >= deadline || self.stdout_closed) {
                return None;
            }
        }
    }

    /// The next frame, whatever its id.
    pub fn next_frame(&mut self, deadline: Instant) -> Option<McpMessage> {
        loop {
            if let Some(m) = self.pending.pop_front() {
                return Some(m);
            }
            if !self.pump(deadline) && (Instant::now() >= deadline || self.stdout_closed) {
                return None;
            }
        }
    }

    /// The next line of a JSON-RPC session (without its newline).
    pub fn next_line(&mut self, deadline: Instant) -> Option<String> {
        loop {
            if let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(nl + 1);
                let text = String::from_utf8_lossy(&line[..nl]).trim_end_matches('\r').to_owned();
                self.note(format!("<< {text}"));
                return Some(text);
            }
            if !self.pump(deadline) && (Instant::now() >= deadline || self.stdout_closed) {
                if self.stdout_closed && !self.buf.is_empty() {
                    let text = String::from_utf8_lossy(&self.buf).into_owned();
                    self.buf.clear();
                    self.note(format!("<< {text} (no newline)"));
                    return Some(text);
                }
                return None;
            }
        }
    }

    /// Whether nothing arrives on stdout for `window` (frames already pending count as output).
    pub fn silent_for(&mut self, window: Duration) -> bool {
        let before = self.received;
        let deadline = Instant::now() + window;
        while Instant::now() < deadline {
            if !self.pump(deadline) && self.stdout_closed {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            }
        }
        self.received == before
    }

    /// The exit status, if the process ends before `deadline`.
    pub fn wait_exit(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(s) = self.exit {
                return Some(s);
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                self.note_harness(&format!("the server exited: {s}"));
                self.exit = Some(s);
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            // Keep reading stdout meanwhile, so a server blocked on a full pipe can go on.
            let step = (Instant::now() + Duration::from_millis(20)).min(deadline);
            if !self.pump(step) {
                std::thread::sleep(step.saturating_duration_since(Instant::now()));
            }
        }
    }

    /// Frames that arrived and no step consumed.
    pub fn unclaimed(&self) -> usize {
        self.pending.len()
    }

    /// Ends the session: kills the process group (the server and anything it started, even
    /// after the server itself exited) and reaps the child.
    pub fn finish(&mut self) {
        self.stdin = None;
        crate::os::signal_group(self.pgid, libc::SIGKILL);
        if self.exit.is_none() {
            let _ = self.child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.finish();
    }
}
