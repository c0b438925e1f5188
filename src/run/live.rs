//! The output of sides that run together: each side's verdict lines, then its report, one side
//! after the other, as if they had run one after the other. The first side unfinished prints its
//! lines as they come; a later side's lines are held until the sides before it have printed their
//! reports. The progress counter on stderr counts every side.

use std::sync::atomic::AtomicBool;

use super::output::print_side;
use super::targets::Side;
use super::{Arc, BTreeMap, CaseResult, Summary, Target, Write, report, runner};

/// The state of the output, shared by every side's `on_done`.
pub(super) struct Live {
    sides: Vec<SideOut>,
    /// The side whose lines go out as they come; the ones before it have printed their reports.
    current: usize,
    out: Out,
}

/// How the run prints: golden comparisons, the arguments repeated in re-run lines, and where.
pub(super) struct Out {
    pub(super) golden: Option<runner::golden::GoldenDir>,
    pub(super) golden_failed: Arc<AtomicBool>,
    pub(super) args: String,
    pub(super) progress: bool,
    pub(super) verbose: bool,
    pub(super) tty: bool,
    /// One shard of a run (`--shard`): a side that executed nothing is not vacuous by itself.
    pub(super) sharded: bool,
}

struct SideOut {
    label: &'static str,
    target: Arc<Target>,
    /// Scenario id → its place in the side's list (reports follow that order).
    place: BTreeMap<String, usize>,
    /// The side's results so far, golden comparisons made, in the order they finished.
    finished: Vec<CaseResult>,
    /// How many of `finished` have had their verdict line printed.
    printed: usize,
}

impl Live {
    pub(super) fn new(sides: &[Side], out: Out) -> Live {
        let sides = sides
            .iter()
            .map(|s| SideOut {
                label: s.label,
                target: s.target.clone(),
                place: s.scenarios.iter().enumerate().map(|(i, sc)| (sc.id.clone(), i)).collect(),
                finished: Vec::new(),
                printed: 0,
            })
            .collect();
        Live { sides, current: 0, out }
    }

    /// Prints the header of the first side (when there are several).
    pub(super) fn start(&mut self) {
        self.header(0);
    }

    /// What `on_done` of side `k` does with a finished scenario: its golden comparison, its
    /// verdict line now or once the sides before it are done, the progress counter; and when
    /// this finishes the current side, that side's report and the lines the next one held.
    pub(super) fn finished(&mut self, k: usize, r: &CaseResult) {
        let mut r = r.clone();
        if let Some(g) = &self.out.golden {
            r.golden = Some(g.judge(&r).unwrap_or_else(|e| {
                self.out.golden_failed.store(true, std::sync::atomic::Ordering::Relaxed);
                eprintln!("protomcp-conform: golden: {e}");
                runner::golden::Golden::NotCompared(e.to_string())
            }));
        }
        // The output needs the verdict, the message and the transcript's tail, not the
        // transcript: the results of the run keep that when asked to.
        r.transcript = Default::default();
        self.sides[k].finished.push(r);
        if self.out.progress {
            eprint!("\r\x1b[K");
        }
        self.catch_up(None);
        let (n, total) = self.counts();
        if self.out.progress && n < total {
            eprint!("[{n}/{total}]");
        }
    }

    /// Prints what the current side has not printed; while it is complete, its report and then
    /// the same for the next side. `results` (per side, in the order of its scenarios) completes
    /// the sides at the end of the run, including a scenario whose task never called `on_done`.
    fn catch_up(&mut self, results: Option<&[Vec<CaseResult>]>) {
        while self.current < self.sides.len() {
            let k = self.current;
            let side = &mut self.sides[k];
            let mut out = std::io::stdout().lock();
            for r in &side.finished[side.printed..] {
                // Skipped scenarios are counted per reason after the side, blocked ones per root
                // cause (each with --verbose).
                if self.out.verbose || !matches!(r.verdict, runner::Verdict::Skip | runner::Verdict::Blocked) {
                    let _ = writeln!(out, "{}", report::line(r, self.out.tty));
                }
            }
            let _ = out.flush();
            drop(out);
            side.printed = side.finished.len();
            let complete = side.finished.len() == side.place.len();
            if !complete && results.is_none() {
                return;
            }
            let ordered = self.results_of(k, results.map(|r| &r[k]));
            let _ = print_side(
                &self.sides[k].target,
                &ordered,
                self.out.golden.as_ref(),
                &self.out.args,
                self.out.verbose,
                self.out.tty,
                self.out.sharded,
            );
            self.current += 1;
            self.header(self.current);
        }
    }

    /// Side `k`'s results in the order of its scenarios: those of the run when given (with the
    /// golden comparisons made as they finished), else the ones finished.
    fn results_of(&self, k: usize, run: Option<&Vec<CaseResult>>) -> Vec<CaseResult> {
        let side = &self.sides[k];
        match run {
            Some(run) => run
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.golden = side.finished.iter().find(|d| d.id == r.id).and_then(|d| d.golden.clone());
                    r
                })
                .collect(),
            None => {
                let mut v = side.finished.clone();
                v.sort_by_key(|r| side.place.get(&r.id).copied().unwrap_or(usize::MAX));
                v
            }
        }
    }

    /// At the end of the run: every side's remaining lines and report; the results with their
    /// golden comparisons.
    pub(super) fn finish(&mut self, results: Vec<Vec<CaseResult>>) -> Vec<(Arc<Target>, Vec<CaseResult>)> {
        if self.out.progress {
            eprint!("\r\x1b[K");
        }
        self.catch_up(Some(&results));
        results.iter().enumerate().map(|(k, r)| (self.sides[k].target.clone(), self.results_of(k, Some(r)))).collect()
    }

    /// Scenarios finished and to run, over every side.
    pub(super) fn counts(&self) -> (usize, usize) {
        self.sides.iter().fold((0, 0), |(n, t), s| (n + s.finished.len(), t + s.place.len()))
    }

    /// The verdicts so far, over every side.
    pub(super) fn summary(&self) -> Summary {
        Summary::of(self.sides.iter().flat_map(|s| s.finished.iter().map(|r| r.verdict)))
    }

    fn header(&self, k: usize) {
        if self.sides.len() < 2 || k >= self.sides.len() {
            return;
        }
        let s = &self.sides[k];
        let _ = writeln!(
            std::io::stdout().lock(),
            "{}== {}: {} scenarios against the {}",
            if k == 0 { "" } else { "\n" },
            s.label,
            s.place.len(),
            s.target.name
        );
    }
}
