//! The steps of a scenario: each [`Action`] and the settings it carries.

use super::{Arm, Duration, Loc, Pattern, Requirement, Template};

/// One step, with where it starts in the file.
#[derive(Debug, Clone)]
pub struct Step {
    pub loc: Loc,
    pub action: Action,
    /// The requirements this step checks (`checks:`); empty: the scenario's.
    pub checks: Vec<&'static Requirement>,
    /// `deviation: true` (proto-mcp): a failure of this step is a SHOULD deviation of its
    /// checks, recorded while the scenario goes on.
    pub deviation: bool,
    /// Host steps over HTTP: the host session the step acts on (`host: b`); `None`: the
    /// scenario's first session. Every name is a session of its own, opened by its first
    /// `host_send` (an `initialize`).
    pub host: Option<String>,
}

impl Step {
    /// The step's keyword (`send`, `expect`, …).
    pub fn keyword(&self) -> &'static str {
        self.action.keyword()
    }
}

#[derive(Debug, Clone)]
pub enum Action {
    Handshake(Handshake),
    /// Send one Envelope frame.
    Send(Template),
    /// Write these bytes as they are.
    SendRaw(Vec<u8>),
    /// Write a frame whose prefix may lie about its body.
    SendFrame(SendFrame),
    Expect(Expect),
    ExpectAnyOrder(ExpectAnyOrder),
    ExpectNothing(ExpectNothing),
    /// The peer closes its side of the connection (EOF) within the time.
    ExpectClose {
        within: Duration,
    },
    ExpectExit(ExpectExit),
    /// The peer still answers: the runner calls `echo` and expects the result.
    ExpectAlive {
        within: Duration,
    },
    /// No second connection arrives on the harness's socket during the time (TP-CONN-06).
    ExpectNoConnect {
        duration: Duration,
    },
    Sleep(Duration),
    /// The harness closes the connection.
    Close(CloseMode),
    /// The harness sends a signal to the testee.
    Signal(Signal),
    /// Bridge scenarios, host side: write one line to the bridge's stdin.
    /// The message or line, and (over HTTP) headers of its POST: each replaces the driver's of
    /// the same name (case-insensitive), an empty value removes it.
    HostSend(SendLine, Vec<(String, String)>),
    /// Bridge scenarios, host side: the next MCP message from the bridge must match.
    HostExpect(HostExpect),
    /// Bridge scenarios, host side: no MCP message (except ignored methods) for the duration.
    HostExpectNothing(HostExpectNothing),
    /// Bridge scenarios over HTTP: one HTTP request outside the session's pipe ([`HostHttp`]).
    HostHttp(HostHttp),
    /// Bridge scenarios, host side: close the bridge's stdin.
    HostClose,
    /// Bridge scenarios, tool side: the tool process's part of the startup (spec §5), or of a
    /// reload that [`Action::ReloadBegins`] saw begin with a ReloadRequest (the burst, §21).
    ToolHandshake(ToolHandshake),
    /// Bridge scenarios, tool side: the bridge begins a reload within the time, in either form
    /// BR-RELOAD-01 allows ([`ReloadBegins`]).
    ReloadBegins(ReloadBegins),
    /// Bridge scenarios: create or modify a file, given relative to the scenario's temp dir
    /// (a watch-mode trigger, BR-RELOAD-09).
    Touch(std::path::PathBuf),
    /// `check`: the value captured as `capture` by an earlier step matches `pattern`. Lets one
    /// arrival be checked in parts, each part a step with its own `checks:` (that a log message
    /// arrived; then what its logger says).
    Check {
        capture: String,
        pattern: Pattern,
    },
    /// Bridge scenarios: whether a file exists at `{socket}` (`expect_socket: {exists: false}`,
    /// BR-LIFECYCLE-11); the scenario needs the feature `socket`.
    ExpectSocket {
        exists: bool,
    },
    /// Bridge scenarios: the socket the current tool process was given (`PROTOMCP_SOCKET`), as
    /// the mock found it before connecting, is private: in a directory only the user can access,
    /// or itself without permissions for group and others (BR-SECURITY-01).
    ExpectSocketPrivate,
    /// Bridge scenarios: a second connection to the current tool process's socket is refused,
    /// or closed by the bridge within the time (BR-CONN-05).
    ToolConnectAgain {
        within: Duration,
    },
    /// Bridge scenarios: the tool process whose connection ended last (`close`, `expect_close`)
    /// has exited within the time (BR-LIFECYCLE-08: a bridge ends one that closed its connection
    /// but lives on).
    ExpectToolExit {
        within: Duration,
    },
    /// Bridge scenarios over HTTP: an SSE comment line (`: …`) arrives within the time, on
    /// `stream` when given (BR-HTTP-36's keep-alive).
    HostExpectComment {
        stream: Option<HostStream>,
        within: Duration,
    },
    /// Bridge scenarios: the harness listens on a TCP port of 127.0.0.1 and binds its number to
    /// the capture `capture` (for a URI a bridge must not fetch, BR-SECURITY-09).
    TcpListen {
        capture: String,
    },
    /// Bridge scenarios: nothing has connected to the port of `tcp_listen`'s `listener` since it
    /// was opened, nor does during `duration`.
    ExpectNoTcpConnect {
        listener: String,
        duration: Duration,
    },
    /// Bridge scenarios: the peak resident memory of the bridge's own processes (its process
    /// group less the tool processes) is reset to what they hold now, which is remembered: the
    /// mark of [`Action::ExpectMemory`].
    MemoryMark,
    /// Bridge scenarios: since the last [`Action::MemoryMark`], the peak resident memory of the
    /// bridge's own processes has grown by less than `peak_growth_below_kib` KiB (BR-SECURITY-03).
    ExpectMemory {
        peak_growth_below_kib: u64,
    },
    /// Repeats a call mix while sampling the target's process group; a resource that grows with
    /// the rounds is a leak ([`Soak`]; the harness judges the samples).
    Soak(Soak),
    /// A step only proto-mcp scenarios have.
    ProtoMcp(crate::proto_mcp::PmAction),
}

/// A leak verdict reads at least this many samples after the warm-up; fewer: no verdict (the
/// loader refuses a soak that could not give them).
pub const LEAK_MIN_SAMPLES: usize = 4;

/// `soak`: `repeat` rounds; in each, every call of `mix` is sent (all in flight together) and
/// every answer awaited within `within`; the target's process group is sampled before the first
/// round and after every `sample_every` rounds; the samples at or after `warmup` rounds are
/// what the leak verdict reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Soak {
    pub repeat: u64,
    pub mix: Vec<SoakCall>,
    pub sample_every: u64,
    pub warmup: u64,
    pub within: Duration,
}

impl Soak {
    /// What one round is, for a rate, and how many of that unit a round holds: `cancelled
    /// call` and 5 for a mix of five cancels; `round of the mix (1 echo call, 1 cancelled call)`
    /// and 1 for a mix of kinds.
    pub fn unit(&self) -> (String, u32) {
        let n = u32::try_from(self.mix.len()).unwrap_or(u32::MAX);
        if self.mix.iter().all(|c| *c == self.mix[0]) {
            return (self.mix[0].unit().to_owned(), n);
        }
        let mut parts: Vec<String> = Vec::new();
        for (kind, _) in SoakCall::NAMES {
            let k = self.mix.iter().filter(|c| **c == kind).count();
            if k > 0 {
                let unit = kind.unit();
                parts.push(if k == 1 { format!("1 {unit}") } else { format!("{k} {unit}s") });
            }
        }
        (format!("round of the mix ({})", parts.join(", ")), 1)
    }
}

/// One call of a soak's mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoakCall {
    /// `echo` with a text: the result must be that text.
    Echo,
    /// `big` with [`SOAK_SIDEBAND_SIZE`] characters, above the sideband threshold: a result of
    /// that many `x` in any form (frame, sideband, stream).
    Sideband,
    /// `slow` with 1 step, then at once a CancelRequest for it. Its result may come in this
    /// round or a later one, or never (whether one comes is TP-CANCEL-03, judged by the cancel
    /// scenarios), but never twice; a round with cancelled calls ends with an `echo` (the
    /// fence) that must be answered (TP-CANCEL-06).
    Cancel,
    /// A ReloadRequest: its ReloadResponse and the burst (TP-RELOAD-01/02). Alone in a mix.
    Reload,
}

/// The `n` of a sideband-sized call: above `RAW_THRESHOLD` (65,536).
pub const SOAK_SIDEBAND_SIZE: u64 = 70_000;

impl SoakCall {
    pub const NAMES: [(SoakCall, &'static str); 4] = [
        (SoakCall::Echo, "echo"),
        (SoakCall::Sideband, "sideband"),
        (SoakCall::Cancel, "cancel"),
        (SoakCall::Reload, "reload"),
    ];

    pub fn unit(self) -> &'static str {
        match self {
            SoakCall::Echo => "echo call",
            SoakCall::Sideband => "sideband-sized result",
            SoakCall::Cancel => "cancelled call",
            SoakCall::Reload => "reload",
        }
    }
}

impl Action {
    /// A step only a bridge scenario has: host steps, the tool side's handshake and connections,
    /// the socket and the tool process's exit (the loader refuses it elsewhere).
    pub fn bridge_only(&self) -> bool {
        matches!(
            self,
            Action::HostSend(..)
                | Action::HostExpect(_)
                | Action::HostExpectNothing(_)
                | Action::HostHttp(_)
                | Action::HostClose
                | Action::ToolHandshake(_)
                | Action::ReloadBegins(_)
                | Action::Touch(_)
                | Action::ExpectSocket { .. }
                | Action::ExpectSocketPrivate
                | Action::ToolConnectAgain { .. }
                | Action::ExpectToolExit { .. }
                | Action::HostExpectComment { .. }
                | Action::TcpListen { .. }
                | Action::ExpectNoTcpConnect { .. }
                | Action::MemoryMark
                | Action::ExpectMemory { .. }
        ) || matches!(self, Action::Expect(e) if e.or_host.is_some())
    }

    /// Whether the step judges the target with the requirements it is given: it fails when the
    /// target does not do what it expects, and the failure breaks the step's `checks:` (else
    /// the scenario's requirements). The steps that only act (sends, `sleep`, `signal`,
    /// `close`, `touch`, `host_send`, `host_close`) do not: a write the peer did not take is
    /// judged by the next step that reads. The handshakes judge too, but name what they saw
    /// broken themselves: `handshake` (the first reply TP-HANDSHAKE-02, the burst
    /// TP-HANDSHAKE-09/10, the hidden tools TP-HANDSHAKE-12) unless it has a `tool_list`
    /// pattern, whose check is the scenario's (its `checks:` then stand for the whole step, see
    /// [`crate::Scenario::broken_by`]); `tool_handshake` at a start (BR-HANDSHAKE-01, -04; a
    /// burst after a ReloadRequest does not, and may be given `checks:`).
    pub fn judges(&self) -> bool {
        match self {
            Action::Handshake(h) => h.tool_list.is_some(),
            Action::Send(_)
            | Action::SendRaw(_)
            | Action::SendFrame(_)
            | Action::Sleep(_)
            | Action::Close(_)
            | Action::Signal(_)
            | Action::HostSend(..)
            | Action::HostClose
            | Action::Touch(_)
            | Action::TcpListen { .. }
            | Action::MemoryMark
            | Action::ToolHandshake(_) => false,
            Action::Expect(_)
            | Action::ExpectAnyOrder(_)
            | Action::ExpectNothing(_)
            | Action::ExpectClose { .. }
            | Action::ExpectExit(_)
            | Action::ExpectAlive { .. }
            | Action::ExpectNoConnect { .. }
            | Action::HostExpect(_)
            | Action::HostExpectNothing(_)
            | Action::HostHttp(_)
            | Action::ReloadBegins(_)
            | Action::Check { .. }
            | Action::ExpectSocket { .. }
            | Action::ExpectSocketPrivate
            | Action::ToolConnectAgain { .. }
            | Action::ExpectToolExit { .. }
            | Action::HostExpectComment { .. }
            | Action::ExpectNoTcpConnect { .. }
            | Action::ExpectMemory { .. }
            | Action::Soak(_) => true,
            Action::ProtoMcp(a) => a.judges(),
        }
    }

    /// A step only a tool-process scenario has (a bridge scenario uses `tool_handshake`).
    pub fn tool_process_only(&self) -> bool {
        matches!(self, Action::Handshake(_) | Action::ExpectAlive { .. } | Action::ExpectNoConnect { .. })
    }

    pub fn keyword(&self) -> &'static str {
        match self {
            Action::Handshake(_) => "handshake",
            Action::Send(_) => "send",
            Action::SendRaw(_) => "send_raw",
            Action::SendFrame(_) => "send_frame",
            Action::Expect(_) => "expect",
            Action::ExpectAnyOrder(_) => "expect_any_order",
            Action::ExpectNothing(_) => "expect_nothing",
            Action::ExpectClose { .. } => "expect_close",
            Action::ExpectExit(_) => "expect_exit",
            Action::ExpectAlive { .. } => "expect_alive",
            Action::ExpectNoConnect { .. } => "expect_no_connect",
            Action::Sleep(_) => "sleep",
            Action::Close(_) => "close",
            Action::Signal(_) => "signal",
            Action::HostSend(..) => "host_send",
            Action::HostExpect(_) => "host_expect",
            Action::HostExpectNothing(_) => "host_expect_nothing",
            Action::HostHttp(_) => "host_http",
            Action::HostClose => "host_close",
            Action::ToolHandshake(_) => "tool_handshake",
            Action::ReloadBegins(_) => "reload_begins",
            Action::Touch(_) => "touch",
            Action::Check { .. } => "check",
            Action::ExpectSocket { .. } => "expect_socket",
            Action::ExpectSocketPrivate => "expect_socket_private",
            Action::ToolConnectAgain { .. } => "tool_connect_again",
            Action::ExpectToolExit { .. } => "expect_tool_exit",
            Action::HostExpectComment { .. } => "host_expect_comment",
            Action::TcpListen { .. } => "tcp_listen",
            Action::ExpectNoTcpConnect { .. } => "expect_no_tcp_connect",
            Action::MemoryMark => "memory_mark",
            Action::ExpectMemory { .. } => "expect_memory",
            Action::Soak(_) => "soak",
            Action::ProtoMcp(a) => a.keyword(),
        }
    }

    /// Whether the step needs the protocol connection.
    pub fn needs_connection(&self) -> bool {
        !matches!(
            self,
            Action::ExpectExit(_)
                | Action::ExpectNoConnect { .. }
                | Action::Sleep(_)
                | Action::Signal(_)
                | Action::HostSend(..)
                | Action::HostExpect(_)
                | Action::HostExpectNothing(_)
                | Action::HostHttp(_)
                | Action::HostClose
                | Action::Touch(_)
                | Action::ExpectSocket { .. }
                | Action::Check { .. }
                | Action::ExpectToolExit { .. }
                | Action::HostExpectComment { .. }
                | Action::TcpListen { .. }
                | Action::ExpectNoTcpConnect { .. }
                | Action::MemoryMark
                | Action::ExpectMemory { .. }
        )
    }

    /// Whether the step writes to the connection.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Action::Handshake(_)
                | Action::Send(_)
                | Action::SendRaw(_)
                | Action::SendFrame(_)
                | Action::ExpectAlive { .. }
                | Action::ToolHandshake(_)
                | Action::ReloadBegins(_)
                | Action::Soak(_)
        ) || matches!(self, Action::ProtoMcp(a) if a.writes())
    }
}

/// The standard startup exchange (see scenarios/README.md for the exact algorithm).
#[derive(Debug, Clone)]
pub struct Handshake {
    /// The ListToolsRequest's rid.
    pub rid: String,
    /// Names of the one DisableToolsRequest expected right after the marker; `None`: `secret`
    /// when the target claims `hidden`, none otherwise. `Some(vec![])`: none.
    pub hidden: Option<Vec<String>>,
    /// Middleware names expected in the burst, in order; `None`: `guard, mirror, broken` with the
    /// middleware variant, none otherwise.
    pub middleware: Option<Vec<String>>,
    /// Pattern for the ToolListResponse (the `tool_list` arm's message).
    pub tool_list: Option<Pattern>,
    pub within: Duration,
}

/// What a `host_send` writes: a JSON-RPC message (placeholders filled in, written as compact
/// JSON) or a line of text exactly as given (malformed JSON included).
#[derive(Debug, Clone)]
pub enum SendLine {
    Json(serde_json::Value),
    Raw(String),
}

/// The next message the bridge writes on stdout (skipping notifications and requests whose
/// method is in `ignore`) must match `pattern`.
#[derive(Debug, Clone)]
pub struct HostExpect {
    pub pattern: Pattern,
    pub within: Duration,
    pub ignore: Vec<String>,
    /// Over HTTP: the stream the message must arrive on (`stream:`); `None`: any.
    pub stream: Option<HostStream>,
}

/// An HTTP stream of the host session (`host_expect.stream`).
#[derive(Debug, Clone, PartialEq)]
pub enum HostStream {
    /// The session's GET event stream (`stream: get`).
    Get,
    /// The response to the POST that carried the request with this JSON-RPC id
    /// (`stream: {request: ID}`), e.g. its event stream (BR-HTTP-14).
    Request(serde_json::Value),
}

/// Which `Mcp-Session-Id` a `host_http` request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpSessionRef {
    /// The session's id (once the bridge gave one), and its negotiated `MCP-Protocol-Version`.
    Current,
    /// No session headers.
    None,
    /// This id, verbatim.
    Literal(String),
}

/// One HTTP request sent by itself (its own connection), after every queued host send is done;
/// its status, headers (an object of lower-case names) and body (JSON when it parses, a string
/// otherwise) must match the patterns.
#[derive(Debug, Clone)]
pub struct HostHttp {
    pub method: String,
    /// `None`: the endpoint's path.
    pub path: Option<String>,
    /// Added to (or, with an empty value, removed from) the defaults.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub session: HttpSessionRef,
    pub within: Duration,
    pub status: Option<Pattern>,
    pub expect_headers: Option<Pattern>,
    pub expect_body: Option<Pattern>,
}

/// No message from the bridge (except methods in `ignore`) for `duration`.
#[derive(Debug, Clone)]
pub struct HostExpectNothing {
    pub duration: Duration,
    pub ignore: Vec<String>,
}

/// The tool side of the startup, played on the mock's connection: expect the ListToolsRequest
/// and answer it with `tools` (ToolDefinition trees), register each of `middleware`
/// (RegisterMiddlewareRequest trees, each acknowledgement awaited), send the handshake-complete
/// marker (unless `marker` is false) and the DisableToolsRequest for `hidden` (when non-empty),
/// then answer the list pulls that arrive (ListResources, ListResourceTemplates, ListPrompts)
/// with the given lists until all three are answered or `HANDSHAKE_QUIET` passes without one.
#[derive(Debug, Clone)]
pub struct ToolHandshake {
    pub tools: Vec<serde_json::Value>,
    pub resources: Vec<serde_json::Value>,
    pub resource_templates: Vec<serde_json::Value>,
    pub prompts: Vec<serde_json::Value>,
    pub middleware: Vec<serde_json::Value>,
    pub hidden: Vec<String>,
    pub marker: bool,
    pub within: Duration,
    /// The answers to the startup's list pulls are held back this long once the pulls stopped
    /// coming (a bridge must not answer a list before it has the list, BR-HANDSHAKE-09).
    pub hold_pulls: Option<Duration>,
}

/// `reload_begins`: the bridge begins a reload within `within`, by ending the tool process's
/// connection (a restart: a later tool-side step waits for the next process) or by sending a
/// ReloadRequest (answered with success, or with `refuse` as the failure; after success the next
/// `tool_handshake` plays the burst instead of a startup). BR-RELOAD-01 lets a bridge choose; a
/// scenario about one form names it in `form`, and a bridge that takes the other is SKIPped, not
/// failed.
#[derive(Debug, Clone)]
pub struct ReloadBegins {
    pub form: ReloadForm,
    pub refuse: Option<String>,
    pub within: Duration,
}

/// Which reloads a `reload_begins` step accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadForm {
    Any,
    Restart,
    Request,
}

/// A frame with a prefix that may lie.
#[derive(Debug, Clone)]
pub struct SendFrame {
    /// The length prefix; `None` = the true body length.
    pub length: Option<u32>,
    pub body: FrameBody,
}

#[derive(Debug, Clone)]
pub enum FrameBody {
    Hex(Vec<u8>),
    Envelope(Template),
}

/// The next frame from the peer (skipping arms in `ignore`) must match.
#[derive(Debug, Clone)]
pub struct Expect {
    pub pattern: Pattern,
    pub within: Duration,
    pub ignore: Vec<Arm>,
    /// `or_close: true`: instead of the frame, the peer may close the connection and exit within
    /// `T_PROMPT` (the alternative TP-FRAME-14 allows); staying open without the frame fails.
    pub or_close: bool,
    /// Bridge scenarios (`or_host`): instead of the frame, the host may get a message matching
    /// this first (a bridge that answers a call itself where the spec lets it forward or
    /// answer, BR-CALL-19); another host message fails the step at once.
    pub or_host: Option<OrHost>,
}

/// `expect.or_host`: the host message that may come instead of the frame, and the methods
/// (notifications, requests) passed over on the host side meanwhile.
#[derive(Debug, Clone)]
pub struct OrHost {
    pub pattern: Pattern,
    pub ignore: Vec<String>,
}

/// The next `patterns.len()` frames (skipping `ignore`) must match the patterns in some order.
#[derive(Debug, Clone)]
pub struct ExpectAnyOrder {
    pub patterns: Vec<Pattern>,
    pub within: Duration,
    pub ignore: Vec<Arm>,
}

/// No frame (except arms in `ignore`) arrives for `duration`, and the connection stays open.
#[derive(Debug, Clone)]
pub struct ExpectNothing {
    pub duration: Duration,
    pub ignore: Vec<Arm>,
}

/// The testee process ends within the time.
#[derive(Debug, Clone)]
pub struct ExpectExit {
    pub within: Duration,
    pub code: ExitCode,
    /// Pattern for everything the testee wrote to stderr (a string).
    pub stderr: Option<Pattern>,
    /// proto-mcp: the step passes at once when the target has this feature (`2gib`: the
    /// operator declared that the server accepts 2 GiB frames).
    pub unless: Option<String>,
}

/// The exit status a scenario accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    Any,
    /// Any non-zero status, or death by a signal the harness did not send (spec §1.6).
    NonZero,
    Exactly(i32),
}

impl ExitCode {
    /// Whether a process that ended with `status` (`None`: killed by a signal the harness did
    /// not send) satisfies this.
    pub fn accepts(self, status: Option<i32>) -> bool {
        match (self, status) {
            (ExitCode::Any, _) => true,
            (ExitCode::NonZero, Some(c)) => c != 0,
            (ExitCode::NonZero, None) => true,
            (ExitCode::Exactly(want), Some(c)) => c == want,
            (ExitCode::Exactly(_), None) => false,
        }
    }
}

/// How the harness closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CloseMode {
    /// `shutdown(SHUT_RDWR)` and drop the socket.
    #[default]
    Both,
    /// `shutdown(SHUT_WR)` only: the peer sees end-of-file, and the harness can still read.
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Int,
    Hup,
    Kill,
}

impl Signal {
    pub const NAMES: &'static [(&'static str, Signal)] =
        &[("TERM", Signal::Term), ("INT", Signal::Int), ("HUP", Signal::Hup), ("KILL", Signal::Kill)];
}
