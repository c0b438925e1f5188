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
}

impl Verdict {
    pub const ALL: [Verdict; 7] =
        [Verdict::Pass, Verdict::Fail, Verdict::Warn, Verdict::Skip, Verdict::Xfail, Verdict::Xpass, Verdict::Error];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Warn => "WARN",
            Verdict::Skip => "SKIP",
            Verdict::Xfail => "XFAIL",
            Verdict::Xpass => "XPASS",
            Verdict::Error => "ERROR",
        }
    }

    /// Whether the scenario was executed (everything but SKIP).
    pub fn executed(self) -> bool {
        self != Verdict::Skip
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
}

/// The verdict and the message reported for an outcome of a scenario of `level`; `known` is the
/// reason from the known-failures file when the scenario is listed there.
pub fn judge(outcome: &Outcome, level: Level, known: Option<&str>) -> (Verdict, String) {
    match outcome {
        Outcome::Skipped(why) => (Verdict::Skip, why.clone()),
        Outcome::Error(why) => (Verdict::Error, why.clone()),
        Outcome::Passed => match known {
            Some(reason) => {
                (Verdict::Xpass, format!("listed as a known failure ({reason}) but passed: remove the stale entry"))
            }
            None => (Verdict::Pass, String::new()),
        },
        Outcome::Failed(why) => match (level, known) {
            (Level::May, _) => (Verdict::Pass, format!("note (MAY, informational): {why}")),
            (_, Some(reason)) => (Verdict::Xfail, format!("known failure ({reason}): {why}")),
            (Level::Must, None) => (Verdict::Fail, why.clone()),
            (Level::Should, None) => (Verdict::Warn, why.clone()),
        },
    }
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
            } += 1;
        }
        s
    }

    pub fn executed(&self) -> usize {
        self.pass + self.fail + self.warn + self.xfail + self.xpass + self.error
    }

    /// The run's exit status: 3 for an ERROR or a run that executed nothing, 1 for a FAIL or an
    /// XPASS, 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.error > 0 || self.executed() == 0 {
            3
        } else if self.fail > 0 || self.xpass > 0 {
            1
        } else {
            0
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pass, {} fail, {} warn, {} skip, {} xfail, {} xpass, {} error",
            self.pass, self.fail, self.warn, self.skip, self.xfail, self.xpass, self.error
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_known_failures() {
        let failed = Outcome::Failed("x".into());
        assert_eq!(judge(&failed, Level::Must, None).0, Verdict::Fail);
        assert_eq!(judge(&failed, Level::Should, None).0, Verdict::Warn);
        assert_eq!(judge(&failed, Level::May, None).0, Verdict::Pass);
        assert_eq!(judge(&failed, Level::Must, Some("r")).0, Verdict::Xfail);
        assert_eq!(judge(&Outcome::Passed, Level::Must, Some("r")).0, Verdict::Xpass);
        assert_eq!(judge(&Outcome::Passed, Level::Must, None).0, Verdict::Pass);
        assert_eq!(judge(&Outcome::Error("e".into()), Level::Must, Some("r")).0, Verdict::Error);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Summary::of([]).exit_code(), 3);
        assert_eq!(Summary::of([Verdict::Skip]).exit_code(), 3);
        assert_eq!(Summary::of([Verdict::Pass, Verdict::Warn, Verdict::Xfail]).exit_code(), 0);
        assert_eq!(Summary::of([Verdict::Pass, Verdict::Xpass]).exit_code(), 1);
        assert_eq!(Summary::of([Verdict::Fail, Verdict::Error]).exit_code(), 3);
    }
}
