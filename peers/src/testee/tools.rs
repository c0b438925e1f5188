//! The tools of Appendix B.1: definitions (names, descriptions, input and output schemas), the
//! argument check that runs before any handler, and the handlers themselves.

use std::collections::BTreeMap;
use std::time::Duration;

use protomcp_proto::envelopes as env;
use protomcp_proto::fixture::FixtureTool;
use protomcp_proto::frame::{LARGE_LIMIT, MAX_FRAME};
use protomcp_proto::pb::{CallToolResponse, ToolDefinition, ToolError};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use protomcp_proto::fault::{Fault, on};

use super::cx::{CallCx, Failure, Reply, ReverseKind, text_json};
use super::sideband::call_result_envelope_len;

/// JSON Schema type of an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamType {
    String,
    Integer,
    Boolean,
}

impl ParamType {
    fn schema_name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Boolean => "boolean",
        }
    }
}

/// One argument. Every argument of the fixture is required.
#[derive(Debug)]
pub(crate) struct Param {
    pub name: &'static str,
    pub ty: ParamType,
    pub description: &'static str,
}

/// One tool of the fixture.
#[derive(Debug)]
pub(crate) struct ToolSpec {
    pub description: &'static str,
    pub params: &'static [Param],
    /// JSON text of the output schema (TP-HANDSHAKE-05).
    pub output_schema: Option<&'static str>,
    /// Listed, then disabled right after the handshake marker (TP-HANDSHAKE-12).
    pub hidden: bool,
    /// Builds results of up to `LARGE_LIMIT` bytes: runs under a small concurrency limit so a
    /// flood of such calls cannot exhaust memory.
    pub heavy: bool,
    pub kind: FixtureTool,
}

impl ToolSpec {
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }
}

const fn p(name: &'static str, ty: ParamType, description: &'static str) -> Param {
    Param { name, ty, description }
}

const N_PARAM: &[Param] = &[p("n", ParamType::Integer, "Number of `x` characters")];

/// Output schema of `structured`, as Appendix B.1 gives it.
pub(crate) const STRUCTURED_OUTPUT_SCHEMA: &str = r#"{"type":"object","properties":{"answer":{"type":"integer"}}}"#;

/// The tool table: every tool of Appendix B.1 (the reference claims every feature).
pub(crate) const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        description: "Returns `text` unchanged as one text element.",
        params: &[p("text", ParamType::String, "Text to return")],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Echo,
    },
    ToolSpec {
        description: "Returns the decimal sum of the integers `a` and `b`.",
        params: &[p("a", ParamType::Integer, "First addend"), p("b", ParamType::Integer, "Second addend")],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Add,
    },
    ToolSpec {
        description: "Always fails inside its handler with the message `fixture failure`.",
        params: &[],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Fail,
    },
    ToolSpec {
        description: "Returns an error result with error code E_FIXTURE, retryable.",
        params: &[],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::FailSoft,
    },
    ToolSpec {
        description: "Takes `steps` × 100 ms, reporting progress after each step; stops early when cancelled.",
        params: &[p("steps", ParamType::Integer, "Number of 100 ms steps")],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Slow,
    },
    ToolSpec {
        description: "Returns a text of `n` `x` characters (large ones travel through the sideband).",
        params: N_PARAM,
        output_schema: None,
        hidden: false,
        heavy: true,
        kind: FixtureTool::Big,
    },
    ToolSpec {
        description: "Returns an error result of `n` `x` characters with error code E_BIG (shortened to fit a frame).",
        params: N_PARAM,
        output_schema: None,
        hidden: false,
        heavy: true,
        kind: FixtureTool::BigErr,
    },
    ToolSpec {
        description: "Returns `ok` and enables (`enable` true) or disables the tool `secret`.",
        params: &[p("enable", ParamType::Boolean, "Enable `secret` when true, disable it when false")],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Toggle,
    },
    ToolSpec {
        description: "Returns `secret`; hidden at startup.",
        params: &[],
        output_schema: None,
        hidden: true,
        heavy: false,
        kind: FixtureTool::Secret,
    },
    ToolSpec {
        description: "Returns the structured content {\"answer\":42}, also as a text element.",
        params: &[],
        output_schema: Some(STRUCTURED_OUTPUT_SCHEMA),
        hidden: false,
        heavy: false,
        kind: FixtureTool::Structured,
    },
    ToolSpec {
        description: "Logs `fixture log` at level info, then returns `logged`.",
        params: &[],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Logit,
    },
    ToolSpec {
        description: "Restricts the active tools to echo and narrow and returns the resulting active set.",
        params: &[],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Narrow,
    },
    ToolSpec {
        description: "Asks the host's model `question` and returns the answer's text.",
        params: &[p("question", ParamType::String, "Question for the model")],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Ask,
    },
    ToolSpec {
        description: "Returns the host's root URIs, one per line.",
        params: &[],
        output_schema: None,
        hidden: false,
        heavy: false,
        kind: FixtureTool::Roots,
    },
    ToolSpec {
        description: "Returns a text of `n` `x` characters as a chunked stream.",
        params: N_PARAM,
        output_schema: None,
        hidden: false,
        heavy: true,
        kind: FixtureTool::StreamBig,
    },
];

/// The tool registered under exactly `name` (TP-CALL-19: hidden or not).
pub(crate) fn find(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name() == name && !(t.hidden && on(Fault::TpCallHiddenNotCallable)))
}

/// The input schema: `{"type":"object","properties":{…},"required":[…]}` (TP-HANDSHAKE-04);
/// `required` is left out when there is nothing to require.
pub(crate) fn input_schema(spec: &ToolSpec) -> String {
    if on(Fault::TpHandshakeSchemaNoType) && spec.params.is_empty() {
        return r#"{"properties":{}}"#.to_owned();
    }
    let properties: serde_json::Map<String, Value> = spec
        .params
        .iter()
        .map(|p| (p.name.to_owned(), json!({"type": p.ty.schema_name(), "description": p.description})))
        .collect();
    let mut schema = json!({"type": "object", "properties": properties});
    if !spec.params.is_empty() {
        schema["required"] = spec.params.iter().map(|p| Value::from(p.name)).collect();
    }
    schema.to_string()
}

/// Every tool, hidden ones included (TP-HANDSHAKE-03), with a description (TP-HANDSHAKE-07) and,
/// for `structured`, its output schema (TP-HANDSHAKE-05/08).
pub(crate) fn definitions() -> Vec<ToolDefinition> {
    TOOLS
        .iter()
        .filter(|t| !(t.hidden && on(Fault::TpHandshakeHiddenUnlisted)))
        .map(|t| ToolDefinition {
            output_schema_json: match t.output_schema {
                Some(_) if on(Fault::TpHandshakeOutputSchemaBare) => r#"{"answer":{"type":"integer"}}"#.to_owned(),
                s => s.unwrap_or_default().to_owned(),
            },
            ..env::tool(t.name(), t.description, &input_schema(t))
        })
        .collect()
}

/// Names of the tools registered hidden.
pub(crate) fn hidden() -> Vec<String> {
    TOOLS.iter().filter(|t| t.hidden).map(|t| t.name().to_owned()).collect()
}

/// A checked argument value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgValue {
    Str(String),
    Int(i128),
    Bool(bool),
}

/// The arguments of a call after the check, by parameter name.
#[derive(Debug, Default)]
pub(crate) struct Args(BTreeMap<&'static str, ArgValue>);

impl Args {
    fn str(&self, name: &str) -> &str {
        match self.0.get(name) {
            Some(ArgValue::Str(s)) => s,
            _ => "",
        }
    }

    fn int(&self, name: &str) -> i128 {
        match self.0.get(name) {
            Some(ArgValue::Int(i)) => *i,
            _ => 0,
        }
    }

    fn bool(&self, name: &str) -> bool {
        matches!(self.0.get(name), Some(ArgValue::Bool(true)))
    }
}

/// Why a tool call's arguments are refused (the text of the tool error the testee answers with).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgsError {
    #[error("Invalid arguments for {tool}: not valid JSON ({error})")]
    NotJson { tool: String, error: String },
    #[error("Invalid arguments for {tool}: expected a JSON object, got {kind}")]
    NotObject { tool: String, kind: &'static str },
    #[error("Invalid arguments for {tool}: missing required argument {name:?}")]
    Missing { tool: String, name: &'static str },
    #[error("Invalid arguments for {tool}: argument {name:?} must be {article} {ty}")]
    WrongType { tool: String, name: &'static str, article: &'static str, ty: &'static str },
}

/// Checks `arguments_json` against the tool's schema before the handler runs. `Err` gives the text
/// of the is_error result.
///
/// - empty text means `{}` (TP-CALL-08);
/// - text that is not JSON is refused (TP-CALL-09), and so is JSON that is not an object
///   (TP-CALL-10);
/// - required members and their primitive types are checked (TP-CALL-12); members the schema
///   does not name are allowed and ignored (the `mirror` middleware adds `mw`);
/// - values are never converted to numbers or trees beyond what the schema asks, so any valid
///   JSON (numbers of any size, lone surrogate escapes) in other members is accepted.
pub(crate) fn check_args(spec: &ToolSpec, arguments_json: &str) -> Result<Args, ArgsError> {
    let text = if arguments_json.is_empty() && !on(Fault::TpCallEmptyArgsRejected) { "{}" } else { arguments_json };
    let members: BTreeMap<String, Box<RawValue>> = match serde_json::from_str(text) {
        Ok(m) => m,
        Err(_) if on(Fault::TpCallInvalidJsonRuns) && serde_json::from_str::<Box<RawValue>>(text).is_err() => {
            BTreeMap::new()
        }
        Err(e) => {
            return Err(match serde_json::from_str::<Box<RawValue>>(text) {
                Ok(_) => ArgsError::NotObject { tool: spec.name().to_string(), kind: json_kind(text) },
                Err(_) => ArgsError::NotJson { tool: spec.name().to_string(), error: e.to_string() },
            });
        }
    };
    let mut args = Args::default();
    for param in spec.params {
        let Some(raw) = members.get(param.name) else {
            return Err(ArgsError::Missing { tool: spec.name().to_string(), name: param.name });
        };
        let value = match param.ty {
            ParamType::String => serde_json::from_str::<String>(raw.get()).ok().map(ArgValue::Str),
            ParamType::Integer => json_integer(raw.get()).map(ArgValue::Int),
            ParamType::Boolean => serde_json::from_str::<bool>(raw.get()).ok().map(ArgValue::Bool),
        };
        let Some(value) = value else {
            return Err(ArgsError::WrongType {
                tool: spec.name().to_string(),
                name: param.name,
                article: if param.ty == ParamType::Integer { "an" } else { "a" },
                ty: param.ty.schema_name(),
            });
        };
        args.0.insert(param.name, value);
    }
    Ok(args)
}

/// What kind of JSON value `text` (valid JSON) is.
fn json_kind(text: &str) -> &'static str {
    match text.trim_start().as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// A JSON number that is an integer in the JSON Schema sense (a zero fraction is allowed:
/// `2.0`), within ±2^100 so that sums cannot overflow.
fn json_integer(raw: &str) -> Option<i128> {
    const LIMIT: i128 = 1 << 100;
    let raw = raw.trim();
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return raw.parse::<i128>().ok().filter(|v| v.abs() <= LIMIT);
    }
    // Fractions and exponents: only when the value is whole.
    let number: serde_json::Number = serde_json::from_str(raw).ok()?;
    let f = number.as_f64()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() <= LIMIT as f64).then_some(f as i128)
}

/// A successful result with one text element (TP-CALL-03).
pub(crate) fn text(t: &str) -> Reply {
    let result_json =
        if on(Fault::TpCallTextDoubleEncoded) { text_json(&Value::from(t).to_string()) } else { text_json(t) };
    let error = on(Fault::TpCallErrorOnSuccess).then(ToolError::default);
    Reply::Response(CallToolResponse { result_json, error, ..Default::default() })
}

/// An error result with one text element and an optional ToolError.
pub(crate) fn error(t: &str, tool_error: Option<ToolError>) -> Reply {
    Reply::Response(CallToolResponse {
        is_error: true,
        result_json: text_json(t),
        error: tool_error,
        ..Default::default()
    })
}

/// The result_json of a text of `n` `x` characters, built without a JSON serializer.
fn x_json(n: usize) -> String {
    const HEAD: &str = r#"[{"type":"text","text":""#;
    const TAIL: &str = r#""}]"#;
    let mut s = String::with_capacity(HEAD.len() + n + TAIL.len());
    s.push_str(HEAD);
    s.extend(std::iter::repeat_n('x', n));
    s.push_str(TAIL);
    s
}

/// Bytes `x_json` adds around the `x` characters.
const X_JSON_OVERHEAD: usize = 27;

/// Largest `n` of `big` and `stream_big`: the result_json stays within `LARGE_LIMIT`, the
/// largest payload a bridge must accept (BR-SIDEBAND-06). Larger values are refused as bad
/// arguments rather than allocated.
pub(crate) const MAX_N: usize = LARGE_LIMIT as usize - X_JSON_OVERHEAD;

/// `n` as a length for `big` / `stream_big`, or `None` when out of range.
fn length(n: i128) -> Option<usize> {
    usize::try_from(n).ok().filter(|n| *n <= MAX_N)
}

/// The error result for an `n` out of range.
fn bad_length(tool: &str) -> Reply {
    error(&format!("Invalid arguments for {tool}: n must be between 0 and {MAX_N}"), None)
}

/// Runs the handler of `kind`. `Err` is a handler failure (the Rust form of "raises").
pub(crate) async fn handle(kind: FixtureTool, cx: &CallCx, args: Args) -> Result<Reply, Failure> {
    Ok(match kind {
        FixtureTool::Echo => {
            if on(Fault::TpCallEchoSlow) {
                tokio::time::sleep(Duration::from_millis(1500)).await;
            }
            text(args.str("text"))
        }
        FixtureTool::Add => text(&(args.int("a") + args.int("b")).to_string()),
        // D-01 / TP-CALL-07: the failure becomes an error result carrying its message.
        FixtureTool::Fail => return Err(Failure::new("fixture failure")),
        FixtureTool::FailSoft => error(
            "soft failure",
            Some(ToolError {
                error_code: "E_FIXTURE".into(),
                message: "soft failure".into(),
                suggestion: "retry later".into(),
                retryable: !on(Fault::TpCallRetryableDropped),
            }),
        ),
        FixtureTool::Slow => slow(cx, args.int("steps")).await,
        FixtureTool::Big => match length(args.int("n")) {
            Some(n) => Reply::Response(CallToolResponse { result_json: x_json(n), ..Default::default() }),
            None => bad_length("big"),
        },
        FixtureTool::BigErr => big_err(cx.rid(), args.int("n")),
        FixtureTool::Toggle => {
            // TP-CALL-15: the names exactly as the handler gives them.
            let mut r = CallToolResponse { result_json: text_json("ok"), ..Default::default() };
            if args.bool("enable") != on(Fault::TpCallToggleSwapped) {
                r.enable_tools = vec!["secret".into()];
            } else {
                r.disable_tools = vec!["secret".into()];
            }
            Reply::Response(r)
        }
        FixtureTool::Secret => text("secret"),
        FixtureTool::Structured => {
            // TP-CALL-16/17/18: a JSON object conforming to the output schema, also as text.
            let answer = json!({"answer": 42}).to_string();
            Reply::Response(CallToolResponse {
                result_json: text_json(&answer),
                structured_content_json: if on(Fault::TpCallStructuredQuoted) {
                    Value::from(answer).to_string()
                } else {
                    answer
                },
                ..Default::default()
            })
        }
        FixtureTool::Logit => {
            // TP-LOG-01..05: one LogMessage, empty rid, level info, data_json a JSON string,
            // written before the result (same task, one ordered channel).
            let data =
                if on(Fault::TpLogDataRaw) { "fixture log".to_owned() } else { Value::from("fixture log").to_string() };
            cx.log("info", "fixture", &data).await;
            text("logged")
        }
        FixtureTool::Narrow => {
            let reply = cx.reverse(ReverseKind::ActiveTools, env::set_allowed(["echo", "narrow"])).await?;
            match reply.msg {
                Some(protomcp_proto::pb::envelope::Msg::ActiveTools(a)) => text(&a.tool_names.join(",")),
                _ => return Err(Failure::new("unexpected answer to SetAllowedRequest")),
            }
        }
        FixtureTool::Ask => ask(cx, args.str("question")).await,
        FixtureTool::Roots => {
            let reply = cx.reverse(ReverseKind::Roots, protomcp_proto::pb::ListRootsRequest {}.into()).await?;
            match reply.msg {
                Some(protomcp_proto::pb::envelope::Msg::ListRootsResponse(r)) => {
                    let uris: Vec<&str> = r.roots.iter().map(|r| r.uri.as_str()).collect();
                    text(&uris.join("\n"))
                }
                _ => return Err(Failure::new("unexpected answer to ListRootsRequest")),
            }
        }
        FixtureTool::StreamBig => match length(args.int("n")) {
            Some(n) => Reply::Stream(x_json(n)),
            None => bad_length("stream_big"),
        },
    })
}

/// `slow`: steps × 100 ms with progress after each step (TP-PROGRESS-01..05: only with a
/// token, values 1..=steps with total steps, all before the result); stops within one tick of
/// a cancellation (TP-CANCEL-04) and returns `cancelled`.
async fn slow(cx: &CallCx, steps: i128) -> Reply {
    let Ok(steps) = i64::try_from(steps) else {
        return error("Invalid arguments for slow: steps is out of range", None);
    };
    if steps < 0 {
        return error("Invalid arguments for slow: steps must not be negative", None);
    }
    for i in 1..=steps {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = cx.cancelled() => return text("cancelled"),
        }
        cx.progress(i, steps, &format!("step {i}")).await;
    }
    text(&format!("done {steps}"))
}

/// `big_err`: an error result of `n` `x` characters with error_code `E_BIG`. Error results may
/// not use the sideband (TP-SIDEBAND-05), so when the frame would exceed `MAX_FRAME` the text is
/// shortened to the longest run of `x` that fits, keeping is_error and the ToolError
/// (TP-SIDEBAND-11). Nothing of size `n` is ever allocated.
fn big_err(rid: &str, n: i128) -> Reply {
    if n < 0 {
        return error("Invalid arguments for big_err: n must not be negative", None);
    }
    let tool_error = ToolError {
        error_code: "E_BIG".into(),
        message: "big error".into(),
        suggestion: String::new(),
        retryable: false,
    };
    let empty = CallToolResponse {
        is_error: true,
        result_json: x_json(0),
        error: Some(tool_error.clone()),
        ..Default::default()
    };
    // Room for x's: what is left of MAX_FRAME, less up to 2 × 4 bytes of longer length varints.
    let mut room = (MAX_FRAME as usize).saturating_sub(call_result_envelope_len(rid, &empty) + 8);
    if on(Fault::TpSidebandErrorNotShortened) || on(Fault::TpFrameNoWriteLimit) {
        room = MAX_N;
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX).min(room);
    Reply::Response(CallToolResponse { result_json: x_json(n), ..empty })
}

/// `ask`: one user text message (TP-SAMPLING-01), a positive max_tokens and no model
/// preferences (TP-SAMPLING-06); the answer's text, or `error: <message>` when the bridge
/// reports a failure (TP-SAMPLING-03) or the bounded wait ends (TP-SAMPLING-04).
async fn ask(cx: &CallCx, question: &str) -> Reply {
    let mut messages = json!([{"role": "user", "content": {"type": "text", "text": question}}]);
    if on(Fault::TpSamplingMessagesObject) {
        messages = messages[0].take();
    }
    let request = protomcp_proto::pb::SamplingRequest {
        messages_json: messages.to_string(),
        model_preferences_json: String::new(),
        system_prompt: String::new(),
        max_tokens: 256,
    };
    let answer = match cx.reverse(ReverseKind::Sampling, request.into()).await {
        Ok(a) => a,
        Err(f) if f.is_cancellation() => return text("cancelled"),
        Err(f) => return text(&format!("error: {}", f.message())),
    };
    let Some(protomcp_proto::pb::envelope::Msg::SamplingResponse(s)) = answer.msg else {
        return text("error: unexpected answer to SamplingRequest");
    };
    if !s.error.is_empty() && !on(Fault::TpSamplingErrorIgnored) {
        return text(&format!("error: {}", s.error));
    }
    match serde_json::from_str::<Value>(&s.content_json) {
        Ok(Value::Object(content)) => match content.get("text") {
            Some(Value::String(t)) => text(t),
            _ => text(&format!("error: the answer has no text content: {}", s.content_json)),
        },
        // A bare string is taken as text, as bridges accept it in the other direction.
        Ok(Value::String(t)) => text(&t),
        _ => text(&format!("error: the answer's content is not a content object: {}", s.content_json)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_testee_registers_every_fixture_tool_once() {
        let kinds: Vec<FixtureTool> = TOOLS.iter().map(|t| t.kind).collect();
        assert_eq!(kinds, FixtureTool::all().collect::<Vec<_>>());
    }

    fn spec(name: &str) -> &'static ToolSpec {
        find(name).expect("listed")
    }

    #[test]
    fn x_json_overhead_is_exact() {
        assert_eq!(x_json(0).len(), X_JSON_OVERHEAD);
        assert_eq!(x_json(3), r#"[{"type":"text","text":"xxx"}]"#);
        let parsed: Value = serde_json::from_str(&x_json(5)).unwrap();
        assert_eq!(parsed, json!([{"type":"text","text":"xxxxx"}]));
    }

    #[test]
    fn every_schema_is_an_object_schema() {
        for t in TOOLS {
            let s: Value = serde_json::from_str(&input_schema(t)).unwrap();
            assert_eq!(s["type"], "object", "{}", t.name());
            assert!(s["properties"].is_object());
            let required = s.get("required").and_then(Value::as_array).map_or(0, Vec::len);
            assert_eq!(required, t.params.len(), "{}", t.name());
        }
        assert_eq!(hidden(), ["secret"]);
    }

    #[test]
    fn argument_checks() {
        let echo = spec("echo");
        assert!(
            matches!(check_args(echo, r#"{"text":"hi","x":1e400}"#).unwrap().0["text"], ArgValue::Str(ref s) if s == "hi")
        );
        assert!(check_args(echo, "").unwrap_err().to_string().contains("missing required argument \"text\""));
        assert!(check_args(echo, "{").unwrap_err().to_string().contains("not valid JSON"));
        assert!(check_args(echo, "[1]").unwrap_err().to_string().contains("got an array"));
        assert!(check_args(echo, "null").unwrap_err().to_string().contains("got null"));
        assert!(check_args(echo, "\"s\"").unwrap_err().to_string().contains("got a string"));
        assert!(check_args(echo, "12").unwrap_err().to_string().contains("got a number"));
        assert!(check_args(echo, r#"{"text":5}"#).unwrap_err().to_string().contains("must be a string"));
        let add = spec("add");
        let a = check_args(add, r#"{"a":2.0,"b":-3}"#).unwrap();
        assert_eq!((a.int("a"), a.int("b")), (2, -3));
        assert!(check_args(add, r#"{"a":1.5,"b":1}"#).unwrap_err().to_string().contains("must be an integer"));
        assert!(check_args(add, r#"{"a":"1","b":1}"#).unwrap_err().to_string().contains("must be an integer"));
        assert!(check_args(add, r#"{"a":1e400,"b":1}"#).is_err());
        let big = check_args(add, r#"{"a":9223372036854775807,"b":9223372036854775807}"#).unwrap();
        assert_eq!(big.int("a") + big.int("b"), 18_446_744_073_709_551_614);
        assert!(
            check_args(spec("toggle"), r#"{"enable":"yes"}"#).unwrap_err().to_string().contains("must be a boolean")
        );
        assert!(check_args(spec("secret"), "").is_ok());
        assert!(check_args(spec("secret"), "{}").is_ok());
    }

    #[test]
    fn big_err_fits_a_frame_whatever_n_and_rid() {
        for (rid, n) in [("r", i128::MAX), ("r", 20_000_000), (&*"R".repeat(1 << 20), 12_000_000)] {
            let Reply::Response(r) = big_err(rid, n) else { panic!() };
            assert!(r.is_error);
            assert_eq!(r.error.as_ref().unwrap().error_code, "E_BIG");
            assert!(call_result_envelope_len(rid, &r) <= MAX_FRAME as usize);
            assert!(call_result_envelope_len(rid, &r) > MAX_FRAME as usize - 64, "as long as it can be");
        }
        let Reply::Response(r) = big_err("r", 10) else { panic!() };
        assert_eq!(r.result_json, x_json(10));
    }
}
