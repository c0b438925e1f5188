//! The proto-mcp profile's part of the scenario language (`profile: proto-mcp`, files under
//! `scenarios/proto-mcp/`): the steps only that profile has, as [`PmAction`] inside the one
//! [`crate::Action`]. The header, the step envelope (`checks:`, `deviation:`), times,
//! `${name}` placeholders, patterns and captures, `send_raw`, `expect_nothing`, `expect_exit`,
//! `expect_alive`, `close`, `signal`, `sleep` and `check` are the shared language's.
//!
//! - [`build`]: MCPMessages by field name into frames;
//! - [`view`]: an MCPMessage as the JSON tree a pattern is matched against.

use std::time::Duration;

use protomcp_proto::mcp::Arm;
use serde_json::Value;

use crate::pattern::Pattern;
use crate::template::{self, Captures, RenderError};

pub mod build;
pub mod view;

pub use build::{BuildError, message_frame};

/// The names a proto-mcp scenario may use as `${name}` without capturing them: the operator's
/// safe tool (feature `call`), set by the runner before the first step.
pub const CONFIGURED: &[&str] = &["safe_tool", "safe_type_url", "safe_value_hex"];

/// The profile's time for an answer that runs no tool (§1.3): the default wait of its steps,
/// `expect_alive` and `expect_exit` included.
pub const T_REPLY: Duration = Duration::from_secs(5);

/// The id of the `initialize` step unless it names one.
pub const DEFAULT_INITIALIZE_ID: u64 = 1;

/// A step only proto-mcp scenarios have.
#[derive(Debug, Clone)]
pub enum PmAction {
    /// `initialize`: send an initialize_request (the profile's default handshake, or one with
    /// the options given) and expect an initialize_response with its id.
    Initialize(Initialize),
    /// `send` (one MCPMessage by field name), `send_json`, `send_text`, `send_batch`: bytes in
    /// one write.
    Write(PmWrite),
    /// `expect_answer`: the answer to `id` arrives and has one of the arms (and matches the
    /// pattern, when given).
    ExpectAnswer(ExpectAnswer),
    ExpectError(ExpectError),
    /// `expect_next`: the next frame that arrives answers `id`.
    ExpectNext {
        id: u64,
        within: Duration,
    },
    ExpectJson(ExpectJson),
    /// A named multi-request check (the runner's probes).
    Probe(Probe),
}

impl PmAction {
    pub fn keyword(&self) -> &'static str {
        match self {
            PmAction::Initialize(_) => "initialize",
            PmAction::Write(w) => w.keyword,
            PmAction::ExpectAnswer(_) => "expect_answer",
            PmAction::ExpectError(_) => "expect_error",
            PmAction::ExpectNext { .. } => "expect_next",
            PmAction::ExpectJson(_) => "expect_json",
            PmAction::Probe(_) => "probe",
        }
    }

    /// Whether the step judges the server (everything but a plain write; see [`crate::Action::judges`]).
    pub fn judges(&self) -> bool {
        !matches!(self, PmAction::Write(_))
    }

    pub fn writes(&self) -> bool {
        matches!(self, PmAction::Initialize(_) | PmAction::Write(_) | PmAction::Probe(_))
    }
}

/// `initialize`: the frame to send (built by the loader) and the id whose answer is awaited.
#[derive(Debug, Clone)]
pub struct Initialize {
    pub id: u64,
    pub frame: Vec<u8>,
    pub within: Duration,
}

/// One piece of a write.
#[derive(Debug, Clone)]
pub enum PmItem {
    /// An MCPMessage by field name (`{id, <arm>: {…}}` and the modifiers of [`message_frame`]),
    /// `${name}` placeholders filled in at run time.
    Message(Value),
    /// Bytes as they are.
    Raw(Vec<u8>),
    /// Text as it is (no newline added).
    Text(String),
    /// A JSON-RPC line: the value as compact JSON and a newline.
    Json(Value),
    /// The profile's default handshake frame with this id (no answer awaited).
    Initialize(u64),
}

/// Bytes written together, optionally one byte per `pace`.
#[derive(Debug, Clone)]
pub struct PmWrite {
    pub keyword: &'static str,
    pub items: Vec<PmItem>,
    pub pace: Option<Duration>,
}

/// What one write sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub bytes: Vec<u8>,
    /// One byte per this gap (PM-FRAME-02).
    pub pace: Option<Duration>,
    /// For the transcript.
    pub label: String,
}

/// Why a write could not be rendered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Build(#[from] BuildError),
}

impl PmWrite {
    /// The bytes, with the placeholders filled from `captures`.
    pub fn render(&self, captures: &Captures) -> Result<Write, WriteError> {
        let (mut bytes, mut label) = (Vec::new(), Vec::new());
        for item in &self.items {
            match item {
                PmItem::Message(v) => {
                    let (frame, l) = message_frame(&template::substitute(v, captures)?)?;
                    bytes.extend(frame);
                    label.push(l);
                }
                PmItem::Raw(b) => {
                    bytes.extend_from_slice(b);
                    label.push("raw".to_owned());
                }
                PmItem::Text(t) => {
                    bytes.extend_from_slice(t.as_bytes());
                    label.push("text".to_owned());
                }
                PmItem::Json(v) => {
                    bytes.extend(template::substitute(v, captures)?.to_string().as_bytes());
                    bytes.push(b'\n');
                    label.push("json line".to_owned());
                }
                PmItem::Initialize(id) => {
                    bytes.extend(protomcp_proto::mcp::default_handshake(*id).to_frame());
                    label.push(format!("default handshake id={id}"));
                }
            }
        }
        Ok(Write { bytes, pace: self.pace, label: label.join(" + ") })
    }
}

/// `expect_answer`.
#[derive(Debug, Clone)]
pub struct ExpectAnswer {
    pub id: u64,
    pub arms: Vec<Arm>,
    pub within: Duration,
    /// Matched against the answer's [`view`] (`{id, <arm>: {…}}`); its `{capture: name}`s bind.
    pub message: Option<Pattern>,
}

/// `expect_error`: the answer to `id` is an error with one of `codes`.
#[derive(Debug, Clone, Default)]
pub struct ExpectError {
    pub id: u64,
    /// Codes that satisfy the step (empty: any code).
    pub codes: Vec<i32>,
    /// With `should`: codes the SHOULD part prefers; another accepted code is a deviation of
    /// `should`.
    pub should_codes: Vec<i32>,
    pub should: Option<String>,
    /// With `should`: a server-defined code (-32000…-32099) also satisfies the SHOULD part.
    pub server_defined_ok: bool,
    /// With `should`: codes that satisfy the SHOULD part only when the session's
    /// initialize_response did not advertise `capabilities.resources` (PM-RESOURCES-05's -32601).
    pub if_resources_not_advertised: Vec<i32>,
    /// A `call_tool_response` with a `success` result is accepted too (PM-TOOLS-12).
    pub success_ok: bool,
    /// `call_tool_response.error` is accepted as the carrier, as a deviation of this
    /// requirement (PM-ERROR-03).
    pub call_error: Option<String>,
    pub within: Duration,
}

/// `expect_json`: the next stdout line is a JSON-RPC 2.0 response with this id.
#[derive(Debug, Clone)]
pub struct ExpectJson {
    /// A number, or null.
    pub id: Value,
    /// A `result` object is required.
    pub result: bool,
    /// An `error` with this code is required.
    pub error_code: Option<i64>,
    /// Either a result or an error is fine.
    pub any: bool,
    pub within: Duration,
}

/// The runner's named multi-request checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Every page of the tool listing: names, schema sources, paging, inline schemas.
    Tools {
        include_schemas: bool,
    },
    Resources,
    BsrFilter,
    InitFlags,
    /// The initialize_response to a request with this protocol_version.
    Version {
        sent: String,
    },
    NewerMajor,
    SafeCall,
    /// `count` list_tools requests, `batch` in flight at a time.
    Many {
        count: u64,
        batch: u64,
    },
}

impl Probe {
    /// The names a probe binds for later `${name}`s.
    pub fn defines(&self) -> &'static [&'static str] {
        match self {
            Probe::Tools { .. } => &["first_bsr_ref", "tool_count"],
            Probe::Resources => &["first_resource_uri"],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests;
