//! Requirement coverage: which MUST/SHOULD requirements of the spec no scenario cites.
//!
//! Pure: the CLI hands in the loaded scenarios, the not-black-box-testable lists
//! (`harness/data/untestable/*.yaml`, a mapping `REQ-ID: reason`) and the pending list
//! (`harness/data/pending.yaml`: requirements an open issue is still writing scenarios for, with
//! the issue; empty once it is resolved) and prints the result.

use std::collections::BTreeMap;

use protomcp_proto::violation::{Level, Party};

use crate::requirements::{self, Requirement};

/// One requirement and what covers it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub requirement: &'static Requirement,
    /// Ids of the scenarios citing it.
    pub scenarios: Vec<String>,
    /// Why no black-box scenario can check it, when it is listed as such.
    pub untestable: Option<String>,
    /// The open work that will cover it, when it is listed as pending.
    pub pending: Option<String>,
}

impl Entry {
    /// Neither a scenario nor a reason nor pending work.
    pub fn missing(&self) -> bool {
        self.scenarios.is_empty() && self.untestable.is_none() && self.pending.is_none()
    }
}

/// Counts of one area.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AreaCounts {
    pub must: usize,
    pub should: usize,
    pub covered: usize,
    pub untestable: usize,
    pub pending: usize,
    pub missing: usize,
}

/// The coverage of the MUST and SHOULD requirements of one or both parties.
#[derive(Debug, Clone)]
pub struct Coverage {
    pub entries: Vec<Entry>,
    /// Requirements listed as untestable that a scenario cites anyway (the list is stale).
    pub stale_untestable: Vec<&'static str>,
    /// Requirements listed as pending that a scenario cites already (the list is stale).
    pub stale_pending: Vec<&'static str>,
}

/// Why a not-black-box-testable list cannot be used (the list is ours: a mistake in it is the
/// harness's, never a target's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UntestableError {
    #[error("{file}: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: `{id}` is not a requirement of the spec")]
    Unknown { file: String, id: String },
    #[error("{file}: `{id}` is withdrawn")]
    Withdrawn { file: String, id: String },
    #[error("{file}: `{id}` is a MAY: only MUST and SHOULD requirements are counted")]
    May { file: String, id: String },
    #[error("{file}: `{id}` has no reason")]
    NoReason { file: String, id: String },
}

/// Parses one not-black-box-testable list of protomcp's spec; every ID must exist, not be
/// withdrawn, and be a MUST or SHOULD; every reason must be non-empty.
pub fn parse_untestable(file: &str, text: &str) -> Result<BTreeMap<String, String>, UntestableError> {
    parse_untestable_in(file, text, requirements::get)
}

/// [`parse_untestable`] against the requirement table `lookup` reads (either profile's).
pub fn parse_untestable_in(
    file: &str,
    text: &str,
    lookup: impl Fn(&str) -> Option<&'static Requirement>,
) -> Result<BTreeMap<String, String>, UntestableError> {
    if text.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let (file, at) = (file.to_owned(), |id: &str| id.to_owned());
    let map: BTreeMap<String, String> = serde_saphyr::from_str(text)
        .map_err(|e| UntestableError::Yaml { file: file.clone(), message: e.to_string() })?;
    for (id, reason) in &map {
        let Some(r) = lookup(id) else { return Err(UntestableError::Unknown { file, id: at(id) }) };
        if r.withdrawn {
            return Err(UntestableError::Withdrawn { file, id: at(id) });
        }
        if r.level == Level::May {
            return Err(UntestableError::May { file, id: at(id) });
        }
        if reason.trim().is_empty() {
            return Err(UntestableError::NoReason { file, id: at(id) });
        }
    }
    Ok(map)
}

impl Coverage {
    /// `scenarios`: (id, requirement IDs it cites). `party`: `None` for both.
    pub fn compute<'a>(
        scenarios: impl IntoIterator<Item = (&'a str, &'a [&'static Requirement])>,
        untestable: &BTreeMap<String, String>,
        pending: &BTreeMap<String, String>,
        party: Option<Party>,
    ) -> Coverage {
        let mut cited: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (id, reqs) in scenarios {
            for r in reqs {
                cited.entry(r.id).or_default().push(id.to_owned());
            }
        }
        let entries: Vec<Entry> = requirements::all()
            .iter()
            .filter(|r| !r.withdrawn && r.level != Level::May && party.is_none_or(|p| r.party() == p))
            .map(|r| Entry {
                requirement: r,
                scenarios: cited.get(r.id).cloned().unwrap_or_default(),
                untestable: untestable.get(r.id).cloned(),
                pending: pending.get(r.id).cloned(),
            })
            .collect();
        let stale = |listed: fn(&Entry) -> bool| {
            entries.iter().filter(|e| listed(e) && !e.scenarios.is_empty()).map(|e| e.requirement.id).collect()
        };
        let stale_untestable = stale(|e| e.untestable.is_some());
        let stale_pending = stale(|e| e.pending.is_some());
        Coverage { entries, stale_untestable, stale_pending }
    }

    /// The requirements with neither a scenario nor a reason.
    pub fn missing(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.missing())
    }

    /// Counts per area prefix (`TP-CALL`), in spec order.
    pub fn by_area(&self) -> Vec<(String, AreaCounts)> {
        let mut out: Vec<(String, AreaCounts)> = Vec::new();
        for e in &self.entries {
            let r = e.requirement;
            let key = r.id.rsplit_once('-').map(|(a, _)| a).unwrap_or(r.id).to_owned();
            if out.last().is_none_or(|(k, _)| *k != key) {
                out.push((key, AreaCounts::default()));
            }
            let c = &mut out.last_mut().expect("pushed").1;
            match r.level {
                Level::Must => c.must += 1,
                _ => c.should += 1,
            }
            if !e.scenarios.is_empty() {
                c.covered += 1;
            } else if e.untestable.is_some() {
                c.untestable += 1;
            } else if e.pending.is_some() {
                c.pending += 1;
            } else {
                c.missing += 1;
            }
        }
        out
    }

    /// The totals over every area.
    pub fn totals(&self) -> AreaCounts {
        let mut t = AreaCounts::default();
        for (_, c) in self.by_area() {
            t.must += c.must;
            t.should += c.should;
            t.covered += c.covered;
            t.untestable += c.untestable;
            t.pending += c.pending;
            t.missing += c.missing;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requirement_is_covered_by_a_scenario_or_a_reason_and_otherwise_missing() {
        let reqs = vec![requirements::get("TP-CALL-01").unwrap()];
        let untestable: BTreeMap<String, String> = [("TP-CALL-02".to_owned(), "internal".to_owned())].into();
        let pending: BTreeMap<String, String> =
            [("TP-CALL-04".to_owned(), "issue 1".to_owned()), ("TP-CALL-01".to_owned(), "issue 1".to_owned())].into();
        let c = Coverage::compute([("calls.echo", reqs.as_slice())], &untestable, &pending, Some(Party::ToolProcess));
        let get = |id: &str| c.entries.iter().find(|e| e.requirement.id == id).unwrap();
        assert_eq!(get("TP-CALL-01").scenarios, ["calls.echo"]);
        assert!(!get("TP-CALL-01").missing());
        assert!(!get("TP-CALL-02").missing());
        assert!(get("TP-CALL-03").missing());
        assert!(!get("TP-CALL-04").missing(), "pending");
        assert_eq!(c.stale_pending, ["TP-CALL-01"], "pending, but a scenario cites it");
        assert!(c.entries.iter().all(|e| e.requirement.id.starts_with("TP-")));
        let t = c.totals();
        assert_eq!((t.covered, t.untestable, t.pending), (1, 1, 1));
        assert_eq!(t.must + t.should, t.covered + t.untestable + t.pending + t.missing);
    }

    #[test]
    fn untestable_lists_are_checked() {
        assert!(parse_untestable("x.yaml", "TP-CALL-01: because").is_ok());
        assert!(
            parse_untestable("x.yaml", "TP-NOPE-01: because").unwrap_err().to_string().contains("not a requirement")
        );
        assert!(parse_untestable("x.yaml", "TP-CALL-01: ''").unwrap_err().to_string().contains("no reason"));
    }
}
