//! Processes and temp dirs: each testee in its own process group, each scenario in its own
//! private temp dir; a registry of both so that an interrupted run can clean up everything.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::bounded::{KeptBytes, thousands};
use crate::limits;

pub use crate::tmpdir::ENV_TMPDIR;

#[derive(Default)]
struct Registry {
    groups: HashSet<i32>,
    dirs: HashSet<PathBuf>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Registry::default))
}

/// Kills every testee process group still alive and removes every temp dir of this run (for
/// SIGINT). Returns how many groups and dirs it dealt with.
pub fn emergency_cleanup() -> (usize, usize) {
    with_registry(|r| {
        for &g in &r.groups {
            crate::os::signal_group(g, libc::SIGKILL);
        }
        for d in &r.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
        let n = (r.groups.len(), r.dirs.len());
        r.groups.clear();
        r.dirs.clear();
        n
    })
}

/// Registers a process group started elsewhere (a bridge under test) for [`emergency_cleanup`].
pub fn track_group(pgid: i32) {
    with_registry(|r| r.groups.insert(pgid));
}

/// Forgets a group registered with [`track_group`] after it was torn down.
pub fn untrack_group(pgid: i32) {
    with_registry(|r| r.groups.remove(&pgid));
}

/// Resolves when this process gets SIGINT or SIGTERM (never, when the handlers cannot be
/// installed): how the reference bridge and `capture` learn that they are to end.
pub async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! {
                _ = i.recv() => {}
                _ = t.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// Makes this process the reaper of orphaned descendants (Linux), so that leftovers of a testee's
/// group (a grandchild whose parent exited) can be reaped by the runner. Harmless elsewhere.
pub fn become_subreaper() {
    crate::os::become_subreaper();
}

/// A private temp dir (mode 0700), removed on drop.
pub struct ScenarioDir {
    dir: Option<tempfile::TempDir>,
}

impl ScenarioDir {
    pub fn new() -> std::io::Result<ScenarioDir> {
        let root = crate::tmpdir::root();
        let dir = tempfile::Builder::new().prefix("protomcp-conform-").tempdir_in(root)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        with_registry(|r| r.dirs.insert(dir.path().to_owned()));
        Ok(ScenarioDir { dir: Some(dir) })
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until drop").path()
    }
}

impl Drop for ScenarioDir {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            let p = d.path().to_owned();
            let _ = d.close();
            with_registry(|r| r.dirs.remove(&p));
        }
    }
}

/// How a testee ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit status {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s}"),
            (None, None) => f.write_str("ended"),
        }
    }
}

/// A running testee: the leader of its own process group.
pub struct Testee {
    pub pid: i32,
    status: watch::Receiver<Option<ExitInfo>>,
    stderr: StderrTail,
    /// Signals the harness sent (`signal` steps).
    pub sent_signals: Vec<i32>,
}

/// Spawns `argv` in a new process group with stdin at EOF, stdout discarded, stderr kept; in `cwd`
/// when given.
pub fn spawn(argv: &[String], env: &BTreeMap<String, Option<String>>, cwd: Option<&Path>) -> std::io::Result<Testee> {
    spawn_with(argv, env, cwd, [Stdio::null(), Stdio::null(), Stdio::piped()]).map(|(t, _)| t)
}

/// The pipes of a child started by [`spawn_with`] with `Stdio::piped()` for them.
pub struct Pipes {
    pub stdin: Option<tokio::process::ChildStdin>,
    pub stdout: Option<tokio::process::ChildStdout>,
}

/// [`spawn`] with stdin, stdout and stderr as given (a piped stderr is kept as by [`spawn`];
/// piped stdin and stdout are handed back). `capture` uses it for a bridge on stdio.
pub fn spawn_with(
    argv: &[String],
    env: &BTreeMap<String, Option<String>>,
    cwd: Option<&Path>,
    [stdin, stdout, stderr]: [Stdio; 3],
) -> std::io::Result<(Testee, Pipes)> {
    let (prog, args) = argv.split_first().ok_or_else(|| std::io::Error::other("empty testee command"))?;
    let mut cmd = tokio::process::Command::new(prog);
    cmd.args(args).stdin(stdin).stdout(stdout).stderr(stderr).process_group(0);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut child = cmd.spawn()?;
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).ok_or_else(|| std::io::Error::other("no pid"))?;
    with_registry(|r| r.groups.insert(pid));
    let pipes = Pipes { stdin: child.stdin.take(), stdout: child.stdout.take() };
    let stderr = StderrTail::read(child.stderr.take());
    let (tx, status) = watch::channel(None);
    tokio::spawn(async move {
        use std::os::unix::process::ExitStatusExt;
        let info = match child.wait().await {
            Ok(s) => ExitInfo { code: s.code(), signal: s.signal() },
            Err(_) => ExitInfo { code: None, signal: None },
        };
        let _ = tx.send(Some(info));
    });
    Ok((Testee { pid, status, stderr, sent_signals: Vec::new() }, pipes))
}

impl Testee {
    /// The exit, if it has happened.
    pub fn exited(&self) -> Option<ExitInfo> {
        *self.status.borrow()
    }

    /// Waits for the exit, at most `within`.
    pub async fn wait(&mut self, within: Duration) -> Option<ExitInfo> {
        let mut rx = self.status.clone();
        let r = tokio::time::timeout(within, rx.wait_for(|s| s.is_some())).await;
        match r {
            Ok(Ok(s)) => *s,
            _ => None,
        }
    }

    /// Everything kept of stderr so far (waits briefly for the pipe to drain after an exit).
    pub async fn stderr(&self) -> String {
        if self.exited().is_some() {
            self.stderr.drained(Duration::from_millis(500)).await;
        }
        self.stderr.text()
    }

    /// When the testee wrote more to stderr than the harness keeps: the failure naming the flood.
    pub fn stderr_flood(&self) -> Option<String> {
        self.stderr.flood("the tool process")
    }

    /// Sends a signal to the testee process itself.
    pub fn signal(&mut self, sig: i32) {
        self.sent_signals.push(sig);
        crate::os::signal_process(self.pid, sig);
    }

    /// SIGTERM to the whole group, `grace` to exit, then SIGKILL to the whole group; waits until
    /// the leader is reaped and no member of the group is left (reaping orphans when this process
    /// is their subreaper). Returns false if something survived `limit`.
    pub async fn teardown(&mut self, grace: Duration, limit: Duration) -> bool {
        let pgid = self.pid;
        crate::os::signal_group(pgid, libc::SIGTERM);
        let _ = self.wait(grace).await;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            crate::os::signal_group(pgid, libc::SIGKILL);
            // Reap orphans of the group that were reparented to us (not the leader: tokio reaps
            // that one; after it is reaped the pgid names only the leftovers).
            if self.exited().is_some() {
                crate::os::reap_group(pgid);
            }
            let leader_gone = self.exited().is_some();
            let group_gone = !group_alive(pgid);
            if leader_gone && group_gone {
                with_registry(|r| r.groups.remove(&pgid));
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What the harness keeps of a child's stderr, read in the background: the first
/// [`limits::STDERR_HEAD`] and the last [`limits::STDERR_TAIL`] bytes, and a count of the rest.
#[derive(Clone)]
pub struct StderrTail {
    kept: Arc<Mutex<KeptBytes>>,
    done: watch::Receiver<bool>,
}

impl StderrTail {
    /// Starts reading `pipe` until its end (none: nothing to read).
    pub fn read<R: tokio::io::AsyncRead + Unpin + Send + 'static>(pipe: Option<R>) -> StderrTail {
        let kept = Arc::new(Mutex::new(KeptBytes::new(limits::STDERR_HEAD, limits::STDERR_TAIL)));
        let (done_tx, done) = watch::channel(false);
        if let Some(mut pipe) = pipe {
            let buf = kept.clone();
            tokio::spawn(async move {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    buf.lock().unwrap_or_else(|e| e.into_inner()).extend(&chunk[..n]);
                }
                let _ = done_tx.send(true);
            });
        } else {
            let _ = done_tx.send(true);
        }
        StderrTail { kept, done }
    }

    /// Waits until the pipe ended, at most `within`.
    pub async fn drained(&self, within: Duration) {
        let mut rx = self.done.clone();
        let _ = tokio::time::timeout(within, rx.wait_for(|d| *d)).await;
    }

    /// The text kept so far (a line `… N bytes dropped …` where bytes were dropped).
    pub fn text(&self) -> String {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).text()
    }

    /// When more arrived than is kept: the failure message naming the flood of `party`.
    pub fn flood(&self, party: &str) -> Option<String> {
        let k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        (k.dropped() > 0).then(|| {
            format!(
                "flood: {party} wrote {} bytes to stderr in one scenario, more than the harness keeps (the first {} and the last {} bytes): {} bytes dropped",
                thousands(k.total()),
                thousands(limits::STDERR_HEAD as u64),
                thousands(limits::STDERR_TAIL as u64),
                thousands(k.dropped())
            )
        })
    }
}

/// The state letter and process group of `pid`, from `/proc/<pid>/stat` (Linux); `None` when it
/// is gone or cannot be read.
fn stat_of(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
    let mut f = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = f.next()?.chars().next()?;
    let pgrp = f.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

/// A process in this state runs: a zombie (`Z`) or a dead one (`X`) does not.
fn running(state: char) -> bool {
    state != 'Z' && state != 'X'
}

/// Whether process `pid` is running (a zombie is dead, only not yet reaped by its parent).
pub fn process_alive(pid: i32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| running(state))
}

/// Whether any process of group `pgid` is still running (zombies count as gone: they are dead,
/// only not yet reaped by their parent).
pub fn group_alive(pgid: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Ok(dir) = std::fs::read_dir("/proc") else { return crate::os::group_exists(pgid) };
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            if let Some((state, pgrp)) = stat_of(pid)
                && pgrp == pgid
                && running(state)
            {
                return true;
            }
        }
        false
    }
    #[cfg(not(target_os = "linux"))]
    {
        crate::os::group_exists(pgid)
    }
}
