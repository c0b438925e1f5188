//! A generated case written as a bridge scenario: the host's messages and waits, the tool
//! side's expectations and answers, in the scenario language the runner reads.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Ask, BOp, BridgeCase, During, HOST_IGNORE, Id, LISTS, Reply, TOOL_IGNORE};
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
        let caps = if self.capabilities { json!({"sampling": {}, "roots": {"listChanged": true}}) } else { json!({}) };
        o.host_send(rpc(
            Some(&self.init_id),
            "initialize",
            Some(&json!({"protocolVersion": self.version, "capabilities": caps, "clientInfo": {"name": "explore", "version": "1"}})),
        ));
        o.host_wait(10_000, &["BR-MCP-19"]);
        o.host_send(rpc(None, "notifications/initialized", None));
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
            BOp::Call { id, n, token, during, reply, unknown_fields } => {
                let mut params = json!({"name": "echo", "arguments": {"n": n}});
                if let Some(t) = token {
                    params["_meta"] = json!({"progressToken": t});
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
            BOp::Ask { id, n, ask } => {
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

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}
