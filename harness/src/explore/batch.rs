//! The case loop both explorations share, over a [`CaseKind`] (tool-process sessions in
//! [`super::ToolCases`], host sessions against bridges in [`super::bridge::BridgeCases`]): case
//! `k` is drawn from the run's seed alone, `jobs` cases run at once (each on fresh processes),
//! every batch is tallied in case order, the lowest-numbered failing case of the first batch
//! with one is shrunk by dropping ops and replaying each candidate on fresh processes.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ExploreConfig, Failure, Progress};

/// One kind of generated case: how it is drawn, run, judged and cut down.
pub trait CaseKind: Send + Sync + 'static {
    /// A generated case (a sequence of ops).
    type Case: Clone + Send + Sync + 'static;
    /// What running a case did: the results and the judgement.
    type Run: Send + 'static;

    /// Case `k` of the run.
    fn generate(&self, k: u64) -> Self::Case;
    /// The scenario id case `k` runs as (`explore.case-7`).
    fn label(&self, k: u64) -> String;
    /// Runs the case against every target (a fresh process each) and judges it; `label` is the
    /// scenario id it runs as.
    fn run(&self, case: &Self::Case, label: &str) -> impl Future<Output = Self::Run> + Send;
    /// Why the run failed, if it did.
    fn failure<'r>(&self, run: &'r Self::Run) -> Option<&'r Failure>;
    /// The case's ops.
    fn op_count(&self, case: &Self::Case) -> usize;
    /// The case without the ops in `drop`.
    fn without(&self, case: &Self::Case, drop: Range<usize>) -> Self::Case;
    /// Whether a candidate failing with `b` fails the same way as the original, `a`.
    fn same_kind(&self, a: &Failure, b: &Failure) -> bool;
}

/// What every case of an exploration shares: the targets each case runs against, the runner's
/// options, the run's seed and the most ops a case may have.
pub struct Cases {
    pub targets: Arc<Vec<Arc<crate::runner::Target>>>,
    pub runner: crate::runner::Config,
    pub seed: u64,
    pub max_ops: usize,
}

impl Cases {
    pub fn new(targets: Arc<Vec<Arc<crate::runner::Target>>>, cfg: &ExploreConfig) -> Cases {
        Cases { targets, runner: cfg.runner.clone(), seed: cfg.seed, max_ops: cfg.max_ops }
    }
}

/// Whether `b` fails the same way as `a`: the same kind (divergence or failure) and, when both
/// name a requirement, the same first one. When one names a requirement and the other none:
/// `lenient` says they match.
pub fn same_failure(a: &Failure, b: &Failure, lenient: bool) -> bool {
    if a.divergent.is_some() != b.divergent.is_some() {
        return false;
    }
    match (a.findings.first(), b.findings.first()) {
        (Some(x), Some(y)) => x.requirement == y.requirement,
        (None, None) => true,
        _ => lenient,
    }
}

/// The result of shrinking.
#[derive(Debug, Clone)]
pub struct Shrunk<C, R> {
    /// The smallest case still failing the same way.
    pub case: C,
    /// Its run.
    pub run: R,
    /// Candidates replayed.
    pub replays: usize,
    pub elapsed: Duration,
}

/// What an exploration found.
#[derive(Debug)]
pub struct Found<C, R> {
    /// The case number.
    pub case: u64,
    /// Its ops before shrinking.
    pub original_ops: usize,
    pub shrunk: Shrunk<C, R>,
    /// The scenario file written.
    pub file: std::path::PathBuf,
}

/// The end of the case loop: cases run, and the failing case (its number and ops before
/// shrinking), shrunk.
pub struct Outcome<C, R> {
    pub cases_run: u64,
    pub found: Option<(u64, usize, Shrunk<C, R>)>,
}

/// Runs up to `cfg.cases` cases (`cfg.jobs` at a time, no new ones after `cfg.time`) until a
/// batch has a failure, then shrinks the lowest-numbered failing case of it (at most
/// `cfg.shrink_budget` replays). `on_batch` sees each batch's runs in case order and the count of
/// cases run before it.
pub async fn run_cases<K: CaseKind>(
    kind: Arc<K>,
    cfg: &ExploreConfig,
    progress: &Progress,
    mut on_batch: impl FnMut(&[&K::Run], u64),
) -> Outcome<K::Case, K::Run> {
    let started = Instant::now();
    let mut next = 0u64;
    let mut cases_run = 0u64;
    while next < cfg.cases {
        if cfg.time.is_some_and(|t| started.elapsed() >= t) {
            progress(&format!("time budget spent after {cases_run} cases"));
            break;
        }
        let batch: Vec<u64> = (next..(next + cfg.jobs.max(1) as u64).min(cfg.cases)).collect();
        next += batch.len() as u64;
        let mut set = tokio::task::JoinSet::new();
        for &k in &batch {
            let kind = kind.clone();
            set.spawn(async move {
                let case = kind.generate(k);
                let run = kind.run(&case, &kind.label(k)).await;
                (k, case, run)
            });
        }
        let mut done = Vec::new();
        while let Some(j) = set.join_next().await {
            if let Ok(x) = j {
                done.push(x);
            }
        }
        done.sort_by_key(|(k, _, _)| *k);
        on_batch(&done.iter().map(|(_, _, r)| r).collect::<Vec<_>>(), cases_run);
        cases_run += done.len() as u64;
        if let Some((k, case, run)) = done.into_iter().find(|(_, _, r)| kind.failure(r).is_some()) {
            let f = kind.failure(&run).expect("found");
            progress(&format!("case {k} failed ({} ops): {}", kind.op_count(&case), f.summary()));
            progress("shrinking on fresh processes…");
            let original_ops = kind.op_count(&case);
            let shrunk = shrink(&*kind, case, run, cfg.shrink_budget).await;
            return Outcome { cases_run, found: Some((k, original_ops, shrunk)) };
        }
    }
    Outcome { cases_run, found: None }
}

/// Shrinks a failing case: drops chunks of ops of halving size, then single ops, keeping a
/// candidate that still fails the same way on fresh processes; at most `budget` replays.
pub async fn shrink<K: CaseKind>(kind: &K, case: K::Case, first: K::Run, budget: usize) -> Shrunk<K::Case, K::Run> {
    let started = Instant::now();
    let want = kind.failure(&first).cloned().expect("shrinking a failing case");
    let mut best = (case, first);
    let mut replays = 0usize;
    let mut chunk = kind.op_count(&best.0).div_ceil(2).max(1);
    'outer: loop {
        let mut progress = false;
        let mut i = 0;
        while i < kind.op_count(&best.0) {
            if replays >= budget {
                break 'outer;
            }
            let end = (i + chunk).min(kind.op_count(&best.0));
            let cand = kind.without(&best.0, i..end);
            replays += 1;
            let run = kind.run(&cand, "regressions.shrinking").await;
            if kind.failure(&run).is_some_and(|f| kind.same_kind(&want, f)) {
                best = (cand, run);
                progress = true;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 && !progress {
            break;
        }
        if !progress || chunk > 1 {
            chunk = (chunk / 2).max(1);
        }
    }
    Shrunk { case: best.0, run: best.1, replays, elapsed: started.elapsed() }
}

/// The notes of a written regression: where it was found (`command`: the exploration's command
/// line up to `--seed`), how far it shrank, the findings and the runner's first line.
pub fn regression_notes(
    command: &str,
    seed: u64,
    case: u64,
    targets: &[Arc<crate::runner::Target>],
    shrunk: (usize, usize, usize),
    f: &Failure,
) -> String {
    let (original, ops, replays) = shrunk;
    let mut notes = format!(
        "Found by `{command} --seed {seed}` (case {case}) against {}; shrunk from {original} to {ops} ops in {replays} replays.\n",
        targets.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(" and "),
    );
    for x in &f.findings {
        notes.push_str(&format!("{x}\n"));
    }
    notes.push_str(&format!("runner: {}", f.message.lines().next().unwrap_or("")));
    notes
}

/// Writes a regression scenario as `out_dir/file`; returns the path (the file is not written when
/// the directory cannot be created, and the path says where it would be).
pub fn write_regression(out_dir: &std::path::Path, file: &str, text: &str) -> std::path::PathBuf {
    let path = out_dir.join(file);
    let _ = std::fs::create_dir_all(out_dir).and_then(|_| std::fs::write(&path, text));
    path
}
