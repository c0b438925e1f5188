//! Sans-IO core of protomcp-conform: the protomcp wire contract and everything that can be
//! decided about it without a socket, a clock or a process.
//!
//! - [`pb`]: the Envelope and its messages, generated from `protomcp.proto`;
//! - [`frame`]: the incremental, bounded [`FrameDecoder`](frame::FrameDecoder) and frame encoders;
//! - [`payload`]: one sideband payload as the field's bytes (verbatim or bounded zstd), a leaf;
//! - [`sideband`]: raw sideband transfers and chunked-stream reassembly;
//! - [`envelopes`]: the arm table and the builder vocabulary used everywhere else;
//! - [`fixture`]: the fixture contract's tools (names, features), one table;
//! - [`varint`]: the one protobuf varint, key and length-prefix reader, and the nesting limit, a leaf;
//! - [`wire`]: a schema-driven protobuf scanner that keeps unknown fields and error offsets;
//! - [`violation`]: protocol rules broken on the wire, with the party at fault;
//! - [`fuzzing`]: the bodies of the cargo-fuzz targets, also replayed by `cargo test`;
//! - [`session`]: a model of a session for generated exploration, and its invariant oracle;
//! - [`mcp_input`]: a bridge's decisions about its host's MCP input (bounded lines, the gate);
//! - [`bound`]: bounds on what a peer can make us hold, and the memory estimate of a JSON value;
//! - [`host_core`]: the reference bridge's MCP-side decisions (typed JSON-RPC, the gate, initialize, pages, log thresholds, the notification queue, reverse requests), driven by `handle_*`/`poll_*`;
//! - [`bridge_core`]: the reference bridge's protocol decisions, driven by `handle_*`/`poll_*`;
//! - [`jsonrpc`]: JSON-RPC error codes and request ids;
//! - [`bridge_model`]: a model of a bridge under test that checks its invariants from outside;
//! - [`spec`]: the specification's constants (times, environment variables);
//! - `strategies` (feature `proptest`): proptest strategies for Envelopes and session ops.

#![deny(unsafe_code)]

#[allow(clippy::all, missing_docs)]
pub mod pb {
    //! Generated from `proto/protomcp.proto` by prost-build (see `build.rs`).
    include!(concat!(env!("OUT_DIR"), "/protomcp.rs"));
}

pub mod bound;
pub mod bridge_core;
pub mod bridge_model;
pub mod dynamic;
pub mod envelopes;
pub mod fault;
pub mod fixture;
pub mod frame;
pub mod fuzzing;
pub mod host_core;
pub mod jsonrpc;
pub mod mcp;
pub mod mcp_input;
pub mod payload;
pub mod schema;
pub mod session;
pub mod sideband;
pub mod spec;
#[cfg(feature = "proptest")]
pub mod strategies;
pub mod varint;
pub mod violation;
pub mod wire;

pub use envelopes::{Arm, EnvelopeExt};
pub use frame::{Decoded, Frame, FrameDecoder, FrameError, Limits, MAX_FRAME};
pub use pb::Envelope;
pub use violation::{Party, Violation};
