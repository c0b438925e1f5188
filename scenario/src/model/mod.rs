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

mod step;
mod unattributed;

pub use step::*;
pub use unattributed::UNATTRIBUTED;

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

/// The protocol a scenario is written for (`profile:`; default `protomcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// protomcp: a tool process or a bridge, requirements TP-*/BR-*.
    #[default]
    Protomcp,
    /// proto-mcp (`buf.mcp.v1`): a server the harness starts as a child and plays the client
    /// of, requirements PM-* ([`crate::proto_mcp`]).
    ProtoMcp,
}

impl Profile {
    pub const NAMES: &'static [(&'static str, Profile)] =
        &[("protomcp", Profile::Protomcp), ("proto-mcp", Profile::ProtoMcp)];

    pub fn name(self) -> &'static str {
        Profile::NAMES.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every profile is named")
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
    pub profile: Profile,
    /// The role under test (protomcp; a proto-mcp scenario's is `ToolProcess` and unused: its
    /// server is the only role of that profile).
    pub role: Role,
    /// Features the target must claim, or the scenario is skipped.
    pub needs: Vec<String>,
    /// Features the target must not have, or the scenario is skipped (`unless:`, proto-mcp).
    pub unless: Vec<String>,
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
    /// About how long the scenario runs against the reference targets (`duration_ms:`), for
    /// one whose fixed waits ([`Scenario::fixed_waits`]) do not show it: a step waiting out the
    /// target's own bounded wait. Only the order of a run reads it (the longest start first).
    pub duration: Option<Duration>,
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

    /// Whether a failure of step `index` that broke `broken` means the scenario was not reached
    /// (BLOCKED) rather than failed: the step is a precondition step (`handshake`,
    /// `tool_handshake`, or a step whose `checks:` name only precondition requirements), or the
    /// failure was the connect itself; what broke is only precondition requirements
    /// ([`crate::requirements::is_precondition`]); and none of them is among the scenario's own
    /// `requirements:` (a handshake scenario that fails its handshake has failed).
    pub fn is_precondition_failure(&self, index: Option<usize>, broken: &[String]) -> bool {
        use crate::requirements::is_precondition;
        let Some(step) = index.and_then(|i| self.steps.get(i)) else { return false };
        if broken.is_empty()
            || !broken.iter().all(|b| is_precondition(b))
            || broken.iter().any(|b| self.requirements.iter().any(|r| r.id == b))
        {
            return false;
        }
        let connect = broken.iter().all(|b| matches!(b.as_str(), "TP-CONN-01" | "BR-CONN-01"));
        let by_kind = matches!(step.action, Action::Handshake(_) | Action::ToolHandshake(_));
        let by_checks = !step.checks.is_empty() && step.checks.iter().all(|r| is_precondition(r.id));
        connect || by_kind || by_checks
    }

    /// The requirements broken when step `index` fails: what the runner found out itself
    /// (`found`: which part of a handshake went wrong, a non-JSON line on the bridge's stdout, a
    /// cursor that does not end), else the step's `checks`, else the scenario's. `found` comes
    /// first because it names a requirement that broke whatever the step is about. A failure
    /// after the last step (`index` past the end) is the scenario's unless `found` says.
    pub fn broken_by(&self, index: Option<usize>, found: &[&'static str]) -> Vec<String> {
        if !found.is_empty() {
            return found.iter().map(|id| (*id).to_owned()).collect();
        }
        let explicit = index.and_then(|i| self.steps.get(i)).map(|st| st.checks.as_slice()).unwrap_or(&[]);
        if !explicit.is_empty() {
            return explicit.iter().map(|r| r.id.to_owned()).collect();
        }
        self.requirements.iter().map(|r| r.id.to_owned()).collect()
    }

    /// The steps that judge the target ([`Action::judges`]) without naming what they check
    /// (`checks:`) in a scenario that cites more than one requirement: a failure there would
    /// name every requirement of the scenario. The loader refuses such a scenario unless its id
    /// is in [`UNATTRIBUTED`].
    pub fn unattributed_steps(&self) -> Vec<&Step> {
        if self.requirements.len() < 2 {
            return Vec::new();
        }
        self.steps.iter().filter(|st| st.action.judges() && st.checks.is_empty()).collect()
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

    /// How long the scenario is quiet right after it starts: the fixed wait (a sleep or a quiet
    /// window) that follows its handshake steps, when nothing else comes before it; zero when
    /// some other step does. Only the order of a run reads it: such a scenario may keep an
    /// exclusive one company while it waits (it neither loads the machine nor has a deadline
    /// there).
    pub fn quiet_after_start(&self) -> Duration {
        let mut steps =
            self.steps.iter().skip_while(|st| matches!(st.action, Action::Handshake(_) | Action::ToolHandshake(_)));
        match steps.next().map(|st| &st.action) {
            Some(Action::Sleep(d)) => *d,
            Some(Action::ExpectNothing(e)) => e.duration,
            Some(Action::HostExpectNothing(e)) => e.duration,
            _ => Duration::ZERO,
        }
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
    /// proto-mcp: start the server with only PATH and HOME (a fresh temp dir) in its
    /// environment (`clean_env: true`).
    pub clean_env: bool,
    /// `hidden: false`: the fixture of a tool process that does not declare `hidden`, so no
    /// tool is hidden (the reference testee with `--no-hidden`; a target that claims `hidden`
    /// has no such start and SKIPs).
    pub nothing_hidden: bool,
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
