//! Shared by the CLI integration tests: a sandboxed temp root for the runner and the checks that
//! nothing (process or temp dir) survives a run.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

/// A private temp root for the runner's scenario dirs; every testee inherits its path, which
/// is how leftover processes are found.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox { dir: tempfile::tempdir().unwrap() }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    pub fn cmd(&self) -> Command {
        std::fs::create_dir_all(self.root()).unwrap();
        let mut c = Command::new(EXE);
        c.env("PROTOMCP_CONFORM_TMPDIR", self.root()).stdin(Stdio::null());
        c
    }

    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Processes (other than zombies) whose environment names this sandbox's temp root.
    pub fn leftovers(&self) -> Vec<String> {
        let needle = format!("PROTOMCP_CONFORM_TMPDIR={}", self.root().display());
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.parse::<u32>().is_err() {
                continue;
            }
            let Ok(env) = std::fs::read(e.path().join("environ")) else { continue };
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()).unwrap_or("");
            if state != "Z" && env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                found
                    .push(format!("{name}: {}", std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default()));
            }
        }
        found
    }

    pub fn temp_dirs_left(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.root()).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
    }

    pub fn assert_clean(&self) {
        // Leftovers get a moment to be reaped by whoever their parent is now.
        let deadline = Instant::now() + Duration::from_secs(3);
        while !self.leftovers().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(self.leftovers(), Vec::<String>::new(), "processes left behind");
        assert_eq!(self.temp_dirs_left(), Vec::<PathBuf>::new(), "temp dirs left behind");
    }
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A run's output for an assertion message: what went wrong first (the result lines that are not
/// PASS, SKIP or XFAIL, and the detail blocks), then stdout and stderr whole. A CI log that keeps
/// only part of a long message then still shows the failure.
pub fn text(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let mut problems = String::new();
    let mut in_detail = false;
    for line in stdout.lines() {
        if line.starts_with("── ") {
            in_detail = true;
        } else if ["OK: ", "FAILED: ", "ERROR: "].iter().any(|p| line.starts_with(p)) {
            in_detail = false;
        }
        let bad = ["FAIL", "WARN ", "ERROR", "XPASS "].iter().any(|p| line.starts_with(p));
        if bad || in_detail {
            problems.push_str(line);
            problems.push('\n');
        }
    }
    let head = if problems.is_empty() { String::new() } else { format!("problems first:\n{problems}\n") };
    format!("{head}stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&o.stderr))
}

/// `--scenarios DIR` for every directory of the bridge catalogue but `soak/` (the whole-catalogue
/// tests leave the soaks to tests/testsuite/soak.rs: they take about a minute).
pub fn bridge_catalogue_without_soaks() -> Vec<std::ffi::OsString> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("scenarios/bridge"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with("soak"))
        .collect();
    dirs.sort();
    assert!(dirs.len() > 10, "{dirs:?}");
    dirs.into_iter().flat_map(|d| ["--scenarios".into(), d.into_os_string()]).collect()
}

/// A free TCP port on the loopback interface (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port()
}

/// Returns once something accepts connections on `addr`; fails the test after `within`.
pub async fn wait_listening(addr: std::net::SocketAddr, within: Duration) {
    let deadline = Instant::now() + within;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {addr} after {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A run of the testee that answers under the wrong request id (`testee --misbehave wrong-rid`:
/// FAILs and WARNs beside PASSes) on the scenarios the `--only` globs select, with `args` added
/// (report flags) and its JSON report read back: (the run, the report).
pub fn wrong_rid_run(sb: &Sandbox, only: &[&str], args: &[&std::ffi::OsStr]) -> (Output, serde_json::Value) {
    let json = sb.dir.path().join("wrong-rid-report.json");
    let mut c = sb.cmd();
    c.args(["--testee", &format!("{EXE} testee --misbehave wrong-rid")]);
    for g in only {
        c.args(["--only", g]);
    }
    let o = c.args(args).arg("--json").arg(&json).output().unwrap();
    let report = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{}: {e}\n{}", json.display(), text(&o)));
    (o, serde_json::from_str(&report).unwrap())
}
