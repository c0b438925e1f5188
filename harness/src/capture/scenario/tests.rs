use super::steps::*;
use super::*;
use crate::capture::Recorded;
use std::path::Path;

fn at(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn ev(ms: u64, chan: Chan, item: Item) -> Recorded {
    Recorded { at: at(ms), chan, item }
}

fn frame(dir: Dir, tree: Value) -> Item {
    Item::Frame { dir, tree: Some(tree), hex: None, note: None }
}

fn host(dir: Dir, m: Value) -> Item {
    Item::Host { dir, message: Some(m), raw: None }
}

/// A pmcp-like session: the bridge picks rids, the host its JSON-RPC ids, the tool process
/// asks the host for a sample under a rid of its own.
fn session() -> Recording {
    use Dir::{FromTestee as FromBridge, ToTestee as ToBridge};
    let tp = Chan::Tool(1);
    Recording {
        bridge: vec!["pmcp".into(), "run".into(), "{tool}".into()],
        tool: vec!["python3".into(), "testee.py".into()],
        paths: vec!["/tmp/protomcp-conform-abc".into()],
        events: vec![
            ev(0, Chan::Host, host(ToBridge, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))),
            ev(5, tp, Item::Connected),
            ev(6, tp, frame(FromBridge, json!({"request_id": "b-7f3a", "list_tools": {}}))),
            ev(40, tp, frame(ToBridge, json!({"request_id": "b-7f3a", "tool_list": {"tools": [{"name": "echo"}]}}))),
            ev(41, tp, frame(ToBridge, json!({"reload_response": {"success": true}}))),
            ev(
                50,
                Chan::Host,
                host(FromBridge, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
            ),
            ev(
                60,
                Chan::Host,
                host(FromBridge, json!({"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {"name": "x"}}})),
            ),
            ev(
                100,
                Chan::Host,
                host(
                    ToBridge,
                    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a$b"}, "_meta": {"progressToken": "p1"}}}),
                ),
            ),
            ev(
                110,
                tp,
                frame(
                    FromBridge,
                    json!({"request_id": "b-8e2c", "call_tool": {"name": "echo", "arguments_json": "{\"text\":\"a$b\"}", "progress_token": "b-tok-1"}}),
                ),
            ),
            ev(120, tp, frame(ToBridge, json!({"request_id": "tp-s1", "sampling_request": {"max_tokens": 5}}))),
            ev(
                130,
                Chan::Host,
                host(
                    FromBridge,
                    json!({"jsonrpc": "2.0", "id": 900, "method": "sampling/createMessage", "params": {"maxTokens": 5}}),
                ),
            ),
            ev(140, Chan::Host, host(ToBridge, json!({"jsonrpc": "2.0", "id": 900, "result": {"role": "assistant"}}))),
            ev(150, tp, frame(FromBridge, json!({"request_id": "tp-s1", "sampling_response": {"role": "assistant"}}))),
            ev(160, tp, frame(ToBridge, json!({"progress": {"progress_token": "b-tok-1", "progress": 1}}))),
            ev(
                170,
                tp,
                frame(
                    ToBridge,
                    json!({"request_id": "b-8e2c", "call_result": {"result_json": "[{\"type\":\"text\",\"text\":\"/tmp/protomcp-conform-abc/tp-1.sock\"}]"}}),
                ),
            ),
            ev(
                180,
                Chan::Host,
                host(
                    FromBridge,
                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p1", "progress": 1}}),
                ),
            ),
            ev(
                190,
                Chan::Host,
                host(
                    FromBridge,
                    json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "ok"}]}}),
                ),
            ),
            ev(300, Chan::Host, Item::Host { dir: ToBridge, message: None, raw: Some(HOST_EOF.into()) }),
            ev(310, tp, Item::Eof),
            ev(320, tp, Item::Shutdown { how: "end of file".into() }),
            ev(400, Chan::Bridge, Item::Exit { status: "exit status 0".into() }),
        ],
        dropped: 0,
    }
}

fn loads(text: &str) {
    crate::scenario::parse_generated(Path::new("captured.yaml"), text).unwrap_or_else(|e| panic!("{e}\n{text}"));
}

#[test]
fn ids_the_peer_chose_are_captured_once_and_used_as_placeholders_after() {
    let mut v = Vars::new(&[]);
    let p = v.expect_envelope(&json!({"request_id": "x1", "sampling_request": {}}));
    assert_eq!(p["request_id"], json!({"capture": "rid_1"}));
    // The same value in the same step is captured again, not used as a placeholder yet.
    assert_eq!(v.expect_envelope(&json!({"request_id": "x1"}))["request_id"], json!({"capture": "rid_1"}));
    v.end_step();
    assert_eq!(v.send_envelope(&json!({"request_id": "x1"}))["request_id"], json!("${rid_1}"));
    assert_eq!(v.expect_envelope(&json!({"request_id": "x1"}))["request_id"], json!("${rid_1}"));
}

#[test]
fn ids_the_harness_sent_first_stay_literal_and_empty_ids_are_no_ids() {
    let mut v = Vars::new(&[]);
    assert_eq!(v.send_envelope(&json!({"request_id": "c1"}))["request_id"], json!("c1"));
    v.end_step();
    assert_eq!(v.expect_envelope(&json!({"request_id": "c1"}))["request_id"], json!("c1"));
    assert_eq!(v.expect_envelope(&json!({"request_id": ""}))["request_id"], json!(""));
    // JSON-RPC: a numeric id of the host stays a number; the bridge's own is captured.
    assert_eq!(v.send_message(&json!({"id": 3, "method": "ping"}))["id"], json!(3));
    assert_eq!(v.expect_message(&json!({"id": 3, "result": {}}))["id"], json!(3));
    assert_eq!(v.expect_message(&json!({"id": 4, "method": "ping"}))["id"], json!({"capture": "id_1"}));
    v.end_step();
    assert_eq!(v.send_message(&json!({"id": 4, "result": {}}))["id"], json!("${id_1}"));
    // Kinds do not mix: a rid "4" is not the JSON-RPC id 4.
    assert_eq!(v.expect_envelope(&json!({"request_id": "4"}))["request_id"], json!({"capture": "rid_1"}));
}

#[test]
fn literal_dollars_are_doubled_paths_become_regexes_and_matcher_shaped_data_is_quoted() {
    let mut v = Vars::new(&["/tmp/cap-1".into()]);
    assert_eq!(v.send_envelope(&json!({"call_tool": {"name": "a$b"}})), json!({"call_tool": {"name": "a$$b"}}));
    let p = v.expect_envelope(&json!({"log": {"data_json": "{\"path\":\"/tmp/cap-1/tp.sock\",\"regex\":\"x\"}"}}));
    assert_eq!(p["log"]["data_json"]["path"], json!({"regex": "^.*/tp\\.sock$$"}));
    let p = v.expect_envelope(&json!({"call_result": {"result_json": "{\"regex\":\"x\"}"}}));
    assert_eq!(p["call_result"]["result_json"], json!({"equals": {"regex": "x"}}));
    // A date-time takes any date-time; the rest stays literal.
    let p =
        v.expect_envelope(&json!({"log": {"data_json": "{\"msg\":\"at 2026-11-25T20:07:14.958Z in /tmp/cap-1/x\"}"}}));
    let re = p["log"]["data_json"]["msg"]["regex"].as_str().unwrap().replace("$$", "$");
    let re = regex::Regex::new(&re).unwrap();
    assert!(re.is_match("at 2031-01-02T03:04:05Z in /tmp/other/x"), "{re}");
    assert!(!re.is_match("at noon in /tmp/other/x"), "{re}");
    // Keys are no placeholders' places (the loader leaves them alone): kept as they are.
    assert_eq!(v.expect_message(&json!({"result": {"a$b": "x$y"}})), json!({"result": {"a$b": "x$$y"}}));
    assert_eq!(v.send_message(&json!({"params": {"a$b": "x$y"}})), json!({"params": {"a$b": "x$$y"}}));
    // JSON text that is no structure stays text (a string pattern of a *_json field is JSON).
    let p = v.expect_envelope(&json!({"log": {"data_json": "\"hi\""}}));
    assert_eq!(p["log"]["data_json"], json!("\"hi\""));
}

#[test]
fn the_field_order_of_a_peer_frame_is_not_expected_but_the_harness_sends_its_own() {
    let mut v = Vars::new(&[]);
    let t = json!({"request_id": "r", "list_tools": {}, "field_order": ["request_id", "list_tools"]});
    assert_eq!(v.expect_envelope(&t), json!({"request_id": {"capture": "rid_1"}, "list_tools": {}}));
    v.end_step();
    assert_eq!(v.send_envelope(&t)["field_order"], json!(["request_id", "list_tools"]));
}

#[test]
fn waits_are_three_times_the_delay_seen_plus_a_second_within_bounds() {
    assert_eq!(within(at(0), false), T_PROMPT);
    assert_eq!(within(at(10), false), 1100);
    assert_eq!(within(at(10), true), T_START);
    assert_eq!(within(at(1234), false), 4800);
    assert_eq!(within(Duration::from_secs(3600), false), WITHIN_MAX);
}

#[test]
fn the_tool_process_scenario_sends_what_the_bridge_sent_and_expects_what_the_tool_answered() {
    let text = tool_process(&session(), "capture.t").unwrap();
    loads(&text);
    assert!(text.contains("id: capture.t.tool-process\n"), "{text}");
    assert!(text.contains("requirements: [TP-CONCUR-01, TP-HANDSHAKE-02, TP-CALL-01]"), "{text}");
    assert!(text.contains(r#"  - send: {"list_tools":{},"request_id":"b-7f3a"}"#), "{text}");
    // The handshake burst is one group; the first wait is T_START.
    assert!(text.contains(r#"  - expect_any_order: {"envelopes":[{"request_id":"b-7f3a","tool_list""#), "{text}");
    assert!(text.contains(r#""within_ms":10000}"#), "{text}");
    // The tool process's own rid is captured and answered under the placeholder; the
    // bridge's `$` in the arguments is doubled.
    assert!(text.contains(r#"{"request_id":{"capture":"rid_1"},"sampling_request""#), "{text}");
    assert!(text.contains(r#"  - send: {"request_id":"${rid_1}","sampling_response""#), "{text}");
    assert!(text.contains(r#"a$$b"#), "{text}");
    assert!(text.contains(r#"{"regex":"^.*/tp\\-1\\.sock$$"}"#), "{text}");
    // The bridge closed first, then the tool process.
    assert!(text.contains("  - close: {mode: write}\n  - expect_close: {within_ms: 1100}\n"), "{text}");
    assert!(!text.contains("host_"), "{text}");
}

#[test]
fn the_bridge_scenario_plays_host_and_tool_and_captures_what_the_bridge_chose() {
    let text = bridge(&session(), "capture.t").unwrap();
    loads(&text);
    assert!(text.contains("id: capture.t.bridge\nt"), "{text}");
    assert!(text.contains("role: bridge\ntransports: [stdio]\nhost_requests: manual\n"), "{text}");
    assert!(text.contains("requirements: [BR-MCP-01, BR-HANDSHAKE-01, BR-CALL-01]"), "{text}");
    assert!(
        text.contains(
            r#"  - expect: {"envelope":{"list_tools":{},"request_id":{"capture":"rid_1"}},"within_ms":10000}"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"  - send: {"request_id":"${rid_1}","tool_list""#), "{text}");
    // The startup list_changed is not judged.
    assert!(!text.contains(r#""method":"notifications/tools/list_changed""#), "{text}");
    // The bridge's rid and token of the call are captured; the host's token stays literal.
    assert!(text.contains(r#""progress_token":{"capture":"token_1"}"#), "{text}");
    assert!(text.contains(r#""request_id":{"capture":"rid_2"}"#), "{text}");
    assert!(text.contains(r#"  - send: {"progress":{"progress":1,"progress_token":"${token_1}"}}"#), "{text}");
    assert!(text.contains(r#""params":{"progress":1,"progressToken":"p1"}"#), "{text}");
    // The tool process's sampling rid is the harness's own here: literal.
    assert!(text.contains(r#"  - send: {"request_id":"tp-s1","sampling_request""#), "{text}");
    // The bridge's request to the host: its id captured, answered under the placeholder.
    assert!(text.contains(r#""id":{"capture":"id_1"},"jsonrpc":"2.0","method":"sampling/createMessage""#), "{text}");
    assert!(text.contains(r#"  - host_send: {"message":{"id":"${id_1}""#), "{text}");
    assert!(text.contains("  - host_close: {}\n"), "{text}");
    assert!(
        text.contains("  - expect_close: {within_ms: 1100}\n  - expect_exit: {within_ms: 5000, code: 0}\n"),
        "{text}"
    );
    assert!(text.contains("--bridge 'pmcp run {mock}'"), "{text}");
}

#[test]
fn a_tool_process_the_bridge_ended_after_the_host_left_is_not_expected_to_close_by_itself() {
    // pmcp: on the end of stdin it ends the tool process, whose connection closes first.
    let mut s = session();
    let n = s.events.len();
    s.events.swap(n - 3, n - 2);
    let t = tool_process(&s, "capture.t").unwrap();
    loads(&t);
    assert!(!t.contains("expect_close") && !t.contains("close: {mode: write}"), "{t}");
    assert!(t.contains("# the connection ended here, after the host closed stdin"), "{t}");
    let b = bridge(&s, "capture.t").unwrap();
    loads(&b);
    assert!(b.contains("  - host_close: {}\n  - expect_close: {within_ms: 1100}\n  - expect_exit:"), "{b}");
    // Before the host left, the tool process's going away is the harness's `close`.
    let mut s = session();
    s.events.retain(|e| !matches!(e.item, Item::Eof | Item::Shutdown { .. }));
    s.events.insert(n - 4, ev(295, Chan::Tool(1), Item::Shutdown { how: "x".into() }));
    let b = bridge(&s, "capture.t").unwrap();
    assert!(b.contains("  - close: {}\n  - host_close: {}\n  - expect_exit:"), "{b}");
    let t = tool_process(&s, "capture.t").unwrap();
    assert!(t.contains("  - expect_close: {within_ms: 1500}\n"), "{t}");
}

#[test]
fn a_chunked_stream_is_expected_as_the_result_it_stands_for() {
    let mut s = session();
    let tp = Chan::Tool(1);
    let i = s
        .events
        .iter()
        .position(|e| matches!(&e.item, Item::Frame { tree: Some(t), .. } if t.get("call_result").is_some()))
        .unwrap();
    s.events.splice(
        i..=i,
        [
            ev(165, tp, frame(Dir::ToTestee, json!({"request_id": "b-8e2c", "stream_header": {"field_name": "result_json", "total_size": 4, "chunk_size": 2}}))),
            ev(166, tp, frame(Dir::ToTestee, json!({"request_id": "b-8e2c", "stream_chunk": {"data": {"text": "[{"}}}))),
            ev(170, tp, frame(Dir::ToTestee, json!({"request_id": "b-8e2c", "stream_chunk": {"data": {"text": "}]"}, "final": true}}))),
        ],
    );
    let t = tool_process(&s, "capture.t").unwrap();
    loads(&t);
    assert!(t.contains(r#"{"call_result":{"result_json":[{}]},"request_id":"b-8e2c"}"#), "{t}");
    assert!(!t.contains("stream_chunk"), "{t}");
    // The bridge scenario sends the frames as they were.
    let b = bridge(&s, "capture.t").unwrap();
    loads(&b);
    assert_eq!(b.matches("stream_chunk").count(), 2, "{b}");
}

#[test]
fn what_followed_the_capture_ending_the_bridge_is_not_replayed() {
    let mut s = session();
    let n = s.events.len();
    let signal = ev(305, Chan::Bridge, Item::Signal { name: ENDED_BY_CAPTURE.into() });
    s.events.insert(n - 3, signal);
    for t in [tool_process(&s, "capture.t").unwrap(), bridge(&s, "capture.t").unwrap()] {
        loads(&t);
        assert!(t.ends_with("  # the capture ended the bridge here (--grace, --max-time or a signal): what followed is not replayed\n"), "{t}");
        assert!(!t.contains("expect_close") && !t.contains("expect_exit"), "{t}");
    }
    // A comment comes after the peer's items before it.
    let b = bridge(&s, "capture.t").unwrap();
    assert!(b.contains(r#""text":"ok","type":"text"}]}}}"#), "{b}");
}

#[test]
fn sessions_a_scenario_cannot_replay_are_refused_with_the_reason() {
    let mut s = session();
    s.events.retain(|e| !matches!(e.chan, Chan::Tool(_)));
    let e = tool_process(&s, "capture.t").unwrap_err().to_string();
    assert!(e.contains("no tool process connected"), "{e}");
    let mut s = session();
    s.events.retain(|e| e.chan != Chan::Host || matches!(&e.item, Item::Host { raw: Some(r), .. } if r == HOST_EOF));
    assert!(bridge(&s, "capture.t").unwrap_err().to_string().contains("host's stdin or stdout"));
    let mut s = session();
    s.events.insert(3, ev(7, Chan::Tool(2), Item::Connected));
    let e = bridge(&s, "capture.t").unwrap_err().to_string();
    assert!(e.contains("one tool process at a time"), "{e}");
    let mut s = session();
    s.events.insert(
        4,
        ev(30, Chan::Tool(1), frame(Dir::ToTestee, json!({"request_id": "zz", "stream_chunk": {"final": true}}))),
    );
    let e = tool_process(&s, "capture.t").unwrap_err().to_string();
    assert!(e.contains("a stream frame of the tool process") && e.contains("without a StreamHeader"), "{e}");
}
