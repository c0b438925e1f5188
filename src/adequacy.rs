//! The `adequacy` command: argument handling and output. The work is
//! `protomcp_harness::adequacy`'s.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use protomcp_harness::adequacy::{self, FaultResult, Outcome, Scope};
use protomcp_harness::runner::Config;
use protomcp_proto::fault::Role;

use crate::run;

/// The faults that no black-box scenario can catch, each with the reason.
const EXCEPTIONS: &str = include_str!("../harness/data/adequacy-exceptions.yaml");

#[derive(Args, Debug, Clone)]
pub struct AdequacyArgs {
    /// Whose faults: tool-process (the reference testee's) or bridge (the reference bridge's).
    #[arg(long, value_name = "ROLE", default_value = "tool-process", value_parser = ["tool-process", "bridge"])]
    role: String,
    /// Only the faults whose name matches the glob (`tp.call.*`; repeatable: any of them).
    #[arg(long, value_name = "GLOB")]
    only: Vec<String>,
    /// A deterministic sample of N faults, chosen by --seed (CI: the commit id).
    #[arg(long, value_name = "N", requires = "seed")]
    sample: Option<usize>,
    /// What chooses the sample (any text; the same text, the same sample).
    #[arg(long, value_name = "TEXT")]
    seed: Option<String>,
    /// Run every scenario of the role against every fault, not only its area's (slower; catches
    /// effects across areas).
    #[arg(long)]
    all_scenarios: bool,
    /// Scenario files or directories instead of the bundled catalogue (repeatable).
    #[arg(long, value_name = "PATH")]
    scenarios: Vec<PathBuf>,
    /// Scenarios run at once over all faults (default: as for a run).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Multiply every time of every scenario by X (at least 1).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    timeout_scale: f64,
    /// Write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Print the fault table (name, role, requirement, description) and exit.
    #[arg(long)]
    list: bool,
}

/// The exceptions: fault name → why no black-box scenario catches it.
pub(crate) fn exceptions() -> Result<BTreeMap<String, String>> {
    Ok(adequacy::parse_exceptions("harness/data/adequacy-exceptions.yaml", EXCEPTIONS)?)
}

/// The reference bridges with credentials, from their manifests (run from the repository: a
/// manifest that is not there is left out, with a note).
const CREDENTIALED_BRIDGES: &[&str] = &["harness/bridges/reference-http-auth", "harness/bridges/reference-http-apikey"];

/// The reference bridge that reloads by ReloadRequest (BR-RELOAD-02/03), from its manifest.
const RELOAD_REQUEST_BRIDGES: &[&str] = &["harness/bridges/reference-reload-request"];

fn credentialed_bridges(exe: &std::path::Path) -> Result<Vec<protomcp_harness::runner::Target>> {
    manifest_bridges(exe, CREDENTIALED_BRIDGES, "the scenarios that need credentials")
}

/// The bridges of the manifests `dirs` (a manifest that is not there is left out, with a note
/// that `what` are left out).
fn manifest_bridges(exe: &std::path::Path, dirs: &[&str], what: &str) -> Result<Vec<protomcp_harness::runner::Target>> {
    let mut out = Vec::new();
    for dir in dirs {
        let dir = std::path::Path::new(dir);
        if !protomcp_harness::runner::bridge_manifest::is_manifest_dir(dir) {
            eprintln!("adequacy: {} not found: {what} are left out", dir.display());
            continue;
        }
        let t = protomcp_harness::runner::bridge_manifest::load_target(dir, exe.to_owned())
            .with_context(|| format!("loading {}", dir.display()))?;
        out.push(t);
    }
    Ok(out)
}

pub fn adequacy(a: AdequacyArgs) -> Result<ExitCode> {
    let role = Role::named(&a.role).context("--role")?;
    let exceptions = exceptions()?;
    let faults = adequacy::select(role, &a.only, a.sample.zip(a.seed.as_deref()));
    if a.list {
        for f in &faults {
            let note = if exceptions.contains_key(f.name()) { "  (exception)" } else { "" };
            println!("{}\t{}\t{}\t{}{note}", f.name(), f.role().name(), f.requirement(), f.description());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if faults.is_empty() {
        eprintln!("protomcp-conform: adequacy: no fault of role {} selected", role.name());
        return Ok(ExitCode::from(3));
    }
    let selected = match run::load(&run::selection(a.scenarios.clone())) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let scenarios: Vec<_> = selected.into_iter().map(|(s, _)| s).filter(|s| !s.is_soak()).collect();
    let exe = std::env::current_exe().context("locating this binary")?;
    let peers = adequacy::Peers {
        bridges: vec![
            crate::run::reference_bridge_target(exe.clone())?,
            crate::run::reference_bridge_http_target(exe.clone())?,
        ],
        credentialed: credentialed_bridges(&exe)?,
        reload_request: manifest_bridges(
            &exe,
            RELOAD_REQUEST_BRIDGES,
            "the ReloadRequest runs of the reload scenarios",
        )?,
        exe,
    };
    let cfg = Config {
        jobs: a.jobs.map_or_else(protomcp_harness::runner::default_jobs, |j| j as usize),
        timeout_scale: a.timeout_scale.max(1.0),
        repeat: 1,
        keep_transcripts: false,
    };
    let scope = if a.all_scenarios { Scope::All } else { Scope::Area };
    eprintln!(
        "adequacy: {} faults of role {}, {} scenarios loaded, -j {}",
        faults.len(),
        role.name(),
        scenarios.len(),
        cfg.jobs
    );
    let on_fault: adequacy::OnFault = Arc::new(|r: &FaultResult, n: usize, total: usize| {
        eprintln!("[{n}/{total}] {}", progress_line(r));
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(adequacy::run(&faults, &scenarios, scope, &peers, cfg, on_fault));
    print!("{}", report.text());
    let unexpected: Vec<&FaultResult> = report
        .results
        .iter()
        .filter(|r| r.outcome != Outcome::Killed && !exceptions.contains_key(r.fault.name()))
        .collect();
    let excused = report.results.iter().filter(|r| r.outcome != Outcome::Killed).count() - unexpected.len();
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Killed && exceptions.contains_key(r.fault.name())) {
        println!("STALE exception {}: killed now; remove it from harness/data/adequacy-exceptions.yaml", r.fault);
    }
    println!(
        "{} of the faults not killed and attributed are listed exceptions (harness/data/adequacy-exceptions.yaml); {} are not",
        excused,
        unexpected.len()
    );
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report.json())?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if unexpected.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `KILLED tp.call.reply-twice (TP-CALL-01): calls.add [TP-CALL-01], … (12 scenarios, 4.1 s)`.
fn progress_line(r: &FaultResult) -> String {
    let kills: Vec<String> =
        r.kills.iter().take(3).map(|k| format!("{} [{}]", k.scenario, k.broken.join(","))).collect();
    let more = if r.kills.len() > 3 { format!(", +{}", r.kills.len() - 3) } else { String::new() };
    format!(
        "{} {} ({}): {}{more} ({} scenarios, {:.1} s)",
        r.outcome.label(),
        r.fault,
        r.fault.requirement(),
        if kills.is_empty() { "every scenario passed".to_owned() } else { kills.join(", ") },
        r.ran,
        r.duration.as_secs_f64()
    )
}
