//! Where the harness makes its temporary directories (per-scenario dirs, sockets): under
//! `PROTOMCP_CONFORM_TMPDIR` when it is set, else the system's temp dir. A leaf: the runner makes
//! the directories, the transcript normalizer folds their paths.

use std::path::PathBuf;

/// Environment variable naming the directory under which the per-scenario temp dirs are made.
pub const ENV_TMPDIR: &str = "PROTOMCP_CONFORM_TMPDIR";

/// The directory the harness's temp dirs go under.
pub fn root() -> PathBuf {
    std::env::var_os(ENV_TMPDIR).map(PathBuf::from).unwrap_or_else(std::env::temp_dir)
}
