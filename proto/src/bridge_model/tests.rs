use serde_json::json;

use super::*;
use crate::EnvelopeExt;
use crate::envelopes as env;

fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}})
}

fn result(id: u64, content: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": content}})
}

fn reqs(f: &[Finding]) -> Vec<&str> {
    f.iter().map(|f| f.requirement).collect()
}

#[test]
fn a_call_forwarded_and_answered_with_what_the_tool_process_sent_is_clean() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call(1, "echo"));
    m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
    let r = pb::CallToolResponse { result_json: r#"[{"type":"text","text":"hi"},5]"#.into(), ..Default::default() };
    m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
    m.host_received("a", 10, &result(1, json!([{"type": "text", "text": "hi"}, {"type": "text", "text": "5"}])));
    assert_eq!(m.finish(20), vec![]);
}

#[test]
fn a_second_response_and_a_response_to_a_notification_break_br_mcp_19() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
    m.host_received("a", 2, &json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
    m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    m.host_received("a", 3, &json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
    assert_eq!(reqs(&m.finish(5)), ["BR-MCP-19", "BR-MCP-19"]);
}

#[test]
fn an_unanswered_request_breaks_br_mcp_19_unless_the_host_cancelled_it() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call(1, "slow"));
    m.host_sent("a", &call(2, "slow"));
    m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}));
    let f = m.finish(100);
    assert_eq!(reqs(&f), ["BR-MCP-19"]);
    assert!(f[0].message.contains("id 1"), "{f:?}");
}

#[test]
fn error_codes_must_be_integers_other_than_zero() {
    let mut m = BridgeModel::new();
    for (id, code) in [(1, json!(0)), (2, json!("x")), (3, json!(-32603))] {
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": "u"}}));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "m"}}));
    }
    assert_eq!(reqs(&m.finish(2)), ["BR-MCP-18", "BR-MCP-18"]);
}

#[test]
fn a_result_that_differs_from_what_the_tool_process_sent_names_the_part() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call(1, "echo"));
    m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
    let mut r = pb::CallToolResponse {
        is_error: true,
        result_json: r#"[{"type":"text","text":"x"}]"#.into(),
        structured_content_json: r#"{"n":1}"#.into(),
        ..Default::default()
    };
    m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r.clone())), ..Default::default() });
    // Dropped structuredContent and isError lost.
    m.host_received("a", 5, &result(1, json!([{"type": "text", "text": "x"}])));
    assert_eq!(reqs(&m.finish(6)), ["BR-CALL-06", "BR-CALL-11"]);
    // Not JSON at all: one text block with the whole string.
    r.result_json = "plain".into();
    assert_eq!(content_of(&r.result_json), json!([{"type": "text", "text": "plain"}]));
    assert_eq!(content_of(""), json!([]));
}

#[test]
fn a_content_difference_names_the_mapping_rule_its_first_differing_element_breaks() {
    let typed = r#"[{"type":"text","text":"a","annotations":{"priority":1}},{"type":"image","data":"AAA=","mimeType":"image/png"},42]"#;
    let whole = content_of(typed);
    let with = |i: usize, v: Value| {
        let mut c = whole.clone();
        c[i] = v;
        c
    };
    // Numbers compare by value (§1.6): 1 and 1.0 are the same priority.
    assert!(same_json(&with(0, json!({"type": "text", "text": "a", "annotations": {"priority": 1.0}})), &whole));
    let rule = |result_json: &str, got: &Value| {
        content_rule(content_shape(result_json).as_deref(), &content_of(result_json), got)
    };
    assert_eq!(rule(typed, &with(0, json!({"type": "text", "text": "a"}))), "BR-CALL-07");
    assert_eq!(rule(typed, &with(1, json!({"type": "image", "data": "AAA", "mimeType": "image/png"}))), "BR-CALL-10");
    assert_eq!(rule(typed, &json!([whole[0], whole[1]])), "BR-CALL-08");
    assert_eq!(rule(typed, &json!([whole[0], whole[1], whole[2], {"type": "text", "text": "more"}])), "BR-CALL-07");
    assert_eq!(rule("plain", &json!([])), "BR-CALL-09");
    assert_eq!(rule("", &json!([{"type": "text", "text": ""}])), "BR-CALL-09");
    // Through the model: a dropped annotation is BR-CALL-07; the same result with 1.0 is none.
    for (got, want) in [(with(0, json!({"type": "text", "text": "a"})), vec!["BR-CALL-07"]), (whole.clone(), vec![])] {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "echo"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
        let r = pb::CallToolResponse { result_json: typed.into(), ..Default::default() };
        m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
        let mut got = got;
        if want.is_empty() {
            got[0]["annotations"]["priority"] = json!(1.0);
        }
        m.host_received("a", 5, &result(1, got));
        assert_eq!(reqs(&m.finish(6)), want);
    }
}

#[test]
fn a_request_envelope_no_host_request_asked_for_is_named() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}));
    m.tool_received(&env::read_resource("mem://a").with_rid("r9"));
    m.tool_received(&env::call_tool("echo", "{}").with_rid("r10"));
    // Pulls and cancellations may come at any time.
    m.tool_received(&env::list_resources().with_rid("r11"));
    m.tool_received(&env::cancel("r10"));
    m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(reqs(&m.finish(2)), ["BR-MCP-14", "BR-CALL-01"]);
}

#[test]
fn progress_goes_only_to_the_calling_session_and_never_after_the_response() {
    let mut m = BridgeModel::new();
    let mut c = call(1, "slow");
    c["params"]["_meta"] = json!({"progressToken": "t"});
    m.host_sent("a", &c);
    m.host_sent("b", &call(1, "slow"));
    m.tool_received(&env::call_tool_with_progress("slow", "{}", "p1").with_rid("r1"));
    let p =
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}});
    m.host_received("a", 1, &p);
    m.host_received("b", 1, &p);
    m.host_received("a", 2, &result(1, json!([])));
    m.host_received("a", 3, &p);
    let f = m.finish(4);
    assert_eq!(reqs(&f), ["BR-PROGRESS-04", "BR-PROGRESS-03", "BR-MCP-19"], "{f:?}");
}

#[test]
fn calls_in_flight_when_the_tool_process_dies_are_owed_an_answer_within_t_prompt() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call(1, "slow"));
    m.host_sent("a", &call(2, "slow"));
    m.tool_received(&env::call_tool("slow", "{}").with_rid("r1"));
    m.tool_received(&env::call_tool("slow", "{}").with_rid("r2"));
    m.tool_ended(100);
    m.host_received("a", 500, &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "gone"}}));
    m.host_received("a", 2000, &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "gone"}}));
    assert_eq!(reqs(&m.finish(3000)), ["BR-LIFECYCLE-03"]);
}

#[test]
fn reverse_requests_get_exactly_one_answer_under_their_rid() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call(1, "ask"));
    m.tool_received(&env::call_tool("ask", "{}").with_rid("r1"));
    let sampling = pb::Envelope {
        request_id: "s1".into(),
        msg: Some(Msg::SamplingRequest(pb::SamplingRequest::default())),
        ..Default::default()
    };
    m.tool_sent(&sampling);
    m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": "x", "method": "sampling/createMessage", "params": {}}));
    m.host_received("b", 1, &json!({"jsonrpc": "2.0", "id": "y", "method": "sampling/createMessage", "params": {}}));
    let answer = pb::Envelope {
        request_id: "s1".into(),
        msg: Some(Msg::SamplingResponse(pb::SamplingResponse::default())),
        ..Default::default()
    };
    m.tool_received(&answer);
    m.tool_received(&answer);
    m.host_received("a", 2, &result(1, json!([])));
    assert_eq!(reqs(&m.finish(3)), ["BR-SAMPLING-02", "BR-SAMPLING-01"]);
}

/// The bridge's discovery: ListToolsRequest under `d1`, the tool process's list under it.
fn discovered(m: &mut BridgeModel, names: &[&str]) {
    m.tool_received(&env::list_tools().with_rid("d1"));
    m.tool_sent(&env::tool_list(names.iter().map(|n| env::tool(n, "", r#"{"type":"object"}"#))).with_rid("d1"));
}

fn initialized(m: &mut BridgeModel, session: &str) {
    m.host_sent(session, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

fn list_changed() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
}

fn tools_list(m: &mut BridgeModel, session: &str, id: u64, at: u64, shown: &[&str]) {
    m.host_sent(session, &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
    let tools: Vec<Value> = shown.iter().map(|n| json!({"name": n, "inputSchema": {}})).collect();
    m.host_received(session, at, &json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}));
}

fn active(m: &BridgeModel) -> Vec<String> {
    m.tools.active().expect("known").into_iter().collect()
}

#[test]
fn the_active_set_follows_the_worked_example_of_section_10_with_one_list_changed_per_change() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["delete", "read", "search", "write"]);
    initialized(&mut m, "a");
    let batch = |e: &[&str], d: &[&str], a: &[&str], b: &[&str]| {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        pb::Envelope::from(pb::BatchUpdateRequest { enable: v(e), disable: v(d), allow: v(a), block: v(b) })
    };
    let steps: Vec<(pb::Envelope, &[&str])> = vec![
        (env::disable_tools(["delete"]), &["read", "search", "write"]),
        (env::enable_tools(["delete"]), &["delete", "read", "search", "write"]),
        (env::set_allowed(["search", "read"]), &["read", "search"]),
        (env::enable_tools(["write"]), &["read", "search", "write"]),
        (env::disable_tools(["read"]), &["search", "write"]),
        (env::set_blocked(["write", "delete"]), &["read", "search"]),
        (env::enable_tools(["write"]), &["read", "search", "write"]),
        (batch(&["search"], &["read"], &["read"], &[]), &["search"]),
        (batch(&[], &[], &["read"], &["write"]), &["search"]),
        (env::set_allowed(["read", "export"]), &["read"]),
        (env::get_active_tools(), &["read"]),
        (env::set_blocked(Vec::<String>::new()), &["delete", "read", "search", "write"]),
    ];
    for (i, (envelope, want)) in steps.into_iter().enumerate() {
        let step = i + 1;
        let at = 100 * step as u64;
        m.tool_sent_at(at, &envelope);
        assert_eq!(active(&m), want, "step {step}");
        let owed = m.listeners["a"].owed.is_some();
        assert_eq!(owed, step != 9 && step != 11, "step {step}: a list_changed is owed exactly after a change");
        if owed {
            m.host_received("a", at + 10, &list_changed());
        }
        tools_list(&mut m, "a", step as u64, at + 20, want);
    }
    assert_eq!(m.finish(5000), vec![]);
}

#[test]
fn a_change_never_announced_to_an_initialized_session_breaks_br_toollist_12() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["a1", "b1"]);
    initialized(&mut m, "a");
    initialized(&mut m, "b");
    m.tool_sent(&env::disable_tools(["a1"]));
    m.tool_sent(&env::disable_tools(["b1"]));
    // One notification may announce both changes; session b gets none.
    m.host_received("a", 50, &list_changed());
    let f = m.finish(5000);
    assert_eq!(reqs(&f), ["BR-TOOLLIST-12"], "{f:?}");
    assert!(f[0].message.contains("\"b\"") && f[0].message.starts_with("2 change"), "{f:?}");
}

#[test]
fn a_list_changed_later_than_t_listchange_breaks_br_toollist_12_and_one_within_it_does_not() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["x", "y"]);
    initialized(&mut m, "a");
    m.tool_sent_at(100, &env::disable_tools(["x"]));
    m.host_received("a", 1100, &list_changed());
    m.tool_sent_at(2000, &env::enable_tools(["x"]));
    m.host_received("a", 3200, &list_changed());
    let f = m.finish(5000);
    assert_eq!(reqs(&f), ["BR-TOOLLIST-12"], "{f:?}");
    assert!(f[0].message.contains("1200 ms"), "{f:?}");
}

#[test]
fn a_tools_list_after_the_list_changed_must_show_the_new_set_but_one_in_flight_may_show_either() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["x", "y"]);
    initialized(&mut m, "a");
    // In flight while the change happens: the old set or the new one.
    m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    m.tool_sent(&env::disable_tools(["x"]));
    let old = json!({"tools": [{"name": "x"}, {"name": "y"}]});
    m.host_received("a", 10, &json!({"jsonrpc": "2.0", "id": 1, "result": old}));
    // Sent before the notification: the bridge may not have read the change yet.
    tools_list(&mut m, "a", 2, 20, &["x", "y"]);
    m.host_received("a", 30, &list_changed());
    tools_list(&mut m, "a", 3, 40, &["y"]);
    tools_list(&mut m, "a", 4, 50, &["x", "y"]);
    let f = m.finish(5000);
    assert_eq!(reqs(&f), ["BR-TOOLLIST-11"], "{f:?}");
    assert!(f[0].message.starts_with("tools/list 4"), "{f:?}");
}

#[test]
fn a_call_results_enable_and_disable_are_in_effect_once_the_host_has_the_calls_response() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["gate", "secret"]);
    initialized(&mut m, "a");
    initialized(&mut m, "b");
    m.host_sent("a", &call(1, "gate"));
    m.tool_received(&env::call_tool("gate", "{}").with_rid("r1"));
    let r = pb::CallToolResponse { disable_tools: vec!["secret".into()], ..Default::default() };
    m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
    m.host_received("a", 10, &result(1, json!([])));
    // Session a knows from the call's response; b has not been told yet and may see either.
    tools_list(&mut m, "b", 2, 15, &["gate", "secret"]);
    tools_list(&mut m, "a", 3, 20, &["gate", "secret"]);
    m.host_received("a", 30, &list_changed());
    m.host_received("b", 30, &list_changed());
    let f = m.finish(5000);
    assert_eq!(reqs(&f), ["BR-TOOLLIST-11"], "{f:?}");
    assert!(f[0].message.starts_with("tools/list 3"), "{f:?}");
}

#[test]
fn a_list_changed_without_a_change_is_br_toollist_13_but_coalescing_and_late_sessions_are_not() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["x", "y", "z"]);
    initialized(&mut m, "a");
    // Two changes, two notifications (the second change may have been read late).
    m.tool_sent(&env::disable_tools(["x"]));
    m.tool_sent(&env::disable_tools(["y"]));
    m.host_received("a", 10, &list_changed());
    m.host_received("a", 20, &list_changed());
    // A session that initialized after a change may hear of it.
    initialized(&mut m, "b");
    m.host_received("b", 25, &list_changed());
    // No change at all: get_active_tools, a rejected batch, disabling what is disabled.
    m.tool_sent(&env::get_active_tools());
    let rejected = pb::BatchUpdateRequest { allow: vec!["x".into()], block: vec!["y".into()], ..Default::default() };
    m.tool_sent(&rejected.into());
    m.tool_sent(&env::disable_tools(["x"]));
    assert!(m.listeners.values().all(|l| l.owed.is_none()), "nothing changed, nothing owed");
    m.host_received("a", 30, &list_changed());
    let f = m.finish(5000);
    assert_eq!(reqs(&f), ["BR-TOOLLIST-13"], "{f:?}");
}

#[test]
fn after_a_restart_the_tool_set_is_not_judged_until_set_allowed_or_set_blocked_makes_it_known() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["x", "y"]);
    initialized(&mut m, "a");
    m.tool_sent(&env::disable_tools(["x"]));
    m.host_received("a", 10, &list_changed());
    m.tool_ended(20);
    // BR-TOOLLIST-15: kept or reset, both are fine; so is a notification about it.
    discovered(&mut m, &["x", "y"]);
    tools_list(&mut m, "a", 1, 30, &["x", "y"]);
    m.host_received("a", 40, &list_changed());
    m.tool_sent(&env::disable_tools(["y"]));
    tools_list(&mut m, "a", 2, 50, &["x", "y"]);
    assert_eq!(m.findings(), &[]);
    // Known again (whether that was a change is not known), and the changes after it are judged.
    m.tool_sent(&env::set_blocked(["y"]));
    m.host_received("a", 60, &list_changed());
    m.tool_sent(&env::disable_tools(["x"]));
    m.host_received("a", 70, &list_changed());
    tools_list(&mut m, "a", 3, 80, &["x"]);
    tools_list(&mut m, "a", 4, 90, &[]);
    let f = m.finish(5000);
    assert_eq!(reqs(&f), ["BR-TOOLLIST-11"], "{f:?}");
    assert!(f[0].message.starts_with("tools/list 3"), "{f:?}");
}

#[test]
fn a_session_without_an_event_stream_is_owed_no_list_changed_and_stray_tool_lists_change_nothing() {
    let mut m = BridgeModel::new();
    discovered(&mut m, &["x"]);
    initialized(&mut m, "a");
    m.host_unlistening("a");
    m.tool_sent(&env::disable_tools(["x"]));
    // A ToolListResponse under a rid the bridge never asked with is not a discovery.
    m.tool_sent(&env::tool_list([env::tool("other", "", r#"{"type":"object"}"#)]).with_rid("stray"));
    assert_eq!(active(&m), Vec::<String>::new());
    assert_eq!(m.finish(5000), vec![]);
}

#[test]
fn what_the_tool_process_disables_before_its_first_tool_list_is_in_effect_after_discovery() {
    let mut m = BridgeModel::new();
    m.tool_sent(&env::disable_tools(["x"]));
    discovered(&mut m, &["x", "y"]);
    initialized(&mut m, "a");
    tools_list(&mut m, "a", 1, 10, &["y"]);
    assert_eq!(m.finish(5000), vec![], "no change after discovery, nothing owed");
    // A restart before the first discovery leaves the sets to the bridge (BR-TOOLLIST-15).
    let mut m = BridgeModel::new();
    m.tool_sent(&env::disable_tools(["x"]));
    m.tool_ended(5);
    discovered(&mut m, &["x", "y"]);
    tools_list(&mut m, "a", 1, 10, &["x", "y"]);
    tools_list(&mut m, "a", 2, 20, &["y"]);
    assert_eq!(m.finish(5000), vec![]);
}

#[test]
fn a_request_the_host_sent_again_under_an_id_in_flight_may_get_an_error_and_its_result() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call(2, "slow"));
    m.host_sent("a", &call(2, "slow"));
    m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": "in flight"}}));
    m.host_received("a", 2, &result(2, json!([])));
    assert_eq!(m.findings(), &[] as &[Finding]);
    // A third answer is one too many.
    m.host_received("a", 3, &result(2, json!([])));
    assert_eq!(reqs(m.findings()), ["BR-MCP-19"]);
}

#[test]
fn once_middleware_is_registered_results_are_not_compared_with_the_tools() {
    let mut m = BridgeModel::new();
    m.tool_sent(&pb::Envelope {
        msg: Some(Msg::RegisterMiddleware(pb::RegisterMiddlewareRequest { name: "mw".into(), priority: 1 })),
        ..Default::default()
    });
    m.host_sent("a", &call(1, "echo"));
    m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
    let r = pb::CallToolResponse { result_json: r#"[{"type":"text","text":"R0"}]"#.into(), ..Default::default() };
    m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
    m.host_received("a", 5, &result(1, json!([{"type": "text", "text": "R2"}])));
    assert_eq!(m.finish(6), vec![]);
}

fn call_with(id: u64, name: &str, arguments: Value, token: Option<&str>) -> Value {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(t) = token {
        params["_meta"] = json!({"progressToken": t});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn forwarded(rid: &str, name: &str, arguments_json: &str, token: &str) -> pb::Envelope {
    let c =
        pb::CallToolRequest { name: name.into(), arguments_json: arguments_json.into(), progress_token: token.into() };
    pb::Envelope { request_id: rid.into(), msg: Some(Msg::CallTool(c)), ..Default::default() }
}

#[test]
fn the_copied_arguments_and_progress_token_are_compared_with_the_hosts_request() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call_with(1, "add", json!({"a": 1, "b": 2.0}), None));
    // Another order of members and 2.0 written as 2 are the same arguments.
    m.tool_received(&forwarded("r1", "add", r#"{"b":2,"a":1.0}"#, ""));
    assert_eq!(m.findings(), &[] as &[Finding]);
    m.host_sent("a", &call_with(2, "add", json!({"a": 1}), None));
    m.tool_received(&forwarded("r2", "add", r#"{"a":2}"#, ""));
    assert_eq!(reqs(m.findings()), ["BR-CALL-02"]);
    m.host_sent("a", &call_with(3, "add", json!(null), Some("t")));
    m.tool_received(&forwarded("r3", "add", "{}", ""));
    assert_eq!(reqs(m.findings()), ["BR-CALL-02", "BR-PROGRESS-01"]);
}

#[test]
fn concurrent_calls_of_one_tool_may_be_forwarded_in_any_order() {
    let mut m = BridgeModel::new();
    m.host_sent("a", &call_with(1, "echo", json!({"text": "one"}), None));
    m.host_sent("a", &call_with(2, "echo", json!({"text": "two"}), None));
    m.tool_received(&forwarded("r2", "echo", r#"{"text":"two"}"#, ""));
    m.tool_received(&forwarded("r1", "echo", r#"{"text":"one"}"#, ""));
    assert_eq!(m.findings(), &[] as &[Finding]);
}

/// MCP 2026-07-28 requests, results and MRTR rounds (modern.rs).
mod modern {
    use super::*;

    const META: &str = "io.modelcontextprotocol/protocolVersion";

    fn meta() -> Value {
        json!({META: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}})
    }

    fn mcall(id: u64, extra: Value) -> Value {
        let mut params = json!({"name": "ask", "arguments": {"q": 1}, "_meta": meta()});
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            params[k] = v;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    }

    fn retry(id: u64, state: &str) -> Value {
        mcall(
            id,
            json!({"requestState": state, "inputResponses": {"k1": {"role": "assistant", "content": {"type": "text", "text": "a"}, "model": "m"}}}),
        )
    }

    fn irr(id: u64, state: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required", "requestState": state,
            "inputRequests": {"k1": {"method": "sampling/createMessage", "params": {}}}}})
    }

    fn done(id: u64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}})
    }

    fn refused(id: u64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "bad state"}})
    }

    fn sampling(rid: &str) -> pb::Envelope {
        pb::Envelope {
            request_id: rid.into(),
            msg: Some(Msg::SamplingRequest(pb::SamplingRequest::default())),
            ..Default::default()
        }
    }

    fn answer(rid: &str, error: &str) -> pb::Envelope {
        let r = pb::SamplingResponse { model: "m".into(), error: error.into(), ..Default::default() };
        pb::Envelope { request_id: rid.into(), msg: Some(Msg::SamplingResponse(r)), ..Default::default() }
    }

    fn tool_result(rid: &str) -> pb::Envelope {
        let r = pb::CallToolResponse { result_json: r#"[{"type":"text","text":"ok"}]"#.into(), ..Default::default() };
        pb::Envelope { request_id: rid.into(), msg: Some(Msg::CallResult(r)), ..Default::default() }
    }

    /// A modern call forwarded as `c1`, its input request `s1`, and the InputRequiredResult.
    fn parked() -> BridgeModel {
        let mut m = BridgeModel::new();
        m.host_sent("a", &mcall(1, json!({})));
        m.tool_received(&env::call_tool("ask", r#"{"q":1}"#).with_rid("c1"));
        m.tool_sent(&sampling("s1"));
        m.host_received("a", 1, &irr(1, "st1"));
        m
    }

    #[test]
    fn an_mrtr_round_answered_by_one_retry_is_clean() {
        let mut m = parked();
        m.host_sent("a", &retry(2, "st1"));
        m.tool_received(&answer("s1", ""));
        m.tool_sent(&tool_result("c1"));
        m.host_received("a", 2, &done(2));
        assert_eq!(m.finish(5), vec![]);
    }

    #[test]
    fn the_retry_gets_what_the_tool_process_sent_even_when_it_came_while_parked() {
        let mut m = parked();
        m.tool_sent(&tool_result("c1"));
        m.tool_received(&answer("s1", "the tool returned"));
        m.host_sent("a", &retry(2, "st1"));
        let wrong = json!({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "content": []}});
        m.host_received("a", 2, &wrong);
        assert_eq!(reqs(&m.finish(5)), ["BR-CALL-07"]);
    }

    #[test]
    fn a_modern_result_without_result_type_breaks_br_stateless_09_and_a_legacy_one_does_not() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}}));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": []}}));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta()}}));
        m.host_received(
            "a",
            1,
            &json!({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "input_required", "tools": []}}),
        );
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}));
        assert_eq!(reqs(&m.finish(5)), ["BR-STATELESS-09", "BR-STATELESS-09"]);
    }

    #[test]
    fn a_state_accepted_twice_breaks_br_stateless_22() {
        let mut m = parked();
        m.host_sent("a", &retry(2, "st1"));
        m.host_received("a", 2, &irr(2, "st2"));
        // The first round's state again, after the second was issued.
        m.host_sent("a", &retry(3, "st1"));
        m.host_received("a", 3, &irr(3, "st3"));
        assert_eq!(reqs(m.findings()), ["BR-STATELESS-22"]);
        assert!(m.findings()[0].message.contains("already consumed"), "{:?}", m.findings());
        m.host_sent("a", &retry(4, "st3"));
        m.tool_received(&answer("s1", ""));
        m.tool_sent(&tool_result("c1"));
        m.host_received("a", 4, &done(4));
        m.host_sent("a", &retry(5, "st3"));
        m.host_received("a", 5, &done(5));
        let f = m.finish(9);
        assert_eq!(reqs(&f), ["BR-STATELESS-22", "BR-STATELESS-22"], "{f:?}");
        assert!(f[1].message.contains("already consumed"), "{f:?}");
    }

    #[test]
    fn a_state_the_bridge_never_issued_or_no_state_must_not_be_accepted() {
        let mut m = parked();
        m.host_sent("a", &retry(2, "st1A"));
        m.host_received("a", 2, &done(2));
        m.host_sent("a", &mcall(3, json!({"inputResponses": {}})));
        m.host_received("a", 3, &done(3));
        assert_eq!(reqs(m.findings()), ["BR-STATELESS-22", "BR-STATELESS-22"]);
    }

    #[test]
    fn answers_no_accepted_retry_carried_break_br_stateless_22_after_a_refusal() {
        // The refused retry's answer reached the tool process; the frame is read after the
        // refusal, as the transcript shows it.
        let mut m = parked();
        m.host_sent("a", &retry(2, "st1"));
        m.host_received("a", 2, &refused(2));
        m.tool_received(&answer("s1", ""));
        let f = m.finish(5);
        assert!(reqs(&f).starts_with(&["BR-STATELESS-22"]), "{f:?}");
        // Refused, and nothing sent: no finding of that kind (the call stays parked).
        let mut m = parked();
        m.host_sent("a", &retry(2, "st1"));
        m.host_received("a", 2, &refused(2));
        m.tool_received(&env::cancel("c1"));
        m.tool_received(&answer("s1", "T_MRTR"));
        assert_eq!(m.finish(5), vec![]);
    }

    #[test]
    fn an_input_required_result_needs_a_call_with_input_outstanding() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &mcall(1, json!({})));
        m.tool_received(&env::call_tool("ask", r#"{"q":1}"#).with_rid("c1"));
        // No input request of the tool process yet.
        m.host_received("a", 1, &irr(1, "st1"));
        // A modern call the bridge never forwarded.
        m.host_sent("a", &mcall(2, json!({"name": "other"})));
        m.host_received("a", 2, &irr(2, "st2"));
        let f = reqs(m.findings()).into_iter().collect::<Vec<_>>();
        assert_eq!(f, ["BR-STATELESS-17", "BR-STATELESS-17"]);
    }

    #[test]
    fn a_modern_call_s_input_sent_to_the_host_as_a_legacy_request_breaks_br_sampling_02() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &mcall(1, json!({})));
        m.tool_received(&env::call_tool("ask", r#"{"q":1}"#).with_rid("c1"));
        m.tool_sent(&sampling("s1"));
        m.host_received(
            "a",
            1,
            &json!({"jsonrpc": "2.0", "id": "x", "method": "sampling/createMessage", "params": {}}),
        );
        assert_eq!(reqs(m.findings()), ["BR-SAMPLING-02"]);
    }

    #[test]
    fn a_parked_call_never_cancelled_breaks_br_stateless_26_at_the_end() {
        assert_eq!(reqs(&parked().finish(5)), ["BR-STATELESS-26", "BR-SAMPLING-01"]);
        let mut m = parked();
        m.tool_received(&env::cancel("c1"));
        m.tool_received(&answer("s1", "T_MRTR"));
        assert_eq!(m.finish(5), vec![]);
    }

    #[test]
    fn tagged_notifications_need_an_open_listen_subscription_and_stop_once_it_is_cancelled() {
        let tagged = |id: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}}})
        };
        let mut m = BridgeModel::new();
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true}, "_meta": meta()}}));
        m.host_received("a", 1, &tagged("L"));
        m.host_received("a", 1, &tagged("nobody"));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}}));
        // Sent before the bridge read the cancellation: allowed.
        m.host_received("a", 2, &tagged("L"));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": meta()}}));
        m.host_received("a", 3, &json!({"jsonrpc": "2.0", "id": 9, "result": {"resultType": "complete"}}));
        m.host_received("a", 4, &tagged("L"));
        // The open subscription is not owed an answer; a second one left open neither.
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": "L2", "method": "subscriptions/listen", "params": {"notifications": {}, "_meta": meta()}}));
        assert_eq!(reqs(&m.finish(9)), ["BR-STATELESS-31", "BR-STATELESS-32"]);
    }
}
