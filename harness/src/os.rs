//! The operating system calls the harness makes through libc, each behind a safe function: the
//! only `unsafe` of this crate (`lib.rs` denies it everywhere else). Signals to processes and
//! process groups, reaping a group's orphans, the subreaper and parent-death settings, the user
//! id, socket shutdown and linger, the descriptor limit, and a pipe's hang-up.

#![allow(unsafe_code)]

use std::os::fd::RawFd;

/// Sends `sig` to every process of group `pgid`; false when no process received it. A `pgid`
/// of 0 or less is refused (it would name this process's own group, or every process).
pub fn signal_group(pgid: i32, sig: i32) -> bool {
    // SAFETY: killpg takes integers only and has no memory-safety preconditions.
    pgid > 0 && unsafe { libc::killpg(pgid, sig) } == 0
}

/// Sends `sig` to process `pid`; false when it did not arrive. A `pid` of 0 or less is refused
/// (0 and negatives name process groups: use [`signal_group`]).
pub fn signal_process(pid: i32, sig: i32) -> bool {
    // SAFETY: kill takes integers only and has no memory-safety preconditions.
    pid > 0 && unsafe { libc::kill(pid, sig) } == 0
}

/// Whether group `pgid` has a member, zombies included (signal 0 only checks).
pub fn group_exists(pgid: i32) -> bool {
    signal_group(pgid, 0)
}

/// Reaps every member of group `pgid` that has exited and is this process's child (orphans
/// reparented to this process as their subreaper); returns how many were reaped.
pub fn reap_group(pgid: i32) -> usize {
    if pgid <= 0 {
        return 0;
    }
    let mut n = 0;
    let mut status = 0;
    // SAFETY: waitpid writes the status into the integer we pass; WNOHANG never blocks.
    while unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) } > 0 {
        n += 1;
    }
    n
}

/// Reaps process `pid` if it is an exited child of this process; true when it was. A pid that
/// is not our child (ECHILD) or still runs changes nothing.
pub fn reap(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid writes the status into the integer we pass; WNOHANG never blocks.
    pid > 0 && unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid
}

/// Makes this process the reaper of orphaned descendants (Linux), so that leftovers of a
/// target's group (a grandchild whose parent exited) become its children and can be reaped.
/// Harmless elsewhere.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// This process gets SIGKILL when its parent dies (Linux; nothing elsewhere).
pub fn die_with_parent() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG takes integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// The real user id of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory of ours.
    unsafe { libc::getuid() }
}

/// shutdown(2) of an open socket: `how` is `libc::SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`. The caller
/// keeps owning `fd`.
pub fn shutdown(fd: RawFd, how: i32) -> std::io::Result<()> {
    // SAFETY: shutdown takes integers only; on a descriptor that is not a socket it fails.
    match unsafe { libc::shutdown(fd, how) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// SO_LINGER with a zero timeout on an open socket: its close then sends a reset instead of a
/// FIN (an abortive close). The caller keeps owning `fd`.
pub fn linger_zero(fd: RawFd) -> std::io::Result<()> {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt reads `size_of::<linger>()` bytes from a valid `linger` on our stack.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// The soft limit of open file descriptors of this process; `None` when it cannot be read.
pub fn open_file_limit() -> Option<usize> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0)
        .then(|| usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX))
}

/// Waits up to `timeout_ms` for descriptor `fd` to hang up (`POLLHUP` or `POLLERR`: a pipe whose
/// writer is gone), without reading from it. `None` when it did not within the time; else
/// whether nothing is left to read in it (`FIONREAD` of 0).
pub fn hung_up(fd: RawFd, timeout_ms: i32) -> Option<bool> {
    let mut p = libc::pollfd { fd, events: 0, revents: 0 };
    // SAFETY: one valid pollfd, for the length given.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n <= 0 || p.revents & (libc::POLLHUP | libc::POLLERR) == 0 {
        return None;
    }
    let mut pending: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer given, which outlives the call.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut pending) };
    Some(r == 0 && pending == 0)
}

/// Lets any other runnable thread of this CPU run before this one goes on (`sched_yield`).
pub fn yield_cpu() {
    // SAFETY: no arguments; its only failure mode is documented as none on Linux.
    unsafe { libc::sched_yield() };
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
        assert!(open_file_limit().is_some_and(|n| n > 0));
    }

    #[test]
    fn a_pipe_hangs_up_when_its_writer_is_gone_and_says_whether_bytes_are_left() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let (r, mut w) = std::io::pipe().unwrap();
        assert_eq!(super::hung_up(r.as_raw_fd(), 50), None, "the writer is still open");
        w.write_all(b"x").unwrap();
        drop(w);
        assert_eq!(super::hung_up(r.as_raw_fd(), 50), Some(false), "a byte is left to read");
        let (r, w) = std::io::pipe().unwrap();
        drop(w);
        assert_eq!(super::hung_up(r.as_raw_fd(), 50), Some(true));
    }
}
