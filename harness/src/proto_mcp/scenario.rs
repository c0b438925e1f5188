//! The proto-mcp scenario files (`scenarios/proto-mcp/*.yaml`). Same shape as protomcp's
//! (`id`, `title`, `requirements`, `level`, `steps`, a step's `checks:`), with the client's
//! steps: messages by field name, raw bytes (lying prefixes included), text, JSON-RPC lines,
//! expectations by id, silence, exit, signals, and named probes for the multi-request checks.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::requirements::{self as pm, FEATURES};
use crate::requirements::{Level, Requirement};

/// Why a scenario file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ScenarioError {
    pub file: String,
    pub message: String,
}

/// One or several arm names.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// `expect`: the answer to `id` arrives within `within_ms` and has one of the arms.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub id: u64,
    pub arm: OneOrMany,
    #[serde(default)]
    pub within_ms: Option<u64>,
    /// Keep the answer under this name for probes.
    #[serde(default)]
    pub capture: Option<String>,
    /// The listing (tools or resources) in the answer is empty.
    #[serde(default)]
    pub empty: bool,
}

/// `expect_error`: the answer to `id` is an error with one of `codes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectError {
    pub id: u64,
    /// Codes that satisfy the step (empty: any code).
    #[serde(default)]
    pub codes: Vec<i32>,
    /// With `should`: codes the SHOULD part prefers; another accepted code is a deviation of
    /// `should`.
    #[serde(default)]
    pub should_codes: Vec<i32>,
    #[serde(default)]
    pub should: Option<String>,
    /// With `should`: a server-defined code (-32000…-32099) also satisfies the SHOULD part.
    #[serde(default)]
    pub server_defined_ok: bool,
    /// With `should`: codes that satisfy the SHOULD part only when the session's
    /// initialize_response did not advertise `capabilities.resources` (PM-RESOURCES-05's -32601).
    #[serde(default)]
    pub if_resources_not_advertised: Vec<i32>,
    /// A `call_tool_response` with a `success` result is accepted too (PM-TOOLS-12: a tool
    /// whose input type accepts an empty message).
    #[serde(default)]
    pub success_ok: bool,
    /// `call_tool_response.error` is accepted as the carrier, as a deviation of this
    /// requirement (PM-ERROR-03).
    #[serde(default)]
    pub call_error: Option<String>,
    #[serde(default)]
    pub within_ms: Option<u64>,
}

/// `expect_next`: the next frame that arrives answers `id`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectNext {
    pub id: u64,
    #[serde(default)]
    pub within_ms: Option<u64>,
}

/// `expect_json`: the next stdout line is a JSON-RPC 2.0 response with this id.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectJson {
    /// A number, or null.
    pub id: Value,
    /// A `result` object is required.
    #[serde(default)]
    pub result: bool,
    /// An `error` with this code is required.
    #[serde(default)]
    pub error_code: Option<i64>,
    /// Either a result or an error is fine.
    #[serde(default)]
    pub any: bool,
    #[serde(default)]
    pub within_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Silence {
    pub ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectExit {
    pub within_ms: u64,
    /// The operator declared the server accepts frames this large: not exiting is fine.
    #[serde(default)]
    pub unless_feature: Option<String>,
    /// An exit status other than 0 is a deviation of this requirement (PM-LIFECYCLE-09).
    #[serde(default)]
    pub should_exit_zero: Option<String>,
}

/// A step as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepFile {
    #[serde(default)]
    pub handshake: Option<Value>,
    #[serde(default)]
    pub send: Option<Value>,
    #[serde(default)]
    pub expect: Option<Expect>,
    #[serde(default)]
    pub expect_error: Option<ExpectError>,
    #[serde(default)]
    pub expect_next: Option<ExpectNext>,
    #[serde(default)]
    pub expect_json: Option<ExpectJson>,
    #[serde(default)]
    pub expect_silence: Option<Silence>,
    #[serde(default)]
    pub expect_exit: Option<ExpectExit>,
    /// Sends a list_tools_request with a fresh id and expects its answer (PM-LIFECYCLE-08).
    #[serde(default)]
    pub alive: Option<Value>,
    #[serde(default)]
    pub close_stdin: Option<Value>,
    /// `TERM`, `INT`.
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub sleep_ms: Option<u64>,
    /// A named multi-request check: `{tools: {...}}`, `{resources: {}}`, … (see `run`).
    #[serde(default)]
    pub probe: Option<Value>,
    /// The requirements this step checks (a failure breaks these).
    #[serde(default)]
    pub checks: Vec<String>,
    /// A failure of this step is a deviation (a SHOULD broken): recorded, and the scenario goes
    /// on.
    #[serde(default)]
    pub deviation: bool,
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    Handshake(Value),
    Send(Value),
    Expect(Expect),
    ExpectError(ExpectError),
    ExpectNext(ExpectNext),
    ExpectJson(ExpectJson),
    ExpectSilence(Silence),
    ExpectExit(ExpectExit),
    Alive,
    CloseStdin,
    Signal(String),
    Sleep(u64),
    Probe(String, Value),
}

#[derive(Debug, Clone)]
pub struct Step {
    pub action: Action,
    pub checks: Vec<&'static Requirement>,
    pub deviation: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    id: String,
    title: String,
    requirements: Vec<String>,
    level: String,
    #[serde(default)]
    features: Vec<String>,
    /// Skipped when the server has any of these features.
    #[serde(default)]
    unless_features: Vec<String>,
    #[serde(default)]
    notes: Option<String>,
    /// Start the server with only PATH and HOME (a fresh temp dir) in its environment.
    #[serde(default)]
    clean_env: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
    steps: Vec<StepFile>,
}

/// A loaded proto-mcp scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub id: String,
    pub title: String,
    pub file: PathBuf,
    pub requirements: Vec<&'static Requirement>,
    pub level: Level,
    pub features: Vec<String>,
    pub unless_features: Vec<String>,
    pub notes: String,
    pub clean_env: bool,
    pub timeout_ms: u64,
    pub steps: Vec<Step>,
}

/// Probe names a step may use.
pub const PROBES: &[&str] =
    &["tools", "resources", "bsr_filter", "init_flags", "version", "newer_major", "safe_call", "many"];

fn req(file: &str, id: &str) -> Result<&'static Requirement, ScenarioError> {
    pm::get(id).ok_or_else(|| ScenarioError { file: file.into(), message: format!("`{id}` is not a PM requirement") })
}

/// Parses one scenario file's text.
pub fn parse_str(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let err = |message: String| ScenarioError { file: file.clone(), message };
    let raw: ScenarioFile = serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?;
    let level = match raw.level.as_str() {
        "MUST" => Level::Must,
        "SHOULD" => Level::Should,
        "MAY" => Level::May,
        other => return Err(err(format!("unknown level `{other}`"))),
    };
    if raw.requirements.is_empty() {
        return Err(err("a scenario cites at least one requirement".into()));
    }
    let requirements = raw.requirements.iter().map(|r| req(&file, r)).collect::<Result<Vec<_>, _>>()?;
    if let Some(f) = raw.features.iter().chain(&raw.unless_features).find(|f| !FEATURES.contains(&f.as_str())) {
        return Err(err(format!("unknown feature `{f}`")));
    }
    if raw.steps.is_empty() {
        return Err(err("no steps".into()));
    }
    let mut steps = Vec::new();
    for (i, s) in raw.steps.into_iter().enumerate() {
        let checks = s.checks.iter().map(|r| req(&file, r)).collect::<Result<Vec<_>, _>>()?;
        let mut actions = Vec::new();
        if let Some(v) = s.handshake {
            actions.push(Action::Handshake(v));
        }
        if let Some(v) = s.send {
            actions.push(Action::Send(v));
        }
        if let Some(v) = s.expect {
            for a in v.arm.items() {
                if protomcp_proto::mcp::Arm::from_name(&a).is_none() {
                    return Err(err(format!("step {}: unknown arm `{a}`", i + 1)));
                }
            }
            actions.push(Action::Expect(v));
        }
        if let Some(v) = s.expect_error {
            actions.push(Action::ExpectError(v));
        }
        if let Some(v) = s.expect_next {
            actions.push(Action::ExpectNext(v));
        }
        if let Some(v) = s.expect_json {
            actions.push(Action::ExpectJson(v));
        }
        if let Some(v) = s.expect_silence {
            actions.push(Action::ExpectSilence(v));
        }
        if let Some(v) = s.expect_exit {
            actions.push(Action::ExpectExit(v));
        }
        if s.alive.is_some() {
            actions.push(Action::Alive);
        }
        if s.close_stdin.is_some() {
            actions.push(Action::CloseStdin);
        }
        if let Some(v) = s.signal {
            if !matches!(v.as_str(), "TERM" | "INT") {
                return Err(err(format!("step {}: signal must be TERM or INT", i + 1)));
            }
            actions.push(Action::Signal(v));
        }
        if let Some(v) = s.sleep_ms {
            actions.push(Action::Sleep(v));
        }
        if let Some(v) = s.probe {
            let (name, args) = match &v {
                Value::String(n) => (n.clone(), Value::Object(Default::default())),
                Value::Object(m) if m.len() == 1 => {
                    let (k, a) = m.iter().next().expect("one entry");
                    (k.clone(), a.clone())
                }
                _ => return Err(err(format!("step {}: probe is a name or a one-entry map", i + 1))),
            };
            if !PROBES.contains(&name.as_str()) {
                return Err(err(format!("step {}: unknown probe `{name}`", i + 1)));
            }
            actions.push(Action::Probe(name, args));
        }
        let action = match actions.len() {
            1 => actions.pop().expect("one"),
            n => return Err(err(format!("step {}: {n} actions; a step has exactly one", i + 1))),
        };
        steps.push(Step { action, checks, deviation: s.deviation });
    }
    Ok(Scenario {
        id: raw.id,
        title: raw.title,
        file: path.to_owned(),
        requirements,
        level,
        features: raw.features,
        unless_features: raw.unless_features,
        notes: raw.notes.unwrap_or_default(),
        clean_env: raw.clean_env,
        timeout_ms: raw.timeout_ms.unwrap_or(30_000),
        steps,
    })
}

/// Every `*.yaml` scenario of `dir`, sorted by id; ids must be unique.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, Vec<ScenarioError>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        vec![ScenarioError { file: dir.display().to_string(), message: format!("cannot list the directory: {e}") }]
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && p.is_file())
        .collect();
    paths.sort();
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for p in paths {
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) => {
                errors.push(ScenarioError { file: p.display().to_string(), message: e.to_string() });
                continue;
            }
        };
        match parse_str(&p, &text) {
            Ok(s) => out.push(s),
            Err(e) => errors.push(e),
        }
    }
    out.sort_by(|a: &Scenario, b| a.id.cmp(&b.id));
    for w in out.windows(2) {
        if w[0].id == w[1].id {
            errors.push(ScenarioError {
                file: w[1].file.display().to_string(),
                message: format!("duplicate id {}", w[0].id),
            });
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}
