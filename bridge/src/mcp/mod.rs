//! The MCP side of the reference bridge: an async shell over the sans-IO host core
//! [`protomcp_proto::host_core`], which takes every MCP-side decision. Here: one [`session`]
//! per host (the core under a lock, its actions carried out against the [`crate::Bridge`]), and
//! the two transports that move its messages: stdio ([`on_stdio`]) and Streamable HTTP
//! ([`on_http`], on hyper). One path for every method, `tools/call` included, on both.

mod on_http;
mod on_stdio;
mod session;

pub use on_http::{accept, serve_http};
pub use on_stdio::serve_stdio;
pub use protomcp_proto::host_core::NEWEST_VERSION;

/// By default an HTTP session without any request for this long is ended (BR-HTTP-26).
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);
