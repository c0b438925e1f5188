//! One case: start the target for a scenario, run its steps (the tool-process side here, the
//! bridge side in [`super::bridge`]), then judge the outcome, the observers' findings and the
//! known failures into one verdict.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::UnixListener;

use crate::scenario::{Scenario, SocketSetup};
use crate::testee::ENV_SOCKET;

use super::exec::leaked;
use super::{
    CaseResult, Check, Config, DEFAULT_SCENARIO_TIMEOUT, Exec, GRACE, KILL_LIMIT, KnownFailure, Outcome, Proc,
    STDERR_TAIL, StepError, Target, TargetKind, Verdict, bridge, judge, observe, process, tail_lines, target,
};

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
    // Intermittent: an own entry says so (a target-wide one only where it excused a finding, below).
    res.intermittent = known.iter().any(|k| k.intermittent && !k.anywhere);
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
                res.intermittent |= k.intermittent;
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
    let sock_value = match socket_value(s.testee.socket, dir.path(), &sock) {
        Ok(v) => v,
        Err(o) => return o,
    };
    env.insert(ENV_SOCKET.to_owned(), sock_value.clone());
    let proc = match &target.kind {
        TargetKind::InProcess => {
            let Some(path) = sock_value else { return Outcome::Error("in-process testees need the socket".into()) };
            let opts = crate::testee::Options {
                middleware: s.testee.middleware,
                misbehave: s.testee.misbehave,
                hidden: !s.testee.nothing_hidden,
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
    // `hidden: false`: the target runs without `hidden` (the start chosen for it hides nothing).
    let features: Vec<String> =
        target.features.iter().filter(|f| !(s.testee.nothing_hidden && *f == "hidden")).cloned().collect();
    let mut ex = Exec::new(s, scale, &features, s.testee.middleware, listener, proc);
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

/// The testee's `PROTOMCP_SOCKET` for the scenario's socket setup (`None`: unset), making what
/// the setup needs in the scenario's directory `dir` (a plain file, a socket nobody accepts
/// on); `sock` is the socket the harness listens on.
fn socket_value(setup: SocketSetup, dir: &std::path::Path, sock: &std::path::Path) -> Result<Option<String>, Outcome> {
    Ok(match setup {
        SocketSetup::Normal => Some(sock.display().to_string()),
        SocketSetup::Unset => None,
        SocketSetup::Empty => Some(String::new()),
        SocketSetup::Missing => Some(dir.join("missing.sock").display().to_string()),
        SocketSetup::NotASocket => {
            let p = dir.join("not-a-socket");
            if let Err(e) = std::fs::write(&p, b"not a socket\n") {
                return Err(Outcome::Error(format!("cannot create {}: {e}", p.display())));
            }
            Some(p.display().to_string())
        }
        SocketSetup::Refused => {
            let p = dir.join("refused.sock");
            match std::os::unix::net::UnixListener::bind(&p) {
                Ok(l) => drop(l),
                Err(e) => return Err(Outcome::Error(format!("cannot bind {}: {e}", p.display()))),
            }
            Some(p.display().to_string())
        }
    })
}
