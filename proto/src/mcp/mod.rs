//! proto-mcp 1.0 (`buf.mcp.v1`): the second protocol the harness judges. Its `MCPMessage`
//! travels in the same `[u32 BE length][message]` frames as protomcp's Envelope and is read by
//! the same bounded decoder ([`MessageDecoder`](crate::frame::MessageDecoder)).
//!
//! - [`pb`]: the messages, generated from `proto/mcp.proto`;
//! - [`Arm`]: the payload arms, their numbers and which answers which;
//! - [`server`]: what the reference proto-mcp server decides, sans-IO.

pub mod server;

/// The well-known types (`Any`, `FileDescriptorSet`, `Struct`) the catalogue uses.
pub use prost_types;

#[allow(clippy::all, missing_docs)]
pub mod pb {
    //! Generated from `proto/mcp.proto` by prost-build (see `build.rs`).
    include!(concat!(env!("OUT_DIR"), "/buf.mcp.v1.rs"));
}

pub use pb::McpMessage;
use pb::mcp_message::Payload;

use crate::frame::{MessageDecoder, encode_message_frame};

/// Largest MCPMessage body the harness and the reference server accept (the profile's bodies stay
/// below 16 MiB, PM-FRAME-09).
pub const MCP_MAX_FRAME: u32 = 16 * 1024 * 1024;

/// A decoder of MCPMessage frames.
pub type McpDecoder = MessageDecoder<McpMessage>;

/// The error codes of the profile (§2.4).
pub mod code {
    use crate::jsonrpc::ErrorCode;

    pub const PARSE_ERROR: i32 = ErrorCode::PARSE_ERROR.code();
    pub const INVALID_REQUEST: i32 = ErrorCode::INVALID_REQUEST.code();
    pub const METHOD_NOT_FOUND: i32 = ErrorCode::METHOD_NOT_FOUND.code();
    pub const INVALID_PARAMS: i32 = ErrorCode::INVALID_PARAMS.code();
    pub const INTERNAL: i32 = ErrorCode::INTERNAL_ERROR.code();
    pub const BSR_UNRESOLVED: i32 = -33000;
    pub const SCHEMA_VALIDATION: i32 = -33001;
    pub const VERSION_UNSUPPORTED: i32 = -33002;
    pub const TOOL_TIMEOUT: i32 = -33003;

    /// Whether `c` is a code of §2.4 or lies in the server-defined range (PM-ERROR-01).
    pub fn is_known(c: i32) -> bool {
        matches!(c, -32700 | -32603..=-32600 | -33003..=-33000) || (-32099..=-32000).contains(&c)
    }
}

/// A payload arm of MCPMessage (fields 2-12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arm {
    InitializeRequest,
    InitializeResponse,
    ListToolsRequest,
    ListToolsResponse,
    CallToolRequest,
    CallToolResponse,
    ListResourcesRequest,
    ListResourcesResponse,
    ReadResourceRequest,
    ReadResourceResponse,
    ErrorResponse,
}

impl Arm {
    pub const ALL: [Arm; 11] = [
        Arm::InitializeRequest,
        Arm::InitializeResponse,
        Arm::ListToolsRequest,
        Arm::ListToolsResponse,
        Arm::CallToolRequest,
        Arm::CallToolResponse,
        Arm::ListResourcesRequest,
        Arm::ListResourcesResponse,
        Arm::ReadResourceRequest,
        Arm::ReadResourceResponse,
        Arm::ErrorResponse,
    ];

    /// The field number in MCPMessage.
    pub fn number(self) -> u32 {
        Arm::ALL.iter().position(|a| *a == self).expect("in ALL") as u32 + 2
    }

    /// The field name in the catalogue.
    pub fn name(self) -> &'static str {
        match self {
            Arm::InitializeRequest => "initialize_request",
            Arm::InitializeResponse => "initialize_response",
            Arm::ListToolsRequest => "list_tools_request",
            Arm::ListToolsResponse => "list_tools_response",
            Arm::CallToolRequest => "call_tool_request",
            Arm::CallToolResponse => "call_tool_response",
            Arm::ListResourcesRequest => "list_resources_request",
            Arm::ListResourcesResponse => "list_resources_response",
            Arm::ReadResourceRequest => "read_resource_request",
            Arm::ReadResourceResponse => "read_resource_response",
            Arm::ErrorResponse => "error_response",
        }
    }

    pub fn from_name(name: &str) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The arm of a decoded payload.
    pub fn of(payload: &Payload) -> Arm {
        match payload {
            Payload::InitializeRequest(_) => Arm::InitializeRequest,
            Payload::InitializeResponse(_) => Arm::InitializeResponse,
            Payload::ListToolsRequest(_) => Arm::ListToolsRequest,
            Payload::ListToolsResponse(_) => Arm::ListToolsResponse,
            Payload::CallToolRequest(_) => Arm::CallToolRequest,
            Payload::CallToolResponse(_) => Arm::CallToolResponse,
            Payload::ListResourcesRequest(_) => Arm::ListResourcesRequest,
            Payload::ListResourcesResponse(_) => Arm::ListResourcesResponse,
            Payload::ReadResourceRequest(_) => Arm::ReadResourceRequest,
            Payload::ReadResourceResponse(_) => Arm::ReadResourceResponse,
            Payload::ErrorResponse(_) => Arm::ErrorResponse,
        }
    }

    /// Request arms are 2, 4, 6, 8, 10 (12, error_response, is an answer).
    pub fn is_request(self) -> bool {
        self.response().is_some()
    }

    /// The response arm that pairs with a request arm (2→3, …, 10→11); `None` for responses.
    pub fn response(self) -> Option<Arm> {
        match self {
            Arm::InitializeRequest => Some(Arm::InitializeResponse),
            Arm::ListToolsRequest => Some(Arm::ListToolsResponse),
            Arm::CallToolRequest => Some(Arm::CallToolResponse),
            Arm::ListResourcesRequest => Some(Arm::ListResourcesResponse),
            Arm::ReadResourceRequest => Some(Arm::ReadResourceResponse),
            _ => None,
        }
    }
}

impl std::fmt::Display for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl McpMessage {
    /// The payload arm, if any.
    pub fn arm(&self) -> Option<Arm> {
        self.payload.as_ref().map(Arm::of)
    }

    /// A message with this id and payload.
    pub fn with(id: u64, payload: Payload) -> McpMessage {
        McpMessage { id, payload: Some(payload) }
    }

    /// `[len][body]`, within [`MCP_MAX_FRAME`].
    pub fn to_frame(&self) -> bytes::Bytes {
        encode_message_frame(self, MCP_MAX_FRAME).expect("an MCPMessage the harness builds fits a frame")
    }

    /// The error of an `error_response` arm.
    pub fn error(&self) -> Option<&pb::ErrorResponse> {
        match &self.payload {
            Some(Payload::ErrorResponse(e)) => Some(e),
            _ => None,
        }
    }
}

/// An `error_response` with this id, code and message.
pub fn error_response(id: u64, code: i32, message: impl Into<String>) -> McpMessage {
    McpMessage::with(id, Payload::ErrorResponse(pb::ErrorResponse { code, message: message.into(), data: None }))
}

/// The profile's default handshake (§1.3): 57 bytes on the wire.
pub fn default_handshake(id: u64) -> McpMessage {
    McpMessage::with(
        id,
        Payload::InitializeRequest(pb::InitializeRequest {
            protocol_version: "1.0.0".into(),
            capabilities: Some(pb::ClientCapabilities {
                supports_bsr_refs: true,
                encodings: vec!["protobuf".into()],
                ..Default::default()
            }),
            metadata: [("client".to_owned(), "protomcp-conform".to_owned())].into(),
        }),
    )
}
