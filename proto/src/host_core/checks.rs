//! What the host core checks of the requests it puts to a host and of the host's answers: a
//! `sampling/createMessage` must be a request the MCP schema allows (its messages, and tools only
//! for a client that declared sampling tools), and an answer must have its method's result shape.

use serde_json::{Map, Value};

use super::ReverseError;

const BLOCK_TYPES: &[&str] = &["text", "image", "audio", "tool_use", "tool_result"];

fn block_ok(b: &Value) -> bool {
    let Some(o) = b.as_object() else { return false };
    let s = |k: &str| o.get(k).is_some_and(Value::is_string);
    match o.get("type").and_then(Value::as_str) {
        Some("text") => s("text"),
        Some("image" | "audio") => s("data") && s("mimeType"),
        Some("tool_use") => s("id") && s("name") && o.get("input").is_some_and(Value::is_object),
        Some("tool_result") => s("toolUseId") && o.get("content").is_some_and(Value::is_array),
        Some(t) => BLOCK_TYPES.contains(&t),
        None => false,
    }
}

/// The content blocks of one sampling message (an object or an array of them).
fn blocks(content: &Value) -> Option<Vec<&Value>> {
    match content {
        Value::Array(a) => Some(a.iter().collect()),
        Value::Object(_) => Some(vec![content]),
        _ => None,
    }
}

fn kind(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// One message: a role of `user` or `assistant`, valid content blocks, tool uses only from the
/// assistant and tool results only from the user, and a tool result never mixed with other
/// content.
fn message_ok(m: &Value) -> Result<(), ReverseError> {
    let invalid = |why: String| ReverseError::Invalid(format!("invalid sampling request: {why}"));
    let o = m.as_object().ok_or_else(|| invalid("a sampling message is not an object".into()))?;
    let role = o.get("role").and_then(Value::as_str);
    if !matches!(role, Some("user" | "assistant")) {
        let role = o.get("role").unwrap_or(&Value::Null);
        return Err(invalid(format!("a sampling message's role must be user or assistant, not {role}")));
    }
    let content = o.get("content").and_then(blocks);
    let content = content.ok_or_else(|| invalid("a sampling message's content is not a content block".into()))?;
    if let Some(bad) = content.iter().find(|b| !block_ok(b)) {
        return Err(invalid(format!("a sampling message holds an invalid content block: {bad}")));
    }
    if content.iter().any(|b| kind(b) == "tool_use") && role != Some("assistant") {
        return Err(invalid("tool_use content is only allowed in assistant messages".into()));
    }
    let results = content.iter().filter(|b| kind(b) == "tool_result").count();
    if results > 0 && role != Some("user") {
        return Err(invalid("tool_result content is only allowed in user messages".into()));
    }
    if results > 0 && results < content.len() {
        return Err(invalid("a sampling message with tool result content must not hold other content".into()));
    }
    Ok(())
}

/// Checks `sampling/createMessage` params before they go to a host whose client declared
/// `sampling_tools` (or not).
pub fn sampling_params(params: &Value, sampling_tools: bool) -> Result<(), ReverseError> {
    let invalid = |why: String| ReverseError::Invalid(format!("invalid sampling request: {why}"));
    let o: &Map<String, Value> = params.as_object().ok_or_else(|| invalid("params are not an object".into()))?;
    let messages = o.get("messages").and_then(Value::as_array).ok_or_else(|| invalid("no messages".into()))?;
    if !o.get("maxTokens").is_some_and(|t| t.is_u64() || t.is_i64()) {
        return Err(invalid("maxTokens is not an integer".into()));
    }
    for m in messages {
        message_ok(m)?;
    }
    if (o.contains_key("tools") || o.contains_key("toolChoice")) && !sampling_tools {
        return Err(invalid("tools or toolChoice given, but the client did not declare sampling tools".into()));
    }
    Ok(())
}

/// Whether `result` has the shape of `method`'s result (`sampling/createMessage`: role, content
/// and model; `roots/list`: roots, each with a string uri).
pub fn result_fits(method: &str, result: &Value) -> bool {
    match method {
        "sampling/createMessage" => {
            result.get("role").is_some_and(Value::is_string)
                && result.get("model").is_some_and(Value::is_string)
                && result.get("content").and_then(blocks).is_some_and(|b| b.iter().all(|b| block_ok(b)))
        }
        "roots/list" => result
            .get("roots")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().all(|r| r.get("uri").is_some_and(Value::is_string))),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sampling_params_follow_the_schema() {
        let ok = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5});
        assert_eq!(sampling_params(&ok, false), Ok(()));
        let bad = [
            json!({"messages": [{"role": "system", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}),
            json!({"messages": [{"role": "user", "content": {"type": "text"}}], "maxTokens": 5}),
            json!({"messages": [{"role": "user", "content": "hi"}], "maxTokens": 5}),
            json!({"messages": [{"role": "user", "content": {"type": "tool_use", "id": "1", "name": "t", "input": {}}}], "maxTokens": 5}),
            json!({"messages": [], "maxTokens": 5, "tools": []}),
            json!({"messages": [], "maxTokens": "5"}),
        ];
        for p in bad {
            assert!(matches!(sampling_params(&p, false), Err(ReverseError::Invalid(_))), "{p}");
        }
        assert_eq!(sampling_params(&json!({"messages": [], "maxTokens": 5, "tools": []}), true), Ok(()));
    }

    #[test]
    fn answers_must_have_their_methods_result_shape() {
        let sample = json!({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"});
        assert!(result_fits("sampling/createMessage", &sample));
        assert!(!result_fits("sampling/createMessage", &json!({"roots": []})));
        assert!(result_fits("roots/list", &json!({"roots": [{"uri": "file:///a"}]})));
        assert!(!result_fits("roots/list", &json!({"roots": [{"name": "a"}]})));
    }
}
