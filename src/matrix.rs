//! The `matrix` command: the catalogue against several targets, requirement × target.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use protomcp_harness::matrix::Matrix;
use protomcp_harness::runner::{self, CaseResult, Config, Summary, Target};
use protomcp_harness::scenario::Scenario;

use crate::run::{self, Selection};

#[derive(Args, Debug, Clone)]
pub struct MatrixArgs {
    #[command(flatten)]
    sel: Selection,
    /// An SDK target: a directory with protomcp-conform.toml, or an SDK source checkout
    /// (repeatable; columns in the order given).
    #[arg(long, value_name = "DIR")]
    sdk: Vec<PathBuf>,
    /// A testee command line claiming every feature (repeatable).
    #[arg(long, value_name = "CMD ARGS…")]
    testee: Vec<String>,
    /// Leave out the bundled reference testee (by default the first column).
    #[arg(long)]
    no_reference: bool,
    /// Write the markdown here too (it is always printed).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write the matrix as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write an HTML report here: one self-contained file with a column per target (summary,
    /// per-area bars, requirement × verdict filterable by verdict, level and area, every scenario
    /// not passing with its transcript).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Scenarios run in parallel per target (default: eight per core, at most 16).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Multiply every time of every scenario by X (at least 1).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    timeout_scale: f64,
}

fn targets(a: &MatrixArgs) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    if !a.no_reference {
        out.push(Target::reference(std::env::current_exe().context("locating this binary")?));
    }
    for d in &a.sdk {
        out.push(run::sdk_target(d)?);
    }
    for t in &a.testee {
        out.push(run::command_target(t, None)?);
    }
    if out.is_empty() {
        bail!("no target: give --sdk or --testee, or drop --no-reference");
    }
    Ok(out)
}

pub fn matrix(a: MatrixArgs) -> Result<ExitCode> {
    let selected = match run::load(&a.sel) {
        Ok(s) => run::leave_out_soaks(&a.sel, s).0,
        Err(code) => return Ok(code),
    };
    if selected.is_empty() {
        eprintln!("protomcp-conform: no scenario selected");
        return Ok(ExitCode::from(3));
    }
    if !a.timeout_scale.is_finite() || a.timeout_scale <= 0.0 {
        eprintln!("protomcp-conform: --timeout-scale must be a positive number");
        return Ok(ExitCode::from(2));
    }
    let targets = match targets(&a) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("protomcp-conform: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut cfg = Config { timeout_scale: a.timeout_scale, ..Config::default() };
    if let Some(j) = a.jobs {
        cfg.jobs = j as usize;
    }
    let scenarios: Arc<Vec<Scenario>> = Arc::new(selected.into_iter().map(|(s, _)| s).collect());
    let progress = std::io::stderr().is_terminal();
    let mut runs: Vec<(String, Vec<CaseResult>)> = Vec::new();
    let mut worst = 0u8;
    for t in targets {
        if let Err(e) = run::build(&t) {
            eprintln!("protomcp-conform: {}: {e}", t.name);
            return Ok(ExitCode::from(3));
        }
        let name = t.name.clone();
        let on_done: runner::OnDone = {
            let name = name.clone();
            Arc::new(move |_r: &CaseResult, n: usize, total: usize| {
                if progress {
                    eprint!("\r\x1b[K[{name}] {n}/{total}");
                }
            })
        };
        let started = std::time::Instant::now();
        let Some(results) = run::execute(scenarios.clone(), Arc::new(t), cfg.clone(), on_done)? else {
            return Ok(ExitCode::from(130));
        };
        let summary = Summary::of(results.iter().map(|r| r.verdict));
        if progress {
            eprint!("\r\x1b[K");
        }
        eprintln!("{name}: {summary} in {:.1} s", started.elapsed().as_secs_f64());
        worst = worst.max(summary.exit_code());
        runs.push((name, results));
    }
    let m = Matrix::build(&runs);
    let md = m.markdown();
    std::io::stdout().lock().write_all(md.as_bytes())?;
    if let Some(p) = &a.markdown {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&m)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.html {
        let sides: Vec<runner::html::Side<'_>> =
            runs.iter().map(|(t, r)| runner::html::Side { target: t, results: r }).collect();
        let title = format!("matrix: {}", m.targets.join(", "));
        std::fs::write(p, runner::html::report(&title, &sides)).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::from(worst))
}
