//! The `coverage` command: which MUST/SHOULD requirements no scenario cites.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use protomcp_harness::coverage::{self, Coverage};
use protomcp_proto::violation::Party;

use crate::run::{self, Selection};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Role {
    /// TP-* requirements (SDKs).
    ToolProcess,
    /// BR-* requirements (bridges).
    Bridge,
    /// Both.
    All,
}

#[derive(Args, Debug, Clone)]
pub struct CoverageArgs {
    #[command(flatten)]
    sel: Selection,
    /// Whose requirements.
    #[arg(long, value_enum, default_value_t = Role::ToolProcess)]
    role: Role,
    /// Also list every requirement with the scenarios citing it or the reason it has none.
    #[arg(long)]
    verbose: bool,
    /// Write the whole table as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also list the requirements whose faults an adequacy run (its `--json FILE`) did not kill
    /// and attribute (docs/adequacy.md); any such requirement makes the exit status 1.
    #[arg(long, value_name = "FILE")]
    adequacy: Option<PathBuf>,
    /// Also list the black-box testable MUST requirements that no fault of the catalogue breaks
    /// (`adequacy --list`; issue 29 asks for one fault each). Informational: the exit status does
    /// not change.
    #[arg(long)]
    faults: bool,
}

/// The bundled not-black-box-testable lists, merged; a requirement listed twice is an error.
fn untestable() -> Result<BTreeMap<String, String>> {
    let mut all = BTreeMap::new();
    for (name, text) in run::bundled::UNTESTABLE {
        let file = format!("harness/data/untestable/{name}");
        for (id, reason) in coverage::parse_untestable(&file, text)? {
            if all.insert(id.clone(), reason).is_some() {
                anyhow::bail!("{file}: `{id}` is listed twice");
            }
        }
    }
    Ok(all)
}

/// Requirements an open issue is writing scenarios for (`harness/data/pending.yaml`).
const PENDING: &str = include_str!("../harness/data/pending.yaml");

fn pending() -> Result<BTreeMap<String, String>> {
    Ok(coverage::parse_untestable("harness/data/pending.yaml", PENDING)?)
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_owned() } else { format!("{}…", s.chars().take(n - 1).collect::<String>()) }
}

pub fn coverage(a: CoverageArgs) -> Result<ExitCode> {
    let selected = match run::load(&a.sel) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let untestable = untestable()?;
    let pending = pending()?;
    let party = match a.role {
        Role::ToolProcess => Some(Party::ToolProcess),
        Role::Bridge => Some(Party::Bridge),
        Role::All => None,
    };
    // A requirement counts as covered when a scenario cites it or one of its steps checks it.
    let all: Vec<(&str, Vec<&'static protomcp_harness::requirements::Requirement>)> =
        selected.iter().map(|(s, _)| (s.id.as_str(), s.all_requirements())).collect();
    let cov = Coverage::compute(all.iter().map(|(id, r)| (*id, r.as_slice())), &untestable, &pending, party);
    let mut out = std::io::stdout().lock();
    let t = cov.totals();
    writeln!(
        out,
        "{} MUST/SHOULD requirements: {} covered by a scenario, {} not black-box testable, {} pending (an open issue's scenarios, harness/data/pending.yaml), {} without a scenario ({} scenarios read)",
        t.must + t.should,
        t.covered,
        t.untestable,
        t.pending,
        t.missing,
        selected.len()
    )?;
    writeln!(
        out,
        "\n{:<16} {:>5} {:>7} {:>8} {:>11} {:>8} {:>8}",
        "area", "MUST", "SHOULD", "covered", "untestable", "pending", "missing"
    )?;
    for (area, c) in cov.by_area() {
        writeln!(
            out,
            "{:<16} {:>5} {:>7} {:>8} {:>11} {:>8} {:>8}",
            area, c.must, c.should, c.covered, c.untestable, c.pending, c.missing
        )?;
    }
    if a.verbose {
        writeln!(out)?;
        for e in &cov.entries {
            let r = e.requirement;
            let how = if !e.scenarios.is_empty() {
                e.scenarios.join(", ")
            } else if let Some(why) = &e.untestable {
                format!("untestable: {why}")
            } else if let Some(why) = &e.pending {
                format!("pending: {why}")
            } else {
                "MISSING".to_owned()
            };
            writeln!(out, "{:<16} {:<6} {how}", r.id, r.level.to_string())?;
        }
    }
    let missing: Vec<_> = cov.missing().collect();
    if !missing.is_empty() {
        writeln!(out, "\nWithout a scenario:")?;
        for e in &missing {
            let r = e.requirement;
            writeln!(out, "  {} [{}] {}", r.id, r.level, cut(r.text, 110))?;
        }
    }
    for id in &cov.stale_pending {
        writeln!(
            out,
            "note: {id} is listed as pending but a scenario cites it; drop it from harness/data/pending.yaml"
        )?;
    }
    for id in &cov.stale_untestable {
        writeln!(out, "note: {id} is listed as not black-box testable but a scenario cites it; drop it from the list")?;
    }
    if a.faults {
        let faulted: std::collections::BTreeSet<&str> =
            protomcp_proto::fault::Fault::ALL.iter().map(|f| f.requirement()).collect();
        let musts: Vec<_> = cov
            .entries
            .iter()
            .filter(|e| e.requirement.level == protomcp_harness::requirements::Level::Must && e.untestable.is_none())
            .collect();
        let without: Vec<_> = musts.iter().filter(|e| !faulted.contains(e.requirement.id)).collect();
        writeln!(
            out,
            "\nFaults: {} of {} black-box testable MUST requirements have a fault of the catalogue; {} have none",
            musts.len() - without.len(),
            musts.len(),
            without.len()
        )?;
        for e in &without {
            writeln!(out, "  {} {}", e.requirement.id, cut(e.requirement.text, 110))?;
        }
    }
    let mut adequacy_gaps = 0;
    if let Some(path) = &a.adequacy {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let report: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let gaps =
            protomcp_harness::adequacy::Report::gaps_of_json(&report).with_context(|| path.display().to_string())?;
        let gaps: Vec<_> =
            gaps.into_iter().filter(|(id, _)| party.is_none_or(|p| id.starts_with(p.prefix()))).collect();
        adequacy_gaps = gaps.len();
        writeln!(
            out,
            "\nRequirements whose faults were not killed and attributed ({}): {}",
            path.display(),
            gaps.len()
        )?;
        for (id, faults) in &gaps {
            let level = protomcp_harness::requirements::get(id).map_or(String::from("?"), |r| r.level.to_string());
            writeln!(out, "  {id} [{level}] {}", faults.join(", "))?;
        }
    }
    if let Some(path) = &a.json {
        let rows: Vec<serde_json::Value> = cov
            .entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "id": e.requirement.id,
                    "level": e.requirement.level.to_string(),
                    "feature": e.requirement.feature,
                    "scenarios": e.scenarios,
                    "untestable": e.untestable,
                    "pending": e.pending,
                    "missing": e.missing(),
                })
            })
            .collect();
        let areas: BTreeMap<String, coverage::AreaCounts> = cov.by_area().into_iter().collect();
        let doc = serde_json::json!({"totals": t, "areas": areas, "requirements": rows});
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if missing.is_empty() && cov.stale_untestable.is_empty() && cov.stale_pending.is_empty() && adequacy_gaps == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
