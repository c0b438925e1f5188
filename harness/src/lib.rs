//! I/O side of protomcp-conform: everything that touches sockets, processes and clocks. The
//! protocol decisions themselves live in `protomcp-proto`. The only `unsafe` is in [`os`]
//! (libc calls, each behind a safe function); it is denied everywhere else.

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
pub mod limits;
pub mod matrix;
pub mod mock;
pub mod os;
pub mod proto_mcp;
pub mod runner;
pub mod testee;
pub mod tmpdir;
pub mod transcript;
