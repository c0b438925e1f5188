//! Replays every committed fuzz seed (`fuzz/seeds/<target>/*`) through the same functions the
//! cargo-fuzz targets call, so what the fuzzer once found stays fixed without a fuzzer.

use std::path::PathBuf;

use protomcp_proto::fuzzing;

fn replay(target: &str, body: fn(&[u8])) {
    fuzzing::replay_seeds(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target), body);
}

#[test]
fn frame_decoder_seeds() {
    replay("frame_decoder", fuzzing::frame_decoder);
}

#[test]
fn envelope_roundtrip_seeds() {
    replay("envelope_roundtrip", fuzzing::envelope_roundtrip);
}

#[test]
fn sideband_seeds() {
    replay("sideband", fuzzing::sideband);
}

#[test]
fn mcp_message_frame_seeds() {
    replay("mcp_message_frame", fuzzing::mcp_message_frame);
}

#[test]
fn host_core_ops_seeds() {
    replay("host_core_ops", fuzzing::host_core_ops);
}

#[test]
fn mcp_input_seeds() {
    replay("mcp_input", fuzzing::mcp_input);
}

#[cfg(feature = "arbitrary")]
#[test]
fn session_ops_seeds() {
    replay("session_ops", fuzzing::session_ops);
}

#[test]
fn bridge_core_ops_seeds() {
    replay("bridge_core_ops", fuzzing::bridge_core_ops);
}
