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

fn register() {
    if let Some(p) = std::env::var_os(ENV_PIDFILE) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
            let _ = writeln!(f, "{}", std::process::id());
        }
    }
    // Die with the bridge that started us (Linux), so a killed bridge leaves no mock behind.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG takes an integer argument only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// `PROTOMCP_CONFORM_MOCK` values for start-up failures: exit at once with status 3 without
/// connecting anywhere (BR-CONN-09), or stay alive without ever connecting (BR-CONN-10).
pub const MODE_EXIT_BEFORE_CONNECT: &str = "exit-before-connect";
pub const MODE_NEVER_CONNECT: &str = "never-connect";
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
    // a working directory the bridge does not control, so the mock refuses it outright and every
    // bridge scenario fails at its first tool-side step.
    if !std::path::Path::new(&bridge).is_absolute() {
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
    runtime.block_on(relay(&bridge, &control))
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
