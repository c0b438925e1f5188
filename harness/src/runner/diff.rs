//! `diff OLD.json NEW.json`: what changed between two runs' reports, per scenario and per
//! requirement, and whether anything got worse. Pure: two [`Report`]s in, a [`Diff`] out, and
//! its text (human, markdown) or JSON.
//!
//! Worse (exit 1 of `diff`): a scenario in both whose verdict went from PASS, XFAIL or SKIP to an
//! unexpected one ([`Verdict::unexpected`]: FAIL, WARN, XPASS, ERROR, FLAKY, LEAK); a scenario
//! whose `broken` gained a requirement; a scenario added with an unexpected verdict; a
//! requirement that no case broke before and one breaks now (an XFAIL too: a new known failure
//! hides nothing here). Fixed: a scenario that did not pass (SKIP aside) and passes now; a
//! requirement broken before and not now while still checked.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use super::json_report::Report;
use super::{CaseResult, Summary, Verdict};

/// What happened to a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// From PASS, XFAIL or SKIP to an unexpected verdict.
    NewlyBroken,
    /// The verdict may be the same, but the failing step broke a requirement it did not before.
    BrokenGrew,
    /// In the new report only.
    Added,
    /// Did not pass (SKIP aside), passes now.
    Fixed,
    /// Another verdict or another `broken`, neither worse nor fixed.
    Changed,
    /// In the old report only.
    Removed,
}

impl Change {
    pub fn word(self) -> &'static str {
        match self {
            Change::NewlyBroken => "newly broken",
            Change::BrokenGrew => "broke more",
            Change::Added => "added",
            Change::Fixed => "fixed",
            Change::Changed => "changed",
            Change::Removed => "removed",
        }
    }
}

/// A scenario's verdict and `broken` in one report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Seen {
    pub verdict: Verdict,
    pub broken: Vec<String>,
    /// The first line of the message.
    pub message: String,
}

impl Seen {
    fn of(r: &CaseResult) -> Seen {
        Seen {
            verdict: r.verdict,
            broken: r.broken.clone(),
            message: r.message.lines().next().unwrap_or("").to_owned(),
        }
    }
}

/// One scenario that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioDiff {
    pub id: String,
    pub change: Change,
    pub worse: bool,
    pub old: Option<Seen>,
    pub new: Option<Seen>,
}

/// One requirement that differs: its verdict over every scenario (the worst, [`Verdict::rank`];
/// `None` when no scenario of that report touches it) and whether a case broke it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequirementDiff {
    pub id: String,
    pub old: Option<Verdict>,
    pub new: Option<Verdict>,
    pub old_broken: bool,
    pub new_broken: bool,
    /// Broken now and not before.
    pub worse: bool,
    /// The scenarios that break it now.
    pub broken_in: Vec<String>,
}

/// Two reports compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub old_target: String,
    pub new_target: String,
    pub old_summary: Summary,
    pub new_summary: Summary,
    /// Worst first (by [`Change`]), then by id.
    pub scenarios: Vec<ScenarioDiff>,
    /// Newly broken first, then by id.
    pub requirements: Vec<RequirementDiff>,
    /// Whether anything got worse (`diff` exits 1).
    pub worse: bool,
}

/// Every requirement a report touches: its worst verdict, and the scenarios that broke it.
fn requirements(r: &Report) -> BTreeMap<String, (Verdict, Vec<String>)> {
    let mut out: BTreeMap<String, (Verdict, Vec<String>)> = BTreeMap::new();
    for (_, c) in r.cases() {
        for (req, v) in c.per_requirement() {
            let e = out.entry(req.to_owned()).or_insert((v, Vec::new()));
            if v.rank() > e.0.rank() {
                e.0 = v;
            }
        }
        if c.verdict != Verdict::Pass {
            for b in &c.broken {
                out.entry(b.clone()).or_insert((c.verdict, Vec::new())).1.push(c.id.clone());
            }
        }
    }
    out
}

/// What changed from `old` to `new`.
pub fn diff(old: &Report, new: &Report) -> Diff {
    let before: BTreeMap<&str, &CaseResult> = old.cases().map(|(_, c)| (c.id.as_str(), c)).collect();
    let after: BTreeMap<&str, &CaseResult> = new.cases().map(|(_, c)| (c.id.as_str(), c)).collect();
    let ids: BTreeSet<&str> = before.keys().chain(after.keys()).copied().collect();
    let mut scenarios = Vec::new();
    for id in ids {
        let (o, n) = (before.get(id).copied(), after.get(id).copied());
        let change = match (o, n) {
            (None, Some(n)) => Some((Change::Added, n.verdict.unexpected())),
            (Some(_), None) => Some((Change::Removed, false)),
            (Some(o), Some(n)) => {
                let grew = n.broken.iter().any(|b| !o.broken.contains(b));
                if !o.verdict.unexpected() && n.verdict.unexpected() {
                    Some((Change::NewlyBroken, true))
                } else if grew && n.verdict != Verdict::Pass {
                    Some((Change::BrokenGrew, true))
                } else if o.verdict != Verdict::Pass && o.verdict != Verdict::Skip && n.verdict == Verdict::Pass {
                    Some((Change::Fixed, false))
                } else if o.verdict != n.verdict || o.broken != n.broken {
                    Some((Change::Changed, false))
                } else {
                    None
                }
            }
            (None, None) => None,
        };
        if let Some((change, worse)) = change {
            scenarios.push(ScenarioDiff {
                id: id.to_owned(),
                change,
                worse,
                old: o.map(Seen::of),
                new: n.map(Seen::of),
            });
        }
    }
    scenarios.sort_by(|a, b| (!a.worse, a.change, &a.id).cmp(&(!b.worse, b.change, &b.id)));
    let (ro, rn) = (requirements(old), requirements(new));
    let ids: BTreeSet<&String> = ro.keys().chain(rn.keys()).collect();
    let mut reqs = Vec::new();
    for id in ids {
        let (o, n) = (ro.get(id), rn.get(id));
        let old_broken = o.is_some_and(|o| !o.1.is_empty());
        let new_broken = n.is_some_and(|n| !n.1.is_empty());
        if o.map(|o| o.0) == n.map(|n| n.0) && old_broken == new_broken {
            continue;
        }
        reqs.push(RequirementDiff {
            id: id.clone(),
            old: o.map(|o| o.0),
            new: n.map(|n| n.0),
            old_broken,
            new_broken,
            worse: new_broken && !old_broken,
            broken_in: n.map(|n| n.1.clone()).unwrap_or_default(),
        });
    }
    reqs.sort_by(|a, b| (!a.worse, &a.id).cmp(&(!b.worse, &b.id)));
    let worse = scenarios.iter().any(|s| s.worse) || reqs.iter().any(|r| r.worse);
    Diff {
        old_target: old.name(),
        new_target: new.name(),
        old_summary: old.summary(),
        new_summary: new.summary(),
        scenarios,
        requirements: reqs,
        worse,
    }
}

fn verdict_text(s: Option<&Seen>) -> String {
    match s {
        None => "–".to_owned(),
        Some(s) if s.broken.is_empty() => s.verdict.name().to_owned(),
        Some(s) => format!("{} ({})", s.verdict.name(), s.broken.join(", ")),
    }
}

fn req_text(v: Option<Verdict>, broken: bool) -> String {
    match v {
        None => "–".to_owned(),
        Some(v) if broken => format!("{} (broken)", v.name()),
        Some(v) => v.name().to_owned(),
    }
}

impl Diff {
    /// Scenarios per kind of change, in [`Change`] order, with their counts (zero ones left out).
    fn counts(&self) -> String {
        let mut by: BTreeMap<Change, usize> = BTreeMap::new();
        for s in &self.scenarios {
            *by.entry(s.change).or_default() += 1;
        }
        if by.is_empty() {
            return "no scenario changed".to_owned();
        }
        by.iter().map(|(c, n)| format!("{n} {}", c.word())).collect::<Vec<_>>().join(", ")
    }

    fn requirement_counts(&self) -> String {
        let worse = self.requirements.iter().filter(|r| r.worse).count();
        let fixed = self.requirements.iter().filter(|r| r.old_broken && !r.new_broken && r.new.is_some()).count();
        format!("{worse} newly broken, {fixed} fixed, {} changed in all", self.requirements.len())
    }

    fn targets(&self) -> String {
        if self.old_target == self.new_target {
            self.new_target.clone()
        } else {
            format!("{} → {}", self.old_target, self.new_target)
        }
    }

    /// For a person, on a terminal.
    pub fn human(&self) -> String {
        let mut s = format!("target: {}\n", self.targets());
        let _ = writeln!(s, "before: {}\nafter:  {}", self.old_summary, self.new_summary);
        let _ = writeln!(s, "scenarios: {}", self.counts());
        let _ = writeln!(s, "requirements: {}", self.requirement_counts());
        for d in &self.scenarios {
            let mark = if d.worse { "WORSE " } else { "      " };
            let _ = write!(
                s,
                "{mark}{:<13} {}: {} → {}",
                d.change.word(),
                d.id,
                verdict_text(d.old.as_ref()),
                verdict_text(d.new.as_ref())
            );
            match d.new.as_ref().filter(|n| !n.message.is_empty() && d.change != Change::Fixed) {
                Some(n) => {
                    let _ = writeln!(s, ": {}", n.message);
                }
                None => s.push('\n'),
            }
        }
        for r in &self.requirements {
            let mark = if r.worse { "WORSE " } else { "      " };
            let _ = write!(
                s,
                "{mark}requirement {}: {} → {}",
                r.id,
                req_text(r.old, r.old_broken),
                req_text(r.new, r.new_broken)
            );
            if r.worse {
                let _ = write!(s, " in {}", r.broken_in.join(", "));
            }
            s.push('\n');
        }
        let _ = writeln!(s, "{}", if self.worse { "WORSE: something got worse" } else { "OK: nothing got worse" });
        s
    }

    /// For a job summary or a pull request comment.
    pub fn markdown(&self) -> String {
        let esc = |t: &str| t.replace('|', "\\|");
        let mut s = format!(
            "## protomcp-conform diff: {}\n\n",
            if self.worse { "something got worse" } else { "nothing got worse" }
        );
        let _ = writeln!(s, "Target: {}\n", esc(&self.targets()));
        s.push_str("| | pass | fail | warn | skip | xfail | xpass | error | flaky | leak |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (name, x) in [("before", &self.old_summary), ("after", &self.new_summary)] {
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                x.pass, x.fail, x.warn, x.skip, x.xfail, x.xpass, x.error, x.flaky, x.leak
            );
        }
        let _ = writeln!(s, "\nScenarios: {}. Requirements: {}.", self.counts(), self.requirement_counts());
        if !self.scenarios.is_empty() {
            s.push_str(
                "\n### Scenarios\n\n| | change | scenario | before | after | message |\n|---|---|---|---|---|---|\n",
            );
            for d in &self.scenarios {
                let message = d.new.as_ref().filter(|_| d.change != Change::Fixed).map_or("", |n| n.message.as_str());
                let _ = writeln!(
                    s,
                    "| {} | {} | `{}` | {} | {} | {} |",
                    if d.worse { "❌" } else { "" },
                    d.change.word(),
                    esc(&d.id),
                    verdict_text(d.old.as_ref()),
                    verdict_text(d.new.as_ref()),
                    esc(message)
                );
            }
        }
        if !self.requirements.is_empty() {
            s.push_str("\n### Requirements\n\n| | requirement | before | after | broken in |\n|---|---|---|---|---|\n");
            for r in &self.requirements {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    if r.worse { "❌" } else { "" },
                    r.id,
                    req_text(r.old, r.old_broken),
                    req_text(r.new, r.new_broken),
                    r.broken_in.iter().map(|i| format!("`{}`", esc(i))).collect::<Vec<_>>().join(", ")
                );
            }
        }
        s
    }

    /// As JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a diff serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::json_report::Side;

    fn case(id: &str, v: Verdict, reqs: &[&str], broken: &[&str]) -> CaseResult {
        CaseResult {
            requirements: reqs.iter().map(|s| s.to_string()).collect(),
            broken: broken.iter().map(|s| s.to_string()).collect(),
            verdict: v,
            message: format!("{} of {id}\nmore", v.name()),
            ..CaseResult::blank(id)
        }
    }

    fn report(cases: Vec<CaseResult>) -> Report {
        Report { sides: vec![Side { target: "t".into(), results: cases }], shard: None }
    }

    #[test]
    fn the_same_report_twice_is_no_change_and_not_worse() {
        let r = report(vec![
            case("a", Verdict::Pass, &["TP-A-1"], &[]),
            case("b", Verdict::Xfail, &["TP-B-1"], &["TP-B-1"]),
        ]);
        let d = diff(&r, &r);
        assert!(d.scenarios.is_empty() && d.requirements.is_empty() && !d.worse, "{d:?}");
        assert!(d.human().ends_with("OK: nothing got worse\n"), "{}", d.human());
    }

    #[test]
    fn a_known_failure_that_became_a_failure_is_the_one_change_and_worse() {
        let old = report(vec![
            case("a", Verdict::Pass, &["TP-A-1"], &[]),
            case("b", Verdict::Xfail, &["TP-B-1"], &["TP-B-1"]),
        ]);
        let new = report(vec![
            case("a", Verdict::Pass, &["TP-A-1"], &[]),
            case("b", Verdict::Fail, &["TP-B-1"], &["TP-B-1"]),
        ]);
        let d = diff(&old, &new);
        assert!(d.worse);
        assert_eq!(d.scenarios.len(), 1, "{d:?}");
        assert_eq!((d.scenarios[0].id.as_str(), d.scenarios[0].change), ("b", Change::NewlyBroken));
        // TP-B-1 was broken (XFAIL) and is (FAIL): its verdict changed, it is not newly broken.
        assert_eq!(d.requirements.len(), 1);
        assert!(!d.requirements[0].worse);
        assert!(
            d.human().contains("WORSE newly broken  b: XFAIL (TP-B-1) → FAIL (TP-B-1): FAIL of b\n"),
            "{}",
            d.human()
        );
        assert!(
            d.markdown().contains("| ❌ | newly broken | `b` | XFAIL (TP-B-1) | FAIL (TP-B-1) | FAIL of b |"),
            "{}",
            d.markdown()
        );
    }

    #[test]
    fn fixed_added_removed_and_a_newly_broken_requirement() {
        let old = report(vec![
            case("a", Verdict::Fail, &["TP-A-1"], &["TP-A-1"]),
            case("gone", Verdict::Pass, &["TP-G-1"], &[]),
            case("x", Verdict::Pass, &["TP-X-1"], &[]),
        ]);
        let new = report(vec![
            case("a", Verdict::Pass, &["TP-A-1"], &[]),
            case("new", Verdict::Pass, &["TP-N-1"], &[]),
            // A known failure added with the breakage: XFAIL, but TP-X-1 is newly broken.
            case("x", Verdict::Xfail, &["TP-X-1"], &["TP-X-1"]),
        ]);
        let d = diff(&old, &new);
        let changes: Vec<(&str, Change, bool)> =
            d.scenarios.iter().map(|s| (s.id.as_str(), s.change, s.worse)).collect();
        assert_eq!(
            changes,
            [
                ("x", Change::BrokenGrew, true),
                ("new", Change::Added, false),
                ("a", Change::Fixed, false),
                ("gone", Change::Removed, false)
            ]
        );
        let x = d.requirements.iter().find(|r| r.id == "TP-X-1").unwrap();
        assert!(x.worse && x.broken_in == ["x"], "{x:?}");
        assert!(d.requirements.iter().any(|r| r.id == "TP-A-1" && !r.worse && r.old_broken && !r.new_broken));
        assert!(d.worse);
        // Without the XFAIL, nothing got worse.
        let mut better = new.clone();
        better.sides[0].results[2] = case("x", Verdict::Pass, &["TP-X-1"], &[]);
        assert!(!diff(&old, &better).worse, "{:?}", diff(&old, &better));
        // An added scenario that fails is worse.
        let mut added = better.clone();
        added.sides[0].results[1] = case("new", Verdict::Error, &["TP-N-1"], &[]);
        assert!(diff(&old, &added).worse);
    }
}
