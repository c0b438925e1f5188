//! A whole run: the scenarios of one or more sides (targets) scheduled together, longest first,
//! with the parallelism each side would have alone.

use std::sync::Arc;
use std::time::Duration;

use crate::scenario::Scenario;

use super::{CaseResult, Config, Target, Verdict, durations, fold_repeats, run_scenario};

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
