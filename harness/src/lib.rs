//! The tester of protomcp-conform: it runs scenarios against a target and judges what it saw.
//! The protocol decisions live in `protomcp-proto`, the scenario language in `protomcp-scenario`
//! (re-exported here as [`scenario`] and [`requirements`]), the leaves shared with the peers in
//! `protomcp-common` and the peers it starts in `protomcp-peers` (both re-exported under their
//! old paths); the reference bridge is its own crate, `protomcp-bridge`, which this one does not
//! depend on. No `unsafe` here.
//!
//! The modules, bottom layer first; a module uses only modules of the layers below it (and
//! `tests/testsuite/module_cycles.rs` fails on any cycle among siblings):
//!
//! 1. [`host`] (the hand-rolled MCP host that drives a bridge);
//! 2. [`runner`] (scenarios against a target: processes, verdicts, reports);
//! 3. what builds on the runner: [`explore`] (generated cases and shrinking), [`capture`] (a real
//!    session recorded as two scenarios), [`matrix`] (requirement × target), [`proto_mcp`] (the
//!    proto-mcp profile), [`coverage`] (requirements without a scenario) and [`adequacy`]
//!    (faults of the reference peers against the scenarios that should catch them).

#![deny(unsafe_code)]

pub use protomcp_scenario as scenario;
pub use protomcp_scenario::requirements;

/// The shared leaves (crate `protomcp-common`), under the paths the tester has always used.
pub use protomcp_common::{bounded, dump, duration, io, jsonrpc, limits, os, tmpdir, transcript};
/// The bundled peers the tester starts (crate `protomcp-peers`).
pub use protomcp_peers::{mock, testee};

pub mod adequacy;
pub mod capture;
pub mod coverage;
pub mod explore;
pub mod host;
pub mod matrix;
pub mod proto_mcp;
pub mod runner;
