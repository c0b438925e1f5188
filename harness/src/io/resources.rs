//! What a target holds, read from `/proc` (issue 16): the processes of a process group (the
//! testee, or the bridge and the tool processes it started in its group) and, for each, its open
//! file descriptors by kind, its threads and its resident memory. A sample is a snapshot; a
//! series of samples over a repeated call mix is what a leak verdict reads.

use std::path::Path;

/// One snapshot of a process group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Figures {
    /// Processes in the group (the leader and the children it started there).
    pub processes: u32,
    pub threads: u32,
    /// Open file descriptors: sockets, pipes, regular files and everything else (anon inodes,
    /// devices, ...).
    pub fds_socket: u32,
    pub fds_pipe: u32,
    pub fds_file: u32,
    pub fds_other: u32,
    /// Resident memory in KiB (VmRSS, summed).
    pub rss_kib: u64,
}

impl Figures {
    pub fn fds(&self) -> u32 {
        self.fds_socket + self.fds_pipe + self.fds_file + self.fds_other
    }

    /// One line for a person: `2 processes, 9 threads, 14 fds (3 sockets, 4 pipes, 5 files, 2 other), 21.3 MiB`.
    pub fn describe(&self) -> String {
        format!(
            "{} process{}, {} threads, {} fds ({} sockets, {} pipes, {} files, {} other), {:.1} MiB",
            self.processes,
            if self.processes == 1 { "" } else { "es" },
            self.threads,
            self.fds(),
            self.fds_socket,
            self.fds_pipe,
            self.fds_file,
            self.fds_other,
            self.rss_kib as f64 / 1024.0
        )
    }
}

/// What a target held when its scenario's connection was made and when its steps were done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Use {
    pub start: Figures,
    pub end: Figures,
}

/// The largest figures at the end of `uses`, one line for a person; `None` for no samples.
pub fn summary<'a>(uses: impl Iterator<Item = &'a Use>) -> Option<String> {
    let mut n = 0;
    let mut max = Figures::default();
    let mut grew = 0;
    for u in uses {
        n += 1;
        max.processes = max.processes.max(u.end.processes);
        max.threads = max.threads.max(u.end.threads);
        max.fds_socket = max.fds_socket.max(u.end.fds_socket);
        max.fds_pipe = max.fds_pipe.max(u.end.fds_pipe);
        max.fds_file = max.fds_file.max(u.end.fds_file);
        max.fds_other = max.fds_other.max(u.end.fds_other);
        max.rss_kib = max.rss_kib.max(u.end.rss_kib);
        if u.end.fds() > u.start.fds() || u.end.processes > u.start.processes {
            grew += 1;
        }
    }
    (n > 0).then(|| {
        format!(
            "resources, {n} scenarios sampled from /proc: at most {} at a scenario's end; {grew} ended with more fds or processes than they started with",
            max.describe()
        )
    })
}

/// The pids whose process group is `pgid` (scanning `/proc/*/stat`).
pub fn group_pids(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if stat_pgrp(pid) == Some(pgid) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// The process group of `pid` (field 5 of `/proc/PID/stat`), `None` for a zombie or a process
/// that is gone.
fn stat_pgrp(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: fields after its `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let _ppid = fields.next()?;
    fields.next()?.parse().ok()
}

/// Adds what process `pid` holds to `f` (a process that ended meanwhile adds nothing).
fn add_process(pid: i32, f: &mut Figures) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return };
    f.processes += 1;
    for line in status.lines() {
        let value = |l: &str| l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if line.starts_with("Threads:") {
            f.threads += value(line) as u32;
        } else if line.starts_with("VmRSS:") {
            f.rss_kib += value(line);
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return };
    for fd in fds.flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else { continue };
        classify(&target, f);
    }
}

fn classify(target: &Path, f: &mut Figures) {
    let t = target.to_string_lossy();
    if t.starts_with("socket:") {
        f.fds_socket += 1;
    } else if t.starts_with("pipe:") {
        f.fds_pipe += 1;
    } else if t.starts_with('/') && !t.starts_with("/dev/") {
        f.fds_file += 1;
    } else {
        f.fds_other += 1;
    }
}

/// A snapshot of process group `pgid` and of the further processes `extra` (tool processes a
/// bridge started in groups of their own). `None` when nothing of it runs.
pub fn sample(pgid: i32, extra: &[i32]) -> Option<Figures> {
    let mut pids = group_pids(pgid);
    for &p in extra {
        if !pids.contains(&p) && stat_pgrp(p).is_some() {
            pids.push(p);
        }
    }
    let mut f = Figures::default();
    for pid in pids {
        add_process(pid, &mut f);
    }
    (f.processes > 0).then_some(f)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn a_group_with_a_child_counts_both_processes_and_their_pipes_and_files() {
        // A shell in a group of its own that starts a child in it and holds a file and a pipe.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("held");
        std::fs::write(&file, b"x").unwrap();
        let script = format!("exec 7<'{}'; sleep 30 | sleep 30", file.display());
        let mut child = Command::new("/bin/sh").arg("-c").arg(&script).process_group(0).spawn().unwrap();
        let pgid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let f = loop {
            let f = sample(pgid, &[]).unwrap_or_default();
            if f.processes >= 3 || std::time::Instant::now() > deadline {
                break f;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        let _ = child.wait();
        assert_eq!(f.processes, 3, "{f:?}");
        assert!(f.threads >= 3, "{f:?}");
        assert!(f.fds_pipe >= 2, "the two ends of the pipe: {f:?}");
        assert!(f.fds_file >= 1, "the held file: {f:?}");
        assert!(f.rss_kib > 0, "{f:?}");
        assert!(f.describe().starts_with("3 processes"), "{}", f.describe());
        // The children get their SIGKILL asynchronously: wait for the group to be gone.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while sample(pgid, &[]).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(sample(pgid, &[]), None, "nothing runs in the group any more");
    }

    #[test]
    fn fd_targets_are_sorted_by_kind() {
        let mut f = Figures::default();
        for t in ["socket:[123]", "pipe:[9]", "/tmp/x", "/dev/null", "anon_inode:[eventfd]"] {
            classify(Path::new(t), &mut f);
        }
        assert_eq!((f.fds_socket, f.fds_pipe, f.fds_file, f.fds_other), (1, 1, 1, 2));
    }
}
