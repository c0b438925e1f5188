//! The operating system calls the harness makes that the standard library does not offer:
//! signals to processes and process groups, reaping a group's orphans, the subreaper and
//! parent-death settings, the user id, socket shutdown and linger, the descriptor limit, and a
//! pipe's hang-up. Each goes through rustix's safe wrappers, so this crate has no `unsafe` (`lib.rs`
//! denies it). Signals are the `libc::SIG*` numbers the callers name.

use std::os::fd::AsFd;

use rustix::process::{Pid, Signal, WaitOptions};

/// `raw` as a process or group id, if it is one: above 0 (rustix's `Pid::from_raw` asserts that
/// in debug builds only, and a negative id names a group, or every process).
fn positive(raw: i32) -> Option<Pid> {
    if raw > 0 { Pid::from_raw(raw) } else { None }
}

/// Sends `sig` to every process of group `pgid`; false when no process received it. A `pgid`
/// of 0 or less is refused (it would name this process's own group, or every process), and so
/// is a signal without a name (real-time signals). A `sig` of 0 only checks.
pub fn signal_group(pgid: i32, sig: i32) -> bool {
    let Some(pgid) = positive(pgid) else { return false };
    if sig == 0 {
        return rustix::process::test_kill_process_group(pgid).is_ok();
    }
    Signal::from_named_raw(sig).is_some_and(|sig| rustix::process::kill_process_group(pgid, sig).is_ok())
}

/// Sends `sig` to process `pid`; false when it did not arrive. A `pid` of 0 or less is refused
/// (0 and negatives name process groups: use [`signal_group`]), and so is a signal without a
/// name. A `sig` of 0 only checks.
pub fn signal_process(pid: i32, sig: i32) -> bool {
    let Some(pid) = positive(pid) else { return false };
    if sig == 0 {
        return rustix::process::test_kill_process(pid).is_ok();
    }
    Signal::from_named_raw(sig).is_some_and(|sig| rustix::process::kill_process(pid, sig).is_ok())
}

/// Whether group `pgid` has a member, zombies included (signal 0 only checks).
pub fn group_exists(pgid: i32) -> bool {
    signal_group(pgid, 0)
}

/// Reaps every member of group `pgid` that has exited and is this process's child (orphans
/// reparented to this process as their subreaper); returns how many were reaped.
pub fn reap_group(pgid: i32) -> usize {
    let Some(pgid) = positive(pgid) else { return 0 };
    let mut n = 0;
    while let Ok(Some(_)) = rustix::process::waitpgid(pgid, WaitOptions::NOHANG) {
        n += 1;
    }
    n
}

/// Reaps process `pid` if it is an exited child of this process; true when it was. A pid that
/// is not our child (ECHILD) or still runs changes nothing.
pub fn reap(pid: i32) -> bool {
    let Some(pid) = positive(pid) else { return false };
    matches!(rustix::process::waitpid(Some(pid), WaitOptions::NOHANG), Ok(Some((p, _))) if p == pid)
}

/// Makes this process the reaper of orphaned descendants (Linux), so that leftovers of a
/// target's group (a grandchild whose parent exited) become its children and can be reaped.
/// Harmless elsewhere.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// This process gets SIGKILL when its parent dies (Linux; nothing elsewhere).
pub fn die_with_parent() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
}

/// The real user id of this process.
pub fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// shutdown(2) of an open socket: `how` is `libc::SHUT_RD`, `SHUT_WR` or `SHUT_RDWR` (anything
/// else is `InvalidInput`).
pub fn shutdown(fd: impl AsFd, how: i32) -> std::io::Result<()> {
    use rustix::net::Shutdown;
    let how = match how {
        libc::SHUT_RD => Shutdown::Read,
        libc::SHUT_WR => Shutdown::Write,
        libc::SHUT_RDWR => Shutdown::Both,
        _ => return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("shutdown how {how}"))),
    };
    Ok(rustix::net::shutdown(fd, how)?)
}

/// SO_LINGER with a zero timeout on an open socket: its close then sends a reset instead of a
/// FIN (an abortive close).
pub fn linger_zero(fd: impl AsFd) -> std::io::Result<()> {
    Ok(rustix::net::sockopt::set_socket_linger(fd, Some(std::time::Duration::ZERO))?)
}

/// The soft limit of open file descriptors of this process; `None` when there is none
/// (`RLIM_INFINITY`).
pub fn open_file_limit() -> Option<usize> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit.current.map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Waits up to `timeout_ms` (negative: without end) for descriptor `fd` to hang up (`POLLHUP`
/// or `POLLERR`: a pipe whose writer is gone), without reading from it. `None` when it did not
/// within the time; else whether nothing is left to read in it (`FIONREAD` of 0).
pub fn hung_up(fd: impl AsFd, timeout_ms: i32) -> Option<bool> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let timeout = u32::try_from(timeout_ms)
        .ok()
        .map(|ms| Timespec { tv_sec: i64::from(ms / 1000), tv_nsec: i64::from(ms % 1000) * 1_000_000 });
    let mut fds = [PollFd::new(&fd, PollFlags::empty())];
    let n = rustix::event::poll(&mut fds, timeout.as_ref()).unwrap_or(0);
    if n == 0 || !fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR) {
        return None;
    }
    Some(rustix::io::ioctl_fionread(&fd).is_ok_and(|pending| pending == 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_to_group_or_process_zero_or_below_are_refused_not_sent_to_everyone() {
        // kill(0, …) would signal our own group and kill(-1, …) every process we may signal.
        assert!(!signal_group(0, 0));
        assert!(!signal_group(-1, 0));
        assert!(!signal_process(0, 0));
        assert!(!signal_process(-1, 0));
        assert_eq!(reap_group(0), 0);
    }

    #[test]
    fn a_child_in_its_own_group_is_signalled_reaped_and_gone() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pgid = child.id() as i32;
        assert!(group_exists(pgid));
        assert!(signal_group(pgid, libc::SIGKILL));
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!group_exists(pgid));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let real = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().next());
        assert_eq!(real, Some(uid().to_string().as_str()));
        // The soft limit as the kernel shows it: a number, or "unlimited".
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let soft =
            limits.lines().find_map(|l| l.strip_prefix("Max open files")).and_then(|l| l.split_whitespace().next());
        assert_eq!(open_file_limit().map(|n| n.to_string()).as_deref().unwrap_or("unlimited"), soft.unwrap());
    }

    #[test]
    fn a_pipe_hangs_up_when_its_writer_is_gone_and_says_whether_bytes_are_left() {
        use std::io::Write;
        let (r, mut w) = std::io::pipe().unwrap();
        assert_eq!(super::hung_up(&r, 50), None, "the writer is still open");
        w.write_all(b"x").unwrap();
        drop(w);
        assert_eq!(super::hung_up(&r, 50), Some(false), "a byte is left to read");
        let (r, w) = std::io::pipe().unwrap();
        drop(w);
        assert_eq!(super::hung_up(&r, 50), Some(true));
    }
}
