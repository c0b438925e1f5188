//! The `explore` command: argument handling and output; the work is
//! `protomcp_harness::explore`'s.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use protomcp_harness::explore::{self, ExploreConfig};
use protomcp_harness::runner::{self, Config, Target, shell_quote};

#[derive(Args, Debug, Clone)]
pub struct ExploreArgs {
    /// An SDK's testee (DIR/protomcp-conform.toml); repeat, or mix with --testee, for a
    /// differential run.
    #[arg(long, value_name = "DIR")]
    sdk: Vec<PathBuf>,
    /// A testee command line, split on whitespace (repeatable). Neither --sdk nor --testee: the
    /// bundled reference testee.
    #[arg(long, value_name = "CMD ARGS…")]
    testee: Vec<String>,
    /// A bridge under test, as for the main command: 'CMD ARGS… {mock}' or a DIR with
    /// protomcp-conform.toml (repeat for a differential run: the same generated sessions against
    /// each, DIVERGENT where they answer differently). Each case is a generated host session
    /// with scripted tool-process behaviour, written as a bridge scenario, run by the bridge
    /// runner on a fresh bridge and judged by the bridge model; a failure is shrunk into
    /// --out. Example: --bridge 'protomcp-conform bridge --call-timeout 3s -- {mock}'.
    #[arg(long, value_name = "CMD|DIR", conflicts_with_all = ["sdk", "testee"])]
    bridge: Vec<String>,
    /// With --bridge: how the harness reaches every bridge, stdio or http (as
    /// --bridge-transport of the main command; a manifest's transport otherwise).
    #[arg(long, alias = "transport", value_name = "T", value_parser = ["stdio", "http"], requires = "bridge")]
    bridge_transport: Option<String>,
    /// With --bridge and http: the endpoint (default http://127.0.0.1:{port}/mcp).
    #[arg(long, value_name = "URL", requires = "bridge")]
    bridge_url: Option<String>,
    /// With --testee: the features the testees claim (comma-separated; default: all).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// Cases (generated sessions) to run, each against fresh processes.
    #[arg(long, value_name = "N", default_value_t = 100)]
    cases: u64,
    /// The run's seed (default: from the clock; always printed).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Stop starting new cases after this long: `1500ms`, `90s`, `5m` (or `5min`), `1h`, or plain
    /// seconds (the same grammar as every duration option).
    #[arg(long, value_name = "BUDGET", value_parser = crate::bridge::parse_duration)]
    time: Option<Duration>,
    /// Most ops per generated session (default: 24; with --bridge, 12).
    #[arg(long, value_name = "N")]
    max_ops: Option<usize>,
    /// Where the shrunk failing scenario is written.
    #[arg(long, value_name = "DIR", default_value = "scenarios/regressions")]
    out: PathBuf,
    /// Cases run in parallel (default: 16 per core, at most 32, for tool-process cases: they
    /// mostly wait; 2 per core, at most 4, for bridge cases: a bridge, a mock and the harness's
    /// waits each).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Most replays the shrinker may spend.
    #[arg(long, value_name = "N", default_value_t = 400)]
    shrink_budget: usize,
    /// Multiply every time by X (at least 1), for slow machines.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    timeout_scale: f64,
    /// Delivery schedule of every case and replay: whole, split1, coalesce, random:SEED.
    #[arg(long, value_name = "SCHEDULE", value_parser = runner::schedule::Schedule::parse)]
    schedule: Option<runner::schedule::Schedule>,
}

fn targets(a: &ExploreArgs) -> Result<(Vec<Arc<Target>>, Vec<String>)> {
    let mut out = Vec::new();
    let mut args = Vec::new();
    for dir in &a.sdk {
        let t = crate::run::sdk_target(dir)?;
        crate::run::build(&t).map_err(anyhow::Error::msg)?;
        out.push(t);
        args.push(format!("--sdk {}", shell_quote(&dir.display().to_string())));
    }
    for cmd in &a.testee {
        out.push(crate::run::command_target(cmd, a.features.as_deref())?);
        args.push(format!("--testee {}", shell_quote(cmd)));
    }
    if out.is_empty() {
        out.push(Target::reference(std::env::current_exe().context("locating this binary")?));
    }
    Ok((out.into_iter().map(Arc::new).collect(), args))
}

pub fn run(a: ExploreArgs) -> Result<ExitCode> {
    if !a.timeout_scale.is_finite() || a.timeout_scale <= 0.0 {
        eprintln!("protomcp-conform: --timeout-scale must be a positive number");
        return Ok(ExitCode::from(2));
    }
    if !a.bridge.is_empty() {
        return run_bridge(a);
    }
    let max_ops = a.max_ops.unwrap_or(24);
    let (targets, target_args) = match targets(&a) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("protomcp-conform: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let seed = seed_of(&a);
    runner::schedule::set(a.schedule.unwrap_or_default());
    let mut rcfg = Config { timeout_scale: a.timeout_scale, ..Config::default() };
    rcfg.jobs = 1;
    let cfg = ExploreConfig {
        cases: a.cases,
        seed,
        time: a.time,
        max_ops: max_ops.max(1),
        // Cases mostly wait (quiet periods, slow calls): run more of them than there are cores.
        jobs: a.jobs.map_or((cores() * 16).min(32), |j| j as usize),
        runner: rcfg,
        shrink_budget: a.shrink_budget,
    };
    let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    println!("explore: seed {seed}, up to {} cases against {}", a.cases, names.join(" and "));
    let rerun_explore = rerun(&target_args, seed, &a, cfg.max_ops);
    let progress: explore::Progress = Arc::new(|m: &str| eprintln!("explore: {m}"));
    let out_dir = a.out.clone();
    let work = explore::explore(targets.clone(), cfg, &out_dir, progress);
    let Some(report) = crate::run::until_interrupted("testee", work)? else { return Ok(ExitCode::from(130)) };
    let secs = report.elapsed.as_secs_f64().max(1e-9);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "explore: {} cases, {} frames sent in {:.1} s ({:.0} frames/s, {:.1} cases/s)",
        report.cases_run,
        report.frames_sent,
        secs,
        report.frames_sent as f64 / secs,
        report.cases_run as f64 / secs
    )?;
    let Some(found) = report.found else {
        writeln!(out, "OK: nothing found (seed {seed})")?;
        return Ok(ExitCode::SUCCESS);
    };
    let f = found.shrunk.run.failure.as_ref().expect("a failure");
    let shrunk = (found.original_ops, found.shrunk.case.len(), found.shrunk.replays, found.shrunk.elapsed);
    print_found(&mut out, seed, found.case, f, shrunk)?;
    writeln!(out, "wrote {}", found.file.display())?;
    writeln!(
        out,
        "re-run the scenario: protomcp-conform --scenarios {} {}",
        shell_quote(&found.file.display().to_string()),
        target_args.first().map_or("", String::as_str)
    )?;
    writeln!(out, "re-run the exploration: {rerun_explore}")?;
    Ok(ExitCode::from(1))
}

/// What was found and how far it shrank: `shrunk` is (ops before, ops after, replays, time).
fn print_found(
    out: &mut impl Write,
    seed: u64,
    case: u64,
    f: &explore::Failure,
    shrunk: (usize, usize, usize, std::time::Duration),
) -> std::io::Result<()> {
    writeln!(out, "\nFOUND in case {case} (seed {seed}) against {}:", f.target)?;
    if let Some((a_name, a_text, b_name, b_text)) = &f.divergent {
        writeln!(out, "DIVERGENT\n{}", side_by_side(a_name, a_text, b_name, b_text))?;
    }
    for x in &f.findings {
        writeln!(out, "  {x}")?;
    }
    writeln!(out, "  runner: {}", f.message.replace('\n', "\n  "))?;
    let (before, after, replays, elapsed) = shrunk;
    writeln!(out, "shrunk from {before} to {after} ops in {replays} replays ({:.1} s)", elapsed.as_secs_f64())
}

/// The command line that repeats an exploration case for case.
fn rerun(target_args: &[String], seed: u64, a: &ExploreArgs, max_ops: usize) -> String {
    format!(
        "protomcp-conform explore {}--seed {seed} --cases {} --max-ops {max_ops}{}",
        target_args.iter().map(|s| format!("{s} ")).collect::<String>(),
        a.cases,
        a.schedule.map(|s| format!(" --schedule {}", s.name())).unwrap_or_default()
    )
}

fn seed_of(a: &ExploreArgs) -> u64 {
    a.seed.unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        now.as_nanos() as u64 ^ u64::from(std::process::id())
    })
}

/// `explore --bridge`: generated host sessions against one or more bridges.
fn run_bridge(a: ExploreArgs) -> Result<ExitCode> {
    use protomcp_harness::explore::bridge as xb;
    let mut targets = Vec::new();
    let mut target_args = Vec::new();
    for b in &a.bridge {
        let t = match crate::run::bridge_target(b, a.bridge_transport.as_deref(), a.bridge_url.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("protomcp-conform: {e:#}");
                return Ok(ExitCode::from(2));
            }
        };
        if let Err(e) = crate::run::build(&t) {
            eprintln!("protomcp-conform: {e}");
            return Ok(ExitCode::from(2));
        }
        targets.push(Arc::new(t));
        target_args.push(format!("--bridge {}", shell_quote(b)));
    }
    if let Some(t) = &a.bridge_transport {
        target_args.push(format!("--bridge-transport {t}"));
    }
    if let Some(u) = &a.bridge_url {
        target_args.push(format!("--bridge-url {}", shell_quote(u)));
    }
    let seed = seed_of(&a);
    runner::schedule::set(a.schedule.unwrap_or_default());
    let mut rcfg = Config { timeout_scale: a.timeout_scale, ..Config::default() };
    rcfg.jobs = 1;
    let max_ops = a.max_ops.unwrap_or(12).max(1);
    let cfg = ExploreConfig {
        cases: a.cases,
        seed,
        time: a.time,
        max_ops,
        // A case is a bridge, a mock and the harness's waits: two per core keep the deadlines.
        jobs: a.jobs.map_or((cores() * 2).min(4), |j| j as usize),
        runner: rcfg,
        shrink_budget: a.shrink_budget,
    };
    let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    println!("explore --bridge: seed {seed}, up to {} cases against {}", a.cases, names.join(" and "));
    let rerun = rerun(&target_args, seed, &a, max_ops);
    let progress: explore::Progress = Arc::new(|m: &str| eprintln!("explore: {m}"));
    let out_dir = a.out.clone();
    let work = xb::explore(targets.clone(), cfg, &out_dir, progress);
    let Some(report) = crate::run::until_interrupted("bridge", work)? else { return Ok(ExitCode::from(130)) };
    let secs = report.elapsed.as_secs_f64().max(1e-9);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "explore --bridge: {} cases, {} host messages and tool frames sent in {:.1} s ({:.2} cases/s)",
        report.cases_run,
        report.messages_sent,
        secs,
        report.cases_run as f64 / secs
    )?;
    for ((target, requirement), n) in &report.known {
        writeln!(out, "known deviation (in {target}'s known failures): {requirement} in {n} case(s)")?;
    }
    let Some(found) = report.found else {
        writeln!(out, "OK: nothing found (seed {seed})")?;
        return Ok(ExitCode::SUCCESS);
    };
    let f = found.shrunk.run.failure.as_ref().expect("a failure");
    let shrunk = (found.original_ops, found.shrunk.run.case.len(), found.shrunk.replays, found.shrunk.elapsed);
    print_found(&mut out, seed, found.case, f, shrunk)?;
    writeln!(out, "wrote {}", found.file.display())?;
    let transport = a.bridge_transport.as_ref().map(|t| format!(" --bridge-transport {t}")).unwrap_or_default();
    writeln!(
        out,
        "re-run the scenario: protomcp-conform --scenarios {} --bridge {}{transport}",
        shell_quote(&found.file.display().to_string()),
        shell_quote(&a.bridge[names.iter().position(|n| *n == f.target).unwrap_or(0)])
    )?;
    writeln!(out, "re-run the exploration: {rerun}")?;
    Ok(ExitCode::from(1))
}

/// Two transcripts in two columns, differing lines marked with `|`.
pub fn side_by_side(a_name: &str, a: &str, b_name: &str, b: &str) -> String {
    const W: usize = 70;
    let cut = |s: &str| -> String {
        let s: String = s.chars().take(W).collect();
        format!("{s:<W$}")
    };
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = format!("{} | {}\n", cut(a_name), cut(b_name));
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i).copied().unwrap_or(""), lb.get(i).copied().unwrap_or(""));
        let mark = if x == y { ' ' } else { '|' };
        out.push_str(&format!("{} {mark} {}\n", cut(x), cut(y)));
    }
    out
}

/// The machine's cores, for the default parallelism of the case loops.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
