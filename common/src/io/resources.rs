//! What a target holds, read from `/proc` (issue 16): the processes of a process group (the
//! testee, or the bridge and the tool processes it started in its group) and, for each, its open
//! file descriptors by kind, its threads and its resident memory. A sample is a snapshot; a
//! series of samples over a repeated call mix is what a leak verdict reads.

use std::path::{Path, PathBuf};

use tokio::time::Instant;

/// One snapshot of a process group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// What a target held when its scenario's connection was made and when its steps were done,
/// and the samples its `soak` steps took in between.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Use {
    pub start: Figures,
    pub end: Figures,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
    /// Figures taken every [`DURING_EVERY`] while the scenario ran (only scenarios that run
    /// longer have any): for a person, never for a verdict (their x axis is time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub during: Vec<Timed>,
}

/// How often a running scenario's target is sampled (see [`Use::during`]).
pub const DURING_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Figures taken `ms` milliseconds after the scenario's start sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Timed {
    pub ms: u64,
    pub figures: Figures,
}

impl Use {
    /// The largest figures of the scenario: at its start, its end, in a soak or while it ran.
    pub fn peak(&self) -> Figures {
        let all = [self.start, self.end]
            .into_iter()
            .chain(self.samples.iter().map(|s| s.figures))
            .chain(self.during.iter().map(|t| t.figures));
        let mut p = Figures::default();
        for f in all {
            p.processes = p.processes.max(f.processes);
            p.threads = p.threads.max(f.threads);
            p.fds_socket = p.fds_socket.max(f.fds_socket);
            p.fds_pipe = p.fds_pipe.max(f.fds_pipe);
            p.fds_file = p.fds_file.max(f.fds_file);
            p.fds_other = p.fds_other.max(f.fds_other);
            p.rss_kib = p.rss_kib.max(f.rss_kib);
        }
        p
    }
}

/// The largest figures at the end of `uses`, one line for a person; `None` for no samples.
pub fn summary<'a>(uses: impl Iterator<Item = &'a Use>) -> Option<String> {
    let mut n = 0;
    let mut max = Figures::default();
    let mut grew = 0;
    let (mut soaks, mut samples) = (0, 0);
    let (mut peak_fds, mut peak_threads, mut peak_rss) = (0, 0, 0);
    for u in uses {
        n += 1;
        let p = u.peak();
        peak_fds = peak_fds.max(p.fds());
        peak_threads = peak_threads.max(p.threads);
        peak_rss = peak_rss.max(p.rss_kib);
        if !u.samples.is_empty() {
            soaks += 1;
            samples += u.samples.len();
        }
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
        let soaked =
            if soaks > 0 { format!("; {soaks} soak{} sampled {samples} times", if soaks == 1 { "" } else { "s" }) } else { String::new() };
        format!(
            "resources, {n} scenarios sampled from /proc: at most {} at a scenario's end; {grew} ended with more fds or processes than they started with{soaked}; at any sample (also every second while one ran) at most {peak_fds} fds, {peak_threads} threads, {:.1} MiB",
            max.describe(),
            peak_rss as f64 / 1024.0
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

/// One sample of a soak: what the target held after `rounds` rounds of the call mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    pub rounds: u64,
    pub figures: Figures,
}

/// A resource a leak verdict watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    Processes,
    Threads,
    FdsSocket,
    FdsPipe,
    FdsFile,
    FdsOther,
    Rss,
}

impl Resource {
    pub const ALL: [Resource; 7] = [
        Resource::Processes,
        Resource::Threads,
        Resource::FdsSocket,
        Resource::FdsPipe,
        Resource::FdsFile,
        Resource::FdsOther,
        Resource::Rss,
    ];

    /// The figure of this resource in `f` (RSS in KiB).
    pub fn of(self, f: &Figures) -> f64 {
        match self {
            Resource::Processes => f64::from(f.processes),
            Resource::Threads => f64::from(f.threads),
            Resource::FdsSocket => f64::from(f.fds_socket),
            Resource::FdsPipe => f64::from(f.fds_pipe),
            Resource::FdsFile => f64::from(f.fds_file),
            Resource::FdsOther => f64::from(f.fds_other),
            Resource::Rss => f.rss_kib as f64,
        }
    }

    /// One unit of it, for a rate: `process`, `thread`, `fd (socket)`, …
    fn unit(self) -> &'static str {
        match self {
            Resource::Processes => "process",
            Resource::Threads => "thread",
            Resource::FdsSocket => "fd (socket)",
            Resource::FdsPipe => "fd (pipe)",
            Resource::FdsFile => "fd (file)",
            Resource::FdsOther => "fd (other)",
            Resource::Rss => "KiB of RSS",
        }
    }

    /// How much it must grow over the samples a verdict reads before that growth can be a leak
    /// (see [`leaks`]); `first` is its figure at the first of those samples.
    pub fn tolerance(self, first: f64) -> f64 {
        match self {
            Resource::Processes => LEAK_MIN_PROCESSES,
            Resource::Threads => LEAK_MIN_THREADS,
            Resource::FdsSocket | Resource::FdsPipe | Resource::FdsFile | Resource::FdsOther => LEAK_MIN_FDS,
            Resource::Rss => LEAK_MIN_RSS_KIB.max(first * LEAK_MIN_RSS_SHARE),
        }
    }
}

/// Growth below these, over the samples after the warm-up, is never a leak: a pool that adds a
/// worker or two, a lazily opened file, a cache. Fds and threads: 4; processes: 2.
pub const LEAK_MIN_FDS: f64 = 4.0;
pub const LEAK_MIN_THREADS: f64 = 4.0;
pub const LEAK_MIN_PROCESSES: f64 = 2.0;
/// Resident memory must grow by at least 16 MiB and by at least a quarter of what the target
/// held at the first sample read: allocators keep freed memory, arenas and heaps grow in steps,
/// a garbage collector runs when it likes.
pub const LEAK_MIN_RSS_KIB: f64 = 16.0 * 1024.0;
pub const LEAK_MIN_RSS_SHARE: f64 = 0.25;
pub use protomcp_scenario::LEAK_MIN_SAMPLES;

/// A resource that grew with the rounds of a soak.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Growth {
    pub resource: Resource,
    /// Least-squares slope: units per round.
    pub per_round: f64,
    /// The figure at the first and the last sample read.
    pub first: f64,
    pub last: f64,
    /// Rounds between the first and the last sample read.
    pub rounds: u64,
}

impl Growth {
    /// The rate for a person, per `unit` (what one round is: `cancelled call`, `round of the
    /// mix (1 echo call, 1 cancelled call)`), `per` units making one round:
    /// `+1 fd (file) per 10 cancelled calls`, `+2.0 threads per echo call`,
    /// `+5.1 KiB of RSS per sideband-sized result`.
    pub fn rate(&self, unit: &str, per: u32) -> String {
        let per_unit = self.per_round / f64::from(per.max(1));
        let what = self.resource.unit();
        if self.resource == Resource::Rss {
            return format!("+{per_unit:.1} {what} per {unit}");
        }
        if per_unit >= 0.95 {
            let n = per_unit;
            let plural = if (n - 1.0).abs() < 0.05 { what.to_owned() } else { plural(what) };
            if (n - n.round()).abs() < 0.05 {
                format!("+{} {plural} per {unit}", n.round())
            } else {
                format!("+{n:.1} {plural} per {unit}")
            }
        } else {
            let every = 1.0 / per_unit;
            format!("+1 {what} per {} {}", every.round(), plural(unit))
        }
    }

    /// The whole finding: `fd (file): +1 fd (file) per cancelled call (12 → 212 over 200 rounds)`.
    pub fn describe(&self, unit: &str, per: u32) -> String {
        format!(
            "{}: {} ({} → {} over {} rounds after the warm-up)",
            self.resource.unit(),
            self.rate(unit, per),
            self.first,
            self.last,
            self.rounds
        )
    }
}

fn plural(unit: &str) -> String {
    // `fd (file)` → `fds (file)`; `cancelled call` → `cancelled calls`; `process` → `processes`.
    let (head, tail) = match unit.find(" (") {
        Some(i) if !unit.starts_with("round") => unit.split_at(i),
        _ => match unit.find(" of ") {
            Some(i) => unit.split_at(i),
            None => (unit, ""),
        },
    };
    let head = if head.ends_with("ss") { format!("{head}es") } else { format!("{head}s") };
    format!("{head}{tail}")
}

/// The least-squares slope of `y` over `x`; `None` when every x is the same.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The resources that grew with the rounds of a soak: over the samples taken at or after
/// `warmup` rounds (at least [`LEAK_MIN_SAMPLES`] of them, else nothing is judged), a resource
/// leaks when all three hold:
///
/// 1. the least-squares slope over those samples, times the rounds they span, is at least the
///    resource's tolerance ([`Resource::tolerance`]: 4 fds of a kind, 4 threads, 2 processes,
///    16 MiB and a quarter of the first figure of RSS);
/// 2. the last sample is above the first by at least that tolerance too;
/// 3. the growth persists: the smallest figure of the last quarter of the samples is above the
///    largest of the first quarter (a burst that is given back is not a leak).
///
/// Counts are exact (a process holds an fd or not), so a leak of one fd per call is found after
/// a handful of calls; the tolerances are for pools, caches and allocators that grow a little
/// and stop.
pub fn leaks(samples: &[Sample], warmup: u64) -> Vec<Growth> {
    let read: Vec<&Sample> = samples.iter().filter(|s| s.rounds >= warmup).collect();
    if read.len() < LEAK_MIN_SAMPLES {
        return Vec::new();
    }
    let (first, last) = (read[0], read[read.len() - 1]);
    let span = last.rounds.saturating_sub(first.rounds);
    if span == 0 {
        return Vec::new();
    }
    let quarter = read.len().div_ceil(4);
    let mut out = Vec::new();
    for r in Resource::ALL {
        let points: Vec<(f64, f64)> = read.iter().map(|s| (s.rounds as f64, r.of(&s.figures))).collect();
        let Some(k) = slope(&points) else { continue };
        let tol = r.tolerance(r.of(&first.figures));
        let grown = r.of(&last.figures) - r.of(&first.figures);
        let early_max = points[..quarter].iter().map(|p| p.1).fold(f64::MIN, f64::max);
        let late_min = points[points.len() - quarter..].iter().map(|p| p.1).fold(f64::MAX, f64::min);
        if k * span as f64 >= tol && grown >= tol && late_min > early_max {
            out.push(Growth {
                resource: r,
                per_round: k,
                first: r.of(&first.figures),
                last: r.of(&last.figures),
                rounds: span,
            });
        }
    }
    out
}

/// Whose figures a run samples: a process group (the testee's, or a bridge's) and the tool
/// processes a bridge started, whose pids the mocks write into `pidfile`.
#[derive(Debug, Clone)]
pub struct Sampler {
    pub pgid: i32,
    pub pidfile: Option<PathBuf>,
}

impl Sampler {
    pub fn sample(&self) -> Option<Figures> {
        let extra: Vec<i32> = self
            .pidfile
            .as_ref()
            .map(|p| {
                std::fs::read_to_string(p).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
            })
            .unwrap_or_default();
        sample(self.pgid, &extra)
    }

    /// The target's own processes: its process group less the tool processes of the pidfile
    /// (a bridge's mocks), for what the target itself holds.
    fn own_pids(&self) -> Vec<i32> {
        let tools: Vec<i32> = self
            .pidfile
            .as_ref()
            .map(|p| {
                std::fs::read_to_string(p).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
            })
            .unwrap_or_default();
        group_pids(self.pgid).into_iter().filter(|p| !tools.contains(p)).collect()
    }

    /// Resets the peak resident memory (VmHWM) of each of the target's own processes to what it
    /// holds now (`5` into `/proc/PID/clear_refs`, Linux 4.0 on) and gives the resident memory
    /// summed, in KiB: the mark [`Sampler::peak_kib`] is measured against.
    pub fn reset_peak(&self) -> Result<u64, String> {
        let pids = self.own_pids();
        if pids.is_empty() {
            return Err("no process of the target runs".into());
        }
        let mut rss = 0;
        for pid in pids {
            let path = format!("/proc/{pid}/clear_refs");
            std::fs::write(&path, "5")
                .map_err(|e| format!("cannot reset the peak memory of pid {pid} ({path}): {e}"))?;
            rss += status_kib(pid, "VmRSS:").unwrap_or(0);
        }
        Ok(rss)
    }

    /// The peak resident memory (VmHWM) of the target's own processes, summed, in KiB; `None`
    /// when none runs.
    pub fn peak_kib(&self) -> Option<u64> {
        let pids = self.own_pids();
        (!pids.is_empty()).then(|| pids.into_iter().filter_map(|p| status_kib(p, "VmHWM:")).sum())
    }
}

/// A `KEY:  N kB` figure of `/proc/PID/status`.
fn status_kib(pid: i32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples taken every [`DURING_EVERY`] while a scenario runs, by a task of their
/// own (see [`Use::during`]); [`During::stop`] ends it and gives them.
pub struct During {
    task: tokio::task::JoinHandle<()>,
    taken: std::sync::Arc<std::sync::Mutex<Vec<Timed>>>,
}

impl During {
    pub fn start(sampler: Sampler) -> During {
        let taken = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let out = taken.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            loop {
                tokio::time::sleep(DURING_EVERY).await;
                let Some(f) = sampler.sample() else { return };
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let mut v = out.lock().unwrap_or_else(|e| e.into_inner());
                // Bounded: an hour of samples at most.
                if v.len() < 3600 {
                    v.push(Timed { ms, figures: f });
                }
            }
        });
        During { task, taken }
    }

    pub fn stop(self) -> Vec<Timed> {
        self.task.abort();
        std::mem::take(&mut *self.taken.lock().unwrap_or_else(|e| e.into_inner()))
    }
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
        crate::os::signal_group(pgid, libc::SIGKILL);
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

    fn series(f: impl Fn(u64) -> Figures, rounds: &[u64]) -> Vec<Sample> {
        rounds.iter().map(|&r| Sample { rounds: r, figures: f(r) }).collect()
    }

    fn base() -> Figures {
        Figures { processes: 1, threads: 4, fds_socket: 2, fds_pipe: 2, fds_file: 1, fds_other: 3, rss_kib: 20_000 }
    }

    #[test]
    fn one_fd_per_ten_rounds_is_a_leak_named_with_its_rate() {
        let rounds: Vec<u64> = (0..=20).map(|i| i * 10).collect();
        let s = series(|r| Figures { fds_file: 1 + (r / 10) as u32, ..base() }, &rounds);
        let found = leaks(&s, 20);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].resource, Resource::FdsFile);
        assert_eq!(found[0].rate("cancelled call", 1), "+1 fd (file) per 10 cancelled calls");
        // Five cancelled calls a round, one fd each: one per call.
        let per_call = Growth { per_round: 5.0, ..found[0] };
        assert_eq!(per_call.rate("cancelled call", 5), "+1 fd (file) per cancelled call");
        assert_eq!(Growth { per_round: 2.0, ..found[0] }.rate("echo call", 1), "+2 fds (file) per echo call");
        assert!(
            found[0].describe("cancelled call", 1).contains("(3 → 21 over 180 rounds"),
            "{}",
            found[0].describe("cancelled call", 1)
        );
    }

    #[test]
    fn flat_figures_noise_and_growth_within_the_warm_up_are_no_leak() {
        let rounds: Vec<u64> = (0..=20).map(|i| i * 500).collect();
        // A pool that grows to 8 threads during the warm-up, then stays; RSS that wobbles by
        // 8 MiB; one socket fd that comes and goes.
        let s = series(
            |r| Figures {
                threads: 4 + (r / 250).min(8) as u32,
                rss_kib: 40_000 + if (r / 500) % 2 == 0 { 0 } else { 8 * 1024 },
                fds_socket: 2 + ((r / 500) % 2) as u32,
                ..base()
            },
            &rounds,
        );
        assert_eq!(leaks(&s, 2000), Vec::new());
        // Too few samples after the warm-up: nothing is judged.
        let steep = series(|r| Figures { fds_pipe: r as u32, ..base() }, &[0, 10, 20, 30]);
        assert_eq!(leaks(&steep, 10), Vec::new());
        assert_eq!(leaks(&steep, 0).len(), 1);
    }

    #[test]
    fn a_burst_that_is_given_back_is_not_a_leak_but_memory_that_keeps_growing_is() {
        let rounds: Vec<u64> = (0..=16).map(|i| i * 100).collect();
        // Threads rise by 10 in the middle and return: the last quarter is not above the first.
        let burst = series(|r| Figures { threads: if (600..=1000).contains(&r) { 14 } else { 4 }, ..base() }, &rounds);
        assert_eq!(leaks(&burst, 0), Vec::new());
        // 64 KiB per round over 1,600 rounds: 100 MiB.
        let mem = series(|r| Figures { rss_kib: 20_000 + 64 * r, ..base() }, &rounds);
        let found = leaks(&mem, 0);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rate("sideband-sized result", 1), "+64.0 KiB of RSS per sideband-sized result");
    }

    #[test]
    fn the_slope_is_least_squares() {
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), Some(2.0));
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 3.0)]), None);
        assert_eq!(slope(&[(0.0, 1.0)]), None);
    }
}
