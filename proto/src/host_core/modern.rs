//! MCP 2026-07-28 (modern, stateless) requests in the host core: their era (spec §26.1), the
//! checks of §26.2 in order, `server/discover`, the decoration of every result (§26.6) and
//! `subscriptions/listen` (§26.5). A modern request belongs to no session: everything it needs is
//! in the request.

use serde_json::{Map, Value, json};

use super::msg::{Request, ResponseError};
use crate::fault::{self, Fault};
use crate::jsonrpc::ErrorCode;
use crate::mcp_input::{LOG_LEVELS, META_VERSION, ServerReader, SpecReader};

/// The modern revision.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Every revision the bridge answers, newest first (`SUPPORTED_VERSIONS`, spec R2.1 §1.5): the
/// modern one, then those of `initialize` ([`super::VERSIONS`]; a test keeps the two in step).
pub const SUPPORTED_VERSIONS: &[&str] = &["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` member of every modern result naming the server (BR-STATELESS-10).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` member naming the listen subscription a notification belongs to.
pub const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

/// The methods 2026-07-28 defines for clients (BR-STATELESS-07).
pub const MODERN_METHODS: &[&str] = &[
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// What a modern request's `_meta` says.
#[derive(Debug, Clone, PartialEq)]
pub struct ModernMeta {
    /// `clientCapabilities`.
    pub caps: Value,
    /// `logLevel` as a rank of [`LOG_LEVELS`], when given.
    pub log_level: Option<usize>,
}

fn invalid(message: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorCode::INVALID_PARAMS, message)
}

/// The checks of §26.2, steps 3 to 7, in order: the first failure answers the request.
pub fn check(r: &Request) -> Result<ModernMeta, ResponseError> {
    let meta = r.param("_meta").and_then(Value::as_object);
    let version = meta.and_then(|m| m.get(META_VERSION));
    // BR-STATELESS-04
    let Some(Value::String(version)) = version else {
        return Err(invalid(format!("_meta[\"{META_VERSION}\"] must be a protocol version string")));
    };
    // BR-STATELESS-05
    if version != MODERN_VERSION {
        let mut e =
            ResponseError::new(ErrorCode::UNSUPPORTED_VERSION, format!("unsupported protocol version {version}"));
        let supported =
            if fault::on(Fault::BrStatelessSupportedModernOnly) { &[MODERN_VERSION] } else { SUPPORTED_VERSIONS };
        e.data = Some(json!({"supported": supported, "requested": version}));
        return Err(e);
    }
    let empty = json!({});
    let caps = match meta.and_then(|m| m.get(META_CAPS)) {
        None if fault::on(Fault::BrStatelessCapsOptional) => Some(&empty),
        other => other,
    };
    let Some(caps @ Value::Object(_)) = caps else {
        return Err(invalid(format!("_meta[\"{META_CAPS}\"] must be an object")));
    };
    // BR-STATELESS-06
    let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
        None => None,
        Some(l) => match l.as_str().and_then(|l| LOG_LEVELS.iter().position(|x| *x == l)) {
            Some(rank) => Some(rank),
            None if fault::on(Fault::BrStatelessBadLevelIgnored) => None,
            None => return Err(invalid(format!("_meta[\"{META_LOG_LEVEL}\"] must be a log level name"))),
        },
    };
    // BR-STATELESS-07, BR-TASK-06
    if r.method.starts_with("tasks/") && fault::on(Fault::BrTaskModernInvalidParams) {
        return Err(invalid(format!("no such task: {}", r.method)));
    }
    let served =
        MODERN_METHODS.contains(&r.method.as_str()) || (r.method == "ping" && fault::on(Fault::BrStatelessPingServed));
    if !served {
        let e =
            ResponseError::new(ErrorCode::METHOD_NOT_FOUND, format!("method not found in 2026-07-28: {}", r.method));
        return Err(e);
    }
    // Step 7: the method's params, as Revision 1 reads them.
    let typed = crate::mcp_input::TYPED_METHODS.contains(&r.method.as_str());
    if typed && !SpecReader.reads_params(&r.method, r.params.as_ref()) {
        return Err(invalid(format!("invalid params for {}", r.method)));
    }
    Ok(ModernMeta { caps: caps.clone(), log_level })
}

/// `requestState` and `inputResponses` (spec §26.4): a state is a string and goes with
/// `tools/call` only; answers are an object and come with a state (BR-STATELESS-22).
pub fn check_retry(r: &Request) -> Result<(), ResponseError> {
    let state = r.param("requestState");
    let answers = r.param("inputResponses");
    match (state, answers) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(invalid("inputResponses needs a requestState")),
        (Some(_), _) if r.method != "tools/call" => {
            Err(invalid(format!("requestState was issued for tools/call, not {}", r.method)))
        }
        (Some(s), _) if !s.is_string() => Err(invalid("requestState must be a string")),
        (Some(_), Some(a)) if !a.is_object() => Err(invalid("inputResponses must be an object")),
        _ => Ok(()),
    }
}

/// The capabilities the bridge advertises, the same through `initialize` (both eras' one
/// definition) and `server/discover` (BR-MCP-05…07, BR-STATELESS-08): never tasks.
pub fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "completions": {},
        "logging": {},
        "resources": {"listChanged": true, "subscribe": true},
        "prompts": {"listChanged": true},
    })
}

/// Adds what every modern result carries (§26.6): `resultType` and the server's info in `_meta`
/// (BR-STATELESS-09/10), and for a cacheable result `ttlMs` and `cacheScope`
/// (BR-STATELESS-11…14).
pub fn decorate(mut result: Value, server_info: &Value, cache: Option<&'static str>) -> Value {
    let Some(o) = result.as_object_mut() else { return result };
    // An InputRequiredResult of the bridge core keeps its type, and no cache hints
    // (BR-STATELESS-11).
    if o.get("resultType").and_then(Value::as_str) == Some("input_required")
        && !fault::on(Fault::BrStatelessInputRequiredAsComplete)
    {
        let meta = o.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if let Some(m) = meta.as_object_mut() {
            m.insert(META_SERVER_INFO.into(), server_info.clone());
        }
        return result;
    }
    o.insert("resultType".into(), json!("complete"));
    // br.stateless.server-info-skipped: only a result without `_meta` of its own gets one.
    let own_meta = o.contains_key("_meta");
    let meta = o.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = meta.as_object_mut()
        && !(own_meta && fault::on(Fault::BrStatelessServerInfoSkipped))
    {
        m.insert(META_SERVER_INFO.into(), server_info.clone());
    }
    if let Some(scope) = cache {
        o.insert("ttlMs".into(), json!(0));
        o.insert("cacheScope".into(), json!(scope));
    }
    result
}

/// The `server/discover` result (BR-STATELESS-08), before decoration.
pub fn discover() -> Value {
    let mut caps = capabilities();
    if fault::on(Fault::BrStatelessDiscoverNoLogging)
        && let Some(c) = caps.as_object_mut()
    {
        c.remove("logging");
    }
    json!({"supportedVersions": SUPPORTED_VERSIONS, "capabilities": caps})
}

/// What an open `subscriptions/listen` asked for and was granted (BR-STATELESS-30).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listen {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// `resourceSubscriptions`: the URIs whose updates it receives.
    pub uris: Vec<String>,
}

impl Listen {
    /// The filter of a listen request: -32602 when `params.notifications` is missing or not an
    /// object (BR-STATELESS-30).
    pub fn of(r: &Request) -> Result<Listen, ResponseError> {
        let none = Map::new();
        let n = match r.param("notifications") {
            None if fault::on(Fault::BrStatelessListenNoFilter) => Some(&none),
            other => other.and_then(Value::as_object),
        };
        let Some(n) = n else {
            return Err(invalid("subscriptions/listen needs params.notifications, an object"));
        };
        let on = |k: &str| n.get(k) == Some(&Value::Bool(true));
        let uris = n.get("resourceSubscriptions").and_then(Value::as_array).into_iter().flatten();
        Ok(Listen {
            tools: on("toolsListChanged"),
            prompts: on("promptsListChanged"),
            resources: on("resourcesListChanged"),
            uris: uris.filter_map(Value::as_str).map(str::to_owned).collect(),
        })
    }

    /// `notifications/subscriptions/acknowledged`'s `notifications`: what is honoured.
    pub fn acknowledged(&self) -> Value {
        let mut n = Map::new();
        for (on, key) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if on {
                n.insert(key.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            n.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(n)
    }
}

/// The HTTP status a refused modern request is answered with (BR-HTTP-29): 400 for a header
/// mismatch (-32020), an unsupported version (-32022) and bad metadata or params (-32602), 404
/// for an undefined method (-32601).
pub fn http_status(e: &ResponseError) -> u16 {
    match e.code {
        ErrorCode::METHOD_NOT_FOUND if fault::on(Fault::BrHttpNotFound400) => 400,
        ErrorCode::METHOD_NOT_FOUND => 404,
        ErrorCode::HEADER_MISMATCH | ErrorCode::UNSUPPORTED_VERSION | ErrorCode::INVALID_PARAMS => 400,
        _ => 200,
    }
}

/// The headers a modern POST must carry, equal to its body (§26.7, BR-HTTP-28):
/// `MCP-Protocol-Version` = `_meta` protocolVersion, `Mcp-Method` = method, and `Mcp-Name` = the
/// tool or prompt name, or the resource URI. `header` looks a header up by its lower-case name.
pub fn check_headers<'a>(r: &Request, header: impl Fn(&str) -> Option<&'a str>) -> Result<(), ResponseError> {
    let mismatch = |name: &str, want: Option<&str>| {
        ResponseError::new(
            ErrorCode::HEADER_MISMATCH,
            format!("the {name} header must equal the body's {}", want.unwrap_or("(absent) value")),
        )
    };
    let version = r.param("_meta").and_then(|m| m.get(META_VERSION)).and_then(Value::as_str);
    if header("mcp-protocol-version").is_none() || header("mcp-protocol-version") != version {
        return Err(mismatch("MCP-Protocol-Version", version));
    }
    if header("mcp-method") != Some(r.method.as_str()) && !fault::on(Fault::BrHttpMethodHeaderUnchecked) {
        return Err(mismatch("Mcp-Method", Some(&r.method)));
    }
    let name = match r.method.as_str() {
        "tools/call" | "prompts/get" => r.param("name"),
        "resources/read" => r.param("uri"),
        _ => return Ok(()),
    };
    let name = name.and_then(Value::as_str);
    let given = header("mcp-name").and_then(header_value);
    if given.is_none() || given.as_deref() != name {
        return Err(mismatch("Mcp-Name", name));
    }
    Ok(())
}

/// How long the event stream of a modern request may stay without an event before the bridge
/// sends an SSE comment to keep it open: a listen subscription's, every 30 s (BR-HTTP-36);
/// `None` for other requests, whose streams end with their response.
pub fn keepalive(method: &str) -> Option<std::time::Duration> {
    let listen = method == "subscriptions/listen" && !crate::fault::on(crate::fault::Fault::BrHttpNoKeepAlive);
    listen.then_some(std::time::Duration::from_secs(30))
}

/// The value of a header that may use the `=?base64?…?=` form (docs/specification/2026-07-28,
/// streamable-http.mdx): decoded when it does, as it is otherwise; `None` when the encoded form
/// is not base64 of UTF-8.
pub fn header_value(raw: &str) -> Option<String> {
    use base64::Engine;
    match raw.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(raw.to_owned()),
    }
}

/// One `x-mcp-header` annotation of an input schema: the property's path from the root (names
/// of `properties` members) and the header name it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderAnnotation {
    pub path: Vec<String>,
    pub name: String,
}

/// Where a schema node sits, for `x-mcp-header`.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Root,
    /// Reached from the root through `properties` members only.
    Property,
    /// Anywhere else (items, anyOf, $defs, …).
    Elsewhere,
}

/// The `x-mcp-header` annotations of `schema` reached through `properties` only (those
/// BR-HTTP-30 checks), and why the schema's annotations violate the constraints of
/// 2026-07-28's tools.mdx (BR-HTTP-31): empty, not an HTTP token, equal to another one ignoring
/// case, on a property that is not a string, integer or boolean, or not reachable through
/// `properties` alone.
pub fn header_annotations(schema: &Value) -> (Vec<HeaderAnnotation>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    walk_annotations(schema, At::Root, &mut Vec::new(), &mut found, &mut problems);
    let mut seen: Vec<String> = Vec::new();
    for a in &found {
        let lower = a.name.to_ascii_lowercase();
        if seen.contains(&lower) {
            problems.push(format!("x-mcp-header {:?} is given twice (ignoring case)", a.name));
        }
        seen.push(lower);
    }
    (found, problems)
}

/// An HTTP token (RFC 9110 §5.6.2).
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn walk_annotations(
    node: &Value,
    at: At,
    path: &mut Vec<String>,
    found: &mut Vec<HeaderAnnotation>,
    problems: &mut Vec<String>,
) {
    let Some(o) = node.as_object() else { return };
    if let Some(a) = o.get("x-mcp-header") {
        let where_ = if path.is_empty() { "the root".to_owned() } else { format!("property {}", path.join(".")) };
        match (at, a.as_str()) {
            (At::Property, Some(name)) => {
                if !is_token(name) {
                    problems.push(format!("x-mcp-header {name:?} on {where_} is not an HTTP token"));
                }
                let primitive = |t: &Value| matches!(t.as_str(), Some("string" | "integer" | "boolean"));
                let typed = match o.get("type") {
                    Some(Value::Array(ts)) => !ts.is_empty() && ts.iter().all(|t| primitive(t) || t == "null"),
                    Some(t) => primitive(t),
                    None => false,
                };
                if !typed {
                    problems.push(format!("x-mcp-header {name:?} is on {where_}, not a string, integer or boolean"));
                }
                found.push(HeaderAnnotation { path: path.clone(), name: name.to_owned() });
            }
            (At::Property, None) => problems.push(format!("x-mcp-header on {where_} is not a string")),
            _ => problems.push(format!("x-mcp-header on {where_} is not reached through properties alone")),
        }
    }
    let inner = if at == At::Elsewhere { At::Elsewhere } else { At::Property };
    for (k, v) in o {
        match (k.as_str(), v) {
            ("properties", Value::Object(props)) => {
                for (name, sub) in props {
                    path.push(name.clone());
                    walk_annotations(sub, inner, path, found, problems);
                    path.pop();
                }
            }
            ("patternProperties" | "$defs" | "definitions" | "dependentSchemas", Value::Object(m)) => {
                for sub in m.values() {
                    walk_annotations(sub, At::Elsewhere, path, found, problems);
                }
            }
            ("allOf" | "anyOf" | "oneOf" | "prefixItems" | "items", Value::Array(subs)) => {
                for sub in subs {
                    walk_annotations(sub, At::Elsewhere, path, found, problems);
                }
            }
            (
                "items"
                | "additionalProperties"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "additionalItems",
                Value::Object(_),
            ) => walk_annotations(v, At::Elsewhere, path, found, problems),
            _ => {}
        }
    }
}

/// Whether a header's (decoded) value is the argument's string form (BR-HTTP-30): a string as
/// it is, an integer in decimal compared numerically, a boolean as `true` / `false`, another
/// number compared numerically; an object or array has no string form and never matches.
fn header_matches(value: &str, arg: &Value) -> bool {
    match arg {
        Value::String(s) => value == s,
        Value::Bool(b) => value == if *b { "true" } else { "false" },
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            let want = n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
            value.trim().parse::<i128>().ok() == want
        }
        Value::Number(n) => value.trim().parse::<f64>().ok() == n.as_f64(),
        _ => false,
    }
}

/// BR-HTTP-30: a modern `tools/call` over HTTP of a tool of `tools` (the active set, as
/// tools/list items) whose input schema annotates properties with `x-mcp-header` carries, for
/// each such property with a non-null argument, `Mcp-Param-{Name}` equal to the argument's
/// string form; -32020 otherwise. `header` looks a header up by its lower-case name. A tool not
/// in `tools` is left to the call (unknown tool).
pub fn check_param_headers<'a>(
    r: &Request,
    tools: &[Value],
    header: impl Fn(&str) -> Option<&'a str>,
) -> Result<(), ResponseError> {
    if r.method != "tools/call" {
        return Ok(());
    }
    let name = r.param("name").and_then(Value::as_str);
    let Some(tool) = tools.iter().find(|t| t.get("name").and_then(Value::as_str) == name) else { return Ok(()) };
    let (annotations, _) = header_annotations(tool.get("inputSchema").unwrap_or(&Value::Null));
    let arguments = r.param("arguments");
    for a in annotations {
        let arg = arguments.and_then(|args| a.path.iter().try_fold(args, |v, k| v.get(k)));
        let Some(arg) = arg.filter(|v| !v.is_null()) else { continue };
        let header_name = format!("mcp-param-{}", a.name.to_ascii_lowercase());
        let value = header(&header_name).and_then(header_value);
        let value_ok = |v: &str| fault::on(Fault::BrHttpParamValueUnchecked) || header_matches(v, arg);
        if !value.is_some_and(|v| value_ok(&v)) {
            return Err(ResponseError::new(
                ErrorCode::HEADER_MISMATCH,
                format!("the Mcp-Param-{} header must equal the argument {} ({arg})", a.name, a.path.join(".")),
            ));
        }
    }
    Ok(())
}
