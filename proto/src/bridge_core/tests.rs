//! The core driven in-process: a simulated tool process and two host sessions around it, with
//! every message on both sides fed to the bridge model ([`crate::bridge_model`]), the judge
//! `explore --bridge` uses on real bridges. Hand-written sequences check single behaviours;
//! proptest sequences of operations check that the model finds nothing, whatever the order.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::bridge_model::BridgeModel;
use crate::envelopes as env;
use crate::fault::Fault;

const CALL_TIMEOUT_MS: u64 = 2000;
const TOOLS: [&str; 3] = ["echo", "shaped", "missing"];
const SESSIONS: [(SessionId, &str); 2] = [(1, "a"), (2, "b")];

/// A request the simulated tool process received and has not answered.
#[derive(Debug, Clone)]
struct Received {
    rid: String,
    token: String,
    progress: i64,
}

struct Sim {
    core: Core,
    model: BridgeModel,
    start: Instant,
    now_ms: u64,
    generation: u64,
    /// Calls at the simulated tool process, in arrival order.
    calls: Vec<Received>,
    /// Calls it answered (a tool process may still send progress for them: BR-PROGRESS-03
    /// says the bridge must not pass it on).
    answered: Vec<Received>,
    /// Middleware requests at the tool process (answered at once unless `hold_middleware`).
    sent: Vec<Envelope>,
    /// Host requests by op: session name and JSON-RPC id.
    ops: BTreeMap<OpId, (&'static str, u64)>,
    next_id: u64,
    /// Reverse requests a host was asked and has not answered: (session, rid, sampling).
    asked: Vec<(&'static str, String, bool)>,
    next_reverse: u64,
    middleware: Vec<(&'static str, i32)>,
    /// The hosts have connected (the shell gives notifications only to its sessions).
    hosts: bool,
}

fn name_of(session: SessionId) -> &'static str {
    SESSIONS.iter().find(|(id, _)| *id == session).map(|(_, n)| *n).expect("a known session")
}

impl Sim {
    /// A simulation of the core with `fault` switched on for this thread (or none).
    fn new(fault: Option<Fault>) -> Sim {
        crate::fault::test_only::set(fault);
        let cfg = Config {
            call_timeout: Duration::from_millis(CALL_TIMEOUT_MS),
            handshake_quiet: Duration::from_millis(500),
            ..Config::default()
        };
        let mut sim = Sim {
            core: Core::new(cfg),
            model: BridgeModel::new(),
            start: Instant::now(),
            now_ms: 0,
            generation: 0,
            calls: Vec::new(),
            answered: Vec::new(),
            sent: Vec::new(),
            ops: BTreeMap::new(),
            next_id: 1,
            asked: Vec::new(),
            next_reverse: 0,
            middleware: Vec::new(),
            hosts: false,
        };
        // As a bridge does: the tool process first, then the hosts.
        sim.connect();
        sim.hosts = true;
        for (id, name) in SESSIONS {
            sim.core.add_session(id, SessionCaps { sampling: true, roots: true, legacy: true });
            sim.model.host_sent(name, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        }
        sim
    }

    fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.now_ms)
    }

    /// The tool process sends `envelope`.
    fn tool_sends(&mut self, envelope: Envelope) {
        self.model.tool_sent_at(self.now_ms, &envelope);
        let now = self.now();
        self.core.handle_envelope(now, self.generation, envelope);
        self.pump();
    }

    /// Carries what the core produced to the tool process and the hosts (and the model); the
    /// tool process answers list pulls and discovery at once.
    fn pump(&mut self) {
        loop {
            let mut replies = Vec::new();
            while let Some(e) = self.core.poll_transmit() {
                self.model.tool_received(&e);
                let rid = e.request_id.clone();
                match &e.msg {
                    Some(Msg::ListTools(_)) => {
                        let mut shaped = env::tool("shaped", "d", "");
                        shaped.output_schema_json = r#"{"type":"object"}"#.into();
                        replies.push(env::tool_list(vec![env::tool("echo", "d", ""), shaped]).with_rid(rid));
                        for (name, priority) in self.middleware.clone() {
                            replies.push(env::register_middleware(name, priority));
                        }
                        replies.push(env::reload_response(true, ""));
                    }
                    Some(Msg::ListResourcesRequest(_)) => replies.push(pb::ResourceListResponse::default().into()),
                    Some(Msg::ListResourceTemplatesRequest(_)) => {
                        replies.push(pb::ResourceTemplateListResponse::default().into())
                    }
                    Some(Msg::ListPromptsRequest(_)) => replies.push(pb::PromptListResponse::default().into()),
                    Some(Msg::CallTool(c)) => {
                        self.calls.push(Received { rid, token: c.progress_token.clone(), progress: 0 })
                    }
                    Some(Msg::Cancel(_)) => {}
                    _ => self.sent.push(e.clone()),
                }
                if let Some(last) = replies.last_mut()
                    && last.request_id.is_empty()
                    && !matches!(last.msg, Some(Msg::ReloadResponse(_) | Msg::RegisterMiddleware(_)))
                {
                    last.request_id = e.request_id.clone();
                }
            }
            let events: Vec<Event> = std::iter::from_fn(|| self.core.poll_event()).collect();
            for ev in events {
                self.host_event(ev);
            }
            if replies.is_empty() {
                return;
            }
            for r in replies {
                self.model.tool_sent_at(self.now_ms, &r);
                let now = self.now();
                self.core.handle_envelope(now, self.generation, r);
            }
        }
    }

    fn host_event(&mut self, ev: Event) {
        match ev {
            Event::Answer { op, result, .. } => {
                let (session, id) = self.ops.remove(&op).expect("an answer to an operation the host started");
                let msg = match result {
                    Ok(v) => json!({"jsonrpc": "2.0", "id": id, "result": v}),
                    Err(e) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code().code(), "message": e.to_string()}})
                    }
                };
                self.model.host_received(session, self.now_ms, &msg);
            }
            Event::Progress { session, token, progress, total, message } => {
                let mut params = json!({"progressToken": token, "progress": progress});
                if let Some(t) = total {
                    params["total"] = json!(t);
                }
                if let Some(m) = message {
                    params["message"] = json!(m);
                }
                let msg = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params});
                self.model.host_received(name_of(session), self.now_ms, &msg);
            }
            Event::ListChanged(ListKind::Tools) if self.hosts => {
                for (_, name) in SESSIONS {
                    let msg = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                    self.model.host_received(name, self.now_ms, &msg);
                }
            }
            Event::Sample { session, rid, params } => {
                let msg = json!({"jsonrpc": "2.0", "id": format!("srv-{rid}"), "method": "sampling/createMessage", "params": params});
                self.model.host_received(name_of(session), self.now_ms, &msg);
                self.asked.push((name_of(session), rid, true));
            }
            Event::ListRoots { session, rid } => {
                let msg = json!({"jsonrpc": "2.0", "id": format!("srv-{rid}"), "method": "roots/list"});
                self.model.host_received(name_of(session), self.now_ms, &msg);
                self.asked.push((name_of(session), rid, false));
            }
            Event::StartFailed { reason, .. } => panic!("the simulated tool process failed to start: {reason}"),
            Event::ListChanged(_)
            | Event::Log { .. }
            | Event::ResourceUpdated(_)
            | Event::Served { .. }
            | Event::ReloadFailed { .. }
            | Event::Diag(_) => {}
        }
    }

    fn connect(&mut self) {
        let now = self.now();
        self.generation = self.core.handle_connected(now);
        self.calls.clear();
        self.answered.clear();
        self.sent.clear();
        self.pump();
        assert_eq!(self.core.status(), &Status::Ready, "served after the marker and the list pulls");
    }

    fn call(&mut self, session: usize, tool: &str, progress: bool) -> u64 {
        let (sid, name) = SESSIONS[session % SESSIONS.len()];
        let id = self.next_id;
        self.next_id += 1;
        let mut params = json!({"name": tool, "arguments": {}});
        if progress {
            params["_meta"] = json!({"progressToken": format!("tok-{id}")});
        }
        self.model.host_sent(name, &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
        let token = progress.then(|| json!(format!("tok-{id}")));
        let now = self.now();
        match self.core.start_call(now, sid, tool, Some(json!({})), token) {
            Ok(op) => {
                self.ops.insert(op, (name, id));
            }
            Err(e) => {
                let msg =
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code().code(), "message": e.to_string()}});
                self.model.host_received(name, self.now_ms, &msg);
            }
        }
        self.pump();
        id
    }

    fn cancel(&mut self, which: usize) {
        let Some((&op, &(session, id))) = self.ops.iter().nth(which % self.ops.len().max(1)) else { return };
        self.model.host_sent(
            session,
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
        );
        self.ops.remove(&op);
        self.core.cancel(op);
        self.pump();
    }

    fn reply(&mut self, which: usize, form: u8) {
        if self.calls.is_empty() {
            return;
        }
        let r = self.calls.remove(which % self.calls.len());
        self.answered.push(r.clone());
        let result = match form % 5 {
            0 => pb::CallToolResponse { result_json: r#"[{"type":"text","text":"ok"}]"#.into(), ..Default::default() },
            1 => pb::CallToolResponse { result_json: "\"failed\"".into(), is_error: true, ..Default::default() },
            2 => pb::CallToolResponse {
                result_json: "{\"a\":1}".into(),
                structured_content_json: "{\"a\":1}".into(),
                ..Default::default()
            },
            3 => pb::CallToolResponse {
                result_json: "[]".into(),
                disable_tools: vec!["echo".into()],
                enable_tools: vec!["shaped".into()],
                ..Default::default()
            },
            _ => {
                // A wrong-typed message under the call's rid (BR-CALL-16).
                return self.tool_sends(env::active_tools(["echo"]).with_rid(r.rid));
            }
        };
        self.tool_sends(Envelope::from(result).with_rid(r.rid));
    }

    fn progress(&mut self, which: usize, step: i64) {
        let n = self.calls.len() + self.answered.len();
        if n == 0 {
            return;
        }
        let i = which % n;
        let c = if i < self.calls.len() { &mut self.calls[i] } else { &mut self.answered[i - self.calls.len()] };
        c.progress += step;
        let p =
            pb::ProgressNotification { progress_token: c.token.clone(), progress: c.progress, ..Default::default() };
        self.tool_sends(p.into());
    }

    fn control(&mut self, kind: u8, tool: usize) {
        let names = vec![TOOLS[tool % 2].to_owned()];
        let envelope: Envelope = match kind % 4 {
            0 => pb::DisableToolsRequest { tool_names: names }.into(),
            1 => pb::EnableToolsRequest { tool_names: names }.into(),
            2 => pb::SetAllowedRequest { tool_names: names }.into(),
            _ => pb::SetBlockedRequest { tool_names: Vec::new() }.into(),
        };
        self.tool_sends(envelope.with_rid(format!("ctl-{}", self.next_reverse)));
        self.next_reverse += 1;
    }

    fn reverse(&mut self, sampling: bool) {
        let rid = format!("rev-{}", self.next_reverse);
        self.next_reverse += 1;
        let envelope: Envelope = if sampling {
            pb::SamplingRequest { messages_json: r#"[{"role":"user","content":"hi"}]"#.into(), ..Default::default() }
                .into()
        } else {
            pb::ListRootsRequest::default().into()
        };
        self.tool_sends(envelope.with_rid(rid));
    }

    fn host_answers(&mut self, which: usize) {
        if self.asked.is_empty() {
            return;
        }
        let (session, rid, sampling) = self.asked.remove(which % self.asked.len());
        let result = if sampling {
            json!({"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"})
        } else {
            json!({"roots": [{"uri": "file:///w", "name": "w"}]})
        };
        self.model.host_sent(session, &json!({"jsonrpc": "2.0", "id": format!("srv-{rid}"), "result": result}));
        if sampling {
            self.core.handle_sample_answer(&rid, Ok(result));
        } else {
            self.core.handle_roots_answer(&rid, Ok(result));
        }
        self.pump();
    }

    fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
        let now = self.now();
        if self.core.poll_timeout().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
        self.pump();
    }

    fn close_and_restart(&mut self) {
        self.model.tool_ended(self.now_ms);
        let now = self.now();
        self.core.begin_restart();
        self.core.handle_closed(now, self.generation, "the tool process closed the connection");
        self.asked.clear();
        self.pump();
        self.connect();
    }

    /// Ends the run: the tool process answers every call, the hosts every reverse request, and
    /// time passes past every deadline; then what the model found.
    fn finish(mut self) -> Vec<crate::session::Finding> {
        while !self.calls.is_empty() {
            self.reply(0, 0);
        }
        while !self.asked.is_empty() {
            self.host_answers(0);
        }
        self.advance(CALL_TIMEOUT_MS + 1);
        self.advance(CALL_TIMEOUT_MS + 1);
        let in_flight = self.core.ops_in_flight();
        let mut findings = self.model.finish(self.now_ms);
        if in_flight > 0 {
            findings.push(crate::session::Finding {
                requirement: "BR-MCP-19",
                message: format!("{in_flight} operation(s) never answered by the core"),
            });
        }
        findings
    }
}

fn clean(sim: Sim) {
    let findings = sim.finish();
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn a_handshake_serves_the_tools_after_the_marker_and_the_list_pulls() {
    let sim = Sim::new(None);
    let names: Vec<Value> = sim.core.tools().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, [json!("echo"), json!("shaped")]);
    clean(sim);
}

#[test]
fn one_tool_is_its_item_of_the_modern_tools_list_and_a_name_not_listed_is_none() {
    let sim = Sim::new(None);
    let list = sim.core.tools_modern();
    for name in ["echo", "shaped"] {
        assert_eq!(sim.core.tool_modern(name).as_ref(), list.iter().find(|t| t["name"] == name), "{name}");
    }
    assert_eq!(sim.core.tool_modern("not-registered"), None);
    clean(sim);
}

#[test]
fn without_a_marker_the_burst_ends_after_handshake_quiet_and_each_registration_restarts_it() {
    let mut core = Core::new(Config { call_timeout: Duration::from_secs(5), ..Config::default() });
    let t0 = Instant::now();
    let g = core.handle_connected(t0);
    let discovery = core.poll_transmit().expect("ListToolsRequest");
    core.handle_envelope(t0, g, env::tool_list(vec![env::tool("echo", "d", "")]).with_rid(discovery.request_id));
    assert_eq!(core.poll_timeout(), Some(t0 + HANDSHAKE_QUIET));
    let t1 = t0 + Duration::from_millis(400);
    core.handle_envelope(t1, g, env::register_middleware("m", 1));
    assert_eq!(core.poll_timeout(), Some(t1 + HANDSHAKE_QUIET), "a registration restarts the quiet time");
    core.handle_timeout(t1 + Duration::from_millis(499));
    assert!(core.poll_transmit().is_some_and(|e| matches!(e.msg, Some(Msg::RegisterMiddlewareResponse(_)))));
    assert!(core.poll_transmit().is_none(), "no list pull before the quiet time has passed");
    core.handle_timeout(t1 + HANDSHAKE_QUIET);
    let pulls: Vec<Envelope> = std::iter::from_fn(|| core.poll_transmit()).collect();
    assert_eq!(pulls.len(), 3, "the three list pulls: {pulls:?}");
}

#[test]
fn middleware_runs_before_in_priority_order_and_after_in_reverse_order() {
    let mut sim = Sim::new(None);
    sim.middleware = vec![("late", 9), ("early", 1), ("middle", 5)];
    sim.close_and_restart();
    sim.call(0, "echo", false);
    let mut order = Vec::new();
    for _ in 0..3 {
        let m = sim.sent.pop().expect("a middleware request");
        let Some(Msg::MiddlewareIntercept(r)) = &m.msg else { panic!("{m:?}") };
        order.push(format!("{} {}", r.phase, r.middleware_name));
        sim.tool_sends(Envelope::from(pb::MiddlewareInterceptResponse::default()).with_rid(m.request_id));
    }
    sim.reply(0, 0);
    for _ in 0..3 {
        let m = sim.sent.pop().expect("a middleware request");
        let Some(Msg::MiddlewareIntercept(r)) = &m.msg else { panic!("{m:?}") };
        order.push(format!("{} {}", r.phase, r.middleware_name));
        sim.tool_sends(Envelope::from(pb::MiddlewareInterceptResponse::default()).with_rid(m.request_id));
    }
    assert_eq!(order, ["before early", "before middle", "before late", "after late", "after middle", "after early"]);
    clean(sim);
}

/// Connects a tool process that registers one tool `name` and has no resources or prompts, and
/// completes the handshake; the connection's generation.
fn serve_one_tool(core: &mut Core, t0: Instant, name: &str) -> u64 {
    let g = core.handle_connected(t0);
    let d = core.poll_transmit().unwrap();
    core.handle_envelope(t0, g, env::tool_list(vec![env::tool(name, "d", "")]).with_rid(d.request_id));
    core.handle_envelope(t0, g, env::reload_response(true, ""));
    for p in std::iter::from_fn(|| core.poll_transmit()).collect::<Vec<_>>() {
        let reply: Envelope = match p.msg {
            Some(Msg::ListResourcesRequest(_)) => pb::ResourceListResponse::default().into(),
            Some(Msg::ListResourceTemplatesRequest(_)) => pb::ResourceTemplateListResponse::default().into(),
            _ => pb::PromptListResponse::default().into(),
        };
        core.handle_envelope(t0, g, reply.with_rid(p.request_id));
    }
    g
}

#[test]
fn a_call_past_the_call_timeout_is_cancelled_at_the_tool_process_and_answered_with_an_error() {
    let mut core = Core::new(Config { call_timeout: Duration::from_millis(100), ..Config::default() });
    let t0 = Instant::now();
    serve_one_tool(&mut core, t0, "echo");
    let op = core.start_call(t0, 1, "echo", None, None).unwrap();
    let call = core.poll_transmit().unwrap();
    core.handle_timeout(t0 + Duration::from_millis(99));
    assert!(core.poll_transmit().is_none());
    core.handle_timeout(t0 + Duration::from_millis(100));
    let cancel = core.poll_transmit().expect("a CancelRequest");
    assert!(matches!(&cancel.msg, Some(Msg::Cancel(c)) if c.request_id == call.request_id), "{cancel:?}");
    let answer = std::iter::from_fn(|| core.poll_event()).find(|e| matches!(e, Event::Answer { .. }));
    assert!(
        matches!(&answer, Some(Event::Answer { op: o, result: Err(HostError::Internal(m)), .. }) if *o == op && m.contains("did not answer")),
        "{answer:?}"
    );
}

#[test]
fn a_cancelled_call_is_cancelled_at_the_tool_process_and_its_late_result_is_dropped() {
    let mut sim = Sim::new(None);
    sim.call(0, "echo", true);
    sim.cancel(0);
    assert_eq!(sim.core.ops_in_flight(), 0);
    sim.reply(0, 0); // late: discarded (BR-CALL-17)
    clean(sim);
}

#[test]
fn the_end_of_the_connection_answers_every_call_in_flight_at_once() {
    let mut sim = Sim::new(None);
    sim.call(0, "echo", false);
    sim.call(1, "shaped", true);
    sim.close_and_restart();
    assert_eq!(sim.core.ops_in_flight(), 0);
    clean(sim);
}

#[test]
fn sampling_goes_to_the_only_session_with_a_call_and_is_refused_when_two_have_one() {
    let mut sim = Sim::new(None);
    sim.call(0, "echo", false);
    sim.reverse(true);
    assert_eq!(sim.asked.len(), 1, "asked the calling session");
    assert_eq!(sim.asked[0].0, "a");
    sim.call(1, "echo", false);
    sim.reverse(true);
    assert_eq!(sim.asked.len(), 1, "two sessions with calls: refused at once, nobody asked");
    clean(sim);
}

/// The fault of `explore --bridge`'s own test: after a restart calls are never
/// answered. The model must say so (this is the check failing where the behaviour is broken).
#[test]
fn the_model_finds_the_planted_unanswered_call_after_a_restart() {
    let mut sim = Sim::new(Some(Fault::BrMcpUnansweredAfterRestart));
    sim.close_and_restart();
    sim.call(0, "echo", false);
    let findings = sim.finish();
    assert!(findings.iter().any(|f| f.requirement == "BR-MCP-19"), "{findings:?}");
}

#[derive(Debug, Clone)]
enum Op {
    Call { session: usize, tool: usize, progress: bool },
    Cancel(usize),
    Reply { which: usize, form: u8 },
    Progress { which: usize, step: i64 },
    Control { kind: u8, tool: usize },
    Reverse { sampling: bool },
    HostAnswers(usize),
    Advance(u64),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..3usize, any::<bool>()).prop_map(|(session, tool, progress)| Op::Call { session, tool, progress }),
        1 => any::<usize>().prop_map(Op::Cancel),
        4 => (any::<usize>(), any::<u8>()).prop_map(|(which, form)| Op::Reply { which, form }),
        2 => (any::<usize>(), -1..3i64).prop_map(|(which, step)| Op::Progress { which, step }),
        1 => (any::<u8>(), 0..2usize).prop_map(|(kind, tool)| Op::Control { kind, tool }),
        1 => any::<bool>().prop_map(|sampling| Op::Reverse { sampling }),
        1 => any::<usize>().prop_map(Op::HostAnswers),
        2 => (0..2500u64).prop_map(Op::Advance),
        1 => Just(Op::Restart),
    ]
}

fn run(ops: &[Op], fault: Option<Fault>) -> Vec<crate::session::Finding> {
    let mut sim = Sim::new(fault);
    for op in ops {
        match op {
            Op::Call { session, tool, progress } => {
                sim.call(*session, TOOLS[*tool], *progress);
            }
            Op::Cancel(i) => sim.cancel(*i),
            Op::Reply { which, form } => sim.reply(*which, *form),
            Op::Progress { which, step } => sim.progress(*which, *step),
            Op::Control { kind, tool } => sim.control(*kind, *tool),
            Op::Reverse { sampling } => sim.reverse(*sampling),
            Op::HostAnswers(i) => sim.host_answers(*i),
            Op::Advance(ms) => sim.advance(*ms),
            Op::Restart => sim.close_and_restart(),
        }
    }
    sim.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the hosts and the tool process do, in whatever order, the bridge model finds
    /// nothing in what the core did.
    #[test]
    fn the_bridge_model_finds_nothing_in_any_sequence_of_operations(ops in proptest::collection::vec(op(), 0..40)) {
        let findings = run(&ops, None);
        prop_assert!(findings.is_empty(), "{findings:?}");
    }
}

// ----- multi round-trip requests (spec §26.4) -----

mod mrtr {
    use super::*;
    use crate::bridge_core::{ModernCall, ModernCaps};

    const T: Duration = Duration::from_millis(1000);

    struct Tp {
        core: Core,
        t0: Instant,
        g: u64,
    }

    impl Tp {
        fn ready() -> Tp {
            let mut core = Core::new(Config { call_timeout: T, ..Config::default() });
            let t0 = Instant::now();
            let g = serve_one_tool(&mut core, t0, "ask");
            while core.poll_event().is_some() {}
            Tp { core, t0, g }
        }

        fn at(&self, ms: u64) -> Instant {
            self.t0 + Duration::from_millis(ms)
        }

        fn call(&mut self, ms: u64, caps: ModernCaps, retry: Option<(String, Value)>) -> Result<OpId, HostError> {
            let call = ModernCall {
                name: "ask".into(),
                arguments: Some(json!({"q": "capital"})),
                progress: None,
                caps,
                retry,
            };
            let now = self.at(ms);
            self.core.start_modern(now, 9, call)
        }

        fn tp_sends(&mut self, ms: u64, e: Envelope) {
            let now = self.at(ms);
            self.core.handle_envelope(now, self.g, e);
        }

        fn sent(&mut self) -> Vec<Envelope> {
            std::iter::from_fn(|| self.core.poll_transmit()).collect()
        }

        fn answers(&mut self) -> Vec<(OpId, Result<Value, HostError>)> {
            std::iter::from_fn(|| self.core.poll_event())
                .filter_map(|e| match e {
                    Event::Answer { op, result, .. } => Some((op, result)),
                    _ => None,
                })
                .collect()
        }
    }

    fn sampling() -> Envelope {
        pb::SamplingRequest {
            messages_json: r#"[{"role":"user","content":"Capital of France?"}]"#.into(),
            max_tokens: 100,
            ..Default::default()
        }
        .into()
    }

    fn result(json: &str) -> Envelope {
        pb::CallToolResponse { result_json: json.into(), ..Default::default() }.into()
    }

    fn both() -> ModernCaps {
        ModernCaps { sampling: true, roots: true, log_level: None }
    }

    /// Starts a call, has the TP ask for sampling, and returns (call rid, state).
    fn parked(tp: &mut Tp) -> (String, String, OpId) {
        let op = tp.call(0, both(), None).unwrap();
        let call = tp.sent().pop().unwrap();
        tp.tp_sends(10, sampling().with_rid("s-1"));
        let a = tp.answers();
        let [(o, Ok(r))] = a.as_slice() else { panic!("one answer: {a:?}") };
        assert_eq!(*o, op);
        assert_eq!(r["resultType"], "input_required", "{r}");
        assert_eq!(r["inputRequests"]["sampling-1"]["method"], "sampling/createMessage", "{r}");
        assert_eq!(r["inputRequests"]["sampling-1"]["params"]["messages"][0]["content"]["type"], "text", "{r}");
        assert!(tp.sent().is_empty(), "the call stays open and the input request unanswered (BR-STATELESS-17)");
        (call.request_id, r["requestState"].as_str().unwrap().to_owned(), op)
    }

    fn answer() -> Value {
        json!({"sampling-1": {"role": "assistant", "content": [{"type": "text", "text": "Paris"}], "model": "m"}})
    }

    #[test]
    fn a_retry_with_the_answer_resumes_the_handler_and_gets_the_result() {
        let mut tp = Tp::ready();
        let (call_rid, state, _) = parked(&mut tp);
        let op = tp.call(500, both(), Some((state.clone(), answer()))).unwrap();
        let sent = tp.sent();
        let [reply] = sent.as_slice() else { panic!("one reply to the TP: {sent:?}") };
        assert_eq!(reply.request_id, "s-1");
        let Some(Msg::SamplingResponse(r)) = &reply.msg else { panic!("{reply:?}") };
        // BR-SAMPLING-11: a one-element array is its element.
        assert_eq!(r.content_json, r#"{"text":"Paris","type":"text"}"#);
        assert_eq!(r.model, "m");
        tp.tp_sends(600, result(r#"[{"type":"text","text":"Paris"}]"#).with_rid(call_rid));
        let a = tp.answers();
        assert!(matches!(a.as_slice(), [(o, Ok(v))] if *o == op && v["content"][0]["text"] == "Paris"), "{a:?}");
        // The state was consumed.
        assert!(matches!(tp.call(700, both(), Some((state, answer()))), Err(HostError::InvalidParams(_))));
        assert!(tp.sent().is_empty());
    }

    #[test]
    fn a_state_altered_presented_again_or_for_other_arguments_is_refused_without_envelope_traffic() {
        let mut tp = Tp::ready();
        let (_, state, _) = parked(&mut tp);
        let mut altered = state.clone().into_bytes();
        altered[10] = if altered[10] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert!(matches!(tp.call(100, both(), Some((altered, answer()))), Err(HostError::InvalidParams(_))));
        let other = ModernCall {
            name: "ask".into(),
            arguments: Some(json!({"q": "other"})),
            progress: None,
            caps: both(),
            retry: Some((state.clone(), answer())),
        };
        let now = tp.at(100);
        let e = tp.core.start_modern(now, 9, other).unwrap_err();
        assert!(e.to_string().contains("other arguments"), "{e}");
        // A malformed answer: refused, and the state stays valid (BR-STATELESS-25).
        let bad = json!({"sampling-1": {"role": "assistant", "content": {"type": "text"}}});
        assert!(matches!(tp.call(100, both(), Some((state.clone(), bad))), Err(HostError::InvalidParams(_))));
        assert!(tp.sent().is_empty());
        assert!(tp.call(200, both(), Some((state, answer()))).is_ok());
        assert_eq!(tp.sent().len(), 1);
    }

    #[test]
    fn a_retry_without_the_answer_is_asked_again_under_the_same_key() {
        let mut tp = Tp::ready();
        let (_, state, _) = parked(&mut tp);
        let op = tp.call(100, both(), Some((state.clone(), json!({})))).unwrap();
        let a = tp.answers();
        let [(o, Ok(r))] = a.as_slice() else { panic!("{a:?}") };
        assert_eq!(*o, op);
        assert_eq!(r["resultType"], "input_required");
        assert!(r["inputRequests"].get("sampling-1").is_some(), "{r}");
        assert_ne!(r["requestState"], json!(state), "a new round, a new state");
        assert!(tp.sent().is_empty());
    }

    #[test]
    fn a_parked_call_nobody_retries_is_cancelled_after_t_mrtr_and_its_input_request_refused() {
        let mut tp = Tp::ready();
        let (call_rid, state, _) = parked(&mut tp);
        let due = tp.core.poll_timeout().unwrap();
        assert_eq!(due, tp.at(10) + T, "T_MRTR from the InputRequiredResult");
        let now = tp.at(10 + 999);
        tp.core.handle_timeout(now);
        assert!(tp.sent().is_empty());
        let now = tp.at(10 + 1000);
        tp.core.handle_timeout(now);
        let sent = tp.sent();
        assert!(sent.iter().any(|e| matches!(&e.msg, Some(Msg::Cancel(c)) if c.request_id == call_rid)), "{sent:?}");
        assert!(
            sent.iter()
                .any(|e| e.request_id == "s-1"
                    && matches!(&e.msg, Some(Msg::SamplingResponse(r)) if !r.error.is_empty())),
            "{sent:?}"
        );
        assert!(tp.call(1500, both(), Some((state, answer()))).is_err());
    }

    #[test]
    fn a_result_that_arrives_while_parked_answers_the_next_retry() {
        let mut tp = Tp::ready();
        let (call_rid, state, _) = parked(&mut tp);
        tp.tp_sends(50, result(r#"[{"type":"text","text":"gave up"}]"#).with_rid(call_rid));
        let sent = tp.sent();
        assert!(matches!(sent.as_slice(), [e] if e.request_id == "s-1"), "the input request is refused: {sent:?}");
        assert!(tp.answers().is_empty());
        let op = tp.call(100, both(), Some((state, answer()))).unwrap();
        assert!(tp.sent().is_empty(), "its answers are ignored");
        let a = tp.answers();
        assert!(matches!(a.as_slice(), [(o, Ok(v))] if *o == op && v["content"][0]["text"] == "gave up"), "{a:?}");
    }

    #[test]
    fn without_the_capability_the_tool_process_is_answered_at_once_and_the_call_goes_on() {
        let mut tp = Tp::ready();
        let op = tp.call(0, ModernCaps::default(), None).unwrap();
        let call = tp.sent().pop().unwrap();
        tp.tp_sends(10, sampling().with_rid("s-1"));
        let sent = tp.sent();
        assert!(matches!(&sent[0].msg, Some(Msg::SamplingResponse(r)) if !r.error.is_empty()), "{sent:?}");
        tp.tp_sends(10, pb::ListRootsRequest::default().into());
        tp.tp_sends(10, Envelope::from(pb::ListRootsRequest::default()).with_rid("r-1"));
        let sent = tp.sent();
        assert!(matches!(&sent[0].msg, Some(Msg::ListRootsResponse(r)) if r.roots.is_empty()), "{sent:?}");
        assert!(tp.answers().is_empty());
        tp.tp_sends(20, result("[]").with_rid(call.request_id));
        assert!(matches!(tp.answers().as_slice(), [(o, Ok(_))] if *o == op));
    }

    #[test]
    fn a_parked_call_holds_at_most_max_inputs_input_requests_and_refuses_the_rest_at_once() {
        let mut tp = Tp::ready();
        parked(&mut tp);
        for i in 2..=crate::bridge_core::mrtr::MAX_INPUTS + 5 {
            tp.tp_sends(20, sampling().with_rid(format!("s-{i}")));
        }
        let sent = tp.sent();
        assert_eq!(sent.len(), 5, "the inputs beyond the bound are refused at once: {sent:?}");
        assert!(
            sent.iter().all(|e| matches!(&e.msg, Some(Msg::SamplingResponse(r)) if !r.error.is_empty())),
            "{sent:?}"
        );
    }

    #[test]
    fn two_modern_calls_are_two_owners_and_the_input_request_is_refused() {
        let mut tp = Tp::ready();
        tp.call(0, both(), None).unwrap();
        tp.call(0, both(), None).unwrap();
        tp.sent();
        tp.tp_sends(10, sampling().with_rid("s-1"));
        let sent = tp.sent();
        assert!(matches!(&sent[0].msg, Some(Msg::SamplingResponse(r)) if !r.error.is_empty()), "{sent:?}");
        assert!(tp.answers().is_empty());
    }

    #[test]
    fn a_parked_call_dies_with_its_tool_process_and_its_state_is_refused() {
        let mut tp = Tp::ready();
        let (_, state, _) = parked(&mut tp);
        let now = tp.at(50);
        tp.core.handle_closed(now, tp.g, "gone");
        let e = tp.call(100, both(), Some((state, answer()))).unwrap_err();
        assert!(e.to_string().contains("requestState"), "{e}");
    }

    #[test]
    fn time_parked_does_not_count_against_the_call_timeout() {
        let mut tp = Tp::ready();
        let (call_rid, state, _) = parked(&mut tp);
        let op = tp.call(900, both(), Some((state, answer()))).unwrap();
        tp.sent();
        let now = tp.at(1500);
        tp.core.handle_timeout(now);
        assert!(tp.answers().is_empty(), "attached at 900: CALL_TIMEOUT runs from there");
        tp.tp_sends(1600, result("[]").with_rid(call_rid));
        assert!(matches!(tp.answers().as_slice(), [(o, Ok(_))] if *o == op));
    }
}
