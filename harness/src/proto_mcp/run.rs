//! Runs proto-mcp scenarios against a server: each scenario a fresh process, its steps in order,
//! the rules of every answer checked as frames arrive ([`Session`]), the outcome judged with the
//! protomcp runner's verdicts ([`crate::runner::verdict::judge`]) and reported as its
//! [`CaseResult`]s.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prost::Message;
use protomcp_proto::mcp::pb::{self, mcp_message::Payload};
use protomcp_proto::mcp::prost_types::FileDescriptorSet;
use protomcp_proto::mcp::{Arm, McpMessage, default_handshake};
use serde_json::{Value, json};

use super::build::{self, message_frame, outgoing, substitute};
use super::requirements as pm;
use super::scenario::{Action, Scenario, Step};
use super::session::{Finding, Session};
use crate::requirements::{Level, strength};
use crate::runner::CaseResult;
use crate::runner::verdict::{KnownFailure, Outcome, Verdict, judge};

/// Time allowed for an answer that runs no tool (profile §1.3).
pub const T_REPLY: Duration = Duration::from_secs(5);
/// Time allowed to exit after EOF or a signal.
pub const T_EXIT: Duration = Duration::from_secs(5);
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
    pub known_failures: BTreeMap<String, KnownFailure>,
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
    if let Ok(mut s) = Session::spawn(&target.command, false) {
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
    if let Ok(mut s) = Session::spawn(&target.command, false) {
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

/// Why a step failed: the requirements it breaks and what was seen.
struct StepFailure {
    broken: Vec<String>,
    message: String,
}

fn fail(reqs: &[&str], message: impl Into<String>) -> StepFailure {
    StepFailure { broken: reqs.iter().map(|r| (*r).to_owned()).collect(), message: message.into() }
}

/// State of one running scenario.
struct Ctx<'a> {
    target: &'a Target,
    features: &'a BTreeSet<String>,
    vars: HashMap<String, String>,
    captures: HashMap<String, McpMessage>,
    init: Option<pb::InitializeResponse>,
    next_id: u64,
    /// SHOULD-level findings of steps (deviation: true) and probes.
    deviations: Vec<Finding>,
    /// Requirements checked by steps that passed.
    held: Vec<String>,
    /// Requirements the current step checks (a probe evaluates only these when non-empty).
    checks: Vec<String>,
}

impl Ctx<'_> {
    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn wants(&self, id: &str) -> bool {
        self.checks.is_empty() || self.checks.iter().any(|c| c == id)
    }

    fn deviate(&mut self, s: &mut Session, requirement: &str, message: String) {
        s.note_harness(&format!("deviation {requirement}: {message}"));
        self.deviations.push(Finding { requirement: requirement.into(), message });
    }
}

fn within(ms: Option<u64>) -> Instant {
    Instant::now() + ms.map(Duration::from_millis).unwrap_or(T_REPLY)
}

fn describe(m: &McpMessage) -> String {
    match (&m.payload, m.error()) {
        (_, Some(e)) => format!("error_response code {} ({:?})", e.code, e.message),
        (Some(p), None) => Arm::of(p).to_string(),
        (None, None) => "a message with no payload".into(),
    }
}

fn default_checks(step: &Step, fallback: &[&str]) -> Vec<String> {
    if step.checks.is_empty() {
        fallback.iter().map(|s| (*s).to_owned()).collect()
    } else {
        step.checks.iter().map(|r| r.id.to_owned()).collect()
    }
}

/// Runs one step.
fn step(s: &mut Session, ctx: &mut Ctx, st: &Step, scenario: &Scenario) -> Result<(), StepFailure> {
    let cited: Vec<&str> = scenario.requirements.iter().map(|r| r.id).collect();
    let checks = default_checks(st, &cited);
    let checks: Vec<&str> = checks.iter().map(String::as_str).collect();
    match &st.action {
        Action::Handshake(v) => {
            let id = v.get("id").and_then(Value::as_u64).unwrap_or(1);
            let msg = if v.as_object().is_none_or(|m| m.keys().all(|k| k == "id")) {
                default_handshake(id).to_frame().to_vec()
            } else {
                let mut req = v.clone();
                let m = req.as_object_mut().expect("a map");
                m.remove("id");
                let version = m.remove("protocol_version").unwrap_or(json!("1.0.0"));
                let bsr = m.remove("supports_bsr_refs");
                let no_caps = m.remove("capabilities").is_some_and(|c| c == json!(false));
                if let Some(k) = m.keys().next() {
                    return Err(fail(&[], format!("handshake: unknown option `{k}`")));
                }
                let mut init = json!({"protocol_version": version, "metadata": {"client": "protomcp-conform"}});
                if !no_caps {
                    init["capabilities"] =
                        json!({"supports_bsr_refs": bsr.unwrap_or(json!(true)), "encodings": ["protobuf"]});
                }
                message_frame(&json!({"id": id, "initialize_request": init})).map_err(|e| fail(&[], e))?.0
            };
            s.send(&msg, None, &format!("handshake id={id}"));
            let answer = s.answer(id, within(None)).ok_or_else(|| {
                fail(
                    &checks,
                    format!("no answer to the initialize_request (id {id}) within {} ms", T_REPLY.as_millis()),
                )
            })?;
            match answer.payload {
                Some(Payload::InitializeResponse(r)) => {
                    ctx.captures
                        .insert("initialize".into(), McpMessage::with(id, Payload::InitializeResponse(r.clone())));
                    ctx.init = Some(r);
                    Ok(())
                }
                _ => Err(fail(&checks, format!("initialize_request (id {id}) answered by {}", describe(&answer)))),
            }
        }
        Action::Send(v) => {
            let v = substitute(v, &ctx.vars).map_err(|e| fail(&[], e))?;
            let out = outgoing(&v).map_err(|e| fail(&[], e))?;
            s.send(&out.bytes, out.pace, &out.label);
            Ok(())
        }
        Action::Expect(e) => {
            let arms: Vec<Arm> = e.arm.items().iter().filter_map(|a| Arm::from_name(a)).collect();
            let m = s.answer(e.id, within(e.within_ms)).ok_or_else(|| {
                let why = if s.stdout_closed {
                    "stdout closed".to_owned()
                } else {
                    format!("{} ms passed", e.within_ms.unwrap_or(T_REPLY.as_millis() as u64))
                };
                fail(&checks, format!("no answer with id {} ({why})", e.id))
            })?;
            if !m.arm().is_some_and(|a| arms.contains(&a)) {
                let want: Vec<&str> = arms.iter().map(|a| a.name()).collect();
                return Err(fail(
                    &checks,
                    format!("id {} answered by {}, expected {}", e.id, describe(&m), want.join(" or ")),
                ));
            }
            if e.empty {
                let n = match &m.payload {
                    Some(Payload::ListToolsResponse(l)) => l.tools.len(),
                    Some(Payload::ListResourcesResponse(l)) => l.resources.len(),
                    _ => 0,
                };
                if n > 0 {
                    return Err(fail(&checks, format!("id {}: expected an empty listing, got {n} items", e.id)));
                }
            }
            if let Some(c) = &e.capture {
                ctx.captures.insert(c.clone(), m);
            }
            Ok(())
        }
        Action::ExpectError(e) => {
            let m = s.answer(e.id, within(e.within_ms)).ok_or_else(|| {
                let why = if s.stdout_closed { "stdout closed" } else { "nothing came" };
                fail(&checks, format!("no error answer with id {} ({why})", e.id))
            })?;
            let (code, via_call) = match &m.payload {
                Some(Payload::ErrorResponse(err)) => (err.code, false),
                Some(Payload::CallToolResponse(pb::CallToolResponse {
                    result: Some(pb::call_tool_response::Result::Error(err)),
                    ..
                })) if e.call_error.is_some() => (err.code, true),
                Some(Payload::CallToolResponse(pb::CallToolResponse {
                    result: Some(pb::call_tool_response::Result::Success(_)),
                    ..
                })) if e.success_ok => return Ok(()),
                _ => {
                    return Err(fail(
                        &checks,
                        format!("id {} answered by {}, expected an error_response", e.id, describe(&m)),
                    ));
                }
            };
            let accepted = e.codes.is_empty() || e.codes.contains(&code) || e.should_codes.contains(&code);
            if !accepted {
                return Err(fail(
                    &checks,
                    format!(
                        "id {}: error code {code}, expected one of {:?}",
                        e.id,
                        [&e.codes[..], &e.should_codes[..]].concat()
                    ),
                ));
            }
            if via_call && let Some(r) = &e.call_error {
                ctx.deviate(
                    s,
                    r,
                    format!(
                        "id {}: a pre-execution failure sent as call_tool_response.error, not error_response",
                        e.id
                    ),
                );
            }
            let resources_advertised =
                ctx.init.as_ref().and_then(|i| i.capabilities.as_ref()).is_some_and(|c| c.resources.is_some());
            // Codes that satisfy the SHOULD part as well as the preferred ones.
            let also_fine = (e.server_defined_ok && (-32099..=-32000).contains(&code))
                || (e.if_resources_not_advertised.contains(&code) && !resources_advertised);
            if let Some(r) = &e.should
                && !e.should_codes.is_empty()
                && !e.should_codes.contains(&code)
                && !also_fine
            {
                ctx.deviate(s, r, format!("id {}: error code {code}; the profile prefers {:?}", e.id, e.should_codes));
            }
            Ok(())
        }
        Action::ExpectNext(e) => {
            let m = s
                .next_frame(within(e.within_ms))
                .ok_or_else(|| fail(&checks, format!("nothing arrived; expected the answer to id {}", e.id)))?;
            if m.id != e.id {
                return Err(fail(
                    &checks,
                    format!("the next frame was {} with id {}, expected the answer to id {}", describe(&m), m.id, e.id),
                ));
            }
            Ok(())
        }
        Action::ExpectJson(e) => {
            let line =
                s.next_line(within(e.within_ms)).ok_or_else(|| fail(&checks, "no JSON-RPC line arrived".to_owned()))?;
            let v: Value = serde_json::from_str(&line)
                .map_err(|err| fail(&checks, format!("the line is not JSON ({err}): {line}")))?;
            if v.get("jsonrpc") != Some(&json!("2.0")) {
                return Err(fail(&checks, format!("no \"jsonrpc\":\"2.0\" in {line}")));
            }
            if v.get("id") != Some(&e.id) && !(e.id.is_null() && v.get("id").is_none()) {
                return Err(fail(&checks, format!("expected id {}, got {line}", e.id)));
            }
            let has_result = v.get("result").is_some_and(Value::is_object);
            let error_code = v.pointer("/error/code").and_then(Value::as_i64);
            if e.result && !has_result {
                return Err(fail(&checks, format!("expected a result object: {line}")));
            }
            if let Some(c) = e.error_code
                && error_code != Some(c)
            {
                return Err(fail(&checks, format!("expected error code {c}: {line}")));
            }
            if e.any && !has_result && error_code.is_none() {
                return Err(fail(&checks, format!("neither a result nor an error: {line}")));
            }
            Ok(())
        }
        Action::ExpectSilence(w) => {
            if s.silent_for(Duration::from_millis(w.ms)) && s.unclaimed() == 0 {
                Ok(())
            } else {
                Err(fail(
                    &checks,
                    format!("the server wrote to stdout within {} ms ({} bytes in the session)", w.ms, s.received),
                ))
            }
        }
        Action::ExpectExit(x) => {
            if x.unless_feature.as_ref().is_some_and(|f| ctx.features.contains(f))
                || (x.unless_feature.as_deref() == Some("2gib") && ctx.target.accepts_2gib)
            {
                return Ok(());
            }
            match s.wait_exit(Instant::now() + Duration::from_millis(x.within_ms)) {
                Some(status) => {
                    if let Some(r) = &x.should_exit_zero
                        && !status.success()
                    {
                        ctx.deviate(s, r, format!("the server exited with {status}, not 0"));
                    }
                    Ok(())
                }
                None => Err(fail(&checks, format!("the server was still running {} ms later", x.within_ms))),
            }
        }
        Action::Alive => {
            let id = ctx.fresh_id();
            let req = McpMessage::with(id, Payload::ListToolsRequest(Default::default()));
            s.send(&req.to_frame(), None, &format!("alive? list_tools_request id={id}"));
            let checks = default_checks(st, &["PM-LIFECYCLE-08"]);
            let checks: Vec<&str> = checks.iter().map(String::as_str).collect();
            // Any answer shows the session alive (PM-LIFECYCLE-08); an unfitting arm is
            // PM-LIFECYCLE-04's business, checked on every frame.
            match s.answer(id, within(None)) {
                Some(_) => Ok(()),
                None => Err(fail(
                    &checks,
                    format!(
                        "the list_tools_request after the test (id {id}) got no answer{}",
                        if s.stdout_closed { " (stdout closed)" } else { "" }
                    ),
                )),
            }
        }
        Action::CloseStdin => {
            s.close_stdin();
            Ok(())
        }
        Action::Signal(sig) => {
            s.signal(if sig == "TERM" { libc::SIGTERM } else { libc::SIGINT });
            Ok(())
        }
        Action::Sleep(ms) => {
            s.silent_for(Duration::from_millis(*ms));
            Ok(())
        }
        Action::Probe(name, args) => {
            ctx.checks = st.checks.iter().map(|r| r.id.to_owned()).collect();
            let r = match name.as_str() {
                "tools" => probe_tools(s, ctx, args),
                "resources" => probe_resources(s, ctx),
                "bsr_filter" => probe_bsr_filter(s, ctx),
                "init_flags" => probe_init_flags(s, ctx),
                "version" => probe_version(s, ctx, args),
                "newer_major" => probe_newer_major(s, ctx),
                "safe_call" => probe_safe_call(s, ctx),
                "many" => probe_many(s, ctx, args),
                other => Err(fail(&[], format!("unknown probe {other}"))),
            };
            ctx.checks.clear();
            r
        }
    }
}

/// One request and its answer (a probe's building block).
fn ask(s: &mut Session, ctx: &mut Ctx, payload: Payload, label: &str) -> Result<McpMessage, StepFailure> {
    let id = ctx.fresh_id();
    let arm = Arm::of(&payload);
    s.send(&McpMessage::with(id, payload).to_frame(), None, &format!("{label} ({arm} id={id})"));
    s.answer(id, within(None)).ok_or_else(|| {
        let r = match arm {
            Arm::ListResourcesRequest => "PM-RESOURCES-01",
            Arm::CallToolRequest => "PM-TOOLS-10",
            Arm::ReadResourceRequest => "PM-RESOURCES-04",
            _ => "PM-TOOLS-01",
        };
        fail(&[r, "PM-LIFECYCLE-03"], format!("{arm} (id {id}) got no answer within {} ms", T_REPLY.as_millis()))
    })
}

/// Every page of a tool listing: the tools, and for each the number of its page (from 1).
fn list_all_tools(
    s: &mut Session,
    ctx: &mut Ctx,
    base: pb::ListToolsRequest,
) -> Result<(Vec<pb::Tool>, Vec<usize>), StepFailure> {
    let (mut tools, mut page_of, mut pages, mut cursor) = (Vec::new(), Vec::new(), 0usize, String::new());
    loop {
        let req = pb::ListToolsRequest { cursor: cursor.clone(), ..base.clone() };
        let m = ask(s, ctx, Payload::ListToolsRequest(req), "list tools")?;
        let Some(Payload::ListToolsResponse(page)) = m.payload.clone() else {
            return Err(fail(&["PM-TOOLS-01"], format!("list_tools_request answered by {}", describe(&m))));
        };
        pages += 1;
        page_of.extend(std::iter::repeat_n(pages, page.tools.len()));
        tools.extend(page.tools);
        if page.next_cursor.is_empty() {
            return Ok((tools, page_of));
        }
        if pages >= 1000 {
            return Err(fail(&["PM-TOOLS-07"], "the tool listing did not end within 1000 pages"));
        }
        cursor = page.next_cursor;
    }
}

/// `^buf\.build/owner/repo/pkg.Message:version$` (§2.5).
pub fn bsr_ref_ok(r: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"^buf\.build/[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9_-]*/([A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*:[^/:\s]+$").expect("valid")
    })
    .is_match(r)
}

fn probe_tools(s: &mut Session, ctx: &mut Ctx, args: &Value) -> Result<(), StepFailure> {
    let include_schemas = args.get("include_schemas").and_then(Value::as_bool).unwrap_or(false);
    let (tools, page_of) = list_all_tools(s, ctx, pb::ListToolsRequest { include_schemas, ..Default::default() })?;
    s.note_harness(&format!("{} tools in {} pages", tools.len(), page_of.last().copied().unwrap_or(1)));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (t, &page) in tools.iter().zip(&page_of) {
        if t.name.is_empty() && ctx.wants("PM-TOOLS-02") {
            return Err(fail(&["PM-TOOLS-02"], "a tool with an empty name"));
        }
        if let Some(first) = seen.insert(&t.name, page) {
            // On one page it is a duplicate name; across pages, the chain repeats (PM-TOOLS-07).
            let r = if first == page { "PM-TOOLS-02" } else { "PM-TOOLS-07" };
            if ctx.wants(r) || ctx.wants("PM-TOOLS-02") {
                return Err(fail(
                    &[r],
                    format!("tool name {:?} on page {page} was listed before on page {first}", t.name),
                ));
            }
        }
    }
    for t in &tools {
        match &t.schema_source {
            None if ctx.wants("PM-TOOLS-03") => {
                return Err(fail(
                    &["PM-TOOLS-03"],
                    format!("tool {:?} carries neither bsr_ref nor inline_schema", t.name),
                ));
            }
            Some(pb::tool::SchemaSource::BsrRef(r)) if r.is_empty() && ctx.wants("PM-TOOLS-03") => {
                return Err(fail(&["PM-TOOLS-03"], format!("tool {:?} carries an empty bsr_ref", t.name)));
            }
            Some(pb::tool::SchemaSource::BsrRef(r)) if !bsr_ref_ok(r) && ctx.wants("PM-SCHEMA-01") => {
                return Err(fail(
                    &["PM-SCHEMA-01"],
                    format!("tool {:?}: bsr_ref {r:?} is not buf.build/<owner>/<repo>/<pkg.Message>:<version>", t.name),
                ));
            }
            Some(pb::tool::SchemaSource::InlineSchema(fds)) if ctx.wants("PM-SCHEMA-04") => check_inline(&t.name, fds)?,
            Some(pb::tool::SchemaSource::InlineSchema(fds)) if ctx.wants("PM-SCHEMA-05") => {
                if let Some(missing) = missing_dependency(fds) {
                    ctx.deviate(
                        s,
                        "PM-SCHEMA-05",
                        format!("tool {:?}: inline_schema imports {missing:?}, which the set does not hold", t.name),
                    );
                }
            }
            _ => {}
        }
    }
    for (req, label) in
        [("PM-SCHEMA-02", "include_schemas was true"), ("PM-SCHEMA-03", "the session declared no supports_bsr_refs")]
    {
        if ctx.wants(req) && !ctx.checks.is_empty() {
            for t in &tools {
                if !matches!(t.schema_source, Some(pb::tool::SchemaSource::InlineSchema(_))) {
                    ctx.deviate(s, req, format!("tool {:?} carries no inline_schema although {label}", t.name));
                }
            }
        }
    }
    let caps = ctx.init.as_ref().and_then(|i| i.capabilities);
    if ctx.wants("PM-INIT-09") && !tools.is_empty() && caps.as_ref().is_none_or(|c| c.tools.is_none()) {
        return Err(fail(
            &["PM-INIT-09"],
            format!("{} tools listed, but capabilities.tools was not advertised", tools.len()),
        ));
    }
    let with_ref = tools.iter().find(|t| matches!(t.schema_source, Some(pb::tool::SchemaSource::BsrRef(_))));
    if ctx.wants("PM-INIT-10")
        && let Some(t) = with_ref
        && !caps.as_ref().is_some_and(|c| c.supports_bsr_refs)
    {
        return Err(fail(
            &["PM-INIT-10"],
            format!("tool {:?} carries a bsr_ref, but capabilities.supports_bsr_refs was not true", t.name),
        ));
    }
    if let Some(pb::tool::SchemaSource::BsrRef(r)) = with_ref.and_then(|t| t.schema_source.clone()) {
        ctx.vars.insert("first_bsr_ref".into(), r);
    }
    ctx.vars.insert("tool_count".into(), tools.len().to_string());
    Ok(())
}

fn check_inline(name: &str, fds: &FileDescriptorSet) -> Result<(), StepFailure> {
    // Re-decode through the wire to be sure the bytes are a FileDescriptorSet.
    let fds = FileDescriptorSet::decode(fds.encode_to_vec().as_slice())
        .map_err(|e| fail(&["PM-SCHEMA-04"], format!("tool {name:?}: inline_schema does not decode: {e}")))?;
    if fds.file.is_empty() {
        return Err(fail(&["PM-SCHEMA-04"], format!("tool {name:?}: inline_schema holds no file")));
    }
    if let Some(f) = fds.file.iter().find(|f| f.name().is_empty()) {
        return Err(fail(
            &["PM-SCHEMA-04"],
            format!("tool {name:?}: a file of inline_schema has no name (package {:?})", f.package()),
        ));
    }
    if fds.file.iter().all(|f| f.message_type.is_empty()) {
        return Err(fail(&["PM-SCHEMA-04"], format!("tool {name:?}: inline_schema defines no message type")));
    }
    Ok(())
}

fn missing_dependency(fds: &FileDescriptorSet) -> Option<String> {
    let names: BTreeSet<&str> = fds.file.iter().map(|f| f.name()).collect();
    fds.file
        .iter()
        .flat_map(|f| f.dependency.iter())
        .find(|d| !d.starts_with("google/protobuf/") && !names.contains(d.as_str()))
        .cloned()
}

fn probe_resources(s: &mut Session, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let advertised = ctx.init.as_ref().and_then(|i| i.capabilities.as_ref()).is_some_and(|c| c.resources.is_some());
    let (mut all, mut page_of, mut cursor, mut pages) = (Vec::new(), Vec::new(), String::new(), 0usize);
    loop {
        let m = ask(
            s,
            ctx,
            Payload::ListResourcesRequest(pb::ListResourcesRequest { cursor: cursor.clone() }),
            "list resources",
        )?;
        match m.payload.clone() {
            Some(Payload::ListResourcesResponse(page)) => {
                pages += 1;
                page_of.extend(std::iter::repeat_n(pages, page.resources.len()));
                all.extend(page.resources);
                if page.next_cursor.is_empty() {
                    break;
                }
                if pages >= 1000 {
                    return Err(fail(&["PM-RESOURCES-03"], "the resource listing did not end within 1000 pages"));
                }
                cursor = page.next_cursor;
            }
            Some(Payload::ErrorResponse(e))
                if pages == 0 && !advertised && e.code == protomcp_proto::mcp::code::METHOD_NOT_FOUND =>
            {
                s.note_harness("resources not offered (-32601, not advertised)");
                return Ok(());
            }
            _ => {
                return Err(fail(
                    &["PM-RESOURCES-01"],
                    format!(
                        "list_resources_request answered by {}{}",
                        describe(&m),
                        if advertised { " although capabilities.resources was advertised" } else { "" }
                    ),
                ));
            }
        }
    }
    s.note_harness(&format!("{} resources in {pages} pages", all.len()));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (r, &page) in all.iter().zip(&page_of) {
        if r.uri.is_empty() && ctx.wants("PM-RESOURCES-02") {
            return Err(fail(&["PM-RESOURCES-02"], format!("resource {:?} has an empty uri", r.name)));
        }
        if let Some(first) = seen.insert(&r.uri, page) {
            let req = if first == page { "PM-RESOURCES-02" } else { "PM-RESOURCES-03" };
            if ctx.wants(req) || ctx.wants("PM-RESOURCES-02") {
                return Err(fail(&[req], format!("uri {:?} on page {page} was listed before on page {first}", r.uri)));
            }
        }
    }
    if ctx.wants("PM-INIT-11") && !all.is_empty() && !advertised {
        return Err(fail(
            &["PM-INIT-11"],
            format!("{} resources listed, but capabilities.resources was not advertised", all.len()),
        ));
    }
    if let Some(first) = all.first() {
        ctx.vars.insert("first_resource_uri".into(), first.uri.clone());
        if ctx.wants("PM-RESOURCES-04") {
            let uri = first.uri.clone();
            let m = ask(
                s,
                ctx,
                Payload::ReadResourceRequest(pb::ReadResourceRequest { uri: uri.clone() }),
                "read the first listed resource",
            )?;
            let Some(Payload::ReadResourceResponse(r)) = m.payload.clone() else {
                return Err(fail(
                    &["PM-RESOURCES-04"],
                    format!("reading the listed {uri:?} was answered by {}", describe(&m)),
                ));
            };
            if r.contents.is_empty() {
                return Err(fail(&["PM-RESOURCES-04"], format!("reading {uri:?} returned no content")));
            }
            if let Some(c) = r.contents.iter().find(|c| c.content.is_none()) {
                return Err(fail(
                    &["PM-RESOURCES-04"],
                    format!("a content of {uri:?} (uri {:?}) sets neither text nor blob", c.uri),
                ));
            }
        }
    }
    Ok(())
}

fn probe_bsr_filter(s: &mut Session, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let (all, _) = list_all_tools(s, ctx, Default::default())?;
    let refs: Vec<(String, String)> = all
        .iter()
        .filter_map(|t| match &t.schema_source {
            Some(pb::tool::SchemaSource::BsrRef(r)) => Some((t.name.clone(), r.clone())),
            _ => None,
        })
        .collect();
    if let Some((_, r)) = refs.first() {
        let (got, _) =
            list_all_tools(s, ctx, pb::ListToolsRequest { bsr_refs: vec![r.clone()], ..Default::default() })?;
        if let Some(t) =
            got.iter().find(|t| !matches!(&t.schema_source, Some(pb::tool::SchemaSource::BsrRef(x)) if x == r))
        {
            return Err(fail(
                &["PM-TOOLS-04"],
                format!(
                    "filter [{r:?}] returned tool {:?} whose schema source is {:?}",
                    t.name,
                    t.schema_source.as_ref().map(|x| match x {
                        pb::tool::SchemaSource::BsrRef(b) => b.clone(),
                        _ => "inline_schema".into(),
                    })
                ),
            ));
        }
        let want: BTreeSet<&str> = refs.iter().filter(|(_, x)| x == r).map(|(n, _)| n.as_str()).collect();
        let have: BTreeSet<&str> = got.iter().map(|t| t.name.as_str()).collect();
        let missing: Vec<&&str> = want.difference(&have).collect();
        if ctx.wants("PM-TOOLS-05") && !missing.is_empty() {
            ctx.deviate(
                s,
                "PM-TOOLS-05",
                format!("filter [{r:?}] left out {missing:?}, which the unfiltered listing shows with that bsr_ref"),
            );
        }
    } else {
        s.note_harness("no tool carries a bsr_ref: only the one-letter filter is checked");
    }
    let (got, _) = list_all_tools(s, ctx, pb::ListToolsRequest { bsr_refs: vec!["a".into()], ..Default::default() })?;
    if let Some(t) =
        got.iter().find(|t| !matches!(&t.schema_source, Some(pb::tool::SchemaSource::BsrRef(x)) if x == "a"))
    {
        return Err(fail(
            &["PM-TOOLS-04"],
            format!(
                "filter [\"a\"] returned {} tools, e.g. {:?}: entries are matched as search text, not exactly",
                got.len(),
                t.name
            ),
        ));
    }
    Ok(())
}

fn probe_init_flags(s: &mut Session, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let Some(init) = ctx.init.clone() else { return Err(fail(&[], "probe init_flags needs a handshake first")) };
    match &init.capabilities {
        None => {
            if ctx.wants("PM-INIT-08") {
                ctx.deviate(s, "PM-INIT-08", "the initialize_response carries no capabilities (field 2)".into());
            }
        }
        Some(c) if ctx.wants("PM-INIT-12") => {
            let mut set = Vec::new();
            if c.supports_streaming {
                set.push("supports_streaming");
            }
            if c.resources.as_ref().is_some_and(|r| r.supports_subscribe) {
                set.push("resources.supports_subscribe");
            }
            if c.prompts.is_some() {
                set.push("prompts");
            }
            for f in set {
                ctx.deviate(s, "PM-INIT-12", format!("advertises {f}, which proto-mcp 1.0 cannot carry"));
            }
        }
        Some(_) => {}
    }
    Ok(())
}

fn probe_version(s: &mut Session, ctx: &mut Ctx, args: &Value) -> Result<(), StepFailure> {
    let sent = args.get("sent").and_then(Value::as_str).unwrap_or("1.0.0");
    let Some(init) = ctx.init.clone() else { return Err(fail(&[], "probe version needs a handshake first")) };
    let v = init.protocol_version;
    let re = regex::Regex::new(r"^1\.\d+\.\d+$").expect("valid");
    if !re.is_match(&v) {
        return Err(fail(
            &["PM-INIT-02"],
            format!("asked for {sent}; the server answered protocol_version {v:?}, not 1.MINOR.PATCH"),
        ));
    }
    if sent == "1.0.0" && !v.starts_with("1.0.") {
        ctx.deviate(s, "PM-INIT-02", format!("asked for 1.0.0; the server answered {v}, a newer minor"));
    }
    Ok(())
}

fn probe_newer_major(s: &mut Session, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let id = ctx.fresh_id();
    let (frame, _) = message_frame(&json!({"id": id, "initialize_request": {"protocol_version": "2.0.0", "capabilities": {"supports_bsr_refs": true, "encodings": ["protobuf"]}}, "pad_to": 64}))
        .map_err(|e| fail(&[], e))?;
    s.send(&frame, None, &format!("initialize_request 2.0.0 id={id}"));
    let m = s
        .answer(id, within(None))
        .ok_or_else(|| fail(&["PM-INIT-03", "PM-INIT-01"], format!("no answer to initialize 2.0.0 (id {id})")))?;
    match &m.payload {
        Some(Payload::ErrorResponse(e)) if e.code == protomcp_proto::mcp::code::VERSION_UNSUPPORTED => Ok(()),
        Some(Payload::InitializeResponse(r)) if r.protocol_version.starts_with("1.") => Ok(()),
        Some(Payload::InitializeResponse(r)) => {
            Err(fail(&["PM-INIT-03"], format!("asked for 2.0.0, the server claims {:?}", r.protocol_version)))
        }
        _ => Err(fail(
            &["PM-INIT-03"],
            format!("initialize 2.0.0 answered by {}; expected -33002 or a 1.x initialize_response", describe(&m)),
        )),
    }
}

fn probe_safe_call(s: &mut Session, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let Some(tool) = ctx.target.safe_tool.clone() else { return Err(fail(&[], "no safe tool configured")) };
    if ctx.wants("PM-SCHEMA-08") {
        let (all, _) = list_all_tools(s, ctx, Default::default())?;
        if let Some(pb::tool::SchemaSource::BsrRef(r)) =
            all.iter().find(|t| t.name == tool.name).and_then(|t| t.schema_source.clone())
        {
            let message = r.rsplit_once(':').map(|(a, _)| a).unwrap_or(&r).rsplit('/').next().unwrap_or("");
            let want = format!("type.googleapis.com/{message}");
            if tool.type_url != want {
                return Err(fail(
                    &[],
                    format!(
                        "configuration: the safe tool's type_url {:?} is not {want:?} (from its bsr_ref {r:?}); PM-SCHEMA-08 is judged with that one",
                        tool.type_url
                    ),
                ));
            }
        }
    }
    let args = protomcp_proto::mcp::prost_types::Any { type_url: tool.type_url.clone(), value: tool.value.clone() };
    let m = ask(
        s,
        ctx,
        Payload::CallToolRequest(pb::CallToolRequest {
            name: tool.name.clone(),
            arguments: Some(args),
            metadata: Default::default(),
        }),
        "call the safe tool",
    )?;
    let reqs: Vec<&str> =
        if ctx.wants("PM-SCHEMA-08") { vec!["PM-TOOLS-10", "PM-SCHEMA-08"] } else { vec!["PM-TOOLS-10"] };
    let Some(Payload::CallToolResponse(r)) = m.payload.clone() else {
        return Err(fail(&reqs, format!("the safe tool call was answered by {}", describe(&m))));
    };
    match r.result {
        None => Err(fail(&["PM-TOOLS-10"], "call_tool_response sets neither success nor error")),
        Some(pb::call_tool_response::Result::Error(e)) if ctx.wants("PM-SCHEMA-08") => Err(fail(
            &["PM-SCHEMA-08"],
            format!("the safe tool call with its bsr_ref's type_url failed: {} {:?}", e.code, e.message),
        )),
        Some(pb::call_tool_response::Result::Error(_)) => Ok(()),
        Some(pb::call_tool_response::Result::Success(ok)) => {
            if ctx.wants("PM-TOOLS-11") {
                for (i, c) in ok.content.iter().enumerate() {
                    match &c.content {
                        None => {
                            return Err(fail(
                                &["PM-TOOLS-11"],
                                format!("content item {i} sets none of text, image, data"),
                            ));
                        }
                        Some(pb::tool_content::Content::Data(a)) if a.type_url.is_empty() => {
                            return Err(fail(
                                &["PM-TOOLS-11"],
                                format!("content item {i}: a data Any with an empty type_url"),
                            ));
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        }
    }
}

fn probe_many(s: &mut Session, ctx: &mut Ctx, args: &Value) -> Result<(), StepFailure> {
    let total = args.get("count").and_then(Value::as_u64).unwrap_or(10_000);
    let batch = args.get("batch").and_then(Value::as_u64).unwrap_or(100).max(1);
    let mut answered = 0u64;
    let mut sent = 0u64;
    while sent < total {
        let n = batch.min(total - sent);
        let first = ctx.next_id + 1;
        let mut bytes = Vec::new();
        for _ in 0..n {
            let id = ctx.fresh_id();
            bytes.extend_from_slice(&McpMessage::with(id, Payload::ListToolsRequest(Default::default())).to_frame());
        }
        s.send(&bytes, None, &format!("{n} list_tools_requests, ids {first}..={}", ctx.next_id));
        sent += n;
        for id in first..=ctx.next_id {
            match s.answer(id, within(Some(30_000))) {
                Some(_) => answered += 1,
                None => {
                    return Err(fail(
                        &["PM-LIFECYCLE-12"],
                        format!(
                            "request {} of {total} (id {id}) got no answer; {answered} answered",
                            sent - n + (id - first) + 1
                        ),
                    ));
                }
            }
        }
    }
    s.note_harness(&format!("{answered} of {total} answered"));
    Ok(())
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

/// Runs one scenario in a fresh server process.
pub fn run_scenario(sc: &Scenario, target: &Target, features: &BTreeSet<String>) -> CaseResult {
    let started = Instant::now();
    let mut r = CaseResult {
        id: sc.id.clone(),
        title: sc.title.clone(),
        file: sc.file.display().to_string(),
        requirements: sc.requirements.iter().map(|q| q.id.to_owned()).collect(),
        broken: Vec::new(),
        held: Vec::new(),
        level: sc.level,
        verdict: Verdict::Pass,
        message: String::new(),
        duration: Duration::ZERO,
        transcript_tail: Vec::new(),
        transcript: Default::default(),
        stderr_tail: String::new(),
        command: target.command.clone(),
        runs: Vec::new(),
        intermittent: false,
        resources: None,
        golden: None,
    };
    let known = target.known_failures.get(&sc.id);
    r.intermittent = known.is_some_and(|k| k.intermittent);
    if let Some(f) = sc.unless_features.iter().find(|f| features.contains(*f)) {
        (r.verdict, r.message) =
            judge(&Outcome::Skipped(format!("only for servers without feature {f}")), sc.level, &[], known);
        r.command.clear();
        return r;
    }
    let missing: Vec<&String> = sc.features.iter().filter(|f| !features.contains(*f)).collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        (r.verdict, r.message) =
            judge(&Outcome::Skipped(format!("needs feature {}", names.join(", "))), sc.level, &[], known);
        r.command.clear();
        return r;
    }
    let mut s = match Session::spawn(&target.command, sc.clean_env) {
        Ok(s) => s,
        Err(e) => {
            (r.verdict, r.message) = judge(&Outcome::Error(e.to_string()), sc.level, &[], known);
            return r;
        }
    };
    let mut ctx = Ctx {
        target,
        features,
        vars: HashMap::new(),
        captures: HashMap::new(),
        init: None,
        next_id: 1000,
        deviations: Vec::new(),
        held: Vec::new(),
        checks: Vec::new(),
    };
    if let Some(t) = &target.safe_tool {
        ctx.vars.insert("safe_tool".into(), t.name.clone());
        ctx.vars.insert("safe_type_url".into(), t.type_url.clone());
        ctx.vars.insert("safe_value_hex".into(), t.value.iter().map(|b| format!("{b:02x}")).collect());
    }
    let deadline = started + Duration::from_millis(sc.timeout_ms);
    let mut failure: Option<(usize, StepFailure)> = None;
    let mut error: Option<String> = None;
    for (i, st) in sc.steps.iter().enumerate() {
        if Instant::now() > deadline {
            error = Some(format!("the scenario ran past its {} ms before step {}", sc.timeout_ms, i + 1));
            break;
        }
        let result = step(&mut s, &mut ctx, st, sc);
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
    if let Some(e) = error {
        outcome = Outcome::Error(e);
    } else if let Some((i, f)) = failure {
        broken = f.broken;
        dedup(&mut broken);
        level = failure_level(sc.level, &broken);
        outcome = Outcome::Failed(format!("step {}: {}", i + 1, f.message));
    } else if !ctx.deviations.is_empty() {
        broken = ctx.deviations.iter().map(|d| d.requirement.clone()).collect();
        dedup(&mut broken);
        level = Level::Should;
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
    (r.verdict, r.message) = judge(&outcome, level, &broken, known);
    if matches!(r.verdict, Verdict::Fail | Verdict::Warn | Verdict::Xfail) {
        r.broken = broken;
        dedup(&mut ctx.held);
        r.held = ctx.held.into_iter().filter(|h| !r.broken.contains(h)).collect();
    }
    if let Some(dir) = &target.transcripts {
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
    r
}

/// Runs `scenarios` with `jobs` in parallel; results in the scenarios' order. `on_done` sees each
/// result as it finishes.
pub fn run_all(
    scenarios: &[Scenario],
    target: &Target,
    features: &BTreeSet<String>,
    jobs: usize,
    on_done: &(dyn Fn(&CaseResult) + Sync),
) -> Vec<CaseResult> {
    run_repeated(scenarios, target, features, jobs, 1, on_done)
}

/// Runs each of `scenarios` `repeat` times, each run on a fresh server process, `jobs` runs in
/// parallel, and folds the runs of a scenario as the protomcp runner does
/// ([`crate::runner::fold_repeats`]: runs that differ in verdict or broken requirement are FLAKY;
/// an intermittent known failure folds PASS and XFAIL to XFAIL). Results in the scenarios' order;
/// `on_done` sees each folded result once all its runs have finished.
pub fn run_repeated(
    scenarios: &[Scenario],
    target: &Target,
    features: &BTreeSet<String>,
    jobs: usize,
    repeat: usize,
    on_done: &(dyn Fn(&CaseResult) + Sync),
) -> Vec<CaseResult> {
    let repeat = repeat.max(1);
    // The runs of each scenario so far, and its folded result once they are all in.
    let runs: Mutex<Vec<Vec<CaseResult>>> = Mutex::new(vec![Vec::new(); scenarios.len()]);
    let folded: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; scenarios.len()]);
    // Work items in order: every run of the first scenario, then of the second, and so on.
    let next = Mutex::new(0usize);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let item = {
                        let mut n = next.lock().expect("lock");
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(sc) = scenarios.get(item / repeat) else { return };
                    let r = run_scenario(sc, target, features);
                    let all = {
                        let mut runs = runs.lock().expect("lock");
                        let mine = &mut runs[item / repeat];
                        mine.push(r);
                        if mine.len() == repeat { Some(std::mem::take(mine)) } else { None }
                    };
                    if let Some(all) = all {
                        let r = crate::runner::fold_repeats(all);
                        on_done(&r);
                        folded.lock().expect("lock")[item / repeat] = Some(r);
                    }
                }
            });
        }
    });
    folded.into_inner().expect("lock").into_iter().map(|r| r.expect("every scenario ran")).collect()
}

/// The manifest of a server directory (`--server DIR`): `DIR/proto-mcp.toml`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    /// argv; `${VAR}` is replaced from the environment, `{self}` by the harness's own binary, a
    /// relative path that starts with `./` is resolved against DIR.
    command: Vec<String>,
    #[serde(default)]
    features: Vec<String>,
    #[serde(default)]
    safe_tool: Option<SafeToolFile>,
    #[serde(default)]
    accepts_2gib_frames: bool,
    /// Baseline: scenario id → the PM requirement(s) broken and what the server sends.
    #[serde(default)]
    known_failures: BTreeMap<String, KnownFile>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SafeToolFile {
    name: String,
    type_url: String,
    value_hex: String,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KnownFile {
    requirement: Vec<String>,
    reason: String,
    #[serde(default)]
    intermittent: bool,
}

/// Why a manifest could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ManifestError {
    pub path: String,
    pub message: String,
}

/// The manifest file of a server directory.
pub const MANIFEST: &str = "proto-mcp.toml";

/// Reads `dir/proto-mcp.toml` into a target; `self_exe` replaces `{self}`.
pub fn load_manifest(dir: &Path, self_exe: &Path) -> Result<Target, ManifestError> {
    let path = dir.join(MANIFEST);
    let err = |message: String| ManifestError { path: path.display().to_string(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
    let m: ManifestFile = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
    let mut command = Vec::new();
    for (i, a) in m.command.iter().enumerate() {
        let mut a = a.replace("{self}", &self_exe.display().to_string());
        while let Some(start) = a.find("${") {
            let end = a[start..].find('}').ok_or_else(|| err(format!("unterminated ${{ in {a:?}")))? + start;
            let name = &a[start + 2..end];
            let value = std::env::var(name).map_err(|_| err(format!("command needs ${name}, which is not set")))?;
            a.replace_range(start..=end, &value);
        }
        if i == 0 && a.starts_with("./") {
            a = dir.join(&a[2..]).display().to_string();
        }
        command.push(a);
    }
    if command.is_empty() {
        return Err(err("command is empty".into()));
    }
    if let Some(f) = m.features.iter().find(|f| !pm::FEATURES.contains(&f.as_str())) {
        return Err(err(format!("unknown feature `{f}`")));
    }
    let safe_tool = match m.safe_tool {
        Some(t) => Some(SafeTool {
            name: t.name,
            type_url: t.type_url,
            value: build::hex(&t.value_hex).map_err(|e| err(format!("safe_tool.value_hex: {e}")))?,
        }),
        None => None,
    };
    let mut known_failures = BTreeMap::new();
    for (id, k) in m.known_failures {
        if k.requirement.is_empty() || k.reason.trim().is_empty() {
            return Err(err(format!("known_failures.{id}: name the requirement(s) and what the server sends")));
        }
        if let Some(bad) = k.requirement.iter().find(|r| pm::get(r).is_none()) {
            return Err(err(format!("known_failures.{id}: `{bad}` is not a PM requirement")));
        }
        known_failures
            .insert(id, KnownFailure { requirement: k.requirement, reason: k.reason, intermittent: k.intermittent });
    }
    Ok(Target {
        command,
        declared: m.features.into_iter().collect(),
        safe_tool,
        known_failures,
        accepts_2gib: m.accepts_2gib_frames,
        transcripts: None,
    })
}

/// Parses `NAME=TYPE_URL=HEX` (the `--safe-tool` option).
pub fn parse_safe_tool(s: &str) -> Result<SafeTool, String> {
    let mut it = s.splitn(3, '=');
    let (Some(name), Some(type_url), Some(value)) = (it.next(), it.next(), it.next()) else {
        return Err("expected NAME=TYPE_URL=HEX".into());
    };
    Ok(SafeTool { name: name.into(), type_url: type_url.into(), value: build::hex(value)? })
}

/// Known-failures entries that name a scenario the catalogue does not have.
pub fn stale_entries<'a>(target: &'a Target, scenarios: &[Scenario]) -> Vec<&'a str> {
    target.known_failures.keys().filter(|k| !scenarios.iter().any(|s| &s.id == *k)).map(String::as_str).collect()
}
