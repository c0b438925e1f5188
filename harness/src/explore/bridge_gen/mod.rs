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
    /// A tools/call of `echo` answered by the tool process.
    Call {
        id: Id,
        n: u32,
        token: Option<String>,
        during: Vec<During>,
        reply: Reply,
        unknown_fields: bool,
    },
    /// A request the bridge forwards to the tool process (resources/read, prompts/get,
    /// completion/complete), answered by it.
    Ask {
        id: Id,
        n: u32,
        ask: Ask,
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
            | BOp::Ask { id, .. } => vec![id.json()],
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
            BOp::Ask { .. } => "ask",
            BOp::Cancel { .. } => "cancel",
            BOp::Die { .. } => "die",
        }
    }
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
    let count = 1 + rng.below(max_ops.max(1) as u64) as usize;
    let mut ops = Vec::new();
    let mut n = 0u32;
    for _ in 0..count {
        n += 1;
        let op = match rng.below(23) {
            0 | 1 => BOp::Ping { id: ids.next(&mut rng) },
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
            20..=22 => {
                let ask = match rng.below(3) {
                    0 => Ask::Read(["mem://a", "mem://b", "mem://items/7"][rng.below(3) as usize]),
                    1 => Ask::Prompt(rng.pick(&["Ada", "Alan", "Grace ✓"]).to_string()),
                    _ => Ask::Complete(rng.pick(&["", "A", "Gr"]).to_string()),
                };
                BOp::Ask { id: ids.next(&mut rng), n, ask }
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
            BOp::Ping { id }
            | BOp::Local { id, .. }
            | BOp::Refused { id, .. }
            | BOp::Call { id, .. }
            | BOp::Ask { id, .. } => ids.done.push(id.clone()),
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
