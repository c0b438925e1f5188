//! The mock tool process of bridge scenarios (`protomcp-conform mock`).
//!
//! A bridge under test starts the mock as its tool process. In relay mode (the default) the mock
//! connects to the bridge's socket (`PROTOMCP_SOCKET`) and to the harness's control socket
//! (`PROTOMCP_CONFORM_CONTROL`) and copies bytes both ways unchanged, so the harness decides
//! every byte the bridge receives and sees every byte the bridge sends: the scenario's tool-side
//! steps run on the control connection as if the harness were the tool process. End-of-file on
//! one side is passed on as end-of-file on the other; the mock exits when both directions ended.
//!
//! In native mode (`PROTOMCP_CONFORM_MOCK=native` or `--native`) it is the reference testee
//! (the fixture contract, `harness/testees/README.md`), for happy-path runs that need no script.
//!
//! Before it connects to the bridge, the relay appends one line to the file named by
//! `PROTOMCP_CONFORM_MOCK_REPORT` (when set): its pid and the socket it was given, with the
//! socket's and its directory's mode and owner as it found them ([`SocketReport`]). The harness
//! judges from it what it cannot see later (a bridge may remove the socket file once connected):
//! whether the socket is private (BR-SECURITY-01), and where a second connection would go
//! (BR-CONN-05).

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use crate::testee::{self, ENV_SOCKET};

/// Names the harness's control socket.
pub const ENV_CONTROL: &str = "PROTOMCP_CONFORM_CONTROL";
/// `native` makes the mock the reference testee; `relay` (or unset) relays.
pub const ENV_MODE: &str = "PROTOMCP_CONFORM_MOCK";

/// Exit statuses of the relay.
pub mod exit {
    /// Both directions ended normally.
    pub const DONE: i32 = 0;
    /// A socket could not be reached or broke.
    pub const SOCKET: i32 = 1;
    /// `PROTOMCP_SOCKET` or `PROTOMCP_CONFORM_CONTROL` is unset or empty.
    pub const USAGE: i32 = 2;
}

/// What the relay writes on its stdout at start (never MCP: BR-CONN-06).
pub const STDOUT_LINE: &str = "protomcp-conform mock: this line is on the tool process's stdout";
/// What the relay writes on its stderr at start (BR-CONN-07).
pub const STDERR_LINE: &str = "protomcp-conform mock: this line is on the tool process's stderr";

/// How long the mock tries to reach a socket before giving up.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

/// Whether the environment asks for native mode.
pub fn native_from_env() -> bool {
    std::env::var(ENV_MODE).is_ok_and(|m| m == "native")
}

/// Names a file to which the mock appends its pid, so the harness can end it even when the
/// bridge under test lost track of it.
pub const ENV_PIDFILE: &str = "PROTOMCP_CONFORM_PIDFILE";

/// Names a file to which the relay appends a [`SocketReport`] line before it connects.
pub const ENV_REPORT: &str = "PROTOMCP_CONFORM_MOCK_REPORT";

/// Mode (permission bits) and owner of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileMode {
    pub mode: u32,
    pub uid: u32,
}

impl FileMode {
    fn of(path: &std::path::Path) -> Option<FileMode> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| FileMode { mode: m.mode() & 0o7777, uid: m.uid() })
    }

    /// Owned by `uid`, and nobody else (group, others) has any permission.
    fn owner_only(self, uid: u32) -> bool {
        self.uid == uid && self.mode & 0o077 == 0
    }
}

/// What a relay found before connecting: the socket the bridge gave it and its directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SocketReport {
    pub pid: u32,
    /// `PROTOMCP_SOCKET`.
    pub socket: String,
    /// `None`: nothing there (or not readable).
    pub socket_mode: Option<FileMode>,
    pub dir_mode: Option<FileMode>,
}

impl SocketReport {
    fn of(socket: &str) -> SocketReport {
        let path = std::path::Path::new(socket);
        SocketReport {
            pid: std::process::id(),
            socket: socket.to_owned(),
            socket_mode: FileMode::of(path),
            dir_mode: path.parent().and_then(FileMode::of),
        }
    }

    /// BR-SECURITY-01: the socket lives in a directory only `uid` can access (0700), or has mode
    /// 0600 itself (no permission for group or others, in both cases, and owned by `uid`).
    /// `Err` says what is open to whom.
    pub fn private(&self, uid: u32) -> Result<(), SocketNotPrivate> {
        let dir = self.dir_mode.is_some_and(|d| d.owner_only(uid));
        let sock = self.socket_mode.is_some_and(|s| s.owner_only(uid));
        if dir || sock {
            return Ok(());
        }
        let show = |m: Option<FileMode>| match m {
            Some(m) if m.uid == uid => format!("mode {:04o}", m.mode),
            Some(m) => format!("mode {:04o}, owned by uid {} (not {uid})", m.mode, m.uid),
            None => "not found".to_owned(),
        };
        Err(SocketNotPrivate {
            socket: self.socket.clone(),
            socket_mode: show(self.socket_mode),
            dir_mode: show(self.dir_mode),
        })
    }
}

/// A bridge's socket that other users can reach (BR-SECURITY-01): its mode and its directory's,
/// as the mock found them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the socket {socket} ({socket_mode}) is open to other users, and so is its directory ({dir_mode}): expected a 0700 directory or a 0600 socket"
)]
pub struct SocketNotPrivate {
    pub socket: String,
    pub socket_mode: String,
    pub dir_mode: String,
}

/// The reports in `path`, in the order the relays wrote them (lines that do not parse are
/// skipped).
pub fn read_reports(path: &std::path::Path) -> Vec<SocketReport> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn report(socket: &str) {
    if let Some(p) = std::env::var_os(ENV_REPORT) {
        use std::io::Write;
        let line = serde_json::to_string(&SocketReport::of(socket)).unwrap_or_default();
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
            let _ = writeln!(f, "{line}");
        }
    }
}

fn register() {
    if let Some(p) = std::env::var_os(ENV_PIDFILE) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
            let _ = writeln!(f, "{}", std::process::id());
        }
    }
    // Die with the bridge that started us (Linux), so a killed bridge leaves no mock behind.
    crate::os::die_with_parent();
}

/// `PROTOMCP_CONFORM_MOCK` values for start-up failures: exit at once with status 3 without
/// connecting anywhere (BR-CONN-09), or stay alive without ever connecting (BR-CONN-10).
pub const MODE_EXIT_BEFORE_CONNECT: &str = "exit-before-connect";
pub const MODE_NEVER_CONNECT: &str = "never-connect";
/// `PROTOMCP_CONFORM_MOCK` value: relay as usual, but once the relay ends (the harness closed the
/// control connection, or the bridge its socket) close both connections and stay alive until
/// killed: a tool process that closed its connection but keeps running (BR-LIFECYCLE-08).
pub const MODE_LINGER: &str = "linger";
/// `PROTOMCP_CONFORM_MOCK` value for a flooding tool process: the reference testee with
/// `--misbehave flood` (after the handshake, LogMessages without end), so that the bridge floods
/// its host with `notifications/message` (the harness's bounds, [`crate::limits`]).
pub const MODE_FLOOD: &str = "flood";

/// Runs the mock to completion and returns its exit status.
pub fn run_blocking(native: bool) -> i32 {
    register();
    if native {
        return testee::run_blocking(testee::Options::from_env());
    }
    match std::env::var(ENV_MODE).as_deref() {
        Ok(MODE_EXIT_BEFORE_CONNECT) => {
            eprintln!("protomcp-conform mock: {ENV_MODE}={MODE_EXIT_BEFORE_CONNECT}: exiting with status 3");
            return 3;
        }
        Ok(MODE_FLOOD) => {
            let opts = testee::Options { misbehave: Some(testee::Misbehave::Flood), ..testee::Options::from_env() };
            return testee::run_blocking(opts);
        }
        Ok(MODE_NEVER_CONNECT) => {
            eprintln!("protomcp-conform mock: {ENV_MODE}={MODE_NEVER_CONNECT}: waiting to be killed");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        _ => {}
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (Some(bridge), Some(control)) = (var(ENV_SOCKET), var(ENV_CONTROL)) else {
        eprintln!("protomcp-conform mock: {ENV_SOCKET} and {ENV_CONTROL} must both be set");
        return exit::USAGE;
    };
    // BR-CONN-02: the bridge hands over an absolute path. A relative one would resolve against
    // a working directory the bridge does not control, so the mock refuses it outright, after
    // reporting the value, so that the harness names BR-CONN-02 at the first tool-side step.
    if !std::path::Path::new(&bridge).is_absolute() {
        report(&bridge);
        eprintln!("protomcp-conform mock: {ENV_SOCKET}={bridge:?} is not an absolute path (BR-CONN-02)");
        return exit::USAGE;
    }
    // BR-CONN-06 / BR-CONN-07: one line on each output. A bridge that connected the tool
    // process's stdout to its MCP output would show the host a line that is not JSON-RPC (which
    // fails the scenario); the stderr line should reach the bridge's stderr.
    {
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), "{STDOUT_LINE}");
        let _ = std::io::stdout().flush();
        eprintln!("{STDERR_LINE}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("protomcp-conform mock: cannot start the runtime: {e}");
            return exit::SOCKET;
        }
    };
    report(&bridge);
    let code = runtime.block_on(relay(&bridge, &control));
    if std::env::var(ENV_MODE).is_ok_and(|m| m == MODE_LINGER) {
        eprintln!("protomcp-conform mock: {ENV_MODE}={MODE_LINGER}: connection closed, staying alive");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    code
}

async fn connect(path: &str, what: &str) -> Result<UnixStream, i32> {
    match tokio::time::timeout(CONNECT_LIMIT, UnixStream::connect(path)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => {
            eprintln!("protomcp-conform mock: cannot connect to the {what} socket {path}: {e}");
            Err(exit::SOCKET)
        }
        Err(_) => {
            eprintln!("protomcp-conform mock: connecting to the {what} socket {path} timed out");
            Err(exit::SOCKET)
        }
    }
}

/// Connects to the harness first (so a run whose harness is gone ends at once), then to the
/// bridge, and copies both ways until both directions ended.
pub async fn relay(bridge: &str, control: &str) -> i32 {
    let control = match connect(control, "control").await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let bridge = match connect(bridge, "bridge").await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (mut br, mut bw) = bridge.into_split();
    let (mut cr, mut cw) = control.into_split();
    let up = async move {
        let r = tokio::io::copy(&mut br, &mut cw).await;
        let _ = cw.shutdown().await;
        r
    };
    let down = async move {
        let r = tokio::io::copy(&mut cr, &mut bw).await;
        let _ = bw.shutdown().await;
        r
    };
    // Either side closing ends the relay: the harness closing the control connection is the
    // tool process going away, and the bridge closing its socket ends the tool process's work.
    let broke = tokio::select! {
        r = up => r.is_err(),
        r = down => r.is_err(),
    };
    if broke { exit::SOCKET } else { exit::DONE }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(socket: u32, dir: u32) -> SocketReport {
        SocketReport {
            pid: 1,
            socket: "/d/tp.sock".into(),
            socket_mode: Some(FileMode { mode: socket, uid: 7 }),
            dir_mode: Some(FileMode { mode: dir, uid: 7 }),
        }
    }

    #[test]
    fn a_socket_is_private_by_its_own_mode_or_by_its_directory() {
        assert!(report(0o600, 0o1777).private(7).is_ok());
        assert!(report(0o755, 0o700).private(7).is_ok());
        assert!(report(0o700, 0o755).private(7).is_ok());
        let open = report(0o755, 0o1777).private(7).unwrap_err().to_string();
        assert!(open.contains("mode 0755") && open.contains("mode 1777"), "{open}");
        assert!(report(0o620, 0o750).private(7).is_err());
        // Owner-only modes of another user do not count.
        assert!(report(0o600, 0o700).private(8).is_err());
        let gone = SocketReport { socket_mode: None, ..report(0, 0o755) };
        assert!(gone.private(7).unwrap_err().socket_mode.contains("not found"));
    }

    #[test]
    fn the_report_names_the_socket_and_its_directory_as_found() {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let sock = dir.path().join("tp.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o640)).unwrap();
        let r = SocketReport::of(sock.to_str().unwrap());
        assert_eq!(r.socket_mode.map(|m| m.mode), Some(0o640));
        assert_eq!(r.dir_mode.map(|m| m.mode), Some(0o711));
        assert_eq!(r.pid, std::process::id());
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<SocketReport>(&line).unwrap(), r);
    }
}
