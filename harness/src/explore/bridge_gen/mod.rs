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

use serde_json::{Value, json};

mod yaml;

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
    /// A tools/call of `echo` answered by the tool process; `modern`: an MCP 2026-07-28 request
    /// declaring no capabilities (an input request of the tool process is then refused to it at
    /// once, BR-SAMPLING-10), with a logLevel now and then.
    Call {
        id: Id,
        n: u32,
        token: Option<String>,
        during: Vec<During>,
        reply: Reply,
        unknown_fields: bool,
        modern: Option<Modern>,
    },
    /// A request the bridge forwards to the tool process (resources/read, prompts/get,
    /// completion/complete), answered by it; `modern`: as an MCP 2026-07-28 request.
    Ask {
        id: Id,
        n: u32,
        ask: Ask,
        modern: bool,
    },
    /// An MCP 2026-07-28 request the bridge answers by itself (server/discover, the lists) or
    /// refuses without Envelope traffic (a method 2026-07-28 does not serve, an unknown version,
    /// `_meta` incomplete, a bad logLevel); `params` with their `_meta`.
    ModernLocal {
        id: Id,
        method: String,
        params: Value,
    },
    /// A modern tools/call of `echo` whose handler asks for input (§26.4): the host gets an
    /// InputRequiredResult, and then what `end` says. `ids`: the call's, then its retries'.
    Mrtr {
        ids: Vec<Id>,
        n: u32,
        first: Input,
        end: MrtrEnd,
        reply: Reply,
    },
    /// subscriptions/listen for tool-list changes (stdio, no legacy session): acknowledged; the
    /// tool process disables and enables `spare` (at least one change), a tagged list_changed
    /// comes; the host cancels it and a server/discover (`after`) shows the bridge read that.
    Listen {
        id: Id,
        after: Id,
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
            BOp::Ping { id }
            | BOp::Local { id, .. }
            | BOp::Refused { id, .. }
            | BOp::Call { id, .. }
            | BOp::Ask { id, .. }
            | BOp::ModernLocal { id, .. } => vec![id.json()],
            BOp::Cancel { id, ping, .. } | BOp::Die { id, ping, .. } => vec![id.json(), ping.json()],
            BOp::Listen { id, after } => vec![id.json(), after.json()],
            BOp::Mrtr { ids, .. } => ids.iter().map(Id::json).collect(),
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
            BOp::Ask { .. } => "ask",
            BOp::Cancel { .. } => "cancel",
            BOp::Die { .. } => "die",
            BOp::ModernLocal { .. } => "modern-local",
            BOp::Mrtr { .. } => "mrtr",
            BOp::Listen { .. } => "listen",
        }
    }
}

/// What a modern [`BOp::Call`] adds to its `_meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct Modern {
    /// `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<&'static str>,
}

/// The `_meta` of an MCP 2026-07-28 request (BR-STATELESS-04).
pub fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// An input request of the tool process during a modern call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Input {
    Sampling,
    Roots,
}

/// How the host goes on after a modern call's first InputRequiredResult.
#[derive(Debug, Clone, PartialEq)]
pub enum MrtrEnd {
    /// Retries at once with the answer (BR-STATELESS-23).
    All,
    /// Retries after this many ms, within `T_MRTR`.
    Late(u64),
    /// Retries with no answer: accepted, and asked again under the same key (BR-STATELESS-24);
    /// `replay`: then presents the first round's state (refused, BR-STATELESS-22); then answers.
    Unanswered { replay: bool },
    /// A second input request arrives while the call is parked; the retry answers the first
    /// only, and the next InputRequiredResult asks for the second (BR-STATELESS-24).
    Parked,
    /// A retry the bridge must refuse (-32602, no Envelope traffic, BR-STATELESS-22), then one
    /// with the answer.
    Tampered(Tamper),
    /// Answered; then the consumed state presented again (refused, BR-STATELESS-22).
    Replay,
    /// The call's result arrives while it is parked: the input request is refused to the tool
    /// process and the retry gets the result (BR-STATELESS-27).
    Early,
    /// Never retried: the call is cancelled after `T_MRTR` and its input request answered
    /// (BR-STATELESS-26); then the state is refused.
    Never,
}

/// How a refused retry differs from a good one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tamper {
    /// The state with one character more.
    Appended,
    /// Other arguments.
    OtherArguments,
    /// `inputResponses` without `requestState`.
    NoState,
}

/// What an [`BOp::Ask`] asks for, of the resources, templates and prompts the tool process
/// registers ([`LISTS`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// resources/read of a listed resource or of a template's instance.
    Read(&'static str),
    /// prompts/get of `greet` with its required argument.
    Prompt(String),
    /// completion/complete of `greet`'s argument.
    Complete(String),
}

/// A generated session: the initialize and the ops.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeCase {
    pub version: String,
    pub init_id: Id,
    /// Client capabilities sampling and roots declared.
    pub capabilities: bool,
    /// A legacy session is opened (initialize) before the ops; without one every op is MCP
    /// 2026-07-28.
    pub legacy: bool,
    pub ops: Vec<BOp>,
}

/// The tool process's handshake: tools (`echo` and `slow` are called, `spare` is enabled and
/// disabled), two resources, a template and a prompt, so that every method of the host has
/// something to ask for.
static LISTS: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({
        "tools": *TOOLS,
        "resources": [{"uri": "mem://a", "name": "a", "mime_type": "text/plain"}, {"uri": "mem://b", "name": "b"}],
        "resource_templates": [{"uri_template": "mem://items/{id}", "name": "item"}],
        "prompts": [{"name": "greet", "description": "Greets", "arguments": [{"name": "who", "description": "Whom", "required": true}]}],
    })
});

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
    // The era of the traffic: legacy only, MCP 2026-07-28 only (no initialize), or both.
    let era = rng.below(3);
    let legacy = era != 1;
    let count = 1 + rng.below(max_ops.max(1) as u64) as usize;
    let mut ops = Vec::new();
    let mut n = 0u32;
    for _ in 0..count {
        n += 1;
        let modern_turn = match era {
            0 => false,
            1 => true,
            _ => rng.chance(50),
        };
        let op = if modern_turn {
            modern_op(&mut rng, &mut ids, n, http, legacy, &ops)
        } else {
            legacy_op(&mut rng, &mut ids, n, http, &version, &ops)
        };
        // Ids of requests answered by now may be reused.
        match &op {
            BOp::Ping { id }
            | BOp::Local { id, .. }
            | BOp::Refused { id, .. }
            | BOp::Call { id, .. }
            | BOp::Ask { id, .. }
            | BOp::ModernLocal { id, .. } => ids.done.push(id.clone()),
            _ => {}
        }
        let last = matches!(op, BOp::Cancel { .. });
        ops.push(op);
        if last {
            break;
        }
    }
    BridgeCase { version, init_id, capabilities, legacy, ops }
}

/// A legacy op (the session was initialized).
fn legacy_op(rng: &mut Rng, ids: &mut Ids, n: u32, http: bool, version: &str, ops: &[BOp]) -> BOp {
    let rng = &mut *rng;
    {
        match rng.below(23) {
            0 | 1 => BOp::Ping { id: ids.next(rng) },
            2 | 3 => {
                let (method, params) = match rng.below(12) {
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
                    7 => ("resources/list", None),
                    8 => ("resources/templates/list", None),
                    9 => ("prompts/list", Some(json!({}))),
                    10 => ("resources/list", Some(json!({"cursor": 7}))),
                    _ => ("resources/templates/list", Some(json!({"cursor": "never-issued"}))),
                };
                BOp::Local { id: ids.next(rng), method: method.into(), params }
            }
            4 | 5 => {
                let params = match rng.below(5) {
                    0 => json!({"name": "nope", "arguments": {}}),
                    1 => json!({"name": 5, "arguments": {}}),
                    2 => json!({"name": "echo", "arguments": "not an object"}),
                    3 => json!({"name": "echo", "arguments": [1, 2]}),
                    _ => json!({"arguments": {}}),
                };
                BOp::Refused { id: ids.next(rng), params }
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
            20..=22 => {
                let ask = match rng.below(3) {
                    0 => Ask::Read(["mem://a", "mem://b", "mem://items/7"][rng.below(3) as usize]),
                    1 => Ask::Prompt(rng.pick(&["Ada", "Alan", "Grace ✓"]).to_string()),
                    _ => Ask::Complete(rng.pick(&["", "A", "Gr"]).to_string()),
                };
                BOp::Ask { id: ids.next(rng), n, ask, modern: false }
            }
            // A cancelled call may be answered or not (BR-CANCEL-02): the waits after it could
            // take that answer in place of the one they are for, so it ends the case.
            8 | 9 => BOp::Cancel { id: ids.fresh(rng), n, ping: ids.fresh(rng) },
            // The tool process dies mid-call; the session goes on with its successor (at most
            // twice a case: a bridge may give up after three restarts in a row).
            10 if ops.iter().filter(|o: &&BOp| matches!(o, BOp::Die { .. })).count() < 2 => {
                BOp::Die { id: ids.fresh(rng), n, ping: ids.fresh(rng) }
            }
            _ => {
                let token = rng.chance(40).then(|| format!("tok-{n}"));
                BOp::Call {
                    id: ids.next(rng),
                    n,
                    during: during(rng, token.is_some()),
                    token,
                    reply: reply(rng, n),
                    unknown_fields: rng.chance(20),
                    modern: None,
                }
            }
        }
    }
}

/// What the tool process does during a call, before its reply.
fn during(rng: &mut Rng, token: bool) -> Vec<During> {
    let mut during = Vec::new();
    for _ in 0..rng.below(3) {
        let d = match rng.below(7) {
            0 if token => During::Progress(1 + rng.below(3) as u8),
            1 => During::Logs(1 + rng.below(2) as u8),
            2 => During::Sampling,
            3 => During::Roots,
            4 => During::Stray,
            5 => During::ToolList { enable: rng.chance(50) },
            _ => During::Unknown,
        };
        during.push(d);
    }
    during
}

/// An MCP 2026-07-28 op. `legacy`: a legacy session is open on the stream (no listen then: its
/// untagged list_changed and the subscription's tagged one may come in either order).
fn modern_op(rng: &mut Rng, ids: &mut Ids, n: u32, http: bool, legacy: bool, ops: &[BOp]) -> BOp {
    let caps = || modern_meta(json!({}));
    match rng.below(12) {
        0 => BOp::ModernLocal { id: ids.next(rng), method: "server/discover".into(), params: json!({"_meta": caps()}) },
        1 => {
            let method = *rng.pick(&["tools/list", "resources/list", "resources/templates/list", "prompts/list"]);
            BOp::ModernLocal { id: ids.next(rng), method: method.into(), params: json!({"_meta": caps()}) }
        }
        // Refusals (over HTTP they come with statuses 400 and 404, BR-HTTP-29: stdio only).
        2 if !http => {
            let (method, params) = match rng.below(5) {
                0 => ("ping", json!({"_meta": caps()})),
                1 => ("logging/setLevel", json!({"level": "debug", "_meta": caps()})),
                2 => (
                    "tools/list",
                    json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-06-18", "io.modelcontextprotocol/clientCapabilities": {}}}),
                ),
                3 => (
                    "tools/call",
                    json!({"name": "echo", "arguments": {"n": n}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
                ),
                _ => {
                    let mut meta = caps();
                    meta["io.modelcontextprotocol/logLevel"] = json!("loud");
                    ("tools/call", json!({"name": "echo", "arguments": {"n": n}, "_meta": meta}))
                }
            };
            BOp::ModernLocal { id: ids.next(rng), method: method.into(), params }
        }
        3 | 4 => {
            let token = rng.chance(40).then(|| format!("tok-{n}"));
            BOp::Call {
                id: ids.next(rng),
                n,
                token: token.clone(),
                during: during(rng, token.is_some()),
                reply: reply(rng, n),
                unknown_fields: rng.chance(20),
                modern: Some(Modern { log_level: rng.chance(30).then(|| *rng.pick(&["debug", "error"])) }),
            }
        }
        5 => {
            let ask = match rng.below(3) {
                0 => Ask::Read(["mem://a", "mem://b", "mem://items/7"][rng.below(3) as usize]),
                1 => Ask::Prompt(rng.pick(&["Ada", "Alan", "Grace ✓"]).to_string()),
                _ => Ask::Complete(rng.pick(&["", "A", "Gr"]).to_string()),
            };
            BOp::Ask { id: ids.next(rng), n, ask, modern: true }
        }
        6 if !legacy && !http => BOp::Listen { id: ids.fresh(rng), after: ids.fresh(rng) },
        _ => {
            let first = if rng.chance(60) { Input::Sampling } else { Input::Roots };
            // A call nobody retries takes T_MRTR: at most one a case.
            let never = ops.iter().any(|o| matches!(o, BOp::Mrtr { end: MrtrEnd::Never, .. }));
            let end = match rng.below(12) {
                0..=2 => MrtrEnd::All,
                3 => MrtrEnd::Late(1000),
                4 => MrtrEnd::Unanswered { replay: rng.chance(50) },
                5 => MrtrEnd::Parked,
                6 => MrtrEnd::Tampered(Tamper::Appended),
                7 => MrtrEnd::Tampered(Tamper::OtherArguments),
                8 => MrtrEnd::Tampered(Tamper::NoState),
                9 => MrtrEnd::Replay,
                10 => MrtrEnd::Early,
                _ if !never => MrtrEnd::Never,
                _ => MrtrEnd::All,
            };
            BOp::Mrtr { ids: (0..4).map(|_| ids.fresh(rng)).collect(), n, first, end, reply: reply(rng, n) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(http: bool) -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..600 {
            let case = generate(seed, 12, http);
            seen.insert(if case.legacy { "legacy session" } else { "modern only" }.to_owned());
            for op in &case.ops {
                seen.insert(op.kind().to_owned());
                match op {
                    BOp::Mrtr { end, .. } => {
                        let end = format!("{end:?}");
                        seen.insert(format!("mrtr {}", end.split(['(', ' ']).next().unwrap_or("")));
                    }
                    BOp::Call { modern: Some(_), .. } => drop(seen.insert("modern call".into())),
                    BOp::Ask { modern: true, .. } => drop(seen.insert("modern ask".into())),
                    _ => {}
                }
                if !case.legacy {
                    assert!(
                        matches!(
                            op,
                            BOp::ModernLocal { .. }
                                | BOp::Mrtr { .. }
                                | BOp::Listen { .. }
                                | BOp::Call { modern: Some(_), .. }
                                | BOp::Ask { modern: true, .. }
                        ),
                        "a case without a legacy session has only modern ops: {op:?}"
                    );
                }
            }
            if case.legacy && case.ops.iter().any(|o| o.kind() == "listen") {
                panic!("a listen subscription beside a legacy session (seed {seed})");
            }
        }
        seen
    }

    #[test]
    fn every_modern_op_and_every_end_of_an_mrtr_round_is_generated() {
        let seen = kinds(false);
        for k in [
            "legacy session",
            "modern only",
            "modern-local",
            "modern call",
            "modern ask",
            "listen",
            "mrtr All",
            "mrtr Late",
            "mrtr Unanswered",
            "mrtr Parked",
            "mrtr Tampered",
            "mrtr Replay",
            "mrtr Early",
            "mrtr Never",
            "call",
            "die",
        ] {
            assert!(seen.contains(k), "{k} never generated: {seen:?}");
        }
        // Over HTTP: no listen (its stream is the response of its own POST) and no line.
        let http = kinds(true);
        assert!(!http.contains("listen") && !http.contains("line"), "{http:?}");
        assert!(http.contains("mrtr Never") && http.contains("modern only"), "{http:?}");
    }

    #[test]
    fn a_case_is_a_pure_function_of_its_seed() {
        assert_eq!(generate(77, 12, false), generate(77, 12, false));
        assert_ne!(generate(77, 12, false), generate(78, 12, false));
    }
}
