//! The pattern matcher: every rule, with a passing and a failing case.

use bytes::Bytes;
use protomcp_harness::scenario::normalize::{sideband_value, stream_value};
use protomcp_harness::scenario::pattern::Compiler;
use protomcp_harness::scenario::yaml::parse_node;
use protomcp_harness::scenario::{Captures, Mismatch, Pattern, match_any_order, match_envelope};
use protomcp_proto::frame::Sideband;
use protomcp_proto::pb::RawHeader;
use protomcp_proto::sideband::StreamEvent;
use serde_json::{Value, json};

fn pattern(yaml: &str) -> Pattern {
    let node = parse_node(yaml).unwrap_or_else(|(loc, e)| panic!("{loc}: {e}"));
    Compiler::default().envelope(&node).unwrap_or_else(|e| panic!("{}: {e}", e.loc))
}

fn check(yaml: &str, actual: &Value) -> Result<Captures, Mismatch> {
    let mut caps = Captures::new();
    match_envelope(&pattern(yaml), actual, &mut caps).map(|()| caps)
}

#[track_caller]
fn ok(yaml: &str, actual: &Value) -> Captures {
    check(yaml, actual).unwrap_or_else(|m| panic!("{yaml} should match {actual}: {m}"))
}

#[track_caller]
fn mismatch(yaml: &str, actual: &Value) -> String {
    match check(yaml, actual) {
        Ok(_) => panic!("{yaml} should not match {actual}"),
        Err(m) => m.to_string(),
    }
}

fn result(rid: &str, result_json: &str) -> Value {
    json!({"request_id": rid, "call_result": {"result_json": result_json}})
}

#[test]
fn absent_keys_are_ignored_present_keys_must_match() {
    let v = result("r1", r#"[{"type":"text","text":"hi"}]"#);
    ok("{request_id: r1}", &v);
    ok("{}", &v);
    ok("{call_result: {}}", &v);
    assert_eq!(mismatch("{request_id: r2}", &v), r#"request_id: expected "r2", got "r1""#);
    assert_eq!(mismatch("{reload_response: {}}", &v), "reload_response: expected an object, got nothing (not present)");
}

#[test]
fn scalars_left_at_their_default_match_the_default() {
    let v = result("r1", "[]");
    ok("{call_result: {is_error: false, error: {absent: true}, enable_tools: []}}", &v);
    ok("{namespace: ''}", &v);
    assert_eq!(mismatch("{call_result: {is_error: true}}", &v), "call_result.is_error: expected true, got false");
    assert_eq!(mismatch("{namespace: x}", &v), r#"namespace: expected "x", got """#);
    // A message field has presence: no default.
    assert!(mismatch("{call_result: {error: {}}}", &v).starts_with("call_result.error: expected an object"));
}

#[test]
fn json_fields_compare_as_parsed_json() {
    let v = result("r1", r#"[ {"text" : "h\u0069 \u00e9", "type":"text", "annotations": {"p": 1}} ]"#);
    ok("{call_result: {result_json: [{type: text, text: hi é}]}}", &v);
    ok(r#"{call_result: {result_json: '[{"type": "text", "text": "hi é"}]'}}"#, &v);
    assert_eq!(
        mismatch("{call_result: {result_json: [{type: text, text: ho}]}}", &v),
        r#"call_result.result_json[0].text: expected "ho", got "hi é""#
    );
    assert!(
        mismatch("{call_result: {result_json: []}}", &v).starts_with("call_result.result_json: expected 0 elements")
    );
    // Numbers by value.
    let s = json!({"call_result": {"structured_content_json": "{\"answer\": 42.0, \"x\": 1e2}"}});
    ok("{call_result: {structured_content_json: {answer: 42, x: 100}}}", &s);
    ok(r#"{call_result: {structured_content_json: '{"answer":42}'}}"#, &s);
    assert!(mismatch("{call_result: {structured_content_json: {answer: 43}}}", &s).contains("expected 43, got 42.0"));
    // Not JSON at all.
    let bad = result("r1", "oops");
    assert!(mismatch("{call_result: {result_json: []}}", &bad).contains("not JSON"));
    ok("{call_result: {result_json: {equals: oops}}}", &bad);
}

#[test]
fn regex_contains_not_empty_absent() {
    let v = result("call-17", r#"[{"type":"text","text":"Tool not found: nope"}]"#);
    ok("{request_id: {regex: '^call-[0-9]+$'}}", &v);
    assert_eq!(
        mismatch("{request_id: {regex: '^req-'}}", &v),
        r#"request_id: expected {regex: "^req-"}, got "call-17""#
    );
    ok("{call_result: {result_json: [{text: {contains: 'not found: nope'}}]}}", &v);
    assert!(
        mismatch("{call_result: {result_json: [{text: {contains: Nope}}]}}", &v)
            .contains(r#"a string containing "Nope""#)
    );
    ok("{request_id: {not_empty: true}, namespace: {absent: true}}", &v);
    assert!(mismatch("{namespace: {not_empty: true}}", &v).starts_with("namespace: expected {not_empty: true}"));
    assert!(mismatch("{request_id: {absent: true}}", &v).starts_with("request_id: expected {absent: true}"));
    ok("{request_id: {absent: false}}", &v);
    let empty = json!({"call_result": {"result_json": "{}"}});
    assert!(mismatch("{call_result: {result_json: {json: {not_empty: true}}}}", &empty).contains("not_empty"));
    ok("{call_result: {result_json: {json: {}}}}", &empty);
}

#[test]
fn captures_bind_and_are_reused() {
    let v = json!({"request_id": "tp-1", "sampling_request": {"max_tokens": 256}});
    let caps = ok("{request_id: {capture: rid}, sampling_request: {max_tokens: {capture: n}}}", &v);
    assert_eq!(caps.get("rid"), Some(&json!("tp-1")));
    assert_eq!(caps.get("n"), Some(&json!(256)));
    // Later: the captured values fill placeholders in patterns.
    let later = pattern("{request_id: '${rid}', sampling_request: {max_tokens: '${n}'}}");
    let mut c = caps.clone();
    match_envelope(&later, &v, &mut c).unwrap();
    let other = json!({"request_id": "tp-2"});
    let m = match_envelope(&later, &other, &mut c).unwrap_err();
    assert_eq!(m.to_string(), r#"request_id: expected "tp-1", got "tp-2""#);
    let embedded = pattern("{request_id: {regex: '^${rid}$'}}");
    match_envelope(&embedded, &v, &mut c).unwrap();
    // A placeholder whose value holds regex syntax is matched literally.
    let mut dots: Captures = [("rid".to_owned(), json!("t.-1"))].into();
    assert!(match_envelope(&embedded, &v, &mut dots).is_err());
    // Unbound at run time: a mismatch that says so.
    let m = match_envelope(&later, &v, &mut Captures::new()).unwrap_err();
    assert!(m.expected.contains("`${rid}` is not bound"), "{m}");
    // Captures are unchanged when the match fails.
    let mut c = Captures::new();
    let p = pattern("{request_id: {capture: rid}, list_tools: {}}");
    assert!(match_envelope(&p, &v, &mut c).is_err());
    assert!(c.is_empty());
}

#[test]
fn any_of_and_not() {
    let v = result("c", r#"[{"type":"text","text":"cancelled"}]"#);
    let p = "{call_result: {result_json: [{text: {any_of: ['done 20', {contains: cancel}]}}]}}";
    ok(p, &v);
    let done = result("c", r#"[{"type":"text","text":"done 20"}]"#);
    ok(p, &done);
    let other = result("c", r#"[{"type":"text","text":"boom"}]"#);
    let m = mismatch(p, &other);
    assert!(m.starts_with("call_result.result_json[0].text: expected any of 2 alternatives"), "{m}");
    ok("{request_id: {not: d}}", &v);
    assert_eq!(mismatch("{request_id: {not: c}}", &v), r#"request_id: expected {not: "c"}, got "c""#);
    // Captures of a failed alternative do not leak.
    let caps = ok("{request_id: {any_of: [{regex: x, capture: a}, {capture: b}]}}", &v);
    assert_eq!(caps.keys().collect::<Vec<_>>(), ["b"]);
}

#[test]
fn lists_in_order_unordered_includes() {
    let v = json!({"active_tools": {"tool_names": ["echo", "narrow"]}});
    ok("{active_tools: {tool_names: [echo, narrow]}}", &v);
    assert_eq!(
        mismatch("{active_tools: {tool_names: [narrow, echo]}}", &v),
        r#"active_tools.tool_names[0]: expected "narrow", got "echo""#
    );
    ok("{active_tools: {tool_names: {unordered: [narrow, echo]}}}", &v);
    assert!(mismatch("{active_tools: {tool_names: {unordered: [narrow]}}}", &v).contains("1 elements in any order"));
    assert!(mismatch("{active_tools: {tool_names: [echo]}}", &v).contains("expected 1 elements"));
    ok("{active_tools: {tool_names: {includes: [narrow]}}}", &v);
    let m = mismatch("{active_tools: {tool_names: {includes: [secret]}}}", &v);
    assert!(m.contains(r#"an element matching pattern 1 ("secret")"#), "{m}");
    // Distinct elements: two patterns cannot share one element.
    assert!(check("{active_tools: {tool_names: {includes: [{regex: o}, {regex: h}]}}}", &v).is_ok());
    assert!(check("{active_tools: {tool_names: {includes: [{regex: w}, {regex: w}]}}}", &v).is_err());
    let tools = json!({"tool_list": {"tools": [
        {"name": "echo", "description": "Echo", "input_schema_json": "{\"type\":\"object\",\"required\":[\"text\"]}"},
        {"name": "secret", "description": "s"},
    ]}});
    ok("{tool_list: {tools: {includes: [{name: secret}, {name: echo, input_schema_json: {type: object}}]}}}", &tools);
    assert!(
        check("{tool_list: {tools: {includes: [{name: echo, input_schema_json: {type: array}}]}}}", &tools).is_err()
    );
}

#[test]
fn arm_via_equals_json_and_bytes() {
    let v = result("r", "[]");
    ok("{arm: call_result}", &v);
    ok("{arm: [log, call_result]}", &v);
    assert_eq!(mismatch("{arm: [log, progress]}", &v), "(envelope): expected arm log or progress, got arm call_result");
    assert_eq!(mismatch("{arm: log}", &json!({})), "(envelope): expected arm log, got no arm");
    ok("{via: frame}", &v);
    assert_eq!(mismatch("{via: [sideband, stream]}", &v), "(envelope): expected via sideband or stream, got via frame");
    // equals is exact: no extra keys.
    let s = json!({"call_result": {"structured_content_json": "{\"answer\":42,\"x\":1}"}});
    ok("{call_result: {structured_content_json: {json: {equals: {answer: 42, x: 1.0}}}}}", &s);
    assert!(check("{call_result: {structured_content_json: {json: {equals: {answer: 42}}}}}", &s).is_err());
    // A text element holding JSON (TP-CALL-17).
    let t = result("r", r#"[{"type":"text","text":"{\"answer\": 42}"}]"#);
    ok("{call_result: {result_json: [{text: {json: {answer: 42}}}]}}", &t);
    // Bytes: decoded as {hex, text}; the pattern may use either.
    let chunk = json!({"stream_chunk": {"data": {"hex": "30313233", "text": "0123"}, "final": true}});
    ok("{stream_chunk: {data: {text: '0123'}, final: true}}", &chunk);
    ok("{stream_chunk: {data: {hex: '30 31 32 33'}}}", &chunk);
    assert!(check("{stream_chunk: {data: {hex: '3031'}}}", &chunk).is_err());
    ok("{stream_chunk: {data: {absent: false}}}", &chunk);
    ok("{stream_header: {field_name: {absent: true}}}", &json!({"stream_header": {}}));
    // unknown_fields are matched like any list.
    let u = json!({"list_tools": {}, "unknown_fields": [{"number": 99, "varint": 7}]});
    ok("{unknown_fields: {includes: [{number: 99}]}}", &u);
}

#[test]
fn any_order_matching() {
    let values = vec![result("b", "[]"), result("a", "[1]"), result("c", "[2]")];
    let ps: Vec<Pattern> =
        ["{request_id: a}", "{request_id: b}", "{request_id: c, call_result: {result_json: [{capture: n}]}}"]
            .iter()
            .map(|y| pattern(y))
            .collect();
    let mut caps = Captures::new();
    assert_eq!(match_any_order(&ps, &values, &mut caps).unwrap(), vec![1, 0, 2]);
    assert_eq!(caps.get("n"), Some(&json!(2)));
    let wrong = vec![result("b", "[]"), result("a", "[1]"), result("a", "[2]")];
    let m = match_any_order(&ps, &wrong, &mut Captures::new()).unwrap_err();
    assert!(m.expected.contains("pattern 3"), "{m}");
    assert!(match_any_order(&ps, &values[..2], &mut Captures::new()).is_err());
    // Overlapping patterns still find the one arrangement that works.
    let loose: Vec<Pattern> = ["{request_id: {regex: '[ab]'}}", "{request_id: a}"].iter().map(|y| pattern(y)).collect();
    assert_eq!(match_any_order(&loose, &values[..2], &mut Captures::new()).unwrap(), vec![0, 1]);
}

#[test]
fn sideband_and_stream_results_match_like_frames() {
    let text = r#"[{"type":"text","text":"xxxx"}]"#;
    let p = r#"{request_id: c1, call_result: {is_error: false, result_json: [{type: text, text: {regex: '^x+$'}}]}}"#;
    ok(p, &result("c1", text));
    let header = RawHeader {
        request_id: "c1".into(),
        field_name: "result_json".into(),
        size: text.len() as u64,
        compression: String::new(),
        uncompressed_size: 0,
    };
    let sb = Sideband { offset: 0, header: header.clone(), payload: Ok(Bytes::from(text)) };
    let v = sideband_value(&sb, "");
    ok(p, &v);
    ok("{via: sideband, sideband: {envelope_rid: '', compression: '', size: 31}}", &v);
    assert!(mismatch("{via: frame}", &v).contains("got via sideband"));
    let bad = Sideband { offset: 0, header, payload: Err(protomcp_proto::sideband::SidebandError::Zstd("bad".into())) };
    let v = sideband_value(&bad, "x");
    assert!(mismatch(p, &v).starts_with("call_result: expected an object, got nothing"));
    ok("{sideband: {error: {contains: bad}, envelope_rid: x}}", &v);
    let done = StreamEvent::Complete {
        rid: "c1".into(),
        field_name: "result_json".into(),
        data: Bytes::from(text),
        violations: vec![],
    };
    let v = stream_value(&done).unwrap();
    ok(p, &v);
    ok("{via: [stream, sideband], stream: {field_name: result_json, violations: []}}", &v);
    assert!(stream_value(&StreamEvent::Progress { rid: "c1".into() }).is_none());
}

#[test]
fn patterns_from_json_values() {
    let p = Pattern::envelope_from_value(&json!({"request_id": "r", "call_result": {"result_json": [{"text": "a"}]}}))
        .unwrap();
    match_envelope(&p, &result("r", r#"[{"text":"a","type":"text"}]"#), &mut Captures::new()).unwrap();
    assert!(Pattern::envelope_from_value(&json!({"nope": 1})).is_err());
    let stderr = Pattern::value_from_value(&json!({"regex": "PROTOMCP_SOCKET"})).unwrap();
    protomcp_harness::scenario::match_value(
        &stderr,
        Some(&json!("PROTOMCP_SOCKET is not set\n")),
        &mut Captures::new(),
    )
    .unwrap();
}
