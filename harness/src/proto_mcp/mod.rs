//! The proto-mcp profile (`buf.mcp.v1`, spec `proto-mcp.md`): the harness is the client, the
//! implementation under test a server it starts as a child. Beside the protomcp runner, with the
//! same verdicts and report format ([`crate::runner`]).
//!
//! - [`requirements`]: the PM-* table (`harness/data/proto-mcp-requirements.tsv`);
//! - [`server`]: the reference server's I/O shell;

pub mod server;
