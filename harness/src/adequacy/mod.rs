//! Mutation adequacy (issue 29): does the catalogue catch realistic bugs, and does it name the
//! requirement each one breaks?
//!
//! For every fault of [`protomcp_proto::fault`] selected, the scenarios of its area (those citing
//! a requirement of the fault's area, e.g. `TP-CALL-*`; or every scenario of its role with
//! [`Scope::All`]) run against the reference peer with that one fault switched on
//! (`testee --fault NAME`; for a bridge fault `bridge --fault NAME`, over stdio and over HTTP:
//! [`targets`]). All faults share one schedule ([`runner::run_sides`], one side per fault and
//! target), so `jobs` bounds the scenarios running at once over all of them. Each fault ends:
//!
//! - [`Outcome::Killed`]: some scenario did not pass and named the fault's requirement in
//!   `broken`;
//! - [`Outcome::Misattributed`]: scenarios did not pass, but none named it (what they named is
//!   kept);
//! - [`Outcome::Survived`]: every scenario passed (or was skipped).
//!
//! A result that is ERROR (the harness could not judge) is not a kill; it is kept beside the
//! outcome so the report shows it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use protomcp_proto::fault::{Fault, Role};
use serde_json::{Value, json};

use crate::runner::{self, CaseResult, Config, Side, Target, Verdict};
use crate::scenario::{self, Scenario};

/// Which scenarios a fault runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The scenarios citing a requirement of the fault's area (`TP-CALL-*`).
    #[default]
    Area,
    /// Every scenario of the fault's role (catches effects across areas).
    All,
}

/// How one fault ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A scenario failed and named the fault's requirement.
    Killed,
    /// Scenarios failed, naming only these requirements.
    Misattributed { named: BTreeSet<String> },
    /// Nothing failed.
    Survived,
}

impl Outcome {
    /// `KILLED`, `MISATTRIBUTED`, `SURVIVED`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Killed => "KILLED",
            Outcome::Misattributed { .. } => "MISATTRIBUTED",
            Outcome::Survived => "SURVIVED",
        }
    }
}

/// One scenario that did not pass against a faulty peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    pub scenario: String,
    pub verdict: Verdict,
    pub broken: Vec<String>,
}

/// What running one fault found.
#[derive(Debug, Clone)]
pub struct FaultResult {
    pub fault: Fault,
    pub outcome: Outcome,
    /// Scenarios run (not skipped).
    pub ran: usize,
    /// The scenarios that did not pass (ERROR ones included, though they kill nothing).
    pub kills: Vec<Kill>,
    /// Wall time from the fault's first scenario start to its last end (they overlap with other
    /// faults' scenarios).
    pub duration: Duration,
}

/// The area of a requirement ID: `TP-CALL-04` → `TP-CALL`.
pub fn area(requirement: &str) -> &str {
    requirement.rsplit_once('-').map_or(requirement, |(a, _)| a)
}

/// The scenario role a fault's role is caught by.
fn scenario_role(role: Role) -> scenario::Role {
    match role {
        Role::ToolProcess => scenario::Role::ToolProcess,
        Role::Bridge => scenario::Role::Bridge,
    }
}

/// The scenarios of `all` that `fault` runs against in `scope`.
pub fn scenarios_for(fault: Fault, all: &[Scenario], scope: Scope) -> Vec<Scenario> {
    let fault_area = area(fault.requirement());
    all.iter()
        .filter(|s| s.role == scenario_role(fault.role()))
        .filter(|s| scope == Scope::All || s.requirements.iter().any(|r| area(r.id) == fault_area))
        .cloned()
        .collect()
}

/// Whether a verdict shows the peer broke something (a kill, if the requirement is named).
fn detects(v: Verdict) -> bool {
    matches!(v, Verdict::Fail | Verdict::Warn | Verdict::Flaky | Verdict::Leak | Verdict::Blocked | Verdict::Xpass)
}

/// How a fault's results classify.
pub fn classify(fault: Fault, results: &[CaseResult]) -> (Outcome, Vec<Kill>) {
    let kills: Vec<Kill> = results
        .iter()
        .filter(|r| detects(r.verdict) || r.verdict == Verdict::Error)
        .map(|r| Kill { scenario: r.id.clone(), verdict: r.verdict, broken: r.broken.clone() })
        .collect();
    let detecting: Vec<&Kill> = kills.iter().filter(|k| detects(k.verdict)).collect();
    let outcome = if detecting.is_empty() {
        Outcome::Survived
    } else if detecting.iter().any(|k| k.broken.iter().any(|b| b == fault.requirement())) {
        Outcome::Killed
    } else {
        Outcome::Misattributed { named: detecting.iter().flat_map(|k| k.broken.iter().cloned()).collect() }
    };
    (outcome, kills)
}

/// The faults of `role` whose name matches one of `only` (all when empty), as a deterministic
/// sample of `sample` when given (chosen by `seed`, e.g. a commit id).
pub fn select(role: Role, only: &[String], sample: Option<(usize, &str)>) -> Vec<Fault> {
    let mut faults: Vec<Fault> = Fault::ALL
        .iter()
        .copied()
        .filter(|f| f.role() == role)
        .filter(|f| only.is_empty() || only.iter().any(|g| runner::glob_match(g, f.name())))
        .collect();
    if let Some((n, seed)) = sample {
        faults.sort_by_key(|f| fnv1a(format!("{seed}\0{}", f.name()).as_bytes()));
        faults.truncate(n);
        faults.sort();
    }
    faults
}

/// FNV-1a, 64 bits: a hash that is the same on every machine and every Rust version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The reference peers faults are planted in: this binary (the reference testee) and the
/// reference bridge's targets, one per transport (stdio, HTTP: the commands and known failures
/// of harness/bridges/reference and reference-http), each run with `--fault NAME`.
#[derive(Debug, Clone)]
pub struct Peers {
    pub exe: PathBuf,
    pub bridges: Vec<Target>,
    /// Reference bridges with credentials (`--auth`: harness/bridges/reference-http-auth and
    /// reference-http-apikey). Each runs only the scenarios that need every feature it claims
    /// (`auth`, `apikey`; `http` aside): the rest of the catalogue sends no credentials.
    pub credentialed: Vec<Target>,
    /// Reference bridges that reload by ReloadRequest (harness/bridges/reference-reload-request):
    /// they run only the scenarios citing a BR-RELOAD requirement, whose ReloadRequest half
    /// (BR-RELOAD-02/03) the bridges of [`Peers::bridges`], reloading by restart, SKIP.
    pub reload_request: Vec<Target>,
}

/// Which list of [`Peers`] a target comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    Plain,
    Credentialed,
    ReloadRequest,
}

/// Whether `s` runs on `t`, a target of [`Peers::bridges`] (every scenario), of
/// [`Peers::credentialed`] or of [`Peers::reload_request`].
fn runs_on(t: &Target, kind: PeerKind, s: &Scenario) -> bool {
    match kind {
        PeerKind::Plain => true,
        PeerKind::Credentialed => t.features.iter().filter(|f| *f != "http").all(|f| s.needs.contains(f)),
        PeerKind::ReloadRequest => s.requirements.iter().any(|r| r.id.starts_with("BR-RELOAD-")),
    }
}

/// The targets `fault` runs against: the reference testee with the fault switched on, or each
/// reference bridge of `peers` with `--fault NAME` after its `bridge` (every bridge fault runs
/// over every transport: the cores are shared, and a fault of the shell may show on one only).
/// Each comes with the list of [`Peers`] it is from.
pub fn targets(fault: Fault, peers: &Peers) -> Vec<(Target, PeerKind)> {
    match fault.role() {
        Role::ToolProcess => vec![(
            Target {
                name: format!("reference testee --fault {}", fault.name()),
                kind: runner::TargetKind::Reference { exe: peers.exe.clone(), fault: Some(fault) },
                ..Target::reference(PathBuf::new())
            },
            PeerKind::Plain,
        )],
        Role::Bridge => peers
            .bridges
            .iter()
            .map(|b| (b, PeerKind::Plain))
            .chain(peers.credentialed.iter().map(|b| (b, PeerKind::Credentialed)))
            .chain(peers.reload_request.iter().map(|b| (b, PeerKind::ReloadRequest)))
            .map(|(b, kind)| {
                let mut t = b.clone();
                if let runner::TargetKind::Bridge { argv, .. } = &mut t.kind {
                    let at = argv.iter().position(|a| a == "bridge").map_or(argv.len(), |i| i + 1);
                    argv.splice(at..at, ["--fault".to_owned(), fault.name().to_owned()]);
                }
                t.name = format!("{} --fault {}", b.name, fault.name());
                (t, kind)
            })
            .collect(),
    }
}

/// The transport a bridge target is driven over, as a suffix of a scenario's id in a kill
/// (`bridge.calls.echo [http]`); none for stdio and the testee.
fn via(t: &Target) -> &'static str {
    match &t.kind {
        runner::TargetKind::Bridge { transport: runner::target::BridgeTransport::Http { .. }, .. } => " [http]",
        _ => "",
    }
}

/// Called as each fault finishes: its result, the count finished, the total.
pub type OnFault = Arc<dyn Fn(&FaultResult, usize, usize) + Send + Sync>;

/// Runs every fault of `faults` against its scenarios out of `all` (see the module docs).
pub async fn run(
    faults: &[Fault],
    all: &[Scenario],
    scope: Scope,
    peers: &Peers,
    cfg: Config,
    on_fault: OnFault,
) -> Report {
    let started = Instant::now();
    let jobs = cfg.jobs;
    let total = faults.len();
    let finished = Arc::new(Mutex::new(0usize));
    let mut sides = Vec::new();
    let mut empty = Vec::new();
    for &fault in faults {
        let scenarios = scenarios_for(fault, all, scope);
        let targets: Vec<(Target, &'static str, Arc<Vec<Scenario>>)> = targets(fault, peers)
            .into_iter()
            .map(|(t, kind)| {
                let on: Vec<Scenario> = scenarios.iter().filter(|s| runs_on(&t, kind, s)).cloned().collect();
                // A credentialed target's kills say so: the same scenario is skipped on the plain one.
                let suffix = match kind {
                    PeerKind::Credentialed => " [http, credentials]",
                    PeerKind::ReloadRequest => " [reload request]",
                    PeerKind::Plain => via(&t),
                };
                (t, suffix, Arc::new(on))
            })
            .filter(|(_, _, on)| !on.is_empty())
            .collect();
        if scenarios.is_empty() || targets.is_empty() {
            empty.push(fault);
            continue;
        }
        // One side per target; the fault is done when every side's every scenario is.
        let expected: usize = targets.iter().map(|(_, _, on)| on.len()).sum();
        let first_start: Arc<Mutex<Option<Instant>>> = Arc::default();
        let gathered: Arc<Mutex<Vec<CaseResult>>> = Arc::default();
        for (target, suffix, scenarios) in targets {
            let (on_fault, finished) = (Arc::clone(&on_fault), Arc::clone(&finished));
            let (first_start, gathered) = (Arc::clone(&first_start), Arc::clone(&gathered));
            let on_done: runner::OnDone = Arc::new(move |r: &CaseResult, _: usize, _: usize| {
                let now = Instant::now();
                let begun = *lock(&first_start).get_or_insert(now - r.duration);
                let mut results = lock(&gathered);
                let mut r = r.clone();
                r.id.push_str(suffix);
                results.push(r);
                if results.len() == expected {
                    let fr = result_of(fault, &results, now - begun);
                    let mut n = lock(&finished);
                    *n += 1;
                    on_fault(&fr, *n, total);
                }
            });
            sides.push((fault, suffix, Side { scenarios: Arc::clone(&scenarios), target: Arc::new(target), on_done }));
        }
    }
    let order: Vec<(Fault, &str)> = sides.iter().map(|(f, v, _)| (*f, *v)).collect();
    let per_side = runner::run_sides(sides.into_iter().map(|(_, _, s)| s).collect(), cfg).await;
    let mut by_fault: BTreeMap<Fault, Vec<CaseResult>> = BTreeMap::new();
    for ((fault, suffix), side) in order.into_iter().zip(per_side) {
        by_fault.entry(fault).or_default().extend(side.into_iter().map(|mut r| {
            r.id.push_str(suffix);
            r
        }));
    }
    let mut results: Vec<FaultResult> = by_fault
        .into_iter()
        .map(|(fault, side)| {
            let span = side.iter().map(|r| r.duration).max().unwrap_or_default();
            result_of(fault, &side, span)
        })
        .collect();
    for fault in empty {
        let fr = FaultResult { fault, outcome: Outcome::Survived, ran: 0, kills: Vec::new(), duration: Duration::ZERO };
        on_fault(&fr, 0, total);
        results.push(fr);
    }
    results.sort_by_key(|r| r.fault);
    Report { results, scope, wall: started.elapsed(), jobs }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn result_of(fault: Fault, results: &[CaseResult], duration: Duration) -> FaultResult {
    let (outcome, kills) = classify(fault, results);
    let ran = results.iter().filter(|r| r.verdict != Verdict::Skip).count();
    FaultResult { fault, outcome, ran, kills, duration }
}

/// The whole run: every fault's result, in catalogue order.
#[derive(Debug, Clone)]
pub struct Report {
    pub results: Vec<FaultResult>,
    pub scope: Scope,
    pub wall: Duration,
    pub jobs: usize,
}

/// Counts of one group of faults (an area, or all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub faults: usize,
    pub killed: usize,
    pub misattributed: usize,
    pub survived: usize,
}

impl Tally {
    fn add(&mut self, o: &Outcome) {
        self.faults += 1;
        match o {
            Outcome::Killed => self.killed += 1,
            Outcome::Misattributed { .. } => self.misattributed += 1,
            Outcome::Survived => self.survived += 1,
        }
    }

    /// Killed and attributed, in percent of the faults (100 when there are none).
    pub fn score(&self) -> f64 {
        if self.faults == 0 { 100.0 } else { 100.0 * self.killed as f64 / self.faults as f64 }
    }
}

impl Report {
    /// Per area (`TP-CALL`), then the total.
    pub fn tallies(&self) -> (BTreeMap<String, Tally>, Tally) {
        let mut by_area: BTreeMap<String, Tally> = BTreeMap::new();
        let mut all = Tally::default();
        for r in &self.results {
            by_area.entry(area(r.fault.requirement()).to_owned()).or_default().add(&r.outcome);
            all.add(&r.outcome);
        }
        (by_area, all)
    }

    /// Requirements with a fault that was not killed and attributed: requirement → those faults.
    pub fn gaps(&self) -> BTreeMap<String, Vec<Fault>> {
        let mut out: BTreeMap<String, Vec<Fault>> = BTreeMap::new();
        for r in self.results.iter().filter(|r| r.outcome != Outcome::Killed) {
            out.entry(r.fault.requirement().to_owned()).or_default().push(r.fault);
        }
        out
    }

    /// The text summary: the faults not killed with what was seen, per-area counts, the total.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for r in self.results.iter().filter(|r| r.outcome != Outcome::Killed) {
            out.push_str(&format!(
                "{} {} ({}): {}\n",
                r.outcome.label(),
                r.fault,
                r.fault.requirement(),
                r.fault.description()
            ));
            if let Outcome::Misattributed { named } = &r.outcome {
                out.push_str(&format!("  named instead: {}\n", named.iter().cloned().collect::<Vec<_>>().join(", ")));
            }
            for k in &r.kills {
                out.push_str(&format!("  {} {} broken: [{}]\n", k.verdict.name(), k.scenario, k.broken.join(", ")));
            }
            if r.ran == 0 {
                out.push_str("  no scenario of its area ran\n");
            }
        }
        let (by_area, all) = self.tallies();
        out.push_str("\narea                faults  killed  misattributed  survived\n");
        for (a, t) in &by_area {
            out.push_str(&format!("{a:<20}{:>6}{:>8}{:>15}{:>10}\n", t.faults, t.killed, t.misattributed, t.survived));
        }
        out.push_str(&format!(
            "\nADEQUACY: {:.1} % killed and attributed ({} of {} faults; {} misattributed, {} survived), {} scenarios run, {:.0} s wall at -j {}\n",
            all.score(),
            all.killed,
            all.faults,
            all.misattributed,
            all.survived,
            self.results.iter().map(|r| r.ran).sum::<usize>(),
            self.wall.as_secs_f64(),
            self.jobs
        ));
        out
    }

    /// The JSON report (`--json FILE`).
    pub fn json(&self) -> Value {
        let (by_area, all) = self.tallies();
        let tally = |t: &Tally| json!({"faults": t.faults, "killed": t.killed, "misattributed": t.misattributed, "survived": t.survived, "score": t.score()});
        json!({
            "scope": match self.scope { Scope::Area => "area", Scope::All => "all" },
            "wall_ms": self.wall.as_millis() as u64,
            "jobs": self.jobs,
            "summary": tally(&all),
            "areas": by_area.iter().map(|(a, t)| (a.clone(), tally(t))).collect::<serde_json::Map<String, Value>>(),
            "faults": self.results.iter().map(|r| json!({
                "name": r.fault.name(),
                "role": r.fault.role().name(),
                "requirement": r.fault.requirement(),
                "description": r.fault.description(),
                "outcome": r.outcome.label(),
                "named": match &r.outcome { Outcome::Misattributed { named } => named.iter().cloned().collect(), _ => Vec::new() },
                "scenarios_run": r.ran,
                "duration_ms": r.duration.as_millis() as u64,
                "kills": r.kills.iter().map(|k| json!({"scenario": k.scenario, "verdict": k.verdict.name(), "broken": k.broken})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// The requirements a JSON report (`--json`) lists as not killed and attributed, with the
    /// faults (for `coverage --adequacy FILE`).
    pub fn gaps_of_json(report: &Value) -> Result<BTreeMap<String, Vec<String>>, BadReport> {
        let faults = report.get("faults").and_then(Value::as_array).ok_or(BadReport("no `faults` array"))?;
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in faults {
            let field = |k: &'static str| f.get(k).and_then(Value::as_str).ok_or(BadReport(k));
            if field("outcome")? != "KILLED" {
                out.entry(field("requirement")?.to_owned()).or_default().push(field("name")?.to_owned());
            }
        }
        Ok(out)
    }
}

/// The exceptions file (`harness/data/adequacy-exceptions.yaml`): fault name → why no black-box
/// scenario can catch it. Every name must be a fault of the catalogue, every reason non-empty.
pub fn parse_exceptions(file: &str, text: &str) -> Result<BTreeMap<String, String>, ExceptionsError> {
    let map: BTreeMap<String, String> = if text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        BTreeMap::new()
    } else {
        serde_saphyr::from_str(text)
            .map_err(|e| ExceptionsError::Yaml { file: file.to_owned(), message: e.to_string() })?
    };
    for (name, reason) in &map {
        if name.parse::<Fault>().is_err() {
            return Err(ExceptionsError::Unknown { file: file.to_owned(), name: name.clone() });
        }
        if reason.trim().is_empty() {
            return Err(ExceptionsError::NoReason { file: file.to_owned(), name: name.clone() });
        }
    }
    Ok(map)
}

/// A malformed exceptions file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExceptionsError {
    #[error("{file}: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: `{name}` is no fault of the catalogue")]
    Unknown { file: String, name: String },
    #[error("{file}: `{name}` has no reason")]
    NoReason { file: String, name: String },
}

/// A JSON file that is not an adequacy report: what is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an adequacy report (`adequacy --json`): {0}")]
pub struct BadReport(pub &'static str);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credentialed_bridge_runs_only_the_scenarios_that_need_every_feature_it_claims() {
        let s = |id: &str, needs: &str| {
            let text = format!(
                "id: {id}\ntitle: t\nrequirements: [BR-HTTP-20]\nlevel: MUST\nrole: bridge\nneeds: [{needs}]\nsteps:\n  - sleep: {{ms: 1}}\n"
            );
            scenario::parse_str(std::path::Path::new("x.yaml"), &text).unwrap()
        };
        let mut auth = Target::bridge(vec!["b".into()], PathBuf::from("exe"));
        auth.features = vec!["auth".into(), "http".into()];
        let mut apikey = auth.clone();
        apikey.features.push("apikey".into());
        let (plain, token, key) =
            (s("bridge.x.plain", "http"), s("bridge.x.token", "http, auth"), s("bridge.x.key", "http, auth, apikey"));
        let (plain_kind, credentialed) = (PeerKind::Plain, PeerKind::Credentialed);
        assert!(runs_on(&auth, plain_kind, &plain) && runs_on(&auth, plain_kind, &key));
        assert!(!runs_on(&auth, credentialed, &plain));
        assert!(runs_on(&auth, credentialed, &token) && runs_on(&auth, credentialed, &key));
        assert!(!runs_on(&apikey, credentialed, &plain) && !runs_on(&apikey, credentialed, &token));
        assert!(runs_on(&apikey, credentialed, &key));
    }

    fn case(id: &str, verdict: Verdict, broken: &[&str]) -> CaseResult {
        let mut r = CaseResult::blank(id);
        r.verdict = verdict;
        r.broken = broken.iter().map(|s| s.to_string()).collect();
        r
    }

    #[test]
    fn a_fault_is_killed_only_when_a_failing_scenario_names_its_requirement() {
        let f = Fault::TpCallReplyTwice;
        let pass = case("a", Verdict::Pass, &[]);
        assert_eq!(classify(f, std::slice::from_ref(&pass)).0, Outcome::Survived);
        let error = case("e", Verdict::Error, &[]);
        assert_eq!(classify(f, &[pass.clone(), error]).0, Outcome::Survived);
        let other = case("b", Verdict::Fail, &["TP-CALL-02"]);
        assert_eq!(
            classify(f, &[pass.clone(), other.clone()]).0,
            Outcome::Misattributed { named: ["TP-CALL-02".to_owned()].into() }
        );
        let right = case("c", Verdict::Fail, &["TP-CALL-03", "TP-CALL-01"]);
        assert_eq!(classify(f, &[pass, other, right]).0, Outcome::Killed);
        assert_eq!(classify(f, &[case("w", Verdict::Warn, &["TP-CALL-01"])]).0, Outcome::Killed);
    }

    #[test]
    fn areas_are_the_requirement_id_without_its_number() {
        assert_eq!(area("TP-CALL-04"), "TP-CALL");
        assert_eq!(area("BR-STATELESS-02"), "BR-STATELESS");
    }

    #[test]
    fn a_sample_is_the_same_for_the_same_seed_and_differs_for_another() {
        let a = select(Role::ToolProcess, &[], Some((10, "9fb145f")));
        assert_eq!(a.len(), 10);
        assert_eq!(a, select(Role::ToolProcess, &[], Some((10, "9fb145f"))));
        assert_ne!(a, select(Role::ToolProcess, &[], Some((10, "0000000"))));
        let calls = select(Role::ToolProcess, &["tp.call.*".to_owned()], None);
        assert!(!calls.is_empty() && calls.iter().all(|f| f.name().starts_with("tp.call.")));
    }

    #[test]
    fn the_json_report_reads_back_as_its_gaps() {
        let report = Report {
            results: vec![
                FaultResult {
                    fault: Fault::TpCallReplyTwice,
                    outcome: Outcome::Killed,
                    ran: 3,
                    kills: vec![],
                    duration: Duration::ZERO,
                },
                FaultResult {
                    fault: Fault::TpCallEchoSlow,
                    outcome: Outcome::Survived,
                    ran: 3,
                    kills: vec![],
                    duration: Duration::ZERO,
                },
            ],
            scope: Scope::Area,
            wall: Duration::from_secs(1),
            jobs: 4,
        };
        let gaps = Report::gaps_of_json(&report.json()).unwrap();
        assert_eq!(gaps, BTreeMap::from([("TP-CALL-20".to_owned(), vec!["tp.call.echo-slow".to_owned()])]));
        assert!(report.text().contains("ADEQUACY: 50.0 % killed and attributed (1 of 2 faults"));
        assert!(Report::gaps_of_json(&json!({})).is_err());
    }
}

#[cfg(test)]
mod guards {
    use super::*;

    /// The Rust sources of the peers and cores where faults are guarded, and of the CLI, where
    /// the bridge process's start and exit are decided (`--auth` secrets, exit statuses).
    fn sources() -> String {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut text = String::new();
        let mut dirs: Vec<std::path::PathBuf> =
            ["proto/src", "peers/src", "bridge/src", "src"].iter().map(|d| root.join(d)).collect();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("proto/src/fault.rs") {
                    text.push_str(&std::fs::read_to_string(&path).unwrap());
                }
            }
        }
        text
    }

    #[test]
    fn every_fault_is_guarded_somewhere_outside_the_table() {
        let text = sources();
        let unguarded: Vec<&str> =
            Fault::ALL.iter().filter(|f| !text.contains(&format!("Fault::{}", f.ident()))).map(|f| f.name()).collect();
        assert!(unguarded.is_empty(), "faults with no `fault::on(Fault::…)` guard: {unguarded:?}");
    }

    #[test]
    fn every_fault_names_a_must_or_should_requirement_of_the_table() {
        for f in Fault::ALL {
            let r = crate::requirements::get(f.requirement()).unwrap_or_else(|| panic!("{}: {}", f, f.requirement()));
            assert!(!r.withdrawn, "{f}: {} is withdrawn", r.id);
            assert_ne!(r.level, crate::requirements::Level::May, "{f}: {} is a MAY", r.id);
        }
    }

    #[test]
    fn the_bundled_exceptions_name_faults_of_the_catalogue_with_reasons() {
        let text = include_str!("../../data/adequacy-exceptions.yaml");
        parse_exceptions("harness/data/adequacy-exceptions.yaml", text).unwrap();
        assert!(matches!(parse_exceptions("x.yaml", "tp.nothing: \"why\"\n"), Err(ExceptionsError::Unknown { .. })));
    }
}
