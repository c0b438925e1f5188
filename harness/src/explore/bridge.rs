//! `explore --bridge`: generated sessions against bridges. Each case ([`bridge_gen`]) is written
//! as an ordinary bridge scenario and run by the normal bridge runner (a fresh bridge and mock per
//! case, over the target's transport); the transcript is then fed to the bridge model
//! ([`BridgeModel`]), which names the BR requirements the bridge broke. The runner's own failures
//! (a step that timed out, a tool-side frame that should not have come) count too, with the
//! requirements their step checks. A failing case is shrunk by dropping ops and replaying, and
//! the smallest still failing the same way is written to `scenarios/regressions/`. With several
//! bridges the same case runs against each, and answers that differ after normalization are
//! DIVERGENT.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use protomcp_proto::session::Finding;
use serde_json::Value;

use super::batch::{self, CaseKind};
use super::bridge_gen::{self, BOp, BridgeCase};
use super::{ExploreConfig, Failure, Progress, case_seed};
use crate::runner::observe::check_bridge_transcript_split;
use crate::runner::{self, CaseResult, Config, Target, Verdict};
use crate::transcript::{Dir, Item};

/// Case `k` of the run with `seed` (`http`: for bridges driven over Streamable HTTP).
pub fn generate(seed: u64, k: u64, max_ops: usize, http: bool) -> BridgeCase {
    bridge_gen::generate(case_seed(seed, k), max_ops, http)
}

/// Whether any of `targets` is driven over Streamable HTTP.
pub fn any_http(targets: &[Arc<Target>]) -> bool {
    targets.iter().any(|t| {
        matches!(&t.kind, runner::TargetKind::Bridge { transport: runner::bridge::BridgeTransport::Http { .. }, .. })
    })
}

/// What one case did.
#[derive(Debug, Clone)]
pub struct BridgeCaseRun {
    pub case: BridgeCase,
    pub results: Vec<CaseResult>,
    pub failure: Option<Failure>,
    /// Deviations seen that the target's known-failures file records: (target, requirement).
    pub known: Vec<(String, &'static str)>,
}

/// Requirements about notifications alone: a known deviation in them does not change answers.
const NOTIFICATIONS_ONLY: &[&str] =
    &["BR-TOOLLIST-12", "BR-TOOLLIST-13", "BR-PROGRESS-01", "BR-PROGRESS-02", "BR-PROGRESS-03", "BR-LOG-01"];

/// Requirements every generated scenario cites.
const BASE: &[&str] = &["BR-MCP-19"];

fn scenario(case: &BridgeCase, id: &str) -> Result<crate::scenario::Scenario, super::GeneratorBug> {
    super::load_generated(
        id,
        &case.scenario_yaml(id, "A generated host session is answered as the spec requires", BASE, ""),
    )
}

/// What the host saw, normalized for comparing bridges: per request id (in the order sent), the
/// kind of answer (result or error) and, for tools/call results, content, isError and
/// structuredContent. Left out: initialize and list results (server info and annotations
/// differ by design), error codes and messages, notifications, answers to lines that were not
/// requests, and the answers of cancelled calls (optional, BR-CANCEL-02).
pub fn host_answers(r: &CaseResult, case: &BridgeCase) -> String {
    let mut sent: Vec<(String, String)> = Vec::new();
    let mut answers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let skip: Vec<String> = case
        .ops
        .iter()
        .filter_map(|o| match o {
            BOp::Cancel { id, .. } => Some(id.json().to_string()),
            _ => None,
        })
        .collect();
    for it in r.transcript.to_vec() {
        match it {
            Item::Host { dir: Dir::ToTestee, message: Some(v), .. } => {
                if let (Some(id), Some(m)) = (v.get("id"), v.get("method").and_then(Value::as_str)) {
                    sent.push((id.to_string(), m.to_owned()));
                }
            }
            Item::Host { dir: Dir::FromTestee, message: Some(v), .. } if v.get("method").is_none() => {
                let Some(id) = v.get("id").filter(|i| !i.is_null()) else { continue };
                let shape = match (v.get("result"), v.get("error")) {
                    (Some(res), _) => {
                        let mut s = "result".to_owned();
                        if let Some(c) = res.get("content") {
                            // The short parts first: side by side, long lines are cut.
                            s.push_str(&format!(
                                " isError={} structured={} content={c}",
                                res.get("isError").and_then(Value::as_bool).unwrap_or(false),
                                res.get("structuredContent").map_or("-".into(), Value::to_string)
                            ));
                        }
                        s
                    }
                    (None, Some(_)) => "error".to_owned(),
                    _ => "neither".to_owned(),
                };
                answers.entry(id.to_string()).or_default().push(shape);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (id, method) in sent {
        if method == "initialize" || method.ends_with("/list") || skip.contains(&id) {
            // Still take its answer off the list (a reused id's later answer follows).
            *seen.entry(id).or_default() += 1;
            continue;
        }
        let k = seen.entry(id.clone()).or_default();
        let a = answers.get(&id).and_then(|v| v.get(*k)).cloned().unwrap_or_else(|| "(no answer)".into());
        *k += 1;
        out.push(format!("{method} {id}: {a}"));
    }
    out.join("\n")
}

/// Runs `case` against every bridge (a fresh process each) and judges it: a failure against
/// any bridge first, then (several bridges) a divergence of the answers.
pub async fn run_case(case: &BridgeCase, targets: &[Arc<Target>], cfg: &Config, label: &str) -> BridgeCaseRun {
    let s = match scenario(case, label) {
        Ok(s) => s,
        Err(bug) => {
            let message = bug.to_string();
            let failure = Failure { target: "the harness".into(), message, findings: Vec::new(), divergent: None };
            return BridgeCaseRun {
                case: case.clone(),
                results: Vec::new(),
                failure: Some(failure),
                known: Vec::new(),
            };
        }
    };
    let mut results = Vec::new();
    for t in targets {
        results.push(runner::run_scenario(&s, t, cfg).await);
    }
    let mut failure = None;
    let mut known = Vec::new();
    for (r, t) in results.iter().zip(targets) {
        let (mut findings, streaming) = check_bridge_transcript_split(&r.transcript.to_vec());
        let failed = !matches!(r.verdict, Verdict::Pass | Verdict::Skip);
        if failed && streaming == 0 {
            // The runner's step failed and the model saw nothing wrong in what was exchanged
            // until then: the step's own requirements, before what the end found still owed
            // (which follows from the stop).
            let requirement = r.broken.first().and_then(|b| crate::requirements::get(b)).map(|q| q.id);
            if let Some(requirement) = requirement {
                let message = r.message.lines().next().unwrap_or("").to_owned();
                findings.insert(streaming, Finding { requirement, message });
            }
        }
        if !failed && findings.is_empty() {
            continue;
        }
        // A deviation the target's known-failures file already records (by requirement) is
        // counted, not reported: the exploration looks for the ones the catalogue lacks.
        // When a step failed, the session stopped there: what the end finds still owed follows
        // from the stop, and a step that checks a known requirement may be what stopped it.
        let baseline = known_requirements(t);
        let all_known = |f: &[Finding]| !f.is_empty() && f.iter().all(|f| baseline.contains(f.requirement));
        let step_known = failed && r.broken.iter().any(|b| baseline.contains(b.as_str()));
        let before_end = &findings[..streaming.min(findings.len())];
        if all_known(&findings) || (step_known && (before_end.is_empty() || all_known(before_end))) {
            known.extend(findings.iter().map(|f| (t.name.clone(), f.requirement)));
            continue;
        }
        let mut message = format!("{:?}: {}", r.verdict, r.message);
        if !r.stderr_tail.is_empty() {
            message.push_str(&format!("\n  stderr: {}", r.stderr_tail.replace('\n', "\n          ")));
        }
        failure = Some(Failure { target: t.name.clone(), message, findings, divergent: None });
        break;
    }
    // A known deviation makes the answers differ for a known reason: no comparison then; but
    // one in notifications only (list_changed, progress) leaves the answers alone.
    let answers_known = known.iter().any(|(_, r)| !NOTIFICATIONS_ONLY.contains(r));
    if failure.is_none() && results.len() > 1 && !answers_known {
        let first = host_answers(&results[0], case);
        for (r, t) in results.iter().zip(targets).skip(1) {
            let other = host_answers(r, case);
            if other != first {
                failure = Some(Failure {
                    target: targets[0].name.clone(),
                    message: "the normalized answers differ".into(),
                    findings: Vec::new(),
                    divergent: Some((targets[0].name.clone(), first, t.name.clone(), other)),
                });
                break;
            }
        }
    }
    BridgeCaseRun { case: case.clone(), results, failure, known }
}

/// The requirements a target's known-failures file names.
fn known_requirements(t: &Target) -> std::collections::BTreeSet<&str> {
    t.known_failures.values().flatten().flat_map(|k| k.requirement.iter().map(String::as_str)).collect()
}

/// Generated host sessions against bridges as a [`CaseKind`]: case `k` is [`generate`]`(seed, k,
/// max_ops, http)`, run by [`run_case`] against every bridge.
pub struct BridgeCases(pub batch::Cases);

impl CaseKind for BridgeCases {
    type Case = BridgeCase;
    type Run = BridgeCaseRun;

    fn generate(&self, k: u64) -> BridgeCase {
        generate(self.0.seed, k, self.0.max_ops, any_http(&self.0.targets))
    }

    fn label(&self, k: u64) -> String {
        format!("explore.bridge-case-{k}")
    }

    fn run(&self, case: &BridgeCase, label: &str) -> impl Future<Output = BridgeCaseRun> + Send {
        run_case(case, &self.0.targets, &self.0.runner, label)
    }

    fn failure<'r>(&self, run: &'r BridgeCaseRun) -> Option<&'r Failure> {
        run.failure.as_ref()
    }

    fn op_count(&self, case: &BridgeCase) -> usize {
        case.len()
    }

    fn without(&self, case: &BridgeCase, drop: Range<usize>) -> BridgeCase {
        let mut ops = case.ops.clone();
        ops.drain(drop);
        case.with_ops(ops)
    }

    /// A failure that names a requirement never matches one that names none.
    fn same_kind(&self, a: &Failure, b: &Failure) -> bool {
        batch::same_failure(a, b, false)
    }
}

/// The result of shrinking a bridge case.
pub type BridgeShrunk = batch::Shrunk<BridgeCase, BridgeCaseRun>;

/// What an exploration of bridges found.
pub type BridgeFound = batch::Found<BridgeCase, BridgeCaseRun>;

/// The end of an exploration.
#[derive(Debug)]
pub struct BridgeReport {
    pub cases_run: u64,
    /// Host messages and tool-side frames sent by all cases.
    pub messages_sent: u64,
    pub elapsed: Duration,
    pub found: Option<BridgeFound>,
    /// Known deviations seen, per (target, requirement): cases.
    pub known: BTreeMap<(String, &'static str), u64>,
}

fn sent_count(r: &CaseResult) -> u64 {
    r.transcript
        .to_vec()
        .iter()
        .filter(|i| matches!(i, Item::Host { dir: Dir::ToTestee, .. } | Item::Frame { dir: Dir::ToTestee, .. }))
        .count() as u64
}

/// Runs up to `cfg.cases` cases (`cfg.jobs` at a time) until the first failure, shrinks it and
/// writes the scenario into `out_dir`.
pub async fn explore(
    targets: Vec<Arc<Target>>,
    cfg: ExploreConfig,
    out_dir: &Path,
    progress: Progress,
) -> BridgeReport {
    let started = Instant::now();
    let mut messages_sent = 0u64;
    let mut last_note = Instant::now();
    let mut known: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    let targets = Arc::new(targets);
    let kind = Arc::new(BridgeCases(batch::Cases::new(targets.clone(), &cfg)));
    let outcome = batch::run_cases(kind, &cfg, &progress, |runs, before| {
        for run in runs {
            messages_sent += run.results.iter().map(sent_count).sum::<u64>();
            let mut once: Vec<&(String, &'static str)> = run.known.iter().collect();
            once.sort();
            once.dedup();
            for k in once {
                *known.entry(k.clone()).or_default() += 1;
            }
        }
        if last_note.elapsed() >= Duration::from_secs(30) {
            last_note = Instant::now();
            let cases_run = before + runs.len() as u64;
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            progress(&format!(
                "{cases_run} cases, {messages_sent} messages and frames, {:.0} s ({:.2} cases/s)",
                secs,
                cases_run as f64 / secs
            ));
        }
    })
    .await;
    let found = outcome.found.map(|(k, original_ops, shrunk)| {
        let file = write_regression(out_dir, cfg.seed, k, original_ops, &shrunk, &targets);
        BridgeFound { case: k, original_ops, shrunk, file }
    });
    BridgeReport { cases_run: outcome.cases_run, messages_sent, elapsed: started.elapsed(), found, known }
}

/// The scenario text of a shrunk case: id `regressions.<name>`, the requirements found (MUST
/// ones known to the catalogue) beside BR-MCP-19, and notes saying where it came from.
pub fn regression_yaml(name: &str, s: &BridgeShrunk, notes: &str) -> String {
    let f = s.run.failure.as_ref().expect("a failure");
    let mut reqs: Vec<&str> = BASE.to_vec();
    for x in &f.findings {
        let must = crate::requirements::get(x.requirement).is_some_and(|q| q.level == crate::requirements::Level::Must);
        if must && !reqs.contains(&x.requirement) {
            reqs.push(x.requirement);
        }
    }
    let title = match f.findings.first() {
        Some(x) => format!("Regression ({}): {}", x.requirement, x.message.lines().next().unwrap_or("")),
        None if f.divergent.is_some() => "Regression: bridges answered this generated session differently".into(),
        None => "Regression: a generated host session the bridge did not serve as the spec requires".into(),
    };
    s.run.case.scenario_yaml(&format!("regressions.{name}"), &title, &reqs, notes)
}

fn write_regression(
    out_dir: &Path,
    seed: u64,
    case: u64,
    original: usize,
    s: &BridgeShrunk,
    targets: &[Arc<Target>],
) -> PathBuf {
    let f = s.run.failure.as_ref().expect("a failure");
    let shrunk = (original, s.run.case.len(), s.replays);
    let notes = batch::regression_notes("protomcp-conform explore --bridge …", seed, case, targets, shrunk, f);
    let name = format!("explore-bridge-{seed}-{case}");
    let text = regression_yaml(&name, s, &notes);
    batch::write_regression(out_dir, &format!("{name}.yaml"), &text)
}
