//! Verdicts, and how a scenario's outcome becomes one. Pure: no I/O here.

use std::fmt;

use crate::requirements::Level;

/// The verdict of one scenario (design §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    Pass,
    /// A MUST broken.
    Fail,
    /// A SHOULD broken.
    Warn,
    /// A feature the scenario needs is not claimed by the target (or the target cannot run it).
    Skip,
    /// Failed, and listed in the known-failures file.
    Xfail,
    /// Listed in the known-failures file, but passed: a stale entry, which fails the run.
    Xpass,
    /// The harness could not judge.
    Error,
    /// Run more than once (`--repeat N`), with verdicts that differ: the verdict cannot be trusted
    /// until the cause (the target's or the scenario's) is found. Fails the run.
    Flaky,
    /// A soak found a resource (fds, threads, processes, memory) that grows with the number of
    /// calls: the target would run out of it. Fails the run like FAIL, whatever the scenario's
    /// level, unless the known-failures file lists it (then XFAIL).
    Leak,
}

impl Verdict {
    pub const ALL: [Verdict; 9] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Warn,
        Verdict::Skip,
        Verdict::Xfail,
        Verdict::Xpass,
        Verdict::Error,
        Verdict::Flaky,
        Verdict::Leak,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Warn => "WARN",
            Verdict::Skip => "SKIP",
            Verdict::Xfail => "XFAIL",
            Verdict::Xpass => "XPASS",
            Verdict::Error => "ERROR",
            Verdict::Flaky => "FLAKY",
            Verdict::Leak => "LEAK",
        }
    }

    /// How bad the verdict is, for the verdict of a requirement over several scenarios (the
    /// worst): SKIP 0, PASS 1, XFAIL 2, WARN 3, FAIL 4, XPASS and LEAK 5, FLAKY 6, ERROR 7.
    pub fn rank(self) -> u8 {
        match self {
            Verdict::Skip => 0,
            Verdict::Pass => 1,
            Verdict::Xfail => 2,
            Verdict::Warn => 3,
            Verdict::Fail => 4,
            Verdict::Xpass | Verdict::Leak => 5,
            Verdict::Flaky => 6,
            Verdict::Error => 7,
        }
    }

    /// Whether the verdict is one a report lists as unexpected: FAIL, WARN, XPASS, ERROR, FLAKY,
    /// LEAK (not PASS, XFAIL, SKIP).
    pub fn unexpected(self) -> bool {
        !matches!(self, Verdict::Pass | Verdict::Xfail | Verdict::Skip)
    }

    /// Whether the scenario was executed (everything but SKIP).
    pub fn executed(self) -> bool {
        self != Verdict::Skip
    }
}

/// As its name (`"PASS"`), as the reports write it.
impl serde::Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happened when a scenario ran, before levels and known failures are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// A step's check failed: the testee broke what the scenario checks.
    Failed(String),
    /// Not run, and why.
    Skipped(String),
    /// The harness could not judge (setup failure, its own timeout).
    Error(String),
    /// Every step passed, but a soak found resources growing with the calls: what grew, at
    /// which rate.
    Leaked(String),
}

/// An entry of a known-failures file: the requirement(s) the target breaks in the scenario and
/// what it does instead. `requirement` is empty for an entry in the plain string form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KnownFailure {
    pub requirement: Vec<String>,
    pub reason: String,
    /// The target shows the deviation only some of the time (its own timing, e.g. a debounce):
    /// a run where it does not occur passes with a note instead of being a stale entry, and
    /// repeated runs that differ only in that are not FLAKY.
    pub intermittent: bool,
}

impl KnownFailure {
    /// The entry as shown: `BR-CALL-18: reason`.
    pub fn text(&self) -> String {
        if self.requirement.is_empty() {
            self.reason.clone()
        } else {
            format!("{}: {}", self.requirement.join(", "), self.reason)
        }
    }
}

/// The level of a failure that broke `broken` in a scenario of `level`: the scenario's, unless
/// every broken requirement is weaker (a SHOULD checked in a MUST scenario is a WARN). Never
/// stronger than the scenario's.
pub fn failure_level(level: Level, broken: &[String]) -> Level {
    use crate::requirements::{get, strength};
    let strongest = broken.iter().filter_map(|id| get(id)).map(|r| r.level).max_by_key(|l| strength(*l));
    match strongest {
        Some(l) if strength(l) < strength(level) => l,
        _ => level,
    }
}

/// The verdict and the message reported for an outcome of a scenario of `level`; `broken` are the
/// requirements the failing step checks (empty unless the outcome is `Failed`); `known` is the
/// scenario's entry in the known-failures file, if any. An entry whose requirement differs from
/// `broken` is a wrong baseline: the run fails (FAIL), whatever the level, until it is corrected.
pub fn judge(outcome: &Outcome, level: Level, broken: &[String], known: Option<&KnownFailure>) -> (Verdict, String) {
    match outcome {
        Outcome::Skipped(why) => (Verdict::Skip, why.clone()),
        Outcome::Error(why) => (Verdict::Error, why.clone()),
        Outcome::Passed => match known {
            Some(k) if k.intermittent => {
                (Verdict::Pass, format!("note: the intermittent known failure did not occur this time ({})", k.text()))
            }
            Some(k) => {
                (Verdict::Xpass, format!("listed as a known failure ({}) but passed: remove the stale entry", k.text()))
            }
            None => (Verdict::Pass, String::new()),
        },
        Outcome::Leaked(why) => deviation(level, known, broken, why, "leak", Verdict::Leak),
        Outcome::Failed(why) => {
            let level = failure_level(level, broken);
            let unlisted = if level == Level::Must { Verdict::Fail } else { Verdict::Warn };
            deviation(level, known, broken, why, "failure", unlisted)
        }
    }
}

/// A deviation (a failure or a leak, `what`) at `level` held against the scenario's
/// known-failures entry: at MAY it is a note; an entry naming other requirements than `broken`
/// is a wrong baseline (FAIL); a matching entry makes it XFAIL; without an entry it is
/// `unlisted`.
fn deviation(
    level: Level,
    known: Option<&KnownFailure>,
    broken: &[String],
    why: &str,
    what: &str,
    unlisted: Verdict,
) -> (Verdict, String) {
    match (level, known) {
        (Level::May, _) => (Verdict::Pass, format!("note (MAY, informational): {why}")),
        (_, Some(k)) if !k.requirement.is_empty() && !same_set(&k.requirement, broken) => (
            Verdict::Fail,
            format!(
                "the known-failures entry names {} but the run broke {}: correct the entry\n  entry: {}\n{why}",
                k.requirement.join(", "),
                broken.join(", "),
                k.reason
            ),
        ),
        (_, Some(k)) => (Verdict::Xfail, format!("known {what} ({}): {why}", k.text())),
        (_, None) => (unlisted, why.to_owned()),
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut b: Vec<&str> = b.iter().map(String::as_str).collect();
    a.sort_unstable();
    a.dedup();
    b.sort_unstable();
    b.dedup();
    a == b
}

/// Counts per verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    pub pass: usize,
    pub fail: usize,
    pub warn: usize,
    pub skip: usize,
    pub xfail: usize,
    pub xpass: usize,
    pub error: usize,
    pub flaky: usize,
    pub leak: usize,
}

impl Summary {
    pub fn of(verdicts: impl IntoIterator<Item = Verdict>) -> Summary {
        let mut s = Summary::default();
        for v in verdicts {
            *match v {
                Verdict::Pass => &mut s.pass,
                Verdict::Fail => &mut s.fail,
                Verdict::Warn => &mut s.warn,
                Verdict::Skip => &mut s.skip,
                Verdict::Xfail => &mut s.xfail,
                Verdict::Xpass => &mut s.xpass,
                Verdict::Error => &mut s.error,
                Verdict::Flaky => &mut s.flaky,
                Verdict::Leak => &mut s.leak,
            } += 1;
        }
        s
    }

    pub fn executed(&self) -> usize {
        self.pass + self.fail + self.warn + self.xfail + self.xpass + self.error + self.flaky + self.leak
    }

    /// The run's exit status: 3 for an ERROR or a run that executed nothing, 1 for a FAIL, an
    /// XPASS, a FLAKY or a LEAK, 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.error > 0 || self.executed() == 0 {
            3
        } else if self.fail > 0 || self.xpass > 0 || self.flaky > 0 || self.leak > 0 {
            1
        } else {
            0
        }
    }
}

impl Summary {
    /// The exit status of one shard of a run (`--shard K/N`): as [`Summary::exit_code`], but a
    /// shard (or a side of it) that executed nothing is not a vacuous run by itself: `merge`
    /// judges the whole.
    pub fn shard_exit_code(&self) -> u8 {
        if self.executed() == 0 && self.error == 0 { 0 } else { self.exit_code() }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pass, {} fail, {} warn, {} skip, {} xfail, {} xpass, {} error",
            self.pass, self.fail, self.warn, self.skip, self.xfail, self.xpass, self.error
        )?;
        if self.flaky > 0 {
            write!(f, ", {} flaky", self.flaky)?;
        }
        if self.leak > 0 {
            write!(f, ", {} leak", self.leak)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_known_failures() {
        let failed = Outcome::Failed("x".into());
        let plain = KnownFailure { requirement: vec![], reason: "r".into(), intermittent: false };
        let sometimes = KnownFailure { intermittent: true, ..plain.clone() };
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], Some(&sometimes)).0, Verdict::Pass);
        assert_eq!(judge(&failed, Level::Must, &[], Some(&sometimes)).0, Verdict::Xfail);
        assert_eq!(judge(&failed, Level::Must, &[], None).0, Verdict::Fail);
        assert_eq!(judge(&failed, Level::Should, &[], None).0, Verdict::Warn);
        assert_eq!(judge(&failed, Level::May, &[], None).0, Verdict::Pass);
        assert_eq!(judge(&failed, Level::Must, &[], Some(&plain)).0, Verdict::Xfail);
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], Some(&plain)).0, Verdict::Xpass);
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], None).0, Verdict::Pass);
        assert_eq!(judge(&Outcome::Error("e".into()), Level::Must, &[], Some(&plain)).0, Verdict::Error);
    }

    #[test]
    fn a_known_failure_naming_another_requirement_than_the_run_broke_fails_the_run() {
        let failed = Outcome::Failed("x".into());
        let broken = vec!["BR-CALL-18".to_owned()];
        let right =
            KnownFailure { requirement: vec!["BR-CALL-18".into()], reason: "dropped".into(), intermittent: false };
        let wrong =
            KnownFailure { requirement: vec!["BR-SIDEBAND-01".into()], reason: "dropped".into(), intermittent: false };
        assert_eq!(judge(&failed, Level::Must, &broken, Some(&right)).0, Verdict::Xfail);
        let (v, m) = judge(&failed, Level::Must, &broken, Some(&wrong));
        assert_eq!(v, Verdict::Fail);
        assert!(m.contains("names BR-SIDEBAND-01 but the run broke BR-CALL-18"), "{m}");
    }

    #[test]
    fn a_should_broken_in_a_must_scenario_is_a_warning_and_never_the_other_way() {
        let failed = Outcome::Failed("x".into());
        // BR-CANCEL-05 is a SHOULD, BR-CANCEL-01 a MUST.
        assert_eq!(judge(&failed, Level::Must, &["BR-CANCEL-05".into()], None).0, Verdict::Warn);
        assert_eq!(judge(&failed, Level::Must, &["BR-CANCEL-01".into()], None).0, Verdict::Fail);
        assert_eq!(judge(&failed, Level::Should, &["BR-CANCEL-01".into()], None).0, Verdict::Warn);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Summary::of([]).exit_code(), 3);
        assert_eq!(Summary::of([Verdict::Skip]).exit_code(), 3);
        assert_eq!(Summary::of([Verdict::Pass, Verdict::Warn, Verdict::Xfail]).exit_code(), 0);
        assert_eq!(Summary::of([Verdict::Pass, Verdict::Xpass]).exit_code(), 1);
        assert_eq!(Summary::of([Verdict::Fail, Verdict::Error]).exit_code(), 3);
        assert_eq!(Summary::of([Verdict::Pass, Verdict::Flaky]).exit_code(), 1);
        assert_eq!(Summary::of([Verdict::Pass, Verdict::Leak]).exit_code(), 1);
        assert_eq!(
            Summary::of([Verdict::Pass, Verdict::Leak]).to_string(),
            "1 pass, 0 fail, 0 warn, 0 skip, 0 xfail, 0 xpass, 0 error, 1 leak"
        );
    }

    #[test]
    fn a_leak_fails_the_run_at_any_level_but_may_unless_the_baseline_names_it() {
        let leaked = Outcome::Leaked("fd (file): +1 fd (file) per cancelled call".into());
        let broken = vec!["TP-CANCEL-06".to_owned()];
        assert_eq!(judge(&leaked, Level::Should, &broken, None).0, Verdict::Leak);
        assert_eq!(judge(&leaked, Level::Must, &broken, None).0, Verdict::Leak);
        assert_eq!(judge(&leaked, Level::May, &broken, None).0, Verdict::Pass);
        let known =
            KnownFailure { requirement: vec!["TP-CANCEL-06".into()], reason: "leaks".into(), intermittent: false };
        let (v, m) = judge(&leaked, Level::Should, &broken, Some(&known));
        assert_eq!(v, Verdict::Xfail);
        assert!(m.starts_with("known leak (TP-CANCEL-06: leaks)"), "{m}");
        let wrong = KnownFailure { requirement: vec!["TP-CALL-01".into()], ..known };
        assert_eq!(judge(&leaked, Level::Should, &broken, Some(&wrong)).0, Verdict::Fail);
    }
}
