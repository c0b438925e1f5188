//! proto's integration tests, one binary (one link) for all of them; each file is a module named
//! after what it tests. `tests/memory.rs` stays a binary of its own: it installs a counting global
//! allocator and reads the process's peak RSS, which only a process of its own can give.

mod framing;
mod fuzz_corpus;
mod mcp_framing;
mod sequences;
mod session_model;
mod sideband;
mod wire;
