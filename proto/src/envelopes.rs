//! The Envelope vocabulary shared by tests, scenarios and generators: the 45 oneof arms with
//! their field numbers, direction and kind (spec §2.2), `From` conversions from every arm's
//! message into an Envelope, and short builders for the common messages.
//!
//! ```
//! use protomcp_proto::envelopes::{self as env, EnvelopeExt};
//! let call = env::call_tool("echo", r#"{"text":"hi"}"#).with_rid("r1");
//! assert_eq!(call.arm().unwrap().number(), 3);
//! ```

use crate::pb::{self, Envelope, envelope::Msg};

/// Who sends an arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    BridgeToTool,
    ToolToBridge,
}

/// The role of an arm in the protocol (spec §2.2, column "kind").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Request,
    Response,
    /// A response with a rid, or a notification without (#4, #5).
    ResponseOrNotification,
    Notification,
    /// A notification without a rid, a reverse request with one (#7–#10, #12).
    NotificationOrReverseRequest,
    ReverseRequest,
    ReverseResponse,
    /// Paired by order, not rid (middleware registration).
    PositionalRequest,
    PositionalResponse,
    /// Part of a call result (streams, sideband).
    ResultPart,
    /// Reserved task messages.
    Reserved,
}

macro_rules! arms {
    ($($variant:ident = $num:literal, $name:literal, $msg:ident, $dir:ident, $kind:ident;)*) => {
        /// One oneof arm of the Envelope.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Arm { $($variant),* }

        impl Arm {
            /// Every arm, in field-number order.
            pub const ALL: &'static [Arm] = &[$(Arm::$variant),*];

            /// The arm's field number in the Envelope.
            pub fn number(self) -> u32 {
                match self { $(Arm::$variant => $num),* }
            }

            /// The arm's field name (`call_tool`).
            pub fn name(self) -> &'static str {
                match self { $(Arm::$variant => $name),* }
            }

            /// The arm's message type name (`CallToolRequest`).
            pub fn message_name(self) -> &'static str {
                match self { $(Arm::$variant => stringify!($msg)),* }
            }

            pub fn direction(self) -> Direction {
                match self { $(Arm::$variant => Direction::$dir),* }
            }

            pub fn kind(self) -> Kind {
                match self { $(Arm::$variant => Kind::$kind),* }
            }

            pub fn from_number(number: u32) -> Option<Arm> {
                match number { $($num => Some(Arm::$variant),)* _ => None }
            }

            pub fn from_name(name: &str) -> Option<Arm> {
                match name { $($name => Some(Arm::$variant),)* _ => None }
            }

            /// The arm a set oneof holds.
            pub fn of(msg: &Msg) -> Arm {
                match msg { $(Msg::$variant(_) => Arm::$variant),* }
            }

            /// An Envelope with this arm set to its message's default value.
            pub fn empty_envelope(self) -> Envelope {
                match self { $(Arm::$variant => Envelope::from(pb::$msg::default())),* }
            }
        }

        $(
            impl From<pb::$msg> for Envelope {
                fn from(m: pb::$msg) -> Envelope {
                    Envelope { msg: Some(Msg::$variant(m)), ..Default::default() }
                }
            }
        )*
    };
}

arms! {
    Reload = 1, "reload", ReloadRequest, BridgeToTool, Request;
    ListTools = 2, "list_tools", ListToolsRequest, BridgeToTool, Request;
    CallTool = 3, "call_tool", CallToolRequest, BridgeToTool, Request;
    ReloadResponse = 4, "reload_response", ReloadResponse, ToolToBridge, ResponseOrNotification;
    ToolList = 5, "tool_list", ToolListResponse, ToolToBridge, ResponseOrNotification;
    CallResult = 6, "call_result", CallToolResponse, ToolToBridge, Response;
    EnableTools = 7, "enable_tools", EnableToolsRequest, ToolToBridge, NotificationOrReverseRequest;
    DisableTools = 8, "disable_tools", DisableToolsRequest, ToolToBridge, NotificationOrReverseRequest;
    SetAllowed = 9, "set_allowed", SetAllowedRequest, ToolToBridge, NotificationOrReverseRequest;
    SetBlocked = 10, "set_blocked", SetBlockedRequest, ToolToBridge, NotificationOrReverseRequest;
    GetActiveTools = 11, "get_active_tools", GetActiveToolsRequest, ToolToBridge, ReverseRequest;
    Batch = 12, "batch", BatchUpdateRequest, ToolToBridge, NotificationOrReverseRequest;
    ActiveTools = 13, "active_tools", ActiveToolsResponse, BridgeToTool, ReverseResponse;
    Progress = 16, "progress", ProgressNotification, ToolToBridge, Notification;
    Cancel = 17, "cancel", CancelRequest, BridgeToTool, Notification;
    Log = 18, "log", LogMessage, ToolToBridge, Notification;
    CreateTask = 19, "create_task", CreateTaskResponse, ToolToBridge, Reserved;
    TaskStatus = 20, "task_status", TaskStatusRequest, BridgeToTool, Reserved;
    TaskStatusResponse = 21, "task_status_response", TaskStatusResponse, ToolToBridge, Reserved;
    TaskResult = 22, "task_result", TaskResultRequest, BridgeToTool, Reserved;
    TaskCancel = 23, "task_cancel", TaskCancelRequest, BridgeToTool, Reserved;
    RegisterMiddleware = 24, "register_middleware", RegisterMiddlewareRequest, ToolToBridge, PositionalRequest;
    RegisterMiddlewareResponse = 25, "register_middleware_response", RegisterMiddlewareResponse, BridgeToTool, PositionalResponse;
    MiddlewareIntercept = 26, "middleware_intercept", MiddlewareInterceptRequest, BridgeToTool, Request;
    MiddlewareInterceptResponse = 27, "middleware_intercept_response", MiddlewareInterceptResponse, ToolToBridge, Response;
    StreamHeader = 28, "stream_header", StreamHeader, ToolToBridge, ResultPart;
    StreamChunk = 29, "stream_chunk", StreamChunk, ToolToBridge, ResultPart;
    RawHeader = 30, "raw_header", RawHeader, ToolToBridge, ResultPart;
    ListResourcesRequest = 31, "list_resources_request", ListResourcesRequest, BridgeToTool, Request;
    ResourceListResponse = 32, "resource_list_response", ResourceListResponse, ToolToBridge, Response;
    ListResourceTemplatesRequest = 33, "list_resource_templates_request", ListResourceTemplatesRequest, BridgeToTool, Request;
    ResourceTemplateListResponse = 34, "resource_template_list_response", ResourceTemplateListResponse, ToolToBridge, Response;
    ReadResourceRequest = 35, "read_resource_request", ReadResourceRequest, BridgeToTool, Request;
    ReadResourceResponse = 36, "read_resource_response", ReadResourceResponse, ToolToBridge, Response;
    ResourceChanged = 37, "resource_changed", ResourceChangedNotification, ToolToBridge, Notification;
    ListPromptsRequest = 40, "list_prompts_request", ListPromptsRequest, BridgeToTool, Request;
    PromptListResponse = 41, "prompt_list_response", PromptListResponse, ToolToBridge, Response;
    GetPromptRequest = 42, "get_prompt_request", GetPromptRequest, BridgeToTool, Request;
    GetPromptResponse = 43, "get_prompt_response", GetPromptResponse, ToolToBridge, Response;
    CompletionRequest = 50, "completion_request", CompletionRequest, BridgeToTool, Request;
    CompletionResponse = 51, "completion_response", CompletionResponse, ToolToBridge, Response;
    SamplingRequest = 60, "sampling_request", SamplingRequest, ToolToBridge, ReverseRequest;
    SamplingResponse = 61, "sampling_response", SamplingResponse, BridgeToTool, ReverseResponse;
    ListRootsRequest = 62, "list_roots_request", ListRootsRequest, ToolToBridge, ReverseRequest;
    ListRootsResponse = 63, "list_roots_response", ListRootsResponse, BridgeToTool, ReverseResponse;
}

/// Conveniences on any Envelope.
pub trait EnvelopeExt: Sized {
    /// Sets the Envelope's `request_id` (field 14).
    fn with_rid(self, rid: impl Into<String>) -> Self;
    /// Sets `namespace` (field 15); conforming peers always leave it empty.
    fn with_namespace(self, namespace: impl Into<String>) -> Self;
    /// The arm set, or `None` for an empty Envelope.
    fn arm(&self) -> Option<Arm>;
    /// `[len][body]` ready for the socket (panics above 4 GiB; no frame limit applied, so
    /// hostile scenarios can build oversize frames).
    fn to_frame(&self) -> bytes::Bytes;
}

impl EnvelopeExt for Envelope {
    fn with_rid(mut self, rid: impl Into<String>) -> Self {
        self.request_id = rid.into();
        self
    }

    fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    fn arm(&self) -> Option<Arm> {
        self.msg.as_ref().map(Arm::of)
    }

    fn to_frame(&self) -> bytes::Bytes {
        let mut dst = bytes::BytesMut::new();
        crate::frame::encode_frame_into(self, u32::MAX, &mut dst).expect("no limit applied");
        dst.freeze()
    }
}

fn strings<I, S>(names: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    names.into_iter().map(Into::into).collect()
}

/// The JSON of a one-element text result, `[{"type":"text","text":…}]`.
pub fn text_content_json(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 2);
    escaped.push('"');
    for c in text.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            c if (c as u32) < 0x20 => escaped.push_str(&format!("\\u{:04x}", c as u32)),
            c => escaped.push(c),
        }
    }
    escaped.push('"');
    format!(r#"[{{"type":"text","text":{escaped}}}]"#)
}

pub fn reload() -> Envelope {
    pb::ReloadRequest {}.into()
}

pub fn list_tools() -> Envelope {
    pb::ListToolsRequest {}.into()
}

pub fn call_tool(name: &str, arguments_json: &str) -> Envelope {
    pb::CallToolRequest { name: name.into(), arguments_json: arguments_json.into(), progress_token: String::new() }
        .into()
}

pub fn call_tool_with_progress(name: &str, arguments_json: &str, progress_token: &str) -> Envelope {
    pb::CallToolRequest {
        name: name.into(),
        arguments_json: arguments_json.into(),
        progress_token: progress_token.into(),
    }
    .into()
}

pub fn reload_response(success: bool, error: &str) -> Envelope {
    pb::ReloadResponse { success, error: error.into() }.into()
}

/// The handshake-complete marker: ReloadResponse{success: true} with empty rid.
pub fn handshake_marker() -> Envelope {
    reload_response(true, "")
}

/// A ToolDefinition with name, description and input schema; other fields default.
pub fn tool(name: &str, description: &str, input_schema_json: &str) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: name.into(),
        description: description.into(),
        input_schema_json: input_schema_json.into(),
        ..Default::default()
    }
}

pub fn tool_list(tools: impl IntoIterator<Item = pb::ToolDefinition>) -> Envelope {
    pb::ToolListResponse { tools: tools.into_iter().collect() }.into()
}

/// A successful result with one text element.
pub fn call_result_text(text: &str) -> Envelope {
    pb::CallToolResponse { result_json: text_content_json(text), ..Default::default() }.into()
}

/// An error result with one text element.
pub fn call_error_text(text: &str) -> Envelope {
    pb::CallToolResponse { is_error: true, result_json: text_content_json(text), ..Default::default() }.into()
}

pub fn enable_tools<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Envelope {
    pb::EnableToolsRequest { tool_names: strings(names) }.into()
}

pub fn disable_tools<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Envelope {
    pb::DisableToolsRequest { tool_names: strings(names) }.into()
}

pub fn set_allowed<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Envelope {
    pb::SetAllowedRequest { tool_names: strings(names) }.into()
}

pub fn set_blocked<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Envelope {
    pb::SetBlockedRequest { tool_names: strings(names) }.into()
}

pub fn get_active_tools() -> Envelope {
    pb::GetActiveToolsRequest {}.into()
}

pub fn active_tools<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Envelope {
    pb::ActiveToolsResponse { tool_names: strings(names) }.into()
}

pub fn progress(token: &str, progress: i64, total: i64, message: &str) -> Envelope {
    pb::ProgressNotification { progress_token: token.into(), progress, total, message: message.into() }.into()
}

/// CancelRequest naming `call_rid` in its body; the Envelope rid stays empty.
pub fn cancel(call_rid: &str) -> Envelope {
    pb::CancelRequest { request_id: call_rid.into() }.into()
}

pub fn log(level: &str, logger: &str, data_json: &str) -> Envelope {
    pb::LogMessage { level: level.into(), logger: logger.into(), data_json: data_json.into() }.into()
}

pub fn register_middleware(name: &str, priority: i32) -> Envelope {
    pb::RegisterMiddlewareRequest { name: name.into(), priority }.into()
}

pub fn register_middleware_response(success: bool) -> Envelope {
    pb::RegisterMiddlewareResponse { success }.into()
}

pub fn list_resources() -> Envelope {
    pb::ListResourcesRequest {}.into()
}

pub fn list_resource_templates() -> Envelope {
    pb::ListResourceTemplatesRequest {}.into()
}

pub fn read_resource(uri: &str) -> Envelope {
    pb::ReadResourceRequest { uri: uri.into() }.into()
}

pub fn list_prompts() -> Envelope {
    pb::ListPromptsRequest {}.into()
}

pub fn get_prompt(name: &str, arguments_json: &str) -> Envelope {
    pb::GetPromptRequest { name: name.into(), arguments_json: arguments_json.into() }.into()
}

pub fn completion(ref_type: &str, ref_name: &str, argument_name: &str, argument_value: &str) -> Envelope {
    pb::CompletionRequest {
        ref_type: ref_type.into(),
        ref_name: ref_name.into(),
        argument_name: argument_name.into(),
        argument_value: argument_value.into(),
    }
    .into()
}

pub fn list_roots_response<S: Into<String>>(roots: impl IntoIterator<Item = (S, S)>) -> Envelope {
    pb::ListRootsResponse {
        roots: roots.into_iter().map(|(uri, name)| pb::RootDef { uri: uri.into(), name: name.into() }).collect(),
    }
    .into()
}

/// Raw body bytes that append fields the schema does not know to an encoded Envelope: for
/// scenarios that check unknown fields and arms are skipped.
#[derive(Debug, Clone, Default)]
pub struct RawBody {
    bytes: Vec<u8>,
}

impl RawBody {
    pub fn of(envelope: &Envelope) -> Self {
        use prost::Message;
        RawBody { bytes: envelope.encode_to_vec() }
    }

    fn key(&mut self, number: u32, wire_type: u8) {
        prost::encoding::encode_varint((u64::from(number) << 3) | u64::from(wire_type), &mut self.bytes);
    }

    /// Appends a varint field.
    pub fn varint(mut self, number: u32, value: u64) -> Self {
        self.key(number, 0);
        prost::encoding::encode_varint(value, &mut self.bytes);
        self
    }

    /// Appends a length-delimited field (an unknown arm when `number` is not an Envelope field).
    pub fn bytes(mut self, number: u32, value: &[u8]) -> Self {
        self.key(number, 2);
        prost::encoding::encode_varint(value.len() as u64, &mut self.bytes);
        self.bytes.extend_from_slice(value);
        self
    }

    /// Appends a 32-bit fixed field.
    pub fn fixed32(mut self, number: u32, value: u32) -> Self {
        self.key(number, 5);
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends a 64-bit fixed field.
    pub fn fixed64(mut self, number: u32, value: u64) -> Self {
        self.key(number, 1);
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends bytes as they are.
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The body wrapped in a frame.
    pub fn to_frame(&self) -> bytes::Bytes {
        crate::frame::frame_bytes(&self.bytes)
    }
}

/// Where [`synthesize`] takes its values from.
pub trait Entropy {
    /// A number; every field value is derived from these.
    fn next_u64(&mut self) -> u64;
}

impl<F: FnMut() -> u64> Entropy for F {
    fn next_u64(&mut self) -> u64 {
        self()
    }
}

/// Values [`synthesize`] puts into string fields: ASCII, JSON, non-ASCII, escapes.
const STRINGS: &[&str] = &[
    "echo",
    "req-0",
    r#"{"text":"hi"}"#,
    r#"[{"type":"text","text":"ok"}]"#,
    "héllo wörld",
    "日本語",
    "🦀",
    "line\nbreak",
    "quote\"and\\backslash",
    "result_json",
    "zstd",
    "x",
];

/// An Envelope with `arm` set and every field of its message (recursively) filled with a
/// non-default value drawn from `entropy`; repeated fields get one to three elements. The rid is
/// left to the caller.
pub fn synthesize(arm: Arm, entropy: &mut dyn Entropy) -> Envelope {
    use prost::Message;
    let field = crate::schema::envelope().field(arm.number()).expect("every arm is in the schema");
    let crate::schema::FieldKind::Message(idx) = field.kind else { unreachable!("arms are messages") };
    let mut body = Vec::new();
    let inner = synthesize_message(idx, entropy, 0);
    prost::encoding::encode_key(arm.number(), prost::encoding::WireType::LengthDelimited, &mut body);
    prost::encoding::encode_varint(inner.len() as u64, &mut body);
    body.extend_from_slice(&inner);
    Envelope::decode(body.as_slice()).expect("synthesized bodies follow the schema")
}

fn synthesize_message(idx: usize, e: &mut dyn Entropy, depth: u32) -> Vec<u8> {
    use crate::schema::{FieldKind, MESSAGES};
    use prost::encoding::{WireType, encode_key, encode_varint};
    let mut out = Vec::new();
    for f in MESSAGES[idx].fields {
        let n = if f.repeated { 1 + (e.next_u64() % 3) as usize } else { 1 };
        for _ in 0..n {
            match f.kind {
                FieldKind::String => {
                    let s = STRINGS[(e.next_u64() % STRINGS.len() as u64) as usize];
                    encode_key(f.number, WireType::LengthDelimited, &mut out);
                    encode_varint(s.len() as u64, &mut out);
                    out.extend_from_slice(s.as_bytes());
                }
                FieldKind::Bytes => {
                    let len = 1 + (e.next_u64() % 8) as usize;
                    encode_key(f.number, WireType::LengthDelimited, &mut out);
                    encode_varint(len as u64, &mut out);
                    out.extend((0..len).map(|_| e.next_u64() as u8));
                }
                FieldKind::Bool => {
                    encode_key(f.number, WireType::Varint, &mut out);
                    encode_varint(1, &mut out);
                }
                FieldKind::Int32 | FieldKind::Int64 => {
                    // Non-zero, sometimes negative (ten-byte varints), sometimes large.
                    let v = match e.next_u64() % 4 {
                        0 => -1 - (e.next_u64() % 1000) as i64,
                        1 => 1 + (e.next_u64() % 100) as i64,
                        2 => i64::from(i32::MAX),
                        _ => 1 + (e.next_u64() % 1_000_000_000) as i64,
                    };
                    let v = if f.kind == FieldKind::Int32 { i64::from(v as i32) } else { v };
                    encode_key(f.number, WireType::Varint, &mut out);
                    encode_varint(v as u64, &mut out);
                }
                FieldKind::Uint32 | FieldKind::Uint64 => {
                    let max = if f.kind == FieldKind::Uint32 { u64::from(u32::MAX) } else { u64::MAX };
                    let v = match e.next_u64() % 3 {
                        0 => max,
                        _ => 1 + e.next_u64() % 100_000,
                    };
                    encode_key(f.number, WireType::Varint, &mut out);
                    encode_varint(v, &mut out);
                }
                FieldKind::Message(child) => {
                    assert!(depth < 8, "the schema has no recursive messages");
                    let inner = synthesize_message(child, e, depth + 1);
                    encode_key(f.number, WireType::LengthDelimited, &mut out);
                    encode_varint(inner.len() as u64, &mut out);
                    out.extend_from_slice(&inner);
                }
            }
        }
    }
    out
}
