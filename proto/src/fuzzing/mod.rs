//! Bodies of the cargo-fuzz targets. Each target in `fuzz/fuzz_targets/` is a one-line call into
//! this module; `cargo test` replays every committed corpus file through the same functions, so
//! an invariant broken once stays caught without a fuzzer.
//!
//! Invariants checked (a broken one panics):
//! - nothing panics on any input;
//! - the decoder gives the same items whether the bytes arrive at once or in any chunks;
//! - every decoded Envelope re-encodes to bytes that decode back to it;
//! - the wire scanner and prost agree on what is a valid Envelope;
//! - the bridge core answers every operation once, and its timer never spins ([`bridge_core_ops`]);
//! - the host core answers every host request at most once, only after the bridge's outcome, and
//!   nothing after the session's end ([`host_core_ops`]);
//! - no allocation exceeds the limits (with the `alloc-guard` feature, any single allocation
//!   above [`GUARD_LIMIT`] aborts the process).

use bytes::BytesMut;
use prost::Message;

use crate::frame::{Frame, FrameDecoder, FrameError, Limits};
use crate::mcp_input::Admission;
use crate::pb::{Envelope, RawHeader};
use crate::sideband::{Compression, StreamAssembler, StreamEvent, StreamLimits};
use crate::violation::Party;
use crate::wire;

mod alloc;
mod bridge;
mod frame;
mod host;
mod mcp;

pub use alloc::CountingAlloc;
pub use bridge::bridge_core_ops;
#[cfg(feature = "arbitrary")]
pub use frame::session_ops;
pub use frame::{envelope_roundtrip, frame_decoder, sideband};
pub use host::host_core_ops;
pub use mcp::{MCP_INPUT_LINE, check_gate_verdict, mcp_input, mcp_message_frame};

/// Limits the fuzz targets decode with: small, so that "never beyond the limit" is testable.
pub const FUZZ_LIMITS: Limits = Limits { max_frame: 1 << 20, max_sideband: 1 << 20, max_decompressed: 1 << 20 };

/// The largest single allocation the fuzz targets may make: twice the largest limit (a buffer
/// may double once while it grows to the limit) plus slack.
pub const GUARD_LIMIT: usize = 3 << 20;

/// A tiny deterministic generator for chunk sizes.
struct XorShift(u32);

impl XorShift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

/// Every item and error of a byte stream, decoded with `chunks` deciding how the bytes arrive.
pub fn decode_all(data: &[u8], limits: Limits, mut chunks: impl FnMut() -> usize) -> Vec<Result<Frame, FrameError>> {
    let mut decoder = FrameDecoder::with_limits(Party::ToolProcess, limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = data;
    loop {
        let n = chunks().clamp(1, rest.len().max(1)).min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        let at_eof = rest.is_empty();
        loop {
            let step = if at_eof { decoder.decode_eof(&mut buf) } else { decoder.decode(&mut buf) };
            match step {
                Ok(Some(item)) => out.push(Ok(item)),
                Ok(None) => break,
                Err(e) => {
                    let go_on = e.is_recoverable();
                    out.push(Err(e));
                    if !go_on {
                        return out;
                    }
                }
            }
        }
        if at_eof {
            return out;
        }
    }
}

/// Checks that an Envelope survives encode → decode → encode unchanged.
fn assert_roundtrip(env: &Envelope) {
    let bytes = env.encode_to_vec();
    assert_eq!(bytes.len(), env.encoded_len(), "encoded_len agrees with encode");
    let back = Envelope::decode(bytes.as_slice()).expect("a re-encoded Envelope decodes");
    assert_eq!(&back, env, "decode(encode(e)) == e");
    assert_eq!(back.encode_to_vec(), bytes, "encoding is a fixed point");
}

/// A RawHeader for tests and generators.
pub fn raw_header(call_rid: &str, size: u64, compression: &str, uncompressed_size: u64) -> RawHeader {
    RawHeader {
        request_id: call_rid.into(),
        field_name: "result_json".into(),
        size,
        compression: compression.into(),
        uncompressed_size,
    }
}

/// Replays every file of a committed seed corpus (`dir`, at least five files) through a target's
/// body, naming the file whose input broke an invariant. `cargo test` calls it for every target
/// of the cargo-fuzz crate (`fuzz/`).
pub fn replay_seeds(dir: &std::path::Path, body: fn(&[u8])) {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{}: a seed corpus, not {} files", dir.display(), files.len());
    for path in files {
        let data = std::fs::read(&path).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| body(&data)) {
            let why = panic.downcast_ref::<String>().cloned().or(panic.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("{}: {}", path.display(), why.unwrap_or_default());
        }
    }
}
