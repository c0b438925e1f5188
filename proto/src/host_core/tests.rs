use std::time::Instant;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn cfg(page_size: Option<usize>) -> Config {
    let queue = Bound { head_items: 4, head_bytes: 1 << 20, tail_items: 4, tail_bytes: 1 << 20 };
    Config { page_size, queue, name: "test".into(), version: "1".into(), private_cache: false, http: false }
}

fn line(core: &mut HostCore, v: Value) -> Intake {
    core.handle_bytes(Instant::now(), v.to_string().as_bytes()).0
}

fn out(core: &mut HostCore) -> Vec<Value> {
    std::iter::from_fn(|| core.poll_transmit()).map(|t| t.message.to_value()).collect()
}

fn actions(core: &mut HostCore) -> Vec<Action> {
    std::iter::from_fn(|| core.poll_action()).collect()
}

fn initialized(page_size: Option<usize>, caps: Value) -> HostCore {
    let mut core = HostCore::new(cfg(page_size));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": {"name": "h", "version": "1"}}});
    assert_eq!(line(&mut core, init), Intake::Request(RequestId::Number(0)));
    line(&mut core, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    out(&mut core);
    actions(&mut core);
    core
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn initialize_answers_the_hosts_revision_when_supported_and_the_newest_otherwise() {
    for (asked, answered) in
        [("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"), ("1999-01-01", NEWEST_VERSION)]
    {
        let mut core = HostCore::new(cfg(None));
        let init = request(
            1,
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {"sampling": {}},
            "clientInfo": {"name": "h", "version": "1"}}),
        );
        line(&mut core, init);
        let sent = out(&mut core);
        assert_eq!(sent[0]["result"]["protocolVersion"], answered, "BR-MCP-02");
        assert_eq!(sent[0]["result"]["capabilities"]["tools"]["listChanged"], true, "BR-MCP-05");
        assert_eq!(actions(&mut core), [Action::Open(SessionCaps { sampling: true, roots: false, legacy: true })]);
    }
}

#[test]
fn before_initialize_only_ping_is_answered_and_nothing_is_forwarded() {
    let mut core = HostCore::new(cfg(None));
    line(&mut core, request(1, "ping", json!({})));
    line(&mut core, request(2, "tools/call", json!({"name": "echo"})));
    let sent = out(&mut core);
    assert_eq!(sent[0]["result"], json!({}), "BR-MCP-08");
    assert_eq!(sent[1]["error"]["code"], -32600, "BR-MCP-09");
    assert!(actions(&mut core).is_empty(), "no Envelope traffic before initialize");
}

#[test]
fn a_call_is_forwarded_and_its_outcome_becomes_the_one_response() {
    let mut core = initialized(None, json!({}));
    let call =
        request(5, "tools/call", json!({"name": "echo", "arguments": {"a": 1}, "_meta": {"progressToken": "t"}}));
    assert_eq!(line(&mut core, call.clone()), Intake::Request(RequestId::Number(5)));
    let forward = Forward::Call { name: "echo".into(), arguments: Some(json!({"a": 1})), progress: Some(json!("t")) };
    assert_eq!(actions(&mut core), [Action::Forward { id: RequestId::Number(5), forward }]);
    // The same id again while in flight: refused, the original stays (BR-MCP-20).
    assert!(matches!(line(&mut core, call.clone()), Intake::Refused(v) if v["error"]["code"] == -32600));
    core.handle_note(Instant::now(), Note::Progress { token: json!("t"), progress: 1, total: None, message: None });
    core.handle_outcome(Instant::now(), RequestId::Number(5), Ok(json!({"content": []})));
    let t: Vec<Transmit> = std::iter::from_fn(|| core.poll_transmit()).collect();
    assert_eq!(t[0].route, Route::Cause(RequestId::Number(5)), "BR-HTTP-14");
    assert_eq!(t[1].route, Route::Answer(RequestId::Number(5)));
    assert_eq!(t[1].message.to_value()["result"], json!({"content": []}));
    // Answered: the id is free again.
    assert_eq!(line(&mut core, call), Intake::Request(RequestId::Number(5)));
}

#[test]
fn a_cancelled_call_gets_no_response_and_is_cancelled_at_the_bridge() {
    let mut core = initialized(None, json!({}));
    line(&mut core, request(5, "tools/call", json!({"name": "slow"})));
    actions(&mut core);
    line(&mut core, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}));
    assert_eq!(actions(&mut core), [Action::Cancel { id: RequestId::Number(5) }]);
    core.handle_outcome(Instant::now(), RequestId::Number(5), Ok(json!({"content": []})));
    assert!(out(&mut core).is_empty(), "BR-CANCEL-02");
}

#[test]
fn lists_are_paged_with_cursors_of_our_own() {
    let mut core = initialized(Some(2), json!({}));
    let items: Vec<Value> = (0..5).map(|i| json!({"name": i})).collect();
    line(&mut core, request(1, "tools/list", json!({})));
    core.handle_outcome(Instant::now(), RequestId::Number(1), Ok(Value::Array(items.clone())));
    let first = out(&mut core).remove(0);
    assert_eq!(first["result"]["tools"].as_array().unwrap().len(), 2);
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    line(&mut core, request(2, "tools/list", json!({"cursor": cursor})));
    core.handle_outcome(Instant::now(), RequestId::Number(2), Ok(Value::Array(items)));
    assert_eq!(out(&mut core)[0]["result"]["tools"][0]["name"], 2);
    line(&mut core, request(3, "tools/list", json!({"cursor": "someone-elses"})));
    assert_eq!(out(&mut core)[0]["error"]["code"], -32602, "BR-MCP-13");
}

#[test]
fn the_log_threshold_is_the_sessions_own() {
    let mut core = initialized(None, json!({}));
    line(&mut core, request(1, "logging/setLevel", json!({"level": "error"})));
    let refused = line(&mut core, request(2, "logging/setLevel", json!({"level": "loud"})));
    assert!(matches!(refused, Intake::Refused(v) if v["error"]["code"] == -32602), "BR-LOG-04");
    assert_eq!(out(&mut core)[0]["result"], json!({}), "BR-LOG-04");
    for level in ["info", "error"] {
        core.handle_note(Instant::now(), Note::Log { level, logger: None, data: json!(level), for_call: false });
    }
    let sent = out(&mut core);
    assert_eq!(sent.len(), 1, "BR-LOG-05");
    assert_eq!(sent[0]["params"]["data"], "error");
}

#[test]
fn list_changed_waits_for_initialized_and_is_queued_once() {
    let mut core = HostCore::new(cfg(None));
    let init = request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "h", "version": "1"}}),
    );
    line(&mut core, init);
    core.handle_note(Instant::now(), Note::ListChanged(ListKind::Tools));
    core.handle_note(Instant::now(), Note::ListChanged(ListKind::Tools));
    assert_eq!(out(&mut core).len(), 1, "only the initialize result");
    line(&mut core, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let sent = out(&mut core);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["method"], "notifications/tools/list_changed");
}

#[test]
fn a_flood_of_logs_is_bounded_and_the_host_learns_what_it_missed() {
    let mut core = initialized(None, json!({}));
    for i in 0..100 {
        core.handle_note(Instant::now(), Note::Log { level: "info", logger: None, data: json!(i), for_call: false });
    }
    let sent = out(&mut core);
    assert_eq!(sent.len(), 9, "4 first, a warning, 4 last");
    assert!(sent[4]["params"]["data"].as_str().unwrap().contains("92 notifications dropped"));
    assert!(matches!(actions(&mut core).as_slice(), [Action::Diag(_)]));
}

#[test]
fn requests_of_ours_travel_with_their_cause_and_their_answers_are_checked() {
    let mut core = initialized(None, json!({"sampling": {}, "roots": {}}));
    line(&mut core, request(9, "tools/call", json!({"name": "asks"})));
    actions(&mut core);
    let ask = core.ask(Instant::now(), Ask::ListRoots).unwrap();
    let t = core.poll_transmit().unwrap();
    assert_eq!(t.route, Route::Cause(RequestId::Number(9)));
    let id = t.message.to_value()["id"].clone();
    line(&mut core, json!({"jsonrpc": "2.0", "id": id, "result": {"nope": 1}}));
    assert!(matches!(actions(&mut core).as_slice(),
        [Action::Answer { ask: a, outcome: Err(ReverseError::Unexpected { .. }) }] if *a == ask));
    // Answered once: a second answer is ignored (BR-MCP-22).
    line(&mut core, json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}));
    assert!(actions(&mut core).is_empty());
    let bad = json!({"messages": [{"role": "system", "content": "x"}], "maxTokens": 1});
    assert!(matches!(core.ask(Instant::now(), Ask::Sample(bad)), Err(ReverseError::Invalid(_))));
}

#[test]
fn the_sessions_end_cancels_what_is_in_flight_and_fails_what_we_asked() {
    let mut core = initialized(None, json!({"roots": {}}));
    line(&mut core, request(3, "tools/call", json!({"name": "slow"})));
    actions(&mut core);
    let ask = core.ask(Instant::now(), Ask::ListRoots).unwrap();
    core.close();
    let a = actions(&mut core);
    assert_eq!(a[0], Action::Cancel { id: RequestId::Number(3) }, "BR-CANCEL-06");
    assert!(matches!(&a[1], Action::Answer { ask: x, outcome: Err(ReverseError::Host(_)) } if *x == ask));
    assert_eq!(a[2], Action::Closed);
    assert!(out(&mut core).is_empty());
}

// ----- MCP 2026-07-28 (modern requests) -----

fn modern(id: i64, method: &str, mut params: Value) -> Value {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    match params.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(m) => {
            for (k, v) in meta.as_object().unwrap() {
                m.entry(k.clone()).or_insert(v.clone());
            }
        }
        None => params["_meta"] = meta,
    }
    request(id, method, params)
}

#[test]
fn a_modern_call_needs_no_initialize_and_its_result_is_decorated() {
    let mut core = HostCore::new(cfg(None));
    line(&mut core, modern(1, "tools/call", json!({"name": "echo", "arguments": {}})));
    let a = actions(&mut core);
    // No progressToken, no logLevel: nothing for the bridge to send this session, so it does not join.
    assert!(matches!(&a[..], [Action::Forward { forward: Forward::ModernCall(_), .. }]), "BR-STATELESS-03: {a:?}");
    core.handle_outcome(Instant::now(), RequestId::Number(1), Ok(json!({"content": [], "_meta": {"x": 1}})));
    let r = &out(&mut core)[0]["result"];
    assert_eq!(r["resultType"], "complete", "BR-STATELESS-09");
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "test", "BR-STATELESS-10");
    assert_eq!(r["_meta"]["x"], 1, "other _meta members stay");
    assert!(r.get("ttlMs").is_none(), "a call result is not cacheable");
}

#[test]
fn a_modern_request_is_checked_in_the_order_of_section_26_2() {
    let mut core = HostCore::new(cfg(None));
    let cases = [
        (request(1, "server/discover", json!({})), -32602, "BR-STATELESS-04: no _meta"),
        (
            request(2, "tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": 7}})),
            -32602,
            "BR-STATELESS-04",
        ),
        (
            modern(3, "tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}})),
            -32022,
            "BR-STATELESS-05",
        ),
        (
            request(4, "tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})),
            -32602,
            "BR-STATELESS-04: no caps",
        ),
        (
            modern(5, "tools/list", json!({"_meta": {"io.modelcontextprotocol/logLevel": "loud"}})),
            -32602,
            "BR-STATELESS-06",
        ),
        (modern(6, "ping", json!({})), -32601, "BR-STATELESS-07"),
        (modern(7, "logging/setLevel", json!({"level": "nope"})), -32601, "BR-STATELESS-07 before the params"),
        (modern(8, "tasks/get", json!({})), -32601, "BR-TASK-06"),
        (modern(9, "tools/call", json!({"arguments": {}})), -32602, "the params, last"),
    ];
    for (msg, code, why) in cases {
        line(&mut core, msg);
        let sent = out(&mut core);
        assert_eq!(sent.len(), 1, "{why}");
        assert_eq!(sent[0]["error"]["code"], code, "{why}: {}", sent[0]);
    }
    let e = {
        line(
            &mut core,
            modern(10, "tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-06-18"}})),
        );
        out(&mut core).remove(0)
    };
    assert_eq!(e["error"]["data"]["requested"], "2025-06-18");
    assert_eq!(e["error"]["data"]["supported"][0], "2026-07-28");
    assert!(actions(&mut core).is_empty(), "no Envelope traffic for a refused request");
}

#[test]
fn the_supported_versions_are_the_modern_one_and_those_of_initialize() {
    assert_eq!(modern::SUPPORTED_VERSIONS[0], modern::MODERN_VERSION);
    assert_eq!(&modern::SUPPORTED_VERSIONS[1..], VERSIONS);
}

#[test]
fn discover_answers_without_the_bridge_and_initialize_never_negotiates_2026_07_28() {
    let mut core = HostCore::new(cfg(None));
    line(&mut core, modern(1, "server/discover", json!({})));
    let r = out(&mut core).remove(0)["result"].clone();
    assert_eq!(r["supportedVersions"][0], "2026-07-28", "BR-STATELESS-08");
    assert_eq!((r["ttlMs"].clone(), r["cacheScope"].clone()), (json!(0), json!("public")), "BR-STATELESS-11/14");
    assert!(r["capabilities"].get("tasks").is_none());
    assert!(actions(&mut core).is_empty());
    let init = request(
        2,
        "initialize",
        json!({"protocolVersion": "2026-07-28", "capabilities": {},
        "clientInfo": {"name": "h", "version": "1"}}),
    );
    line(&mut core, init);
    assert_eq!(out(&mut core)[0]["result"]["protocolVersion"], "2025-11-25", "BR-MCP-24");
}

#[test]
fn modern_lists_are_sorted_and_cacheable_and_a_missing_resource_names_its_uri() {
    let mut core = HostCore::new(cfg(None));
    line(&mut core, modern(1, "tools/list", json!({})));
    core.handle_outcome(Instant::now(), RequestId::Number(1), Ok(json!([{"name": "b"}, {"name": "a"}])));
    let r = out(&mut core).remove(0)["result"].clone();
    assert_eq!(
        (r["tools"][0]["name"].clone(), r["ttlMs"].clone()),
        (json!("a"), json!(0)),
        "BR-TOOLLIST-16, BR-STATELESS-12"
    );
    line(&mut core, modern(2, "resources/read", json!({"uri": "x:y"})));
    core.handle_outcome(Instant::now(), RequestId::Number(2), Err(HostError::ResourceNotFound("no".into())));
    let e = out(&mut core).remove(0);
    assert_eq!(
        (e["error"]["code"].clone(), e["error"]["data"]["uri"].clone()),
        (json!(-32602), json!("x:y")),
        "BR-RESOURCE-11"
    );
}

#[test]
fn a_listen_subscription_hears_its_changes_tagged_and_ends_when_cancelled() {
    let mut core = HostCore::new(cfg(None));
    line(
        &mut core,
        modern(
            7,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["x:y"]}}),
        ),
    );
    let ack = out(&mut core).remove(0);
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "BR-STATELESS-30");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7);
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true, "resourceSubscriptions": ["x:y"]}));
    core.handle_note(Instant::now(), Note::ListChanged(ListKind::Tools));
    core.handle_note(Instant::now(), Note::ListChanged(ListKind::Prompts));
    core.handle_note(Instant::now(), Note::ResourceUpdated("x:y".into()));
    core.handle_note(Instant::now(), Note::Log { level: "error", logger: None, data: json!(1), for_call: false });
    let sent = out(&mut core);
    assert_eq!(sent.len(), 2, "only what it asked for, nothing untagged, no logs: {sent:?}");
    assert_eq!(sent[0]["method"], "notifications/tools/list_changed", "BR-STATELESS-31");
    assert_eq!(sent[1]["params"]["uri"], "x:y", "BR-RESOURCE-12");
    line(&mut core, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}));
    core.handle_note(Instant::now(), Note::ListChanged(ListKind::Tools));
    assert!(out(&mut core).is_empty(), "BR-STATELESS-32");
    line(&mut core, modern(8, "subscriptions/listen", json!({})));
    assert_eq!(out(&mut core)[0]["error"]["code"], -32602, "BR-STATELESS-30");
}

#[test]
fn an_orderly_shutdown_answers_each_listen_subscription_complete_and_on_stdio_then_cancels_it() {
    for http in [false, true] {
        let mut core = HostCore::new(Config { http, ..cfg(None) });
        line(&mut core, modern(7, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}})));
        out(&mut core);
        assert!(core.shutdown(), "BR-STATELESS-33");
        let sent = out(&mut core);
        let complete = json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7,
                "io.modelcontextprotocol/serverInfo": {"name": "test", "version": "1"}}}});
        let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
        let want = if http { vec![complete] } else { vec![complete, cancelled] };
        assert_eq!(sent, want, "BR-STATELESS-33 (http: {http})");
        core.handle_note(Instant::now(), Note::ListChanged(ListKind::Tools));
        assert!(out(&mut core).is_empty(), "the subscription is over");
        assert!(!core.shutdown(), "nothing left to end");
    }
}

#[test]
fn with_the_fault_an_orderly_shutdown_drops_the_listen_subscriptions() {
    crate::fault::test_only::set(Some(crate::fault::Fault::BrStatelessListenDroppedAtShutdown));
    let mut core = HostCore::new(cfg(None));
    line(&mut core, modern(7, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}})));
    out(&mut core);
    assert!(!core.shutdown());
    crate::fault::test_only::set(None);
    assert!(out(&mut core).is_empty());
}

#[test]
fn a_modern_request_leaves_the_legacy_session_alone() {
    let mut core = initialized(None, json!({}));
    line(&mut core, request(1, "logging/setLevel", json!({"level": "error"})));
    line(&mut core, modern(2, "tools/list", json!({"_meta": {"io.modelcontextprotocol/logLevel": "debug"}})));
    core.handle_outcome(Instant::now(), RequestId::Number(2), Ok(json!([])));
    out(&mut core);
    core.handle_note(Instant::now(), Note::Log { level: "info", logger: None, data: json!(1), for_call: false });
    assert!(out(&mut core).is_empty(), "BR-STATELESS-03: the legacy threshold stays error");
    line(&mut core, request(3, "tools/list", json!({})));
    core.handle_outcome(Instant::now(), RequestId::Number(3), Ok(json!([])));
    let r = out(&mut core).remove(0)["result"].clone();
    assert!(r.get("resultType").is_none(), "a legacy result is not decorated");
}

// ----- generated sequences -----

#[derive(Debug, Clone)]
enum Op {
    Host(Value),
    Outcome(usize, bool),
    Note(u8),
    Ask,
    Close,
}

fn host_message() -> impl Strategy<Value = Value> {
    let id = prop_oneof![(0i64..6).prop_map(Value::from), "[ab]".prop_map(Value::from), Just(Value::Null)];
    let method = prop_oneof![
        Just("tools/call"),
        Just("tools/list"),
        Just("ping"),
        Just("initialize"),
        Just("logging/setLevel"),
        Just("resources/read"),
        Just("no/such"),
        Just("notifications/initialized"),
        Just("notifications/cancelled"),
    ];
    (id, method, any::<bool>(), 0i64..6).prop_map(|(id, method, has_id, target)| {
        let params = match method {
            "tools/call" => json!({"name": "t", "_meta": {"progressToken": target}}),
            "initialize" => {
                json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}, "clientInfo": {"name": "h", "version": "1"}})
            }
            "logging/setLevel" => json!({"level": "warning"}),
            "resources/read" => json!({"uri": "x:y"}),
            "notifications/cancelled" => json!({"requestId": target}),
            _ => json!({}),
        };
        let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if has_id && !method.starts_with("notifications/") {
            m["id"] = id;
        }
        m
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => host_message().prop_map(Op::Host),
        6 => (0usize..8, any::<bool>()).prop_map(|(i, ok)| Op::Outcome(i, ok)),
        3 => (0u8..4).prop_map(Op::Note),
        2 => Just(Op::Ask),
        1 => Just(Op::Close),
    ]
}

proptest! {
    /// Whatever the host sends and the bridge answers, in any order: every request the core
    /// took gets at most one response, only requests get responses, a request the host cancelled
    /// gets none (BR-CANCEL-02), and nothing goes out after the session's end.
    #[test]
    fn every_request_gets_at_most_one_response_and_nothing_follows_the_end(
        open in any::<bool>(),
        ops in prop::collection::vec(op(), 0..60),
    ) {
        // Half the sessions start initialized, so that the ops reach the forwarded requests.
        let mut core = if open { initialized(Some(1), json!({"roots": {}})) } else { HostCore::new(cfg(Some(1))) };
        let now = Instant::now();
        // initialize (id 0) was taken and answered when the session starts initialized.
        let mut taken: Vec<RequestId> = if open { vec![RequestId::Number(0)] } else { Vec::new() };
        let mut answered = taken.clone();
        let mut forwarded: Vec<RequestId> = Vec::new();
        let mut cancelled: Vec<RequestId> = Vec::new();
        let mut ended = false;
        for op in ops {
            match op {
                Op::Host(v) => {
                    if let Intake::Request(id) = core.handle_value(now, &v) {
                        prop_assert!(!ended);
                        cancelled.retain(|c| *c != id);
                        taken.push(id);
                    }
                }
                Op::Outcome(i, ok) => {
                    if let Some(id) = forwarded.get(i).cloned() {
                        let outcome = if ok { Ok(json!([])) } else { Err(HostError::Internal("x".into())) };
                        core.handle_outcome(now, id, outcome);
                    }
                }
                Op::Note(k) => {
                    let note = match k {
                        0 => Note::ListChanged(ListKind::Tools),
                        1 => Note::Log { level: "error", logger: None, data: json!(1), for_call: false },
                        2 => Note::Progress { token: json!(1), progress: 1, total: None, message: None },
                        _ => Note::ResourceUpdated("x:y".into()),
                    };
                    core.handle_note(now, note);
                }
                Op::Ask => { let _ = core.ask(now, Ask::ListRoots); }
                Op::Close => { core.close(); ended = true; }
            }
            while let Some(a) = core.poll_action() {
                match a {
                    Action::Forward { id, .. } => forwarded.push(id),
                    Action::Cancel { id } => cancelled.push(id),
                    _ => {}
                }
            }
            while let Some(t) = core.poll_transmit() {
                prop_assert!(!ended, "nothing goes out after the end: {:?}", t);
                if let Message::Response(Response { id: Some(id), .. }) = t.message {
                    prop_assert!(taken.contains(&id), "a response to a request never taken: {}", id);
                    let open = taken.iter().filter(|t| **t == id).count() - answered.iter().filter(|a| **a == id).count();
                    prop_assert!(open >= 1, "a second response to {}", id);
                    prop_assert!(!cancelled.contains(&id), "a response to {}, which the host cancelled", id);
                    answered.push(id);
                }
            }
            prop_assert!(core.outbox.len() <= 9);
        }
    }
}

#[test]
fn a_modern_call_carries_its_capabilities_and_retry_and_misplaced_states_are_refused() {
    let mut core = HostCore::new(cfg(None));
    let caps = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}, "io.modelcontextprotocol/logLevel": "info"});
    line(
        &mut core,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask",
        "requestState": "r1.x.y", "inputResponses": {"sampling-1": {}}, "_meta": caps}}),
    );
    let a = actions(&mut core);
    let Some(Action::Forward { forward: Forward::ModernCall(c), .. }) = a.last() else { panic!("{a:?}") };
    assert!(c.caps.sampling && !c.caps.roots, "{c:?}");
    assert_eq!(c.caps.log_level, Some(1));
    assert_eq!(c.retry, Some(("r1.x.y".to_owned(), json!({"sampling-1": {}}))));
    // BR-STATELESS-22: answers without a state; a state with another method.
    line(&mut core, modern(2, "tools/call", json!({"name": "ask", "inputResponses": {}})));
    line(&mut core, modern(3, "tools/list", json!({"requestState": "r1.x.y"})));
    let o = out(&mut core);
    let codes: Vec<&Value> = o.iter().map(|m| &m["error"]["code"]).collect();
    assert_eq!(codes, [&json!(-32602), &json!(-32602)], "{o:?}");
    // An InputRequiredResult keeps its type and gets no cache hints.
    let ir = json!({"resultType": "input_required", "inputRequests": {}, "requestState": "s"});
    core.handle_outcome(Instant::now(), RequestId::Number(1), Ok(ir));
    let r = &out(&mut core)[0]["result"];
    assert_eq!(r["resultType"], "input_required", "BR-STATELESS-09");
    assert!(r.get("ttlMs").is_none() && r.get("cacheScope").is_none(), "BR-STATELESS-11");
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "test", "BR-STATELESS-10");
}

#[test]
fn mcp_param_headers_must_equal_the_annotated_arguments() {
    let tools = vec![json!({"name": "w", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "opts": {"type": "object", "properties": {"live": {"type": "boolean", "x-mcp-header": "Live"}}},
    }}})];
    let call = |args: Value| match Message::from_value(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "w", "arguments": args}}))
    {
        Ok(Message::Request(r)) => r,
        other => panic!("{other:?}"),
    };
    let check = |args: Value, headers: &[(&'static str, &'static str)]| {
        let r = call(args);
        modern::check_param_headers(&r, &tools, |n| headers.iter().find(|(k, _)| *k == n).map(|(_, v)| *v))
            .map_err(|e| e.code)
    };
    let args = json!({"region": "eu", "count": 3, "opts": {"live": true}});
    let all = [("mcp-param-region", "=?base64?ZXU=?="), ("mcp-param-count", "03"), ("mcp-param-live", "true")];
    assert_eq!(check(args.clone(), &all), Ok(()));
    assert_eq!(check(args.clone(), &all[1..]), Err(ErrorCode::HEADER_MISMATCH));
    let wrong = [("mcp-param-region", "us"), ("mcp-param-count", "3"), ("mcp-param-live", "true")];
    assert_eq!(check(args.clone(), &wrong), Err(ErrorCode::HEADER_MISMATCH));
    let wrong = [("mcp-param-region", "eu"), ("mcp-param-count", "3"), ("mcp-param-live", "false")];
    assert_eq!(check(args, &wrong), Err(ErrorCode::HEADER_MISMATCH));
    // Absent and null arguments need no header; a tool not in the set is left to the call.
    assert_eq!(check(json!({"region": null}), &[]), Ok(()));
    let r = call(json!({}));
    assert_eq!(modern::check_param_headers(&r, &[], |_| None).map_err(|e| e.code), Ok(()));
}

#[test]
fn invalid_x_mcp_header_annotations_are_named() {
    let bad = |schema: Value| !modern::header_annotations(&schema).1.is_empty();
    let prop = |p: Value| json!({"type": "object", "properties": {"p": p}});
    assert!(!bad(prop(json!({"type": "string", "x-mcp-header": "Region"}))));
    assert!(!bad(prop(json!({"type": ["integer", "null"], "x-mcp-header": "N"}))));
    assert!(bad(prop(json!({"type": "string", "x-mcp-header": ""}))));
    assert!(bad(prop(json!({"type": "string", "x-mcp-header": "Re gion"}))));
    assert!(bad(prop(json!({"type": "object", "x-mcp-header": "O"}))));
    assert!(bad(prop(json!({"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}))));
    assert!(bad(json!({"type": "object", "x-mcp-header": "Root"})));
    assert!(bad(json!({"type": "object", "properties": {
        "a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}})));
    // A property named x-mcp-header is no annotation.
    assert!(!bad(json!({"type": "object", "properties": {"x-mcp-header": {"type": "string"}}})));
}

#[test]
fn a_modern_tools_list_over_http_leaves_out_tools_with_invalid_annotations() {
    let tools = json!([
        {"name": "ok", "inputSchema": {"type": "object"}},
        {"name": "bad", "inputSchema": {"type": "object", "x-mcp-header": "Root"}},
    ]);
    for http in [false, true] {
        let mut core = HostCore::new(Config { http, ..cfg(None) });
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
        line(&mut core, request(1, "tools/list", json!({"_meta": meta})));
        let forwarded = actions(&mut core).into_iter().find_map(|a| match a {
            Action::Forward { id, .. } => Some(id),
            _ => None,
        });
        core.handle_outcome(Instant::now(), forwarded.expect("forwarded"), Ok(tools.clone()));
        let names: Vec<Value> =
            out(&mut core)[0]["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
        assert_eq!(names, if http { vec![json!("ok")] } else { vec![json!("bad"), json!("ok")] });
        assert_eq!(actions(&mut core).iter().any(|a| matches!(a, Action::Diag(d) if d.contains("\"bad\""))), http);
    }
}
