//! The `run` command (the default), `list` and `explain`: argument handling and output. The
//! work is `protomcp_harness::runner`'s.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use clap::Args;
use protomcp_harness::runner::{self, CaseResult, Config, Summary, Target, report, shell_quote};
use protomcp_harness::scenario::{self, Scenario, ScenarioErrors};

pub(crate) mod bundled {
    include!(concat!(env!("OUT_DIR"), "/scenarios.rs"));
}

/// Which scenarios.
#[derive(Args, Debug, Clone, Default)]
pub struct Selection {
    /// A scenario file or directory (repeatable). Default: the catalogue bundled in the binary.
    #[arg(long, value_name = "PATH")]
    scenarios: Vec<PathBuf>,
    /// Only scenarios whose id matches the glob (`*`, `?`; repeatable: any of them).
    #[arg(long, value_name = "GLOB")]
    only: Vec<String>,
    /// Also run the soak scenarios of the catalogue (`soak.*`, `bridge.soak.*`: up to 10,000
    /// calls each while the target's processes, threads, descriptors and memory are sampled; a
    /// resource that grows with the calls is a LEAK). They take tens of seconds each, so a run
    /// leaves them out unless this flag, --only or --scenarios names them.
    #[arg(long)]
    soak: bool,
}

/// The selection of `paths` (the bundled catalogue when empty), every scenario of them.
pub(crate) fn selection(paths: Vec<PathBuf>) -> Selection {
    Selection { scenarios: paths, ..Selection::default() }
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    sel: Selection,
    /// An SDK's testee: reads DIR/protomcp-conform.toml (command, middleware_command, features,
    /// known_failures, env).
    #[arg(long, value_name = "DIR", conflicts_with = "testee")]
    sdk: Option<PathBuf>,
    /// A testee command line, split on whitespace; it claims every feature unless --features.
    #[arg(long, value_name = "CMD ARGS…")]
    testee: Option<String>,
    /// A bridge under test (runs the `role: bridge` scenarios): a command line split on
    /// whitespace, or a DIR holding protomcp-conform.toml (keys bridge, transport, url, features,
    /// known_failures, env, skip, build, name; the bridge runs in DIR). Placeholders replaced in
    /// every argument: {mock} = an executable that runs this binary's mock tool process,
    /// {socket} = a socket path in the scenario's private temp dir, {dir} = that dir, {port} = a
    /// free TCP port on 127.0.0.1 chosen per scenario (for --bridge-transport http), {exe} = this
    /// binary.
    /// Example: --bridge 'protomcp-conform bridge --call-timeout 3s -- {mock}'.
    #[arg(long, value_name = "CMD ARGS…|DIR", conflicts_with_all = ["sdk", "testee"])]
    bridge: Option<String>,
    /// How the harness reaches the bridge: stdio (MCP lines on its stdin/stdout; the default) or
    /// http (Streamable HTTP at --bridge-url: the first host step waits until the URL accepts a
    /// connection, at most T_START = 10 s; then POSTs, JSON or SSE responses, the session's GET
    /// event stream, DELETE for host_close). Scenarios with `transports: [stdio]` are skipped over
    /// http. Example: --bridge 'protomcp-conform bridge --transport http --port {port} -- {mock}'
    /// --bridge-transport http.
    #[arg(long, value_name = "T", value_parser = ["stdio", "http"], requires = "bridge")]
    bridge_transport: Option<String>,
    /// The bridge's MCP endpoint over http, with the placeholders above (implies
    /// --bridge-transport http). Default: http://127.0.0.1:{port}/mcp.
    #[arg(long, value_name = "URL", requires = "bridge")]
    bridge_url: Option<String>,
    /// With --testee: the features it claims (comma-separated). With --bridge: the bridge
    /// features it claims (http, subscribe, watch, auth, apikey, socket; http is implied by
    /// --bridge-transport http), replacing a manifest's. scenarios/README.md says what each needs.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// A known-failures file (YAML: scenario id → reason); overrides the manifest's.
    #[arg(long, value_name = "FILE")]
    known_failures: Option<PathBuf>,
    #[command(flatten)]
    files: output::ReportFiles,
    /// Print a line for every skipped scenario too (otherwise one line per reason, with a count).
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Write the normalized transcript of every scenario to DIR/<scenario id>.txt (created if
    /// missing): every frame both ways, request ids renamed, times, paths and PIDs bracketed.
    #[arg(long, value_name = "DIR")]
    transcripts: Option<PathBuf>,
    /// Compare each scenario's normalized transcript with DIR/<scenario id>.snap (insta's
    /// snapshot format) and show CHANGED (with a diff) or NEW beside the verdict; either fails
    /// the run (exit 1) as a snapshot test does. A new or changed transcript is left as
    /// DIR/<id>.snap.new for review (`cargo insta review`, or --accept); with CI set in the
    /// environment nothing is written. Skipped scenarios and the few whose transcript is not
    /// deterministic are not compared.
    #[arg(long, value_name = "DIR")]
    golden: Option<PathBuf>,
    /// With --golden: write every new or changed transcript as DIR/<id>.snap (and remove its
    /// .snap.new). Refused when CI is set: CI never writes golden files.
    #[arg(long, requires = "golden")]
    accept: bool,
    /// Scenarios run in parallel (default: eight per core, at most 16: scenarios mostly wait).
    /// The default run's two sides (TP and BR catalogues) run together in one schedule, each
    /// with that default (N is then their total); their verdict lines and reports still come
    /// one side after the other.
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Multiply every time of every scenario by X (at least 1), for slow machines.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    timeout_scale: f64,
    /// Run every selected scenario N times (each on a fresh target) and fold the runs into one
    /// verdict: a scenario whose runs disagree (in verdict or in the requirement broken) is FLAKY,
    /// shown with every run's verdict and message, and fails the run (exit 1).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// How the harness's writes reach the socket: whole (default), split1 (one byte per write),
    /// coalesce (frames held back and written together), random:SEED (seeded cuts and pauses).
    /// Recorded in every transcript.
    #[arg(long, value_name = "SCHEDULE", value_parser = runner::schedule::Schedule::parse)]
    schedule: Option<runner::schedule::Schedule>,
    /// Run part K of N (1 ≤ K ≤ N) of the selected scenarios, for N parallel CI jobs whose
    /// `--json` reports `merge` puts together: the same cut on every machine, balanced by what
    /// each scenario waits (and with --shard-durations, by what it took before).
    #[arg(long, value_name = "K/N", value_parser = runner::shard::Shard::parse)]
    shard: Option<runner::shard::Shard>,
    /// With --shard: the durations of an earlier run to balance the parts by (its JSON report,
    /// e.g. the last merged one; or a table of `id<TAB>ms` lines). Every shard must be given the
    /// same file.
    #[arg(long, value_name = "FILE", requires = "shard")]
    shard_durations: Option<PathBuf>,
}

/// A usage or scenario-file error: exit status 2.
fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("protomcp-conform: {msg}");
    ExitCode::from(2)
}

/// The scenarios selected, each with its file text; `Err` is the exit status after reporting.
pub(crate) fn load(sel: &Selection) -> std::result::Result<Vec<(Scenario, String)>, ExitCode> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    if sel.scenarios.is_empty() {
        for (rel, text) in bundled::SCENARIOS {
            // Another profile's catalogue (`profile: proto-mcp` files, run by `--profile
            // proto-mcp`), as scenario::load_dir leaves it out.
            if rel.starts_with("proto-mcp/") {
                continue;
            }
            match scenario::parse_str(&Path::new("scenarios").join(rel), text) {
                Ok(s) => out.push((s, (*text).to_owned())),
                Err(ScenarioErrors(e)) => errors.extend(e),
            }
        }
    } else {
        for p in &sel.scenarios {
            let loaded = if p.is_dir() { scenario::load_dir(p) } else { scenario::load_file(p).map(|s| vec![s]) };
            match loaded {
                Ok(v) => out.extend(v.into_iter().map(|s| {
                    let text = std::fs::read_to_string(&s.file).unwrap_or_default();
                    (s, text)
                })),
                Err(ScenarioErrors(e)) => errors.extend(e),
            }
        }
    }
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (s, _) in &out {
        let here = s.at(s.id_loc).to_string();
        if let Some(first) = seen.insert(s.id.clone(), here.clone()) {
            errors.push(scenario::ScenarioError::new(
                &s.file,
                s.id_loc,
                format!("duplicate scenario id `{}`: also defined at {first}", s.id),
            ));
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("{e}");
        }
        eprintln!("protomcp-conform: {} error(s) in scenario files", errors.len());
        return Err(ExitCode::from(2));
    }
    if !sel.only.is_empty() {
        out.retain(|(s, _)| sel.only.iter().any(|g| runner::glob_match(g, &s.id)));
    }
    out.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    Ok(out)
}

/// What a run of `selected` executes: the soak scenarios only with `--soak` or when `--only` or
/// `--scenarios` chose them; with how many were left out.
pub(crate) fn leave_out_soaks(
    sel: &Selection,
    mut selected: Vec<(Scenario, String)>,
) -> (Vec<(Scenario, String)>, usize) {
    let before = selected.len();
    if !sel.soak && sel.only.is_empty() && sel.scenarios.is_empty() {
        selected.retain(|(s, _)| !s.is_soak());
    }
    let left = before - selected.len();
    (selected, left)
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let selected = match load(&a.sel) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let loaded: Vec<Scenario> = selected.iter().map(|(s, _)| s.clone()).collect();
    let (selected, soaks_left) = leave_out_soaks(&a.sel, selected);
    if selected.is_empty() {
        eprintln!("protomcp-conform: no scenario selected: a run that executes nothing is an error");
        return Ok(ExitCode::from(3));
    }
    let sides = match sides(&a, selected.into_iter().map(|(s, _)| s).collect()) {
        Ok(s) => s,
        Err(e) => return Ok(usage(format!("{e:#}"))),
    };
    let (sides, shard) = match a.shard {
        None => (sides, None),
        Some(k) => match shard_sides(sides, k, a.shard_durations.as_deref()) {
            Ok((sides, of)) => (sides, Some(of)),
            Err(e) => return Ok(usage(format!("{e:#}"))),
        },
    };
    for side in &sides {
        if let Err(e) = build(&side.target) {
            eprintln!("protomcp-conform: {e}");
            return Ok(ExitCode::from(3));
        }
    }
    let whole = a.sel.only.is_empty() && a.sel.scenarios.is_empty();
    if let Err(code) = check_known_failures(&sides, &loaded, whole) {
        return Ok(code);
    }
    if !a.timeout_scale.is_finite() || a.timeout_scale <= 0.0 {
        return Ok(usage("--timeout-scale must be a positive number"));
    }
    let golden = match golden_dir(&a) {
        Ok(g) => g,
        Err(e) => return Ok(usage(e)),
    };
    let golden_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut cfg = Config {
        timeout_scale: a.timeout_scale,
        repeat: a.repeat as usize,
        keep_transcripts: a.transcripts.is_some() || a.files.html.is_some(),
        ..Config::default()
    };
    runner::schedule::set(a.schedule.unwrap_or_default());
    match a.jobs {
        Some(j) => cfg.jobs = j as usize,
        // Sides run together in one schedule, each with the parallelism it would have alone:
        // their scenarios wait far more than they compute.
        None => cfg.jobs = runner::default_jobs_for(sides.len()),
    }
    let tty = std::io::stdout().is_terminal();
    let progress = std::io::stderr().is_terminal();
    let args = target_args(&a);
    let several = sides.len() > 1;
    let out = live::Out {
        golden: golden.clone(),
        golden_failed: golden_failed.clone(),
        args: args.clone(),
        progress,
        verbose: a.verbose,
        tty,
        sharded: shard.is_some(),
    };
    let live = Arc::new(Mutex::new(live::Live::new(&sides, out)));
    live.lock().unwrap_or_else(|e| e.into_inner()).start();
    let runs: Vec<runner::Side> = sides
        .iter()
        .enumerate()
        .map(|(k, side)| {
            let live = live.clone();
            let on_done: runner::OnDone = Arc::new(move |r: &CaseResult, _n: usize, _total: usize| {
                live.lock().unwrap_or_else(|e| e.into_inner()).finished(k, r)
            });
            runner::Side { scenarios: side.scenarios.clone(), target: side.target.clone(), on_done }
        })
        .collect();
    let Some(results) = until_interrupted("testee", runner::run_sides(runs, cfg))? else {
        let live = live.lock().unwrap_or_else(|e| e.into_inner());
        let (n, total) = live.counts();
        let names: Vec<&str> = sides.iter().map(|s| s.target.name.as_str()).collect();
        eprintln!(
            "protomcp-conform: interrupted after {n} of {total} scenarios ({}, target: {})",
            live.summary(),
            names.join(", ")
        );
        return Ok(ExitCode::from(130));
    };
    let done_sides = live.lock().unwrap_or_else(|e| e.into_inner()).finish(results);
    let mut exit = done_sides
        .iter()
        .map(|(_, r)| {
            let s = Summary::of(r.iter().map(|r| r.verdict));
            if shard.is_some() { s.shard_exit_code() } else { s.exit_code() }
        })
        .max()
        .unwrap_or(3);
    if let Some(g) = &golden {
        exit = exit.max(golden_exit(g, &done_sides, &golden_failed)?);
    }
    let all: Vec<&CaseResult> = done_sides.iter().flat_map(|(_, r)| r.iter()).collect();
    let names: Vec<&str> = done_sides.iter().map(|(t, _)| t.name.as_str()).collect();
    if several {
        print_total(exit, &all, &names)?;
    }
    if soaks_left > 0 {
        writeln!(
            std::io::stdout().lock(),
            "{soaks_left} soak scenarios not run (--soak runs them: thousands of calls each while the target's resources are sampled; LEAK when one grows)"
        )?;
    }
    write_reports(&a, &done_sides, shard)?;
    Ok(ExitCode::from(exit))
}

/// The sides of shard `k` (`--shard K/N`): each side's scenarios of that part of the cut made
/// over every side's (see `runner::shard`), every side kept even when it has none there (the
/// report then names every target, as the other shards' do); with what the JSON report says of
/// the shard.
fn shard_sides(
    sides: Vec<targets::Side>,
    k: runner::shard::Shard,
    durations: Option<&Path>,
) -> Result<(Vec<targets::Side>, runner::json_report::ShardOf)> {
    let learned = match durations {
        None => runner::durations::Durations::default(),
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("--shard-durations {}", p.display()))?;
            runner::shard::durations_of(&text, p)?
        }
    };
    let items = runner::shard::weights(sides.iter().flat_map(|s| s.scenarios.iter()), &learned);
    let parts = runner::shard::assign(&items, k.n);
    let mine: std::collections::BTreeSet<String> =
        items.iter().zip(&parts).filter(|(_, p)| **p == k.k).map(|((id, _), _)| (*id).to_owned()).collect();
    let of = runner::json_report::ShardOf { k: k.k, n: k.n, selected: items.len() };
    eprintln!("protomcp-conform: shard {k}: {} of {} scenarios", mine.len(), items.len());
    let sides = sides
        .into_iter()
        .map(|s| {
            let kept: Vec<Scenario> = s.scenarios.iter().filter(|sc| mine.contains(&sc.id)).cloned().collect();
            targets::Side { scenarios: Arc::new(kept), ..s }
        })
        .collect();
    Ok((sides, of))
}

/// Holds the known failures against the scenarios loaded: an entry naming a step past its
/// scenario's last is an error (exit 2); one naming no scenario is a warning when `whole` (the
/// whole catalogue was loaded; a selection may leave the scenario out).
fn check_known_failures(
    sides: &[targets::Side],
    loaded: &[Scenario],
    whole: bool,
) -> std::result::Result<(), ExitCode> {
    let mut seen = std::collections::BTreeSet::new();
    let mut errors = 0;
    for side in sides {
        let (unknown, past) = runner::target::misfit_known_failures(&side.target.known_failures, loaded);
        for w in unknown.into_iter().filter(|_| whole) {
            if seen.insert(w.clone()) {
                eprintln!("protomcp-conform: warning: {w}");
            }
        }
        for e in past {
            if seen.insert(e.clone()) {
                eprintln!("protomcp-conform: {e}");
                errors += 1;
            }
        }
    }
    if errors > 0 {
        eprintln!("protomcp-conform: {errors} error(s) in known-failures files");
        return Err(ExitCode::from(2));
    }
    Ok(())
}

/// Runs `scenarios` against `target`; `None` when SIGINT interrupted the run, after every testee
/// group was killed and every temp dir removed (reported on stderr).
pub(crate) fn execute(
    scenarios: Arc<Vec<Scenario>>,
    target: Arc<Target>,
    cfg: Config,
    on_done: runner::OnDone,
) -> Result<Option<Vec<CaseResult>>> {
    until_interrupted("testee", runner::run_all(scenarios, target, cfg, on_done))
}

/// Runs `work` on a fresh runtime, this process the subreaper of everything it starts; `None`
/// when SIGINT came first, after every process group it started (`what`: whose) was killed and
/// every temp dir removed (reported on stderr).
pub(crate) fn until_interrupted<R>(what: &str, work: impl std::future::Future<Output = R>) -> Result<Option<R>> {
    runner::process::become_subreaper();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let results = rt.block_on(async {
        tokio::select! {
            r = work => Some(r),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    if results.is_none() {
        let (groups, dirs) = runner::process::emergency_cleanup();
        eprintln!("\nprotomcp-conform: interrupted: killed {groups} {what} group(s), removed {dirs} temp dir(s)");
    }
    rt.shutdown_background();
    Ok(results)
}

/// The golden directory of `--golden`, in the mode `--accept` and the environment give.
fn golden_dir(a: &RunArgs) -> std::result::Result<Option<runner::golden::GoldenDir>, String> {
    use runner::golden::{GoldenDir, GoldenMode};
    let Some(dir) = &a.golden else { return Ok(None) };
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    let mode = match (a.accept, ci) {
        (true, true) => {
            return Err("--accept writes golden files, and CI is set in the environment: CI never writes them \
                        (run --accept where CI is unset, and commit the files)"
                .to_owned());
        }
        (true, false) => GoldenMode::Accept,
        (false, true) => GoldenMode::ReadOnly,
        (false, false) => GoldenMode::Check,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(format!("--golden {}: not a directory", dir.display()));
    }
    if mode == GoldenMode::ReadOnly && !dir.is_dir() {
        return Err(format!(
            "--golden {}: no such directory, and CI is set, so it would not be written (write it with --accept where CI is unset)",
            dir.display()
        ));
    }
    Ok(Some(GoldenDir { dir: dir.clone(), mode }))
}

pub fn list(sel: &Selection) -> Result<ExitCode> {
    let selected = match load(sel) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let mut out = std::io::stdout().lock();
    for (s, _) in &selected {
        let reqs: Vec<&str> = s.requirements.iter().map(|r| r.id).collect();
        writeln!(out, "{}\t{}\t{}\t{}", s.id, s.level, reqs.join(","), s.title)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn explain(sel: &Selection, id: &str) -> Result<ExitCode> {
    let selected = match load(&Selection { only: Vec::new(), ..sel.clone() }) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let Some((s, text)) = selected.iter().find(|(s, _)| s.id == id) else {
        if let Some(req) = protomcp_harness::requirements::any(id) {
            return explain_requirement(&selected, req);
        }
        return Ok(usage(format!("no scenario or requirement `{id}` (see `protomcp-conform list`)")));
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{} — {}\n{} · {:?} · file {}", s.id, s.title, s.level, s.role, s.file.display())?;
    if !s.needs.is_empty() {
        writeln!(out, "needs: {}", s.needs.join(", "))?;
    }
    writeln!(out, "\nRequirements:")?;
    for r in &s.requirements {
        writeln!(out, "  {} [{}] {}", r.id, r.level, r.text)?;
    }
    let step_checks: Vec<_> = s.steps.iter().filter(|st| !st.checks.is_empty()).collect();
    if !step_checks.is_empty() {
        writeln!(out, "\nSteps that check their own requirements (a failure there breaks those):")?;
        for st in step_checks {
            let ids: Vec<&str> = st.checks.iter().map(|r| r.id).collect();
            writeln!(out, "  {}:{} {}: {}", s.file.display(), st.loc.line, st.keyword(), ids.join(", "))?;
            for r in st.checks.iter().filter(|r| !s.requirements.iter().any(|c| c.id == r.id)) {
                writeln!(out, "    {} [{}] {}", r.id, r.level, r.text)?;
            }
        }
    }
    writeln!(out, "\nScenario:\n{}", text.trim_end())?;
    let mut rerun = String::from("protomcp-conform");
    for p in &sel.scenarios {
        rerun.push_str(&format!(" --scenarios {}", shell_quote(&p.display().to_string())));
    }
    writeln!(out, "\nRe-run just this scenario:\n  {rerun} --only {}", shell_quote(id))?;
    Ok(ExitCode::SUCCESS)
}

/// A requirement's text, and every scenario that cites it or has a step that checks it, with
/// that step's place (what a SARIF rule's help points at).
fn explain_requirement(
    selected: &[(Scenario, String)],
    req: &protomcp_harness::requirements::Requirement,
) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{req}")?;
    let mut n = 0;
    for (s, _) in selected {
        let cited = s.requirements.iter().any(|r| r.id == req.id);
        let steps: Vec<_> = s.steps.iter().filter(|st| st.checks.iter().any(|r| r.id == req.id)).collect();
        if !cited && steps.is_empty() {
            continue;
        }
        if n == 0 {
            writeln!(out, "\nScenarios that check it (`protomcp-conform explain <scenario>` shows one):")?;
        }
        n += 1;
        writeln!(out, "  {} [{}] {} ({})", s.id, s.level, s.title, s.file.display())?;
        for st in steps {
            writeln!(out, "    {}:{} {}", s.file.display(), st.loc.line, st.keyword())?;
        }
    }
    if n == 0 {
        writeln!(out, "\nNo scenario of this catalogue checks it.")?;
    }
    Ok(ExitCode::SUCCESS)
}

mod live;
pub(crate) mod output;
mod targets;

use output::{golden_exit, print_total, write_reports};
pub(crate) use targets::{
    bridge_target, build, command_target, reference_bridge_http_target, reference_bridge_target, sdk_target,
};
use targets::{sides, target_args};

#[cfg(test)]
mod tests;
