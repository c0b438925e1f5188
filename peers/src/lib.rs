//! The peers protomcp-conform bundles and starts: [`testee`], the reference tool process (the
//! whole fixture contract, harness/testees/README.md); [`mock`], the tool process of bridge runs
//! (a relay between the bridge's socket and the harness's control socket, or the testee with
//! `--native`); [`proto_mcp_server`], the reference server of the proto-mcp profile. They depend
//! on the shared leaves (`protomcp-common`) and the sans-IO core (`protomcp-proto`) only, never
//! on the tester.

#![deny(unsafe_code)]

use protomcp_common::{io, os};

pub mod mock;
pub mod proto_mcp_server;
pub mod testee;
