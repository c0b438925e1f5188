//! `${fill:N:C}`: a message of exactly N bytes in sends, refused elsewhere with its place.

use std::path::Path;

use protomcp_harness::scenario::template::{Captures, substitute};
use protomcp_harness::scenario::{Action, SendLine, parse_str};

const BRIDGE: &str = "id: bridge.x\ntitle: X\nrequirements: [BR-FRAME-04]\nlevel: MUST\nrole: bridge\nsteps:\n";
const TP: &str = "id: framing.x\ntitle: X\nrequirements: [TP-FRAME-03]\nlevel: MUST\nrole: tool-process\nsteps:\n";

fn load(head: &str, steps: &str) -> Result<protomcp_harness::scenario::Scenario, String> {
    parse_str(Path::new("dir/s.yaml"), &format!("{head}{steps}")).map_err(|e| e.to_string())
}

#[test]
fn a_send_with_a_fill_writes_an_envelope_body_of_exactly_that_size() {
    let s = load(TP, "  - handshake: {}\n  - send: {request_id: c1, call_tool: {name: echo, arguments_json: {text: \"${fill:10485760:x}\"}}}\n")
        .unwrap();
    let Action::Send(t) = &s.steps[1].action else { panic!("{:?}", s.steps[1].action) };
    assert_eq!(t.body(&Captures::new()).unwrap().len(), 10_485_760);
}

#[test]
fn a_host_send_with_a_fill_writes_a_json_line_of_exactly_that_size() {
    let s = load(BRIDGE, "  - host_send: {message: {jsonrpc: \"2.0\", id: 2, method: tools/call, params: {name: echo, arguments: {text: \"${fill:4096:a}\"}}}}\n")
        .unwrap();
    let Action::HostSend(SendLine::Json(v), _) = &s.steps[0].action else { panic!("{:?}", s.steps[0].action) };
    assert_eq!(substitute(v, &Captures::new()).unwrap().to_string().len(), 4096);
}

#[test]
fn two_fills_in_one_message_are_a_load_error_at_the_second() {
    let e =
        load(TP, "  - handshake: {}\n  - send: {request_id: \"${fill:99:a}\", call_tool: {name: \"${fill:99:b}\"}}\n")
            .unwrap_err();
    assert!(
        e.starts_with("dir/s.yaml:8:") && e.contains("a second `${fill:…}` in one message (the first is at 8:"),
        "{e}"
    );
}

#[test]
fn a_fill_smaller_than_the_message_around_it_is_a_load_error_with_both_sizes() {
    let e = load(
        TP,
        "  - handshake: {}\n  - send: {request_id: c1, call_tool: {name: echo, arguments_json: \"${fill:10:x}\"}}\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("dir/s.yaml:8:") && e.contains("the Envelope body is 12 bytes without any fill, more than 10"),
        "{e}"
    );
    let e = load(BRIDGE, "  - host_send: {message: {jsonrpc: \"2.0\", id: 2, text: \"${fill:20:a}\"}}\n").unwrap_err();
    assert!(e.starts_with("dir/s.yaml:7:") && e.contains("the message's JSON text is 34 bytes"), "{e}");
}

#[test]
fn a_fill_in_a_pattern_or_an_http_request_is_a_load_error_that_names_where_it_goes() {
    let e = load(BRIDGE, "  - host_expect: {message: {id: 1, result: {text: \"${fill:20:a}\"}}}\n").unwrap_err();
    assert!(
        e.starts_with("dir/s.yaml:7:") && e.contains("only `send`, `send_frame: {body}` and `host_send: {message}`"),
        "{e}"
    );
    let e = load(
        "id: bridge.x\ntitle: X\nrequirements: [BR-HTTP-01]\nlevel: MUST\nrole: bridge\nneeds: [http]\nsteps:\n",
        "  - host_http: {method: POST, body: \"${fill:20:a}\", expect: {status: 200}}\n",
    )
    .unwrap_err();
    assert!(e.starts_with("dir/s.yaml:8:") && e.contains("`host_http` does not"), "{e}");
}

#[test]
fn a_malformed_fill_is_a_load_error_with_the_form_to_write() {
    let e = load(BRIDGE, "  - host_send: {message: {text: \"${fill:9:ab}\"}}\n").unwrap_err();
    assert!(e.starts_with("dir/s.yaml:7:") && e.contains("write `${fill:N:C}`"), "{e}");
}
