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
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write an HTML report here: one self-contained file (summary, per-area bars, requirement ×
    /// verdict filterable by verdict, level and area, every scenario not passing with its
    /// transcript).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
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
    /// Scenarios run in parallel (default: four per core, at most 8: scenarios mostly wait).
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
            // Another profile's catalogue, in its own language (harness::proto_mcp), as
            // scenario::load_dir leaves it out.
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

/// The target options, as they would be written again (for re-run commands).
fn target_args(a: &RunArgs) -> String {
    let mut v = Vec::new();
    if let Some(d) = &a.sdk {
        v.push(format!("--sdk {}", shell_quote(&d.display().to_string())));
    }
    if let Some(t) = &a.testee {
        v.push(format!("--testee {}", shell_quote(t)));
    }
    if let Some(b) = &a.bridge {
        v.push(format!("--bridge {}", shell_quote(b)));
    }
    if let Some(t) = &a.bridge_transport {
        v.push(format!("--bridge-transport {t}"));
    }
    if let Some(u) = &a.bridge_url {
        v.push(format!("--bridge-url {}", shell_quote(u)));
    }
    if let Some(f) = &a.features {
        v.push(format!("--features {}", shell_quote(&f.join(","))));
    }
    if let Some(k) = &a.known_failures {
        v.push(format!("--known-failures {}", shell_quote(&k.display().to_string())));
    }
    for p in &a.sel.scenarios {
        v.push(format!("--scenarios {}", shell_quote(&p.display().to_string())));
    }
    v.join(" ")
}

/// The target of `--sdk DIR`: its manifest, or the bundled testee built against a checkout.
pub(crate) fn sdk_target(dir: &Path) -> Result<Target> {
    let cache = runner::checkout::cache_root();
    let t = runner::checkout::sdk_target(dir, bundled::TESTEES, &cache)?;
    if !dir.join("protomcp-conform.toml").is_file() {
        eprintln!(
            "protomcp-conform: {}: the bundled testee, written to {}",
            t.name,
            t.cwd.as_deref().unwrap_or(dir).display()
        );
    }
    Ok(t)
}

/// The target of `--testee 'CMD ARGS…'` (split on whitespace), claiming `features` or every feature.
pub(crate) fn command_target(cmd: &str, features: Option<&[String]>) -> Result<Target> {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    if argv.is_empty() {
        bail!("--testee: empty command");
    }
    let mut t = Target::command(argv);
    if let Some(f) = features {
        t.features = f.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    }
    Ok(t)
}

/// Runs the target's build command, if any, reporting it on stderr.
pub(crate) fn build(t: &Target) -> std::result::Result<(), runner::target::TargetError> {
    if let Some(b) = &t.build {
        eprintln!("protomcp-conform: {}: building: {}", t.name, b.join(" "));
        t.run_build()?;
    }
    Ok(())
}

/// The target of `--bridge CMD|DIR` with `--bridge-transport` and `--bridge-url` (which override a
/// manifest's `transport` and `url`).
pub(crate) fn bridge_target(cmd: &str, transport: Option<&str>, url: Option<&str>) -> Result<Target> {
    use runner::bridge::{BridgeTransport, DEFAULT_URL};
    use runner::{TargetKind, bridge_manifest};
    // A rebuild during the run leaves "/proc/self/exe" naming the old file "… (deleted)"; the
    // new binary at the same path runs the mock and `{exe}` as well.
    let exe = std::env::current_exe().context("locating this binary")?;
    let exe = match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(s) => PathBuf::from(s),
        None => exe,
    };
    let mut t = if bridge_manifest::is_manifest_dir(Path::new(cmd)) {
        bridge_manifest::load_target(Path::new(cmd), exe)?
    } else {
        let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        if argv.is_empty() {
            bail!("--bridge: empty command");
        }
        if argv.len() == 1 && Path::new(cmd).is_dir() {
            bail!("--bridge {cmd}: a directory without {}", bridge_manifest::FILE);
        }
        Target::bridge(argv, exe)
    };
    let TargetKind::Bridge { transport: current, .. } = &mut t.kind else { bail!("--bridge: not a bridge target") };
    let current_url = match current {
        BridgeTransport::Http { url } => Some(url.clone()),
        BridgeTransport::Stdio => None,
    };
    let chosen = match (transport, url) {
        (Some("stdio"), Some(_)) => bail!("--bridge-url needs --bridge-transport http"),
        (Some("stdio"), None) => BridgeTransport::Stdio,
        (Some(_), u) | (None, u @ Some(_)) => BridgeTransport::Http {
            url: u.map(str::to_owned).or(current_url).unwrap_or_else(|| DEFAULT_URL.to_owned()),
        },
        (None, None) => current.clone(),
    };
    if let BridgeTransport::Http { url } = &chosen {
        protomcp_harness::host::session::Endpoint::parse(&url.replace("{port}", "1"))
            .map_err(|e| anyhow::anyhow!("--bridge-url: {e}"))?;
    }
    *current = chosen;
    let http = matches!(current, BridgeTransport::Http { .. });
    if http && !t.features.iter().any(|f| f == "http") {
        t.features.push("http".into());
    }
    Ok(t)
}

pub(crate) fn target(a: &RunArgs) -> Result<Target> {
    let mut t = if let Some(dir) = &a.sdk {
        if a.features.is_some() {
            bail!("--features needs --testee or --bridge (a manifest lists its features)");
        }
        sdk_target(dir)?
    } else if let Some(cmd) = &a.bridge {
        let mut t = bridge_target(cmd, a.bridge_transport.as_deref(), a.bridge_url.as_deref())?;
        if let Some(f) = &a.features {
            let known = protomcp_harness::requirements::features(protomcp_harness::requirements::Party::Bridge);
            let mut claimed: Vec<String> = Vec::new();
            for f in f.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
                if !known.contains(&f) {
                    bail!("--features: unknown bridge feature `{f}`; valid: {}", known.join(", "));
                }
                claimed.push(f.to_owned());
            }
            use runner::bridge::BridgeTransport;
            let http = matches!(&t.kind, runner::TargetKind::Bridge { transport: BridgeTransport::Http { .. }, .. });
            if http && !claimed.iter().any(|f| f == "http") {
                claimed.push("http".into());
            }
            t.features = claimed;
        }
        t
    } else if let Some(cmd) = &a.testee {
        command_target(cmd, a.features.as_deref())?
    } else {
        if a.features.is_some() {
            bail!("--features needs --testee or --bridge");
        }
        Target::reference(std::env::current_exe().context("locating this binary")?)
    };
    if let Some(k) = &a.known_failures {
        t.known_failures = runner::load_known_failures(k)?;
    }
    Ok(t)
}

/// One side of a run: a target and the scenarios it runs.
struct Side {
    /// What the side is, in a run with more than one (`tool-process side: the TP catalogue`).
    label: &'static str,
    target: Arc<Target>,
    scenarios: Arc<Vec<Scenario>>,
}

/// The reference bridge as the default run drives it over stdio, with the bundled mock: the same
/// bridge as `--bridge harness/bridges/reference` (a test checks the two agree), with the known
/// failures of harness/data/reference-bridge-known-failures.yaml (bundled).
const REFERENCE_BRIDGE: &str = "{exe} bridge --call-timeout 3s --watch {dir}/watched --socket {socket} -- {mock}";
const REFERENCE_BRIDGE_NAME: &str = "reference bridge (stdio)";
const REFERENCE_BRIDGE_FEATURES: &[&str] = &["subscribe", "watch", "socket"];
const REFERENCE_BRIDGE_KNOWN_FAILURES: &str = include_str!("../harness/data/reference-bridge-known-failures.yaml");

/// The bridge side of the default run.
pub(crate) fn reference_bridge_target(exe: PathBuf) -> Result<Target> {
    let argv = REFERENCE_BRIDGE.split_whitespace().map(String::from).collect();
    let mut t = Target::bridge(argv, exe);
    t.name = REFERENCE_BRIDGE_NAME.into();
    t.features = REFERENCE_BRIDGE_FEATURES.iter().map(|f| f.to_string()).collect();
    t.known_failures = runner::target::parse_known_failures(
        Path::new("harness/data/reference-bridge-known-failures.yaml"),
        REFERENCE_BRIDGE_KNOWN_FAILURES,
    )?;
    Ok(t)
}

/// The sides of the run: the target given, or by default the tool-process scenarios against
/// the reference testee and the bridge scenarios against the reference bridge.
fn sides(a: &RunArgs, selected: Vec<Scenario>) -> Result<Vec<Side>> {
    if a.sdk.is_some() || a.testee.is_some() || a.bridge.is_some() {
        return Ok(vec![Side { label: "", target: Arc::new(target(a)?), scenarios: Arc::new(selected) }]);
    }
    let testee = target(a)?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let mut bridge = reference_bridge_target(exe)?;
    if a.known_failures.is_some() {
        bridge.known_failures = testee.known_failures.clone();
    }
    let (br, tp): (Vec<Scenario>, Vec<Scenario>) = selected.into_iter().partition(|s| s.role == scenario::Role::Bridge);
    let mut out = Vec::new();
    if !tp.is_empty() {
        out.push(Side {
            label: "tool-process side: the TP catalogue",
            target: Arc::new(testee),
            scenarios: Arc::new(tp),
        });
    }
    if !br.is_empty() {
        out.push(Side { label: "bridge side: the BR catalogue", target: Arc::new(bridge), scenarios: Arc::new(br) });
    }
    Ok(out)
}

/// The skipped scenarios, one line per reason (the first line of the message) with a count,
/// most frequent first: a reason of one scenario is its usual line, one of two or three names
/// them.
fn folded_skips(results: &[CaseResult], tty: bool) -> Vec<String> {
    let mut by_reason: Vec<(&str, Vec<&CaseResult>)> = Vec::new();
    for r in results.iter().filter(|r| r.verdict == runner::Verdict::Skip) {
        let reason = r.message.lines().next().unwrap_or("");
        match by_reason.iter_mut().find(|(x, _)| *x == reason) {
            Some((_, rs)) => rs.push(r),
            None => by_reason.push((reason, vec![r])),
        }
    }
    by_reason.sort_by_key(|(_, rs)| std::cmp::Reverse(rs.len()));
    by_reason
        .into_iter()
        .map(|(reason, rs)| match rs.as_slice() {
            [one] => report::line(one, tty),
            _ => {
                let skip = if tty { "\x1b[2mSKIP \x1b[0m" } else { "SKIP " };
                let mut s = format!("{skip} {} scenarios: {reason}", rs.len());
                if rs.len() <= 3 {
                    let ids: Vec<&str> = rs.iter().map(|r| r.id.as_str()).collect();
                    s.push_str(&format!(" [{}]", ids.join(", ")));
                }
                s
            }
        })
        .collect()
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let selected = match load(&a.sel) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let all_ids: Vec<String> = selected.iter().map(|(s, _)| s.id.clone()).collect();
    let (selected, soaks_left) = leave_out_soaks(&a.sel, selected);
    if selected.is_empty() {
        eprintln!("protomcp-conform: no scenario selected: a run that executes nothing is an error");
        return Ok(ExitCode::from(3));
    }
    let sides = match sides(&a, selected.into_iter().map(|(s, _)| s).collect()) {
        Ok(s) => s,
        Err(e) => return Ok(usage(format!("{e:#}"))),
    };
    for side in &sides {
        if let Err(e) = build(&side.target) {
            eprintln!("protomcp-conform: {e}");
            return Ok(ExitCode::from(3));
        }
    }
    if a.sel.only.is_empty() && a.sel.scenarios.is_empty() {
        let mut warned = std::collections::BTreeSet::new();
        for id in sides.iter().flat_map(|s| s.target.known_failures.keys()) {
            if !all_ids.contains(id) && warned.insert(id) {
                eprintln!("protomcp-conform: warning: known failure `{id}` names no scenario of the catalogue");
            }
        }
    }
    if !a.timeout_scale.is_finite() || a.timeout_scale <= 0.0 {
        return Ok(usage("--timeout-scale must be a positive number"));
    }
    let golden = match golden_dir(&a) {
        Ok(g) => g,
        Err(e) => return Ok(usage(e)),
    };
    let golden_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut cfg = Config { timeout_scale: a.timeout_scale, repeat: a.repeat as usize, ..Config::default() };
    runner::schedule::set(a.schedule.unwrap_or_default());
    if let Some(j) = a.jobs {
        cfg.jobs = j as usize;
    }
    let tty = std::io::stdout().is_terminal();
    let progress = std::io::stderr().is_terminal();
    let verbose = a.verbose;
    let args = target_args(&a);
    let several = sides.len() > 1;
    let mut done_sides: Vec<(Arc<Target>, Vec<CaseResult>)> = Vec::new();
    for side in &sides {
        let mut out = std::io::stdout().lock();
        if several {
            writeln!(
                out,
                "{}== {}: {} scenarios against the {}",
                if done_sides.is_empty() { "" } else { "\n" },
                side.label,
                side.scenarios.len(),
                side.target.name
            )?;
        }
        drop(out);
        let finished: Arc<Mutex<Vec<CaseResult>>> = Arc::new(Mutex::new(Vec::new()));
        let on_done = {
            let finished = finished.clone();
            let golden = golden.clone();
            let golden_failed = golden_failed.clone();
            Arc::new(move |r: &CaseResult, n: usize, total: usize| {
                let mut r = r.clone();
                if let Some(g) = &golden {
                    r.golden = Some(g.judge(&r).unwrap_or_else(|e| {
                        golden_failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        eprintln!("protomcp-conform: golden: {e}");
                        runner::golden::Golden::NotCompared(e.to_string())
                    }));
                }
                let r = &r;
                let mut out = std::io::stdout().lock();
                if progress {
                    eprint!("\r\x1b[K");
                }
                // Skipped scenarios are counted per reason after the run (each with --verbose).
                if verbose || r.verdict != runner::Verdict::Skip {
                    let _ = writeln!(out, "{}", report::line(r, tty));
                    let _ = out.flush();
                }
                if progress && n < total {
                    eprint!("[{n}/{total}]");
                }
                finished.lock().unwrap_or_else(|e| e.into_inner()).push(r.clone());
            })
        };
        let Some(mut results) = execute(side.scenarios.clone(), side.target.clone(), cfg.clone(), on_done)? else {
            let done = finished.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let s = Summary::of(done.iter().map(|r| r.verdict));
            eprintln!(
                "protomcp-conform: interrupted after {} of {} scenarios ({s}, target: {})",
                done.len(),
                side.scenarios.len(),
                side.target.name
            );
            return Ok(ExitCode::from(130));
        };
        // The golden comparisons were made as each scenario finished (its line shows them).
        {
            let done = finished.lock().unwrap_or_else(|e| e.into_inner());
            for r in results.iter_mut() {
                r.golden = done.iter().find(|d| d.id == r.id).and_then(|d| d.golden.clone());
            }
        }
        let summary = Summary::of(results.iter().map(|r| r.verdict));
        let bad: Vec<&CaseResult> = results
            .iter()
            .filter(|r| {
                matches!(
                    r.verdict,
                    runner::Verdict::Fail
                        | runner::Verdict::Warn
                        | runner::Verdict::Xpass
                        | runner::Verdict::Error
                        | runner::Verdict::Flaky
                        | runner::Verdict::Leak
                )
            })
            .collect();
        let mut out = std::io::stdout().lock();
        if !verbose {
            for l in folded_skips(&results, tty) {
                writeln!(out, "{l}")?;
            }
        }
        if !bad.is_empty() {
            writeln!(out)?;
            for r in &bad {
                write!(out, "{}", report::details(r, &args))?;
            }
        }
        if let Some(g) = &golden {
            let changed: Vec<String> = results.iter().filter_map(|r| report::golden_details(r, &g.dir)).collect();
            if !changed.is_empty() {
                writeln!(out)?;
                for c in changed {
                    write!(out, "{c}")?;
                }
            }
        }
        writeln!(
            out,
            "\n{}: {summary} ({} scenarios, target: {})",
            verdict_word(&summary),
            results.len(),
            side.target.name
        )?;
        if summary.executed() == 0 {
            writeln!(out, "no scenario was executed: a vacuous run is an error")?;
        }
        if let Some(line) =
            protomcp_harness::io::resources::summary(results.iter().filter_map(|r| r.resources.as_ref()))
        {
            writeln!(out, "{line}")?;
        }
        if let Some(g) = &golden
            && let Some(line) = runner::golden::summary(&g.dir, results.iter().filter_map(|r| r.golden.as_ref()))
        {
            writeln!(out, "{line}")?;
        }
        done_sides.push((side.target.clone(), results));
    }
    let mut exit =
        done_sides.iter().map(|(_, r)| Summary::of(r.iter().map(|r| r.verdict)).exit_code()).max().unwrap_or(3);
    if let Some(g) = &golden {
        let unaccepted =
            done_sides.iter().flat_map(|(_, r)| r.iter()).filter(|r| r.golden.as_ref().is_some_and(|g| g.unaccepted()));
        let n = unaccepted.count();
        if n > 0 {
            let hint = match g.mode {
                runner::golden::Mode::Check => {
                    format!(
                        "left as .snap.new: review them, then re-run with --accept to write {}/*.snap",
                        g.dir.display()
                    )
                }
                runner::golden::Mode::ReadOnly => "nothing written (CI is set)".to_owned(),
                runner::golden::Mode::Accept => unreachable!("--accept writes them"),
            };
            writeln!(std::io::stdout().lock(), "golden: {n} transcript(s) new or changed ({hint})")?;
            exit = exit.max(1);
        }
        if golden_failed.load(std::sync::atomic::Ordering::Relaxed) {
            exit = exit.max(2);
        }
    }
    let all: Vec<&CaseResult> = done_sides.iter().flat_map(|(_, r)| r.iter()).collect();
    let names: Vec<&str> = done_sides.iter().map(|(t, _)| t.name.as_str()).collect();
    if several {
        let total = Summary::of(all.iter().map(|r| r.verdict));
        let word = match exit {
            0 => "OK",
            1 => "FAILED",
            _ => "ERROR",
        };
        writeln!(
            std::io::stdout().lock(),
            "\nTOTAL {word}: {total} ({} scenarios, targets: {})",
            all.len(),
            names.join(", ")
        )?;
    }
    if soaks_left > 0 {
        writeln!(
            std::io::stdout().lock(),
            "{soaks_left} soak scenarios not run (--soak runs them: thousands of calls each while the target's resources are sampled; LEAK when one grows)"
        )?;
    }
    if let Some(p) = &a.json {
        let v = if let [(t, results)] = done_sides.as_slice() {
            report::json_report(&t.name, results)
        } else {
            // Several targets: every case names its target; the summary is the total.
            let mut cases = Vec::new();
            let mut per_side = Vec::new();
            for (t, results) in &done_sides {
                let mut v = report::json_report(&t.name, results);
                if let Some(list) = v.get_mut("cases").and_then(|c| c.as_array_mut()) {
                    for c in list.iter_mut() {
                        c["target"] = serde_json::Value::from(t.name.as_str());
                    }
                    cases.append(list);
                }
                per_side.push(serde_json::json!({"target": t.name, "summary": v["summary"]}));
            }
            serde_json::json!({
                "target": names.join(" + "),
                "summary": Summary::of(all.iter().map(|r| r.verdict)),
                "sides": per_side,
                "cases": cases,
            })
        };
        std::fs::write(p, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(dir) = &a.transcripts {
        write_transcripts(dir, all.iter().copied())?;
    }
    if let Some(p) = &a.junit {
        let v: Vec<(&str, &[CaseResult])> = done_sides.iter().map(|(t, r)| (t.name.as_str(), r.as_slice())).collect();
        let xml = report::junit_report_sides(&v)?;
        std::fs::write(p, xml).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.html {
        let v: Vec<runner::html::Side<'_>> =
            done_sides.iter().map(|(t, r)| runner::html::Side { target: &t.name, results: r }).collect();
        std::fs::write(p, runner::html::report(&names.join(" + "), &v))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::from(exit))
}

/// Runs `scenarios` against `target`; `None` when SIGINT interrupted the run, after every testee
/// group was killed and every temp dir removed (reported on stderr).
pub(crate) fn execute(
    scenarios: Arc<Vec<Scenario>>,
    target: Arc<Target>,
    cfg: Config,
    on_done: runner::OnDone,
) -> Result<Option<Vec<CaseResult>>> {
    runner::process::become_subreaper();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let results = rt.block_on(async {
        tokio::select! {
            r = runner::run_all(scenarios, target, cfg, on_done) => Some(r),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    if results.is_none() {
        let (groups, dirs) = runner::process::emergency_cleanup();
        eprintln!("\nprotomcp-conform: interrupted: killed {groups} testee group(s), removed {dirs} temp dir(s)");
    }
    rt.shutdown_background();
    Ok(results)
}

/// The golden directory of `--golden`, in the mode `--accept` and the environment give.
fn golden_dir(a: &RunArgs) -> std::result::Result<Option<runner::golden::GoldenDir>, String> {
    use runner::golden::{GoldenDir, Mode};
    let Some(dir) = &a.golden else { return Ok(None) };
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    let mode = match (a.accept, ci) {
        (true, true) => {
            return Err("--accept writes golden files, and CI is set in the environment: CI never writes them \
                        (run --accept where CI is unset, and commit the files)"
                .to_owned());
        }
        (true, false) => Mode::Accept,
        (false, true) => Mode::ReadOnly,
        (false, false) => Mode::Check,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(format!("--golden {}: not a directory", dir.display()));
    }
    if mode == Mode::ReadOnly && !dir.is_dir() {
        return Err(format!(
            "--golden {}: no such directory, and CI is set, so it would not be written (write it with --accept where CI is unset)",
            dir.display()
        ));
    }
    Ok(Some(GoldenDir { dir: dir.clone(), mode }))
}

fn write_transcripts<'a>(dir: &Path, results: impl Iterator<Item = &'a CaseResult>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for r in results {
        let p = dir.join(format!("{}.txt", r.id));
        std::fs::write(&p, r.transcript_text()).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn verdict_word(s: &Summary) -> &'static str {
    match s.exit_code() {
        0 => "OK",
        1 => "FAILED",
        _ => "ERROR",
    }
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
        return Ok(usage(format!("no scenario `{id}` (see `protomcp-conform list`)")));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalogue_run_leaves_the_soaks_out_unless_asked_for_or_named() {
        let none = Selection { scenarios: Vec::new(), only: Vec::new(), soak: false };
        let all = load(&none).unwrap();
        let soaks: Vec<&str> = all.iter().filter(|(s, _)| s.is_soak()).map(|(s, _)| s.id.as_str()).collect();
        assert!(soaks.contains(&"soak.echo") && soaks.contains(&"bridge.soak.echo"), "{soaks:?}");
        let (run, left) = leave_out_soaks(&none, all.clone());
        assert_eq!(left, soaks.len());
        assert!(run.iter().all(|(s, _)| !s.is_soak()) && run.len() + left == all.len());
        let (run, left) = leave_out_soaks(&Selection { soak: true, ..none.clone() }, all.clone());
        assert_eq!((run.len(), left), (all.len(), 0));
        let only = Selection { only: vec!["soak.*".into()], ..none };
        let (run, left) = leave_out_soaks(&only, load(&only).unwrap());
        assert_eq!(left, 0);
        assert!(run.iter().any(|(s, _)| s.id == "soak.echo"));
    }

    #[test]
    fn the_default_runs_bridge_is_the_reference_bridge_manifest() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let exe = PathBuf::from("/bin/protomcp-conform");
        let from_manifest =
            runner::bridge_manifest::load_target(&root.join("harness/bridges/reference"), exe.clone()).unwrap();
        let ours = reference_bridge_target(exe).unwrap();
        assert_eq!(ours.name, from_manifest.name);
        assert_eq!(format!("{:?}", ours.kind), format!("{:?}", from_manifest.kind));
        assert_eq!(ours.features, from_manifest.features);
        let keys = |t: &Target| t.known_failures.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&ours), keys(&from_manifest));
        assert!(from_manifest.env.is_empty() && from_manifest.skip.is_empty() && from_manifest.build.is_none());
    }

    #[test]
    fn skipped_scenarios_fold_into_one_line_per_reason() {
        let s = |id: &str, why: &str| CaseResult {
            id: id.into(),
            title: String::new(),
            file: String::new(),
            requirements: Vec::new(),
            broken: Vec::new(),
            held: Vec::new(),
            level: protomcp_harness::requirements::Level::Must,
            verdict: runner::Verdict::Skip,
            message: why.into(),
            duration: std::time::Duration::ZERO,
            transcript_tail: Vec::new(),
            transcript: Default::default(),
            stderr_tail: String::new(),
            command: Vec::new(),
            runs: Vec::new(),
            intermittent: false,
            resources: None,
            golden: None,
        };
        let mut rs: Vec<CaseResult> = (0..5).map(|i| s(&format!("bridge.x{i}"), "a bridge scenario")).collect();
        rs.push(s("calls.a", "feature not claimed: x\nmore"));
        rs.push(s("calls.b", "feature not claimed: x"));
        rs.push(s("calls.c", "cannot"));
        let lines = folded_skips(&rs, false);
        assert_eq!(
            lines,
            [
                "SKIP  5 scenarios: a bridge scenario",
                "SKIP  2 scenarios: feature not claimed: x [calls.a, calls.b]",
                "SKIP  calls.c (0 ms): cannot",
            ]
        );
    }
}
