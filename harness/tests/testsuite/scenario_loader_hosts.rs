//! The scenario loader: what bridge scenarios say about a second host session (`host: b`), the
//! stream a host message must come on (`host_expect.stream`), the tool process's socket
//! (`shared_tmp`, `expect_socket_private`, `tool_connect_again`) and its end
//! (`expect_tool_exit`), SSE comments (`host_expect_comment`), the harness's own TCP port
//! (`tcp_listen`, `expect_no_tcp_connect`) and a frame or a host answer (`expect … or_host`).

use crate::loader::{first_error, parse};

use protomcp_harness::scenario::{Action, HostStream};
use serde_json::json;

const HTTP: &str = "id: bridge.http.x\ntitle: X\nrequirements: [BR-HTTP-19]\nlevel: MUST\nrole: bridge\nneeds: [http]\ntransports: [http]\n";
const BRIDGE: &str = "id: bridge.conn.x\ntitle: X\nrequirements: [BR-CONN-05]\nlevel: MUST\nrole: bridge\n";
const TP: &str = "id: calls.x\ntitle: X\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n";

#[test]
fn host_steps_name_the_host_they_act_on() {
    let s = parse(&format!(
        "{HTTP}steps:\n  - host_send: {{host: b, message: {{jsonrpc: \"2.0\", method: x}}}}\n  - host_expect: {{host: b, message: {{id: 1}}}}\n  - host_expect_nothing: {{host: b-2, for_ms: 5}}\n  - host_close: {{host: b}}\n  - host_send: {{line: x}}\n"
    ))
    .unwrap();
    let hosts: Vec<Option<&str>> = s.steps.iter().map(|st| st.host.as_deref()).collect();
    assert_eq!(hosts, [Some("b"), Some("b"), Some("b-2"), Some("b"), None]);
    assert!(matches!(s.steps[3].action, Action::HostClose));
}

#[test]
fn a_second_host_needs_http_and_a_plain_name() {
    let stdio = HTTP.replace("transports: [http]\n", "");
    let e = first_error(&format!("{stdio}steps:\n  - host_send: {{host: b, line: x}}\n"));
    assert_eq!(e, "dir/s.yaml:8:5: `host` needs `transports: [http]` (a second host is a second HTTP session)");
    let e = first_error(&format!("{HTTP}steps:\n  - host_send: {{host: \"b c\", line: x}}\n"));
    assert_eq!(e, "dir/s.yaml:9:23: host `b c`: a name of letters, digits, `-` and `_`");
    let e = first_error(&format!("{HTTP}steps:\n  - host_http: {{host: b, expect: {{status: 200}}}}\n"));
    assert!(e.contains("unknown field `host`"), "{e}");
}

#[test]
fn host_expect_stream_is_get_or_the_post_of_a_request() {
    let s = parse(&format!(
        "{HTTP}steps:\n  - host_expect: {{message: {{}}, stream: get}}\n  - host_expect: {{message: {{}}, stream: {{request: 2}}}}\n  - host_expect: {{message: {{}}, stream: {{request: a-1}}}}\n  - host_expect: {{message: {{}}}}\n"
    ))
    .unwrap();
    let streams: Vec<Option<HostStream>> = s
        .steps
        .iter()
        .map(|st| match &st.action {
            Action::HostExpect(e) => e.stream.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        streams,
        [Some(HostStream::Get), Some(HostStream::Request(json!(2))), Some(HostStream::Request(json!("a-1"))), None]
    );
    for bad in ["post", "{request: [1]}", "{get: 1}", "{request: 1, x: 2}"] {
        let e = first_error(&format!("{HTTP}steps:\n  - host_expect: {{message: {{}}, stream: {bad}}}\n"));
        assert!(e.starts_with("dir/s.yaml:9:"), "{bad}: {e}");
    }
    let stdio = HTTP.replace("transports: [http]\n", "");
    let e = first_error(&format!("{stdio}steps:\n  - host_expect: {{message: {{}}, stream: get}}\n"));
    assert_eq!(e, "dir/s.yaml:8:5: `host_expect.stream` needs `transports: [http]` (streams are HTTP's)");
}

#[test]
fn socket_steps_and_shared_tmp_belong_to_bridge_scenarios() {
    let s = parse(&format!(
        "{BRIDGE}shared_tmp: true\nsteps:\n  - expect_socket_private: {{}}\n  - tool_connect_again: {{}}\n  - tool_connect_again: {{within_ms: 300}}\n  - close: {{}}\n  - expect_tool_exit: {{within_ms: 5000}}\n"
    ))
    .unwrap();
    assert!(s.shared_tmp);
    let kws: Vec<&str> = s.steps.iter().map(|st| st.keyword()).collect();
    assert_eq!(kws, ["expect_socket_private", "tool_connect_again", "tool_connect_again", "close", "expect_tool_exit"]);
    assert!(matches!(s.steps[1].action, Action::ToolConnectAgain { within } if within.as_millis() == 1000));
    assert!(matches!(s.steps[2].action, Action::ToolConnectAgain { within } if within.as_millis() == 300));
    // The socket steps ask the connected tool process; the exit is of the one whose connection
    // ended, so it waits for no new connection.
    assert!(s.steps[0].action.needs_connection() && s.steps[1].action.needs_connection());
    assert!(!s.steps[4].action.needs_connection());
    assert!(!parse(&format!("{BRIDGE}steps:\n  - expect_socket_private: {{}}\n")).unwrap().shared_tmp);
    let e = first_error(&format!("{TP}shared_tmp: true\nsteps:\n  - close: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:6:13: shared_tmp belongs to bridge scenarios (role: bridge)");
    for step in ["expect_socket_private: {}", "tool_connect_again: {}", "expect_tool_exit: {}"] {
        let e = first_error(&format!("{TP}steps:\n  - {step}\n"));
        let kw = step.split(':').next().unwrap();
        assert_eq!(e, format!("dir/s.yaml:7:5: `{kw}` belongs to bridge scenarios (role: bridge)"));
    }
}

#[test]
fn host_send_headers_are_a_posts_and_need_http() {
    let s = parse(&format!(
        "{HTTP}steps:\n  - host_send: {{message: {{jsonrpc: \"2.0\", method: x}}, headers: {{Mcp-Param-Region: eu, Last-Event-ID: \"\"}}}}\n"
    ))
    .unwrap();
    let Action::HostSend(_, headers) = &s.steps[0].action else { panic!("{:?}", s.steps[0].action) };
    assert_eq!(
        headers,
        &[("Last-Event-ID".to_owned(), String::new()), ("Mcp-Param-Region".to_owned(), "eu".to_owned())]
    );
    let stdio = HTTP.replace("transports: [http]\n", "");
    let e = first_error(&format!("{stdio}steps:\n  - host_send: {{line: x, headers: {{A: b}}}}\n"));
    assert_eq!(e, "dir/s.yaml:8:5: `host_send.headers` needs `transports: [http]` (they are a POST's)");
    let e = first_error(&format!("{HTTP}steps:\n  - host_send: {{line: x, headers: {{A: \"${{x}}\"}}}}\n"));
    assert!(e.contains("header `A`"), "{e}");
}

#[test]
fn host_expect_comment_needs_http_and_may_name_its_stream() {
    let s = parse(&format!(
        "{HTTP}steps:\n  - host_expect_comment: {{stream: {{request: L1}}, within_ms: 31000}}\n  - host_expect_comment: {{}}\n"
    ))
    .unwrap();
    assert!(matches!(&s.steps[0].action,
        Action::HostExpectComment { stream: Some(HostStream::Request(id)), within } if *id == json!("L1") && within.as_millis() == 31000));
    assert!(
        matches!(&s.steps[1].action, Action::HostExpectComment { stream: None, within } if within.as_millis() == 1000)
    );
    assert!(s.steps[0].action.judges() && !s.steps[0].action.needs_connection());
    let stdio = HTTP.replace("transports: [http]\n", "");
    let e = first_error(&format!("{stdio}steps:\n  - host_expect_comment: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:8:5: `host_expect_comment` needs `transports: [http]` (SSE comments are HTTP's)");
    let e = first_error(&format!("{TP}steps:\n  - host_expect_comment: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:7:5: `host_expect_comment` belongs to bridge scenarios (role: bridge)");
}

#[test]
fn tcp_listen_binds_a_capture_for_the_tools_and_expect_no_tcp_connect() {
    let s = parse(&format!(
        "{BRIDGE}steps:\n  - tcp_listen: {{capture: p}}\n  - tool_handshake: {{tools: [{{name: t, input_schema_json: '{{\"$ref\":\"http://127.0.0.1:${{p}}/s.json\"}}'}}]}}\n  - expect_no_tcp_connect: {{listener: p, for_ms: 500}}\n"
    ))
    .unwrap();
    assert!(matches!(&s.steps[0].action, Action::TcpListen { capture } if capture == "p"));
    assert!(matches!(&s.steps[2].action,
        Action::ExpectNoTcpConnect { listener, duration } if listener == "p" && duration.as_millis() == 500));
    assert!(!s.steps[0].action.judges() && s.steps[2].action.judges());
    // The port is used before anything binds it: in the tools, and as the listener.
    let e = first_error(&format!(
        "{BRIDGE}steps:\n  - tool_handshake: {{tools: [{{name: t, description: \"${{p}}\"}}]}}\n  - tcp_listen: {{capture: p}}\n"
    ));
    assert!(e.starts_with("dir/s.yaml:7:") && e.contains("`${p}` is not defined"), "{e}");
    let e = first_error(&format!("{BRIDGE}steps:\n  - expect_no_tcp_connect: {{listener: q}}\n"));
    assert!(e.starts_with("dir/s.yaml:7:") && e.contains("`${q}` is not defined"), "{e}");
    let e = first_error(&format!("{BRIDGE}steps:\n  - tcp_listen: {{capture: 1p}}\n"));
    assert!(e.starts_with("dir/s.yaml:7:") && e.contains("no capture name"), "{e}");
    let e = first_error(&format!("{TP}steps:\n  - tcp_listen: {{capture: p}}\n"));
    assert_eq!(e, "dir/s.yaml:7:5: `tcp_listen` belongs to bridge scenarios (role: bridge)");
}

#[test]
fn expect_or_host_is_a_bridge_scenarios_and_excludes_or_close() {
    let s = parse(&format!(
        "{BRIDGE}steps:\n  - expect: {{envelope: {{call_tool: {{name: t}}}}, or_host: {{message: {{id: 2, result: {{isError: true}}}}, ignore: [notifications/tools/list_changed]}}}}\n"
    ))
    .unwrap();
    let Action::Expect(e) = &s.steps[0].action else { panic!("{:?}", s.steps[0].action) };
    assert_eq!(e.or_host.as_ref().map(|h| h.ignore.clone()), Some(vec!["notifications/tools/list_changed".to_owned()]));
    assert!(!e.or_close);
    let e = first_error(&format!("{TP}steps:\n  - expect: {{envelope: {{}}, or_host: {{message: {{id: 1}}}}}}\n"));
    assert_eq!(e, "dir/s.yaml:7:5: `expect` belongs to bridge scenarios (role: bridge)");
    let e = first_error(&format!(
        "{BRIDGE}steps:\n  - expect: {{envelope: {{}}, or_close: true, or_host: {{message: {{id: 1}}}}}}\n"
    ));
    assert!(e.contains("`or_host` and `or_close` exclude each other"), "{e}");
}
