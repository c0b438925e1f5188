//! The host operations that need the tool process: tools/call (§6) with its middleware chain
//! (§13), progress routes (§9) and cancellation (§8); resources/read, prompts/get and
//! completion/complete (§14–16). Each gets exactly one [`Event::Answer`], unless the host
//! cancels it.

use prost::Message as _;
use serde_json::{Map, Value, json};

use super::mrtr::{ModernCall, ModernCaps, Mrtr};
use super::{
    Core, Envelope, EnvelopeExt, Event, HostError, Instant, ListKind, Msg, NoReply, OpId, Reply, SessionId, Status,
    Waiting, describe, pb, shapes,
};
use crate::envelopes as env;
use crate::fault::{self, Fault};
use crate::frame::MAX_FRAME;

/// A progress route: the session whose call sent the token, the host's token (a modern call's
/// attached request may have none, BR-PROGRESS-06), the operation, the last value passed on
/// (BR-PROGRESS-05: only increasing ones).
#[derive(Debug)]
pub(super) struct Route {
    session: SessionId,
    token: Option<Value>,
    op: OpId,
    last: Option<i64>,
}

#[derive(Debug)]
pub(super) struct Op {
    pub(super) session: SessionId,
    kind: Kind,
    /// The rid of our request in flight for it, if any.
    pub(super) rid: Option<String>,
}

#[derive(Debug)]
enum Kind {
    Call(Box<Call>),
    Read { uri: String },
    Prompt,
    Complete,
}

#[derive(Debug)]
struct Call {
    name: String,
    args_json: String,
    has_output_schema: bool,
    /// Middleware names by priority (stable: ties keep registration order).
    middleware: Vec<String>,
    stage: Stage,
    /// The host's progressToken, if the call has one.
    host_token: Option<Value>,
    /// Our token, while the call is at the tool process.
    token: Option<String>,
    result: pb::CallToolResponse,
    /// A modern call's rounds (spec §26.4); `None` for a legacy session's call.
    mrtr: Option<Box<Mrtr>>,
}

impl Op {
    /// A modern call's MRTR state.
    pub(super) fn mrtr_mut(&mut self) -> Option<&mut Mrtr> {
        match &mut self.kind {
            Kind::Call(c) => c.mrtr.as_deref_mut(),
            _ => None,
        }
    }

    pub(super) fn mrtr(&self) -> Option<&Mrtr> {
        match &self.kind {
            Kind::Call(c) => c.mrtr.as_deref(),
            _ => None,
        }
    }

    /// Whether a call is at the tool process.
    fn at_tool(&self) -> bool {
        matches!(&self.kind, Kind::Call(c) if c.stage == Stage::Tool)
    }

    /// A call held before the tool process (only `br.concur.calls-serialized` holds one).
    fn held(&self) -> bool {
        matches!(&self.kind, Kind::Call(c) if self.rid.is_none() && matches!(c.stage, Stage::Before(i) if i >= c.middleware.len()))
    }

    /// Whether a call has its tool's result (it waits in the "after" stages, or for a retry).
    pub(super) fn has_result(&self) -> bool {
        matches!(&self.kind, Kind::Call(c) if matches!(c.stage, Stage::After(_)))
    }
}

/// Where a call stands. "After" middleware run in reverse order: `After(i)` is the `i`-th from
/// the end of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Before(usize),
    Tool,
    After(usize),
}

impl Call {
    /// The middleware of a Before or After stage.
    fn middleware_at(&self) -> &str {
        match self.stage {
            Stage::Before(i) => &self.middleware[i],
            Stage::After(i) if fault::on(Fault::BrMiddlewareAfterAscending) => &self.middleware[i],
            Stage::After(i) => &self.middleware[self.middleware.len() - 1 - i],
            Stage::Tool => "",
        }
    }
}

fn soft_error(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

impl Core {
    fn served(&self) -> Result<u64, HostError> {
        match (&self.status, &self.conn) {
            (Status::Ready, Some(c)) => Ok(c.generation),
            (Status::Down(r), _) => Err(HostError::Internal(format!("no tool process is connected ({r})"))),
            _ => Err(HostError::Internal("no tool process is connected (it is restarting)".into())),
        }
    }

    fn new_op(&mut self, session: SessionId, kind: Kind) -> OpId {
        let id = OpId(self.ops_issued);
        self.ops_issued += 1;
        self.ops.insert(id, Op { session, kind, rid: None });
        id
    }

    /// Forwards one tools/call (§6). `progress` is the host's progressToken. An error known at
    /// once is returned; otherwise the answer comes as [`Event::Answer`].
    pub fn start_call(
        &mut self,
        now: Instant,
        session: SessionId,
        name: &str,
        arguments: Option<Value>,
        progress: Option<Value>,
    ) -> Result<OpId, HostError> {
        self.begin_call(now, session, name, arguments, progress, None)
    }

    /// Forwards one modern tools/call (spec §26.3), or takes a retry of a parked one (§26.4).
    /// Answered as [`Core::start_call`]'s, or with an InputRequiredResult.
    pub fn start_modern(&mut self, now: Instant, session: SessionId, call: ModernCall) -> Result<OpId, HostError> {
        match call.retry.clone() {
            None => {
                let (name, caps) = (call.name.clone(), call.caps);
                self.begin_call(now, session, &name, call.arguments, call.progress, Some(caps))
            }
            Some((state, responses)) => {
                let args = call_arguments(call.arguments.clone())?;
                let r = self.retry(now, session, call, &args, &state, &responses);
                self.prune_handles();
                r
            }
        }
    }

    fn begin_call(
        &mut self,
        now: Instant,
        session: SessionId,
        name: &str,
        arguments: Option<Value>,
        progress: Option<Value>,
        modern: Option<ModernCaps>,
    ) -> Result<OpId, HostError> {
        let args = call_arguments(arguments)?;
        if fault::on(Fault::BrSecurityNulNamePanics) {
            let _ = std::ffi::CString::new(name).expect("a tool name holds no NUL");
        }
        if fault::on(Fault::BrLifecycleDownUnanswered) && self.served().is_err() {
            // Never answered: the fault.
            let op = OpId(self.ops_issued);
            self.ops_issued += 1;
            return Ok(op);
        }
        let generation = self.served()?;
        let def = if modern.is_some() { self.tools.get_active_modern(name) } else { self.tools.get_active(name) };
        // The reference bridge forwards arguments unchecked (BR-CALL-05 lets it); the fault is a
        // bridge that checks them and answers a violation with a JSON-RPC error.
        if fault::on(Fault::BrCallSchemaErrorAsJsonrpc)
            && let Some(d) = def
            && let Ok(schema) = serde_json::from_str::<Value>(&d.input_schema_json)
            && let Some(why) = schema_violation(&schema, &args)
        {
            return Err(HostError::InvalidParams(format!("arguments do not conform to the inputSchema: {why}")));
        }
        let has_output_schema = match def {
            Some(d) => !d.output_schema_json.is_empty(),
            None if fault::on(Fault::BrCallUnknownToolAsResult) => {
                let op = OpId(self.ops_issued);
                self.ops_issued += 1;
                let result = Ok(soft_error(format!("unknown tool: {name}")));
                self.events.push_back(Event::Answer { op, session, result });
                return Ok(op);
            }
            None => return Err(HostError::InvalidParams(format!("unknown tool: {name}"))),
        };
        let mut middleware = self.conn.as_ref().map(|c| c.middleware.clone()).unwrap_or_default();
        if middleware.is_empty() && fault::on(Fault::BrMiddlewareAuditWithoutRegistration) {
            middleware.push((String::new(), 0));
        }
        middleware.sort_by_key(|(_, p)| *p);
        if fault::on(Fault::BrMiddlewareBeforeDescending) {
            middleware.sort_by_key(|(_, p)| std::cmp::Reverse(*p));
        }
        let mrtr = modern.map(|caps| self.new_mrtr(generation, name, &args, caps));
        let call = Call {
            name: name.to_owned(),
            args_json: args.to_string(),
            has_output_schema,
            middleware: middleware.into_iter().map(|(n, _)| n).collect(),
            stage: Stage::Before(0),
            host_token: progress,
            token: None,
            result: pb::CallToolResponse::default(),
            mrtr,
        };
        let op = self.new_op(session, Kind::Call(Box::new(call)));
        self.register_mrtr(op);
        if fault::on(Fault::BrMcpUnansweredAfterRestart) && generation > 1 {
            return Ok(op); // never goes on: the fault
        }
        self.advance(now, op);
        Ok(op)
    }

    /// resources/read (§14, BR-RESOURCE-03).
    pub fn start_read(&mut self, now: Instant, session: SessionId, uri: &str) -> Result<OpId, HostError> {
        self.served()?;
        let op = self.new_op(session, Kind::Read { uri: uri.to_owned() });
        let pathless = uri.split_once("://").is_some_and(|(_, rest)| !rest.contains('/'));
        if fault::on(Fault::BrResourceUriNormalized) && pathless {
            self.send_for(now, op, env::read_resource(&format!("{uri}/")));
            return Ok(op);
        }
        self.send_for(now, op, env::read_resource(uri));
        if fault::on(Fault::BrLifecycleReadDefaultTimeout)
            && let Some(rid) = self.ops.get(&op).and_then(|o| o.rid.clone())
            && let Some(p) = self.pending.get_mut(&rid)
        {
            p.deadline = now + crate::spec::DEFAULT_CALL_TIMEOUT;
        }
        Ok(op)
    }

    /// prompts/get (§15): a known prompt and its required arguments are checked here
    /// (BR-PROMPT-02/03).
    pub fn start_prompt(
        &mut self,
        now: Instant,
        session: SessionId,
        name: &str,
        arguments: Option<Value>,
    ) -> Result<OpId, HostError> {
        let unknown = pb::PromptDefinition::default();
        let def = match self.lists.prompts.iter().find(|p| p.name == name) {
            Some(def) => def,
            None if fault::on(Fault::BrPromptUnknownForwarded) => &unknown,
            None => return Err(HostError::InvalidParams(format!("unknown prompt: {name}"))),
        };
        let absent = matches!(arguments, None | Some(Value::Null));
        let args = match arguments {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(HostError::InvalidParams("arguments must be an object".into())),
        };
        if let Some(a) = def.arguments.iter().find(|a| a.required && !args.contains_key(&a.name))
            && !fault::on(Fault::BrPromptMissingArgForwarded)
        {
            return Err(HostError::InvalidParams(format!("missing required argument: {}", a.name)));
        }
        self.served()?;
        let op = self.new_op(session, Kind::Prompt);
        let args_json =
            if absent && fault::on(Fault::BrPromptArgsNull) { "null".into() } else { Value::Object(args).to_string() };
        self.send_for(now, op, env::get_prompt(name, &args_json));
        Ok(op)
    }

    /// completion/complete (§16): `reference` is the MCP `ref` object.
    pub fn start_complete(
        &mut self,
        now: Instant,
        session: SessionId,
        reference: &Value,
        arg_name: &str,
        arg_value: &str,
    ) -> Result<OpId, HostError> {
        let ref_type = reference.get("type").and_then(Value::as_str).unwrap_or_default();
        let ref_name = match ref_type {
            "ref/prompt" => reference.get("name"),
            "ref/resource" if fault::on(Fault::BrCompleteResourceByName) => reference.get("name"),
            "ref/resource" => reference.get("uri"),
            _ if fault::on(Fault::BrCompleteOtherRefForwarded) => reference.get("name"),
            other => return Err(HostError::InvalidParams(format!("unknown reference type {other:?}"))),
        }
        .and_then(Value::as_str)
        .unwrap_or_default();
        self.served()?;
        let envelope = env::completion(ref_type, ref_name, arg_name, arg_value);
        let op = self.new_op(session, Kind::Complete);
        self.send_for(now, op, envelope);
        Ok(op)
    }

    fn send_for(&mut self, now: Instant, op: OpId, envelope: Envelope) {
        let rid = self.request(now, envelope, Waiting::Op(op));
        if let Some(o) = self.ops.get_mut(&op) {
            o.rid = Some(rid);
        }
    }

    /// The host cancelled `op` (or its session ended, BR-CANCEL-06): a call at the tool process
    /// is cancelled there (BR-CANCEL-01/03), and the operation gets no answer (BR-CANCEL-02).
    pub fn cancel(&mut self, op: OpId) {
        if fault::on(Fault::BrCancelLateResultDelivered) {
            // Cancelled at the tool process, and still waited for.
            if let Some(rid) = self.ops.get(&op).filter(|o| o.at_tool()).and_then(|o| o.rid.clone()) {
                self.transmit.push_back(env::cancel(&rid));
            }
            return;
        }
        // A modern call's input requests are answered, its states die (BR-CANCEL-07).
        self.end_mrtr(op);
        let Some(o) = self.ops.remove(&op) else {
            if fault::on(Fault::BrCancelUnknownForwarded) {
                self.transmit.push_back(env::cancel(""));
            }
            return;
        };
        if let Some(rid) = &o.rid {
            self.pending.remove(rid);
            if let Some(c) = self.conn.as_mut() {
                c.streams.abort(rid, "the call ended");
            }
        }
        if let Kind::Call(call) = o.kind
            && call.stage == Stage::Tool
        {
            self.uncount(o.session, call.mrtr.is_none(), call.token.as_deref());
            if let Some(rid) = o.rid.filter(|_| !(call.mrtr.is_some() && fault::on(Fault::BrCancelModernNotCancelled)))
            {
                let cancel = env::cancel(&rid);
                let cancel = if fault::on(Fault::BrCancelEnvelopeRid) { cancel.with_rid(rid) } else { cancel };
                self.transmit.push_back(cancel);
            }
        }
    }

    /// The call took longer than the call timeout at the tool process (BR-CALL-15, BR-CANCEL-05):
    /// cancelled there and answered with an error; any other request of an operation fails.
    pub(super) fn op_timed_out(&mut self, now: Instant, op: OpId, rid: &str) {
        let at_tool = matches!(self.ops.get(&op), Some(Op { kind: Kind::Call(c), .. }) if c.stage == Stage::Tool);
        if let Some(c) = self.conn.as_mut() {
            c.streams.abort(rid, "the request timed out");
        }
        if !at_tool {
            return self.resolve(now, rid, Err(NoReply::Timeout(self.cfg.call_timeout)));
        }
        self.pending.remove(rid);
        self.end_mrtr(op);
        let Some(mut o) = self.ops.remove(&op) else { return };
        if let Kind::Call(call) = &mut o.kind {
            self.uncount(o.session, call.mrtr.is_none(), call.token.take().as_deref());
        }
        if !fault::on(Fault::BrCancelNotOnTimeout) {
            self.transmit.push_back(env::cancel(rid));
        }
        let e = format!("the tool did not answer within {:?}", self.cfg.call_timeout);
        self.events.push_back(Event::Answer { op, session: o.session, result: Err(HostError::Internal(e)) });
    }

    /// A call left the tool process: a legacy session's count of calls (BR-SAMPLING-09) and the
    /// progress route.
    fn uncount(&mut self, session: SessionId, legacy: bool, token: Option<&str>) {
        if legacy && let Some(n) = self.calling.get_mut(&session) {
            *n -= 1;
            if *n == 0 {
                self.calling.remove(&session);
            }
        }
        if let Some(t) = token {
            self.progress.remove(t);
        }
    }

    /// The next step of a call: the next "before" middleware, the call itself, the next
    /// "after" middleware, or the answer.
    pub(super) fn advance(&mut self, now: Instant, op: OpId) {
        let Some(mut o) = self.ops.remove(&op) else { return };
        let session = o.session;
        let Kind::Call(call) = &mut o.kind else { return };
        let envelope: Envelope = match call.stage {
            Stage::Before(i) | Stage::After(i) if i < call.middleware.len() => {
                let after = matches!(call.stage, Stage::After(_));
                pb::MiddlewareInterceptRequest {
                    middleware_name: call.middleware_at().to_owned(),
                    phase: if after { "after" } else { "before" }.into(),
                    tool_name: call.name.clone(),
                    arguments_json: call.args_json.clone(),
                    result_json: if after { call.result.result_json.clone() } else { String::new() },
                    is_error: after && call.result.is_error,
                }
                .into()
            }
            Stage::Before(_) if fault::on(Fault::BrConcurCallsSerialized) && self.ops.values().any(Op::at_tool) => {
                self.ops.insert(op, o); // held until the call at the tool process has its result
                return;
            }
            Stage::Before(_) => {
                let rid = format!("req-{}", self.rids); // the rid `request` gives it next
                let token = call.host_token.as_ref().map(|_| format!("pt-{rid}"));
                let token = token.or_else(|| fault::on(Fault::BrProgressTokenWithoutMeta).then(|| format!("pt-{rid}")));
                let request = pb::CallToolRequest {
                    name: call.name.clone(),
                    arguments_json: call.args_json.clone(),
                    progress_token: token.clone().unwrap_or_default(),
                };
                let envelope = Envelope::from(request).with_rid(rid);
                if envelope.encoded_len() > MAX_FRAME as usize && !fault::on(Fault::BrFrameOversizeArgsSent) {
                    // BR-FRAME-04
                    let e = HostError::InvalidParams("the arguments do not fit into one frame".into());
                    self.events.push_back(Event::Answer { op, session, result: Err(e) });
                    return;
                }
                call.stage = Stage::Tool;
                call.token = token.clone();
                if let (Some(t), Some(host)) = (token, call.host_token.clone()) {
                    self.progress.insert(t, Route { session, token: Some(host), op, last: None });
                }
                if call.mrtr.is_none() {
                    *self.calling.entry(session).or_default() += 1;
                }
                envelope
            }
            Stage::After(_) => {
                let result = shapes::call_result(&call.result, call.has_output_schema, call.mrtr.is_some());
                self.events.push_back(Event::Answer { op, session, result: Ok(result) });
                self.prune_handles();
                return;
            }
            Stage::Tool => unreachable!("a call at the tool process advances by its reply"),
        };
        self.ops.insert(op, o);
        let twice = fault::on(Fault::BrCallSentTwice) && matches!(envelope.msg, Some(Msg::CallTool(_)));
        self.send_for(now, op, envelope);
        if twice && let Some(dup) = self.transmit.back().cloned() {
            self.transmit.push_back(dup);
        }
    }

    /// The tool process answered a request of `op`'s.
    pub(super) fn op_reply(&mut self, now: Instant, op: OpId, reply: Reply) {
        let Some(mut o) = self.ops.remove(&op) else { return };
        o.rid = None;
        let session = o.session;
        let done = |result| Event::Answer { op, session, result };
        let call = match &mut o.kind {
            Kind::Read { uri } => {
                let r = match reply {
                    Ok(Msg::ReadResourceResponse(r)) => match shapes::mcp_contents(uri, &r) {
                        Some(c) => Ok(json!({"contents": c})),
                        None => Err(HostError::ResourceNotFound(format!("resource not found: {uri}"))),
                    },
                    other => Err(HostError::Internal(format!("resources/read: {}", describe(&other)))),
                };
                return self.events.push_back(done(r));
            }
            Kind::Prompt => {
                let r = match reply {
                    Ok(Msg::GetPromptResponse(r)) => {
                        shapes::mcp_prompt_result(&r).map_err(|e| HostError::Internal(e.to_string()))
                    }
                    other => Err(HostError::Internal(format!("prompts/get: {}", describe(&other)))),
                };
                return self.events.push_back(done(r));
            }
            Kind::Complete => {
                let r = match reply {
                    Ok(Msg::CompletionResponse(r)) => Ok(shapes::mcp_completion(&r)),
                    other => Err(HostError::Internal(format!("completion/complete: {}", describe(&other)))),
                };
                return self.events.push_back(done(r));
            }
            Kind::Call(call) => call,
        };
        let failed = match (call.stage, reply) {
            (Stage::Before(_), Ok(Msg::MiddlewareInterceptResponse(r)))
                if r.reject && !fault::on(Fault::BrMiddlewareRejectIgnored) =>
            {
                let text = format!("rejected by middleware {}: {}", call.middleware_at(), r.reject_reason);
                return self.events.push_back(done(Ok(soft_error(text))));
            }
            (Stage::Before(i), Ok(Msg::MiddlewareInterceptResponse(r))) => {
                if !r.arguments_json.is_empty() && !fault::on(Fault::BrMiddlewareArgsIgnored) {
                    call.args_json = r.arguments_json;
                }
                call.stage = Stage::Before(i + 1);
                None
            }
            (Stage::After(i), Ok(Msg::MiddlewareInterceptResponse(r))) => {
                if !r.result_json.is_empty() {
                    call.result.result_json = r.result_json;
                }
                call.stage = Stage::After(i + 1);
                None
            }
            (Stage::Before(i), _) if fault::on(Fault::BrMiddlewareBadReplySkipped) => {
                call.stage = Stage::Before(i + 1);
                None
            }
            (Stage::After(i), _) if fault::on(Fault::BrMiddlewareBadReplySkipped) => {
                call.stage = Stage::After(i + 1);
                None
            }
            (Stage::Before(_) | Stage::After(_), other) => {
                Some(format!("middleware {}: {}", call.middleware_at(), describe(&other)))
            }
            (Stage::Tool, reply) => {
                // No progress after the result (BR-PROGRESS-03).
                let token = call.token.take().filter(|_| !fault::on(Fault::BrProgressAfterResult));
                let parked = call.mrtr.as_ref().is_some_and(|m| m.is_parked());
                self.uncount(session, call.mrtr.is_none(), token.as_deref());
                match reply {
                    // A parked call's result waits for the next retry; its input requests are
                    // answered now (BR-STATELESS-27).
                    Ok(Msg::CallResult(r)) if parked => {
                        if (!r.enable_tools.is_empty() || !r.disable_tools.is_empty())
                            && self.tools.apply_result_lists(&r.enable_tools, &r.disable_tools)
                        {
                            self.events.push_back(Event::ListChanged(ListKind::Tools));
                        }
                        call.result = r;
                        call.stage = Stage::After(0);
                        self.ops.insert(op, o);
                        if fault::on(Fault::BrStatelessParkedInputsKept) {
                            return;
                        }
                        self.refuse_inputs(op, "the tool returned before the MCP client answered");
                        return;
                    }
                    // A parked call that fails is forgotten: its next retry is refused.
                    _ if parked => {
                        self.ops.insert(op, o);
                        self.end_mrtr(op);
                        self.ops.remove(&op);
                        return self.prune_handles();
                    }
                    Ok(Msg::CallResult(r)) if fault::on(Fault::BrCallDisableThenEnable) => {
                        let disabled = self.tools.apply_result_lists(&[], &r.disable_tools);
                        if self.tools.apply_result_lists(&r.enable_tools, &[]) || disabled {
                            self.events.push_back(Event::ListChanged(ListKind::Tools));
                        }
                        call.result = r;
                        call.stage = Stage::After(0);
                        None
                    }
                    Ok(Msg::CallResult(r)) => {
                        // BR-CALL-14: the lists take effect before the response.
                        if (!r.enable_tools.is_empty() || !r.disable_tools.is_empty())
                            && self.tools.apply_result_lists(&r.enable_tools, &r.disable_tools)
                        {
                            self.events.push_back(Event::ListChanged(ListKind::Tools));
                        }
                        call.result = r;
                        call.stage = Stage::After(0);
                        None
                    }
                    other => Some(format!("tools/call {}: {}", call.name, describe(&other))),
                }
            }
        };
        match failed {
            Some(e) => {
                self.events.push_back(done(Err(HostError::Internal(e))));
                self.ops.insert(op, o);
                self.end_mrtr(op);
                self.ops.remove(&op);
                self.prune_handles();
            }
            None => {
                self.ops.insert(op, o);
                self.advance(now, op);
            }
        }
        if fault::on(Fault::BrConcurCallsSerialized) && !self.ops.values().any(Op::at_tool) {
            let next = self.ops.iter().filter(|(_, o)| o.held()).map(|(id, _)| *id).min();
            if let Some(next) = next {
                self.advance(now, next);
            }
        }
    }

    /// A ProgressNotification: to the session whose call sent the token, increasing values
    /// only (BR-PROGRESS-02/05); anything else is dropped.
    pub(super) fn route_progress(&mut self, p: pb::ProgressNotification) {
        let Some(route) = self.progress.get(&p.progress_token) else { return };
        // BR-PROGRESS-06: a parked call has nowhere to send progress; an attached request
        // without a token gets none.
        let parked = self.ops.get(&route.op).and_then(Op::mrtr).is_some_and(Mrtr::is_parked);
        let Some(route) = self.progress.get_mut(&p.progress_token) else { return };
        if route.last.is_some_and(|l| p.progress <= l) && !fault::on(Fault::BrProgressStaleForwarded) {
            return;
        }
        route.last = Some(p.progress);
        let Some(token) = route.token.clone().filter(|_| !parked || fault::on(Fault::BrProgressParkedForwarded)) else {
            return;
        };
        let token = match token {
            Value::Number(n) if fault::on(Fault::BrProgressTokenStringified) => Value::String(n.to_string()),
            t => t,
        };
        self.events.push_back(Event::Progress {
            session: route.session,
            token,
            progress: p.progress,
            total: (p.total != 0).then_some(p.total),
            message: (!p.message.is_empty()).then_some(p.message),
        });
    }

    /// An accepted retry takes over the parked call `old` (BR-STATELESS-23): a new operation
    /// of `session`, the call's wait for the tool process running again for a whole
    /// `CALL_TIMEOUT` (BR-STATELESS-28), progress for the retry's token (BR-PROGRESS-06).
    pub(super) fn rekey(&mut self, now: Instant, old: OpId, session: SessionId, progress: Option<Value>) -> OpId {
        let Some(mut o) = self.ops.remove(&old) else { return old };
        let new = OpId(self.ops_issued);
        self.ops_issued += 1;
        o.session = session;
        if let Some(rid) = &o.rid
            && let Some(p) = self.pending.get_mut(rid)
        {
            p.what = Waiting::Op(new);
            p.parked = false;
            if !fault::on(Fault::BrStatelessParkedCounts) {
                p.deadline = now + self.cfg.call_timeout;
            }
        }
        if let Kind::Call(c) = &o.kind
            && let Some(t) = &c.token
            && let Some(route) = self.progress.get_mut(t)
        {
            route.session = session;
            route.token = progress;
            route.op = new;
        }
        self.ops.insert(new, o);
        for op in self.handles.values_mut() {
            if *op == old {
                *op = new;
            }
        }
        new
    }

    /// Forgets the handles of modern calls that have ended.
    pub(super) fn prune_handles(&mut self) {
        if !self.handles.is_empty() {
            let ops = &self.ops;
            self.handles.retain(|_, op| ops.contains_key(op));
        }
    }

    /// Ends the modern call `op` without an answer (its host is not there): cancelled at the tool
    /// process when `cancel` and it is still there, forgotten.
    pub(super) fn forget_call(&mut self, op: OpId, cancel: bool) {
        self.end_mrtr(op);
        let Some(o) = self.ops.remove(&op) else { return };
        if let Kind::Call(call) = &o.kind
            && call.stage == Stage::Tool
        {
            self.uncount(o.session, false, call.token.as_deref());
            if let Some(rid) = &o.rid {
                self.pending.remove(rid);
                if let Some(c) = self.conn.as_mut() {
                    c.streams.abort(rid, "the call ended");
                }
                if cancel {
                    self.transmit.push_back(env::cancel(rid));
                }
            }
        }
        self.prune_handles();
    }
}

/// A call's arguments: a JSON object (absent or null: empty).
/// The first way `args` breaks `schema`'s `required` members or the JSON type of a property
/// (`type` of one name); only the fault [`Fault::BrCallSchemaErrorAsJsonrpc`] checks arguments.
fn schema_violation(schema: &Value, args: &Value) -> Option<String> {
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if args.get(name).is_none() {
            return Some(format!("`{name}` is required"));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object)?;
    for (name, p) in props {
        let (Some(v), Some(want)) = (args.get(name), p.get("type").and_then(Value::as_str)) else { continue };
        let ok = match want {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            "null" => v.is_null(),
            _ => true,
        };
        if !ok {
            return Some(format!("`{name}` must be of type {want}"));
        }
    }
    None
}

fn call_arguments(arguments: Option<Value>) -> Result<Value, HostError> {
    match arguments {
        None | Some(Value::Null) if fault::on(Fault::BrCallAbsentArgsNull) => Ok(Value::Null),
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) if fault::on(Fault::BrCallNonObjectArgsForwarded) => Ok(Value::Object(Map::new())),
        Some(_) => Err(HostError::InvalidParams("arguments must be a JSON object".into())),
    }
}
