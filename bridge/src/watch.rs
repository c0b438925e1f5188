//! Watch mode (`--watch PATH…`): polls the paths (files, or directory trees without hidden and
//! common dependency/build directories) and reloads the tool process after a change, debounced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Bridge;

/// How often the paths are polled.
pub const POLL: Duration = Duration::from_millis(200);
/// Quiet time after a change before the reload starts (editors write in several steps).
pub const DEBOUNCE: Duration = Duration::from_millis(100);

const SKIP_DIRS: &[&str] = &["node_modules", "target", "__pycache__", "venv", "dist", "build"];

/// Modification time and length of every file under `paths`.
pub fn snapshot(paths: &[PathBuf]) -> BTreeMap<PathBuf, (SystemTime, u64)> {
    let mut out = BTreeMap::new();
    for p in paths {
        walk(p, 0, &mut out);
    }
    out
}

fn walk(p: &Path, depth: usize, out: &mut BTreeMap<PathBuf, (SystemTime, u64)>) {
    let Ok(meta) = std::fs::metadata(p) else { return };
    if meta.is_file() {
        out.insert(p.to_owned(), (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()));
    } else if meta.is_dir() && depth < 16 {
        let Ok(entries) = std::fs::read_dir(p) else { return };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || SKIP_DIRS.contains(&name.as_ref()) {
                continue;
            }
            walk(&e.path(), depth + 1, out);
        }
    }
}

/// Polls `paths` until the bridge shuts down; each change triggers one reload.
pub async fn run(bridge: Arc<Bridge>, paths: Vec<PathBuf>) {
    let mut last = snapshot(&paths);
    loop {
        tokio::time::sleep(POLL).await;
        let now = snapshot(&paths);
        if now == last {
            continue;
        }
        // Debounce: wait until the tree holds still.
        let mut settled = now;
        loop {
            let slow = protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrReloadSlowDebounce);
            tokio::time::sleep(if slow { Duration::from_secs(2) } else { DEBOUNCE }).await;
            let again = snapshot(&paths);
            if again == settled {
                break;
            }
            settled = again;
        }
        last = settled;
        if protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrReloadNotFolded) {
            // Keeps polling while the reload runs and owes one more reload per change seen.
            let b = bridge.clone();
            let mut job = tokio::spawn(async move { b.reload().await });
            let mut owed = 0;
            loop {
                tokio::select! {
                    _ = &mut job => break,
                    _ = tokio::time::sleep(POLL) => {
                        let now = snapshot(&paths);
                        if now != last {
                            owed += 1;
                            last = now;
                        }
                    }
                }
            }
            for _ in 0..owed {
                bridge.reload().await;
            }
            last = snapshot(&paths);
            continue;
        }
        bridge.reload().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_sees_changes_and_skips_hidden() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tool.py"), "a").unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/x"), "a").unwrap();
        let paths = vec![dir.path().to_owned()];
        let a = snapshot(&paths);
        assert_eq!(a.len(), 1);
        std::fs::write(dir.path().join(".git/x"), "bb").unwrap();
        assert_eq!(snapshot(&paths), a);
        std::fs::write(dir.path().join("tool.py"), "bb").unwrap();
        assert_ne!(snapshot(&paths), a);
    }
}
