//! The scenarios the `checks:` lint lets through for now ([`Scenario::unattributed_steps`]):
//! multi-requirement scenarios some of whose judging steps do not yet name what they check.
//! Converting a scenario means giving each such step its `checks:` and taking its id off this
//! list; a test fails while a listed scenario is in fact clean, so the list only shrinks. The
//! tool-process and bridge catalogues are converted; the proto-mcp one is left to do.

/// Scenario ids the loader does not refuse for judging steps without `checks:`.
pub const UNATTRIBUTED: &[&str] = &[
    // proto-mcp scenarios (scenarios/proto-mcp/).
    "pm.init.tools-advertised",
    "pm.lifecycle.answers-match-requests",
    "pm.tools.bsr-filter",
    "pm.tools.names-and-schema-sources",
    "pm.tools.safe-call",
];
