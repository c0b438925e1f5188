//! The CLI crate's integration tests, one binary (one link) for all of them; each file is a
//! module named after what it tests. Two stay binaries of their own: `tests/scenarios.rs`
//! (every scenario file a test of its own, through libtest-mimic) and `tests/flood.rs` (it
//! measures this process's own peak memory).

#[path = "../common/mod.rs"]
mod common;

mod action_script;
mod badge;
mod bridge_bench;
mod bridge_http;
mod bridge_http_nodelay;
mod bridge_http_sessions;
mod bridge_pmcp_files;
mod bridge_poll;
mod bridge_reference;
mod bridge_stdio;
mod bridge_trace;
mod capture;
mod cli_adequacy;
mod cli_bridge_http;
mod cli_bridge_mode;
mod cli_coverage;
mod cli_decode;
mod cli_explore;
mod cli_matrix;
mod cli_reports;
mod cli_run;
mod cli_testee;
mod explore_bridge;
mod html_report;
mod observers;
mod proto_mcp;
mod root_cause;
mod sarif;
mod sdk_checkouts;
mod soak;
mod verdict_party_level;
