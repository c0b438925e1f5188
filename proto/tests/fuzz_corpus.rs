//! Replays every committed fuzz seed (`fuzz/seeds/<target>/*`) through the same functions the
//! cargo-fuzz targets call, so what the fuzzer once found stays fixed without a fuzzer.

use std::path::PathBuf;

use protomcp_proto::fuzzing;

fn replay(target: &str, f: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{}: a seed corpus, not {} files", dir.display(), files.len());
    for path in files {
        let data = std::fs::read(&path).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| f(&data)) {
            let why = panic.downcast_ref::<String>().cloned().or(panic.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("{}: {}", path.display(), why.unwrap_or_default());
        }
    }
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
fn mcp_input_seeds() {
    replay("mcp_input", fuzzing::mcp_input);
}
