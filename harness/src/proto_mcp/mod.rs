//! The proto-mcp profile (`buf.mcp.v1`, spec `proto-mcp.md`): the harness is the client, the
//! implementation under test a server it starts as a child. Its scenarios are files of the one
//! scenario language (`profile: proto-mcp`, loaded by [`crate::scenario`], the profile's own
//! steps in [`crate::scenario::proto_mcp`]); verdicts, known-failure entries and reports are
//! the protomcp runner's ([`crate::runner`]).
//!
//! - [`requirements`]: the PM-* table (`harness/data/proto-mcp-requirements.tsv`);
//! - [`session`]: the server as a child process, and the rules every answer keeps;
//! - [`run`]: steps, probes, features, verdicts, manifests;
//! - [`server`]: the reference server's I/O shell.

pub use crate::requirements::proto_mcp as requirements;
pub mod run;
pub use protomcp_peers::proto_mcp_server as server;
pub mod session;

use std::collections::BTreeMap;

use crate::requirements::{Level, Requirement};

/// The not-black-box-testable list of the profile, `harness/data/proto-mcp-untestable.yaml`
/// (beside `untestable/`, not in it: the protomcp coverage reads every file there).
pub const UNTESTABLE: &str = include_str!("../../data/proto-mcp-untestable.yaml");

/// The profile's catalogue directory, relative to the repository root.
pub const CATALOGUE_DIR: &str = "scenarios/proto-mcp";

/// Parses the untestable list: every ID a PM MUST/SHOULD, every reason non-empty.
pub fn untestable() -> Result<BTreeMap<String, String>, crate::coverage::UntestableError> {
    crate::coverage::parse_untestable_in("proto-mcp.yaml", UNTESTABLE, requirements::get)
}

/// One PM requirement and what covers it.
#[derive(Debug, Clone)]
pub struct CoverageEntry {
    pub requirement: &'static Requirement,
    pub scenarios: Vec<String>,
    pub untestable: Option<String>,
}

impl CoverageEntry {
    pub fn missing(&self) -> bool {
        self.scenarios.is_empty() && self.untestable.is_none()
    }
}

/// Every PM MUST/SHOULD with the scenarios citing it and its untestable reason; plus the
/// untestable entries a scenario cites anyway (stale).
pub fn coverage(
    scenarios: &[crate::scenario::Scenario],
    untestable: &BTreeMap<String, String>,
) -> (Vec<CoverageEntry>, Vec<String>) {
    let entries: Vec<CoverageEntry> = requirements::all()
        .iter()
        .filter(|r| r.level != Level::May)
        .map(|r| CoverageEntry {
            requirement: r,
            scenarios: scenarios
                .iter()
                .filter(|s| s.requirements.iter().any(|q| q.id == r.id))
                .map(|s| s.id.clone())
                .collect(),
            untestable: untestable.get(r.id).cloned(),
        })
        .collect();
    let stale = entries
        .iter()
        .filter(|e| !e.scenarios.is_empty() && e.untestable.is_some())
        .map(|e| e.requirement.id.to_owned())
        .collect();
    (entries, stale)
}
