//! `diff` and `merge`: commands on JSON reports of earlier runs (`--json`). The work is
//! `protomcp_harness::runner::{diff, json_report}`'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use protomcp_harness::runner::json_report::{self, Report};
use protomcp_harness::runner::{CaseResult, diff};

use crate::run::output::{ReportFiles, verdict_word, write_report_files};

#[derive(Args)]
pub struct DiffArgs {
    /// The earlier run's JSON report (e.g. the base branch's).
    old: PathBuf,
    /// The later run's JSON report.
    new: PathBuf,
    /// human (default), markdown (a job summary, a pull request comment) or json.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Write it to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Human,
    Markdown,
    Json,
}

#[derive(Args)]
pub struct MergeArgs {
    /// The JSON reports of the shards (`--shard K/N --json FILE`), all N of one run.
    #[arg(required = true, value_name = "REPORT")]
    reports: Vec<PathBuf>,
    /// The reports of the whole run.
    #[command(flatten)]
    files: ReportFiles,
}

fn read(path: &Path) -> std::result::Result<Report, ExitCode> {
    Report::read_file(path).map_err(|e| {
        eprintln!("protomcp-conform: {e}");
        ExitCode::from(2)
    })
}

pub fn diff(a: DiffArgs) -> Result<ExitCode> {
    let (old, new) = match (read(&a.old), read(&a.new)) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(code), _) | (_, Err(code)) => return Ok(code),
    };
    let d = diff::diff(&old, &new);
    let text = match a.format {
        Format::Human => d.human(),
        Format::Markdown => d.markdown(),
        Format::Json => serde_json::to_string_pretty(&d.json())? + "\n",
    };
    match &a.out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(ExitCode::from(u8::from(d.worse)))
}

pub fn merge(a: MergeArgs) -> Result<ExitCode> {
    let mut parts = Vec::new();
    for p in &a.reports {
        match read(p) {
            Ok(r) => parts.push((p.clone(), r)),
            Err(code) => return Ok(code),
        }
    }
    let n = parts.len();
    let whole = match json_report::merge(parts) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("protomcp-conform: merge: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let sides: Vec<(&str, &[CaseResult])> =
        whole.sides.iter().map(|s| (s.target.as_str(), s.results.as_slice())).collect();
    write_report_files(&a.files, &sides, None)?;
    // SARIF (--sarif): see the marked place in `write_report_files`; merge then writes it too.
    let code = whole.exit_code();
    let summary = whole.summary();
    writeln!(
        std::io::stdout().lock(),
        "{}: {summary} ({} scenarios from {n} reports, target: {})",
        verdict_word(code),
        whole.cases().count(),
        whole.name()
    )?;
    Ok(ExitCode::from(code))
}
