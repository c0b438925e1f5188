//! What a run prints and writes besides the verdict lines: folded skips, per-side reports,
//! transcripts.

use std::sync::atomic::AtomicBool;

use super::*;

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

pub(super) fn verdict_word(s: &Summary) -> &'static str {
    match s.exit_code() {
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
) -> Result<()> {
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
    writeln!(out, "\n{}: {summary} ({} scenarios, target: {})", verdict_word(&summary), results.len(), target.name)?;
    if summary.executed() == 0 {
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

/// The files of `--json`, `--transcripts`, `--junit`, `--sarif`, `--badge` and `--html`.
pub(super) fn write_reports(a: &RunArgs, done_sides: &[(Arc<Target>, Vec<CaseResult>)], names: &[&str]) -> Result<()> {
    let all: Vec<&CaseResult> = done_sides.iter().flat_map(|(_, r)| r.iter()).collect();
    let sides: Vec<(&str, &[CaseResult])> = done_sides.iter().map(|(t, r)| (t.name.as_str(), r.as_slice())).collect();
    if let Some(p) = &a.json {
        let v = if let [(t, results)] = done_sides {
            report::json_report(&t.name, results)
        } else {
            // Several targets: every case names its target; the summary is the total.
            let mut cases = Vec::new();
            let mut per_side = Vec::new();
            for (t, results) in done_sides {
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
        let xml = report::junit_report_sides(&sides)?;
        std::fs::write(p, xml).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.sarif {
        let v = runner::sarif::report(&sides);
        std::fs::write(p, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let badge = runner::badge::Badge::of(all.iter().copied());
    for p in &a.badge {
        let text = if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            serde_json::to_string_pretty(&badge.endpoint_json())? + "\n"
        } else {
            badge.svg()
        };
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.html {
        let v: Vec<runner::html::Side<'_>> =
            done_sides.iter().map(|(t, r)| runner::html::Side { target: &t.name, results: r }).collect();
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
            runner::golden::Mode::Check => {
                format!("left as .snap.new: review them, then re-run with --accept to write {}/*.snap", g.dir.display())
            }
            runner::golden::Mode::ReadOnly => "nothing written (CI is set)".to_owned(),
            runner::golden::Mode::Accept => unreachable!("--accept writes them"),
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
