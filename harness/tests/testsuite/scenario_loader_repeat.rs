//! `${repeat:N:TEXT}`: generated text in sends, refused in patterns, checked at load time.

use std::path::Path;

use protomcp_harness::scenario::template::{Captures, substitute};
use protomcp_harness::scenario::{Action, SendLine, parse_str};

const HEAD: &str = "id: bridge.x\ntitle: X\nrequirements: [BR-FRAME-04]\nlevel: MUST\nrole: bridge\nsteps:\n";

fn load(steps: &str) -> Result<protomcp_harness::scenario::Scenario, String> {
    parse_str(Path::new("dir/s.yaml"), &format!("{HEAD}{steps}")).map_err(|e| e.first().to_string())
}

#[test]
fn a_host_send_generates_the_payload() {
    let s = load(
        "  - host_send: {message: {jsonrpc: \"2.0\", id: 2, method: tools/call, params: {name: echo, arguments: {text: \"<${repeat:3:ab}>\"}}}}\n",
    )
    .unwrap();
    let Action::HostSend(SendLine::Json(v), _) = &s.steps[0].action else { panic!("{:?}", s.steps[0].action) };
    let sent = substitute(v, &Captures::new()).unwrap();
    assert_eq!(sent["params"]["arguments"]["text"], "<ababab>");
    let s = load("  - host_send: {message: {id: 1, text: \"${repeat:11000000:a}\"}}\n").unwrap();
    let Action::HostSend(SendLine::Json(v), _) = &s.steps[0].action else { panic!() };
    assert_eq!(substitute(v, &Captures::new()).unwrap()["text"].as_str().map(str::len), Some(11_000_000));
}

#[test]
fn malformed_or_misplaced_repeats_are_load_errors() {
    let e = load("  - host_send: {message: {text: \"${repeat:x:a}\"}}\n").unwrap_err();
    assert!(e.starts_with("dir/s.yaml:7:") && e.contains("repeat:N:TEXT"), "{e}");
    let e = load("  - host_send: {message: {text: \"${repeat:100000000:a}\"}}\n").unwrap_err();
    assert!(e.contains("more than"), "{e}");
    let e = load("  - host_expect: {message: {id: 1, result: {text: \"${repeat:2:a}\"}}}\n").unwrap_err();
    assert!(e.contains("patterns do not take it"), "{e}");
}
