//! The proto-mcp profile's part of a run: one scenario against a server, in a fresh process,
//! its steps in order, the rules of every answer checked as frames arrive ([`ServerProcess`]), the
//! outcome judged with the runner's verdicts ([`crate::runner::verdict::judge`]) as a
//! [`CaseResult`]. [`Server`] is that as the runner's target: the loop (selection, `-j`,
//! `--repeat`, `exclusive`, folding, progress, reports, matrix) is [`crate::runner::run_all`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prost::Message;
use protomcp_proto::mcp::pb::{self, mcp_message::Payload};
use protomcp_proto::mcp::prost_types::FileDescriptorSet;
use protomcp_proto::mcp::{Arm, McpMessage, default_handshake};
use serde_json::{Value, json};

use super::requirements as pm;
use super::session::{Finding, ServerProcess};
use crate::requirements::{Level, strength};
use crate::runner::verdict::{KnownFailure, Outcome, Verdict, judge};
use crate::runner::{CaseResult, ProfileServer};
use crate::scenario::proto_mcp::{self as lang, PmAction, message_frame};
use crate::scenario::{Action, Captures, Profile, Scenario, Step};

/// Time allowed for an answer that runs no tool (profile §1.3).
pub use crate::scenario::proto_mcp::T_REPLY;
/// Time allowed to exit after EOF or a signal.
pub const T_EXIT: Duration = Duration::from_secs(5);
/// A scenario's budget unless it sets `timeout_ms`.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(30);
/// Observation window for "nothing was written".
pub const T_QUIET: Duration = Duration::from_secs(1);

/// The operator's safe tool (feature `call`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafeTool {
    pub name: String,
    pub type_url: String,
    pub value: Vec<u8>,
}

/// A server to judge.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub command: Vec<String>,
    /// Features declared by the operator (manifest or command line).
    pub declared: BTreeSet<String>,
    pub safe_tool: Option<SafeTool>,
    pub known_failures: BTreeMap<String, Vec<KnownFailure>>,
    /// The operator declares that the server accepts 2 GiB frames (PM-FRAME-08).
    pub accepts_2gib: bool,
    /// Where each scenario's transcript is written, if anywhere.
    pub transcripts: Option<PathBuf>,
}

/// The result of the feature probe (§1.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    pub on: BTreeSet<String>,
    /// How each was decided.
    pub notes: Vec<String>,
}

/// Probes `dual`, `resources`, `paging` and `inline` (two sessions); `call` is on when a safe
/// tool is configured; `grpc` and `ws` only when declared (this runner has no network client).
pub fn detect_features(target: &Target) -> Features {
    let mut f = Features::default();
    let on = |name: &str, why: String, f: &mut Features| {
        f.on.insert(name.to_owned());
        f.notes.push(format!("{name}: {why}"));
    };
    if let Ok(mut s) = ServerProcess::spawn(&target.command, false) {
        s.send(&default_handshake(1).to_frame(), None, "feature probe: handshake");
        let deadline = Instant::now() + T_REPLY;
        if let Some(Payload::InitializeResponse(init)) = s.answer(1, deadline).and_then(|m| m.payload) {
            if init.capabilities.as_ref().is_some_and(|c| c.resources.is_some()) {
                on("resources", "advertised capabilities.resources".into(), &mut f);
            }
            let mut id = 2;
            let mut cursor = String::new();
            for _ in 0..50 {
                let req = McpMessage::with(
                    id,
                    Payload::ListToolsRequest(pb::ListToolsRequest { cursor: cursor.clone(), ..Default::default() }),
                );
                s.send(&req.to_frame(), None, "feature probe: list_tools");
                let Some(Payload::ListToolsResponse(page)) =
                    s.answer(id, Instant::now() + T_REPLY).and_then(|m| m.payload)
                else {
                    break;
                };
                id += 1;
                if page.tools.iter().any(|t| matches!(t.schema_source, Some(pb::tool::SchemaSource::InlineSchema(_))))
                    && !f.on.contains("inline")
                {
                    on("inline", "a tool listed with inline_schema".into(), &mut f);
                }
                if page.next_cursor.is_empty() {
                    break;
                }
                if !f.on.contains("paging") {
                    on("paging", "list_tools returned a next_cursor".into(), &mut f);
                }
                cursor = page.next_cursor;
            }
            if !f.on.contains("inline") {
                let req = McpMessage::with(
                    id,
                    Payload::ListToolsRequest(pb::ListToolsRequest { include_schemas: true, ..Default::default() }),
                );
                s.send(&req.to_frame(), None, "feature probe: list_tools include_schemas");
                if let Some(Payload::ListToolsResponse(page)) =
                    s.answer(id, Instant::now() + T_REPLY).and_then(|m| m.payload)
                    && page
                        .tools
                        .iter()
                        .any(|t| matches!(t.schema_source, Some(pb::tool::SchemaSource::InlineSchema(_))))
                {
                    on("inline", "a tool listed with inline_schema (include_schemas)".into(), &mut f);
                }
                id += 1;
            }
            let req = McpMessage::with(id, Payload::ListResourcesRequest(Default::default()));
            s.send(&req.to_frame(), None, "feature probe: list_resources");
            if let Some(Payload::ListResourcesResponse(page)) =
                s.answer(id, Instant::now() + T_REPLY).and_then(|m| m.payload)
            {
                if !page.resources.is_empty() && !f.on.contains("resources") {
                    on("resources", "list_resources listed a resource".into(), &mut f);
                }
                if !page.next_cursor.is_empty() && !f.on.contains("paging") {
                    on("paging", "list_resources returned a next_cursor".into(), &mut f);
                }
            }
        }
    }
    if let Ok(mut s) = ServerProcess::spawn(&target.command, false) {
        let line = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "protomcp-conform", "version": "0"}}});
        s.send(format!("{line}\n").as_bytes(), None, "feature probe: JSON-RPC initialize");
        if let Some(l) = s.next_line(Instant::now() + T_REPLY)
            && serde_json::from_str::<Value>(&l).is_ok_and(|v| v.get("result").is_some() || v.get("error").is_some())
        {
            on("dual", "a JSON-RPC initialize got a JSON answer".into(), &mut f);
        }
    }
    if target.safe_tool.is_some() {
        on("call", "a safe tool is configured".into(), &mut f);
    }
    for d in &target.declared {
        if !f.on.contains(d) {
            on(d, "declared by the operator".into(), &mut f);
        }
    }
    f
}

/// The strongest level among `broken` (PM table), never above `level`.
fn failure_level(level: Level, broken: &[String]) -> Level {
    let strongest = broken.iter().filter_map(|id| pm::get(id)).map(|r| r.level).max_by_key(|l| strength(*l));
    match strongest {
        Some(l) if strength(l) < strength(level) => l,
        _ => level,
    }
}

fn dedup(v: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    v.retain(|x| seen.insert(x.clone()));
}

/// The result of `sc` before it runs: a pass with nothing seen yet.
fn blank_result(sc: &Scenario, target: &Target) -> CaseResult {
    CaseResult {
        title: sc.title.clone(),
        file: sc.file.display().to_string(),
        requirements: sc.requirements.iter().map(|q| q.id.to_owned()).collect(),
        level: sc.level,
        command: target.command.clone(),
        ..CaseResult::blank(&sc.id)
    }
}

/// Runs one scenario in a fresh server process and judges it with `known`.
pub fn run_scenario(sc: &Scenario, target: &Target, features: &BTreeSet<String>, known: &[KnownFailure]) -> CaseResult {
    let started = Instant::now();
    let mut r = blank_result(sc, target);
    r.intermittent = known.iter().any(|k| k.intermittent);
    if let Some(f) = sc.unless.iter().find(|f| features.contains(*f)) {
        (r.verdict, r.message) =
            judge(&Outcome::Skipped(format!("only for servers without feature {f}")), sc.level, &[], None, known);
        r.command.clear();
        return r;
    }
    let missing: Vec<&String> = sc.needs.iter().filter(|f| !features.contains(*f)).collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        (r.verdict, r.message) =
            judge(&Outcome::Skipped(format!("needs feature {}", names.join(", "))), sc.level, &[], None, known);
        r.command.clear();
        return r;
    }
    let mut s = match ServerProcess::spawn(&target.command, sc.testee.clean_env) {
        Ok(s) => s,
        Err(e) => {
            (r.verdict, r.message) = judge(&Outcome::Error(e.to_string()), sc.level, &[], None, known);
            return r;
        }
    };
    let mut ctx = Ctx {
        target,
        features,
        vars: Captures::new(),
        init: None,
        next_id: 1000,
        deviations: Vec::new(),
        held: Vec::new(),
        checks: Vec::new(),
    };
    if let Some(t) = &target.safe_tool {
        ctx.vars.insert("safe_tool".into(), Value::String(t.name.clone()));
        ctx.vars.insert("safe_type_url".into(), Value::String(t.type_url.clone()));
        ctx.vars.insert("safe_value_hex".into(), Value::String(protomcp_proto::dynamic::hex_encode(&t.value)));
    }
    let deadline = started + sc.timeout.unwrap_or(SCENARIO_TIMEOUT);
    let (failure, error) = run_steps(&mut s, &mut ctx, sc, deadline);
    // Deviations found by the session itself (empty error messages).
    ctx.deviations.extend(s.deviations.iter().cloned());
    s.finish();
    r.duration = started.elapsed();
    r.transcript_tail = s.transcript.lines().into_iter().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
    r.stderr_tail =
        s.stderr_tail().lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    let outcome;
    let mut broken = Vec::new();
    let mut level = sc.level;
    let mut check = None;
    let mut step_line = None;
    if let Some(e) = error {
        outcome = Outcome::Error(e);
    } else if let Some((i, f)) = failure {
        broken = f.broken;
        dedup(&mut broken);
        step_line = sc.steps.get(i).map(|st| st.loc.line);
        level = failure_level(sc.level, &broken);
        check = Some(crate::runner::Check::Step(i + 1));
        outcome = Outcome::Failed(format!("step {}: {}", i + 1, f.message));
    } else if !ctx.deviations.is_empty() {
        broken = ctx.deviations.iter().map(|d| d.requirement.clone()).collect();
        dedup(&mut broken);
        level = Level::Should;
        // Deviations are gathered over the whole run and judged after it.
        check = Some(crate::runner::Check::End);
        outcome = Outcome::Failed(
            ctx.deviations
                .iter()
                .map(|d| format!("deviation {}: {}", d.requirement, d.message))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    } else {
        outcome = Outcome::Passed;
    }
    (r.verdict, r.message) = judge(&outcome, level, &broken, check.as_ref(), known);
    if matches!(r.verdict, Verdict::Fail | Verdict::Warn | Verdict::Xfail) {
        r.broken = broken;
        r.check = check;
        r.step_line = step_line;
        dedup(&mut ctx.held);
        r.held = ctx.held.into_iter().filter(|h| !r.broken.contains(h)).collect();
    }
    if let Some(dir) = &target.transcripts {
        write_transcript(dir, sc, &r, &s, target);
    }
    r
}

/// Runs the steps until one fails or errs, or the scenario's time is up: (the failing step and
/// its failure, the harness's error).
fn run_steps(
    s: &mut ServerProcess,
    ctx: &mut Ctx,
    sc: &Scenario,
    deadline: Instant,
) -> (Option<(usize, StepFailure)>, Option<String>) {
    let mut failure: Option<(usize, StepFailure)> = None;
    let mut error: Option<String> = None;
    for (i, st) in sc.steps.iter().enumerate() {
        if Instant::now() > deadline {
            let budget = sc.timeout.unwrap_or(SCENARIO_TIMEOUT).as_millis();
            error = Some(format!("the scenario ran past its {budget} ms before step {}", i + 1));
            break;
        }
        let result = step(s, ctx, st, sc);
        // Rules every answer keeps: a break fails the scenario at this step.
        if !s.violations.is_empty() {
            let v = s.violations.clone();
            let mut broken: Vec<String> = v.iter().map(|f| f.requirement.clone()).collect();
            dedup(&mut broken);
            let message = v.iter().map(|f| format!("{}: {}", f.requirement, f.message)).collect::<Vec<_>>().join("\n");
            failure = Some((i, StepFailure { broken, message }));
            break;
        }
        match result {
            Ok(()) => ctx.held.extend(st.checks.iter().map(|q| q.id.to_owned())),
            Err(f) if f.broken.is_empty() => {
                error = Some(format!("step {}: {}", i + 1, f.message));
                break;
            }
            Err(f) if st.deviation => {
                for b in &f.broken {
                    ctx.deviations.push(Finding { requirement: b.clone(), message: f.message.clone() });
                }
                s.note_harness(&format!("deviation: {}", f.message));
            }
            Err(f) => {
                failure = Some((i, f));
                break;
            }
        }
    }
    (failure, error)
}

/// Writes the scenario's transcript, verdict and message into `dir`.
fn write_transcript(dir: &Path, sc: &Scenario, r: &CaseResult, s: &ServerProcess, target: &Target) {
    let mut text = format!(
        "# {} ({})\n# verdict {}\n# command: {}\n",
        sc.id,
        sc.requirements.iter().map(|q| q.id).collect::<Vec<_>>().join(", "),
        r.verdict,
        target.command.join(" ")
    );
    for l in s.transcript.lines() {
        text.push_str(&l);
        text.push('\n');
    }
    if !r.message.is_empty() {
        text.push_str(&format!("# message:\n{}\n", r.message));
    }
    let stderr = s.stderr_tail();
    if !stderr.is_empty() {
        text.push_str(&format!("# stderr (tail):\n{stderr}\n"));
    }
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(dir.join(format!("{}.txt", sc.id)), text);
}

/// A proto-mcp server as the runner's target ([`crate::runner::TargetKind::Profile`]): the
/// runner's loop selects, schedules, repeats, folds and reports; this runs one scenario.
#[derive(Debug, Clone)]
pub struct Server {
    pub target: Target,
    /// The features the probe found or the operator declared ([`detect_features`]).
    pub features: BTreeSet<String>,
}

impl ProfileServer for Server {
    fn profile(&self) -> Profile {
        Profile::ProtoMcp
    }

    fn run_one(&self, s: &Scenario, known: &[KnownFailure]) -> CaseResult {
        run_scenario(s, &self.target, &self.features, known)
    }
}

impl Server {
    /// The runner's target for this server, named `name` in reports, with the server's known
    /// failures.
    pub fn into_target(self, name: String) -> crate::runner::Target {
        let known = self.target.known_failures.clone();
        crate::runner::Target::profile(name, std::sync::Arc::new(self), known)
    }
}

mod ctx;
mod manifest;
mod probes;
mod steps;

use ctx::{Ctx, StepFailure};
use steps::step;

pub use manifest::{MANIFEST, ManifestError, load_manifest, parse_safe_tool, stale_entries};
pub use probes::bsr_ref_ok;
