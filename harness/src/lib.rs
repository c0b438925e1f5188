//! I/O side of protomcp-conform: everything that touches sockets, processes and clocks. The
//! protocol decisions themselves live in `protomcp-proto`, the scenario language in
//! `protomcp-scenario` (re-exported here as [`scenario`] and [`requirements`]). The only `unsafe`
//! is in [`os`] (libc calls, each behind a safe function); it is denied everywhere else.
//!
//! The modules, bottom layer first; a module uses only modules of the layers below it (and
//! `tests/testsuite/module_cycles.rs` fails on any cycle among siblings):
//!
//! 1. leaves: [`os`] (libc), [`limits`] (every bound on what a peer fills), [`tmpdir`] (where
//!    temp dirs go), [`duration`] (the one duration grammar of the command line), [`dump`]
//!    (a captured byte stream as readable lines), [`jsonrpc`] (error codes and request ids);
//! 2. [`bounded`] (head-and-tail buffers), [`io`] (the Envelope transport over unix sockets),
//!    [`transcript`] (what a run saw, normalized), [`host`] (the hand-rolled MCP host that drives
//!    a bridge), [`testee`] (the reference tool process);
//! 3. [`bridge`] (the reference bridge, an async shell over `protomcp_proto::bridge_core`),
//!    [`mock`] (the relay mock tool process of bridge runs);
//! 4. [`runner`] (scenarios against a target: processes, verdicts, reports);
//! 5. what builds on the runner: [`explore`] (generated cases and shrinking), [`capture`] (a real
//!    session recorded as two scenarios), [`matrix`] (requirement × target), [`proto_mcp`] (the
//!    proto-mcp profile), and [`coverage`] (requirements without a scenario).

#![deny(unsafe_code)]

pub use protomcp_scenario as scenario;
pub use protomcp_scenario::requirements;

pub mod bounded;
pub mod bridge;
pub mod capture;
pub mod coverage;
pub mod dump;
pub mod duration;
pub mod explore;
pub mod host;
pub mod io;
pub mod jsonrpc;
pub mod limits;
pub mod matrix;
pub mod mock;
pub mod os;
pub mod proto_mcp;
pub mod runner;
pub mod testee;
pub mod tmpdir;
pub mod transcript;
