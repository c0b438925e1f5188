//! What the reference proto-mcp server decides, sans-IO: the protocol a session's first byte
//! selects, the answer to each binary request, and the answer to each JSON-RPC line of the
//! fallback. The byte pumping (stdin, stdout, exit) is `protomcp_harness::proto_mcp::server`.
//!
//! The fixture is small and offline: three tools (`echo`, `upper`, `add`) in pages of two,
//! three resources (`conform:///readme`, `conform:///logo`, `conform:///notes`) in pages of two.
//! The safe tool is `echo` with `type.googleapis.com/conform.v1.EchoRequest`.

use prost::Message;
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};
use serde_json::{Value, json};

use super::pb::{self, mcp_message::Payload};
use super::{Arm, McpMessage, code, error_response};

/// The protocol version the server speaks.
pub const VERSION: &str = "1.0.0";
/// Tools and resources per page.
pub const PAGE: usize = 2;
/// Package of the fixture's input messages.
pub const PACKAGE: &str = "conform.v1";

/// Rules the reference server can break on purpose, to show that the catalogue catches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFault {
    /// Waits for 16 bytes before it sniffs the first byte (PM-FRAME-03: a 15-byte first frame
    /// is never answered).
    BufferFirst16,
    /// Drops a complete frame whose body does not decode instead of answering -32700
    /// (PM-ERROR-08).
    SilentOnUndecodable,
}

impl ServerFault {
    pub const ALL: &[(ServerFault, &str)] =
        &[(ServerFault::BufferFirst16, "buffer-first-16"), (ServerFault::SilentOnUndecodable, "silent-on-undecodable")];

    pub fn name(self) -> &'static str {
        ServerFault::ALL.iter().find(|(m, _)| *m == self).map(|(_, n)| *n).expect("listed")
    }

    pub fn summary(self) -> &'static str {
        match self {
            ServerFault::BufferFirst16 => "read 16 bytes before sniffing the protocol (breaks PM-FRAME-03)",
            ServerFault::SilentOnUndecodable => "drop undecodable frames without -32700 (breaks PM-ERROR-08)",
        }
    }
}

impl std::str::FromStr for ServerFault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServerFault::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(m, _)| *m)
            .ok_or_else(|| format!("unknown misbehaviour `{s}`"))
    }
}

/// What a session's first byte selects (PM-FRAME-09/-10/-11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    /// 0x00-0x1F: binary frames.
    Binary,
    /// `{`: newline-delimited JSON-RPC 2.0.
    JsonRpc,
    /// Anything else: no protocol; write nothing and exit.
    Reject,
}

pub fn sniff(first: u8) -> Sniff {
    match first {
        0x00..=0x1f => Sniff::Binary,
        b'{' => Sniff::JsonRpc,
        _ => Sniff::Reject,
    }
}

#[derive(Clone, PartialEq, Message)]
struct EchoRequest {
    #[prost(string, tag = "1")]
    text: String,
}

#[derive(Clone, PartialEq, Message)]
struct AddRequest {
    #[prost(int64, tag = "1")]
    a: i64,
    #[prost(int64, tag = "2")]
    b: i64,
}

struct ToolDef {
    name: &'static str,
    description: &'static str,
    input: &'static str,
}

const TOOLS: &[ToolDef] = &[
    ToolDef { name: "echo", description: "Returns its text.", input: "EchoRequest" },
    ToolDef { name: "upper", description: "Returns its text in capitals.", input: "EchoRequest" },
    ToolDef { name: "add", description: "Adds two integers.", input: "AddRequest" },
];

struct ResourceDef {
    uri: &'static str,
    name: &'static str,
    mime_type: &'static str,
    text: Option<&'static str>,
    blob: &'static [u8],
}

const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        uri: "conform:///readme",
        name: "readme",
        mime_type: "text/plain",
        text: Some("The reference proto-mcp server of protomcp-conform."),
        blob: &[],
    },
    ResourceDef {
        uri: "conform:///logo",
        name: "logo",
        mime_type: "image/png",
        text: None,
        blob: &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a],
    },
    ResourceDef {
        uri: "conform:///notes",
        name: "notes",
        mime_type: "text/markdown",
        text: Some("# Notes\n"),
        blob: &[],
    },
];

/// The `bsr_ref` of a fixture input message.
pub fn bsr_ref(input: &str) -> String {
    format!("buf.build/conform/tools/{PACKAGE}.{input}:v1")
}

/// The `type_url` of a fixture input message.
pub fn type_url(input: &str) -> String {
    format!("type.googleapis.com/{PACKAGE}.{input}")
}

fn string_field(name: &str, number: i32, ty: prost_types::field_descriptor_proto::Type) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(prost_types::field_descriptor_proto::Label::Optional as i32),
        r#type: Some(ty as i32),
        json_name: Some(name.into()),
        ..Default::default()
    }
}

/// The self-contained descriptor set of the fixture's input messages (an `inline_schema`).
pub fn inline_schema() -> FileDescriptorSet {
    use prost_types::field_descriptor_proto::Type;
    let echo = DescriptorProto {
        name: Some("EchoRequest".into()),
        field: vec![string_field("text", 1, Type::String)],
        ..Default::default()
    };
    let add = DescriptorProto {
        name: Some("AddRequest".into()),
        field: vec![string_field("a", 1, Type::Int64), string_field("b", 2, Type::Int64)],
        ..Default::default()
    };
    FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("conform/v1/tools.proto".into()),
            package: Some(PACKAGE.into()),
            message_type: vec![echo, add],
            syntax: Some("proto3".into()),
            ..Default::default()
        }],
    }
}

/// Parses `MAJOR.MINOR.PATCH` (digits only).
pub fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.split('.');
    let mut part = || it.next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?.parse().ok();
    let out = (part()?, part()?, part()?);
    it.next().is_none().then_some(out)
}

/// One session of the reference server.
#[derive(Debug, Clone)]
pub struct Server {
    misbehave: Option<ServerFault>,
    initialized: bool,
    /// The client declared `supports_bsr_refs` in the initialize that opened the session.
    client_bsr: bool,
}

impl Server {
    pub fn new(misbehave: Option<ServerFault>) -> Server {
        Server { misbehave, initialized: false, client_bsr: false }
    }

    pub fn misbehave(&self) -> Option<ServerFault> {
        self.misbehave
    }

    /// How many bytes to read before sniffing the first (1 unless misbehaving).
    pub fn sniff_after(&self) -> usize {
        if self.misbehave == Some(ServerFault::BufferFirst16) { 16 } else { 1 }
    }

    /// The answer to a complete frame whose body is not an MCPMessage (PM-ERROR-08).
    pub fn undecodable(&self, why: &str) -> Option<McpMessage> {
        if self.misbehave == Some(ServerFault::SilentOnUndecodable) {
            return None;
        }
        Some(error_response(0, code::PARSE_ERROR, format!("the frame body is not an MCPMessage: {why}")))
    }

    /// The answer to a prefix above the server's limit, after which it closes (PM-FRAME-08).
    pub fn oversize(&self, len: u32, max: u32) -> McpMessage {
        error_response(0, code::INVALID_REQUEST, format!("a frame of {len} bytes is above the limit of {max}"))
    }

    /// The answer to one decoded message; `None` for an `error_response` from the client.
    pub fn handle(&mut self, msg: McpMessage) -> Option<McpMessage> {
        let id = msg.id;
        let Some(payload) = msg.payload else {
            return Some(error_response(id, code::INVALID_REQUEST, "the message has no payload"));
        };
        let arm = Arm::of(&payload);
        if arm == Arm::ErrorResponse {
            return None;
        }
        if !arm.is_request() {
            return Some(error_response(
                id,
                code::INVALID_REQUEST,
                format!("{arm} is a response; the client sends requests"),
            ));
        }
        if !self.initialized && arm != Arm::InitializeRequest {
            return Some(error_response(id, code::INVALID_REQUEST, format!("{arm} before initialize_request")));
        }
        let answer = match payload {
            Payload::InitializeRequest(r) => self.initialize(r),
            Payload::ListToolsRequest(r) => self.list_tools(r),
            Payload::CallToolRequest(r) => call_tool(r),
            Payload::ListResourcesRequest(r) => list_resources(r),
            Payload::ReadResourceRequest(r) => read_resource(r),
            _ => unreachable!("responses are answered above"),
        };
        Some(match answer {
            Ok(p) => McpMessage::with(id, p),
            Err((code, message)) => error_response(id, code, message),
        })
    }

    fn initialize(&mut self, r: pb::InitializeRequest) -> Result<Payload, (i32, String)> {
        let Some((major, _, _)) = parse_version(&r.protocol_version) else {
            return Err((
                code::VERSION_UNSUPPORTED,
                format!("protocol_version {:?} is not MAJOR.MINOR.PATCH", r.protocol_version),
            ));
        };
        if major != 1 {
            return Err((
                code::VERSION_UNSUPPORTED,
                format!("version {} is not supported; this server speaks {VERSION}", r.protocol_version),
            ));
        }
        self.initialized = true;
        self.client_bsr = r.capabilities.as_ref().is_some_and(|c| c.supports_bsr_refs);
        Ok(Payload::InitializeResponse(pb::InitializeResponse {
            protocol_version: VERSION.into(),
            capabilities: Some(pb::ServerCapabilities {
                supports_bsr_refs: true,
                supports_streaming: false,
                tools: Some(pb::ToolCapabilities::default()),
                resources: Some(pb::ResourceCapabilities::default()),
                prompts: None,
            }),
            metadata: [("server".to_owned(), "protomcp-conform proto-mcp-server".to_owned())].into(),
        }))
    }

    fn list_tools(&self, r: pb::ListToolsRequest) -> Result<Payload, (i32, String)> {
        let inline = r.include_schemas || !self.client_bsr;
        let matching: Vec<&ToolDef> =
            TOOLS.iter().filter(|t| r.bsr_refs.is_empty() || r.bsr_refs.contains(&bsr_ref(t.input))).collect();
        let (page, next) = paginate(&matching, &r.cursor, "tools")?;
        let tools = page
            .iter()
            .map(|t| pb::Tool {
                name: t.name.into(),
                description: t.description.into(),
                schema_source: Some(if inline {
                    pb::tool::SchemaSource::InlineSchema(inline_schema())
                } else {
                    pb::tool::SchemaSource::BsrRef(bsr_ref(t.input))
                }),
                metadata: [("input".to_owned(), format!("{PACKAGE}.{}", t.input))].into(),
            })
            .collect();
        Ok(Payload::ListToolsResponse(pb::ListToolsResponse { tools, next_cursor: next }))
    }
}

/// One page of `items` from `cursor` (`""` or `"<kind>:<offset>"` as issued), and the next cursor.
fn paginate<'a, T>(items: &'a [T], cursor: &str, kind: &str) -> Result<(&'a [T], String), (i32, String)> {
    let start = if cursor.is_empty() {
        0
    } else {
        cursor
            .strip_prefix(kind)
            .and_then(|c| c.strip_prefix(':'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0 && *n < items.len() && n % PAGE == 0)
            .ok_or_else(|| (code::INVALID_PARAMS, format!("cursor {cursor:?} was not issued by this server")))?
    };
    let end = (start + PAGE).min(items.len());
    let next = if end < items.len() { format!("{kind}:{end}") } else { String::new() };
    Ok((&items[start..end], next))
}

fn call_tool(r: pb::CallToolRequest) -> Result<Payload, (i32, String)> {
    let tool = TOOLS
        .iter()
        .find(|t| t.name == r.name)
        .ok_or_else(|| (code::INVALID_PARAMS, format!("no tool named {:?}", r.name)))?;
    let args = r.arguments.ok_or_else(|| (code::SCHEMA_VALIDATION, format!("{} needs arguments", tool.name)))?;
    let want = type_url(tool.input);
    if args.type_url != want {
        return Err((code::SCHEMA_VALIDATION, format!("{} takes {want}, not {:?}", tool.name, args.type_url)));
    }
    let text = match tool.input {
        "EchoRequest" => {
            let m = EchoRequest::decode(args.value.as_slice())
                .map_err(|e| (code::SCHEMA_VALIDATION, format!("arguments are not an EchoRequest: {e}")))?;
            if tool.name == "upper" { m.text.to_uppercase() } else { m.text }
        }
        _ => {
            let m = AddRequest::decode(args.value.as_slice())
                .map_err(|e| (code::SCHEMA_VALIDATION, format!("arguments are not an AddRequest: {e}")))?;
            m.a.wrapping_add(m.b).to_string()
        }
    };
    Ok(Payload::CallToolResponse(pb::CallToolResponse {
        result: Some(pb::call_tool_response::Result::Success(pb::ToolResult {
            content: vec![pb::ToolContent {
                content: Some(pb::tool_content::Content::Text(text)),
                mime_type: "text/plain".into(),
            }],
            is_error: false,
        })),
        metadata: Default::default(),
    }))
}

fn list_resources(r: pb::ListResourcesRequest) -> Result<Payload, (i32, String)> {
    let (page, next) = paginate(RESOURCES, &r.cursor, "resources")?;
    let resources = page
        .iter()
        .map(|d| pb::Resource {
            uri: d.uri.into(),
            name: d.name.into(),
            description: String::new(),
            mime_type: d.mime_type.into(),
            metadata: Default::default(),
        })
        .collect();
    Ok(Payload::ListResourcesResponse(pb::ListResourcesResponse { resources, next_cursor: next }))
}

fn read_resource(r: pb::ReadResourceRequest) -> Result<Payload, (i32, String)> {
    let d = RESOURCES
        .iter()
        .find(|d| d.uri == r.uri)
        .ok_or_else(|| (code::INVALID_PARAMS, format!("no resource {:?}", r.uri)))?;
    let content = match d.text {
        Some(t) => pb::resource_content::Content::Text(t.into()),
        None => pb::resource_content::Content::Blob(d.blob.to_vec()),
    };
    Ok(Payload::ReadResourceResponse(pb::ReadResourceResponse {
        contents: vec![pb::ResourceContent {
            uri: d.uri.into(),
            mime_type: d.mime_type.into(),
            content: Some(content),
        }],
    }))
}

/// A session of the JSON-RPC fallback: one line in, at most one line out.
#[derive(Debug, Default)]
pub struct JsonSession {
    _private: (),
}

impl JsonSession {
    pub fn new() -> JsonSession {
        JsonSession::default()
    }

    /// The answer to one line (without its newline); `None` for a notification or a blank line.
    pub fn handle_line(&mut self, line: &str) -> Option<String> {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            return None;
        }
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return Some(rpc_error(Value::Null, code::PARSE_ERROR, &format!("not JSON: {e}"))),
        };
        let Some(obj) = msg.as_object() else {
            return Some(rpc_error(Value::Null, code::INVALID_REQUEST, "a request is a JSON object"));
        };
        let id = obj.get("id").cloned();
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            return id.map(|id| rpc_error(id, code::INVALID_REQUEST, "no method"));
        };
        let id = id?; // a notification gets no answer (PM-FRAME-12)
        let params = obj.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => Ok(json!({
                "protocolVersion": params.get("protocolVersion").and_then(Value::as_str).unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "protomcp-conform proto-mcp-server", "version": VERSION},
            })),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": TOOLS.iter().map(|t| json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": {"type": "object"},
            })).collect::<Vec<_>>()})),
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                let text = params.pointer("/arguments/text").and_then(Value::as_str).unwrap_or("");
                match name {
                    "echo" => Ok(json!({"content": [{"type": "text", "text": text}]})),
                    "upper" => Ok(json!({"content": [{"type": "text", "text": text.to_uppercase()}]})),
                    _ => Err((code::INVALID_PARAMS, format!("no tool named {name:?}"))),
                }
            }
            "resources/list" => Ok(json!({"resources": RESOURCES.iter().map(|d| json!({
                "uri": d.uri, "name": d.name, "mimeType": d.mime_type,
            })).collect::<Vec<_>>()})),
            "resources/read" => {
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
                match RESOURCES.iter().find(|d| d.uri == uri) {
                    Some(d) => {
                        Ok(json!({"contents": [{"uri": d.uri, "mimeType": d.mime_type, "text": d.text.unwrap_or("")}]}))
                    }
                    None => Err((code::INVALID_PARAMS, format!("no resource {uri:?}"))),
                }
            }
            other => Err((code::METHOD_NOT_FOUND, format!("method {other:?} not found"))),
        };
        Some(match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string(),
            Err((c, m)) => rpc_error(id, c, &m),
        })
    }
}

fn rpc_error(id: Value, code: i32, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(s: &mut Server, version: &str, bsr: bool) -> McpMessage {
        let caps = bsr.then(|| pb::ClientCapabilities { supports_bsr_refs: true, ..Default::default() });
        let req = pb::InitializeRequest {
            protocol_version: version.into(),
            capabilities: caps,
            metadata: Default::default(),
        };
        s.handle(McpMessage::with(1, Payload::InitializeRequest(req))).expect("an answer")
    }

    #[test]
    fn versions_of_another_major_or_malformed_are_rejected_with_33002() {
        for v in ["2.0.0", "0.9.0", "", "banana", "1.0", "1.0.0.0"] {
            let got = init(&mut Server::new(None), v, true);
            assert_eq!(got.error().map(|e| e.code), Some(code::VERSION_UNSUPPORTED), "{v:?}");
        }
        assert_eq!(init(&mut Server::new(None), "1.9.4", true).arm(), Some(Arm::InitializeResponse));
    }

    #[test]
    fn tools_page_in_twos_and_a_cursor_never_issued_is_invalid_params() {
        let mut s = Server::new(None);
        init(&mut s, "1.0.0", true);
        let list = |s: &mut Server, cursor: &str| {
            let r = pb::ListToolsRequest { cursor: cursor.into(), ..Default::default() };
            s.handle(McpMessage::with(2, Payload::ListToolsRequest(r))).unwrap()
        };
        let Some(Payload::ListToolsResponse(p1)) = list(&mut s, "").payload else { panic!() };
        assert_eq!((p1.tools.len(), p1.next_cursor.as_str()), (2, "tools:2"));
        let Some(Payload::ListToolsResponse(p2)) = list(&mut s, &p1.next_cursor).payload else { panic!() };
        assert_eq!((p2.tools.len(), p2.next_cursor.as_str()), (1, ""));
        assert_eq!(list(&mut s, "conform-bogus-cursor").error().map(|e| e.code), Some(code::INVALID_PARAMS));
    }

    #[test]
    fn requests_before_initialize_and_response_arms_are_invalid_requests() {
        let mut s = Server::new(None);
        let got = s.handle(McpMessage::with(5, Payload::ListToolsRequest(Default::default()))).unwrap();
        assert_eq!((got.id, got.error().map(|e| e.code)), (5, Some(code::INVALID_REQUEST)));
        init(&mut s, "1.0.0", true);
        let got = s.handle(McpMessage::with(13, Payload::InitializeResponse(Default::default()))).unwrap();
        assert_eq!((got.id, got.error().map(|e| e.code)), (13, Some(code::INVALID_REQUEST)));
        assert!(s.handle(McpMessage::with(14, Payload::ErrorResponse(Default::default()))).is_none());
    }

    #[test]
    fn the_json_fallback_answers_requests_and_parse_errors_but_not_notifications() {
        let mut j = JsonSession::new();
        let a = j.handle_line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).unwrap();
        assert!(a.contains(r#""id":1"#) && a.contains("result"), "{a}");
        assert_eq!(j.handle_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        let e = j.handle_line("{not json}").unwrap();
        assert!(e.contains("-32700") && e.contains(r#""id":null"#), "{e}");
    }
}
