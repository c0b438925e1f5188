//! The proto-mcp profile on the command line: `proto-mcp-server` (the reference server) and
//! everything under `--profile proto-mcp` (run, list, explain, coverage). Thin: the work is in
//! `protomcp_harness::proto_mcp`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use protomcp_proto::mcp::MCP_MAX_FRAME;
use protomcp_proto::mcp::server::Misbehave;

#[derive(Args)]
pub struct ServerArgs {
    /// Break one rule on purpose (otherwise behaving normally), for self-tests of the harness:
    /// buffer-first-16 (PM-FRAME-03) or silent-on-undecodable (PM-ERROR-08).
    #[arg(long, value_name = "KIND", value_parser = |s: &str| s.parse::<Misbehave>())]
    misbehave: Option<Misbehave>,
    /// Largest frame body accepted; a longer prefix gets -32600 (id 0) and the server exits.
    #[arg(long, default_value_t = MCP_MAX_FRAME)]
    max_frame: u32,
}

/// `proto-mcp-server`: serves one proto-mcp session on stdio.
pub fn serve(args: ServerArgs) -> Result<ExitCode> {
    let code = protomcp_harness::proto_mcp::server::run(args.misbehave, args.max_frame);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
