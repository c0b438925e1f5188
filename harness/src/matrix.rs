//! The compatibility matrix: requirement × target, from the results of one catalogue run per
//! target, and the scenarios on which targets disagree. Pure; the CLI runs the targets.

use std::collections::BTreeMap;

use crate::requirements::{any as requirement, spec_order};
use crate::runner::{CaseResult, Verdict};

/// One cell: how a target did on the scenarios citing one requirement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cell {
    pub pass: usize,
    /// FAIL and XFAIL: the requirement is broken (known or not).
    pub fail: usize,
    pub warn: usize,
    pub skip: usize,
    /// ERROR and XPASS: the run could not judge, or the baseline is stale.
    pub other: usize,
}

impl Cell {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Pass => self.pass += 1,
            Verdict::Fail | Verdict::Xfail | Verdict::Leak => self.fail += 1,
            Verdict::Warn => self.warn += 1,
            Verdict::Skip => self.skip += 1,
            Verdict::Xpass | Verdict::Error | Verdict::Flaky | Verdict::Blocked => self.other += 1,
        }
    }

    /// Scenarios that ran and were judged.
    pub fn executed(&self) -> usize {
        self.pass + self.fail + self.warn + self.other
    }

    /// The cell as shown: `✓`, `✗ n/m`, `⚠ n/m`, `–` (nothing ran), `E`.
    pub fn symbol(&self) -> String {
        let n = self.executed();
        if n == 0 {
            "–".into()
        } else if self.other > 0 {
            "E".into()
        } else if self.fail > 0 {
            format!("✗ {}/{n}", self.fail)
        } else if self.warn > 0 {
            format!("⚠ {}/{n}", self.warn)
        } else {
            "✓".into()
        }
    }

    /// Pass, fail, warn, skip, other: the class used to find disagreements.
    fn class(v: Verdict) -> Option<&'static str> {
        match v {
            Verdict::Pass => Some("pass"),
            Verdict::Fail | Verdict::Xfail | Verdict::Leak => Some("fail"),
            Verdict::Warn => Some("warn"),
            Verdict::Skip => None,
            Verdict::Xpass | Verdict::Error | Verdict::Flaky | Verdict::Blocked => Some("error"),
        }
    }
}

/// A scenario whose verdicts differ between targets that ran it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Disagreement {
    pub scenario: String,
    pub requirements: Vec<String>,
    /// target → verdict (`PASS`, `XFAIL`, …; `SKIP` included for context).
    pub verdicts: BTreeMap<String, String>,
}

/// requirement × target.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Matrix {
    pub targets: Vec<String>,
    /// In spec order: requirement ID → one cell per target.
    pub rows: Vec<(String, Vec<Cell>)>,
    pub disagreements: Vec<Disagreement>,
}

impl Matrix {
    /// `runs`: (target name, its results), in column order.
    pub fn build(runs: &[(String, Vec<CaseResult>)]) -> Matrix {
        let targets: Vec<String> = runs.iter().map(|(n, _)| n.clone()).collect();
        let mut cells: BTreeMap<&str, Vec<Cell>> = BTreeMap::new();
        let mut by_scenario: BTreeMap<&str, (Vec<String>, BTreeMap<String, Verdict>)> = BTreeMap::new();
        for (col, (name, results)) in runs.iter().enumerate() {
            for r in results {
                // A scenario counts for the requirements its failing step broke, not for every
                // requirement it cites (see CaseResult::per_requirement).
                for (req, v) in r.per_requirement() {
                    cells.entry(req).or_insert_with(|| vec![Cell::default(); runs.len()])[col].add(v);
                }
                let e = by_scenario.entry(r.id.as_str()).or_insert_with(|| (r.requirements.clone(), BTreeMap::new()));
                e.1.insert(name.clone(), r.verdict);
            }
        }
        // Requirements no target ran a scenario for (bridge requirements in a matrix of tool
        // processes, say) are left out.
        let mut rows: Vec<(String, Vec<Cell>)> = cells
            .into_iter()
            .filter(|(_, v)| v.iter().any(|c| c.executed() > 0))
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        rows.sort_by_key(|(id, _)| (spec_order(id), id.clone()));
        let disagreements = by_scenario
            .into_iter()
            .filter(|(_, (_, v))| {
                let mut classes: Vec<&str> = v.values().filter_map(|v| Cell::class(*v)).collect();
                classes.sort_unstable();
                classes.dedup();
                classes.len() > 1
            })
            .map(|(id, (reqs, v))| Disagreement {
                scenario: id.to_owned(),
                requirements: reqs,
                verdicts: v.into_iter().map(|(t, v)| (t, v.to_string())).collect(),
            })
            .collect();
        Matrix { targets, rows, disagreements }
    }

    /// Per area (`TP-CALL`): for each target, requirements fully passed / requirements tested.
    pub fn by_area(&self) -> Vec<(String, Vec<(usize, usize)>)> {
        let mut out: Vec<(String, Vec<(usize, usize)>)> = Vec::new();
        for (id, cells) in &self.rows {
            let area = id.rsplit_once('-').map(|(a, _)| a).unwrap_or(id).to_owned();
            if out.last().is_none_or(|(a, _)| *a != area) {
                out.push((area, vec![(0, 0); self.targets.len()]));
            }
            let row = &mut out.last_mut().expect("pushed").1;
            for (i, c) in cells.iter().enumerate() {
                if c.executed() > 0 {
                    row[i].1 += 1;
                    if c.fail == 0 && c.warn == 0 && c.other == 0 {
                        row[i].0 += 1;
                    }
                }
            }
        }
        out
    }

    /// The matrix as markdown: the per-area summary, the full table, the disagreements.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let head = |s: &mut String, first: &str| {
            s.push_str(&format!("| {first} |"));
            for t in &self.targets {
                s.push_str(&format!(" {t} |"));
            }
            s.push_str("\n|---|");
            for _ in &self.targets {
                s.push_str("---|");
            }
            s.push('\n');
        };
        s.push_str("Requirements met / requirements tested, per area:\n\n");
        head(&mut s, "area");
        for (area, cols) in self.by_area() {
            s.push_str(&format!("| {area} |"));
            for (ok, n) in cols {
                if n == 0 {
                    s.push_str(" – |");
                } else {
                    s.push_str(&format!(" {ok}/{n} |"));
                }
            }
            s.push('\n');
        }
        s.push_str(
            "\nPer requirement (✓ every scenario citing it passed; ✗ n/m: n of the m scenarios that ran failed, \
             known failures included; ⚠ a SHOULD broken; – nothing ran: feature not claimed or not supported; \
             E: the run could not judge):\n\n",
        );
        head(&mut s, "requirement");
        for (id, cells) in &self.rows {
            let level = requirement(id).map(|r| r.level.to_string()).unwrap_or_default();
            s.push_str(&format!("| {id} {level} |"));
            for c in cells {
                s.push_str(&format!(" {} |", c.symbol()));
            }
            s.push('\n');
        }
        if self.disagreements.is_empty() {
            s.push_str("\nNo scenario on which the targets disagree.\n");
        } else {
            s.push_str(&format!("\nScenarios on which the targets disagree ({}):\n\n", self.disagreements.len()));
            for d in &self.disagreements {
                let v: Vec<String> = d.verdicts.iter().map(|(t, v)| format!("{t}: {v}")).collect();
                s.push_str(&format!("- `{}` ({}): {}\n", d.scenario, d.requirements.join(", "), v.join(", ")));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, reqs: &[&str], verdict: Verdict) -> CaseResult {
        CaseResult { requirements: reqs.iter().map(|r| r.to_string()).collect(), verdict, ..CaseResult::blank(id) }
    }

    #[test]
    fn a_failure_counts_for_the_requirement_its_step_broke_not_for_every_one_cited() {
        // bridge.sideband.plain cites BR-SIDEBAND-01 and -02, but the step that failed checks
        // BR-CALL-18: that row shows the failure, the cited ones were not reached.
        let mut r = case("bridge.sideband.plain", &["BR-SIDEBAND-01", "BR-SIDEBAND-02"], Verdict::Xfail);
        r.broken = vec!["BR-CALL-18".into()];
        r.held = vec!["BR-SIDEBAND-02".into()];
        let m = Matrix::build(&[("pmcp".into(), vec![r])]);
        let row = |id: &str| m.rows.iter().find(|(r, _)| r == id).map(|(_, c)| c[0]);
        assert_eq!(row("BR-CALL-18").map(|c| c.fail), Some(1));
        assert_eq!(row("BR-SIDEBAND-01"), None, "not reached: no row with nothing executed");
        assert_eq!(row("BR-SIDEBAND-02").map(|c| c.pass), Some(1), "a step before the failure showed it");
    }

    #[test]
    fn cells_aggregate_per_requirement_and_disagreements_ignore_skips() {
        let a = vec![
            case("calls.echo", &["TP-CALL-01", "TP-CALL-03"], Verdict::Pass),
            case("calls.add", &["TP-CALL-01"], Verdict::Pass),
            case("log.info", &["TP-LOG-01"], Verdict::Pass),
        ];
        let b = vec![
            case("calls.echo", &["TP-CALL-01", "TP-CALL-03"], Verdict::Pass),
            case("calls.add", &["TP-CALL-01"], Verdict::Xfail),
            case("log.info", &["TP-LOG-01"], Verdict::Skip),
        ];
        let bridge = |v| vec![case("bridge.calls.echo", &["BR-CALL-01"], v)];
        let a = [a, bridge(Verdict::Skip)].concat();
        let b = [b, bridge(Verdict::Skip)].concat();
        let m = Matrix::build(&[("a".into(), a), ("b".into(), b)]);
        let row = |id: &str| &m.rows.iter().find(|(r, _)| r == id).unwrap().1;
        assert_eq!(row("TP-CALL-01")[0].symbol(), "✓");
        assert_eq!(row("TP-CALL-01")[1].symbol(), "✗ 1/2");
        assert_eq!(row("TP-LOG-01")[1].symbol(), "–");
        // Spec order: CALL before LOG.
        let ids: Vec<&str> = m.rows.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(ids, ["TP-CALL-01", "TP-CALL-03", "TP-LOG-01"]);
        let d: Vec<&str> = m.disagreements.iter().map(|d| d.scenario.as_str()).collect();
        assert_eq!(d, ["calls.add"], "a skip is not a disagreement");
        let md = m.markdown();
        assert!(md.contains("| TP-CALL | 2/2 | 1/2 |"), "{md}");
        assert!(md.contains("- `calls.add` (TP-CALL-01): a: PASS, b: XFAIL"), "{md}");
    }
}
