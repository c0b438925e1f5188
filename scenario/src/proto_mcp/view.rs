//! An MCPMessage as a JSON tree, for patterns (`expect_answer.message`) and captures: field
//! names as in `mcp.proto`, every scalar field present (defaults included, so `tools: []`
//! matches an empty listing), bytes and `Any` values as hex, an inline schema as the names of
//! its files.

use protomcp_proto::dynamic::hex_encode;
use protomcp_proto::mcp::McpMessage;
use protomcp_proto::mcp::pb::{self, mcp_message::Payload};
use protomcp_proto::mcp::prost_types::Any;
use serde_json::{Map, Value, json};

/// `{id, <arm>: {…}}`; a message without a payload is `{id}`.
pub fn message(m: &McpMessage) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(m.id));
    if let Some(p) = &m.payload {
        out.insert(protomcp_proto::mcp::Arm::of(p).name().into(), payload(p));
    }
    Value::Object(out)
}

fn any(a: &Option<Any>) -> Value {
    match a {
        Some(a) => json!({"type_url": a.type_url, "value_hex": hex_encode(&a.value)}),
        None => Value::Null,
    }
}

fn map<V: Into<Value> + Clone>(m: &std::collections::HashMap<String, V>) -> Value {
    Value::Object(m.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect())
}

fn server_caps(c: &pb::ServerCapabilities) -> Value {
    json!({
        "supports_bsr_refs": c.supports_bsr_refs,
        "supports_streaming": c.supports_streaming,
        "tools": c.tools.as_ref().map(|t| json!({"supports_list_changed": t.supports_list_changed})),
        "resources": c.resources.as_ref().map(|r| json!({
            "supports_subscribe": r.supports_subscribe,
            "supports_list_changed": r.supports_list_changed,
        })),
        "prompts": c.prompts.as_ref().map(|p| json!({"supports_list_changed": p.supports_list_changed})),
    })
}

fn tool(t: &pb::Tool) -> Value {
    let mut v = json!({"name": t.name, "description": t.description, "metadata": map(&t.metadata)});
    match &t.schema_source {
        Some(pb::tool::SchemaSource::BsrRef(r)) => v["bsr_ref"] = json!(r),
        Some(pb::tool::SchemaSource::InlineSchema(set)) => {
            v["inline_schema"] = json!({"files": set.file.iter().map(|f| f.name()).collect::<Vec<_>>()})
        }
        None => {}
    }
    v
}

fn content(c: &pb::ToolContent) -> Value {
    let mut v = json!({"mime_type": c.mime_type});
    match &c.content {
        Some(pb::tool_content::Content::Text(t)) => v["text"] = json!(t),
        Some(pb::tool_content::Content::Image(b)) => v["image"] = json!(hex_encode(b)),
        Some(pb::tool_content::Content::Data(a)) => v["data"] = any(&Some(a.clone())),
        None => {}
    }
    v
}

fn payload(p: &Payload) -> Value {
    match p {
        Payload::InitializeRequest(r) => json!({
            "protocol_version": r.protocol_version,
            "capabilities": r.capabilities.as_ref().map(|c| json!({
                "supports_bsr_refs": c.supports_bsr_refs,
                "supports_streaming": c.supports_streaming,
                "encodings": c.encodings,
                "experimental": map(&c.experimental),
            })),
            "metadata": map(&r.metadata),
        }),
        Payload::InitializeResponse(r) => json!({
            "protocol_version": r.protocol_version,
            "capabilities": r.capabilities.as_ref().map(server_caps),
            "metadata": map(&r.metadata),
        }),
        Payload::ListToolsRequest(r) => {
            json!({"bsr_refs": r.bsr_refs, "include_schemas": r.include_schemas, "cursor": r.cursor})
        }
        Payload::ListToolsResponse(r) => {
            json!({"tools": r.tools.iter().map(tool).collect::<Vec<_>>(), "next_cursor": r.next_cursor})
        }
        Payload::CallToolRequest(r) => {
            json!({"name": r.name, "arguments": any(&r.arguments), "metadata": map(&r.metadata)})
        }
        Payload::CallToolResponse(r) => {
            let mut v = json!({"metadata": map(&r.metadata)});
            match &r.result {
                Some(pb::call_tool_response::Result::Success(s)) => {
                    v["success"] =
                        json!({"content": s.content.iter().map(content).collect::<Vec<_>>(), "is_error": s.is_error})
                }
                Some(pb::call_tool_response::Result::Error(e)) => {
                    v["error"] = json!({"code": e.code, "message": e.message})
                }
                None => {}
            }
            v
        }
        Payload::ListResourcesRequest(r) => json!({"cursor": r.cursor}),
        Payload::ListResourcesResponse(r) => json!({
            "resources": r.resources.iter().map(|x| json!({
                "uri": x.uri, "name": x.name, "description": x.description, "mime_type": x.mime_type,
                "metadata": map(&x.metadata),
            })).collect::<Vec<_>>(),
            "next_cursor": r.next_cursor,
        }),
        Payload::ReadResourceRequest(r) => json!({"uri": r.uri}),
        Payload::ReadResourceResponse(r) => json!({
            "contents": r.contents.iter().map(|c| json!({"uri": c.uri, "mime_type": c.mime_type})).collect::<Vec<_>>(),
        }),
        Payload::ErrorResponse(e) => json!({"code": e.code, "message": e.message}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_listing_shows_its_empty_list_and_cursor() {
        let m = McpMessage::with(2, Payload::ListToolsResponse(pb::ListToolsResponse::default()));
        assert_eq!(message(&m), json!({"id": 2, "list_tools_response": {"tools": [], "next_cursor": ""}}));
    }

    #[test]
    fn an_error_response_shows_code_and_message() {
        let m = protomcp_proto::mcp::error_response(0, -32700, "parse error");
        assert_eq!(message(&m), json!({"id": 0, "error_response": {"code": -32700, "message": "parse error"}}));
    }
}
