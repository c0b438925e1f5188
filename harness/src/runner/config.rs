//! The options of a run and the defaults derived from the machine (jobs, budgets, teardown times).

use std::time::Duration;

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
