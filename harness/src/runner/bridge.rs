//! Runs one `role: bridge` scenario against a bridge under test (`--bridge 'CMD …'`).
//!
//! Per scenario: a private temp dir holding the harness's control socket, the mock's launcher
//! script and the bridge's socket path; the bridge started over stdio by the host driver
//! ([`crate::host::StdioHost`]) in its own process group, with `PROTOMCP_CONFORM_CONTROL` in its
//! environment (its tool process, the mock, inherits it). Host steps talk to the bridge's stdin
//! and stdout; tool-side steps run on the mock's control connection through [`Exec`], exactly as
//! in tool-process scenarios. Teardown: stdin closed, a grace period, SIGKILL to the bridge's
//! group and to every mock that registered its pid, and a check that none of them survived.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use protomcp_proto::dynamic::arm_of;
use serde_json::{Value, json};
use tokio::net::UnixListener;
use tokio::time::Instant;

use super::exec::{Exec, Proc, StepError};
use super::process::{self, ScenarioDir};
use super::{
    CaseResult, Config, DEFAULT_SCENARIO_TIMEOUT, GRACE, KILL_LIMIT, Outcome, STDERR_TAIL, Target, tail_lines,
};
use crate::host::StdioHost;
use crate::mock::{ENV_CONTROL, ENV_PIDFILE};
use crate::scenario::template::substitute;
use crate::scenario::{Action, HostLine, Scenario, ToolHandshake, match_value};
use crate::transcript::{Dir, Item, compact};

/// The placeholders of a `--bridge` command line, each replaced inside any argument.
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("{mock}", "absolute path of an executable (no extension) that runs `protomcp-conform mock`"),
    ("{socket}", "absolute path for the bridge's tool-process socket, inside the scenario's temp dir"),
    ("{dir}", "the scenario's private temp dir"),
];

/// Replaces the placeholders in every argument.
pub fn expand(template: &[String], mock: &Path, socket: &Path, dir: &Path) -> Vec<String> {
    template
        .iter()
        .map(|a| {
            a.replace("{mock}", &mock.display().to_string())
                .replace("{socket}", &socket.display().to_string())
                .replace("{dir}", &dir.display().to_string())
        })
        .collect()
}

fn step_err(e: StepError, at: &str, kw: &str) -> StepError {
    match e {
        StepError::Fail(m) => StepError::Fail(format!("{at}: {kw}: {m}")),
        StepError::Error(m) => StepError::Error(format!("{at}: {kw}: {m}")),
    }
}

struct Run<'a> {
    ex: Exec<'a>,
    host: StdioHost,
    /// Index of the next bridge message no step has looked at.
    cursor: usize,
    sent_signals: Vec<i32>,
    stderr_path: std::path::PathBuf,
}

impl Run<'_> {
    async fn steps(&mut self) -> Result<(), StepError> {
        let s = self.ex.scenario;
        for (i, step) in s.steps.iter().enumerate() {
            let at = s.at(step.loc).to_string();
            let kw = step.keyword();
            self.ex.transcript.push(Item::Step { index: i + 1, keyword: kw.to_owned(), line: step.loc.line });
            if step.action.needs_connection() {
                self.ex.ensure_conn().await.map_err(|e| step_err(e, &at, kw))?;
            }
            self.step(&step.action).await.map_err(|e| step_err(e, &at, kw))?;
        }
        Ok(())
    }

    fn stdout_clean(&self) -> Result<(), StepError> {
        match self.host.garbage().first() {
            Some(line) => {
                Err(StepError::Fail(format!("the bridge wrote a line that is not JSON-RPC on stdout: {line:?}")))
            }
            None => Ok(()),
        }
    }

    /// The next bridge message (skipping methods in `ignore`) before `deadline`.
    async fn next_host(&mut self, deadline: Instant, ignore: &[String]) -> Result<Option<Value>, StepError> {
        loop {
            self.stdout_clean()?;
            let msgs = self.host.messages();
            if let Some(m) = msgs.get(self.cursor).cloned() {
                self.cursor += 1;
                let ignored = m.get("method").and_then(Value::as_str).is_some_and(|x| ignore.iter().any(|i| i == x));
                if ignored {
                    self.ex.transcript.push(Item::Host { dir: Dir::FromTestee, message: Some(m), raw: None });
                    continue;
                }
                self.ex.transcript.push(Item::Host { dir: Dir::FromTestee, message: Some(m.clone()), raw: None });
                return Ok(Some(m));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn step(&mut self, action: &Action) -> Result<(), StepError> {
        match action {
            Action::HostSend(HostLine::Json(v)) => {
                let v = substitute(v, &self.ex.caps).map_err(|e| StepError::Error(e.to_string()))?;
                self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: Some(v.clone()), raw: None });
                self.host.send_line(&v.to_string());
                Ok(())
            }
            Action::HostSend(HostLine::Raw(line)) => {
                self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: None, raw: Some(line.clone()) });
                self.host.send_line(line);
                Ok(())
            }
            Action::HostExpect(e) => {
                let within = self.ex.t(e.within);
                match self.next_host(Instant::now() + within, &e.ignore).await? {
                    None => Err(StepError::Fail(format!("no message from the bridge within {within:?}"))),
                    Some(m) => match_value(&e.pattern, Some(&m), &mut self.ex.caps)
                        .map_err(|x| StepError::Fail(format!("{x}\n  arrived: {}", compact(&m)))),
                }
            }
            Action::HostExpectNothing(e) => {
                let d = self.ex.t(e.duration);
                match self.next_host(Instant::now() + d, &e.ignore).await? {
                    None => Ok(()),
                    Some(m) => Err(StepError::Fail(format!("expected no message for {d:?}, got {}", compact(&m)))),
                }
            }
            Action::HostClose => {
                self.ex.transcript.push(Item::Host {
                    dir: Dir::ToTestee,
                    message: None,
                    raw: Some("<end of file>".into()),
                });
                let _ = self.host.close(Duration::ZERO).await;
                Ok(())
            }
            Action::ToolHandshake(h) => self.tool_handshake(h).await,
            Action::Signal(sig) => {
                let n = match sig {
                    crate::scenario::Signal::Term => libc::SIGTERM,
                    crate::scenario::Signal::Int => libc::SIGINT,
                    crate::scenario::Signal::Hup => libc::SIGHUP,
                    crate::scenario::Signal::Kill => libc::SIGKILL,
                };
                self.sent_signals.push(n);
                self.host.signal(n);
                self.ex.transcript.push(Item::Signal { name: format!("{sig:?}") });
                Ok(())
            }
            Action::ExpectExit(x) => {
                use std::os::unix::process::ExitStatusExt;
                let within = self.ex.t(x.within);
                let Some(st) = self.host.wait_exit(within).await else {
                    return Err(StepError::Fail(format!("the bridge was still running after {within:?}")));
                };
                self.ex.transcript.push(Item::Exit { status: format!("{st}") });
                let status = match (st.code(), st.signal()) {
                    (Some(c), _) => Some(c),
                    (None, Some(s)) if self.sent_signals.contains(&s) => Some(128 + s),
                    _ => None,
                };
                if !x.code.accepts(status) {
                    return Err(StepError::Fail(format!("the bridge ended with {st}, expected {:?}", x.code)));
                }
                if let Some(p) = &x.stderr {
                    let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
                    match_value(p, Some(&Value::String(text)), &mut self.ex.caps)
                        .map_err(|m| StepError::Fail(format!("stderr: {m}")))?;
                }
                Ok(())
            }
            Action::Close(_) => {
                // The tool process goes away: a later tool-side step waits for the next one.
                self.ex.step(action).await?;
                self.ex.forget_conn();
                Ok(())
            }
            _ => self.ex.step(action).await,
        }
    }

    /// The tool side of the startup (see [`ToolHandshake`]).
    async fn tool_handshake(&mut self, h: &ToolHandshake) -> Result<(), StepError> {
        let within = self.ex.t(h.within);
        let deadline = Instant::now() + within;
        let v = self.ex.next_required(deadline, within, &[]).await?;
        if arm_of(&v) != Some("list_tools") {
            return Err(StepError::Fail(format!("expected the ListToolsRequest first, got {}", compact(&v))));
        }
        let rid = v.get("request_id").cloned().unwrap_or(json!(""));
        self.ex.send_value(json!({"request_id": rid, "tool_list": {"tools": h.tools}})).await?;
        if h.marker {
            self.ex.send_value(json!({"request_id": "", "reload_response": {"success": true}})).await?;
        }
        let quiet = self.ex.t(crate::scenario::HANDSHAKE_QUIET);
        // Without the marker the bridge first waits HANDSHAKE_QUIET itself.
        let mut first = !h.marker;
        let mut answered = 0;
        while answered < 3 {
            let wait = Instant::now() + if first { quiet * 3 } else { quiet };
            first = false;
            let v = match self.ex.next_required(wait, quiet, &[]).await {
                Ok(v) => v,
                Err(StepError::Fail(_)) => break,
                Err(e) => return Err(e),
            };
            let rid = v.get("request_id").cloned().unwrap_or(json!(""));
            let reply = match arm_of(&v) {
                Some("list_resources_request") => json!({"resource_list_response": {"resources": h.resources}}),
                Some("list_resource_templates_request") => {
                    json!({"resource_template_list_response": {"templates": h.resource_templates}})
                }
                Some("list_prompts_request") => json!({"prompt_list_response": {"prompts": h.prompts}}),
                _ => {
                    return Err(StepError::Fail(format!(
                        "expected the list pulls after the handshake, got {}",
                        compact(&v)
                    )));
                }
            };
            let mut reply = reply;
            reply["request_id"] = rid;
            self.ex.send_value(reply).await?;
            answered += 1;
        }
        Ok(())
    }
}

/// Runs `s` against the bridge command `template` (placeholders not yet expanded).
pub(crate) async fn execute(
    s: &Scenario,
    target: &Target,
    cfg: &Config,
    template: &[String],
    exe: &Path,
    res: &mut CaseResult,
) -> Outcome {
    let dir = match ScenarioDir::new() {
        Ok(d) => d,
        Err(e) => return Outcome::Error(format!("cannot create the scenario's temp dir: {e}")),
    };
    let d = dir.path();
    let control = d.join("control.sock");
    let listener = match UnixListener::bind(&control) {
        Ok(l) => l,
        Err(e) => return Outcome::Error(format!("cannot bind {}: {e}", control.display())),
    };
    let mock = d.join("mock");
    let script = format!("#!/bin/sh\nexec '{}' mock \"$@\"\n", exe.display().to_string().replace('\'', r"'\''"));
    let home = d.join("home");
    let prepared = std::fs::write(&mock, script)
        .and_then(|()| std::fs::set_permissions(&mock, std::fs::Permissions::from_mode(0o755)))
        .and_then(|()| std::fs::create_dir_all(&home));
    if let Err(e) = prepared {
        return Outcome::Error(format!("cannot prepare the scenario's temp dir: {e}"));
    }
    let argv = expand(template, &mock, &d.join("tp.sock"), d);
    res.command = argv.clone();
    let pidfile = d.join("mock.pids");
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in target.env.iter().chain(s.testee.env.iter()) {
        if let Some(v) = v {
            env.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in [
        (ENV_CONTROL, control.display().to_string()),
        (ENV_PIDFILE, pidfile.display().to_string()),
        ("XDG_RUNTIME_DIR", d.display().to_string()),
        ("TMPDIR", d.display().to_string()),
        ("HOME", home.display().to_string()),
    ] {
        env.insert(k.to_owned(), v);
    }
    let env: Vec<(String, String)> = env.into_iter().collect();
    let stderr_path = d.join("bridge.stderr");
    let stderr = match std::fs::File::create(&stderr_path) {
        Ok(f) => f,
        Err(e) => return Outcome::Error(format!("cannot create {}: {e}", stderr_path.display())),
    };
    let host = match StdioHost::spawn_with_stderr(&argv, &env, Stdio::from(stderr)) {
        Ok(h) => h,
        Err(e) => return Outcome::Error(format!("cannot start the bridge `{}`: {e}", argv.join(" "))),
    };
    host.answer_requests(s.host_requests == crate::scenario::HostRequests::Auto);
    let pgid = host.pid().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    if pgid > 0 {
        process::track_group(pgid);
    }
    let scale = cfg.timeout_scale.max(1.0);
    let budget = s.timeout.unwrap_or(DEFAULT_SCENARIO_TIMEOUT).mul_f64(scale);
    let proc = Proc::Task { handle: tokio::spawn(std::future::pending::<i32>()), ended: None };
    let ex = Exec::new(s, scale, &target.features, false, listener, proc);
    let mut run = Run { ex, host, cursor: 0, sent_signals: Vec::new(), stderr_path: stderr_path.clone() };
    let outcome = match tokio::time::timeout(budget, run.steps()).await {
        Ok(Ok(())) => match run.stdout_clean() {
            Ok(()) => Outcome::Passed,
            Err(StepError::Fail(m) | StepError::Error(m)) => Outcome::Failed(m),
        },
        Ok(Err(StepError::Fail(m))) => Outcome::Failed(m),
        Ok(Err(StepError::Error(m))) => Outcome::Error(m),
        Err(_) => Outcome::Error(format!("the scenario exceeded its budget of {budget:?}")),
    };
    // Messages no step looked at, for the report.
    for m in run.host.messages().into_iter().skip(run.cursor) {
        run.ex.transcript.push(Item::Host { dir: Dir::FromTestee, message: Some(m), raw: None });
    }
    run.ex.close();
    if let Proc::Task { handle, .. } = &run.ex.proc {
        handle.abort();
    }
    let clean = teardown(&mut run.host, pgid, &pidfile).await;
    res.transcript_tail = run.ex.transcript_tail();
    res.transcript = std::mem::take(&mut run.ex.transcript);
    res.stderr_tail = tail_lines(&std::fs::read_to_string(&stderr_path).unwrap_or_default(), STDERR_TAIL);
    drop(run);
    drop(dir);
    match (clean, outcome) {
        (false, Outcome::Passed) => {
            Outcome::Error(format!("processes of the bridge's group {pgid} or a mock survived SIGKILL"))
        }
        (_, o) => o,
    }
}

/// Pids the mocks of this run registered.
fn mock_pids(pidfile: &Path) -> Vec<i32> {
    std::fs::read_to_string(pidfile).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Whether `pid` runs (and is not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()).unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Closes stdin, waits `GRACE`, then SIGKILLs the bridge's group and every registered mock (and
/// its group); true when nothing is left within `KILL_LIMIT`.
async fn teardown(host: &mut StdioHost, pgid: i32, pidfile: &Path) -> bool {
    let _ = host.close(GRACE).await;
    let deadline = Instant::now() + KILL_LIMIT;
    loop {
        let mocks = mock_pids(pidfile);
        // SAFETY: kill/killpg/waitpid have no memory-safety preconditions.
        unsafe {
            if pgid > 0 {
                libc::killpg(pgid, libc::SIGKILL);
                let mut st = 0;
                while libc::waitpid(-pgid, &mut st, libc::WNOHANG) > 0 {}
            }
            for &m in &mocks {
                libc::kill(m, libc::SIGKILL);
                libc::killpg(m, libc::SIGKILL);
            }
        }
        let _ = host.wait_exit(Duration::from_millis(20)).await;
        let left = (pgid > 0 && process::group_alive(pgid)) || mocks.iter().any(|&m| alive(m));
        if !left {
            if pgid > 0 {
                process::untrack_group(pgid);
            }
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
