//! The proto-mcp profile on the command line: `proto-mcp-server` (the reference server) and
//! everything under `--profile proto-mcp` (run, list, explain, coverage). Thin: the work is in
//! `protomcp_harness::proto_mcp`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use protomcp_proto::mcp::MCP_MAX_FRAME;
use protomcp_proto::mcp::server::ServerFault;

#[derive(Args)]
pub struct ServerArgs {
    /// Break one rule on purpose (otherwise behaving normally), for self-tests of the harness:
    /// buffer-first-16 (PM-FRAME-03) or silent-on-undecodable (PM-ERROR-08).
    #[arg(long, value_name = "KIND", value_parser = |s: &str| s.parse::<ServerFault>())]
    misbehave: Option<ServerFault>,
    /// Largest frame body accepted; a longer prefix gets -32600 (id 0) and the server exits.
    #[arg(long, default_value_t = MCP_MAX_FRAME)]
    max_frame: u32,
    /// With --misbehave: an intermittent server, for self-tests of --repeat. Each start claims
    /// the next free number N in DIR (the file DIR/start-N, created exclusively, so concurrent
    /// starts get distinct numbers); the server misbehaves on even N and behaves on odd N.
    #[arg(long, value_name = "DIR", requires = "misbehave")]
    every_other_start: Option<PathBuf>,
}

/// `proto-mcp-server`: serves one proto-mcp session on stdio.
pub fn serve(args: ServerArgs) -> Result<ExitCode> {
    let misbehave = match &args.every_other_start {
        Some(dir) if start_number(dir)? % 2 == 1 => None,
        _ => args.misbehave,
    };
    let code = protomcp_harness::proto_mcp::server::run(misbehave, args.max_frame);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The number of this start in `dir`: the smallest N ≥ 1 for which `dir/start-N` did not exist
/// (this process creates it).
fn start_number(dir: &Path) -> Result<u64> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for n in 1.. {
        let path = dir.join(format!("start-{n}"));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }
    unreachable!("the loop returns")
}

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use clap::{Parser, Subcommand};
use protomcp_harness::proto_mcp::run::{self as pmrun, SafeTool, Target};
use protomcp_harness::proto_mcp::{self as pm, requirements as pmreq};
use protomcp_harness::runner::{self, CaseResult, Summary, glob_match, report};
use protomcp_harness::scenario::{self as lang, Profile, Scenario, ScenarioError, ScenarioErrors};

/// `protomcp-conform --profile proto-mcp …`: judge a proto-mcp server (buf.mcp.v1 over stdio);
/// the harness is the client. Without a subcommand it runs the catalogue (scenarios/proto-mcp)
/// against `--server` (the bundled reference server by default).
#[derive(Parser)]
#[command(name = "protomcp-conform --profile proto-mcp", args_conflicts_with_subcommands = true)]
struct ProfileCli {
    #[command(subcommand)]
    command: Option<ProfileCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum ProfileCommand {
    /// List the proto-mcp scenarios: id, level, requirements, title.
    List {
        #[arg(long)]
        only: Vec<String>,
        #[arg(long)]
        scenarios: Option<PathBuf>,
    },
    /// Show one scenario, the texts of the requirements it cites, and how to re-run it.
    Explain {
        id: String,
        #[arg(long)]
        scenarios: Option<PathBuf>,
    },
    /// Run the catalogue against the reference server and every --server, and print
    /// requirement × server as markdown, with the scenarios on which they disagree.
    Matrix {
        /// A server: a command line or a manifest directory; repeatable (columns in the order
        /// given, after the reference server's).
        #[arg(long, value_name = "CMD|DIR")]
        server: Vec<String>,
        /// Leave out the bundled reference server (by default the first column).
        #[arg(long)]
        no_reference: bool,
        #[arg(long)]
        only: Vec<String>,
        #[arg(short = 'j', long, default_value_t = 4)]
        jobs: usize,
        /// Run each scenario N times per server (a fresh process each time); runs that differ
        /// are FLAKY.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        #[arg(long)]
        scenarios: Option<PathBuf>,
        /// Write the markdown here too (it is always printed).
        #[arg(long, alias = "out", value_name = "FILE")]
        markdown: Option<PathBuf>,
        /// Write the matrix as JSON here.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Write an HTML report here: one self-contained file with a column per server.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// The PM MUST/SHOULD requirements without a scenario and without a reason in
    /// harness/data/proto-mcp-untestable.yaml, with counts per area. Exit 1 when any.
    Coverage {
        #[arg(long)]
        scenarios: Option<PathBuf>,
        /// Also list every covered requirement with its scenarios.
        #[arg(long)]
        verbose: bool,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// The server: a command line (split on whitespace), or a directory holding proto-mcp.toml
    /// (command, features, safe_tool, known_failures). Default: the bundled reference server.
    #[arg(long, value_name = "CMD|DIR")]
    server: Option<String>,
    /// Run only scenarios whose id matches (glob, `*` any run of characters); repeatable.
    #[arg(long)]
    only: Vec<String>,
    /// Scenarios run in parallel.
    #[arg(short = 'j', long, default_value_t = 4)]
    jobs: usize,
    /// Run each scenario N times, each on a fresh server process, and fold the runs as a
    /// protomcp run does: runs that differ in verdict or broken requirement are FLAKY (exit 1);
    /// a known failure marked `intermittent` folds PASS and XFAIL to XFAIL.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// The safe tool (feature call): NAME=TYPE_URL=HEX.
    #[arg(long, value_name = "NAME=TYPE_URL=HEX")]
    safe_tool: Option<String>,
    /// Declare a feature the probe cannot see (grpc, ws); repeatable.
    #[arg(long)]
    feature: Vec<String>,
    /// The catalogue directory (default: scenarios/proto-mcp as bundled in the binary).
    #[arg(long)]
    scenarios: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the JUnit XML report here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the HTML report here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Write each scenario's full transcript to DIR/<id>.txt.
    #[arg(long, value_name = "DIR")]
    transcripts: Option<PathBuf>,
}

/// Whether the command line selects the proto-mcp profile (`--profile proto-mcp` anywhere);
/// returns the remaining arguments.
fn profile_args() -> Option<Vec<String>> {
    let args: Vec<String> = std::env::args().collect();
    let at = args
        .iter()
        .position(|a| a == "--profile=proto-mcp")
        .map(|i| (i, 1))
        .or_else(|| args.windows(2).position(|w| w[0] == "--profile" && w[1] == "proto-mcp").map(|i| (i, 2)))?;
    let mut rest = args.clone();
    rest.drain(at.0..at.0 + at.1);
    Some(rest)
}

/// Runs the profile when the command line selects it; `None` otherwise (the protomcp CLI).
pub fn dispatch() -> Option<ExitCode> {
    let args = profile_args()?;
    let cli = ProfileCli::parse_from(args);
    Some(match profile(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("protomcp-conform: {e:#}");
            ExitCode::from(2)
        }
    })
}

/// The catalogue: `--scenarios DIR`, else the one bundled in the binary (scenarios/proto-mcp).
/// Files of the one scenario language; each must say `profile: proto-mcp`. Errors are
/// `file:line:col: message`.
fn load(dir: Option<&Path>) -> Result<Vec<Scenario>> {
    let (mut out, mut errors) = match dir {
        Some(dir) => match lang::load_dir(dir) {
            Ok(all) => (all, Vec::new()),
            Err(e) => (Vec::new(), e.0),
        },
        None => {
            let (mut out, mut errors) = (Vec::new(), Vec::new());
            for (rel, text) in crate::run::bundled::SCENARIOS {
                let Some(name) = rel.strip_prefix("proto-mcp/") else { continue };
                match lang::parse_str(&Path::new(pm::CATALOGUE_DIR).join(name), text) {
                    Ok(s) => out.push(s),
                    Err(e) => errors.extend(e.0),
                }
            }
            (out, errors)
        }
    };
    for s in out.iter().filter(|s| s.profile != Profile::ProtoMcp) {
        errors.push(ScenarioError::new(
            &s.file,
            s.id_loc,
            "not a proto-mcp scenario: its header needs `profile: proto-mcp`",
        ));
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    for w in out.windows(2) {
        if w[0].id == w[1].id {
            errors.push(ScenarioError::new(&w[1].file, w[1].id_loc, format!("duplicate scenario id `{}`", w[0].id)));
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(anyhow!("{}", ScenarioErrors(errors))) }
}

fn selected(scenarios: Vec<Scenario>, only: &[String]) -> Vec<Scenario> {
    scenarios.into_iter().filter(|s| only.is_empty() || only.iter().any(|g| glob_match(g, &s.id))).collect()
}

/// The reference server with its safe tool.
fn reference_target() -> Result<Target> {
    let exe = std::env::current_exe().context("locating the harness binary")?;
    Ok(Target {
        command: vec![exe.display().to_string(), "proto-mcp-server".into()],
        safe_tool: Some(SafeTool {
            name: "echo".into(),
            type_url: "type.googleapis.com/conform.v1.EchoRequest".into(),
            value: vec![0x0a, 0x02, b'h', b'i'],
        }),
        ..Default::default()
    })
}

fn profile(cli: ProfileCli) -> Result<ExitCode> {
    match cli.command {
        Some(ProfileCommand::List { only, scenarios }) => {
            for s in selected(load(scenarios.as_deref())?, &only) {
                let reqs: Vec<&str> = s.requirements.iter().map(|r| r.id).collect();
                println!("{:<48} {:<6} {:<40} {}", s.id, s.level.to_string(), reqs.join(","), s.title);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(ProfileCommand::Explain { id, scenarios }) => {
            let all = load(scenarios.as_deref())?;
            let s = all.iter().find(|s| s.id == id).ok_or_else(|| anyhow!("no proto-mcp scenario `{id}`"))?;
            println!("{} ({})\n  {}\n  file: {}", s.id, s.level, s.title, s.file.display());
            if !s.needs.is_empty() {
                println!("  features: {}", s.needs.join(", "));
            }
            if let Some(notes) = &s.notes {
                println!("  notes: {notes}");
            }
            for r in &s.requirements {
                println!("\n  {r}");
            }
            println!("\n  re-run: protomcp-conform --profile proto-mcp --server '…' --only '{}'", s.id);
            Ok(ExitCode::SUCCESS)
        }
        Some(ProfileCommand::Coverage { scenarios, verbose }) => {
            let all = load(scenarios.as_deref())?;
            let untestable = pm::untestable()?;
            let (entries, stale) = pm::coverage(&all, &untestable);
            let mut areas: std::collections::BTreeMap<&str, (usize, usize, usize, usize)> = Default::default();
            for e in &entries {
                let a = areas.entry(e.requirement.area()).or_default();
                a.0 += 1;
                if !e.scenarios.is_empty() {
                    a.1 += 1;
                } else if e.untestable.is_some() {
                    a.2 += 1;
                } else {
                    a.3 += 1;
                }
            }
            println!("{:<10} {:>11} {:>8} {:>10} {:>8}", "area", "MUST+SHOULD", "covered", "untestable", "missing");
            for (area, (n, c, u, m)) in &areas {
                println!("{area:<10} {n:>11} {c:>8} {u:>10} {m:>8}");
            }
            let missing: Vec<_> = entries.iter().filter(|e| e.missing()).collect();
            let covered = entries.iter().filter(|e| !e.scenarios.is_empty()).count();
            let untest = entries.iter().filter(|e| e.scenarios.is_empty() && e.untestable.is_some()).count();
            println!(
                "\n{} PM MUST/SHOULD: {covered} with a scenario, {untest} listed as not testable here, {} missing",
                entries.len(),
                missing.len()
            );
            for e in &missing {
                println!("MISSING {} [{}] {}", e.requirement.id, e.requirement.level, e.requirement.text);
            }
            for id in &stale {
                println!("STALE untestable entry {id}: a scenario cites it");
            }
            if verbose {
                for e in &entries {
                    println!(
                        "{} {}",
                        e.requirement.id,
                        if e.scenarios.is_empty() {
                            format!("untestable: {}", e.untestable.clone().unwrap_or_default())
                        } else {
                            e.scenarios.join(", ")
                        }
                    );
                }
            }
            Ok(if missing.is_empty() && stale.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Some(ProfileCommand::Matrix { server, no_reference, only, jobs, repeat, scenarios, markdown, json, html }) => {
            let all = selected(load(scenarios.as_deref())?, &only);
            if all.is_empty() {
                bail!("no proto-mcp scenario selected");
            }
            let mut runs = Vec::new();
            if !no_reference {
                runs.push(("reference".to_owned(), reference_target()?));
            }
            for s in &server {
                runs.push((s.clone(), target_of(s)?));
            }
            if runs.is_empty() {
                bail!("no server: give --server, or drop --no-reference");
            }
            let mut results = Vec::new();
            let mut worst = 0u8;
            for (name, target) in &runs {
                let features = pmrun::detect_features(target);
                eprintln!("matrix: {name} ({} scenarios)", all.len());
                let server = pmrun::Server { target: target.clone(), features: features.on };
                let r = run_all(&all, server.into_target(name.clone()), jobs, repeat, &|_| {})?;
                let summary = Summary::of(r.iter().map(|c| c.verdict));
                eprintln!("  {summary}");
                worst = worst.max(summary.exit_code());
                results.push((name.clone(), r));
            }
            let m = protomcp_harness::matrix::Matrix::build(&results);
            let md = m.markdown();
            print!("{md}");
            if let Some(p) = markdown {
                std::fs::write(&p, &md).with_context(|| format!("writing {}", p.display()))?;
            }
            if let Some(p) = json {
                std::fs::write(&p, serde_json::to_string_pretty(&m)? + "\n")
                    .with_context(|| format!("writing {}", p.display()))?;
            }
            if let Some(p) = html {
                let sides: Vec<protomcp_harness::runner::html::Side<'_>> = results
                    .iter()
                    .map(|(t, r)| protomcp_harness::runner::html::Side { target: t, results: r })
                    .collect();
                let title = format!("proto-mcp matrix: {}", m.targets.join(", "));
                std::fs::write(&p, protomcp_harness::runner::html::report(&title, &sides))
                    .with_context(|| format!("writing {}", p.display()))?;
            }
            Ok(ExitCode::from(worst))
        }
        None => run(cli.run),
    }
}

/// Runs `scenarios` against `target` with the runner's loop (`-j`, `--repeat`, `exclusive`,
/// folding); `on_done` sees each folded result as it finishes. Results in the scenarios' order.
fn run_all(
    scenarios: &[Scenario],
    target: runner::Target,
    jobs: usize,
    repeat: u32,
    on_done: &(dyn Fn(&CaseResult) + Sync),
) -> Result<Vec<CaseResult>> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let cfg = runner::Config { jobs: jobs.max(1), repeat: repeat as usize, ..runner::Config::default() };
    // The runner's callback is 'static; the printer is not: results come back over a channel and
    // are shown as they finish.
    let (tx, rx) = std::sync::mpsc::channel::<CaseResult>();
    let done: runner::OnDone = std::sync::Arc::new(move |r: &CaseResult, _, _| {
        let _ = tx.send(r.clone());
    });
    std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            rt.block_on(runner::run_all(
                std::sync::Arc::new(scenarios.to_vec()),
                std::sync::Arc::new(target),
                cfg,
                done,
            ))
        });
        for r in rx {
            on_done(&r);
        }
        run.join().map_err(|_| anyhow!("the run panicked"))
    })
}

/// The target of `--server`: a manifest directory or a command line.
fn target_of(s: &str) -> Result<Target> {
    let exe = std::env::current_exe().context("locating the harness binary")?;
    if Path::new(s).is_dir() {
        return Ok(pmrun::load_manifest(Path::new(s), &exe)?);
    }
    let command: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
    if command.is_empty() {
        bail!("--server is empty");
    }
    Ok(Target { command, ..Default::default() })
}

fn run(a: RunArgs) -> Result<ExitCode> {
    let scenarios = selected(load(a.scenarios.as_deref())?, &a.only);
    if scenarios.is_empty() {
        bail!("no proto-mcp scenario selected");
    }
    let (mut target, label) = match &a.server {
        None => (reference_target()?, "reference proto-mcp-server".to_owned()),
        Some(s) => (target_of(s)?, s.clone()),
    };
    if let Some(t) = &a.safe_tool {
        target.safe_tool = Some(pmrun::parse_safe_tool(t).map_err(|e| anyhow!("--safe-tool: {e}"))?);
    }
    for f in &a.feature {
        if !pmreq::FEATURES.contains(&f.as_str()) {
            bail!("--feature {f}: not a proto-mcp feature ({})", pmreq::FEATURES.join(", "));
        }
        target.declared.insert(f.clone());
    }
    target.transcripts = a.transcripts.clone();
    let stale = pmrun::stale_entries(&target, &load(a.scenarios.as_deref())?);
    if !stale.is_empty() {
        bail!("known failures name scenarios that do not exist: {}", stale.join(", "));
    }
    let features = pmrun::detect_features(&target);
    eprintln!("proto-mcp server: {}", target.command.join(" "));
    for n in &features.notes {
        eprintln!("  feature {n}");
    }
    let on: BTreeSet<String> = features.on.clone();
    let tty = std::io::stdout().is_terminal();
    let server = pmrun::Server { target, features: on };
    let results = run_all(&scenarios, server.into_target(label.clone()), a.jobs, a.repeat, &|r| {
        println!("{}", report::line(r, tty))
    })?;
    let target_args = format!("--profile proto-mcp --server '{label}'");
    for r in &results {
        if matches!(r.verdict.name(), "FAIL" | "WARN" | "XPASS" | "ERROR" | "FLAKY") {
            print!("{}", report::details(r, &target_args));
        }
    }
    let summary = Summary::of(results.iter().map(|r| r.verdict));
    println!(
        "\nproto-mcp: {} scenarios{}: {} PASS, {} FAIL, {} WARN, {} SKIP, {} XFAIL, {} XPASS, {} ERROR{}",
        results.len(),
        if a.repeat > 1 { format!(", {} runs each", a.repeat) } else { String::new() },
        summary.pass,
        summary.fail,
        summary.warn,
        summary.skip,
        summary.xfail,
        summary.xpass,
        summary.error,
        if summary.flaky > 0 { format!(", {} FLAKY", summary.flaky) } else { String::new() }
    );
    if let Some(p) = &a.json {
        let v = report::json_report(&label, &results);
        std::fs::write(p, serde_json::to_string_pretty(&v)?).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.junit {
        let x = report::junit_report(&label, &results)?;
        std::fs::write(p, x).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.html {
        let sides = [protomcp_harness::runner::html::Side { target: &label, results: &results }];
        std::fs::write(p, protomcp_harness::runner::html::report(&label, &sides))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::from(summary.exit_code()))
}
