//! JSON-RPC's vocabulary for the harness's MCP sides (the host driver, the reference bridge):
//! error codes by name and request ids. One definition, in the sans-IO crate
//! ([`protomcp_proto::jsonrpc`]), shared with the bridge core and the gate.

pub use protomcp_proto::jsonrpc::{ErrorCode, RequestId};
