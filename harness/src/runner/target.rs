//! What runs the scenarios: the bundled reference testee, a command, or an SDK's manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::requirements::TP_FEATURES;
use crate::scenario::{Action, Profile, Role, Scenario, SocketSetup};

/// How the harness reaches the bridge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BridgeTransport {
    /// MCP lines on the bridge's stdin and stdout.
    #[default]
    Stdio,
    /// Streamable HTTP at `url` (placeholders as in the command, `{port}` above all).
    Http { url: String },
}

/// The URL of `--bridge-transport http` without `--bridge-url`.
pub const DEFAULT_URL: &str = "http://127.0.0.1:{port}/mcp";

impl BridgeTransport {
    pub fn scenario_transport(&self) -> crate::scenario::Transport {
        match self {
            BridgeTransport::Stdio => crate::scenario::Transport::Stdio,
            BridgeTransport::Http { .. } => crate::scenario::Transport::Http,
        }
    }
}

/// Known failures: scenario id (or [`ANY_SCENARIO`]) → its entries (one per check where it fails).
pub type KnownFailures = BTreeMap<String, Vec<super::verdict::KnownFailure>>;

/// How the testee is started.
#[derive(Debug, Clone)]
pub enum TargetKind {
    /// The reference testee of this binary: `exe testee [--middleware] [--misbehave K]
    /// [--fault NAME]`; `fault` is for `adequacy` (one fault of the catalogue switched on).
    Reference { exe: PathBuf, fault: Option<protomcp_proto::fault::Fault> },
    /// A command of an SDK's testee; `middleware_command` starts its middleware variant.
    Command { argv: Vec<String>, middleware_command: Option<Vec<String>> },
    /// A bridge under test, started per `role: bridge` scenario and driven over `transport`;
    /// `argv` may hold the placeholders of [`super::bridge::PLACEHOLDERS`]; `exe` is this binary
    /// (it runs the mock).
    Bridge { argv: Vec<String>, exe: PathBuf, transport: BridgeTransport },
    /// The reference testee served by a task of this process (for tests of the harness): only
    /// scenarios with the normal socket, no extra environment and no misbehaviour.
    InProcess,
    /// A server of another profile (proto-mcp), which runs one scenario of its profile by
    /// itself; selection, parallelism, repeats, known failures, folding and reports stay the
    /// runner's.
    Profile(Arc<dyn ProfileServer>),
}

/// The part of a run that depends on the profile: run one scenario against the server, in a
/// fresh process, and judge it with the known failure given (blocking; the runner calls it on a
/// blocking thread, `jobs` at a time).
pub trait ProfileServer: std::fmt::Debug + Send + Sync {
    /// The profile whose scenarios it runs.
    fn profile(&self) -> Profile;
    fn run_one(&self, s: &Scenario, known: &[super::verdict::KnownFailure]) -> super::CaseResult;
}

/// A target: what to start, what it claims, what it is known to fail.
#[derive(Debug, Clone)]
pub struct Target {
    /// Shown in reports.
    pub name: String,
    pub kind: TargetKind,
    pub features: Vec<String>,
    pub known_failures: KnownFailures,
    /// Extra environment of every testee.
    pub env: BTreeMap<String, Option<String>>,
    /// Working directory of every testee (a manifest's directory); `None`: the harness's own.
    pub cwd: Option<PathBuf>,
    /// Features the target cannot express, with the reason (shown in the SKIP).
    pub unsupported: BTreeMap<String, String>,
    /// Scenarios the target cannot express, with the reason (shown in the SKIP).
    pub skip: BTreeMap<String, String>,
    /// Run once (in `cwd`) before the scenarios.
    pub build: Option<Vec<String>>,
}

impl Target {
    /// The reference testee at `exe` (normally this binary), claiming every feature.
    pub fn reference(exe: PathBuf) -> Target {
        Target {
            name: "reference testee".into(),
            kind: TargetKind::Reference { exe, fault: None },
            features: TP_FEATURES.iter().map(|f| f.to_string()).collect(),
            known_failures: KnownFailures::new(),
            env: BTreeMap::new(),
            cwd: None,
            unsupported: BTreeMap::new(),
            skip: BTreeMap::new(),
            build: None,
        }
    }

    /// The reference testee in-process.
    pub fn in_process() -> Target {
        Target {
            name: "reference testee (in-process)".into(),
            kind: TargetKind::InProcess,
            ..Target::reference("".into())
        }
    }

    /// A server of another profile (`name` for reports), with its known failures.
    pub fn profile(name: String, server: Arc<dyn ProfileServer>, known_failures: KnownFailures) -> Target {
        Target {
            name,
            kind: TargetKind::Profile(server),
            features: Vec::new(),
            known_failures,
            ..Target::reference("".into())
        }
    }

    /// A command line (split on whitespace) claiming every feature.
    pub fn command(argv: Vec<String>) -> Target {
        Target {
            name: argv.join(" "),
            kind: TargetKind::Command { argv, middleware_command: None },
            ..Target::reference("".into())
        }
    }

    /// A bridge command line (placeholders unexpanded); `exe` runs the mock.
    pub fn bridge(argv: Vec<String>, exe: PathBuf) -> Target {
        Target {
            name: argv.join(" "),
            kind: TargetKind::Bridge { argv, exe, transport: BridgeTransport::Stdio },
            features: Vec::new(),
            ..Target::reference("".into())
        }
    }

    /// The known-failures entries that apply to scenario `id`: its own, then the target-wide
    /// ones (key [`ANY_SCENARIO`]).
    pub fn known(&self, id: &str) -> Vec<super::verdict::KnownFailure> {
        let own = self.known_failures.get(id).into_iter().flatten();
        own.chain(self.known_failures.get(ANY_SCENARIO).into_iter().flatten()).cloned().collect()
    }

    /// The command that starts the testee for `s`, or why `s` is skipped.
    pub fn plan(&self, s: &Scenario) -> Result<Vec<String>, Skip> {
        match (&self.kind, s.profile) {
            (TargetKind::Profile(p), profile) if p.profile() == profile => return Ok(Vec::new()),
            (TargetKind::Profile(p), profile) => return Err(Skip::OtherProfile(profile.name(), p.profile().name())),
            (_, Profile::ProtoMcp) => return Err(Skip::ProtoMcpScenario),
            _ => {}
        }
        match (&self.kind, s.role) {
            (TargetKind::Bridge { argv, transport, .. }, Role::Bridge) => {
                let t = transport.scenario_transport();
                if !s.transports.is_empty() && !s.transports.contains(&t) {
                    let only: Vec<&str> = s.transports.iter().map(|t| t.name()).collect();
                    return Err(Skip::OtherTransport { only: only.join(", "), driven: t.name() });
                }
                let missing: Vec<&str> =
                    s.needs.iter().filter(|n| !self.features.contains(n)).map(String::as_str).collect();
                if !missing.is_empty() {
                    return Err(Skip::NotClaimed { party: "bridge", features: missing.join(", ") });
                }
                if let Some(why) = self.skip.get(&s.id) {
                    return Err(Skip::CannotExpress(why.clone()));
                }
                return Ok(argv.clone());
            }
            (TargetKind::Bridge { .. }, _) => return Err(Skip::ToolProcessScenario),
            (_, Role::Bridge) => return Err(Skip::BridgeScenario),
            _ => {}
        }
        if let Some(why) = self.skip.get(&s.id) {
            return Err(Skip::CannotExpress(why.clone()));
        }
        let missing: Vec<&str> = s.needs.iter().filter(|n| !self.features.contains(n)).map(String::as_str).collect();
        if let Some((f, why)) = missing.iter().find_map(|f| self.unsupported.get(*f).map(|w| (f, w))) {
            return Err(Skip::Unsupported { feature: f.to_string(), why: why.clone() });
        }
        if !missing.is_empty() {
            return Err(Skip::NotClaimed { party: "target", features: missing.join(", ") });
        }
        match &self.kind {
            TargetKind::Reference { exe, fault } => {
                let mut argv = vec![exe.display().to_string(), "testee".into()];
                if let Some(f) = fault {
                    argv.push("--fault".into());
                    argv.push(f.name().into());
                }
                if s.testee.middleware {
                    argv.push("--middleware".into());
                }
                if s.testee.nothing_hidden {
                    argv.push("--no-hidden".into());
                }
                if let Some(m) = s.testee.misbehave {
                    argv.push("--misbehave".into());
                    argv.push(m.name().into());
                }
                Ok(argv)
            }
            TargetKind::Command { argv, middleware_command } => {
                if s.testee.misbehave.is_some() {
                    return Err(Skip::SelfTest);
                }
                if s.testee.nothing_hidden && self.features.iter().any(|f| f == "hidden") {
                    return Err(Skip::CannotExpress(
                        "the target claims `hidden`, so its fixture hides `secret`; the scenario needs a start with nothing hidden".into(),
                    ));
                }
                if s.testee.middleware {
                    return middleware_command.clone().ok_or(Skip::NoMiddlewareCommand);
                }
                Ok(argv.clone())
            }
            TargetKind::InProcess => {
                let stderr = s.steps.iter().any(|st| matches!(&st.action, Action::ExpectExit(x) if x.stderr.is_some()));
                if s.testee.misbehave.is_some()
                    || s.testee.socket != SocketSetup::Normal
                    || !s.testee.env.is_empty()
                    || stderr
                {
                    return Err(Skip::NeedsProcess);
                }
                Ok(Vec::new())
            }
            TargetKind::Bridge { argv, .. } => Ok(argv.clone()),
            TargetKind::Profile(_) => Ok(Vec::new()),
        }
    }
}

/// Why a scenario does not run against a target (a SKIP, not a failure of anyone).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Skip {
    #[error("runs only over {only} (transports:), the bridge is driven over {driven}")]
    OtherTransport { only: String, driven: &'static str },
    #[error("feature not claimed by the {party}: {features}")]
    NotClaimed { party: &'static str, features: String },
    #[error("feature `{feature}` not supported by the target: {why}")]
    Unsupported { feature: String, why: String },
    #[error("the target cannot express this scenario: {0}")]
    CannotExpress(String),
    #[error("a tool-process scenario; the target is a bridge")]
    ToolProcessScenario,
    #[error("a bridge scenario: runs with --bridge")]
    BridgeScenario,
    #[error("a self-test of the harness (misbehave): runs only against the reference testee")]
    SelfTest,
    #[error("needs the middleware variant: the manifest has no middleware_command")]
    NoMiddlewareCommand,
    #[error("needs a testee process (in-process target)")]
    NeedsProcess,
    #[error("a proto-mcp scenario: runs with --profile proto-mcp")]
    ProtoMcpScenario,
    #[error("a {0} scenario; the target is a {1} server")]
    OtherProfile(&'static str, &'static str),
}

impl Target {
    /// Runs the target's `build` command, if any, in its directory; on failure the error holds the
    /// command, its status and the tail of its output.
    pub fn run_build(&self) -> Result<(), TargetError> {
        let Some(argv) = &self.build else { return Ok(()) };
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(std::process::Stdio::null());
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        // Output goes to a temp file (its tail is shown on failure), so a chatty build costs no
        // memory; a build that does not finish within BUILD_TIMEOUT is killed.
        let shown = argv.join(" ");
        let no_log = TargetError::BuildLog;
        let mut log = tempfile::tempfile().map_err(no_log)?;
        cmd.stdout(log.try_clone().map_err(no_log)?).stderr(log.try_clone().map_err(no_log)?);
        let mut child = cmd.spawn().map_err(|source| TargetError::BuildNotRun { command: shown.clone(), source })?;
        let deadline = std::time::Instant::now() + BUILD_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if std::time::Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
                Err(source) => return Err(TargetError::BuildNotRun { command: shown, source }),
            }
        };
        if status.is_some_and(|s| s.success()) {
            return Ok(());
        }
        let tail = tail_of(&mut log, 30);
        let why = match status {
            Some(s) => s.to_string(),
            None => format!("killed after {} s without finishing", BUILD_TIMEOUT.as_secs()),
        };
        Err(TargetError::BuildFailed { command: shown, why, tail })
    }
}

/// Why a target's configuration cannot be used: its manifest, its known-failures file or its
/// build command (the user's setup, never the target's protocol behaviour).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// What a manifest or known-failures file says wrong; `at` is its path or `path:line:col`.
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
    #[error("cannot create a log for the build: {0}")]
    BuildLog(std::io::Error),
    #[error("cannot run the build command `{command}`: {source}")]
    BuildNotRun { command: String, source: std::io::Error },
    #[error("the build command `{command}` failed ({why}):\n{tail}")]
    BuildFailed { command: String, why: String, tail: String },
}

impl TargetError {
    /// The error of reading `path`.
    pub fn read(path: &Path) -> impl FnOnce(std::io::Error) -> TargetError + '_ {
        move |source| TargetError::Read { path: path.to_path_buf(), source }
    }
}

/// How long a manifest's `build` may take.
pub const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// The last `lines` lines of the last 64 KiB of `f`.
fn tail_of(f: &mut std::fs::File, lines: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024))).is_ok() {
        let _ = f.read_to_end(&mut buf);
    }
    let text = String::from_utf8_lossy(&buf);
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// `protomcp-conform.toml` of an SDK's testee.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// argv of the testee.
    pub command: Vec<String>,
    /// argv of its middleware variant.
    #[serde(default)]
    pub middleware_command: Option<Vec<String>>,
    /// Features claimed.
    #[serde(default)]
    pub features: Vec<String>,
    /// Known-failures file, relative to the manifest's directory.
    #[serde(default)]
    pub known_failures: Option<PathBuf>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Shown in reports.
    #[serde(default)]
    pub name: Option<String>,
    /// Run once in the manifest's directory before the scenarios (e.g. a compiler).
    #[serde(default)]
    pub build: Option<Vec<String>>,
    /// Features the SDK's public API cannot express: feature → reason.
    #[serde(default)]
    pub unsupported: BTreeMap<String, String>,
    /// Scenarios the SDK's public API cannot express: scenario id → reason.
    #[serde(default)]
    pub skip: BTreeMap<String, String>,
}

impl Manifest {
    /// Reads `dir/protomcp-conform.toml` into a target; relative paths in it are taken from `dir`.
    pub fn load_target(dir: &Path) -> Result<Target, TargetError> {
        // The testee and the build run with `dir` as their working directory, so a command given
        // relative to it must not stay relative to ours.
        let dir = &std::path::absolute(dir).map_err(TargetError::read(dir))?;
        let path = dir.join("protomcp-conform.toml");
        let text = std::fs::read_to_string(&path).map_err(TargetError::read(&path))?;
        let invalid = |message: String| TargetError::Invalid { at: path.display().to_string(), message };
        let m: Manifest = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if m.command.is_empty() {
            return Err(invalid("`command` is empty".into()));
        }
        for f in m.features.iter().chain(m.unsupported.keys()) {
            if !TP_FEATURES.contains(&f.as_str()) {
                return Err(invalid(format!("unknown feature `{f}`; valid: {}", TP_FEATURES.join(", "))));
            }
        }
        if let Some(f) = m.features.iter().find(|f| m.unsupported.contains_key(*f)) {
            return Err(invalid(format!("feature `{f}` is both claimed and listed as unsupported")));
        }
        let resolve = |argv: Vec<String>| -> Vec<String> {
            let mut argv = argv;
            if argv[0].contains('/') && !Path::new(&argv[0]).is_absolute() {
                argv[0] = dir.join(&argv[0]).display().to_string();
            }
            argv
        };
        let known_failures = match &m.known_failures {
            Some(p) => load_known_failures(&dir.join(p))?,
            None => KnownFailures::new(),
        };
        Ok(Target {
            name: m.name.clone().unwrap_or_else(|| dir.display().to_string()),
            kind: TargetKind::Command {
                argv: resolve(m.command),
                middleware_command: m.middleware_command.filter(|c| !c.is_empty()).map(resolve),
            },
            features: m.features,
            known_failures,
            env: m.env.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            cwd: Some(dir.to_path_buf()),
            unsupported: m.unsupported,
            skip: m.skip,
            build: m.build.filter(|b| !b.is_empty()),
        })
    }
}

/// The key of target-wide entries in a known-failures file: a deviation an observer finds in
/// whichever scenario happens to provoke it (e.g. a notification the target sends on its own
/// timer). Such an entry pins an observer's rule and is intermittent: a case where it does not
/// occur passes; [`target_wide_lines`] says which ones a whole run needed, and how often.
pub const ANY_SCENARIO: &str = "*";

/// The form of an entry, for messages.
const ENTRY_FORM: &str = "each entry is `scenario.id: {requirement: ID or [ID, ...], check: step N, reason: \"what the target does instead\"}` \
     (optional `intermittent: true`), or a list of such entries; under the key \"*\" (any scenario), entries with `check: rule NAME` and `intermittent: true`";

/// Reads a known-failures file: a YAML mapping of scenario id → one entry or a list of entries,
/// each `{requirement, check, reason[, intermittent]}` (see [`parse_known_failures`]).
pub fn load_known_failures(path: &Path) -> Result<KnownFailures, TargetError> {
    let text = std::fs::read_to_string(path).map_err(TargetError::read(path))?;
    parse_known_failures(path, &text)
}

/// Parses the text of a known-failures file; `path` names it in errors, which point at
/// `path:line:col`. Every requirement must exist in the spec; `check` is `step N`, `rule NAME`
/// or `end` ([`super::verdict::Check`]); a scenario's entries must pin different checks or
/// requirements.
pub fn parse_known_failures(path: &Path, text: &str) -> Result<KnownFailures, TargetError> {
    use crate::scenario::yaml::{NodeKind, parse_node};
    let at = |loc: crate::scenario::Loc| format!("{}:{loc}", path.display());
    let invalid = |loc: crate::scenario::Loc, message: String| TargetError::Invalid { at: at(loc), message };
    let root = parse_node(text).map_err(|(loc, m)| invalid(loc, m))?;
    let mut out = KnownFailures::new();
    let entries = match &root.kind {
        NodeKind::Null => return Ok(out),
        NodeKind::Map(m) => m,
        other => {
            return Err(invalid(
                root.loc,
                format!("expected a mapping of scenario id to entries, found {}", other.describe()),
            ));
        }
    };
    for (id, node) in entries {
        let list: Vec<&crate::scenario::yaml::Node> = match &node.kind {
            NodeKind::Seq(items) if items.is_empty() => {
                return Err(invalid(node.loc, format!("{}: an empty list of entries\n  {ENTRY_FORM}", id.name)));
            }
            NodeKind::Seq(items) => items.iter().collect(),
            _ => vec![node],
        };
        let mut parsed: Vec<super::verdict::KnownFailure> = Vec::new();
        for n in list {
            let mut k = known_entry(n, &id.name, &at)?;
            k.anywhere = id.name == ANY_SCENARIO;
            if id.name == ANY_SCENARIO && !(matches!(k.check, Some(super::verdict::Check::Rule(_))) && k.intermittent) {
                return Err(invalid(
                    n.loc,
                    "`*`: a target-wide entry pins an observer's rule and may not occur in every scenario: \
                     write `check: rule NAME` and `intermittent: true`"
                        .to_owned(),
                ));
            }
            if parsed.iter().any(|p| p.check == k.check && p.requirement == k.requirement) {
                return Err(invalid(n.loc, format!("{}: a second entry for {}", id.name, k.head())));
            }
            parsed.push(k);
        }
        out.insert(id.name.clone(), parsed);
    }
    Ok(out)
}

/// One entry of scenario `id` (`at` makes a node's `file:line:col`).
fn known_entry(
    n: &crate::scenario::yaml::Node,
    id: &str,
    at: &dyn Fn(crate::scenario::Loc) -> String,
) -> Result<super::verdict::KnownFailure, TargetError> {
    use crate::scenario::yaml::NodeKind;
    let invalid = |loc, message: String| TargetError::Invalid { at: at(loc), message };
    let Some(map) = n.as_map() else {
        return Err(invalid(n.loc, format!("{id}: expected an entry, found {}\n  {ENTRY_FORM}", n.kind.describe())));
    };
    let mut k = super::verdict::KnownFailure { at: at(n.loc), ..Default::default() };
    let (mut has_check, mut has_reason) = (false, false);
    for (key, v) in map {
        let text = |what: &str| {
            v.as_str().map(str::to_owned).ok_or_else(|| {
                invalid(v.loc, format!("{id}: `{}` must be {what}, found {}", key.name, v.kind.describe()))
            })
        };
        match key.name.as_str() {
            "requirement" => {
                let ids: Vec<&crate::scenario::yaml::Node> = match &v.kind {
                    NodeKind::Seq(items) => items.iter().collect(),
                    _ => vec![v],
                };
                for r in ids {
                    let Some(r_id) = r.as_str() else {
                        return Err(invalid(
                            r.loc,
                            format!("{id}: a requirement is an ID, found {}", r.kind.describe()),
                        ));
                    };
                    if crate::requirements::get(r_id).is_none() {
                        return Err(invalid(r.loc, format!("{id}: `{r_id}` is not a requirement of the spec")));
                    }
                    k.requirement.push(r_id.to_owned());
                }
            }
            "check" => {
                let c = text("`step N`, `rule NAME` or `end`")?;
                k.check =
                    Some(c.parse().map_err(|e: super::verdict::CheckError| invalid(v.loc, format!("{id}: {e}")))?);
                has_check = true;
            }
            "reason" => {
                k.reason = text("a text: what the target does instead")?;
                has_reason = !k.reason.trim().is_empty();
            }
            "intermittent" => match v.kind {
                NodeKind::Bool(b) => k.intermittent = b,
                _ => {
                    return Err(invalid(
                        v.loc,
                        format!("{id}: `intermittent` must be true or false, found {}", v.kind.describe()),
                    ));
                }
            },
            other => {
                return Err(invalid(
                    key.loc,
                    format!("{id}: unknown key `{other}` (valid: requirement, check, reason, intermittent)"),
                ));
            }
        }
    }
    k.requirement.sort();
    k.requirement.dedup();
    let missing = match (k.requirement.is_empty(), has_check, has_reason) {
        (true, ..) => Some("`requirement` (the requirement(s) the failing check breaks)"),
        (_, false, _) => Some("`check` (`step N` as the run reports it, `rule NAME` or `end`)"),
        (.., false) => Some("`reason` (what the target does instead)"),
        _ => None,
    };
    match missing {
        Some(what) => Err(invalid(n.loc, format!("{id}: the entry needs {what}\n  {ENTRY_FORM}"))),
        None => Ok(k),
    }
}

/// A line per target-wide entry of `known` ([`ANY_SCENARIO`]): in how many of `results` it made
/// a finding XFAIL, or that the run never needed it (the target may have stopped doing it: a
/// stale entry, which a run over a part of the catalogue cannot prove).
pub fn target_wide_lines(known: &KnownFailures, results: &[super::CaseResult]) -> Vec<String> {
    let entries = known.get(ANY_SCENARIO).map_or(&[][..], Vec::as_slice);
    entries
        .iter()
        .map(|k| {
            let n = results.iter().filter(|r| r.known_used.contains(&k.at)).count();
            let place = if k.at.is_empty() { String::new() } else { format!(" ({})", k.at) };
            if n == 0 {
                format!(
                    "target-wide known failure [{}]{place} did not occur in this run: if the target no longer does this, remove the entry",
                    k.head()
                )
            } else {
                format!("target-wide known failure [{}]{place} occurred in {n} of {} cases", k.head(), results.len())
            }
        })
        .collect()
}

/// The entries of `known` that do not fit the scenarios loaded, each as `file:line:col: message`
/// (the entry's place): first those naming a scenario id that `scenarios` does not have (a
/// warning: the selection may leave it out), then those naming a step past the scenario's last
/// (an error).
pub fn misfit_known_failures(known: &KnownFailures, scenarios: &[Scenario]) -> (Vec<String>, Vec<String>) {
    let (mut unknown, mut past) = (Vec::new(), Vec::new());
    for (id, entries) in known.iter().filter(|(id, _)| id.as_str() != ANY_SCENARIO) {
        let Some(s) = scenarios.iter().find(|s| &s.id == id) else {
            let at = entries.first().map(|k| format!("{}: ", k.at)).unwrap_or_default();
            unknown.push(format!("{at}known failure `{id}` names no scenario of the catalogue"));
            continue;
        };
        for k in entries {
            if let Some(super::verdict::Check::Step(n)) = k.check
                && n > s.steps.len()
            {
                past.push(format!("{}: {id}: step {n}, but the scenario has {} steps", k.at, s.steps.len()));
            }
        }
    }
    (unknown, past)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<KnownFailures, String> {
        parse_known_failures(Path::new("kf.yaml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn known_failures_pin_a_check_one_entry_or_a_list_per_scenario() {
        let kf = parse(
            "# comment\n\
             calls.echo: {requirement: TP-CALL-01, check: step 3, reason: \"wrong rid\"}\n\
             calls.two:\n  - {requirement: [TP-CALL-07, TP-CALL-01], check: step 2, reason: dies}\n  \
             - {requirement: TP-CALL-01, check: rule FrameLength, reason: short frame, intermittent: true}\n",
        )
        .unwrap();
        let echo = &kf["calls.echo"];
        assert_eq!(echo.len(), 1);
        assert_eq!(echo[0].check, Some(super::super::Check::Step(3)));
        assert_eq!(echo[0].at, "kf.yaml:2:13");
        let two = &kf["calls.two"];
        assert_eq!(two.len(), 2);
        assert_eq!(two[0].requirement, ["TP-CALL-01", "TP-CALL-07"]);
        assert_eq!(two[1].check, Some(super::super::Check::Rule("FrameLength".into())));
        assert!(two[1].intermittent && !two[0].intermittent);
        assert!(parse("").unwrap().is_empty());
        assert!(parse("# only a comment\n").unwrap().is_empty());
    }

    #[test]
    fn a_bad_known_failures_entry_is_refused_at_its_file_line_and_column() {
        let cases = [
            (
                "x.y: {requirement: TP-CALL-01, check: step 3, reason: r, why: w}\n",
                "kf.yaml:1:58: x.y: unknown key `why`",
            ),
            (
                "x.y: {requirement: TP-CALL-01, check: stage 3, reason: r}\n",
                "kf.yaml:1:39: x.y: `stage 3` is not a check",
            ),
            (
                "x.y: {requirement: TP-CALL-01, check: step 0, reason: r}\n",
                "kf.yaml:1:39: x.y: `step 0` is not a check",
            ),
            (
                "x.y: {requirement: TP-NOPE-01, check: step 3, reason: r}\n",
                "kf.yaml:1:20: x.y: `TP-NOPE-01` is not a requirement",
            ),
            ("x.y: {requirement: TP-CALL-01, reason: r}\n", "kf.yaml:1:6: x.y: the entry needs `check`"),
            ("x.y: {check: step 1, reason: r}\n", "kf.yaml:1:6: x.y: the entry needs `requirement`"),
            ("x.y: {requirement: TP-CALL-01, check: step 1}\n", "kf.yaml:1:6: x.y: the entry needs `reason`"),
            ("x.y: answers under the wrong rid\n", "kf.yaml:1:6: x.y: expected an entry, found string"),
            ("x.y: []\n", "kf.yaml:1:6: x.y: an empty list of entries"),
            (
                "x.y: {requirement: TP-CALL-01, check: step 1, reason: r, intermittent: yes}\n",
                "kf.yaml:1:72: x.y: `intermittent` must be true or false",
            ),
            (
                "x.y:\n  - {requirement: TP-CALL-01, check: step 1, reason: r}\n  - {requirement: TP-CALL-01, check: step 1, reason: s}\n",
                "kf.yaml:3:5: x.y: a second entry for step 1, TP-CALL-01",
            ),
            ("- x.y\n", "kf.yaml:1:1: expected a mapping of scenario id to entries, found a list"),
        ];
        for (text, want) in cases {
            let e = parse(text).expect_err(text);
            assert!(e.starts_with(want), "{text:?}\n got: {e}\nwant: {want}");
        }
    }

    #[test]
    fn a_start_with_nothing_hidden_is_the_reference_without_hidden_or_a_target_that_claims_none() {
        let s = crate::scenario::parse_str(
            Path::new("s.yaml"),
            "id: x.y\ntitle: t\nrequirements: [TP-HANDSHAKE-13]\nlevel: MUST\nrole: tool-process\ntestee: {hidden: false}\nsteps:\n  - handshake: {hidden: []}\n",
        )
        .unwrap();
        let argv = Target::reference("/bin/pc".into()).plan(&s).unwrap();
        assert_eq!(argv, ["/bin/pc", "testee", "--no-hidden"]);
        let mut sdk = Target::command(vec!["sdk".into()]);
        sdk.features = vec!["hidden".into(), "progress".into()];
        assert!(matches!(sdk.plan(&s), Err(Skip::CannotExpress(_))));
        sdk.features = vec!["progress".into()];
        assert_eq!(sdk.plan(&s).unwrap(), ["sdk"]);
    }

    #[test]
    fn entries_naming_no_scenario_warn_and_a_step_past_the_last_is_an_error() {
        let s = crate::scenario::parse_str(
            Path::new("s.yaml"),
            "id: x.y\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n",
        )
        .unwrap();
        let kf = parse(
            "x.y:\n  - {requirement: TP-CALL-01, check: step 1, reason: r}\n  - {requirement: TP-CALL-01, check: step 2, reason: r}\n\
             x.gone: {requirement: TP-CALL-01, check: step 1, reason: r}\n",
        )
        .unwrap();
        let (unknown, past) = misfit_known_failures(&kf, &[s]);
        assert_eq!(unknown, ["kf.yaml:4:9: known failure `x.gone` names no scenario of the catalogue"]);
        assert_eq!(past, ["kf.yaml:3:5: x.y: step 2, but the scenario has 1 steps"]);
    }

    #[test]
    fn a_target_wide_entry_applies_to_every_scenario_pins_a_rule_and_is_intermittent() {
        let kf = parse(concat!(
            "x.y: {requirement: TP-CALL-01, check: step 1, reason: r}\n",
            "\"*\": {requirement: BR-TOOLLIST-13, check: rule bridge-model, intermittent: true, reason: timer}\n",
        ))
        .unwrap();
        let mut t = Target::command(vec!["t".into()]);
        t.known_failures = kf.clone();
        let heads = |id: &str| t.known(id).iter().map(super::super::verdict::KnownFailure::head).collect::<Vec<_>>();
        assert_eq!(heads("x.y"), ["step 1, TP-CALL-01", "rule bridge-model, BR-TOOLLIST-13"]);
        assert_eq!(heads("other"), ["rule bridge-model, BR-TOOLLIST-13"]);
        let s = crate::scenario::parse_str(
            Path::new("s.yaml"),
            "id: x.y\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n",
        )
        .unwrap();
        assert_eq!(misfit_known_failures(&kf, &[s]), (vec![], vec![]), "`*` names no scenario, and needs none");
        let mut used = super::super::CaseResult::blank("other");
        used.known_used.push("kf.yaml:2:6".into());
        let lines = target_wide_lines(&kf, &[used.clone(), super::super::CaseResult::blank("x.y")]);
        assert_eq!(
            lines,
            ["target-wide known failure [rule bridge-model, BR-TOOLLIST-13] (kf.yaml:2:6) occurred in 1 of 2 cases"]
        );
        let lines = target_wide_lines(&kf, &[super::super::CaseResult::blank("x.y")]);
        assert!(lines[0].contains("did not occur in this run"), "{lines:?}");
        for bad in [
            "\"*\": {requirement: BR-TOOLLIST-13, check: step 2, intermittent: true, reason: r}\n",
            "\"*\": {requirement: BR-TOOLLIST-13, check: rule bridge-model, reason: r}\n",
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.starts_with("kf.yaml:1:6: `*`: a target-wide entry pins an observer's rule"), "{e}");
        }
    }

    #[test]
    fn relative_manifest_dir_gives_an_absolute_command() {
        let t = tempfile::Builder::new().prefix(".manifest-test-").tempdir_in(".").unwrap();
        std::fs::write(t.path().join("protomcp-conform.toml"), "command = [\"bin/testee\", \"--x\"]\n").unwrap();
        let rel = Path::new(t.path().file_name().unwrap());
        let target = Manifest::load_target(rel).unwrap();
        let TargetKind::Command { argv, .. } = &target.kind else { panic!("not a command target") };
        let exe = Path::new(&argv[0]);
        assert!(exe.is_absolute(), "{exe:?}");
        assert_eq!(exe, std::path::absolute(rel).unwrap().join("bin/testee"));
        assert_eq!(argv[1], "--x");
        assert!(target.cwd.as_deref().is_some_and(Path::is_absolute));
    }
}
