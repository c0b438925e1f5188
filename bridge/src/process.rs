//! The tool process and its socket: listen first, then start the process with
//! `PROTOMCP_SOCKET` (BR-CONN-01/02), accept exactly one connection from the same user
//! (BR-CONN-05, BR-SECURITY-02), notice an early exit (BR-CONN-09), end the process and its
//! group, remove the socket (BR-LIFECYCLE-11).

use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::process::{Child, Command};

use super::error::AcceptError;
use protomcp_proto::fault::{self, Fault};
use protomcp_proto::spec::ENV_SOCKET;

pub struct ToolProcess {
    child: Child,
    pgid: Option<i32>,
    socket: PathBuf,
    /// The private directory holding the socket, removed with it.
    _dir: Option<tempfile::TempDir>,
    listener: Option<UnixListener>,
    exit: Option<ExitStatus>,
}

impl ToolProcess {
    /// Listens on the socket, then starts `argv` with `PROTOMCP_SOCKET` set. The process's stdin
    /// is empty and its stdout goes to the bridge's stderr, never to the MCP channel (BR-CONN-06);
    /// its stderr passes through (BR-CONN-07).
    pub fn spawn(argv: &[String], socket: Option<&Path>) -> std::io::Result<ToolProcess> {
        let (dir, path) = match socket {
            Some(p) => (None, std::path::absolute(p)?),
            None => {
                let base = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
                // Only our user may enter the directory (BR-SECURITY-01): tempfile's default
                // is 0777 less the umask, usually 0755.
                let dir = tempfile::Builder::new()
                    .prefix("pmc-bridge-")
                    .permissions(std::fs::Permissions::from_mode(if fault::on(Fault::BrSecuritySocketOpen) {
                        0o755
                    } else {
                        0o700
                    }))
                    .tempdir_in(&base)?;
                let path = std::path::absolute(dir.path().join("tp.sock"))?;
                (Some(dir), path)
            }
        };
        // BR-CONN-04: a stale file does not block startup.
        if !fault::on(Fault::BrConnStaleSocketKept) {
            let _ = std::fs::remove_file(&path);
        }
        let listener = UnixListener::bind(&path)?;
        // The socket itself is ours alone too, also where `--socket` put it (BR-SECURITY-01).
        if !fault::on(Fault::BrSecuritySocketOpen) {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        }
        let (program, args) = argv.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
        let stdout = std::io::stderr().as_fd().try_clone_to_owned()?;
        let mut cmd = Command::new(program);
        if fault::on(Fault::BrConnEnvCleared) {
            cmd.env_clear();
        }
        let announced = if fault::on(Fault::BrConnSocketRelative) { relative_to_cwd(&path) } else { path.clone() };
        cmd.args(args)
            .env(ENV_SOCKET, &announced)
            .stdin(Stdio::null())
            .stdout(if fault::on(Fault::BrConnStdoutInherited) { Stdio::inherit() } else { Stdio::from(stdout) })
            .stderr(if fault::on(Fault::BrConnStderrDropped) { Stdio::null() } else { Stdio::inherit() })
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd.spawn()?;
        let pgid = child.id().map(|p| p as i32);
        Ok(ToolProcess { child, pgid, socket: path, _dir: dir, listener: Some(listener), exit: None })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Accepts the one connection within `within`; fails at once when the process exits first.
    pub async fn accept(&mut self, within: Duration) -> Result<UnixStream, AcceptError> {
        let listener = self.listener.take().ok_or(AcceptError::AlreadyAccepted)?;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            tokio::select! {
                r = listener.accept() => {
                    let (stream, _) = r.map_err(AcceptError::Io)?;
                    // BR-SECURITY-02: only a peer of our own user speaks for the tool process.
                    let uid = crate::os::uid();
                    match stream.peer_cred() {
                        Ok(c) if c.uid() == uid => {
                            if fault::on(Fault::BrConnListenerKept) {
                                self.listener = Some(listener);
                                return Ok(stream);
                            }
                            // BR-CONN-05: later connection attempts find no socket.
                            if !fault::on(Fault::BrLifecycleSocketLeft) {
                                let _ = std::fs::remove_file(&self.socket);
                            }
                            return Ok(stream);
                        }
                        _ => continue,
                    }
                }
                status = self.child.wait(), if !fault::on(Fault::BrConnEarlyExitUnnoticed) => {
                    let status = status.map_err(AcceptError::Io)?;
                    self.exit = Some(status);
                    return Err(AcceptError::Exited(status));
                }
                _ = tokio::time::sleep_until(deadline), if !fault::on(Fault::BrConnAcceptUnbounded) => {
                    return Err(AcceptError::TimedOut(within));
                }
            }
        }
    }

    /// The exit status when the process has already exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Waits up to `within` for the process to leave on its own; whether it did.
    pub async fn wait_exit(&mut self, within: Duration) -> bool {
        if self.exit_status().is_some() {
            return true;
        }
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(s)) => {
                self.exit = Some(s);
                true
            }
            _ => false,
        }
    }

    /// Ends the process: SIGTERM to its group, SIGKILL after 2 s; reaps it and removes the
    /// socket file.
    pub async fn terminate(&mut self) {
        if self.exit_status().is_none() {
            if let Some(g) = self.pgid {
                crate::os::signal_group(g, libc::SIGTERM);
            }
            match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
                Ok(Ok(s)) => self.exit = Some(s),
                _ => {
                    if let Some(g) = self.pgid {
                        crate::os::signal_group(g, libc::SIGKILL);
                    }
                    let _ = self.child.kill().await;
                    self.exit = self.child.try_wait().ok().flatten();
                }
            }
        } else if let Some(g) = self.pgid {
            // Leftovers of the group (BR-LIFECYCLE-09).
            crate::os::signal_group(g, libc::SIGKILL);
        }
        if !fault::on(Fault::BrLifecycleSocketLeft) {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        if !fault::on(Fault::BrLifecycleSocketLeft) {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// `path` relative to the working directory (`../../tmp/…`): what br.conn.socket-relative
/// announces instead of the absolute path (BR-CONN-02).
fn relative_to_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut rel = PathBuf::new();
    for _ in cwd.components().skip(1) {
        rel.push("..");
    }
    rel.push(path.strip_prefix("/").unwrap_or(path));
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BR-SECURITY-01: the socket's own directory is 0700 and the socket 0600, whatever the umask.
    #[tokio::test]
    async fn socket_and_its_directory_are_private() {
        let mut tp = ToolProcess::spawn(&["sleep".into(), "5".into()], None).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(tp.socket.parent().unwrap()), 0o700);
        assert_eq!(mode(&tp.socket), 0o600);
        tp.terminate().await;
    }
}
