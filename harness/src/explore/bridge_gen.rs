//! Generated bridge sessions: a seed gives a [`BridgeCase`] (an initialize variant and a list of
//! [`BOp`]s, each a host request or notification together with what the tool process does about
//! it), and [`BridgeCase::scenario_yaml`] turns it into an ordinary bridge scenario (host steps and
//! tool-side steps in one script), so the normal bridge runner executes it and a shrunk case
//! replays as a file through `protomcp-conform --bridge … --scenarios FILE`.
//!
//! The steps are written so that a bridge that follows the spec passes them whatever it may
//! choose: every wait for the host side takes the response to *any* request of the case
//! (`host_expect: {message: {id: {any_of: […]}}}`) and passes over every notification and server
//! request, so the order of answers and the optional answer of a cancelled call cannot fail a
//! step; the tool side waits only for what the spec says the bridge sends. What the bridge
//! answered is judged afterwards, from the transcript, by the bridge model
//! ([`protomcp_proto::bridge_model`]).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::yaml_out::{escape, flow_verbatim};

/// The protocol versions an initialize may ask for (the last is one no bridge knows).
pub const VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05", "1999-01-01"];

/// Methods and notifications the host side passes over while it waits for a response.
pub const HOST_IGNORE: &[&str] = &[
    "notifications/progress",
    "notifications/message",
    "notifications/tools/list_changed",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/updated",
    "sampling/createMessage",
    "roots/list",
    "elicitation/create",
    "ping",
];

/// Tool-side arms passed over while the tool side waits for a CallToolRequest: cancellations
/// may come late (after a cancelled call's round), answers to reverse requests are awaited by
/// their own step.
const TOOL_IGNORE: &[&str] = &["cancel"];

/// A JSON-RPC id as the host writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Id {
    Int(i64),
    Str(String),
}

impl Id {
    pub fn json(&self) -> Value {
        match self {
            Id::Int(n) => json!(n),
            Id::Str(s) => json!(s),
        }
    }
}

/// How the tool process answers a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// One CallToolResponse frame with this result_json (typed blocks, untyped values, plain
    /// text, empty).
    Frame { result_json: String, is_error: bool },
    /// structured_content_json (an object) beside a text block.
    Structured,
    /// A sideband transfer of result_json, compressed with zstd or plain.
    Sideband { text: String, zstd: bool },
    /// A stream of result_json in chunks of this size.
    Stream { text: String, chunk: usize },
}

/// Extra tool-side behaviour during a call, before its reply.
#[derive(Debug, Clone, PartialEq)]
pub enum During {
    /// ProgressNotifications (the call carried a progressToken).
    Progress(u8),
    /// LogMessages.
    Logs(u8),
    /// A SamplingRequest, whose answer (from the host or the bridge) must come back under its rid.
    Sampling,
    /// A ListRootsRequest, likewise.
    Roots,
    /// A CallToolResponse under a rid nobody asked for.
    Stray,
    /// An EnableToolsRequest / DisableToolsRequest for the tool `spare` (a tool-list change).
    ToolList { enable: bool },
    /// An Envelope with only an unknown field and an unknown arm.
    Unknown,
}

/// One step of a generated session.
#[derive(Debug, Clone, PartialEq)]
pub enum BOp {
    Ping {
        id: Id,
    },
    /// A request the bridge answers by itself: tools/list, logging/setLevel, an unknown method,
    /// a second initialize; params as given (possibly of the wrong type).
    Local {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    /// A tools/call the bridge must answer without the tool process (unknown tool, name not a
    /// string, arguments not an object).
    Refused {
        id: Id,
        params: Value,
    },
    /// A notification (known or not): no response.
    Notify {
        method: String,
        params: Option<Value>,
    },
    /// A line that is not JSON, or JSON that is not JSON-RPC, or a batch.
    Line {
        text: String,
    },
    /// A tools/call of `echo` answered by the tool process.
    Call {
        id: Id,
        n: u32,
        token: Option<String>,
        during: Vec<During>,
        reply: Reply,
        unknown_fields: bool,
    },
    /// A tools/call of `slow` the host cancels; the tool process answers late anyway.
    Cancel {
        id: Id,
        n: u32,
        ping: Id,
    },
    /// A tools/call of `slow`, and the tool process goes away before answering.
    Die {
        id: Id,
        n: u32,
        ping: Id,
    },
}

impl BOp {
    /// The request ids the op sends (for the any_of of every wait).
    fn ids(&self) -> Vec<Value> {
        match self {
            BOp::Ping { id } | BOp::Local { id, .. } | BOp::Refused { id, .. } | BOp::Call { id, .. } => {
                vec![id.json()]
            }
            BOp::Cancel { id, ping, .. } | BOp::Die { id, ping, .. } => vec![id.json(), ping.json()],
            BOp::Notify { .. } | BOp::Line { .. } => Vec::new(),
        }
    }

    /// A short name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            BOp::Ping { .. } => "ping",
            BOp::Local { .. } => "local",
            BOp::Refused { .. } => "refused",
            BOp::Notify { .. } => "notify",
            BOp::Line { .. } => "line",
            BOp::Call { .. } => "call",
            BOp::Cancel { .. } => "cancel",
            BOp::Die { .. } => "die",
        }
    }
}

/// A generated session: the initialize and the ops.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeCase {
    pub version: String,
    pub init_id: Id,
    /// Client capabilities sampling and roots declared.
    pub capabilities: bool,
    pub ops: Vec<BOp>,
}

/// The tool process's tools: `echo` and `slow` are called, `spare` is enabled and disabled.
static TOOLS: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    let tool = |name: &str| json!({"name": name, "description": name, "input_schema_json": "{\"type\":\"object\"}"});
    json!([tool("echo"), tool("slow"), tool("spare")])
});

/// splitmix64: a small deterministic generator (the case is a pure function of its seed).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Draws ids: fresh ones of several shapes, and now and then one reused from a request already
/// answered (legal: only ids in flight must be unique).
struct Ids {
    n: i64,
    done: Vec<Id>,
}

impl Ids {
    fn fresh(&mut self, rng: &mut Rng) -> Id {
        self.n += 1;
        let n = self.n;
        match rng.below(8) {
            0 => Id::Str(format!("r-{n}")),
            1 => Id::Int(-n),
            2 => Id::Int(9_007_199_254_740_000 + n),
            3 => Id::Str(format!("ид-{n} ✓")),
            4 => Id::Str(format!("{n}")),
            5 => Id::Str(String::new() + &"x".repeat(1 + (n as usize % 3) * 40) + &n.to_string()),
            _ => Id::Int(n),
        }
    }

    fn next(&mut self, rng: &mut Rng) -> Id {
        if !self.done.is_empty() && rng.chance(12) {
            let i = rng.below(self.done.len() as u64) as usize;
            self.done.remove(i)
        } else {
            self.fresh(rng)
        }
    }
}

fn text_json(rng: &mut Rng, n: u32) -> (String, bool) {
    match rng.below(7) {
        0 => (format!(r#"[{{"type":"text","text":"echo {n}"}}]"#), false),
        1 => (format!(r#"[{{"type":"text","text":"a"}},{n},"s",{{"k":{n}}},null]"#), false),
        2 => (format!("plain text {n} ✓ \\ \""), false),
        3 => (String::new(), false),
        4 => (format!(r#"[{{"type":"text","text":"failed {n}"}}]"#), true),
        5 => (
            format!(r#"[{{"type":"image","data":"aGk=","mimeType":"image/png"}},{{"type":"text","text":"{n}"}}]"#),
            false,
        ),
        _ => (format!(r#"{{"not":"a list","n":{n}}}"#), false),
    }
}

fn reply(rng: &mut Rng, n: u32) -> Reply {
    match rng.below(6) {
        0 | 1 => {
            let (result_json, is_error) = text_json(rng, n);
            Reply::Frame { result_json, is_error }
        }
        2 => Reply::Structured,
        3 => {
            let len = *rng.pick(&[10usize, 300, 70_000]);
            Reply::Sideband { text: big_text(n, len), zstd: rng.chance(50) }
        }
        _ => {
            let len = *rng.pick(&[5usize, 100, 5000]);
            Reply::Stream { text: big_text(n, len), chunk: *rng.pick(&[1usize, 7, 64, 4096]) }
        }
    }
}

/// result_json of one text block of about `len` characters.
fn big_text(n: u32, len: usize) -> String {
    let body: String = format!("{n}:").chars().chain(std::iter::repeat_n('x', len)).take(len.max(3)).collect();
    json!([{"type": "text", "text": body}]).to_string()
}

/// Case `seed`: at most `max_ops` ops. `http`: the host speaks Streamable HTTP, where a body
/// that is not a JSON-RPC message is an HTTP-level matter (no [`BOp::Line`] then).
pub fn generate(seed: u64, max_ops: usize, http: bool) -> BridgeCase {
    let mut rng = Rng::new(seed);
    let mut ids = Ids { n: 0, done: Vec::new() };
    let version = rng.pick(VERSIONS).to_string();
    let init_id = ids.fresh(&mut rng);
    let capabilities = rng.chance(50);
    let count = 1 + rng.below(max_ops.max(1) as u64) as usize;
    let mut ops = Vec::new();
    let mut n = 0u32;
    for _ in 0..count {
        n += 1;
        let op = match rng.below(20) {
            0 | 1 => BOp::Ping { id: ids.next(&mut rng) },
            2 | 3 => {
                let (method, params) = match rng.below(8) {
                    0 => ("tools/list", None),
                    1 => ("tools/list", Some(json!("not an object"))),
                    2 => ("logging/setLevel", Some(json!({"level": rng.pick(&["debug", "info", "error"])}))),
                    3 => ("logging/setLevel", Some(json!({"level": {"x": 1}}))),
                    4 => ("no/such/method", Some(json!({"a": [1, 2]}))),
                    5 => (
                        "initialize",
                        Some(
                            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}),
                        ),
                    ),
                    6 => ("ping", Some(json!({"_meta": {"x": 1}}))),
                    _ => ("resources/templates/list", Some(json!({"cursor": "never-issued"}))),
                };
                BOp::Local { id: ids.next(&mut rng), method: method.into(), params }
            }
            4 | 5 => {
                let params = match rng.below(5) {
                    0 => json!({"name": "nope", "arguments": {}}),
                    1 => json!({"name": 5, "arguments": {}}),
                    2 => json!({"name": "echo", "arguments": "not an object"}),
                    3 => json!({"name": "echo", "arguments": [1, 2]}),
                    _ => json!({"arguments": {}}),
                };
                BOp::Refused { id: ids.next(&mut rng), params }
            }
            6 => {
                let (method, params) = match rng.below(5) {
                    0 => ("notifications/roots/list_changed", None),
                    1 => ("notifications/unknown", Some(json!({"x": 1}))),
                    2 => ("notifications/cancelled", Some(json!({"requestId": "nobody"}))),
                    3 => ("notifications/progress", Some(json!({"progressToken": "host", "progress": 1}))),
                    _ => ("notifications/initialized", None),
                };
                BOp::Notify { method: method.into(), params }
            }
            7 if !http => {
                let text = match rng.below(4) {
                    0 => r#"{"jsonrpc": "2.0", "id": 5, "method": "#.to_owned(),
                    1 => r#"{"hello": "world"}"#.to_owned(),
                    2 if version == "2025-06-18" => {
                        r#"[{"jsonrpc": "2.0", "id": "b1", "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"}]"#.to_owned()
                    }
                    _ => "not json at all ✓".to_owned(),
                };
                BOp::Line { text }
            }
            // A cancelled call may be answered or not (BR-CANCEL-02): the waits after it could
            // take that answer in place of the one they are for, so it ends the case.
            8 | 9 => BOp::Cancel { id: ids.fresh(&mut rng), n, ping: ids.fresh(&mut rng) },
            // The tool process dies mid-call; the session goes on with its successor (at most
            // twice a case: a bridge may give up after three restarts in a row).
            10 if ops.iter().filter(|o: &&BOp| matches!(o, BOp::Die { .. })).count() < 2 => {
                BOp::Die { id: ids.fresh(&mut rng), n, ping: ids.fresh(&mut rng) }
            }
            _ => {
                let token = rng.chance(40).then(|| format!("tok-{n}"));
                let mut during = Vec::new();
                for _ in 0..rng.below(3) {
                    let d = match rng.below(7) {
                        0 if token.is_some() => During::Progress(1 + rng.below(3) as u8),
                        1 => During::Logs(1 + rng.below(2) as u8),
                        2 => During::Sampling,
                        3 => During::Roots,
                        4 => During::Stray,
                        5 => During::ToolList { enable: rng.chance(50) },
                        _ => During::Unknown,
                    };
                    during.push(d);
                }
                BOp::Call {
                    id: ids.next(&mut rng),
                    n,
                    token,
                    during,
                    reply: reply(&mut rng, n),
                    unknown_fields: rng.chance(20),
                }
            }
        };
        // Ids of requests answered by now may be reused.
        match &op {
            BOp::Ping { id } | BOp::Local { id, .. } | BOp::Refused { id, .. } | BOp::Call { id, .. } => {
                ids.done.push(id.clone())
            }
            _ => {}
        }
        let last = matches!(op, BOp::Cancel { .. });
        ops.push(op);
        if last {
            break;
        }
    }
    BridgeCase { version, init_id, capabilities, ops }
}

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
        o.step(json!({"tool_handshake": {"tools": *TOOLS}}));
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
                o.step_checks(json!({"tool_handshake": {"tools": *TOOLS, "within_ms": 5000}}), &["BR-LIFECYCLE-05"]);
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
