//! Replays the committed seeds of the `session_ops` fuzz target through the function the target
//! calls.

use std::path::PathBuf;

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
fn session_ops_seeds() {
    replay("session_ops", protomcp_proto::fuzzing::session_ops);
}
