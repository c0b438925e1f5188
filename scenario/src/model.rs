//! A loaded scenario: checked, with every envelope checked against the schema and every pattern
//! compiled, and each step keeping its place in the file. This is what the runner executes;
//! scenarios/README.md describes what each step means.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use protomcp_proto::envelopes::Arm;

use super::error::SourceLoc;
use super::pattern::Pattern;
use super::template::Template;
use super::yaml::Loc;
use crate::Misbehave;
use crate::requirements::{Level, Requirement};

/// The spec's times (§1.5): `T_PROMPT` is the default wait of `expect` and friends, `T_START`
/// the default wait of `handshake`.
pub use protomcp_proto::spec::{HANDSHAKE_QUIET, T_LISTCHANGE, T_PROMPT, T_START};

/// The named times a scenario may write instead of milliseconds.
pub const NAMED_TIMES: &[(&str, Duration)] = &[
    ("T_PROMPT", T_PROMPT),
    ("T_START", T_START),
    ("T_LISTCHANGE", T_LISTCHANGE),
    ("HANDSHAKE_QUIET", HANDSHAKE_QUIET),
];

/// The rid of the handshake's ListToolsRequest unless the step names one.
pub const DEFAULT_HANDSHAKE_RID: &str = "req-0";

/// The role under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    ToolProcess,
    /// A bridge under test: the harness plays the host (stdio) and, through the mock, the tool
    /// process.
    Bridge,
}

impl Role {
    pub fn party(self) -> crate::requirements::Party {
        match self {
            Role::ToolProcess => crate::requirements::Party::ToolProcess,
            Role::Bridge => crate::requirements::Party::Bridge,
        }
    }
}

/// How the harness reaches a bridge under test (`--bridge-transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// One MCP session on the bridge's stdin/stdout.
    Stdio,
    /// Streamable HTTP: POST, JSON or SSE responses, a GET event stream, DELETE to end.
    Http,
}

impl Transport {
    pub const ALL: [Transport; 2] = [Transport::Stdio, Transport::Http];

    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }

    pub fn parse(s: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// One scenario file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it was loaded from (as given to the loader).
    pub file: PathBuf,
    pub id: String,
    /// Where `id`'s value is.
    pub id_loc: Loc,
    pub title: String,
    /// The requirements it checks, in the order cited.
    pub requirements: Vec<&'static Requirement>,
    /// The verdict level: a failure is FAIL for MUST, WARN for SHOULD, informational for MAY.
    pub level: Level,
    pub role: Role,
    /// Features the target must claim, or the scenario is skipped.
    pub needs: Vec<String>,
    pub notes: Option<String>,
    /// Budget of the whole scenario, when it sets one.
    pub timeout: Option<Duration>,
    pub testee: TesteeSetup,
    /// Bridge scenarios: who answers requests the bridge sends to the host.
    pub host_requests: HostRequests,
    /// Bridge scenarios: the harness writes a plain file at `{socket}` before the bridge starts
    /// (`stale_socket: true`, BR-CONN-04).
    pub stale_socket: bool,
    /// Bridge scenarios: `{socket}`, `TMPDIR` and `XDG_RUNTIME_DIR` point into `{dir}/shared`, a
    /// directory everyone may enter and write (mode 1777, like /tmp), instead of the private
    /// scenario dir (`shared_tmp: true`): the socket is private only if the bridge makes it so
    /// (BR-SECURITY-01).
    pub shared_tmp: bool,
    /// Bridge scenarios: the transports the scenario applies to (`transports:`); empty: all.
    pub transports: Vec<Transport>,
    /// Runs alone (`exclusive: true`): no other scenario of the run runs at the same time. For
    /// scenarios that load the machine (payloads of tens of MiB), so that their load does not
    /// make the deadlines of scenarios beside them miss.
    pub exclusive: bool,
    pub steps: Vec<Step>,
}

/// Who answers the requests a bridge sends to the host (`sampling/createMessage`, `roots/list`,
/// `ping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostRequests {
    /// The driver answers at once: `ping` with `{}`, everything else with -32601.
    #[default]
    Auto,
    /// Nobody but the script: a `host_expect` sees the request (capture its `id`) and a
    /// `host_send` answers it, or leaves it unanswered.
    Manual,
}

impl HostRequests {
    pub const NAMES: &'static [(&'static str, HostRequests)] =
        &[("auto", HostRequests::Auto), ("manual", HostRequests::Manual)];
}

impl Scenario {
    /// A soak scenario (it has a `soak` step: thousands of calls while the target's resources
    /// are sampled): it runs only when asked for (`--soak`, or named by `--only`/`--scenarios`).
    pub fn is_soak(&self) -> bool {
        self.steps.iter().any(|st| matches!(st.action, Action::Soak(_)))
    }

    /// The requirements broken when step `index` fails: the step's `checks`, else what the step
    /// found out itself (`found`, e.g. which part of a handshake went wrong), else the scenario's.
    /// A failure after the last step (`index` past the end) is the scenario's unless `found` says.
    pub fn broken_by(&self, index: Option<usize>, found: &[&'static str]) -> Vec<String> {
        let explicit = index.and_then(|i| self.steps.get(i)).map(|st| st.checks.as_slice()).unwrap_or(&[]);
        if !explicit.is_empty() {
            return explicit.iter().map(|r| r.id.to_owned()).collect();
        }
        if !found.is_empty() {
            return found.iter().map(|id| (*id).to_owned()).collect();
        }
        self.requirements.iter().map(|r| r.id.to_owned()).collect()
    }

    /// The time the scenario is sure to spend waiting on purpose: its sleeps and quiet windows
    /// (`sleep`, `expect_nothing`, `host_expect_nothing`, `expect_no_connect`). The runner starts
    /// the longest first, so that a parallel run is not stretched by one started last.
    pub fn fixed_waits(&self) -> Duration {
        self.steps
            .iter()
            .map(|st| match &st.action {
                Action::Sleep(d) => *d,
                Action::ExpectNothing(e) => e.duration,
                Action::HostExpectNothing(e) => e.duration,
                Action::ExpectNoConnect { duration } => *duration,
                _ => Duration::ZERO,
            })
            .sum()
    }

    /// The requirements shown to hold before step `index` failed: those that steps before it name
    /// in `checks:` (each such step passed), less the ones `broken`.
    pub fn held_before(&self, index: Option<usize>, broken: &[String]) -> Vec<String> {
        let Some(i) = index else { return Vec::new() };
        let mut out: Vec<String> = Vec::new();
        for r in self.steps.iter().take(i).flat_map(|st| st.checks.iter()) {
            if !broken.iter().any(|b| b == r.id) && !out.iter().any(|o| o == r.id) {
                out.push(r.id.to_owned());
            }
        }
        out
    }

    /// Every requirement a step or the scenario names (for coverage).
    pub fn all_requirements(&self) -> Vec<&'static Requirement> {
        let mut out: Vec<&'static Requirement> = self.requirements.clone();
        for r in self.steps.iter().flat_map(|st| st.checks.iter()) {
            if !out.iter().any(|o| o.id == r.id) {
                out.push(r);
            }
        }
        out
    }

    /// `file:line:col` of a place in this scenario's file.
    pub fn at(&self, loc: Loc) -> SourceLoc {
        SourceLoc { file: self.file.clone(), loc }
    }

    /// Whether the testee is expected to connect at all.
    pub fn connects(&self) -> bool {
        self.testee.socket == SocketSetup::Normal
    }
}

/// How the testee is started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TesteeSetup {
    /// Start the middleware variant (Appendix B.3).
    pub middleware: bool,
    /// Extra environment: `Some(value)` sets, `None` removes the variable.
    pub env: BTreeMap<String, Option<String>>,
    /// A hostile mode of the reference testee: such a scenario is a self-test of the harness
    /// and only runs against the reference.
    pub misbehave: Option<Misbehave>,
    pub socket: SocketSetup,
}

/// What `PROTOMCP_SOCKET` holds when the testee starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SocketSetup {
    /// The path of the harness's listening socket.
    #[default]
    Normal,
    /// The variable is not set.
    Unset,
    /// The variable is set to "".
    Empty,
    /// An absolute path where nothing exists.
    Missing,
    /// An absolute path of a regular file.
    NotASocket,
    /// An absolute path of a unix socket nobody listens on.
    Refused,
}

impl SocketSetup {
    pub const NAMES: &'static [(&'static str, SocketSetup)] = &[
        ("normal", SocketSetup::Normal),
        ("unset", SocketSetup::Unset),
        ("empty", SocketSetup::Empty),
        ("missing", SocketSetup::Missing),
        ("not_a_socket", SocketSetup::NotASocket),
        ("refused", SocketSetup::Refused),
    ];
}

/// One step, with where it starts in the file.
#[derive(Debug, Clone)]
pub struct Step {
    pub loc: Loc,
    pub action: Action,
    /// The requirements this step checks (`checks:`); empty: the scenario's.
    pub checks: Vec<&'static Requirement>,
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
    HostSend(HostLine),
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
    /// Repeats a call mix while sampling the target's process group; a resource that grows with
    /// the rounds is a leak ([`Soak`]; the harness judges the samples).
    Soak(Soak),
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
            Action::HostSend(_)
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
        )
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
            Action::HostSend(_) => "host_send",
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
            Action::Soak(_) => "soak",
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
                | Action::HostSend(_)
                | Action::HostExpect(_)
                | Action::HostExpectNothing(_)
                | Action::HostHttp(_)
                | Action::HostClose
                | Action::Touch(_)
                | Action::ExpectSocket { .. }
                | Action::Check { .. }
                | Action::ExpectToolExit { .. }
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
        )
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
pub enum HostLine {
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
