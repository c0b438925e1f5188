//! `explore`: generated op sequences against live peers (fresh processes per case), with
//! shrinking to a minimal scenario file and differential verdicts across several targets.
//!
//! A case is a sequence of [`Op`]s drawn by the proptest strategy
//! [`strategies::ops`](protomcp_proto::strategies::ops) from a seed; the session model turns it
//! into a [`Plan`], [`yaml_out`] into an ordinary scenario, and the normal runner executes that
//! against a fresh testee (its own temp dir, socket and process group). The runner's verdict is
//! the first judge; the [`Checker`] then replays the transcript both ways and names the
//! requirements broken. A failing case is shrunk by dropping ops (chunks, then single ops) and
//! replaying every candidate on a fresh process; the smallest still failing is written out. The
//! case loop and the shrinking are [`batch`]'s, shared with `explore --bridge` ([`bridge`]).

pub mod batch;
pub mod bridge;
pub mod bridge_gen;
pub mod yaml_out;

use std::future::Future;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
use protomcp_proto::session::{self, Finding, Op, Plan};
use serde_json::Value;

use crate::runner::observe::check_transcript;
use crate::runner::{self, CaseResult, Config, Target, Verdict};

use batch::CaseKind;

/// Options of an exploration (of tool processes and of bridges alike).
#[derive(Debug, Clone)]
pub struct ExploreConfig {
    /// Cases to generate.
    pub cases: u64,
    /// The run's seed: case `k` is drawn from `case_seed(seed, k)`.
    pub seed: u64,
    /// Stop generating new cases after this long (shrinking still finishes).
    pub time: Option<Duration>,
    /// Most ops per case.
    pub max_ops: usize,
    /// Cases run at once.
    pub jobs: usize,
    /// The runner's options (timeout scale).
    pub runner: Config,
    /// Most replays the shrinker may spend.
    pub shrink_budget: usize,
}

impl Default for ExploreConfig {
    fn default() -> Self {
        ExploreConfig {
            cases: 100,
            seed: 0,
            time: None,
            max_ops: 24,
            jobs: Config::default().jobs,
            runner: Config::default(),
            shrink_budget: 400,
        }
    }
}

/// The seed of case `k` of a run (splitmix64), so that any case can be drawn alone.
pub fn case_seed(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The ops of case `k`.
pub fn generate(seed: u64, k: u64, max_ops: usize) -> Vec<Op> {
    let s = case_seed(seed, k);
    let mut bytes = [0u8; 32];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (s.rotate_left(8 * (i as u32 % 8)) >> (i / 8)) as u8 ^ i as u8;
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(proptest::test_runner::Config::default(), rng);
    protomcp_proto::strategies::ops(max_ops).new_tree(&mut runner).expect("the op strategy never rejects").current()
}

/// Why a case failed.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The target it failed against (or, differential, the first of the two that differ).
    pub target: String,
    /// The runner's message (or the divergence).
    pub message: String,
    /// What the invariant checker (or, for a bridge, the bridge model and the failing step) made
    /// of the transcript.
    pub findings: Vec<Finding>,
    /// DIVERGENT: the normalized transcripts of two targets differ (and neither failed).
    pub divergent: Option<(String, String, String, String)>,
}

impl Failure {
    pub fn summary(&self) -> String {
        match (&self.divergent, self.findings.first()) {
            (Some((a, _, b, _)), _) => format!("DIVERGENT: {a} and {b} answered differently"),
            (None, Some(f)) => format!("{f}"),
            (None, None) => self.message.lines().next().unwrap_or("").to_owned(),
        }
    }
}

/// What one case did.
#[derive(Debug, Clone)]
pub struct CaseRun {
    pub plan: Plan,
    pub results: Vec<CaseResult>,
    pub failure: Option<Failure>,
}

fn scenario_of(plan: &Plan, id: &str) -> Result<crate::scenario::Scenario, GeneratorBug> {
    load_generated(
        id,
        &yaml_out::scenario_yaml(id, "A generated session is answered as the spec requires", plan, "generated", &[]),
    )
}

/// A generated scenario that does not load: a bug of the generator (the harness's party).
#[derive(Debug, thiserror::Error)]
#[error("harness bug: a generated scenario does not load: {0}")]
pub struct GeneratorBug(#[from] crate::scenario::ScenarioErrors);

/// A generated scenario's text loaded as the runner's scenario; one that does not load is a bug
/// of the generator, said so.
fn load_generated(id: &str, text: &str) -> Result<crate::scenario::Scenario, GeneratorBug> {
    Ok(crate::scenario::parse_generated(Path::new(&format!("<{id}>.yaml")), text)?)
}

/// What the testee sent, for differential comparison: the normalized lines of each step,
/// without notifications (their number and place depend on timing: progress, logs, tool-list
/// changes) and sorted within the step (the order of replies is free, TP-CONCUR-03).
fn from_testee(r: &CaseResult) -> String {
    let mut out = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let text = r.transcript_text();
    let flush = |block: &mut Vec<&str>, out: &mut Vec<String>| {
        block.sort_unstable();
        out.extend(block.drain(..).map(String::from));
    };
    for line in text.lines() {
        if line.starts_with("== step") {
            flush(&mut block, &mut out);
            out.push(line.to_owned());
            continue;
        }
        let Some(rest) = line.strip_prefix("testee→harness ") else { continue };
        if rest.contains("  # ") {
            // Ignored, or a part of a result (sideband header, stream chunk): the result itself
            // has its own line.
            continue;
        }
        let json = rest;
        let arm = serde_json::from_str::<Value>(json).ok().and_then(|v| protomcp_proto::dynamic::arm_of(&v));
        if arm.is_some_and(|a| yaml_out::IGNORED.contains(&a)) {
            continue;
        }
        block.push(line);
    }
    flush(&mut block, &mut out);
    out.join("\n")
}

/// Runs `ops` against every target (one fresh process each) and judges: a failure against any
/// target first, then (several targets) a divergence of what the testees sent.
pub async fn run_case(ops: &[Op], targets: &[Arc<Target>], cfg: &Config, label: &str) -> CaseRun {
    let features: Vec<String> = intersect_features(targets);
    // Differential: whether a cancel catches a call in time is a race, not a difference.
    let kept: Vec<Op>;
    let ops = if targets.len() > 1 {
        kept = ops.iter().filter(|o| !matches!(o, Op::Cancel { .. })).cloned().collect();
        &kept[..]
    } else {
        ops
    };
    let plan = session::plan(&features, ops);
    let s = match scenario_of(&plan, label) {
        Ok(s) => s,
        Err(bug) => {
            let message = bug.to_string();
            let failure = Failure { target: "the harness".into(), message, findings: Vec::new(), divergent: None };
            return CaseRun { plan, results: Vec::new(), failure: Some(failure) };
        }
    };
    let mut results = Vec::new();
    for t in targets {
        results.push(runner::run_scenario(&s, t, cfg).await);
    }
    let mut failure = None;
    for (r, t) in results.iter().zip(targets) {
        if matches!(r.verdict, Verdict::Pass | Verdict::Skip) {
            continue;
        }
        let mut findings = check_transcript(&r.transcript.to_vec(), true);
        if findings.is_empty() && r.message.contains("nothing arrived") {
            findings.push(Finding { requirement: "TP-SECURITY-02", message: "the peer stopped answering".into() });
        }
        let mut message = r.message.clone();
        if !r.stderr_tail.is_empty() {
            message.push_str(&format!("\n  stderr: {}", r.stderr_tail.replace('\n', "\n          ")));
        }
        failure = Some(Failure { target: t.name.clone(), message, findings, divergent: None });
        break;
    }
    if failure.is_none() && results.len() > 1 {
        let first = from_testee(&results[0]);
        for (r, t) in results.iter().zip(targets).skip(1) {
            if from_testee(r) != first {
                failure = Some(Failure {
                    target: targets[0].name.clone(),
                    message: "the normalized transcripts differ".into(),
                    findings: Vec::new(),
                    divergent: Some((
                        targets[0].name.clone(),
                        results[0].transcript_text(),
                        t.name.clone(),
                        r.transcript_text(),
                    )),
                });
                break;
            }
        }
    }
    CaseRun { plan, results, failure }
}

/// The features every target claims (a differential run only generates what all can do).
pub fn intersect_features(targets: &[Arc<Target>]) -> Vec<String> {
    let Some(first) = targets.first() else { return Vec::new() };
    first.features.iter().filter(|f| targets.iter().all(|t| t.features.contains(f))).cloned().collect()
}

/// Generated tool-process sessions as a [`CaseKind`]: case `k` is [`generate`]`(seed, k,
/// max_ops)`, run by [`run_case`] against every target.
pub struct ToolCases(pub batch::Cases);

impl CaseKind for ToolCases {
    type Case = Vec<Op>;
    type Run = CaseRun;

    fn generate(&self, k: u64) -> Vec<Op> {
        generate(self.0.seed, k, self.0.max_ops)
    }

    fn label(&self, k: u64) -> String {
        format!("explore.case-{k}")
    }

    fn run(&self, case: &Vec<Op>, label: &str) -> impl Future<Output = CaseRun> + Send {
        run_case(case, &self.0.targets, &self.0.runner, label)
    }

    fn failure<'r>(&self, run: &'r CaseRun) -> Option<&'r Failure> {
        run.failure.as_ref()
    }

    fn op_count(&self, case: &Vec<Op>) -> usize {
        case.len()
    }

    fn without(&self, case: &Vec<Op>, drop: Range<usize>) -> Vec<Op> {
        let mut c = case.clone();
        c.drain(drop);
        c
    }

    /// A failure that names no requirement matches one that does (the runner's message alone).
    fn same_kind(&self, a: &Failure, b: &Failure) -> bool {
        batch::same_failure(a, b, true)
    }
}

/// The result of shrinking a tool-process case.
pub type Shrunk = batch::Shrunk<Vec<Op>, CaseRun>;

/// What an exploration of tool processes found.
pub type Found = batch::Found<Vec<Op>, CaseRun>;

/// The end of an exploration.
#[derive(Debug)]
pub struct Report {
    pub cases_run: u64,
    /// Frames sent by all cases (handshakes and alive calls included).
    pub frames_sent: u64,
    pub elapsed: Duration,
    pub found: Option<Found>,
}

/// Events for the command line.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// Runs up to `cfg.cases` cases (`cfg.jobs` at a time) until the first failure, shrinks it and
/// writes the scenario into `out_dir`.
pub async fn explore(targets: Vec<Arc<Target>>, cfg: ExploreConfig, out_dir: &Path, progress: Progress) -> Report {
    let started = Instant::now();
    let mut frames_sent = 0u64;
    let targets = Arc::new(targets);
    let kind = Arc::new(ToolCases(batch::Cases::new(targets.clone(), &cfg)));
    let outcome = batch::run_cases(kind, &cfg, &progress, |runs, before| {
        for (j, run) in runs.iter().enumerate() {
            let cases_run = before + j as u64 + 1;
            frames_sent += (run.plan.sends() as u64 + 2) * targets.len() as u64;
            if cases_run.is_multiple_of(100) {
                progress(&format!("{cases_run} cases, {frames_sent} frames, {:.0?}", started.elapsed()));
            }
        }
    })
    .await;
    let found = outcome.found.map(|(k, original_ops, shrunk)| {
        let file = write_regression(out_dir, cfg.seed, k, original_ops, &shrunk, &targets);
        Found { case: k, original_ops, shrunk, file }
    });
    Report { cases_run: outcome.cases_run, frames_sent, elapsed: started.elapsed(), found }
}

/// Writes the shrunk case as `out_dir/explore-<seed>-<case>.yaml`; returns the path (the file
/// is not written when the directory cannot be created, and the path says where it would be).
fn write_regression(
    out_dir: &Path,
    seed: u64,
    case: u64,
    original: usize,
    s: &Shrunk,
    targets: &[Arc<Target>],
) -> PathBuf {
    let id = format!("regressions.explore-{seed}-{case}");
    let f = s.run.failure.as_ref().expect("a failure");
    let shrunk = (original, s.case.len(), s.replays);
    let notes = batch::regression_notes("protomcp-conform explore", seed, case, targets, shrunk, f);
    let findings: Vec<Finding> = f.findings.iter().filter(|x| known_requirement(x.requirement)).cloned().collect();
    let text = yaml_out::scenario_yaml(&id, &title(f), &s.run.plan, &notes, &findings);
    batch::write_regression(out_dir, &format!("explore-{seed}-{case}.yaml"), &text)
}

fn known_requirement(id: &str) -> bool {
    crate::requirements::get(id).is_some()
}

fn title(f: &Failure) -> String {
    match f.findings.first() {
        Some(x) => format!("Regression ({}): {}", x.requirement, x.message),
        None if f.divergent.is_some() => "Regression: targets answered this generated session differently".into(),
        None => "Regression: a generated session the peer did not serve as the spec requires".into(),
    }
}
