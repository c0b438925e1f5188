//! The fixture of the official MCP conformance suite (`protomcp-conform testee --mcp-conformance`):
//! the tools, resources, template, prompts and completion that the suite's server scenarios call,
//! served as an ordinary protomcp tool process. Everything travels in Envelopes: content blocks
//! (text, image, audio, embedded resource) in `result_json` and `content_json` as the MCP content
//! objects the bridge passes through unchanged (BR-CALL-07, BR-PROMPT-05), binary resource content
//! as `blob` (BR-RESOURCE-04), logging as LogMessage, progress as ProgressNotification, sampling as
//! SamplingRequest. The suite's elicitation scenarios have no counterpart: the protocol has no
//! elicitation message (tests/mcp-conformance/expected-failures.yaml).
//!
//! Texts and names follow the suite's scenario descriptions; `harness/testees/README.md` §8
//! lists them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use protomcp_proto::envelopes as env;
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{
    CallToolResponse, CompletionRequest, CompletionResponse, Envelope, GetPromptRequest, GetPromptResponse,
    PromptArgument, PromptDefinition, PromptListResponse, PromptMessage, ReadResourceResponse, ResourceListResponse,
    ResourceTemplateDefinition, ResourceTemplateListResponse, SamplingRequest, ToolDefinition,
};
use serde_json::{Value, json};

use super::cx::{CallCx, Failure, Reply, ReverseKind};
use super::tools;

/// A 1×1 red PNG (valid chunk CRCs), the image of every image fixture.
pub(crate) const RED_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xf7, 0x03, 0x41, 0x43,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Samples of the audio fixture: 1 ms of silence at 8 kHz, 8-bit mono.
const WAV_SAMPLES: usize = 8;
const WAV_RATE: u32 = 8000;

pub(crate) const STATIC_TEXT_URI: &str = "test://static-text";
pub(crate) const STATIC_TEXT: &str = "This is the content of the static text resource.";
pub(crate) const STATIC_BINARY_URI: &str = "test://static-binary";
pub(crate) const WATCHED_URI: &str = "test://watched-resource";
const WATCHED_TEXT: &str = "This is the content of the watched resource.";
pub(crate) const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";
const TEXT_PLAIN: &str = "text/plain";
const IMAGE_PNG: &str = "image/png";
const APPLICATION_JSON: &str = "application/json";
/// Completion candidates of argument `arg1` of `test_prompt_with_arguments` (the suite's example).
pub(crate) const ARG1_CANDIDATES: &[&str] = &["paris", "park", "party"];
/// The logger name of `test_tool_with_logging`'s entries.
const LOGGER: &str = "conformance";
/// Pause between the log entries and between the progress reports (the suite asks for ~50 ms).
const STEP: Duration = Duration::from_millis(50);

/// The JSON Schema 2020-12 input schema the suite's `json-schema-2020-12` scenario (pending) expects
/// to see unchanged in tools/list: its canonical fixture, with the composition (`allOf`/`anyOf`),
/// conditional (`if`/`then`/`else`) and `$anchor` keywords its 2026-07-28 checks look for.
const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

const NO_ARGUMENTS: &str = r#"{"type":"object","properties":{}}"#;

/// The tools: name, description, input schema.
const TOOLS: &[(&str, &str, &str)] = &[
    ("test_simple_text", "Returns one text block.", NO_ARGUMENTS),
    ("test_image_content", "Returns one image block (a 1x1 red PNG).", NO_ARGUMENTS),
    ("test_audio_content", "Returns one audio block (a short silent WAV).", NO_ARGUMENTS),
    ("test_embedded_resource", "Returns one embedded text resource.", NO_ARGUMENTS),
    ("test_multiple_content_types", "Returns a text, an image and an embedded resource block.", NO_ARGUMENTS),
    ("test_tool_with_logging", "Logs three entries at level info, 50 ms apart, then returns.", NO_ARGUMENTS),
    ("test_error_handling", "Always fails; the failure becomes an isError result.", NO_ARGUMENTS),
    ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100, 50 ms apart, then returns.", NO_ARGUMENTS),
    (
        "test_sampling",
        "Asks the host's model `prompt` and returns its answer.",
        r#"{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the model"}},"required":["prompt"]}"#,
    ),
    ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12),
    // The diagnostic tools of the suite's 2026-07-28 `server-stateless` scenario.
    (
        "test_missing_capability",
        "Needs the host's model: asks it through a SamplingRequest and returns its answer, else an error result.",
        NO_ARGUMENTS,
    ),
    (
        "test_streaming_elicitation",
        "Reports progress 50 of 100, asks the host's model (the protocol has no elicitation), then returns.",
        NO_ARGUMENTS,
    ),
    ("test_logging_tool", "Logs one entry at level info, then returns.", NO_ARGUMENTS),
    (
        "test_trigger_tool_change",
        "Disables, then on the next call enables again, the tool test_toggled_tool.",
        NO_ARGUMENTS,
    ),
    ("test_toggled_tool", "Listed or not, as test_trigger_tool_change leaves it.", NO_ARGUMENTS),
    // The tools of the suite's 2026-07-28 `input-required-result-*` scenarios that a tool process
    // can express: its reverse requests are SamplingRequest and ListRootsRequest, which a bridge
    // serving 2026-07-28 turns into an InputRequiredResult (BR-STATELESS-17). The protocol has no
    // elicitation: `test_input_required_result_elicitation` asks the model instead, so that the
    // scenarios that use it to test input_required in general (result type, extra params, missing
    // or malformed inputResponses) exercise the bridge; those that need an elicitation/create
    // input request, `_multiple_inputs` included, cannot pass. The prompt one
    // (`test_input_required_result_prompt`) has no counterpart: a prompt cannot ask the host.
    (
        "test_input_required_result_elicitation",
        "Asks the host's model \"What is your name?\" (the protocol has no elicitation) and returns its answer.",
        NO_ARGUMENTS,
    ),
    (
        "test_input_required_result_sampling",
        "Asks the host's model \"What is the capital of France?\" and returns its answer.",
        NO_ARGUMENTS,
    ),
    ("test_input_required_result_list_roots", "Returns the host's root URIs, one per line.", NO_ARGUMENTS),
    (
        "test_input_required_result_request_state",
        "Asks the host's model to confirm; returns state-ok and its answer.",
        NO_ARGUMENTS,
    ),
    (
        "test_input_required_result_multi_round",
        "Asks the host's model twice, one question after the other.",
        NO_ARGUMENTS,
    ),
    ("test_input_required_result_tampered_state", "Asks the host's model to confirm, then returns.", NO_ARGUMENTS),
    ("test_input_required_result_capabilities", "Asks the host's model one question, then returns.", NO_ARGUMENTS),
];

/// Whether `test_trigger_tool_change` disabled `test_toggled_tool` last.
static TOGGLED_OFF: AtomicBool = AtomicBool::new(false);

/// Every tool of the fixture (none hidden, none with an output schema).
pub(crate) fn definitions() -> Vec<ToolDefinition> {
    TOOLS.iter().map(|(name, description, schema)| env::tool(name, description, schema)).collect()
}

/// Runs the tool `name`. Unknown names and bad arguments are error results, as in the Appendix B
/// fixture (TP-CALL-04/08); a handler failure is returned as `Err` and becomes an error result
/// carrying its message (TP-CALL-07).
pub(crate) async fn call(cx: &CallCx, name: &str, arguments_json: &str) -> Result<Reply, Failure> {
    let text = if arguments_json.is_empty() { "{}" } else { arguments_json };
    let Ok(arguments) = serde_json::from_str::<serde_json::Map<String, Value>>(text) else {
        return Ok(tools::error(&format!("Invalid arguments for {name}: expected a JSON object"), None));
    };
    Ok(match name {
        "test_simple_text" => tools::text("This is a simple text response for testing."),
        "test_image_content" => content(json!([image_block()])),
        "test_audio_content" => {
            content(json!([{"type": "audio", "data": base64(&silent_wav()), "mimeType": "audio/wav"}]))
        }
        "test_embedded_resource" => content(json!([{
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": TEXT_PLAIN,
                "text": "This is an embedded resource content."
            }
        }])),
        "test_multiple_content_types" => content(json!([
            {"type": "text", "text": "Multiple content types test:"},
            image_block(),
            {
                "type": "resource",
                "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": APPLICATION_JSON,
                    "text": json!({"test": "data", "value": 123}).to_string()
                }
            }
        ])),
        "test_tool_with_logging" => {
            let entries = ["Tool execution started", "Tool processing data", "Tool execution completed"];
            for (i, entry) in entries.iter().enumerate() {
                if i > 0 {
                    pause(cx).await?;
                }
                cx.log("info", LOGGER, &Value::from(*entry).to_string()).await;
            }
            tools::text("Tool with logging executed successfully")
        }
        "test_error_handling" => return Err(Failure::new("This tool intentionally returns an error for testing")),
        "test_tool_with_progress" => {
            // Without a progress token the reports are no-ops (TP-PROGRESS-02); the delays stay.
            for (i, progress) in [0, 50, 100].into_iter().enumerate() {
                if i > 0 {
                    pause(cx).await?;
                }
                cx.progress(progress, 100, "").await;
            }
            tools::text("Tool with progress executed successfully")
        }
        "test_sampling" => match arguments.get("prompt") {
            Some(Value::String(prompt)) => sample(cx, prompt).await?,
            _ => tools::error("Invalid arguments for test_sampling: missing required string argument \"prompt\"", None),
        },
        "json_schema_2020_12_tool" => tools::text(&format!("Received: {}", Value::Object(arguments))),
        // The suite expects -32021 when the host did not declare `sampling`; under protomcp the
        // bridge answers the SamplingRequest with an error instead and the call goes on
        // (BR-STATELESS-16, BR-SAMPLING-10), so this is an error result.
        "test_missing_capability" => sample(cx, "Reply with one word.").await?,
        // The suite's fixture streams a progress notification and the result; the host declares
        // only `elicitation`, which protomcp cannot ask for, so the reverse request here is a
        // SamplingRequest the bridge must refuse towards the tool process: nothing but
        // notifications and the result may reach the response stream. Its outcome is reported.
        "test_streaming_elicitation" => {
            cx.progress(50, 100, "").await;
            let outcome = match sample(cx, "Reply with one word.").await {
                Ok(_) => "answered",
                Err(f) if f.is_cancellation() => return Err(f),
                Err(_) => "refused",
            };
            tools::text(&format!("Streaming complete (sampling {outcome})"))
        }
        // Logged whatever the host asked: the bridge decides whom a log entry reaches (BR-LOG-08).
        "test_logging_tool" => {
            cx.log("info", LOGGER, &Value::from("Diagnostic trace logging activated").to_string()).await;
            tools::text("Logging evaluated")
        }
        "test_trigger_tool_change" => {
            let off = !TOGGLED_OFF.fetch_xor(true, Ordering::SeqCst);
            let toggled = vec!["test_toggled_tool".to_owned()];
            let mut r = CallToolResponse {
                result_json: json!([{"type": "text", "text": "Mutation triggered"}]).to_string(),
                ..Default::default()
            };
            if off {
                r.disable_tools = toggled;
            } else {
                r.enable_tools = toggled;
            }
            Reply::Response(r)
        }
        "test_toggled_tool" => tools::text("toggled"),
        "test_input_required_result_sampling" => sample(cx, "What is the capital of France?").await?,
        "test_input_required_result_elicitation" => sample(cx, "What is your name?").await?,
        "test_input_required_result_list_roots" => roots(cx).await?,
        "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
            tools::text(&format!("state-ok: {}", model_answer(cx, "Please confirm").await?))
        }
        "test_input_required_result_multi_round" => {
            let first = model_answer(cx, "Step 1: What is your name?").await?;
            let second = model_answer(cx, "Step 2: What is your favorite color?").await?;
            tools::text(&format!("LLM responses: {first} / {second}"))
        }
        "test_input_required_result_capabilities" => sample(cx, "Generate a greeting").await?,
        _ => tools::error(&format!("Tool not found: {name}"), None),
    })
}

/// Waits one step, or fails when the call is cancelled meanwhile.
async fn pause(cx: &CallCx) -> Result<(), Failure> {
    tokio::select! {
        _ = tokio::time::sleep(STEP) => Ok(()),
        _ = cx.cancelled() => Err(Failure::cancelled()),
    }
}

/// `test_sampling`: one user text message and maxTokens 100, as the suite asks; the answer's text
/// as `LLM response: <text>`. A sampling failure reported by the bridge (a host without the
/// `sampling` capability, an error, a timeout) is an error result, as the suite asks.
async fn sample(cx: &CallCx, prompt: &str) -> Result<Reply, Failure> {
    Ok(tools::text(&format!("LLM response: {}", model_answer(cx, prompt).await?)))
}

/// The text of the host model's answer to `prompt` (one user text message, maxTokens 100); a
/// sampling failure is an `Err` carrying the bridge's message.
async fn model_answer(cx: &CallCx, prompt: &str) -> Result<String, Failure> {
    let request = SamplingRequest {
        messages_json: json!([{"role": "user", "content": {"type": "text", "text": prompt}}]).to_string(),
        model_preferences_json: String::new(),
        system_prompt: String::new(),
        max_tokens: 100,
    };
    let answer = cx.reverse(ReverseKind::Sampling, request.into()).await?;
    let Some(Msg::SamplingResponse(s)) = answer.msg else {
        return Err(Failure::new("unexpected answer to SamplingRequest"));
    };
    if !s.error.is_empty() {
        return Err(Failure::new(format!("sampling failed: {}", s.error)));
    }
    let text = match serde_json::from_str::<Value>(&s.content_json) {
        Ok(Value::Object(c)) => match c.get("text") {
            Some(Value::String(t)) => t.clone(),
            _ => s.content_json.clone(),
        },
        Ok(Value::String(t)) => t,
        _ => s.content_json.clone(),
    };
    Ok(text)
}

/// The host's root URIs, one per line (`test_input_required_result_list_roots`).
async fn roots(cx: &CallCx) -> Result<Reply, Failure> {
    let answer = cx.reverse(ReverseKind::Roots, protomcp_proto::pb::ListRootsRequest {}.into()).await?;
    let Some(Msg::ListRootsResponse(r)) = answer.msg else {
        return Err(Failure::new("unexpected answer to ListRootsRequest"));
    };
    let uris: Vec<&str> = r.roots.iter().map(|r| r.uri.as_str()).collect();
    Ok(tools::text(&format!("Roots: {}", uris.join("\n"))))
}

/// A successful result whose result_json is `blocks` (a JSON array of content objects).
fn content(blocks: Value) -> Reply {
    Reply::Response(CallToolResponse { result_json: blocks.to_string(), ..Default::default() })
}

fn image_block() -> Value {
    json!({"type": "image", "data": base64(RED_PIXEL_PNG), "mimeType": IMAGE_PNG})
}

/// A RIFF/WAVE file: PCM, mono, 8-bit, [`WAV_RATE`] Hz, [`WAV_SAMPLES`] samples of silence.
pub(crate) fn silent_wav() -> Vec<u8> {
    let data_len = WAV_SAMPLES as u32;
    let mut w = Vec::with_capacity(44 + WAV_SAMPLES);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + data_len).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&WAV_RATE.to_le_bytes());
    w.extend_from_slice(&WAV_RATE.to_le_bytes()); // byte rate: rate × 1 channel × 1 byte
    w.extend_from_slice(&1u16.to_le_bytes()); // block align
    w.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&data_len.to_le_bytes());
    w.extend(std::iter::repeat_n(0x80u8, WAV_SAMPLES)); // unsigned 8-bit silence
    w
}

/// Standard base64 with padding (RFC 4648 §4), for the media embedded in content blocks.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [group[0], group.get(1).copied().unwrap_or(0), group.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The answer to a resource, prompt or completion request, or `None` for any other message.
pub(crate) fn answer(msg: &Msg) -> Option<Envelope> {
    Some(match msg {
        Msg::ListResourcesRequest(_) => list_resources().into(),
        Msg::ListResourceTemplatesRequest(_) => list_templates().into(),
        Msg::ReadResourceRequest(req) => read(&req.uri).into(),
        Msg::ListPromptsRequest(_) => list_prompts().into(),
        Msg::GetPromptRequest(req) => get_prompt(req).into(),
        Msg::CompletionRequest(req) => complete(req).into(),
        _ => return None,
    })
}

fn list_resources() -> ResourceListResponse {
    let def = super::resources::resource_def;
    ResourceListResponse {
        resources: vec![
            def(STATIC_TEXT_URI, "static-text", "A static text resource", TEXT_PLAIN, STATIC_TEXT.len()),
            def(STATIC_BINARY_URI, "static-binary", "A static binary resource (a PNG)", IMAGE_PNG, RED_PIXEL_PNG.len()),
            def(WATCHED_URI, "watched-resource", "A resource hosts subscribe to", TEXT_PLAIN, WATCHED_TEXT.len()),
        ],
    }
}

fn list_templates() -> ResourceTemplateListResponse {
    ResourceTemplateListResponse {
        templates: vec![ResourceTemplateDefinition {
            uri_template: TEMPLATE.into(),
            name: "template-data".into(),
            description: "Data for one id".into(),
            mime_type: APPLICATION_JSON.into(),
        }],
    }
}

/// The contents of `uri`; zero contents when nothing matches (TP-RESOURCE-10). `{id}` matches one
/// or more characters other than `/` (TP-RESOURCE-06).
fn read(uri: &str) -> ReadResourceResponse {
    let content = |mime: &str, text: String, blob: &[u8]| super::resources::resource_content(uri, mime, text, blob);
    let found = match uri {
        STATIC_TEXT_URI => Some(content(TEXT_PLAIN, STATIC_TEXT.into(), &[])),
        STATIC_BINARY_URI => Some(content(IMAGE_PNG, String::new(), RED_PIXEL_PNG)),
        WATCHED_URI => Some(content(TEXT_PLAIN, WATCHED_TEXT.into(), &[])),
        _ => uri
            .strip_prefix(TEMPLATE_PREFIX)
            .and_then(|rest| rest.strip_suffix(TEMPLATE_SUFFIX))
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .map(|id| {
                let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                content(APPLICATION_JSON, data.to_string(), &[])
            }),
    };
    ReadResourceResponse { contents: found.into_iter().collect() }
}

fn list_prompts() -> PromptListResponse {
    let arg = |name: &str, description: &str| PromptArgument {
        name: name.into(),
        description: description.into(),
        required: true,
    };
    let prompt = |name: &str, description: &str, arguments: Vec<PromptArgument>| PromptDefinition {
        name: name.into(),
        description: description.into(),
        arguments,
    };
    PromptListResponse {
        prompts: vec![
            prompt("test_simple_prompt", "A prompt without arguments", vec![]),
            prompt(
                "test_prompt_with_arguments",
                "A prompt with two required arguments",
                vec![arg("arg1", "First test argument"), arg("arg2", "Second test argument")],
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                "A prompt embedding a resource",
                vec![arg("resourceUri", "URI of the resource to embed")],
            ),
            prompt("test_prompt_with_image", "A prompt with an image", vec![]),
        ],
    }
}

/// Renders a prompt (TP-PROMPT-02/03); an unknown prompt, arguments that are not a JSON object of
/// strings or a missing required argument give zero messages and a description (TP-PROMPT-04).
fn get_prompt(req: &GetPromptRequest) -> GetPromptResponse {
    let problem = |description: String| GetPromptResponse { description, messages: Vec::new() };
    let text = if req.arguments_json.is_empty() { "{}" } else { &req.arguments_json };
    let arguments: BTreeMap<String, String> = match serde_json::from_str(text) {
        Ok(a) => a,
        Err(e) => {
            return problem(format!("Invalid arguments for {}: expected a JSON object of strings ({e})", req.name));
        }
    };
    let Some(definition) = list_prompts().prompts.into_iter().find(|p| p.name == req.name) else {
        return problem(format!("Prompt not found: {}", req.name));
    };
    if let Some(missing) = definition.arguments.iter().find(|a| a.required && !arguments.contains_key(&a.name)) {
        return problem(format!("Invalid arguments for {}: missing required argument {:?}", req.name, missing.name));
    }
    let user = |content: Value| PromptMessage { role: "user".into(), content_json: content.to_string() };
    let text_block = |t: &str| json!({"type": "text", "text": t});
    let messages = match req.name.as_str() {
        "test_simple_prompt" => vec![user(text_block("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => vec![user(text_block(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arguments["arg1"], arguments["arg2"]
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(json!({
                "type": "resource",
                "resource": {
                    "uri": arguments["resourceUri"],
                    "mimeType": TEXT_PLAIN,
                    "text": "Embedded resource content for testing."
                }
            })),
            user(text_block("Please process the embedded resource above.")),
        ],
        _ => vec![user(image_block()), user(text_block("Please analyze the image above."))],
    };
    GetPromptResponse { description: definition.description, messages }
}

/// Completion of `arg1` of `test_prompt_with_arguments`: the candidates that start with the value
/// (TP-COMPLETE-02/04); anything else gets the empty answer (TP-COMPLETE-01).
fn complete(req: &CompletionRequest) -> CompletionResponse {
    if (req.ref_type.as_str(), req.ref_name.as_str(), req.argument_name.as_str())
        != ("ref/prompt", "test_prompt_with_arguments", "arg1")
    {
        return CompletionResponse::default();
    }
    let values: Vec<String> = ARG1_CANDIDATES
        .iter()
        .filter(|c| c.starts_with(req.argument_value.as_str()))
        .map(|c| (*c).to_owned())
        .collect();
    CompletionResponse { total: values.len() as i32, values, has_more: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn media_fixtures_are_well_formed() {
        assert_eq!(&RED_PIXEL_PNG[..8], b"\x89PNG\r\n\x1a\n");
        let wav = silent_wav();
        assert_eq!(wav.len(), 44 + WAV_SAMPLES);
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize, wav.len() - 8);
        assert_eq!(&wav[36..40], b"data");
    }

    #[test]
    fn every_input_schema_is_a_json_object_schema() {
        for d in definitions() {
            let s: Value = serde_json::from_str(&d.input_schema_json).unwrap();
            assert_eq!(s["type"], "object", "{}", d.name);
            assert!(!d.description.is_empty());
        }
    }

    #[test]
    fn resources_and_template() {
        assert_eq!(read(STATIC_TEXT_URI).contents[0].text, STATIC_TEXT);
        let bin = &read(STATIC_BINARY_URI).contents[0];
        assert!(bin.text.is_empty() && bin.blob.as_ref() == RED_PIXEL_PNG && bin.mime_type == IMAGE_PNG);
        let item: Value = serde_json::from_str(&read("test://template/123/data").contents[0].text).unwrap();
        assert_eq!(item, json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"}));
        for nothing in ["test://template//data", "test://template/1/2/data", "test://template/1", "test://other"] {
            assert!(read(nothing).contents.is_empty(), "{nothing}");
        }
    }

    #[test]
    fn prompts_and_completion() {
        let get =
            |name: &str, args: &str| get_prompt(&GetPromptRequest { name: name.into(), arguments_json: args.into() });
        let r = get("test_prompt_with_arguments", r#"{"arg1":"hello","arg2":"world"}"#);
        let c: Value = serde_json::from_str(&r.messages[0].content_json).unwrap();
        assert_eq!(c["text"], "Prompt with arguments: arg1='hello', arg2='world'");
        let r = get("test_prompt_with_embedded_resource", r#"{"resourceUri":"test://x"}"#);
        let c: Value = serde_json::from_str(&r.messages[0].content_json).unwrap();
        assert_eq!((c["type"].as_str(), c["resource"]["uri"].as_str()), (Some("resource"), Some("test://x")));
        let c: Value = serde_json::from_str(&get("test_prompt_with_image", "").messages[0].content_json).unwrap();
        assert_eq!(c["type"], "image");
        for (name, args) in
            [("nope", "{}"), ("test_prompt_with_arguments", r#"{"arg1":"a"}"#), ("test_simple_prompt", "[1]")]
        {
            let r = get(name, args);
            assert!(r.messages.is_empty() && !r.description.is_empty(), "{name} {args}");
        }
        let complete = |v: &str| {
            complete(&CompletionRequest {
                ref_type: "ref/prompt".into(),
                ref_name: "test_prompt_with_arguments".into(),
                argument_name: "arg1".into(),
                argument_value: v.into(),
            })
        };
        assert_eq!(complete("par").values, ["paris", "park", "party"]);
        assert_eq!(complete("pari").total, 1);
        assert!(complete("test").values.is_empty());
    }
}
