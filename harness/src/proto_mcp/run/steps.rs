//! One step of a proto-mcp scenario, by step group.

use super::ctx::*;
use super::probes::*;
use super::{
    Action, Duration, Instant, McpMessage, Payload, PmAction, Scenario, ServerProcess, Step, Value, json, lang, pb,
};
use crate::scenario::proto_mcp::{ExpectAnswer, ExpectError, ExpectJson, Initialize, Probe};
use crate::scenario::{CloseMode, ExitCode, ExpectExit, FrameBody, SendFrame, Signal, match_value};

pub(super) fn default_checks(step: &Step, fallback: &[&str]) -> Vec<String> {
    if step.checks.is_empty() {
        fallback.iter().map(|s| (*s).to_owned()).collect()
    } else {
        step.checks.iter().map(|r| r.id.to_owned()).collect()
    }
}

/// Runs one step.
pub(super) fn step(s: &mut ServerProcess, ctx: &mut Ctx, st: &Step, scenario: &Scenario) -> Result<(), StepFailure> {
    let cited: Vec<&str> = scenario.requirements.iter().map(|r| r.id).collect();
    let checks = default_checks(st, &cited);
    let checks: Vec<&str> = checks.iter().map(String::as_str).collect();
    match &st.action {
        Action::ProtoMcp(a) => pm_step(s, ctx, st, a, &checks),
        Action::SendRaw(bytes) => {
            s.send(bytes, None, "raw");
            Ok(())
        }
        Action::SendFrame(SendFrame { length, body: FrameBody::Hex(body) }) => {
            let prefix = length.unwrap_or(u32::try_from(body.len()).unwrap_or(u32::MAX));
            let mut bytes = prefix.to_be_bytes().to_vec();
            bytes.extend_from_slice(body);
            s.send(&bytes, None, &format!("frame: prefix {prefix}, {} body bytes", body.len()));
            Ok(())
        }
        Action::ExpectNothing(e) => {
            if s.silent_for(e.duration) && s.unclaimed() == 0 {
                Ok(())
            } else {
                Err(fail(
                    &checks,
                    format!(
                        "the server wrote to stdout within {} ms ({} bytes in the session)",
                        e.duration.as_millis(),
                        s.received
                    ),
                ))
            }
        }
        Action::ExpectExit(x) => expect_exit(s, ctx, x, &checks),
        Action::ExpectAlive { within } => alive(s, ctx, st, *within),
        Action::Close(CloseMode::Write) => {
            s.close_stdin();
            Ok(())
        }
        Action::Signal(sig) => {
            s.signal(match sig {
                Signal::Term => libc::SIGTERM,
                Signal::Int => libc::SIGINT,
                Signal::Hup => libc::SIGHUP,
                Signal::Kill => libc::SIGKILL,
            });
            Ok(())
        }
        Action::Sleep(d) => {
            s.silent_for(*d);
            Ok(())
        }
        Action::Check { capture, pattern } => {
            let value = ctx.vars.get(capture).cloned();
            match_value(pattern, value.as_ref(), &mut ctx.vars).map_err(|m| fail(&checks, format!("`{capture}`: {m}")))
        }
        other => Err(fail(&[], format!("`{}` is not a proto-mcp step", other.keyword()))),
    }
}

/// A step only proto-mcp has.
fn pm_step(s: &mut ServerProcess, ctx: &mut Ctx, st: &Step, a: &PmAction, checks: &[&str]) -> Result<(), StepFailure> {
    match a {
        PmAction::Initialize(i) => handshake(s, ctx, i, checks),
        PmAction::Write(w) => {
            let out = w.render(&ctx.vars).map_err(|e| fail(&[], e.to_string()))?;
            s.send(&out.bytes, out.pace, &out.label);
            Ok(())
        }
        PmAction::ExpectAnswer(e) => expect(s, ctx, e, checks),
        PmAction::ExpectError(e) => expect_error(s, ctx, e, checks),
        PmAction::ExpectNext { id, within } => {
            let m = s
                .next_frame(Instant::now() + *within)
                .ok_or_else(|| fail(checks, format!("nothing arrived; expected the answer to id {id}")))?;
            if m.id != *id {
                return Err(fail(
                    checks,
                    format!("the next frame was {} with id {}, expected the answer to id {id}", describe(&m), m.id),
                ));
            }
            Ok(())
        }
        PmAction::ExpectJson(e) => expect_json(s, e, checks),
        PmAction::Probe(p) => {
            ctx.checks = st.checks.iter().map(|r| r.id.to_owned()).collect();
            let r = match p {
                Probe::Tools { include_schemas } => probe_tools(s, ctx, *include_schemas),
                Probe::Resources => probe_resources(s, ctx),
                Probe::BsrFilter => probe_bsr_filter(s, ctx),
                Probe::InitFlags => probe_init_flags(s, ctx),
                Probe::Version { sent } => probe_version(s, ctx, sent),
                Probe::NewerMajor => probe_newer_major(s, ctx),
                Probe::SafeCall => probe_safe_call(s, ctx),
                Probe::Many { count, batch } => probe_many(s, ctx, *count, *batch),
            };
            ctx.checks.clear();
            r
        }
    }
}

fn handshake(s: &mut ServerProcess, ctx: &mut Ctx, i: &Initialize, checks: &[&str]) -> Result<(), StepFailure> {
    let id = i.id;
    s.send(&i.frame, None, &format!("handshake id={id}"));
    let answer = s.answer(id, Instant::now() + i.within).ok_or_else(|| {
        fail(checks, format!("no answer to the initialize_request (id {id}) within {} ms", i.within.as_millis()))
    })?;
    match answer.payload {
        Some(Payload::InitializeResponse(r)) => {
            ctx.init = Some(r);
            Ok(())
        }
        _ => Err(fail(checks, format!("initialize_request (id {id}) answered by {}", describe(&answer)))),
    }
}

fn expect(s: &mut ServerProcess, ctx: &mut Ctx, e: &ExpectAnswer, checks: &[&str]) -> Result<(), StepFailure> {
    let m = s.answer(e.id, Instant::now() + e.within).ok_or_else(|| {
        let why =
            if s.stdout_closed { "stdout closed".to_owned() } else { format!("{} ms passed", e.within.as_millis()) };
        fail(checks, format!("no answer with id {} ({why})", e.id))
    })?;
    if !m.arm().is_some_and(|a| e.arms.contains(&a)) {
        let want: Vec<&str> = e.arms.iter().map(|a| a.name()).collect();
        return Err(fail(checks, format!("id {} answered by {}, expected {}", e.id, describe(&m), want.join(" or "))));
    }
    if let Some(p) = &e.message {
        let view = lang::view::message(&m);
        match_value(p, Some(&view), &mut ctx.vars)
            .map_err(|mismatch| fail(checks, format!("id {}: {mismatch}", e.id)))?;
    }
    Ok(())
}

fn expect_error(s: &mut ServerProcess, ctx: &mut Ctx, e: &ExpectError, checks: &[&str]) -> Result<(), StepFailure> {
    let m = s.answer(e.id, Instant::now() + e.within).ok_or_else(|| {
        let why = if s.stdout_closed { "stdout closed" } else { "nothing came" };
        fail(checks, format!("no error answer with id {} ({why})", e.id))
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
            return Err(fail(checks, format!("id {} answered by {}, expected an error_response", e.id, describe(&m))));
        }
    };
    let accepted = e.codes.is_empty() || e.codes.contains(&code) || e.should_codes.contains(&code);
    if !accepted {
        return Err(fail(
            checks,
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
            format!("id {}: a pre-execution failure sent as call_tool_response.error, not error_response", e.id),
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

fn expect_json(s: &mut ServerProcess, e: &ExpectJson, checks: &[&str]) -> Result<(), StepFailure> {
    let line =
        s.next_line(Instant::now() + e.within).ok_or_else(|| fail(checks, "no JSON-RPC line arrived".to_owned()))?;
    let v: Value =
        serde_json::from_str(&line).map_err(|err| fail(checks, format!("the line is not JSON ({err}): {line}")))?;
    if v.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(fail(checks, format!("no \"jsonrpc\":\"2.0\" in {line}")));
    }
    if v.get("id") != Some(&e.id) && !(e.id.is_null() && v.get("id").is_none()) {
        return Err(fail(checks, format!("expected id {}, got {line}", e.id)));
    }
    let has_result = v.get("result").is_some_and(Value::is_object);
    let error_code = v.pointer("/error/code").and_then(Value::as_i64);
    if e.result && !has_result {
        return Err(fail(checks, format!("expected a result object: {line}")));
    }
    if let Some(c) = e.error_code
        && error_code != Some(c)
    {
        return Err(fail(checks, format!("expected error code {c}: {line}")));
    }
    if e.any && !has_result && error_code.is_none() {
        return Err(fail(checks, format!("neither a result nor an error: {line}")));
    }
    Ok(())
}

fn expect_exit(s: &mut ServerProcess, ctx: &mut Ctx, x: &ExpectExit, checks: &[&str]) -> Result<(), StepFailure> {
    if x.unless.as_ref().is_some_and(|f| ctx.features.contains(f))
        || (x.unless.as_deref() == Some("2gib") && ctx.target.accepts_2gib)
    {
        return Ok(());
    }
    let status = s
        .wait_exit(Instant::now() + x.within)
        .ok_or_else(|| fail(checks, format!("the server was still running {} ms later", x.within.as_millis())))?;
    if !x.code.accepts(status.code()) {
        let want = match x.code {
            ExitCode::Exactly(c) => format!("status {c}"),
            ExitCode::NonZero => "a non-zero status".to_owned(),
            ExitCode::Any => "any status".to_owned(),
        };
        return Err(fail(checks, format!("the server exited with {status}, expected {want}")));
    }
    Ok(())
}

fn alive(s: &mut ServerProcess, ctx: &mut Ctx, st: &Step, within: Duration) -> Result<(), StepFailure> {
    let id = ctx.fresh_id();
    let req = McpMessage::with(id, Payload::ListToolsRequest(Default::default()));
    s.send(&req.to_frame(), None, &format!("alive? list_tools_request id={id}"));
    let checks = default_checks(st, &["PM-LIFECYCLE-08"]);
    let checks: Vec<&str> = checks.iter().map(String::as_str).collect();
    // Any answer shows the session alive (PM-LIFECYCLE-08); an unfitting arm is
    // PM-LIFECYCLE-04's business, checked on every frame.
    match s.answer(id, Instant::now() + within) {
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
