//! What a run prints and writes besides the verdict lines: folded skips, per-side reports,
//! transcripts.

use std::sync::atomic::AtomicBool;

use super::{Arc, CaseResult, Context, Path, PathBuf, Result, RunArgs, Summary, Target, Write, report, runner};

/// The skipped scenarios, one line per reason (the first line of the message) with a count,
/// most frequent first: a reason of one scenario is its usual line, one of two or three names
/// them.
pub(super) fn folded_skips(results: &[CaseResult], tty: bool) -> Vec<String> {
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

pub(super) fn write_transcripts<'a>(dir: &Path, results: impl Iterator<Item = &'a CaseResult>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for r in results {
        let p = dir.join(format!("{}.txt", r.id));
        std::fs::write(&p, r.transcript_text()).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

pub(crate) fn verdict_word(code: u8) -> &'static str {
    match code {
        0 => "OK",
        1 => "FAILED",
        _ => "ERROR",
    }
}

/// The report of one side after its verdict lines: folded skips, the details of what did not
/// pass, golden changes, and the side's summary lines.
pub(super) fn print_side(
    target: &Target,
    results: &[CaseResult],
    golden: Option<&runner::golden::GoldenDir>,
    args: &str,
    verbose: bool,
    tty: bool,
    sharded: bool,
) -> Result<()> {
    let summary = Summary::of(results.iter().map(|r| r.verdict));
    let code = if sharded { summary.shard_exit_code() } else { summary.exit_code() };
    let bad: Vec<&CaseResult> = results.iter().filter(|r| r.verdict.unexpected()).collect();
    let mut out = std::io::stdout().lock();
    if !verbose {
        for l in folded_skips(results, tty) {
            writeln!(out, "{l}")?;
        }
    }
    if !bad.is_empty() {
        writeln!(out)?;
        for r in &bad {
            write!(out, "{}", report::details(r, args))?;
        }
    }
    if let Some(g) = golden {
        let changed: Vec<String> = results.iter().filter_map(|r| report::golden_details(r, &g.dir)).collect();
        if !changed.is_empty() {
            writeln!(out)?;
            for c in changed {
                write!(out, "{c}")?;
            }
        }
    }
    root_cause_lines(&mut out, results, verbose)?;
    for line in runner::target::target_wide_lines(&target.known_failures, results) {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "\n{}: {summary} ({} scenarios, target: {})", verdict_word(code), results.len(), target.name)?;
    if summary.executed() == 0 && !sharded {
        writeln!(out, "no scenario was executed: a vacuous run is an error")?;
    }
    if let Some(line) = protomcp_harness::io::resources::summary(results.iter().filter_map(|r| r.resources.as_ref())) {
        writeln!(out, "{line}")?;
    }
    if let Some(g) = golden
        && let Some(line) = runner::golden::summary(&g.dir, results.iter().filter_map(|r| r.golden.as_ref()))
    {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Each root cause of the BLOCKED cases once: the requirement and the precondition it broke, the
/// count of cases it blocked and the first one's message; with `verbose`, the cases.
fn root_cause_lines(out: &mut impl Write, results: &[CaseResult], verbose: bool) -> Result<()> {
    let causes = runner::root_causes(results);
    if causes.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    for c in causes {
        writeln!(out, "{}", c.line())?;
        if verbose {
            for id in &c.cases {
                writeln!(out, "  blocked: {id}")?;
            }
        }
    }
    Ok(())
}

/// The files of `--json`, `--transcripts`, `--junit` and `--html`.
pub(super) fn write_reports(
    a: &RunArgs,
    done_sides: &[(Arc<Target>, Vec<CaseResult>)],
    shard: Option<runner::json_report::ShardOf>,
) -> Result<()> {
    let sides: Vec<(&str, &[CaseResult])> = done_sides.iter().map(|(t, r)| (t.name.as_str(), r.as_slice())).collect();
    write_report_files(&a.files, &sides, shard)?;
    if let Some(dir) = &a.transcripts {
        write_transcripts(dir, done_sides.iter().flat_map(|(_, r)| r.iter()))?;
    }
    Ok(())
}

/// Where the reports of a run (or of merged shards) go.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ReportFiles {
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Write a SARIF 2.1.0 report here, for code scanning: a rule per requirement, a result per
    /// requirement a scenario broke at the scenario file and the failing step's line, known
    /// failures as suppressed results (docs/ci.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) sarif: Option<PathBuf>,
    /// Write a badge here: "protomcp conformance | N/M MUST" (MUST scenarios without a MUST
    /// broken over those executed; green, yellow with a WARN or XFAIL, red when the run fails),
    /// a flat SVG, or shields.io's endpoint JSON ({schemaVersion, label, message, color}) when
    /// FILE ends in .json. Repeatable (e.g. --badge b.svg --badge b.json).
    #[arg(long, value_name = "FILE")]
    pub(crate) badge: Vec<PathBuf>,
    /// Write an HTML report here: one self-contained file (summary, per-area bars, requirement ×
    /// verdict filterable by verdict, level and area, every scenario not passing with its
    /// transcript).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
}

/// The JSON, JUnit and HTML reports of the results of each target (`shard`: the part of a
/// sharded run they are, written into the JSON).
pub(crate) fn write_report_files(
    files: &ReportFiles,
    sides: &[(&str, &[CaseResult])],
    shard: Option<runner::json_report::ShardOf>,
) -> Result<()> {
    if let Some(p) = &files.json {
        let mut v = report::json_report_sides(sides);
        if let Some(s) = shard {
            v["shard"] = serde_json::json!(s);
        }
        std::fs::write(p, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &files.junit {
        let xml = report::junit_report_sides(sides)?;
        std::fs::write(p, xml).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &files.sarif {
        let v = runner::sarif::report(sides);
        std::fs::write(p, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let badge = runner::badge::Badge::of(sides.iter().flat_map(|(_, r)| r.iter()));
    for p in &files.badge {
        let text = if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            serde_json::to_string_pretty(&badge.endpoint_json())? + "\n"
        } else {
            badge.svg()
        };
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &files.html {
        let v: Vec<runner::html::Side<'_>> =
            sides.iter().map(|(target, results)| runner::html::Side { target, results }).collect();
        let names: Vec<&str> = sides.iter().map(|(t, _)| *t).collect();
        std::fs::write(p, runner::html::report(&names.join(" + "), &v))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// The golden verdict of a run as an exit code (0: nothing new or changed; 1: transcripts to
/// review; 2: comparisons that failed), after the line that counts the changes.
pub(super) fn golden_exit(
    g: &runner::golden::GoldenDir,
    done_sides: &[(Arc<Target>, Vec<CaseResult>)],
    golden_failed: &AtomicBool,
) -> Result<u8> {
    let mut exit = 0;
    let unaccepted =
        done_sides.iter().flat_map(|(_, r)| r.iter()).filter(|r| r.golden.as_ref().is_some_and(|g| g.unaccepted()));
    let n = unaccepted.count();
    if n > 0 {
        let hint = match g.mode {
            runner::golden::GoldenMode::Check => {
                format!("left as .snap.new: review them, then re-run with --accept to write {}/*.snap", g.dir.display())
            }
            runner::golden::GoldenMode::ReadOnly => "nothing written (CI is set)".to_owned(),
            runner::golden::GoldenMode::Accept => unreachable!("--accept writes them"),
        };
        writeln!(std::io::stdout().lock(), "golden: {n} transcript(s) new or changed ({hint})")?;
        exit = 1;
    }
    if golden_failed.load(std::sync::atomic::Ordering::Relaxed) {
        exit = 2;
    }
    Ok(exit)
}

/// The TOTAL line of a run with several sides.
pub(super) fn print_total(exit: u8, all: &[&CaseResult], names: &[&str]) -> Result<()> {
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
    Ok(())
}
