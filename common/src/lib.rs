//! The leaves protomcp-conform's tester (`protomcp-harness`), its reference bridge
//! (`protomcp-bridge`) and its bundled peers (`protomcp-peers`) share. Nothing here knows a
//! scenario run, a bridge or a testee; each module is one mechanism:
//!
//! - [`os`]: the system calls std lacks (process groups, subreaper, signals, `/proc`), through
//!   rustix's safe wrappers; the one process-group owner;
//! - [`limits`]: every bound on what a peer fills; [`bounded`]: head-and-tail buffers;
//! - [`tmpdir`]: where temp dirs go; [`duration`]: the one duration grammar of the command line;
//! - [`dump`]: a captured byte stream as readable lines; [`jsonrpc`]: error codes and request ids;
//! - [`io`]: the Envelope transport over unix sockets;
//! - [`transcript`]: what a run saw, normalized.
//!
//! The modules are layers in that order (a module uses only those above it in the list).

#![deny(unsafe_code)]

pub mod bounded;
pub mod dump;
pub mod duration;
pub mod io;
pub mod jsonrpc;
pub mod limits;
pub mod os;
pub mod tmpdir;
pub mod transcript;
