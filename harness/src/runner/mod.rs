//! The runner: executes scenarios against a target, each in isolation, in parallel.
//!
//! Per scenario: a fresh private temp dir (0700) holding the socket, which the runner binds
//! before it starts the testee (it plays the bridge); the testee in its own process group with
//! `PROTOMCP_SOCKET`, stdin at EOF, stdout discarded and stderr kept; the steps with their own
//! deadlines inside the scenario's budget; then `shutdown(SHUT_RDWR)` of the connection, SIGTERM
//! to the group, a grace period, SIGKILL to the group, and every member reaped. The verdict is
//! computed by [`verdict::judge`] from the outcome, the scenario's level and the known failures.

pub mod badge;
pub mod bridge;
pub mod bridge_manifest;
pub mod checkout;
pub mod diff;
pub mod durations;
pub mod exec;
pub mod golden;
pub mod host_http;
pub mod html;
pub mod json_report;
pub mod observe;
pub mod process;
pub mod report;
pub mod sarif;
pub mod schedule;
pub mod shard;
pub mod soak;
pub mod target;
pub mod verdict;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;

pub use exec::{Exec, Proc, StepError};

/// `s` as one `sh` word: unchanged when it is safe, single-quoted otherwise (for re-run commands
/// and generated scripts).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
pub use target::{KnownFailures, Manifest, ProfileServer, Target, TargetKind, load_known_failures};
pub use verdict::{Check, KnownFailure, Outcome, Summary, Verdict, judge};

use crate::requirements::Level;
use crate::scenario::{Scenario, SocketSetup};
use crate::testee::ENV_SOCKET;

/// Budget of a scenario that sets no `timeout_ms`.
pub const DEFAULT_SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);
/// Time between SIGTERM and SIGKILL at teardown.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long teardown waits for the group to vanish after SIGKILL.
pub const KILL_LIMIT: Duration = Duration::from_secs(5);
/// The stderr tail shown in a report, in lines.
pub const STDERR_TAIL: usize = 20;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Parallel scenarios.
    pub jobs: usize,
    /// Every time of a scenario is multiplied by this (never less than 1).
    pub timeout_scale: f64,
    /// Runs of each scenario (`--repeat`); verdicts that differ make it FLAKY.
    pub repeat: usize,
    /// Whether the results keep their whole transcripts once `on_done` has seen them (for
    /// `--transcripts` and the HTML report). Without, a result keeps its transcript's tail
    /// only, and a run's memory does not grow with the transcripts of the scenarios done (the
    /// head of one may hold a 64 MiB answer).
    pub keep_transcripts: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config { jobs: default_jobs(), timeout_scale: 1.0, repeat: 1, keep_transcripts: true }
    }
}

/// Scenarios run at once by default: scenarios mostly wait (quiet windows, sleeps, a peer's
/// deadline), so eight per core, at most [`MAX_DEFAULT_JOBS`], and no more than the open-file
/// limit allows at [`FDS_PER_SCENARIO`] descriptors each.
pub fn default_jobs() -> usize {
    default_jobs_for(1)
}

/// The default of [`default_jobs`] for `sides` sides run together in one schedule: each side's
/// default, added up, within the same open-file limit.
pub fn default_jobs_for(sides: usize) -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let by_fds = open_file_limit().map_or(usize::MAX, |n| (n / FDS_PER_SCENARIO).max(1));
    ((cores * 8).clamp(1, MAX_DEFAULT_JOBS) * sides.max(1)).min(by_fds)
}

/// The ceiling of [`default_jobs`] per side. Measured on 2 cores (docs/performance.md): the
/// catalogue against the reference peers takes about a third of the CPU at 32 at once; past
/// what its longest-first order needs, more would only add load, and with it the risk of a
/// missed deadline.
pub const MAX_DEFAULT_JOBS: usize = 16;

/// Descriptors one running scenario may hold (sockets, pipes, the target's and the mock's).
pub const FDS_PER_SCENARIO: usize = 32;

fn open_file_limit() -> Option<usize> {
    crate::os::open_file_limit()
}

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub id: String,
    pub title: String,
    pub file: String,
    pub requirements: Vec<String>,
    /// When the scenario did not pass because the target broke something: the requirements the
    /// failing step found out itself, else what it checks (`checks:`), else the scenario's. Empty for
    /// PASS, SKIP and ERROR.
    pub broken: Vec<String>,
    /// When the scenario did not pass: the requirements that steps before the failing one
    /// checked (`checks:`) and found to hold. Empty otherwise.
    pub held: Vec<String>,
    /// When the scenario did not pass because the target broke something: where that was
    /// decided (`step N`, `rule NAME`, `end`), the check a known-failures entry pins. `None`
    /// otherwise.
    pub check: Option<Check>,
    /// BLOCKED: the precondition that broke (`connect`, or the failing step's keyword, e.g.
    /// `handshake`); with `broken` it names the root cause the run reports once.
    pub root_cause: Option<String>,
    /// What the observers ([`observe`]) found in the run, whatever the scenario cites: each
    /// judged like a failing check (`rule session-model`, `rule bridge-model`); the verdict is the
    /// worst of the steps' and theirs.
    pub findings: Vec<observe::Observed>,
    /// The places (`file:line:col`) of the known-failures entries that made an observer's
    /// finding XFAIL: how the run tells which target-wide entries it needed.
    pub known_used: Vec<String>,
    /// When the scenario did not pass because the target broke something: the line in `file` of
    /// the step that failed (or of the soak step that found a leak); `None` otherwise, or when no
    /// step was running (a flood noticed after the last one).
    pub step_line: Option<u32>,
    pub level: Level,
    pub verdict: Verdict,
    pub message: String,
    pub duration: Duration,
    /// When the scenario (its first run, with `--repeat`) started; `None` before it ran.
    pub started: Option<std::time::SystemTime>,
    pub transcript_tail: Vec<String>,
    /// Every item of the run (empty when the testee was not started).
    pub transcript: crate::transcript::Transcript,
    /// The normalized transcript as text, when the items are gone: a result read back from a
    /// JSON report ([`json_report`]), or one whose items the run did not keep (it keeps this for
    /// the results that did not pass, which the reports show). [`CaseResult::transcript_text`]
    /// returns it.
    pub rendered: Option<String>,
    pub stderr_tail: String,
    /// The testee command used (empty when not started).
    pub command: Vec<String>,
    /// With `--repeat N`: the verdict and first message line of each run, in run order (empty
    /// for a single run).
    pub runs: Vec<(Verdict, String)>,
    /// The known-failures entry says the deviation is intermittent (runs that differ only in
    /// PASS and XFAIL fold to XFAIL, not FLAKY).
    pub intermittent: bool,
    /// What the testee's process group held when it connected and when the steps were done
    /// (`/proc`, [`crate::io::resources`]); `None` when it was not sampled both times.
    pub resources: Option<crate::io::resources::Use>,
    /// With `--golden DIR`: how the transcript compares with `DIR/<id>.snap` (beside the verdict).
    pub golden: Option<golden::Golden>,
}

impl CaseResult {
    /// The normalized transcript (see [`crate::transcript::normalize`]); a scenario that was not
    /// started says why.
    pub fn transcript_text(&self) -> String {
        if let Some(text) = &self.rendered {
            return text.clone();
        }
        if self.transcript.items.is_empty() {
            let why = crate::transcript::Normalizer::new().text(&self.message);
            return format!("-- not started: {}\n", why.lines().next().unwrap_or(""));
        }
        self.transcript.render()
    }
}

impl CaseResult {
    /// Whether the reports show this result in detail (message, transcript, stderr): it did not
    /// pass, and was not skipped.
    pub fn detailed(&self) -> bool {
        !matches!(self.verdict, Verdict::Pass | Verdict::Skip | Verdict::Blocked)
    }

    /// Lets the transcript's items go (their memory), keeping its normalized text when the
    /// reports show it ([`CaseResult::detailed`]).
    pub fn drop_transcript(&mut self) {
        if self.detailed() && self.rendered.is_none() {
            self.rendered = Some(self.transcript_text());
        }
        self.transcript = Default::default();
    }

    /// A result of `s` before it ran: PASS, no message.
    pub fn new(s: &Scenario) -> CaseResult {
        CaseResult {
            title: s.title.clone(),
            file: s.file.display().to_string(),
            requirements: s.requirements.iter().map(|r| r.id.to_owned()).collect(),
            level: s.level,
            ..CaseResult::blank(&s.id)
        }
    }

    /// A result of scenario `id` that knows nothing else yet: PASS, MUST, no message, no
    /// transcript (the start of every result; tests fill in what they need).
    pub fn blank(id: &str) -> CaseResult {
        CaseResult {
            id: id.to_owned(),
            title: String::new(),
            file: String::new(),
            requirements: Vec::new(),
            broken: Vec::new(),
            held: Vec::new(),
            check: None,
            root_cause: None,
            findings: Vec::new(),
            known_used: Vec::new(),
            step_line: None,
            level: crate::requirements::Level::Must,
            verdict: Verdict::Pass,
            message: String::new(),
            duration: Duration::ZERO,
            started: None,
            transcript_tail: Vec::new(),
            transcript: Default::default(),
            rendered: None,
            stderr_tail: String::new(),
            command: Vec::new(),
            runs: Vec::new(),
            intermittent: false,
            resources: None,
            golden: None,
        }
    }

    /// The verdict each requirement gets from this result: for FAIL, WARN, XFAIL and LEAK the
    /// `broken` ones (which may lie outside the cited ones) get the verdict, the `held` ones PASS,
    /// and the other cited ones were not reached (SKIP); for BLOCKED the cited ones were not
    /// reached (BLOCKED: the root cause is reported once, not held against them); otherwise every
    /// cited requirement gets the scenario's verdict.
    pub fn per_requirement(&self) -> Vec<(&str, Verdict)> {
        let failed = matches!(self.verdict, Verdict::Fail | Verdict::Warn | Verdict::Xfail | Verdict::Leak);
        if !failed || self.broken.is_empty() {
            return self.requirements.iter().map(|r| (r.as_str(), self.verdict)).collect();
        }
        let mut out: Vec<(&str, Verdict)> = self.broken.iter().map(|r| (r.as_str(), self.verdict)).collect();
        out.extend(self.held.iter().map(|r| (r.as_str(), Verdict::Pass)));
        for r in &self.requirements {
            if !self.broken.contains(r) && !self.held.contains(r) {
                out.push((r.as_str(), Verdict::Skip));
            }
        }
        out
    }
}

/// Folds the results of repeated runs of one scenario (`--repeat N`) into one: their common
/// verdict when they agree (the first run's details), FLAKY when they differ, with every run's
/// verdict and first message line.
pub fn fold_repeats(mut runs: Vec<CaseResult>) -> CaseResult {
    assert!(!runs.is_empty(), "fold_repeats needs at least one run");
    if runs.len() == 1 {
        return runs.pop().expect("one run");
    }
    let summary: Vec<(Verdict, String)> =
        runs.iter().map(|r| (r.verdict, r.message.lines().next().unwrap_or("").to_owned())).collect();
    let total: Duration = runs.iter().map(|r| r.duration).sum();
    let first_start = runs.iter().filter_map(|r| r.started).min();
    let same =
        runs.iter().all(|r| r.verdict == runs[0].verdict && r.broken == runs[0].broken && r.check == runs[0].check);
    // An intermittent known failure that occurred in some runs: XFAIL (the first run where it did).
    let intermittent = runs[0].intermittent
        && runs.iter().all(|r| matches!(r.verdict, Verdict::Pass | Verdict::Xfail))
        && runs.iter().any(|r| r.verdict == Verdict::Xfail);
    if !same && intermittent {
        let failed = runs.iter().filter(|r| r.verdict == Verdict::Xfail).count();
        let n = runs.len();
        let pick = runs.iter().position(|r| r.verdict == Verdict::Xfail).unwrap_or(0);
        let mut out = runs.swap_remove(pick);
        out.duration = total;
        out.started = first_start;
        out.message = format!("intermittent, failed in {failed} of {n} runs: {}", out.message);
        out.runs = summary;
        return out;
    }
    // Keep the details of the first run that differs from the first (or the first one).
    let pick = runs.iter().position(|r| r.verdict != runs[0].verdict).filter(|_| !same).unwrap_or(0);
    let mut out = runs.swap_remove(pick);
    out.duration = total;
    out.started = first_start;
    if !same {
        let mut m = format!("the verdicts of {} runs differ:", summary.len());
        for (i, (v, first)) in summary.iter().enumerate() {
            let _ = std::fmt::Write::write_fmt(
                &mut m,
                format_args!("\n  run {}: {v}{}{first}", i + 1, if first.is_empty() { "" } else { ": " }),
            );
        }
        out.message = format!("{m}\n  details of run {}:\n{}", pick + 1, out.message);
        out.verdict = Verdict::Flaky;
    }
    out.runs = summary;
    out
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs one scenario against the target and judges it.
pub async fn run_scenario(s: &Scenario, target: &Target, cfg: &Config) -> CaseResult {
    if let TargetKind::Profile(server) = &target.kind
        && target.plan(s).is_ok()
    {
        return run_on_profile(server.clone(), s, target.known(&s.id)).await;
    }
    let started = Instant::now();
    let mut res = CaseResult::new(s);
    let outcome = match target.plan(s) {
        Err(why) => Outcome::Skipped(why.to_string()),
        Ok(argv) => {
            res.command = argv.clone();
            execute(s, target, cfg, argv, &mut res).await
        }
    };
    if !matches!(outcome, Outcome::Failed(_) | Outcome::Leaked(_)) {
        res.broken.clear();
        res.held.clear();
        res.check = None;
        res.step_line = None;
    }
    let outcome = blocked(s, outcome, &mut res);
    let known = target.known(&s.id);
    let known = known.as_slice();
    res.intermittent = known.iter().any(|k| k.intermittent);
    // The steps answer for the entries that pin steps (or any check); the observers for all.
    let step_known: Vec<KnownFailure> =
        known.iter().filter(|k| !matches!(k.check, Some(Check::Rule(_)))).cloned().collect();
    let (mut verdict, mut message) = judge(&outcome, s.level, &res.broken, res.check.as_ref(), &step_known);
    if matches!(outcome, Outcome::Passed | Outcome::Failed(_) | Outcome::Leaked(_)) {
        let bridge = matches!(target.kind, TargetKind::Bridge { .. });
        res.findings = observe::observe(s, bridge, &res.transcript.to_vec());
        // The step that failed judged what it saw itself (and the run stopped there): what an
        // observer found during it is the same event, not a second failure.
        if let Some(Check::Step(n)) = &res.check
            && !matches!(outcome, Outcome::Passed)
        {
            res.findings.retain(|f| f.step.is_none_or(|k| k < *n));
        }
        let judged = observe::judge_findings(outcome == Outcome::Passed, s.level, &res.findings, known);
        for j in judged.iter().filter(|j| j.verdict == Verdict::Xfail) {
            if let Some(k) = known.iter().find(|k| k.matches(Some(&j.check), &j.broken)) {
                res.known_used.push(k.at.clone());
            }
        }
        (verdict, message) = with_findings(s, &mut res, (verdict, message), judged);
    }
    if verdict == Verdict::Pass {
        res.broken.clear();
        res.held.clear();
        res.check = None;
        res.step_line = None;
    }
    if verdict != Verdict::Blocked {
        res.root_cause = None;
    }
    res.verdict = verdict;
    res.message = message;
    res.duration = started.elapsed();
    res
}

/// The verdict of a case whose steps were judged `steps`, with the observers' judgments: the
/// worst of them all. The worst one's requirements and check become the case's (with the steps'
/// own broken requirements when they failed too); the others are added to the message.
fn with_findings(
    s: &Scenario,
    res: &mut CaseResult,
    steps: (Verdict, String),
    judged: Vec<observe::Judged>,
) -> (Verdict, String) {
    let (mut verdict, mut message) = steps;
    let failing = |v: Verdict| !matches!(v, Verdict::Pass | Verdict::Skip);
    let mut also = Vec::new();
    for j in judged.into_iter().filter(|j| failing(j.verdict) || !j.message.is_empty()) {
        if failing(j.verdict) {
            for b in &j.broken {
                if !res.broken.contains(b) {
                    res.broken.push(b.clone());
                }
            }
        }
        if j.verdict.rank() > verdict.rank() {
            if failing(verdict) && !message.is_empty() {
                also.push(format!("{}: {}", verdict.name(), message));
            }
            res.check = Some(j.check.clone());
            res.step_line = j.step.and_then(|n| s.steps.get(n - 1)).map(|st| st.loc.line);
            (verdict, message) = (j.verdict, j.message);
        } else {
            also.push(format!("{}: {}", j.verdict.name(), j.message));
        }
    }
    for a in also {
        message.push_str(if message.is_empty() { "" } else { "\nalso " });
        message.push_str(&a);
    }
    (verdict, message)
}

/// A failure of a precondition step (see [`Scenario::is_precondition_failure`]) becomes
/// [`Outcome::Blocked`], its root cause noted in `res`; other outcomes stay.
fn blocked(s: &Scenario, outcome: Outcome, res: &mut CaseResult) -> Outcome {
    let index = match &res.check {
        Some(Check::Step(n)) => Some(n - 1),
        _ => None,
    };
    match outcome {
        Outcome::Failed(why) if s.is_precondition_failure(index, &res.broken) => {
            let connect = res.broken.iter().all(|b| b.ends_with("-CONN-01"));
            let step = index.and_then(|i| s.steps.get(i)).map_or("", |st| st.keyword());
            res.root_cause = Some(if connect { "connect".to_owned() } else { step.to_owned() });
            res.held.clear();
            Outcome::Blocked(why)
        }
        o => o,
    }
}

/// The precondition failures of a run, each once: the requirement(s) it broke, where (`connect`,
/// `handshake`, …), the first message line of the first case it blocked, and every case it
/// blocked, in the order of `results`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RootCause {
    pub requirements: Vec<String>,
    pub precondition: String,
    pub message: String,
    pub cases: Vec<String>,
}

/// The root causes of the BLOCKED results, the one that blocked most first.
pub fn root_causes<'a>(results: impl IntoIterator<Item = &'a CaseResult>) -> Vec<RootCause> {
    let mut out: Vec<RootCause> = Vec::new();
    for r in results.into_iter().filter(|r| r.verdict == Verdict::Blocked) {
        let precondition = r.root_cause.clone().unwrap_or_default();
        match out.iter_mut().find(|c| c.requirements == r.broken && c.precondition == precondition) {
            Some(c) => c.cases.push(r.id.clone()),
            None => out.push(RootCause {
                requirements: r.broken.clone(),
                precondition,
                message: r.message.lines().next().unwrap_or("").to_owned(),
                cases: vec![r.id.clone()],
            }),
        }
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.cases.len()));
    out
}

impl RootCause {
    /// The one line a run prints for it.
    pub fn line(&self) -> String {
        let n = self.cases.len();
        format!(
            "ROOT CAUSE {} at {}: blocked {n} case{} (not reached; -v lists them): {}",
            self.requirements.join(", "),
            self.precondition,
            if n == 1 { "" } else { "s" },
            self.message.strip_prefix(verdict::NOT_REACHED).unwrap_or(&self.message)
        )
    }
}

/// A scenario of another profile, run by its server on a blocking thread.
async fn run_on_profile(server: Arc<dyn target::ProfileServer>, s: &Scenario, known: Vec<KnownFailure>) -> CaseResult {
    let sc = s.clone();
    tokio::task::spawn_blocking(move || server.run_one(&sc, &known)).await.unwrap_or_else(|e| {
        let mut r = CaseResult::new(s);
        r.verdict = Verdict::Error;
        r.message = format!("the thread running this scenario failed: {e}");
        r
    })
}

async fn execute(s: &Scenario, target: &Target, cfg: &Config, argv: Vec<String>, res: &mut CaseResult) -> Outcome {
    if let TargetKind::Bridge { exe, .. } = &target.kind {
        return bridge::execute(s, target, cfg, &argv, exe, res).await;
    }
    let dir = match process::ScenarioDir::new() {
        Ok(d) => d,
        Err(e) => return Outcome::Error(format!("cannot create the scenario's temp dir: {e}")),
    };
    let sock = dir.path().join("protomcp.sock");
    let listener = match UnixListener::bind(&sock) {
        Ok(l) => l,
        Err(e) => return Outcome::Error(format!("cannot bind {}: {e}", sock.display())),
    };
    let mut env: BTreeMap<String, Option<String>> = target.env.clone();
    env.extend(s.testee.env.clone());
    let sock_value = match s.testee.socket {
        SocketSetup::Normal => Some(sock.display().to_string()),
        SocketSetup::Unset => None,
        SocketSetup::Empty => Some(String::new()),
        SocketSetup::Missing => Some(dir.path().join("missing.sock").display().to_string()),
        SocketSetup::NotASocket => {
            let p = dir.path().join("not-a-socket");
            if let Err(e) = std::fs::write(&p, b"not a socket\n") {
                return Outcome::Error(format!("cannot create {}: {e}", p.display()));
            }
            Some(p.display().to_string())
        }
        SocketSetup::Refused => {
            let p = dir.path().join("refused.sock");
            match std::os::unix::net::UnixListener::bind(&p) {
                Ok(l) => drop(l),
                Err(e) => return Outcome::Error(format!("cannot bind {}: {e}", p.display())),
            }
            Some(p.display().to_string())
        }
    };
    env.insert(ENV_SOCKET.to_owned(), sock_value.clone());
    let proc = match &target.kind {
        TargetKind::InProcess => {
            let Some(path) = sock_value else { return Outcome::Error("in-process testees need the socket".into()) };
            let opts = crate::testee::Options {
                middleware: s.testee.middleware,
                misbehave: s.testee.misbehave,
                ..crate::testee::Options::default()
            };
            let handle = tokio::spawn(async move {
                match tokio::net::UnixStream::connect(&path).await {
                    Ok(st) => crate::testee::serve(st, opts).await,
                    Err(_) => crate::testee::exit::FAILURE,
                }
            });
            Proc::Task { handle, ended: None }
        }
        _ => match process::spawn(&argv, &env, target.cwd.as_deref()) {
            Ok(t) => Proc::Child(t),
            Err(e) => return Outcome::Error(format!("cannot start the testee `{}`: {e}", argv.join(" "))),
        },
    };
    let scale = cfg.timeout_scale.max(1.0);
    let budget = s.timeout.unwrap_or(DEFAULT_SCENARIO_TIMEOUT).mul_f64(scale);
    let mut ex = Exec::new(s, scale, &target.features, s.testee.middleware, listener, proc);
    if let Proc::Child(t) = &ex.proc {
        ex.sampler = Some(crate::io::resources::Sampler { pgid: t.pid, pidfile: None });
    }
    let outcome = match tokio::time::timeout(budget, ex.run_steps()).await {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(StepError::Fail(m))) => Outcome::Failed(m),
        Ok(Err(StepError::Error(m))) => Outcome::Error(m),
        Ok(Err(StepError::NotApplicable(m))) => Outcome::Skipped(m),
        Err(_) => Outcome::Error(format!("the scenario exceeded its budget of {budget:?}")),
    };
    let end = ex.sampler.as_ref().and_then(crate::io::resources::Sampler::sample);
    let samples = std::mem::take(&mut ex.samples);
    let during = ex.during.take().map(crate::io::resources::During::stop).unwrap_or_default();
    res.resources =
        ex.resources_start.zip(end).map(|(start, end)| crate::io::resources::Use { start, end, samples, during });
    ex.close();
    let outcome = leaked(outcome, &mut ex);
    res.broken = ex.broken();
    res.held = ex.held();
    res.check = Some(ex.check());
    res.step_line = ex.step_line();
    res.transcript_tail = ex.transcript_tail();
    res.transcript = std::mem::take(&mut ex.transcript);
    let outcome = match &mut ex.proc {
        Proc::Child(t) => {
            let clean = t.teardown(GRACE, KILL_LIMIT).await;
            res.stderr_tail = tail_lines(&t.stderr().await, STDERR_TAIL);
            match (clean, outcome) {
                (false, Outcome::Passed) => {
                    Outcome::Error(format!("processes of the testee's group {} survived SIGKILL", t.pid))
                }
                (_, o) => o,
            }
        }
        Proc::Task { handle, .. } => {
            handle.abort();
            outcome
        }
    };
    drop(dir);
    outcome
}

/// A run whose steps all passed but whose soak found resources growing becomes
/// [`Outcome::Leaked`], judged at the soak step (its `checks:`, else the scenario's
/// requirements).
pub(crate) fn leaked(outcome: Outcome, ex: &mut Exec<'_>) -> Outcome {
    match (outcome, ex.leak.take()) {
        (Outcome::Passed, Some((step, message))) => {
            ex.current = step;
            ex.found = &[];
            Outcome::Leaked(message)
        }
        (o, _) => o,
    }
}

/// Called with each finished result, the number finished so far and the total.
pub type OnDone = Arc<dyn Fn(&CaseResult, usize, usize) + Send + Sync>;

/// About how long a scenario runs, for the order of a run: its fixed waits (sleeps, quiet
/// windows), or its `duration_ms` when that says more.
pub fn expected_duration(s: &Scenario) -> Duration {
    s.fixed_waits().max(s.duration.unwrap_or_default())
}

/// Runs the scenarios, at most `cfg.jobs` at a time, each `cfg.repeat` times (folded by
/// [`fold_repeats`]); `on_done` sees each scenario's result as it finishes (with the count
/// finished so far). Results come back in the order of `scenarios`.
pub async fn run_all(
    scenarios: Arc<Vec<Scenario>>,
    target: Arc<Target>,
    cfg: Config,
    on_done: OnDone,
) -> Vec<CaseResult> {
    run_sides(vec![Side { scenarios, target, on_done }], cfg).await.pop().unwrap_or_default()
}

/// Scenarios to run against one target, with what sees each result as it finishes.
pub struct Side {
    pub scenarios: Arc<Vec<Scenario>>,
    pub target: Arc<Target>,
    /// Called with the side's result, the count of the side's scenarios finished so far and the
    /// side's total.
    pub on_done: OnDone,
}

/// Runs several sides at once in one schedule: at most `cfg.jobs` scenarios at a time over all
/// sides, each `cfg.repeat` times (folded by [`fold_repeats`]). Exclusive scenarios first, one
/// after another, alone (no scenario of any side beside them but the company of [`company`]:
/// scenarios that wait quietly from their start while the exclusive ones run); then the longest
/// first over all
/// sides (a parallel run then ends near the longest scenario, not after it): the longest by what
/// the scenario says or by what it took in its target's last run. Ties keep the given order
/// (sides in order, scenarios in order). Results come back per side, in the order of its
/// scenarios.
pub async fn run_sides(sides: Vec<Side>, cfg: Config) -> Vec<Vec<CaseResult>> {
    let repeat = cfg.repeat.max(1);
    let jobs = cfg.jobs.max(1);
    let sem = Arc::new(tokio::sync::Semaphore::new(jobs));
    let sides: Vec<Arc<SideState>> = sides
        .into_iter()
        .map(|s| {
            let total = s.scenarios.len();
            Arc::new(SideState {
                learned: durations::Durations::load(&s.target.name),
                side: s,
                done: std::sync::atomic::AtomicUsize::new(0),
                // The runs of each scenario so far; the last one to finish folds them.
                runs: std::sync::Mutex::new((0..total).map(|_| Vec::new()).collect()),
            })
        })
        .collect();
    let mut order: Vec<(usize, usize, bool, Duration)> = Vec::new();
    for (k, st) in sides.iter().enumerate() {
        for (i, s) in st.side.scenarios.iter().enumerate() {
            let expected = expected_duration(s).max(st.learned.get(&s.id).unwrap_or_default());
            order.push((k, i, s.exclusive, expected));
        }
    }
    order.sort_by_key(|&(k, i, exclusive, expected)| (!exclusive, std::cmp::Reverse(expected), k, i));
    // Scenarios quiet for long right after their start keep the exclusive ones company, so that
    // these do not stretch the run: they start first and hold a permit each.
    let company = company(&sides, &order, jobs, repeat);
    order.sort_by_key(|o| !company.contains(&(o.0, o.1)));
    let mut set = tokio::task::JoinSet::new();
    for (k, i, exclusive, _) in order {
        for _ in 0..repeat {
            // An exclusive scenario takes every permit but the company's: it waits for the ones
            // running to end, and the ones after it wait for it. The permits are taken here, in
            // this order, before the task is spawned: spawned tasks start in no particular order,
            // so permits taken inside them would let any scenario go first.
            let permits = if exclusive { (jobs - company.len() * repeat) as u32 } else { 1 };
            let permit = sem.clone().acquire_many_owned(permits).await.expect("semaphore open");
            let (st, cfg) = (sides[k].clone(), cfg.clone());
            set.spawn(async move {
                let _permit = permit;
                let at = std::time::SystemTime::now();
                let mut r = run_scenario(&st.side.scenarios[i], &st.side.target, &cfg).await;
                r.started.get_or_insert(at);
                let finished = {
                    let mut runs = st.runs.lock().expect("runs lock");
                    runs[i].push(r);
                    if runs[i].len() == repeat { Some(std::mem::take(&mut runs[i])) } else { None }
                };
                finished.map(|all| {
                    let mut r = fold_repeats(all);
                    let n = st.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    (st.side.on_done)(&r, n, st.side.scenarios.len());
                    if !cfg.keep_transcripts {
                        r.drop_transcript();
                    }
                    (k, i, r)
                })
            });
        }
    }
    let mut out: Vec<Vec<Option<CaseResult>>> = sides.iter().map(|st| vec![None; st.side.scenarios.len()]).collect();
    while let Some(j) = set.join_next().await {
        match j {
            Ok(Some((k, i, r))) => out[k][i] = Some(r),
            Ok(None) => {}
            Err(e) => eprintln!("protomcp-conform: a scenario task failed: {e}"),
        }
    }
    out.into_iter()
        .zip(&sides)
        .map(|(results, st)| {
            durations::Durations::store(
                &st.side.target.name,
                results
                    .iter()
                    .flatten()
                    .filter(|r| r.verdict != Verdict::Skip)
                    .map(|r| (r.id.clone(), r.duration / repeat as u32)),
            );
            results
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    r.unwrap_or_else(|| {
                        let mut r = CaseResult::new(&st.side.scenarios[i]);
                        r.verdict = Verdict::Error;
                        r.message = "the harness task running this scenario panicked".into();
                        r
                    })
                })
                .collect()
        })
        .collect()
}

/// The scenarios (side, index) that run beside the exclusive ones: not exclusive themselves,
/// quiet right after their start ([`Scenario::quiet_after_start`]) for at least twice what the
/// exclusive ones are expected to take together, and at least [`COMPANY_QUIET`]; the longest
/// first, leaving a permit for the exclusive ones. None when there is no exclusive scenario.
fn company(
    sides: &[Arc<SideState>],
    order: &[(usize, usize, bool, Duration)],
    jobs: usize,
    repeat: usize,
) -> Vec<(usize, usize)> {
    if !order.iter().any(|o| o.2) {
        return Vec::new();
    }
    let exclusive: Duration = order.iter().filter(|o| o.2).map(|o| o.3).sum::<Duration>() * repeat as u32;
    let room = (jobs.saturating_sub(1)) / repeat;
    let mut out: Vec<(usize, usize, Duration)> = order
        .iter()
        .filter(|o| !o.2)
        .map(|o| (o.0, o.1, sides[o.0].side.scenarios[o.1].quiet_after_start()))
        .filter(|o| o.2 >= (exclusive * 2).max(COMPANY_QUIET))
        .collect();
    out.sort_by_key(|o| std::cmp::Reverse(o.2));
    out.into_iter().take(room).map(|o| (o.0, o.1)).collect()
}

/// The shortest quiet start that lets a scenario run beside the exclusive ones.
pub const COMPANY_QUIET: Duration = Duration::from_secs(5);

/// A side while it runs: the durations its target took last time, its finished count and the
/// runs of each scenario so far.
struct SideState {
    side: Side,
    learned: durations::Durations,
    done: std::sync::atomic::AtomicUsize,
    runs: std::sync::Mutex<Vec<Vec<CaseResult>>>,
}

/// Whether `id` matches the glob (`*` any run of characters, `?` one character).
pub fn glob_match(glob: &str, id: &str) -> bool {
    fn m(g: &[char], s: &[char]) -> bool {
        match g.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| m(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && m(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && m(rest, &s[1..]),
        }
    }
    let g: Vec<char> = glob.chars().collect();
    let s: Vec<char> = id.chars().collect();
    m(&g, &s)
}

#[cfg(test)]
mod tests {
    use super::{CaseResult, Verdict, fold_repeats, glob_match};
    use crate::scenario::parse_str;

    fn result(v: Verdict, intermittent: bool) -> CaseResult {
        let s = parse_str(
            std::path::Path::new("s.yaml"),
            "id: x.y\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n",
        )
        .expect("scenario");
        let mut r = CaseResult::new(&s);
        r.verdict = v;
        r.intermittent = intermittent;
        r
    }

    #[test]
    fn repeated_runs_fold_to_their_verdict_flaky_or_an_intermittent_xfail() {
        let same = fold_repeats(vec![result(Verdict::Pass, false), result(Verdict::Pass, false)]);
        assert_eq!(same.verdict, Verdict::Pass);
        assert_eq!(same.runs.len(), 2);
        let differ = fold_repeats(vec![result(Verdict::Pass, false), result(Verdict::Fail, false)]);
        assert_eq!(differ.verdict, Verdict::Flaky);
        // A deviation the baseline calls intermittent, seen in one of three runs: XFAIL.
        let some =
            fold_repeats(vec![result(Verdict::Pass, true), result(Verdict::Xfail, true), result(Verdict::Pass, true)]);
        assert_eq!(some.verdict, Verdict::Xfail);
        assert!(some.message.starts_with("intermittent, failed in 1 of 3 runs"), "{}", some.message);
        // But an intermittent entry does not hide a FAIL.
        let worse = fold_repeats(vec![result(Verdict::Xfail, true), result(Verdict::Fail, true)]);
        assert_eq!(worse.verdict, Verdict::Flaky);
    }

    #[test]
    fn globs() {
        assert!(glob_match("calls.*", "calls.echo"));
        assert!(glob_match("*echo", "calls.echo"));
        assert!(glob_match("c?lls.echo", "calls.echo"));
        assert!(!glob_match("calls.*", "conn.x"));
        assert!(glob_match("calls.echo", "calls.echo"));
    }
}
