//! The result of one case: what a scenario's run found, how repeated runs fold into one, and the
//! root causes of the cases a broken precondition blocked.

use std::time::Duration;

use crate::requirements::Level;
use crate::scenario::Scenario;

use super::{Check, Verdict, observe, verdict};

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
    /// An own known-failures entry says the deviation is intermittent, or a target-wide one
    /// (intermittent by rule) excused a finding of this run: repeated runs that differ only in
    /// PASS and XFAIL fold to XFAIL, not FLAKY.
    pub intermittent: bool,
    /// What the testee's process group held when it connected and when the steps were done
    /// (`/proc`, [`crate::io::resources`]); `None` when it was not sampled both times.
    pub resources: Option<crate::io::resources::Use>,
    /// With `--golden DIR`: how the transcript compares with `DIR/<id>.snap` (beside the verdict).
    pub golden: Option<Golden>,
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
    let intermittent = runs.iter().any(|r| r.intermittent)
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

pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
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

/// How a scenario's transcript compares with its golden file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Golden {
    /// The same text.
    Same,
    /// Different: a unified diff, golden file first.
    Changed { diff: String },
    /// No golden file yet.
    New,
    /// Written with `--accept` (it was new, or it changed: the diff, empty when new).
    Accepted { diff: String },
    /// Not compared, and why (skipped, not started, not deterministic).
    NotCompared(String),
}

impl Golden {
    /// The word shown beside the verdict.
    pub fn word(&self) -> &'static str {
        match self {
            Golden::Same => "same",
            Golden::Changed { .. } => "CHANGED",
            Golden::New => "NEW",
            Golden::Accepted { .. } => "accepted",
            Golden::NotCompared(_) => "not compared",
        }
    }

    /// CHANGED and NEW fail a run that does not accept them (as a snapshot test does).
    pub fn unaccepted(&self) -> bool {
        matches!(self, Golden::Changed { .. } | Golden::New)
    }

    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"status": self.word().to_lowercase()});
        match self {
            Golden::Changed { diff } | Golden::Accepted { diff } if !diff.is_empty() => {
                v["diff"] = diff.as_str().into();
            }
            Golden::NotCompared(why) => v["reason"] = why.as_str().into(),
            _ => {}
        }
        v
    }
}
