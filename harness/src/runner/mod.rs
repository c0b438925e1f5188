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

mod case;
mod config;
mod result;
mod sides;

pub use case::run_scenario;
pub use config::{
    Config, DEFAULT_SCENARIO_TIMEOUT, FDS_PER_SCENARIO, GRACE, KILL_LIMIT, MAX_DEFAULT_JOBS, STDERR_TAIL, default_jobs,
    default_jobs_for,
};
pub use exec::{Exec, Proc, StepError};
pub(crate) use result::tail_lines;
pub use result::{CaseResult, RootCause, fold_repeats, root_causes};
pub use sides::{COMPANY_QUIET, OnDone, Side, expected_duration, run_all, run_sides};

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
    fn a_run_that_a_target_wide_entry_excused_folds_with_passing_runs_to_an_intermittent_xfail() {
        // Only the run whose finding a target-wide entry excused is marked intermittent.
        let folded = fold_repeats(vec![result(Verdict::Pass, false), result(Verdict::Xfail, true)]);
        assert_eq!(folded.verdict, Verdict::Xfail);
        let flaky = fold_repeats(vec![result(Verdict::Pass, false), result(Verdict::Xfail, false)]);
        assert_eq!(flaky.verdict, Verdict::Flaky);
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
