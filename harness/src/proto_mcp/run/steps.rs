//! One step of a proto-mcp scenario, by step group.

use super::ctx::*;
use super::probes::*;
use super::*;
use crate::proto_mcp::scenario::{Expect, ExpectError, ExpectExit, ExpectJson};

pub(super) fn default_checks(step: &Step, fallback: &[&str]) -> Vec<String> {
    if step.checks.is_empty() {
        fallback.iter().map(|s| (*s).to_owned()).collect()
    } else {
        step.checks.iter().map(|r| r.id.to_owned()).collect()
    }
}

/// Runs one step.
pub(super) fn step(s: &mut Session, ctx: &mut Ctx, st: &Step, scenario: &Scenario) -> Result<(), StepFailure> {
    let cited: Vec<&str> = scenario.requirements.iter().map(|r| r.id).collect();
    let checks = default_checks(st, &cited);
    let checks: Vec<&str> = checks.iter().map(String::as_str).collect();
    match &st.action {
        Action::Handshake(v) => handshake(s, ctx, v, &checks),
        Action::Send(v) => {
            let v = substitute(v, &ctx.vars).map_err(|e| fail(&[], e))?;
            let out = outgoing(&v).map_err(|e| fail(&[], e))?;
            s.send(&out.bytes, out.pace, &out.label);
            Ok(())
        }
        Action::Expect(e) => expect(s, ctx, e, &checks),
        Action::ExpectError(e) => expect_error(s, ctx, e, &checks),
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
        Action::ExpectJson(e) => expect_json(s, e, &checks),
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
        Action::ExpectExit(x) => expect_exit(s, ctx, x, &checks),
        Action::Alive => alive(s, ctx, st),
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

fn handshake(s: &mut Session, ctx: &mut Ctx, v: &Value, checks: &[&str]) -> Result<(), StepFailure> {
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
            init["capabilities"] = json!({"supports_bsr_refs": bsr.unwrap_or(json!(true)), "encodings": ["protobuf"]});
        }
        message_frame(&json!({"id": id, "initialize_request": init})).map_err(|e| fail(&[], e))?.0
    };
    s.send(&msg, None, &format!("handshake id={id}"));
    let answer = s.answer(id, within(None)).ok_or_else(|| {
        fail(checks, format!("no answer to the initialize_request (id {id}) within {} ms", T_REPLY.as_millis()))
    })?;
    match answer.payload {
        Some(Payload::InitializeResponse(r)) => {
            ctx.captures.insert("initialize".into(), McpMessage::with(id, Payload::InitializeResponse(r.clone())));
            ctx.init = Some(r);
            Ok(())
        }
        _ => Err(fail(checks, format!("initialize_request (id {id}) answered by {}", describe(&answer)))),
    }
}

fn expect(s: &mut Session, ctx: &mut Ctx, e: &Expect, checks: &[&str]) -> Result<(), StepFailure> {
    let arms: Vec<Arm> = e.arm.items().iter().filter_map(|a| Arm::from_name(a)).collect();
    let m = s.answer(e.id, within(e.within_ms)).ok_or_else(|| {
        let why = if s.stdout_closed {
            "stdout closed".to_owned()
        } else {
            format!("{} ms passed", e.within_ms.unwrap_or(T_REPLY.as_millis() as u64))
        };
        fail(checks, format!("no answer with id {} ({why})", e.id))
    })?;
    if !m.arm().is_some_and(|a| arms.contains(&a)) {
        let want: Vec<&str> = arms.iter().map(|a| a.name()).collect();
        return Err(fail(checks, format!("id {} answered by {}, expected {}", e.id, describe(&m), want.join(" or "))));
    }
    if e.empty {
        let n = match &m.payload {
            Some(Payload::ListToolsResponse(l)) => l.tools.len(),
            Some(Payload::ListResourcesResponse(l)) => l.resources.len(),
            _ => 0,
        };
        if n > 0 {
            return Err(fail(checks, format!("id {}: expected an empty listing, got {n} items", e.id)));
        }
    }
    if let Some(c) = &e.capture {
        ctx.captures.insert(c.clone(), m);
    }
    Ok(())
}

fn expect_error(s: &mut Session, ctx: &mut Ctx, e: &ExpectError, checks: &[&str]) -> Result<(), StepFailure> {
    let m = s.answer(e.id, within(e.within_ms)).ok_or_else(|| {
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

fn expect_json(s: &mut Session, e: &ExpectJson, checks: &[&str]) -> Result<(), StepFailure> {
    let line = s.next_line(within(e.within_ms)).ok_or_else(|| fail(checks, "no JSON-RPC line arrived".to_owned()))?;
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

fn expect_exit(s: &mut Session, ctx: &mut Ctx, x: &ExpectExit, checks: &[&str]) -> Result<(), StepFailure> {
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
        None => Err(fail(checks, format!("the server was still running {} ms later", x.within_ms))),
    }
}

fn alive(s: &mut Session, ctx: &mut Ctx, st: &Step) -> Result<(), StepFailure> {
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
