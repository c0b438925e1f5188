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
    /// Not reached: a precondition (connect, the handshake, the first listing) broke before the
    /// scenario's own requirements were judged. The run reports each root cause once, with the
    /// count of cases it blocked; it fails the run through that root cause (exit 1), never as a
    /// failure of the blocked cases' requirements.
    Blocked,
}

impl Verdict {
    pub const ALL: [Verdict; 10] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Warn,
        Verdict::Skip,
        Verdict::Xfail,
        Verdict::Xpass,
        Verdict::Error,
        Verdict::Flaky,
        Verdict::Leak,
        Verdict::Blocked,
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
            Verdict::Blocked => "BLOCKED",
        }
    }

    /// How bad the verdict is, for the verdict of a requirement over several scenarios (the
    /// worst): SKIP 0, PASS 1, XFAIL 2, WARN 3, FAIL 4, XPASS and LEAK 5, FLAKY 6, ERROR 7.
    pub fn rank(self) -> u8 {
        match self {
            Verdict::Skip => 0,
            // Not reached: any verdict a scenario that got there gave says more.
            Verdict::Blocked => 1,
            Verdict::Pass => 2,
            Verdict::Xfail => 3,
            Verdict::Warn => 4,
            Verdict::Fail => 5,
            Verdict::Xpass | Verdict::Leak => 6,
            Verdict::Flaky => 7,
            Verdict::Error => 8,
        }
    }

    /// Whether the verdict is one a report lists as unexpected: FAIL, WARN, XPASS, ERROR, FLAKY,
    /// LEAK (not PASS, XFAIL, SKIP, nor BLOCKED: a blocked case is reported once, under its root
    /// cause).
    pub fn unexpected(self) -> bool {
        !matches!(self, Verdict::Pass | Verdict::Xfail | Verdict::Skip | Verdict::Blocked)
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
    /// A precondition step failed (connect, the handshake, the first listing: see
    /// [`crate::scenario::Scenario::is_precondition_failure`]): the scenario's own requirements
    /// were not reached. The message is the precondition's failure.
    Blocked(String),
}

/// How the message of a BLOCKED case starts; the precondition's failure follows.
pub const NOT_REACHED: &str = "not reached: ";

/// Where a verdict is decided: a step of the scenario (`step N`, 1-based, as reports number
/// them), a rule of an observer (`rule NAME`), or the checks after the last step (`end`: a
/// transcript flood, stray output once the steps are done).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    Step(usize),
    Rule(String),
    End,
}

impl Check {
    /// The check of a failure found while step `index` (0-based) ran, or after the last step
    /// (`None`).
    pub fn at(index: Option<usize>) -> Check {
        index.map_or(Check::End, |i| Check::Step(i + 1))
    }

    /// Whether this check ran, and passed, in a run that failed at `failed`: a step before the
    /// failing one, or any other step when the failure came after the steps (`end`). An
    /// observer's rule is judged only over a whole run, so never here.
    fn passed_before(&self, failed: Option<&Check>) -> bool {
        match (self, failed) {
            (Check::Step(k), Some(Check::Step(j))) => k < j,
            (Check::Step(_), Some(Check::End)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Step(n) => write!(f, "step {n}"),
            Check::Rule(name) => write!(f, "rule {name}"),
            Check::End => f.write_str("end"),
        }
    }
}

/// Why a check could not be read (the known-failures loader puts it at `file:line:col`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a check: write `step N` (N from 1, the step's place in `steps:`), `rule NAME` or `end`")]
pub struct CheckError(pub String);

impl std::str::FromStr for Check {
    type Err = CheckError;

    fn from_str(s: &str) -> Result<Check, CheckError> {
        let bad = || CheckError(s.to_owned());
        let mut words = s.split_whitespace();
        let check = match (words.next(), words.next()) {
            (Some("end"), None) => Check::End,
            (Some("step"), Some(n)) if n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0') => {
                Check::Step(n.parse().map_err(|_| bad())?)
            }
            (Some("rule"), Some(name)) if name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) => {
                Check::Rule(name.to_owned())
            }
            _ => return Err(bad()),
        };
        if words.next().is_some() {
            return Err(bad());
        }
        Ok(check)
    }
}

/// An entry of a known-failures file: the requirement(s) the target breaks in the scenario, the
/// check where it breaks them, and what it does instead. A scenario may have several entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KnownFailure {
    pub requirement: Vec<String>,
    /// Where the failure is decided; `None` (only in a proto-mcp manifest that names none):
    /// any check.
    pub check: Option<Check>,
    pub reason: String,
    /// The target shows the deviation only some of the time (its own timing, e.g. a debounce):
    /// a run where it does not occur passes with a note instead of being a stale entry, and
    /// repeated runs that differ only in that are not FLAKY.
    pub intermittent: bool,
    /// A target-wide entry (key `*`): it excuses its finding in any scenario, and a scenario
    /// that has only such entries is not a known-failing one.
    pub anywhere: bool,
    /// Where the entry is written (`file:line:col`), for messages; empty when unknown.
    pub at: String,
}

impl KnownFailure {
    /// The entry as shown: `step 6, BR-CALL-18: reason`.
    pub fn text(&self) -> String {
        format!("{}: {}", self.head(), self.reason)
    }

    /// What the entry pins: `step 6, BR-CALL-18`.
    pub fn head(&self) -> String {
        let mut head: Vec<String> = self.check.iter().map(Check::to_string).collect();
        head.extend(self.requirement.iter().cloned());
        head.join(", ")
    }

    /// Whether the entry is about the failure at `check` that broke `broken`.
    pub fn matches(&self, check: Option<&Check>, broken: &[String]) -> bool {
        self.check.as_ref().is_none_or(|c| Some(c) == check) && same_set(&self.requirement, broken)
    }

    /// ` (kf.yaml:3:1)` when the place is known.
    fn place(&self) -> String {
        if self.at.is_empty() { String::new() } else { format!(" ({})", self.at) }
    }
}

/// The level of a failure that broke `broken` in a scenario of `level`: the level of the
/// strongest broken requirement in the requirement table, up as well as down (a MUST broken in
/// a SHOULD scenario is a FAIL, a SHOULD checked in a MUST scenario a WARN); the scenario's own
/// level only when no broken requirement is known (the scenario's `level:` says what it is
/// about, not what broke).
pub fn failure_level(level: Level, broken: &[String]) -> Level {
    use crate::requirements::{get, strength};
    broken.iter().filter_map(|id| get(id)).map(|r| r.level).max_by_key(|l| strength(*l)).unwrap_or(level)
}

/// The verdict and the message reported for an outcome of a scenario of `level`; `broken` are the
/// requirements the failing check checks and `check` is where it failed (both empty unless the
/// outcome is `Failed`, `Leaked` or `Blocked`); `known` are the scenario's entries in the
/// known-failures file.
///
/// An entry that names the check and the requirements that failed makes the failure XFAIL. A
/// failure at a check no entry names is a new failure of a known-failing scenario (FAIL, whatever
/// the level); one at an entry's check that broke other requirements is a wrong baseline (FAIL
/// until corrected). An entry whose check passed is stale (XPASS) unless it is intermittent; an
/// entry whose check never ran (the scenario stopped earlier, or was blocked) is neither.
pub fn judge(
    outcome: &Outcome,
    level: Level,
    broken: &[String],
    check: Option<&Check>,
    known: &[KnownFailure],
) -> (Verdict, String) {
    match outcome {
        Outcome::Skipped(why) => (Verdict::Skip, why.clone()),
        Outcome::Error(why) => (Verdict::Error, why.clone()),
        Outcome::Passed => {
            let stale: Vec<&KnownFailure> = known.iter().filter(|k| !k.intermittent).collect();
            match (known, stale.as_slice()) {
                ([], _) => (Verdict::Pass, String::new()),
                (_, []) => (
                    Verdict::Pass,
                    format!("note: the intermittent known failure did not occur this time ({})", texts(known)),
                ),
                (_, stale) => (
                    Verdict::Xpass,
                    format!(
                        "listed as a known failure ({}) but passed: remove the stale entry{}",
                        texts(stale.iter().copied()),
                        places(stale.iter().copied())
                    ),
                ),
            }
        }
        Outcome::Blocked(why) => match known.iter().find(|k| k.matches(check, broken)) {
            Some(k) => (Verdict::Xfail, format!("known failure ({}): {why}", k.text())),
            None => (Verdict::Blocked, format!("{NOT_REACHED}{why}")),
        },
        Outcome::Leaked(why) => deviation(level, known, broken, check, why, "leak", Verdict::Leak),
        Outcome::Failed(why) => {
            let level = failure_level(level, broken);
            let unlisted = if level == Level::Must { Verdict::Fail } else { Verdict::Warn };
            deviation(level, known, broken, check, why, "failure", unlisted)
        }
    }
}

/// A deviation (a failure or a leak, `what`) at `level` and `check`, held against the scenario's
/// known-failures entries: at MAY it is a note; an entry naming the check and `broken` makes it
/// XFAIL (XPASS when another entry's check passed before it); an entry at the check naming other
/// requirements is a wrong baseline (FAIL); a check no entry names, in a scenario that has
/// entries, is a new failure (FAIL); without entries it is `unlisted`.
fn deviation(
    level: Level,
    known: &[KnownFailure],
    broken: &[String],
    check: Option<&Check>,
    why: &str,
    what: &str,
    unlisted: Verdict,
) -> (Verdict, String) {
    if level == Level::May {
        return (Verdict::Pass, format!("note (MAY, informational): {why}"));
    }
    let at = check.map_or_else(|| "the failing check".to_owned(), Check::to_string);
    if let Some(k) = known.iter().find(|k| k.matches(check, broken)) {
        let stale: Vec<&KnownFailure> = known
            .iter()
            .filter(|o| !o.intermittent && o.check.as_ref().is_some_and(|c| c.passed_before(check)))
            .collect();
        if !stale.is_empty() {
            return (
                Verdict::Xpass,
                format!(
                    "the known {what} at {at} occurred, but the check of the entry {} passed: remove the stale entry{}\n{why}",
                    texts(stale.iter().copied()),
                    places(stale.iter().copied())
                ),
            );
        }
        return (Verdict::Xfail, format!("known {what} ({}): {why}", k.text()));
    }
    let known: Vec<&KnownFailure> = known.iter().filter(|k| !k.anywhere).collect();
    if let Some(k) = known.iter().find(|k| k.check.as_ref().is_none_or(|c| Some(c) == check)) {
        return (
            Verdict::Fail,
            format!(
                "the known-failures entry at {at} names {} but the run broke {}: correct the entry{}\n  entry: {}\n{why}",
                k.requirement.join(", "),
                broken.join(", "),
                k.place(),
                k.reason
            ),
        );
    }
    if !known.is_empty() {
        return (
            Verdict::Fail,
            format!(
                "new failure in a known-failing scenario: {at} broke {} (the entries name {})\n{why}",
                broken.join(", "),
                known.iter().map(|k| k.head()).collect::<Vec<_>>().join("; ")
            ),
        );
    }
    (unlisted, why.to_owned())
}

/// Entries as shown, `; `-separated.
fn texts<'a>(known: impl IntoIterator<Item = &'a KnownFailure>) -> String {
    known.into_iter().map(KnownFailure::text).collect::<Vec<_>>().join("; ")
}

/// ` (at kf.yaml:3:1, kf.yaml:4:1)` for the entries whose place is known.
fn places<'a>(known: impl IntoIterator<Item = &'a KnownFailure>) -> String {
    let at: Vec<&str> = known.into_iter().map(|k| k.at.as_str()).filter(|a| !a.is_empty()).collect();
    if at.is_empty() { String::new() } else { format!(" (at {})", at.join(", ")) }
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
    pub blocked: usize,
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
                Verdict::Blocked => &mut s.blocked,
            } += 1;
        }
        s
    }

    pub fn executed(&self) -> usize {
        self.pass + self.fail + self.warn + self.xfail + self.xpass + self.error + self.flaky + self.leak + self.blocked
    }

    /// The run's exit status: 3 for an ERROR or a run that executed nothing, 1 for a FAIL, an
    /// XPASS, a FLAKY, a LEAK or a BLOCKED (its root cause, reported once, fails the run), 0
    /// otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.error > 0 || self.executed() == 0 {
            3
        } else if self.fail > 0 || self.xpass > 0 || self.flaky > 0 || self.leak > 0 || self.blocked > 0 {
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
        if self.blocked > 0 {
            write!(f, ", {} blocked", self.blocked)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(requirement: &str, check: &str) -> KnownFailure {
        KnownFailure {
            requirement: vec![requirement.to_owned()],
            check: Some(check.parse().expect("a check")),
            reason: "r".into(),
            ..Default::default()
        }
    }

    fn step(n: usize) -> Check {
        Check::Step(n)
    }

    #[test]
    fn levels_and_known_failures() {
        let failed = Outcome::Failed("x".into());
        let broken = ["TP-CALL-01".to_owned()];
        let plain = entry("TP-CALL-01", "step 2");
        let sometimes = KnownFailure { intermittent: true, ..plain.clone() };
        let s2 = Some(&step(2));
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], None, std::slice::from_ref(&sometimes)).0, Verdict::Pass);
        assert_eq!(judge(&failed, Level::Must, &broken, s2, std::slice::from_ref(&sometimes)).0, Verdict::Xfail);
        assert_eq!(judge(&failed, Level::Must, &broken, s2, &[]).0, Verdict::Fail);
        // The level is the broken requirement's (TP-CALL-01, a MUST), whatever the scenario's.
        assert_eq!(judge(&failed, Level::Should, &broken, s2, &[]).0, Verdict::Fail);
        assert_eq!(judge(&failed, Level::May, &broken, s2, &[]).0, Verdict::Fail);
        assert_eq!(judge(&failed, Level::Must, &broken, s2, std::slice::from_ref(&plain)).0, Verdict::Xfail);
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], None, std::slice::from_ref(&plain)).0, Verdict::Xpass);
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], None, &[]).0, Verdict::Pass);
        assert_eq!(
            judge(&Outcome::Error("e".into()), Level::Must, &[], None, std::slice::from_ref(&plain)).0,
            Verdict::Error
        );
    }

    #[test]
    fn a_target_wide_entry_excuses_only_its_own_finding_and_makes_no_scenario_known_failing() {
        let rule = "rule bridge-model".parse::<Check>().unwrap();
        let failed = Outcome::Failed("x".into());
        let anywhere =
            KnownFailure { intermittent: true, anywhere: true, ..entry("BR-TOOLLIST-13", "rule bridge-model") };
        let known = std::slice::from_ref(&anywhere);
        let its_own = ["BR-TOOLLIST-13".to_owned()];
        assert_eq!(judge(&failed, Level::Must, &its_own, Some(&rule), known).0, Verdict::Xfail);
        assert_eq!(judge(&Outcome::Passed, Level::Must, &[], None, known).0, Verdict::Pass);
        // Another finding of the same rule is an ordinary failure, not a wrong baseline.
        let (v, m) = judge(&failed, Level::Must, &["BR-CALL-02".to_owned()], Some(&rule), known);
        assert_eq!((v, m.as_str()), (Verdict::Fail, "x"));
        let (v, m) = judge(&failed, Level::Must, &["BR-CALL-02".to_owned()], Some(&step(3)), known);
        assert_eq!((v, m.as_str()), (Verdict::Fail, "x"));
    }

    #[test]
    fn checks_read_and_print_as_written_and_bad_ones_are_refused() {
        for text in ["step 1", "step 12", "rule FrameLength", "rule sideband-short", "end"] {
            assert_eq!(text.parse::<Check>().expect(text).to_string(), text);
        }
        for bad in ["step 0", "step", "step 01", "step -1", "step 2 3", "rule", "rule a b", "stage 1", "", "rule a/b"] {
            assert!(bad.parse::<Check>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_known_failure_naming_another_requirement_than_the_run_broke_fails_the_run() {
        let failed = Outcome::Failed("x".into());
        let broken = vec!["BR-CALL-18".to_owned()];
        let right = entry("BR-CALL-18", "step 6");
        let wrong = entry("BR-SIDEBAND-01", "step 6");
        assert_eq!(judge(&failed, Level::Must, &broken, Some(&step(6)), &[right]).0, Verdict::Xfail);
        let (v, m) = judge(&failed, Level::Must, &broken, Some(&step(6)), &[wrong]);
        assert_eq!(v, Verdict::Fail);
        assert!(m.contains("entry at step 6 names BR-SIDEBAND-01 but the run broke BR-CALL-18"), "{m}");
    }

    #[test]
    fn a_failure_at_a_check_no_entry_names_is_a_new_failure_of_a_known_failing_scenario() {
        let failed = Outcome::Failed("the answer differs".into());
        let broken = vec!["BR-CALL-18".to_owned()];
        // The same requirement, but at another step than the entry pins.
        let (v, m) = judge(&failed, Level::Must, &broken, Some(&step(4)), &[entry("BR-CALL-18", "step 6")]);
        assert_eq!(v, Verdict::Fail);
        assert!(m.starts_with("new failure in a known-failing scenario: step 4 broke BR-CALL-18"), "{m}");
        assert!(m.contains("the entries name step 6, BR-CALL-18"), "{m}");
        // Also when the new failure is only a SHOULD (a WARN without entries).
        let should = vec!["BR-CANCEL-05".to_owned()];
        assert_eq!(judge(&failed, Level::Must, &should, Some(&step(4)), &[]).0, Verdict::Warn);
        assert_eq!(
            judge(&failed, Level::Must, &should, Some(&step(4)), &[entry("BR-CALL-18", "step 6")]).0,
            Verdict::Fail
        );
        // And an observer's rule is a check of its own.
        let rule: Check = "rule FrameLength".parse().unwrap();
        assert_eq!(
            judge(&failed, Level::Must, &broken, Some(&rule), &[entry("BR-CALL-18", "step 6")]).0,
            Verdict::Fail
        );
        assert_eq!(
            judge(&failed, Level::Must, &broken, Some(&rule), &[entry("BR-CALL-18", "rule FrameLength")]).0,
            Verdict::Xfail
        );
    }

    #[test]
    fn with_several_entries_one_matching_is_xfail_unless_an_earlier_entrys_check_passed() {
        let failed = Outcome::Failed("x".into());
        let broken = vec!["TP-CALL-07".to_owned()];
        let later = entry("TP-CALL-07", "step 5");
        let earlier = entry("TP-CALL-01", "step 3");
        // Failed at step 5: the entry at step 3 ran and passed, so it is stale.
        let (v, m) = judge(&failed, Level::Must, &broken, Some(&step(5)), &[earlier.clone(), later.clone()]);
        assert_eq!(v, Verdict::Xpass, "{m}");
        assert!(m.contains("the check of the entry step 3, TP-CALL-01: r passed: remove the stale entry"), "{m}");
        // ... unless it is intermittent.
        let sometimes = KnownFailure { intermittent: true, ..earlier.clone() };
        assert_eq!(judge(&failed, Level::Must, &broken, Some(&step(5)), &[sometimes, later.clone()]).0, Verdict::Xfail);
        // Failed at step 3 as the first entry says: the one at step 5 never ran, so it is not stale.
        let at3 = vec!["TP-CALL-01".to_owned()];
        assert_eq!(judge(&failed, Level::Must, &at3, Some(&step(3)), &[earlier, later]).0, Verdict::Xfail);
    }

    #[test]
    fn a_blocked_case_is_blocked_whatever_its_entries_say_unless_one_names_the_precondition() {
        let blocked = Outcome::Blocked("handshake: expected the tool_list".into());
        let broken = vec!["TP-HANDSHAKE-02".to_owned()];
        let (v, m) = judge(&blocked, Level::Must, &broken, Some(&step(1)), &[entry("TP-CALL-07", "step 5")]);
        assert_eq!(v, Verdict::Blocked);
        assert_eq!(m, "not reached: handshake: expected the tool_list");
        assert!(!m.contains("correct the entry") && !m.contains("stale"), "{m}");
        assert_eq!(judge(&blocked, Level::Must, &broken, Some(&step(1)), &[]).0, Verdict::Blocked);
        assert_eq!(
            judge(&blocked, Level::Must, &broken, Some(&step(1)), &[entry("TP-HANDSHAKE-02", "step 1")]).0,
            Verdict::Xfail
        );
    }

    #[test]
    fn the_level_follows_the_requirement_that_broke_up_as_well_as_down() {
        let failed = Outcome::Failed("x".into());
        // BR-CANCEL-05 is a SHOULD, BR-CANCEL-01 a MUST, TP-STREAM-01 a MAY.
        assert_eq!(judge(&failed, Level::Must, &["BR-CANCEL-05".into()], None, &[]).0, Verdict::Warn);
        assert_eq!(judge(&failed, Level::Must, &["BR-CANCEL-01".into()], None, &[]).0, Verdict::Fail);
        // A MUST broken inside a SHOULD (or MAY) scenario is a FAIL.
        assert_eq!(judge(&failed, Level::Should, &["BR-CANCEL-01".into()], None, &[]).0, Verdict::Fail);
        assert_eq!(judge(&failed, Level::May, &["BR-CANCEL-01".into()], None, &[]).0, Verdict::Fail);
        // The worst of several; a MAY that broke is a note whatever the scenario says.
        assert_eq!(
            judge(&failed, Level::Should, &["BR-CANCEL-05".into(), "BR-CANCEL-01".into()], None, &[]).0,
            Verdict::Fail
        );
        assert_eq!(judge(&failed, Level::Must, &["TP-STREAM-01".into()], None, &[]).0, Verdict::Pass);
        // Nothing known broken: the scenario's level.
        assert_eq!(judge(&failed, Level::Should, &[], None, &[]).0, Verdict::Warn);
        assert_eq!(judge(&failed, Level::Should, &["TP-NOPE-99".into()], None, &[]).0, Verdict::Warn);
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
        assert_eq!(Summary::of([Verdict::Blocked, Verdict::Blocked]).exit_code(), 1);
        assert_eq!(
            Summary::of([Verdict::Pass, Verdict::Leak]).to_string(),
            "1 pass, 0 fail, 0 warn, 0 skip, 0 xfail, 0 xpass, 0 error, 1 leak"
        );
        assert_eq!(
            Summary::of([Verdict::Blocked, Verdict::Blocked]).to_string(),
            "0 pass, 0 fail, 0 warn, 0 skip, 0 xfail, 0 xpass, 0 error, 2 blocked"
        );
    }

    #[test]
    fn a_leak_fails_the_run_at_any_level_but_may_unless_the_baseline_names_it() {
        let leaked = Outcome::Leaked("fd (file): +1 fd (file) per cancelled call".into());
        let broken = vec!["TP-CANCEL-06".to_owned()];
        let at = Some(&Check::Step(3));
        assert_eq!(judge(&leaked, Level::Should, &broken, at, &[]).0, Verdict::Leak);
        assert_eq!(judge(&leaked, Level::Must, &broken, at, &[]).0, Verdict::Leak);
        assert_eq!(judge(&leaked, Level::May, &broken, at, &[]).0, Verdict::Pass);
        let known = KnownFailure { reason: "leaks".into(), ..entry("TP-CANCEL-06", "step 3") };
        let (v, m) = judge(&leaked, Level::Should, &broken, at, std::slice::from_ref(&known));
        assert_eq!(v, Verdict::Xfail);
        assert!(m.starts_with("known leak (step 3, TP-CANCEL-06: leaks)"), "{m}");
        let wrong = KnownFailure { requirement: vec!["TP-CALL-01".into()], ..known };
        assert_eq!(judge(&leaked, Level::Should, &broken, at, &[wrong]).0, Verdict::Fail);
    }
}
