//! proto-mcp scenarios through the one loader: the catalogue loads, and bad input gets
//! `file:line:col: message` as a protomcp scenario does.

use std::path::Path;

use crate::{Action, Profile, load_dir, parse_str};

use super::*;

const HEADER: &str = "id: pm.test.one\ntitle: t\nrequirements: [PM-TOOLS-01]\nlevel: MUST\nprofile: proto-mcp\n";

fn load(steps: &str) -> Result<crate::Scenario, String> {
    parse_str(Path::new("pm.yaml"), &format!("{HEADER}steps:\n{steps}")).map_err(|e| e.to_string())
}

#[test]
fn the_whole_proto_mcp_catalogue_loads_with_the_one_loader() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/proto-mcp");
    let all = load_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert!(all.len() >= 76, "{}", all.len());
    assert!(all.iter().all(|s| s.profile == Profile::ProtoMcp));
}

#[test]
fn a_proto_mcp_send_with_an_unknown_field_is_reported_at_its_line_and_column() {
    let e = load("  - initialize: {}\n  - send: {id: 2, list_tools_request: {cursr: x}}\n").unwrap_err();
    assert!(e.starts_with("pm.yaml:8:11: "), "{e}");
    assert!(e.contains("unknown field `cursr`"), "{e}");
}

#[test]
fn an_unknown_pm_requirement_is_reported_where_it_is_cited() {
    let text = HEADER.replace("PM-TOOLS-01", "PM-NOPE-01") + "steps:\n  - initialize: {}\n";
    let e = parse_str(Path::new("pm.yaml"), &text).unwrap_err().to_string();
    assert!(e.starts_with("pm.yaml:3:16: ") && e.contains("PM-NOPE-01"), "{e}");
}

#[test]
fn a_step_with_two_keywords_is_refused_at_its_line_as_in_protomcp() {
    let e = load("  - initialize: {}\n    expect_alive: {}\n").unwrap_err();
    assert!(e.starts_with("pm.yaml:7:"), "{e}");
    assert!(e.contains("a step has one keyword"), "{e}");
}

#[test]
fn a_protomcp_step_in_a_proto_mcp_scenario_is_refused_and_the_reverse_too() {
    let e = load("  - handshake: {}\n").unwrap_err();
    assert!(e.starts_with("pm.yaml:7:5: ") && e.contains("protomcp step"), "{e}");
    let tp = "id: tp.one.two\ntitle: t\nrequirements: [TP-CONN-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - initialize: {}\n";
    let e = parse_str(Path::new("tp.yaml"), tp).unwrap_err().to_string();
    assert!(e.starts_with("tp.yaml:7:5: ") && e.contains("profile: proto-mcp"), "{e}");
}

#[test]
fn a_placeholder_nobody_captured_is_refused_but_the_configured_safe_tool_is_not() {
    let e = load("  - send: {id: 2, call_tool_request: {name: \"${tool}\"}}\n").unwrap_err();
    assert!(e.starts_with("pm.yaml:7:") && e.contains("`${tool}` is not defined"), "{e}");
    let s = load("  - send: {id: 2, call_tool_request: {name: \"${safe_tool}\"}}\n").unwrap();
    let Action::ProtoMcp(PmAction::Write(w)) = &s.steps[0].action else { panic!() };
    let caps = [("safe_tool".to_owned(), serde_json::json!("echo"))].into();
    let out = w.render(&caps).unwrap();
    assert_eq!(
        out.bytes,
        message_frame(&serde_json::json!({"id": 2, "call_tool_request": {"name": "echo"}})).unwrap().0
    );
}

#[test]
fn times_take_the_shared_grammar_and_a_zero_time_is_refused() {
    let s = load("  - expect_nothing: {for_ms: HANDSHAKE_QUIET}\n").unwrap();
    assert!(matches!(&s.steps[0].action, Action::ExpectNothing(e) if e.duration.as_millis() == 500));
    let e = load("  - expect_answer: {id: 2, arm: list_tools_response, within_ms: 0}\n").unwrap_err();
    assert!(e.contains("a time must be at least 1 ms"), "{e}");
}

#[test]
fn an_answer_pattern_uses_the_shared_matcher_on_the_messages_view() {
    let s = load("  - expect_answer: {id: 2, arm: list_tools_response, message: {list_tools_response: {tools: []}}}\n")
        .unwrap();
    let Action::ProtoMcp(PmAction::ExpectAnswer(e)) = &s.steps[0].action else { panic!() };
    let p = e.message.as_ref().unwrap();
    let empty = view::message(&protomcp_proto::mcp::McpMessage::with(
        2,
        protomcp_proto::mcp::pb::mcp_message::Payload::ListToolsResponse(Default::default()),
    ));
    let mut caps = crate::Captures::new();
    assert!(crate::match_value(p, Some(&empty), &mut caps).is_ok());
    let mut one = empty.clone();
    one["list_tools_response"]["tools"] = serde_json::json!([{"name": "echo"}]);
    assert!(crate::match_value(p, Some(&one), &mut caps).is_err());
}

#[test]
fn an_unknown_probe_and_a_wrong_probe_argument_are_refused_where_written() {
    let e = load("  - probe: tool\n").unwrap_err();
    assert!(e.starts_with("pm.yaml:7:12: ") && e.contains("unknown probe `tool`"), "{e}");
    let e = load("  - probe: {tools: {include: true}}\n").unwrap_err();
    assert!(e.starts_with("pm.yaml:7:21: ") && e.contains("no argument `include`"), "{e}");
}

#[test]
fn mutated_proto_mcp_files_never_panic_the_loader_and_every_error_has_a_place() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/proto-mcp");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet: &[u8] = b" :-{}[]'\"\n#,0123456789abcxyz${}_";
    let mut errors = 0;
    for path in crate::scenario_files(&dir).unwrap() {
        let seed = std::fs::read(&path).unwrap();
        for _ in 0..40 {
            let mut bytes = seed.clone();
            for _ in 0..(1 + next() % 3) {
                let at = (next() as usize) % (bytes.len() + 1);
                match next() % 3 {
                    0 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    1 if at < bytes.len() => bytes[at] = alphabet[(next() as usize) % alphabet.len()],
                    _ => bytes.insert(at, alphabet[(next() as usize) % alphabet.len()]),
                }
            }
            if let Err(e) = parse_str(Path::new("m.yaml"), &String::from_utf8_lossy(&bytes)) {
                errors += 1;
                assert!(e.iter().all(|x| x.line > 0 && x.col > 0), "{e}");
            }
        }
    }
    assert!(errors > 100, "only {errors} mutants were refused");
}
