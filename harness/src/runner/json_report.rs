//! The JSON report read back (`--json` writes it, [`super::report::json_report_sides`]): the
//! same case results in memory again, so that `diff` compares two runs and `merge` writes the
//! JUnit, HTML and JSON reports of shards as one run would have. Pure: the caller reads the file.
//!
//! What a report of an older version lacks (titles, files, stderr, transcripts) is read as empty;
//! what it holds that this version does not know is passed over. A value of the wrong kind, a
//! verdict or level that is none, a case id twice, is an error with its line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::golden::Golden;
use super::{CaseResult, Summary, Verdict};
use crate::requirements::Level;

/// A run's results as its JSON report holds them: per target (side), in the report's order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub sides: Vec<Side>,
    /// The part of a sharded run this report holds (`--shard K/N`); `None` for a whole run.
    pub shard: Option<ShardOf>,
}

/// One target's results.
#[derive(Debug, Clone, Default)]
pub struct Side {
    pub target: String,
    pub results: Vec<CaseResult>,
}

/// What a shard's report says of its place: shard `k` of `n`, cut from `selected` scenarios
/// (every side), which the shards together hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct ShardOf {
    pub k: usize,
    pub n: usize,
    pub selected: usize,
}

/// A report that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

impl Report {
    /// The report in the file at `path`.
    pub fn read_file(path: &Path) -> Result<Report, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io { path: path.to_owned(), source })?;
        read(&text, path)
    }

    /// The targets' names joined by ` + ` (the report's `target`).
    pub fn name(&self) -> String {
        self.sides.iter().map(|s| s.target.as_str()).collect::<Vec<_>>().join(" + ")
    }

    /// Every result with its target, side by side.
    pub fn cases(&self) -> impl Iterator<Item = (&str, &CaseResult)> {
        self.sides.iter().flat_map(|s| s.results.iter().map(move |r| (s.target.as_str(), r)))
    }

    /// The counts over every side.
    pub fn summary(&self) -> Summary {
        Summary::of(self.cases().map(|(_, r)| r.verdict))
    }

    /// The exit status of the run the report is of: the worst side's, and 1 for a golden
    /// transcript new or changed (as the run decides it).
    pub fn exit_code(&self) -> u8 {
        let sides = self.sides.iter().map(|s| Summary::of(s.results.iter().map(|r| r.verdict)).exit_code()).max();
        let golden = self.cases().any(|(_, r)| r.golden.as_ref().is_some_and(Golden::unaccepted));
        sides.unwrap_or(3).max(u8::from(golden))
    }
}

#[derive(Deserialize)]
struct ReportJson {
    target: String,
    #[serde(default)]
    sides: Option<Vec<SideJson>>,
    cases: Vec<CaseJson>,
    #[serde(default)]
    shard: Option<ShardOf>,
}

#[derive(Deserialize)]
struct SideJson {
    target: String,
}

#[derive(Deserialize)]
struct CaseJson {
    id: String,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    file: String,
    #[serde(default)]
    requirements: Vec<String>,
    #[serde(default)]
    broken: Vec<String>,
    #[serde(default)]
    step_line: Option<u32>,
    #[serde(default)]
    check: Option<String>,
    #[serde(default)]
    root_cause: Option<String>,
    #[serde(default)]
    findings: Vec<super::observe::Observed>,
    #[serde(default)]
    known_used: Vec<String>,
    #[serde(default)]
    held: Vec<String>,
    #[serde(deserialize_with = "level")]
    level: Level,
    #[serde(deserialize_with = "verdict")]
    verdict: Verdict,
    #[serde(default)]
    message: String,
    #[serde(default)]
    duration_ms: u64,
    #[serde(default)]
    started_ms: Option<u64>,
    #[serde(default)]
    runs: Vec<RunJson>,
    #[serde(default)]
    intermittent: bool,
    #[serde(default)]
    resources: Option<crate::io::resources::Use>,
    #[serde(default, deserialize_with = "golden")]
    golden: Option<Golden>,
    #[serde(default)]
    stderr_tail: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    transcript_tail: Vec<String>,
    #[serde(default)]
    transcript: Option<String>,
}

#[derive(Deserialize)]
struct RunJson {
    #[serde(deserialize_with = "verdict")]
    verdict: Verdict,
    #[serde(default)]
    message: String,
}

fn verdict<'de, D: Deserializer<'de>>(d: D) -> Result<Verdict, D::Error> {
    let name = String::deserialize(d)?;
    Verdict::ALL.into_iter().find(|v| v.name() == name).ok_or_else(|| {
        let names: Vec<&str> = Verdict::ALL.iter().map(|v| v.name()).collect();
        de::Error::custom(format!("unknown verdict {name:?}: {}", names.join(", ")))
    })
}

pub(super) fn level<'de, D: Deserializer<'de>>(d: D) -> Result<Level, D::Error> {
    let name = String::deserialize(d)?;
    crate::requirements::level_of(&name)
        .ok_or_else(|| de::Error::custom(format!("unknown level {name:?}: MUST, SHOULD or MAY")))
}

fn golden<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Golden>, D::Error> {
    #[derive(Deserialize)]
    struct G {
        status: String,
        #[serde(default)]
        diff: String,
        #[serde(default)]
        reason: String,
    }
    let Some(g) = Option::<G>::deserialize(d)? else { return Ok(None) };
    Ok(Some(match g.status.as_str() {
        "same" => Golden::Same,
        "changed" => Golden::Changed { diff: g.diff },
        "new" => Golden::New,
        "accepted" => Golden::Accepted { diff: g.diff },
        "not compared" => Golden::NotCompared(g.reason),
        other => {
            return Err(de::Error::custom(format!(
                "unknown golden status {other:?}: same, changed, new, accepted or not compared"
            )));
        }
    }))
}

impl CaseJson {
    fn result(self) -> CaseResult {
        CaseResult {
            title: self.title,
            file: self.file,
            requirements: self.requirements,
            broken: self.broken,
            step_line: self.step_line,
            check: self.check.and_then(|c| c.parse().ok()),
            root_cause: self.root_cause,
            findings: self.findings,
            known_used: self.known_used,
            held: self.held,
            level: self.level,
            verdict: self.verdict,
            message: self.message,
            duration: Duration::from_millis(self.duration_ms),
            started: self.started_ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
            transcript_tail: self.transcript_tail,
            rendered: self.transcript,
            stderr_tail: self.stderr_tail,
            command: self.command,
            runs: self.runs.into_iter().map(|r| (r.verdict, r.message)).collect(),
            intermittent: self.intermittent,
            resources: self.resources,
            golden: self.golden,
            ..CaseResult::blank(&self.id)
        }
    }
}

/// The report in `text` (read from `path`, which errors name).
pub fn read(text: &str, path: &Path) -> Result<Report, ReportError> {
    let json: ReportJson = serde_json::from_str(text).map_err(|e| {
        // serde_json's message ends in " at line L column C": the position goes in front.
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        ReportError::Syntax { path: path.to_owned(), line: e.line(), column: e.column(), message }
    })?;
    let invalid = |message: String| ReportError::Invalid { path: path.to_owned(), message };
    let mut seen = BTreeSet::new();
    for c in &json.cases {
        if !seen.insert(c.id.as_str()) {
            return Err(invalid(format!("scenario `{}` has two cases", c.id)));
        }
    }
    let sides = match json.sides {
        None => vec![Side { target: json.target, results: json.cases.into_iter().map(CaseJson::result).collect() }],
        Some(list) => {
            let mut sides: Vec<Side> =
                list.into_iter().map(|s| Side { target: s.target, results: Vec::new() }).collect();
            for c in json.cases {
                let Some(t) = &c.target else {
                    return Err(invalid(format!("case `{}` names no target, and the report has several", c.id)));
                };
                let Some(side) = sides.iter_mut().find(|s| &s.target == t) else {
                    return Err(invalid(format!("case `{}` names target `{t}`, which `sides` does not list", c.id)));
                };
                side.results.push(c.result());
            }
            sides
        }
    };
    Ok(Report { sides, shard: json.shard })
}

/// Reports that are not parts of one run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Nothing,
    #[error(
        "{a} is a run against {a_target}, {b} against {b_target}: only shards of one run (the same targets) are merged"
    )]
    Targets { a: String, a_target: String, b: String, b_target: String },
    #[error("scenario `{id}` is in {a} and in {b}: the shards of one run hold each scenario once")]
    Twice { id: String, a: String, b: String },
    #[error("{0}")]
    Shards(String),
}

/// The report of the whole run that `parts` (each with the file it came from) are shards of:
/// the same targets in the same order; each target's cases in id order, as a run lists them.
/// Shard reports (`shard` set) must be all N of one cut, each once, and hold together the
/// scenarios the cut was made from. Whole reports of one target with no scenario in common
/// merge as well.
pub fn merge(parts: Vec<(PathBuf, Report)>) -> Result<Report, MergeError> {
    let name = |p: &Path| p.display().to_string();
    let (first_path, first) = parts.first().ok_or(MergeError::Nothing)?;
    let targets: Vec<&str> = first.sides.iter().map(|s| s.target.as_str()).collect();
    for (path, r) in &parts[1..] {
        if r.sides.iter().map(|s| s.target.as_str()).ne(targets.iter().copied()) {
            return Err(MergeError::Targets {
                a: name(first_path),
                a_target: first.name(),
                b: name(path),
                b_target: r.name(),
            });
        }
    }
    let shards: Vec<(&PathBuf, Option<ShardOf>)> = parts.iter().map(|(p, r)| (p, r.shard)).collect();
    if let Some((p, s)) = shards.iter().find(|(_, s)| s.is_some()) {
        let s = s.expect("found");
        if let Some((q, _)) = shards.iter().find(|(_, t)| t.is_none()) {
            return Err(MergeError::Shards(format!(
                "{} is shard {}/{} of a run, {} a whole run: merge the shards of one run",
                name(p),
                s.k,
                s.n,
                name(q)
            )));
        }
        let mut seen: BTreeMap<usize, &PathBuf> = BTreeMap::new();
        for (q, t) in &shards {
            let t = t.expect("every part is a shard");
            if t.n != s.n || t.selected != s.selected {
                return Err(MergeError::Shards(format!(
                    "{} is shard {}/{} of {} scenarios, {} shard {}/{} of {}: not the same cut",
                    name(p),
                    s.k,
                    s.n,
                    s.selected,
                    name(q),
                    t.k,
                    t.n,
                    t.selected
                )));
            }
            if let Some(other) = seen.insert(t.k, q) {
                return Err(MergeError::Shards(format!(
                    "{} and {} are both shard {}/{}",
                    name(other),
                    name(q),
                    t.k,
                    t.n
                )));
            }
        }
        let missing: Vec<String> =
            (1..=s.n).filter(|k| !seen.contains_key(k)).map(|k| format!("{k}/{}", s.n)).collect();
        if !missing.is_empty() {
            return Err(MergeError::Shards(format!("shard {} missing: give all {} shards", missing.join(", "), s.n)));
        }
    }
    let mut sides: Vec<Side> = targets.iter().map(|t| Side { target: (*t).to_owned(), results: Vec::new() }).collect();
    let mut from: BTreeMap<String, &PathBuf> = BTreeMap::new();
    for (path, r) in &parts {
        for (k, side) in r.sides.iter().enumerate() {
            for c in &side.results {
                if let Some(other) = from.insert(c.id.clone(), path) {
                    return Err(MergeError::Twice { id: c.id.clone(), a: name(other), b: name(path) });
                }
                sides[k].results.push(c.clone());
            }
        }
    }
    if let Some(s) = parts[0].1.shard
        && from.len() != s.selected
    {
        return Err(MergeError::Shards(format!(
            "the {} shards hold {} scenarios, and the run selected {}",
            s.n,
            from.len(),
            s.selected
        )));
    }
    for s in &mut sides {
        s.results.sort_by(|a, b| a.id.cmp(&b.id));
    }
    Ok(Report { sides, shard: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, verdict: Verdict) -> CaseResult {
        CaseResult {
            title: format!("title of {id}"),
            file: format!("scenarios/{id}.yaml"),
            requirements: vec!["TP-CALL-01".into(), "TP-CALL-03".into()],
            verdict,
            duration: Duration::from_millis(12),
            started: Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)),
            command: vec!["python3".into(), "testee.py".into()],
            stderr_tail: "warning: x".into(),
            ..CaseResult::blank(id)
        }
    }

    #[test]
    fn a_report_read_back_is_the_same_results_and_writes_the_same_json() {
        let mut failed = case("calls.add", Verdict::Xfail);
        failed.broken = vec!["TP-CALL-03".into()];
        failed.held = vec!["TP-CALL-01".into()];
        failed.message = "known failure (TP-CALL-03: no): scenarios/calls/add.yaml:9:5: expect".into();
        failed.transcript_tail = vec!["→ call".into(), "← result".into()];
        failed.rendered = Some("== step 1: handshake\n-- connected\n".into());
        failed.runs = vec![(Verdict::Xfail, "known".into()), (Verdict::Xfail, "known".into())];
        failed.intermittent = true;
        failed.golden = Some(Golden::Changed { diff: "-a\n+b\n".into() });
        failed.resources = Some(crate::io::resources::Use {
            samples: vec![crate::io::resources::Sample { rounds: 10, figures: Default::default() }],
            ..Default::default()
        });
        let tp = vec![case("calls.echo", Verdict::Pass), failed];
        let br =
            vec![CaseResult { golden: Some(Golden::NotCompared("skipped".into())), ..case("bridge.x", Verdict::Skip) }];
        for sides in
            [vec![("python sdk", tp.as_slice())], vec![("reference testee", tp.as_slice()), ("bridge", br.as_slice())]]
        {
            let written = crate::runner::report::json_report_sides(&sides);
            let back = read(&written.to_string(), Path::new("r.json")).unwrap();
            assert_eq!(back.sides.len(), sides.len());
            for (s, (target, results)) in back.sides.iter().zip(&sides) {
                assert_eq!(&s.target, target);
                assert_eq!(format!("{:?}", s.results), format!("{results:?}"));
            }
            let again: Vec<(&str, &[CaseResult])> =
                back.sides.iter().map(|s| (s.target.as_str(), s.results.as_slice())).collect();
            assert_eq!(crate::runner::report::json_report_sides(&again), written);
        }
    }

    #[test]
    fn a_report_that_is_not_one_is_an_error_with_its_place() {
        let p = Path::new("old.json");
        let e = read(
            "{\"target\": \"t\", \"cases\": [\n  {\"id\": \"a\", \"level\": \"MUST\", \"verdict\": \"GOOD\"}]}",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("old.json:2:"), "{e}");
        assert!(e.to_string().contains("unknown verdict \"GOOD\""), "{e}");
        let e = read("{\"target\": \"t\",", p).unwrap_err();
        assert!(matches!(e, ReportError::Syntax { line: 1, .. }), "{e}");
        let twice = "{\"target\": \"t\", \"cases\": [{\"id\": \"a\", \"level\": \"MUST\", \"verdict\": \"PASS\"}, {\"id\": \"a\", \"level\": \"MUST\", \"verdict\": \"PASS\"}]}";
        assert_eq!(read(twice, p).unwrap_err().to_string(), "old.json: scenario `a` has two cases");
        // An older report (id, level, verdict, broken only) reads, the rest empty.
        let old = read("{\"target\": \"t\", \"summary\": {}, \"cases\": [{\"id\": \"a\", \"level\": \"SHOULD\", \"verdict\": \"WARN\", \"broken\": [\"TP-X-1\"], \"future\": 1}]}", p).unwrap();
        assert_eq!(old.sides[0].results[0].verdict, Verdict::Warn);
        assert_eq!(old.sides[0].results[0].broken, ["TP-X-1"]);
        assert_eq!(old.exit_code(), 0);
    }

    fn shard(k: usize, n: usize, ids: &[&str]) -> (PathBuf, Report) {
        let results = ids.iter().map(|id| case(id, Verdict::Pass)).collect();
        let r =
            Report { sides: vec![Side { target: "t".into(), results }], shard: Some(ShardOf { k, n, selected: 4 }) };
        (PathBuf::from(format!("s{k}.json")), r)
    }

    #[test]
    fn shards_merge_into_the_whole_in_id_order_and_anything_else_is_refused() {
        let whole = merge(vec![shard(2, 2, &["b", "d"]), shard(1, 2, &["c", "a"])]).unwrap();
        let ids: Vec<&str> = whole.sides[0].results.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert_eq!(whole.shard, None);
        let err = |parts| merge(parts).unwrap_err().to_string();
        assert_eq!(err(vec![shard(1, 2, &["a", "b"])]), "shard 2/2 missing: give all 2 shards");
        assert_eq!(
            err(vec![shard(1, 2, &["a", "b"]), shard(1, 2, &["c", "d"])]),
            "s1.json and s1.json are both shard 1/2"
        );
        assert_eq!(
            err(vec![shard(1, 2, &["a", "b"]), shard(2, 2, &["b", "d"])]),
            "scenario `b` is in s1.json and in s2.json: the shards of one run hold each scenario once"
        );
        assert_eq!(
            err(vec![shard(1, 2, &["a"]), shard(2, 2, &["b", "d"])]),
            "the 2 shards hold 3 scenarios, and the run selected 4"
        );
        let mut other = shard(2, 2, &["c", "d"]);
        other.1.sides[0].target = "u".into();
        assert_eq!(
            err(vec![shard(1, 2, &["a", "b"]), other]),
            "s1.json is a run against t, s2.json against u: only shards of one run (the same targets) are merged"
        );
    }
}
