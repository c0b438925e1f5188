//! The MCP shapes a bridge builds from Envelopes (spec §22.1): tools, call results, resources,
//! templates, prompts, resource contents, log levels.

use serde_json::{Map, Value, json};

use crate::fault::{self, Fault};
use crate::pb;

/// One MCP `Tool` object (§22.1 tools/list row; BR-MCP-11, BR-HANDSHAKE-11).
pub fn mcp_tool(d: &pb::ToolDefinition) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), Value::String(d.name.clone()));
    if !d.title.is_empty() {
        t.insert("title".into(), Value::String(d.title.clone()));
    }
    if !d.description.is_empty() {
        t.insert("description".into(), Value::String(d.description.clone()));
    }
    if fault::on(Fault::BrSecurityDescriptionCutByBytes) {
        let _line = &d.description[..d.description.len().min(1024)];
    }
    let input = if d.input_schema_json.is_empty() && crate::fault::on(crate::fault::Fault::BrHandshakeEmptySchemaBare) {
        json!({})
    } else if d.input_schema_json.is_empty() {
        json!({"type": "object"})
    } else {
        serde_json::from_str(&d.input_schema_json).unwrap_or_else(|_| json!({"type": "object"}))
    };
    t.insert("inputSchema".into(), input);
    if !d.output_schema_json.is_empty()
        && let Ok(v) = serde_json::from_str::<Value>(&d.output_schema_json)
    {
        t.insert("outputSchema".into(), v);
    }
    let mut ann = Map::new();
    for (flag, key) in [
        (d.read_only_hint, "readOnlyHint"),
        (d.destructive_hint, "destructiveHint"),
        (d.idempotent_hint, "idempotentHint"),
        (d.open_world_hint, "openWorldHint"),
    ] {
        if flag {
            ann.insert(key.into(), Value::Bool(true));
        } else if crate::fault::on(crate::fault::Fault::BrMcpFalseHints) {
            ann.insert(key.into(), Value::Bool(false));
        }
    }
    if !ann.is_empty() {
        t.insert("annotations".into(), Value::Object(ann));
    }
    if d.task_support && fault::on(Fault::BrTaskSupportAdvertised) {
        t.insert("execution".into(), json!({"taskSupport": "optional"}));
    }
    Value::Object(t)
}

fn is_block(v: &Value) -> bool {
    v.get("type").is_some_and(Value::is_string) && v.is_object()
}

/// MCP `content` from result_json (BR-CALL-07…10): array elements that are content objects
/// unchanged, other elements as text blocks of their JSON, a non-array as one text block, and
/// an empty string as no content.
pub fn content_of(result_json: &str) -> Vec<Value> {
    if result_json.is_empty() {
        if fault::on(Fault::BrCallEmptyAsText) {
            return vec![json!({"type": "text", "text": ""})];
        }
        return Vec::new();
    }
    match serde_json::from_str::<Value>(result_json) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .filter(|v| is_block(v) || !fault::on(Fault::BrCallUntypedDropped))
            .map(|v| if is_block(&v) { faulty_block(v) } else { json!({"type": "text", "text": v.to_string()}) })
            .collect(),
        _ => vec![json!({"type": "text", "text": result_json})],
    }
}

/// A content block as it is passed on; only a fault changes it (BR-CALL-07, BR-CALL-10).
fn faulty_block(mut v: Value) -> Value {
    if fault::none() {
        return v;
    }
    if let Some(m) = v.as_object_mut() {
        if fault::on(Fault::BrCallBlockAnnotationsDropped) {
            m.remove("annotations");
            m.remove("_meta");
        }
        let media = matches!(m.get("type").and_then(Value::as_str), Some("image" | "audio"));
        if media && fault::on(Fault::BrCallImageMimeDropped) {
            m.remove("mimeType");
        }
    }
    v
}

/// A CallToolResponse as an MCP CallToolResult (§22.1 tools/call row, BR-CALL-06…13).
/// `has_output_schema` enables the derivation of BR-CALL-12.
pub fn call_result(r: &pb::CallToolResponse, has_output_schema: bool, modern: bool) -> Value {
    let content = content_of(&r.result_json);
    let mut out = Map::new();
    let mut structured = None;
    if !r.structured_content_json.is_empty() {
        // BR-CALL-11: only an object becomes structuredContent, for a modern request any JSON
        // value (BR-STATELESS-34); text that does not parse never does.
        match serde_json::from_str::<Value>(&r.structured_content_json) {
            Ok(v @ Value::Object(_)) => structured = Some(v),
            Ok(v)
                if (modern && !fault::on(Fault::BrStatelessStructuredObjectOnly))
                    || fault::on(Fault::BrCallStructuredAny) =>
            {
                structured = Some(v)
            }
            _ => {}
        }
    } else if has_output_schema
        && !r.is_error
        && content.len() == 1
        && let Some(Value::String(text)) = content[0].get("text")
        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text)
    {
        structured = Some(v);
    }
    out.insert("content".into(), Value::Array(content));
    if let Some(s) = structured {
        out.insert("structuredContent".into(), s);
    }
    out.insert("isError".into(), Value::Bool(r.is_error && !fault::on(Fault::BrCallIsErrorDropped)));
    if let Some(e) = &r.error {
        let mut te = Map::new();
        for (k, v) in [("errorCode", &e.error_code), ("message", &e.message), ("suggestion", &e.suggestion)] {
            if !v.is_empty() || fault::on(Fault::BrCallToolErrorEmptyKept) {
                te.insert(k.into(), Value::String(v.clone()));
            }
        }
        te.insert("retryable".into(), Value::Bool(e.retryable));
        out.insert("_meta".into(), json!({"protomcp/toolError": te}));
    }
    Value::Object(out)
}

/// resources/list entries (BR-RESOURCE-01).
pub fn mcp_resources(defs: &[pb::ResourceDefinition]) -> Vec<Value> {
    defs.iter()
        .filter(|d| {
            (!d.uri.is_empty() && !d.uri.chars().any(char::is_whitespace) && d.uri.contains(':'))
                || crate::fault::on(crate::fault::Fault::BrResourceInvalidUriListed)
        })
        .map(|d| {
            let mut m = Map::new();
            m.insert("uri".into(), Value::String(d.uri.clone()));
            let unnamed = d.name.is_empty() && !crate::fault::on(crate::fault::Fault::BrResourceEmptyNameKept);
            m.insert("name".into(), Value::String(if unnamed { d.uri.clone() } else { d.name.clone() }));
            if !d.description.is_empty() {
                m.insert("description".into(), Value::String(d.description.clone()));
            }
            if !d.mime_type.is_empty() {
                m.insert("mimeType".into(), Value::String(d.mime_type.clone()));
            }
            if d.size > 0 || crate::fault::on(crate::fault::Fault::BrResourceSizeZeroKept) {
                m.insert("size".into(), Value::from(d.size));
            }
            Value::Object(m)
        })
        .collect()
}

fn valid_template(t: &str) -> bool {
    if t.is_empty() || t.chars().any(char::is_whitespace) {
        return false;
    }
    let mut depth = 0;
    for c in t.chars() {
        match c {
            '{' if depth == 0 => depth = 1,
            '}' if depth == 1 => depth = 0,
            '{' | '}' => return false,
            _ => {}
        }
    }
    depth == 0
}

/// resources/templates/list entries (BR-RESOURCE-02, BR-RESOURCE-07).
pub fn mcp_templates(defs: &[pb::ResourceTemplateDefinition]) -> Vec<Value> {
    defs.iter()
        .filter(|d| valid_template(&d.uri_template))
        .map(|d| {
            let mut m = Map::new();
            m.insert("uriTemplate".into(), Value::String(d.uri_template.clone()));
            let name = if d.name.is_empty() { d.uri_template.clone() } else { d.name.clone() };
            if !(d.name.is_empty() && crate::fault::on(crate::fault::Fault::BrResourceTemplateNameEmpty)) {
                m.insert("name".into(), Value::String(name));
            }
            if !d.description.is_empty() {
                m.insert("description".into(), Value::String(d.description.clone()));
            }
            if !d.mime_type.is_empty() {
                m.insert("mimeType".into(), Value::String(d.mime_type.clone()));
            }
            Value::Object(m)
        })
        .collect()
}

/// prompts/list entries (BR-PROMPT-01).
pub fn mcp_prompts(defs: &[pb::PromptDefinition]) -> Vec<Value> {
    defs.iter()
        .filter(|d| !d.name.is_empty())
        .map(|d| {
            let mut m = Map::new();
            m.insert("name".into(), Value::String(d.name.clone()));
            if !d.description.is_empty() {
                m.insert("description".into(), Value::String(d.description.clone()));
            }
            if !d.arguments.is_empty() {
                let args: Vec<Value> = d
                    .arguments
                    .iter()
                    .map(|a| {
                        let mut am = Map::new();
                        am.insert("name".into(), Value::String(a.name.clone()));
                        if !a.description.is_empty() {
                            am.insert("description".into(), Value::String(a.description.clone()));
                        }
                        if a.required && !crate::fault::on(crate::fault::Fault::BrPromptRequiredDropped) {
                            am.insert("required".into(), Value::Bool(true));
                        }
                        Value::Object(am)
                    })
                    .collect();
                m.insert("arguments".into(), Value::Array(args));
            }
            Value::Object(m)
        })
        .collect()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (resource blobs, BR-RESOURCE-04).
pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// resources/read contents (BR-RESOURCE-04); `None` when there are none (BR-RESOURCE-05).
pub fn mcp_contents(requested: &str, r: &pb::ReadResourceResponse) -> Option<Vec<Value>> {
    if r.contents.is_empty() && !crate::fault::on(crate::fault::Fault::BrResourceEmptyContentsOk) {
        return None;
    }
    Some(
        r.contents
            .iter()
            .map(|c| {
                let mut m = Map::new();
                let uri = if c.uri.is_empty() && !crate::fault::on(crate::fault::Fault::BrResourceEmptyUriKept) {
                    requested
                } else {
                    &c.uri
                };
                m.insert("uri".into(), Value::String(uri.to_owned()));
                if !c.mime_type.is_empty() {
                    m.insert("mimeType".into(), Value::String(c.mime_type.clone()));
                }
                if !c.blob.is_empty() && crate::fault::on(crate::fault::Fault::BrResourceBlobAsText) {
                    m.insert("text".into(), Value::String(String::from_utf8_lossy(&c.blob).into_owned()));
                } else if !c.blob.is_empty() {
                    m.insert("blob".into(), Value::String(base64(&c.blob)));
                } else {
                    m.insert("text".into(), Value::String(c.text.clone()));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// The eight MCP log levels in ascending severity (§19).
pub const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A LogMessage level as an MCP level (BR-LOG-03).
pub fn log_level(level: &str) -> &'static str {
    if level == "warn" && !fault::on(Fault::BrLogWarnUnmapped) {
        return "warning";
    }
    LEVELS.iter().find(|l| **l == level).copied().unwrap_or("info")
}

/// Severity rank of an MCP level (0 = debug).
pub fn level_rank(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(1)
}

/// LogMessage data (BR-LOG-02).
pub fn log_data(data_json: &str) -> Value {
    if fault::on(Fault::BrLogDataUnparsed) {
        return Value::String(data_json.to_owned());
    }
    serde_json::from_str(data_json).unwrap_or_else(|_| Value::String(data_json.to_owned()))
}

/// A PromptMessage whose role MCP does not know (BR-PROMPT-06): the tool process's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("prompt message with role {0:?}")]
pub struct UnknownRole(pub String);

/// A GetPromptResponse as an MCP GetPromptResult (BR-PROMPT-05); an error for a message role
/// MCP does not know (BR-PROMPT-06).
pub fn mcp_prompt_result(r: &pb::GetPromptResponse) -> Result<Value, UnknownRole> {
    let mut messages = Vec::new();
    for m in &r.messages {
        if m.role != "user" && m.role != "assistant" && !crate::fault::on(crate::fault::Fault::BrPromptSystemPassed) {
            return Err(UnknownRole(m.role.clone()));
        }
        let content = match serde_json::from_str::<Value>(&m.content_json) {
            Ok(v)
                if v.get("type").is_some_and(Value::is_string)
                    && !crate::fault::on(crate::fault::Fault::BrPromptContentAlwaysText) =>
            {
                v
            }
            _ => json!({"type": "text", "text": m.content_json}),
        };
        messages.push(json!({"role": m.role, "content": content}));
    }
    let mut out = json!({"messages": messages});
    if !r.description.is_empty() && !crate::fault::on(crate::fault::Fault::BrPromptDescriptionDropped) {
        out["description"] = Value::String(r.description.clone());
    }
    Ok(out)
}

/// A CompletionResponse as an MCP CompleteResult (BR-COMPLETE-03/04): at most 100 values,
/// `total` only when it is not below them, `hasMore` when the tool process says so or sent more.
pub fn mcp_completion(r: &pb::CompletionResponse) -> Value {
    let more = r.values.len() > 100;
    let cap = if crate::fault::on(crate::fault::Fault::BrCompleteValuesUncapped) { usize::MAX } else { 100 };
    let values: Vec<&String> = r.values.iter().take(cap).collect();
    let mut c = json!({"values": values});
    if r.total > 0 && (r.total as usize >= values.len() || crate::fault::on(crate::fault::Fault::BrCompleteTotalKept)) {
        c["total"] = json!(r.total);
    }
    if r.has_more || (more && !crate::fault::on(crate::fault::Fault::BrCompleteCutWithoutHasMore)) {
        c["hasMore"] = json!(true);
    }
    json!({"completion": c})
}

/// A `sampling/createMessage` result as a SamplingResponse: a content array of one block is
/// that block (BR-SAMPLING-11).
pub fn sampling_response(r: &Value) -> pb::SamplingResponse {
    let content = match r.get("content") {
        Some(Value::Array(items))
            if items.len() == 1 && !crate::fault::on(crate::fault::Fault::BrSamplingArrayKept) =>
        {
            items[0].to_string()
        }
        Some(c) => c.to_string(),
        None => String::new(),
    };
    pb::SamplingResponse {
        role: r.get("role").and_then(Value::as_str).unwrap_or("assistant").to_owned(),
        content_json: content,
        model: r
            .get("model")
            .and_then(Value::as_str)
            .filter(|_| !crate::fault::on(crate::fault::Fault::BrSamplingModelDropped))
            .unwrap_or_default()
            .to_owned(),
        stop_reason: r.get("stopReason").and_then(Value::as_str).unwrap_or_default().to_owned(),
        error: String::new(),
    }
}

/// A `roots/list` result as a ListRootsResponse.
pub fn roots_response(r: &Value) -> pb::ListRootsResponse {
    pb::ListRootsResponse {
        roots: r
            .get("roots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|root| pb::RootDef {
                uri: root.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned(),
                name: root.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_mapping() {
        assert_eq!(content_of(""), Vec::<Value>::new());
        assert_eq!(content_of("plain"), vec![json!({"type":"text","text":"plain"})]);
        assert_eq!(
            content_of(r#"[{"type":"image","data":"AA==","mimeType":"image/png"}, 5]"#),
            vec![json!({"type":"image","data":"AA==","mimeType":"image/png"}), json!({"type":"text","text":"5"})]
        );
        let r = pb::CallToolResponse {
            is_error: true,
            result_json: r#"[{"type":"text","text":"soft"}]"#.into(),
            error: Some(pb::ToolError {
                error_code: "E".into(),
                message: "m".into(),
                suggestion: String::new(),
                retryable: true,
            }),
            ..Default::default()
        };
        let v = call_result(&r, false, false);
        assert_eq!(v["isError"], json!(true));
        assert_eq!(v["_meta"]["protomcp/toolError"], json!({"errorCode":"E","message":"m","retryable":true}));
        let s = pb::CallToolResponse { structured_content_json: "[1]".into(), ..Default::default() };
        assert!(call_result(&s, true, false).get("structuredContent").is_none());
        // BR-STATELESS-34: for a modern request any JSON value; text that is not JSON never.
        assert_eq!(call_result(&s, true, true)["structuredContent"], json!([1]));
        let n = pb::CallToolResponse { structured_content_json: "null".into(), ..Default::default() };
        assert_eq!(call_result(&n, false, true).get("structuredContent"), Some(&Value::Null));
        let bad = pb::CallToolResponse { structured_content_json: "{not json".into(), ..Default::default() };
        assert!(call_result(&bad, false, true).get("structuredContent").is_none());
    }

    #[test]
    fn base64_and_levels() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(log_level("warn"), "warning");
        assert_eq!(log_level("bogus"), "info");
        assert_eq!(log_data("not json"), json!("not json"));
    }
}
