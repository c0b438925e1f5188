//! The scenario language: YAML files that each check one behaviour of a tool process or a bridge
//! and cite the requirements of `spec/protocol.md` they check. `scenarios/README.md` is the
//! language reference.
//!
//! This crate is sans-IO and has no async runtime: it reads and checks scenario files, and gives
//! the runner (`protomcp_harness::runner`) everything it needs to execute them against a live
//! peer:
//!
//! - [`load_file`], [`load_dir`], [`parse_str`]: files into [`Scenario`]s, or
//!   [`ScenarioErrors`] whose every entry displays as `file:line:col: message`;
//! - [`Step`] / [`Action`]: what to do, each with its [`Loc`] for `file:line:col` reports
//!   ([`Scenario::at`]);
//! - [`Template`]: an Envelope to send, filled in from the [`Captures`] of earlier steps;
//! - [`match_envelope`], [`match_any_order`]: a compiled [`Pattern`] against the tree of what
//!   the peer sent, explaining a failure as a [`Mismatch`];
//! - [`normalize`]: sideband transfers and streams as the equivalent CallToolResponse tree, so
//!   one pattern fits every form of a result;
//! - [`requirements`]: the requirement tables of both profiles (protomcp's TP/BR, proto-mcp's PM)
//!   that scenarios cite;
//! - [`proto_mcp`]: the steps only proto-mcp scenarios (`profile: proto-mcp`) have, the
//!   MCPMessages they write and the JSON view their answers are matched as;
//! - [`Misbehave`]: the names of the reference testee's hostile modes;
//! - [`fuzzing`]: the body of the `scenario_parser` fuzz target.

#![deny(unsafe_code)]

mod error;
pub mod fuzzing;
mod load;
pub mod misbehave;
mod model;
pub mod normalize;
pub mod pattern;
pub mod proto_mcp;
mod raw;
pub mod requirements;
pub mod template;
pub mod yaml;

pub use error::{ScenarioError, ScenarioErrors, SourceLoc};
pub use load::{MAX_FILE_BYTES, load_dir, load_file, parse_generated, parse_str, scenario_files};
pub use misbehave::Misbehave;
pub use model::*;
pub use pattern::{Mismatch, Pattern, PatternError, match_any_order, match_envelope, match_value};
pub use template::{Captures, RenderError, Template};
pub use yaml::Loc;
