//! A generated case written as a bridge scenario: the host's messages and waits, the tool
//! side's expectations and answers, in the scenario language the runner reads.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{
    Ask, BOp, BridgeCase, During, HOST_IGNORE, Id, Input, LISTS, MrtrEnd, Reply, TOOL_IGNORE, Tamper, modern_meta,
};
use crate::explore::yaml_out::{escape, flow_verbatim};

fn rpc(id: Option<&Id>, method: &str, params: Option<&Value>) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "method": method});
    if let Some(id) = id {
        m["id"] = id.json();
    }
    if let Some(p) = params {
        m["params"] = p.clone();
    }
    m
}

/// Lines of a scenario file being written.
struct Out {
    text: String,
    ids: Vec<Value>,
}

impl Out {
    /// A step `{key: value}`, written as `- key: <value in flow style>` so that `checks:` may
    /// follow.
    fn step(&mut self, v: Value) {
        let Value::Object(m) = v else { unreachable!("a step is a mapping") };
        let (k, v) = m.into_iter().next().expect("a step has its keyword");
        let _ = writeln!(self.text, "  - {k}: {}", flow_verbatim(&v));
    }

    fn step_checks(&mut self, v: Value, checks: &[&str]) {
        self.step(v);
        let _ = writeln!(self.text, "    checks: [{}]", checks.join(", "));
    }

    /// A literal value (its `$` doubled: no placeholder).
    fn lit(mut v: Value) -> Value {
        escape(&mut v);
        v
    }

    fn host_send(&mut self, m: Value) {
        self.step(json!({"host_send": {"message": Out::lit(m)}}));
    }

    /// Wait for the response to any request of the case so far.
    fn host_wait(&mut self, within: u64, checks: &[&str]) {
        let mut ids = self.ids.clone();
        ids.push(Value::Null);
        let ids = Out::lit(Value::Array(ids));
        self.step_checks(
            json!({"host_expect": {"message": {"id": {"any_of": ids}}, "within_ms": within, "ignore": HOST_IGNORE}}),
            checks,
        );
    }
}

impl BridgeCase {
    /// The ops' count.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The same case with other ops (for shrinking).
    pub fn with_ops(&self, ops: Vec<BOp>) -> BridgeCase {
        BridgeCase { ops, ..self.clone() }
    }

    /// The case as a bridge scenario file.
    pub fn scenario_yaml(&self, id: &str, title: &str, requirements: &[&str], notes: &str) -> String {
        let mut o = Out { text: String::new(), ids: vec![self.init_id.json()] };
        let _ = writeln!(o.text, "id: {id}");
        let _ = writeln!(o.text, "title: {}", flow_verbatim(&Out::lit(json!(title))));
        let _ = writeln!(o.text, "requirements: [{}]", requirements.join(", "));
        let _ = writeln!(o.text, "level: MUST");
        let _ = writeln!(o.text, "role: bridge");
        if !notes.is_empty() {
            let _ = writeln!(o.text, "notes: |");
            for l in notes.lines() {
                let _ = writeln!(o.text, "  {l}");
            }
        }
        let _ = writeln!(o.text, "timeout_ms: {}", 20_000 + 6_000 * self.ops.len() as u64);
        let _ = writeln!(o.text, "steps:");
        o.step(json!({"tool_handshake": *LISTS}));
        if self.legacy {
            let caps =
                if self.capabilities { json!({"sampling": {}, "roots": {"listChanged": true}}) } else { json!({}) };
            o.host_send(rpc(
                Some(&self.init_id),
                "initialize",
                Some(&json!({"protocolVersion": self.version, "capabilities": caps, "clientInfo": {"name": "explore", "version": "1"}})),
            ));
            o.host_wait(10_000, &["BR-MCP-19"]);
            o.host_send(rpc(None, "notifications/initialized", None));
        }
        for op in &self.ops {
            o.ids.extend(op.ids());
            op.write(&mut o);
        }
        // Late answers (a cancelled call's) have time to arrive and reach the transcript.
        o.step(json!({"sleep": {"ms": 200}}));
        o.text
    }
}

impl BOp {
    fn write(&self, o: &mut Out) {
        match self {
            BOp::Ping { id } => {
                o.host_send(rpc(Some(id), "ping", None));
                o.host_wait(3000, &["BR-MCP-08"]);
            }
            BOp::Local { id, method, params } => {
                o.host_send(rpc(Some(id), method, params.as_ref()));
                o.host_wait(3000, &["BR-MCP-19"]);
            }
            BOp::Refused { id, params } => {
                o.host_send(rpc(Some(id), "tools/call", Some(params)));
                o.host_wait(3000, &["BR-CALL-03", "BR-CALL-04"]);
            }
            BOp::Notify { method, params } => o.host_send(rpc(None, method, params.as_ref())),
            BOp::Line { text } => {
                o.step(json!({"host_send": {"line": Out::lit(json!(text))}}));
                // -32700 or -32600 with id null (a batch: -32600 under 2025-06-18).
                o.host_wait(3000, &["BR-MCP-16", "BR-MCP-17", "BR-MCP-21"]);
            }
            BOp::Call { id, n, token, during, reply, unknown_fields, modern } => {
                let mut params = json!({"name": "echo", "arguments": {"n": n}});
                if let Some(m) = modern {
                    params["_meta"] = modern_meta(json!({}));
                    if let Some(level) = m.log_level {
                        params["_meta"]["io.modelcontextprotocol/logLevel"] = json!(level);
                    }
                }
                if let Some(t) = token {
                    params["_meta"]["progressToken"] = json!(t);
                }
                o.host_send(rpc(Some(id), "tools/call", Some(&params)));
                let mut call = json!({"name": "echo", "arguments_json": {"json": {"equals": {"n": n}}}});
                let mut checks = vec!["BR-CALL-01", "BR-CALL-02"];
                if token.is_some() {
                    call["progress_token"] = json!({"not": "", "capture": format!("pt{n}")});
                    checks.push("BR-PROGRESS-01");
                }
                o.step_checks(
                    json!({"expect": {"envelope": {"request_id": {"capture": format!("c{n}")}, "call_tool": call}, "within_ms": 3000, "ignore": TOOL_IGNORE}}),
                    &checks,
                );
                let rid = format!("${{c{n}}}");
                for (k, d) in during.iter().enumerate() {
                    match d {
                        During::Progress(count) => {
                            for p in 1..=*count {
                                o.step(json!({"send": {"request_id": "", "progress": {"progress_token": format!("${{pt{n}}}"), "progress": p, "total": count, "message": format!("step {p}")}}}));
                            }
                        }
                        During::Logs(count) => {
                            for l in 0..*count {
                                let level = ["info", "error", "debug"][l as usize % 3];
                                o.step(json!({"send": {"request_id": "", "log": {"level": level, "logger": "explore", "data_json": format!("{{\"n\":{n}}}")}}}));
                            }
                        }
                        During::Sampling | During::Roots => {
                            let srid = format!("s{n}-{k}");
                            let (ask, answer, req) = match d {
                                During::Sampling => (
                                    json!({"sampling_request": {"messages_json": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "max_tokens": 10}}),
                                    "sampling_response",
                                    "BR-SAMPLING-01",
                                ),
                                _ => (json!({"list_roots_request": {}}), "list_roots_response", "BR-ROOTS-01"),
                            };
                            let mut env = ask;
                            env["request_id"] = json!(srid);
                            o.step(json!({"send": env}));
                            let mut want = json!({"request_id": srid});
                            want[answer] = json!({});
                            o.step_checks(
                                json!({"expect": {"envelope": want, "within_ms": 5000, "ignore": TOOL_IGNORE}}),
                                &[req],
                            );
                        }
                        During::Stray => {
                            o.step(json!({"send": {"request_id": format!("stray-{n}-{k}"), "call_result": {"result_json": "[]"}}}));
                        }
                        During::ToolList { enable } => {
                            let arm = if *enable { "enable_tools" } else { "disable_tools" };
                            let mut env = json!({"request_id": ""});
                            env[arm] = json!({"tool_names": ["spare"]});
                            o.step(json!({"send": env}));
                        }
                        During::Unknown => {
                            o.step(json!({"send": {"request_id": "", "unknown_fields": [
                                {"number": 99, "message": {"unknown_fields": [{"number": 1, "text": "an unknown arm"}]}},
                                {"number": 1000, "bytes_hex": "0102"}
                            ]}}));
                        }
                    }
                }
                reply.write(o, &rid, *unknown_fields);
                o.host_wait(5000, &["BR-MCP-19"]);
            }
            BOp::Ask { id, n, ask, modern } => {
                let (method, params, want, answer, checks): (&str, Value, Value, Value, &[&str]) = match ask {
                    Ask::Read(uri) => (
                        "resources/read",
                        json!({"uri": uri}),
                        json!({"read_resource_request": {"uri": uri}}),
                        json!({"read_resource_response": {"contents": [{"uri": uri, "mime_type": "text/plain", "text": format!("r{n}")}]}}),
                        &["BR-RESOURCE-03"],
                    ),
                    Ask::Prompt(who) => (
                        "prompts/get",
                        json!({"name": "greet", "arguments": {"who": who}}),
                        json!({"get_prompt_request": {"name": "greet"}}),
                        json!({"get_prompt_response": {"description": "hello", "messages": [{"role": "user", "content_json": json!({"type": "text", "text": format!("Hi {who}")}).to_string()}]}}),
                        &["BR-PROMPT-04"],
                    ),
                    Ask::Complete(value) => (
                        "completion/complete",
                        json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": value}}),
                        json!({"completion_request": {"ref_name": "greet", "argument_name": "who"}}),
                        json!({"completion_response": {"values": ["Ada", "Alan"], "total": 2}}),
                        &["BR-COMPLETE-01"],
                    ),
                };
                let mut params = params;
                if *modern {
                    params["_meta"] = modern_meta(json!({}));
                }
                o.host_send(rpc(Some(id), method, Some(&params)));
                let mut expect = want;
                expect["request_id"] = json!({"capture": format!("a{n}")});
                o.step_checks(
                    json!({"expect": {"envelope": expect, "within_ms": 3000, "ignore": TOOL_IGNORE}}),
                    checks,
                );
                let mut reply = answer;
                reply["request_id"] = json!(format!("${{a{n}}}"));
                o.step(json!({"send": reply}));
                o.host_wait(5000, &["BR-MCP-19"]);
            }
            BOp::Cancel { id, n, ping } => {
                o.host_send(rpc(Some(id), "tools/call", Some(&json!({"name": "slow", "arguments": {"n": n}}))));
                o.step_checks(
                    json!({"expect": {"envelope": {"request_id": {"capture": format!("c{n}")}, "call_tool": {"name": "slow"}}, "within_ms": 3000, "ignore": TOOL_IGNORE}}),
                    &["BR-CALL-01"],
                );
                o.host_send(rpc(
                    None,
                    "notifications/cancelled",
                    Some(&json!({"requestId": id.json(), "reason": "explore"})),
                ));
                o.step_checks(
                    json!({"expect": {"envelope": {"request_id": "", "cancel": {"request_id": format!("${{c{n}}}")}}, "within_ms": 2000}}),
                    &["BR-CANCEL-01"],
                );
                o.step(json!({"send": {"request_id": format!("${{c{n}}}"), "call_result": {"result_json": "[{\"type\":\"text\",\"text\":\"late\"}]"}}}));
                o.host_send(rpc(Some(ping), "ping", None));
                o.host_wait(3000, &["BR-MCP-08"]);
            }
            BOp::ModernLocal { id, method, params } => {
                o.host_send(rpc(Some(id), method, Some(params)));
                o.host_wait(3000, &["BR-MCP-19"]);
            }
            BOp::Mrtr { ids, n, first, end, reply } => mrtr(o, ids, *n, *first, end, reply),
            BOp::Listen { id, after } => {
                let meta = modern_meta(json!({}));
                o.host_send(rpc(
                    Some(id),
                    "subscriptions/listen",
                    Some(&json!({"notifications": {"toolsListChanged": true}, "_meta": meta})),
                ));
                let tagged = json!({"_meta": {"io.modelcontextprotocol/subscriptionId": Out::lit(id.json())}});
                o.step_checks(
                    json!({"host_expect": {"message": {"method": "notifications/subscriptions/acknowledged", "params": tagged}, "within_ms": 3000, "ignore": HOST_IGNORE}}),
                    &["BR-STATELESS-30"],
                );
                // Whatever the state of `spare`, one of the two is a change.
                o.step(json!({"send": {"request_id": "", "disable_tools": {"tool_names": ["spare"]}}}));
                o.step(json!({"send": {"request_id": "", "enable_tools": {"tool_names": ["spare"]}}}));
                let ignore: Vec<&str> =
                    HOST_IGNORE.iter().copied().filter(|m| *m != "notifications/tools/list_changed").collect();
                o.step_checks(
                    json!({"host_expect": {"message": {"method": "notifications/tools/list_changed", "params": tagged}, "within_ms": 2000, "ignore": ignore}}),
                    &["BR-STATELESS-31"],
                );
                o.host_send(rpc(None, "notifications/cancelled", Some(&json!({"requestId": id.json()}))));
                // Once this is answered the bridge has read the cancellation (stdin in order).
                o.host_send(rpc(Some(after), "server/discover", Some(&json!({"_meta": meta}))));
                o.host_wait(3000, &["BR-STATELESS-08"]);
            }
            BOp::Die { id, n, ping } => {
                o.host_send(rpc(Some(id), "tools/call", Some(&json!({"name": "slow", "arguments": {"n": n}}))));
                o.step_checks(
                    json!({"expect": {"envelope": {"request_id": {"capture": format!("c{n}")}, "call_tool": {"name": "slow"}}, "within_ms": 3000, "ignore": TOOL_IGNORE}}),
                    &["BR-CALL-01"],
                );
                o.step(json!({"close": {}}));
                o.host_wait(3000, &["BR-LIFECYCLE-03"]);
                o.host_send(rpc(Some(ping), "ping", None));
                o.host_wait(3000, &["BR-LIFECYCLE-04"]);
                // The successor's start-up (BR-LIFECYCLE-05: the bridge restarts it).
                let mut again = LISTS.clone();
                again["within_ms"] = json!(5000);
                o.step_checks(json!({"tool_handshake": again}), &["BR-LIFECYCLE-05"]);
                // No event marks the moment the bridge puts the new connection in service; a
                // call before it may rightly get an error (BR-LIFECYCLE-06): T_PROMPT.
                o.step(json!({"sleep": {"ms": 1000}}));
            }
        }
    }
}

impl Reply {
    fn write(&self, o: &mut Out, rid: &str, unknown_fields: bool) {
        match self {
            Reply::Frame { result_json, is_error } => {
                let mut r = json!({"result_json": Out::lit(json!(result_json))});
                if *is_error {
                    r["is_error"] = json!(true);
                }
                if unknown_fields {
                    r["unknown_fields"] = json!([{"number": 77, "varint": 3}]);
                }
                o.step(json!({"send": {"request_id": rid, "call_result": r}}));
            }
            Reply::Structured => {
                o.step(json!({"send": {"request_id": rid, "call_result": {
                    "result_json": "[{\"type\":\"text\",\"text\":\"{\\\"answer\\\":42}\"}]",
                    "structured_content_json": "{\"answer\":42}"
                }}}));
            }
            Reply::Sideband { text, zstd } => {
                let bytes = if *zstd {
                    zstd::encode_all(text.as_bytes(), 3).expect("zstd encodes in memory")
                } else {
                    text.as_bytes().to_vec()
                };
                let mut h = json!({"request_id": rid, "field_name": "result_json", "size": bytes.len()});
                if *zstd {
                    h["compression"] = json!("zstd");
                    h["uncompressed_size"] = json!(text.len());
                }
                o.step(json!({"send": {"request_id": "", "raw_header": h}}));
                if !bytes.is_empty() {
                    o.step(json!({"send_raw": {"hex": hex(&bytes)}}));
                }
            }
            Reply::Stream { text, chunk } => {
                let bytes = text.as_bytes();
                // At most 16 chunks: a step each.
                let chunk = (*chunk).max(bytes.len().div_ceil(16)).max(1);
                o.step(json!({"send": {"request_id": rid, "stream_header": {"field_name": "result_json", "total_size": bytes.len(), "chunk_size": chunk}}}));
                let parts: Vec<&[u8]> = bytes.chunks(chunk).collect();
                for (i, p) in parts.iter().enumerate() {
                    let mut c = json!({"data": {"hex": hex(p)}});
                    if i + 1 == parts.len() {
                        c["final"] = json!(true);
                    }
                    o.step(json!({"send": {"request_id": rid, "stream_chunk": c}}));
                }
            }
        }
    }
}

/// The capabilities of a modern call that asks for input: both.
fn mrtr_caps() -> Value {
    modern_meta(json!({"sampling": {}, "roots": {}}))
}

impl Input {
    fn rid(self, n: u32, k: u32) -> String {
        format!("i{n}-{k}")
    }

    /// The tool side's request Envelope under `rid`.
    fn ask(self, n: u32, rid: &str) -> Value {
        match self {
            Input::Sampling => json!({"request_id": rid, "sampling_request": {
                "messages_json": [{"role": "user", "content": {"type": "text", "text": format!("q{n}")}}], "max_tokens": 10}}),
            Input::Roots => json!({"request_id": rid, "list_roots_request": {}}),
        }
    }

    /// The method of its entry in inputRequests (BR-STATELESS-19).
    fn method(self) -> &'static str {
        match self {
            Input::Sampling => "sampling/createMessage",
            Input::Roots => "roots/list",
        }
    }

    /// The host's answer in inputResponses.
    fn answer(self, n: u32) -> Value {
        match self {
            Input::Sampling => {
                json!({"role": "assistant", "content": {"type": "text", "text": format!("a{n}")}, "model": "m"})
            }
            Input::Roots => json!({"roots": [{"uri": format!("file:///r{n}"), "name": "r"}]}),
        }
    }

    /// The answer's Envelope as the tool side awaits it under `rid` (BR-STATELESS-23).
    fn answered(self, n: u32, rid: &str) -> Value {
        match self {
            Input::Sampling => json!({"request_id": rid, "sampling_response": {"model": "m"}}),
            Input::Roots => {
                json!({"request_id": rid, "list_roots_response": {"roots": [{"uri": format!("file:///r{n}")}]}})
            }
        }
    }

    /// Its refusal (an error, an empty list: BR-STATELESS-26/27).
    fn refused(self, rid: &str) -> Value {
        match self {
            Input::Sampling => json!({"request_id": rid, "sampling_response": {"error": {"not_empty": true}}}),
            Input::Roots => json!({"request_id": rid, "list_roots_response": {}}),
        }
    }

    fn other(self) -> Input {
        match self {
            Input::Sampling => Input::Roots,
            Input::Roots => Input::Sampling,
        }
    }
}

/// A modern tools/call of `echo` with `arguments`, as the host writes it: the literal parts
/// escaped, `state` (a placeholder, or none) and `answers` ((key placeholder, answer)) as they
/// are, so the runner puts in what was captured.
fn retry(id: &Id, arguments: Value, state: Option<&str>, answers: &[(String, Value)]) -> Value {
    let mut m = Out::lit(rpc(
        Some(id),
        "tools/call",
        Some(&json!({"name": "echo", "arguments": arguments, "_meta": mrtr_caps()})),
    ));
    if let Some(s) = state {
        m["params"]["requestState"] = json!(s);
    }
    let mut responses = serde_json::Map::new();
    for (k, a) in answers {
        responses.insert(k.clone(), Out::lit(a.clone()));
    }
    m["params"]["inputResponses"] = Value::Object(responses);
    m
}

/// An InputRequiredResult awaited for `id`: its state captured as `state`, one input request of
/// `input` under a key captured as `key` (or equal to the key `key` holds: `again`).
fn input_required(o: &mut Out, id: &Id, state: &str, key: &str, again: bool, input: Input, checks: &[&str]) {
    let key = if again { json!(format!("${{{key}}}")) } else { json!({"capture": key}) };
    o.step_checks(
        json!({"host_expect": {"message": {"id": Out::lit(id.json()), "result": {
            "resultType": "input_required",
            "requestState": {"capture": state},
            "inputRequests": {"entries": [{"key": key, "value": {"method": input.method()}}]}
        }}, "within_ms": 3000, "ignore": HOST_IGNORE}}),
        checks,
    );
}

/// A retry the bridge must refuse with -32602 and without Envelope traffic (BR-STATELESS-22):
/// whatever it sent for the retry was written before the refusal, so 300 ms of quiet at the
/// tool side show it.
fn refused(o: &mut Out, id: &Id) {
    o.step_checks(
        json!({"host_expect": {"message": {"id": Out::lit(id.json()), "error": {"code": -32602}}, "within_ms": 3000, "ignore": HOST_IGNORE}}),
        &["BR-STATELESS-22"],
    );
    o.step_checks(json!({"expect_nothing": {"for_ms": 300}}), &["BR-STATELESS-22"]);
}

/// An MRTR round (spec §26.4) of a modern call of `echo`, ending as `end` says.
fn mrtr(o: &mut Out, ids: &[Id], n: u32, first: Input, end: &MrtrEnd, reply: &Reply) {
    let args = json!({"n": n});
    let (s1, k1, s2, k2) = (format!("s{n}a"), format!("k{n}a"), format!("s{n}b"), format!("k{n}b"));
    let (p1, pk1, p2, pk2) = (format!("${{{s1}}}"), format!("${{{k1}}}"), format!("${{{s2}}}"), format!("${{{k2}}}"));
    let rid1 = first.rid(n, 1);
    let call = format!("c{n}");
    o.host_send(Out::lit(rpc(
        Some(&ids[0]),
        "tools/call",
        Some(&json!({"name": "echo", "arguments": args, "_meta": mrtr_caps()})),
    )));
    o.step_checks(
        json!({"expect": {"envelope": {"request_id": {"capture": call}, "call_tool": {"name": "echo", "arguments_json": {"json": {"equals": args}}}}, "within_ms": 3000, "ignore": TOOL_IGNORE}}),
        &["BR-CALL-01", "BR-CALL-02"],
    );
    o.step(json!({"send": first.ask(n, &rid1)}));
    input_required(o, &ids[0], &s1, &k1, false, first, &["BR-STATELESS-17"]);
    let answer1 = vec![(pk1.clone(), first.answer(n))];
    let rid = format!("${{{call}}}");
    // The retry `id` with the first round's answer: the answer reaches the tool process, its
    // result answers the retry.
    let finish = |o: &mut Out, id: &Id, state: &str, answers: &[(String, Value)], input: Input, rid_in: &str| {
        o.step(json!({"host_send": {"message": retry(id, args.clone(), Some(state), answers)}}));
        o.step_checks(
            json!({"expect": {"envelope": input.answered(n, rid_in), "within_ms": 3000, "ignore": TOOL_IGNORE}}),
            &["BR-STATELESS-23"],
        );
        reply.write(o, &rid, false);
        o.host_wait(5000, &["BR-MCP-19"]);
    };
    match end {
        MrtrEnd::All => finish(o, &ids[1], &p1, &answer1, first, &rid1),
        MrtrEnd::Late(ms) => {
            o.step(json!({"sleep": {"ms": ms}}));
            finish(o, &ids[1], &p1, &answer1, first, &rid1);
        }
        MrtrEnd::Unanswered { replay } => {
            o.step(json!({"host_send": {"message": retry(&ids[1], args.clone(), Some(&p1), &[])}}));
            input_required(o, &ids[1], &s2, &k1, true, first, &["BR-STATELESS-24"]);
            if *replay {
                o.step(json!({"host_send": {"message": retry(&ids[2], args.clone(), Some(&p1), &answer1)}}));
                refused(o, &ids[2]);
            }
            finish(o, &ids[3], &p2, &answer1, first, &rid1);
        }
        MrtrEnd::Parked => {
            let second = first.other();
            let rid2 = second.rid(n, 2);
            o.step(json!({"send": second.ask(n, &rid2)}));
            o.step(json!({"host_send": {"message": retry(&ids[1], args.clone(), Some(&p1), &answer1)}}));
            o.step_checks(
                json!({"expect": {"envelope": first.answered(n, &rid1), "within_ms": 3000, "ignore": TOOL_IGNORE}}),
                &["BR-STATELESS-23"],
            );
            input_required(o, &ids[1], &s2, &k2, false, second, &["BR-STATELESS-24"]);
            finish(o, &ids[2], &p2, &[(pk2, second.answer(n))], second, &rid2);
        }
        MrtrEnd::Tampered(t) => {
            let bad = match t {
                Tamper::Appended => retry(&ids[1], args.clone(), Some(&format!("{p1}A")), &answer1),
                Tamper::OtherArguments => retry(&ids[1], json!({"n": n + 100_000}), Some(&p1), &answer1),
                Tamper::NoState => retry(&ids[1], args.clone(), None, &answer1),
            };
            o.step(json!({"host_send": {"message": bad}}));
            refused(o, &ids[1]);
            finish(o, &ids[2], &p1, &answer1, first, &rid1);
        }
        MrtrEnd::Replay => {
            finish(o, &ids[1], &p1, &answer1, first, &rid1);
            o.step(json!({"host_send": {"message": retry(&ids[2], args.clone(), Some(&p1), &answer1)}}));
            refused(o, &ids[2]);
        }
        MrtrEnd::Early => {
            reply.write(o, &rid, false);
            o.step_checks(
                json!({"expect": {"envelope": first.refused(&rid1), "within_ms": 3000, "ignore": TOOL_IGNORE}}),
                &["BR-STATELESS-27"],
            );
            o.step(json!({"host_send": {"message": retry(&ids[1], args.clone(), Some(&p1), &answer1)}}));
            o.host_wait(3000, &["BR-STATELESS-27"]);
        }
        MrtrEnd::Never => {
            // T_MRTR is CALL_TIMEOUT (3 s in the catalogue): nothing before 2 s, the
            // cancellation and the input request's answer by T_MRTR + T_PROMPT (and some slack).
            o.step_checks(json!({"expect_nothing": {"for_ms": 2000}}), &["BR-STATELESS-26"]);
            o.step_checks(
                json!({"expect_any_order": {"envelopes": [{"cancel": {"request_id": rid}}, first.refused(&rid1)], "within_ms": 4000}}),
                &["BR-STATELESS-26"],
            );
            o.step(json!({"send": {"request_id": rid, "call_result": {"result_json": "[{\"type\":\"text\",\"text\":\"late\"}]"}}}));
            o.step(json!({"host_send": {"message": retry(&ids[1], args.clone(), Some(&p1), &answer1)}}));
            refused(o, &ids[1]);
        }
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}
