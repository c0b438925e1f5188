//! Reports: the human one (a line per scenario, a summary, details of each failure), JSON and
//! JUnit.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;

use super::golden::Golden;
use super::{CaseResult, Summary, Verdict};

fn colour(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass | Verdict::Xfail => "\x1b[32m",
        Verdict::Skip | Verdict::Blocked => "\x1b[2m",
        Verdict::Warn => "\x1b[33m",
        Verdict::Fail | Verdict::Xpass | Verdict::Error | Verdict::Flaky | Verdict::Leak => "\x1b[31m",
    }
}

/// The one line of a finished scenario.
pub fn line(r: &CaseResult, tty: bool) -> String {
    let v = format!("{:<5}", r.verdict.name());
    let v = if tty { format!("{}{v}\x1b[0m", colour(r.verdict)) } else { v };
    let mut s = format!("{v} {} ({} ms)", r.id, r.duration.as_millis());
    if !r.broken.is_empty() {
        let _ = write!(s, " [broken: {}{}]", r.broken.join(", "), at_check(r));
    }
    if let Some(g) = r.golden.as_ref().filter(|g| !matches!(g, Golden::Same | Golden::NotCompared(_))) {
        let _ = write!(s, " [golden: {}]", g.word());
    }
    if matches!(r.verdict, Verdict::Skip | Verdict::Xfail | Verdict::Xpass | Verdict::Blocked)
        || (r.verdict == Verdict::Pass && !r.message.is_empty())
    {
        let first = r.message.lines().next().unwrap_or("");
        let _ = write!(s, ": {first}");
    }
    s
}

/// ` at step 3` when the result names its check.
fn at_check(r: &CaseResult) -> String {
    r.check.as_ref().map(|c| format!(" at {c}")).unwrap_or_default()
}

/// The command that re-runs one scenario against the same target.
pub fn rerun_command(target_args: &str, id: &str) -> String {
    let mut s = String::from("protomcp-conform");
    if !target_args.is_empty() {
        s.push(' ');
        s.push_str(target_args);
    }
    let _ = write!(s, " --only '{id}'");
    s
}

/// The details of a FAIL, WARN, XPASS or ERROR.
pub fn details(r: &CaseResult, target_args: &str) -> String {
    let mut s = format!("── {} {} ({}, {})\n", r.verdict, r.id, r.level, r.requirements.join(", "));
    let _ = writeln!(s, "   {}", r.title);
    if !r.broken.is_empty() {
        let _ = writeln!(s, "   broken: {}{}", r.broken.join(", "), at_check(r));
    }
    for l in r.message.lines() {
        let _ = writeln!(s, "   {l}");
    }
    if !r.transcript_tail.is_empty() {
        let _ = writeln!(s, "   transcript (last {} lines):", r.transcript_tail.len());
        for l in &r.transcript_tail {
            let _ = writeln!(s, "     {l}");
        }
    }
    if !r.stderr_tail.trim().is_empty() {
        let _ = writeln!(s, "   testee stderr (tail):");
        for l in r.stderr_tail.lines() {
            let _ = writeln!(s, "     {l}");
        }
    }
    if !r.command.is_empty() {
        let _ = writeln!(s, "   testee: {}", r.command.join(" "));
    }
    let _ = writeln!(s, "   re-run: {}", rerun_command(target_args, &r.id));
    s
}

/// The diff of a transcript that changed against its golden file (or that was new), for a
/// person; `None` for the others.
pub fn golden_details(r: &CaseResult, dir: &std::path::Path) -> Option<String> {
    let (word, diff) = match r.golden.as_ref()? {
        Golden::Changed { diff } => ("CHANGED", diff.as_str()),
        Golden::New => ("NEW", ""),
        Golden::Accepted { diff } => ("accepted", diff.as_str()),
        _ => return None,
    };
    let file = dir.join(format!("{}.snap", r.id));
    let mut s = format!("── golden {word} {} ({}, verdict {})\n", r.id, file.display(), r.verdict);
    if diff.is_empty() {
        let _ = writeln!(s, "   no golden file before this run");
    }
    for l in diff.lines() {
        let _ = writeln!(s, "   {l}");
    }
    Some(s)
}

/// One case of the JSON report: everything the other reports (JUnit, HTML, SARIF) read of it,
/// so that [`super::json_report::read`] gives the same result back (`merge` writes them from
/// reports). The transcript (normalized) and its raw tail only for a case shown in detail
/// ([`CaseResult::detailed`]).
pub fn json_case(r: &CaseResult) -> serde_json::Value {
    let mut v = json!({
        "id": r.id,
        "title": r.title,
        "file": r.file,
        "step_line": r.step_line,
        "requirements": r.requirements,
        "broken": r.broken,
        "check": r.check.as_ref().map(ToString::to_string),
        "root_cause": r.root_cause,
        "findings": r.findings,
        "known_used": r.known_used,
        "held": r.held,
        "level": r.level.to_string(),
        "verdict": r.verdict.name(),
        "message": r.message,
        "duration_ms": u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
        "started_ms": r.started.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        "runs": r.runs.iter().map(|(v, m)| json!({"verdict": v.name(), "message": m})).collect::<Vec<_>>(),
        "intermittent": r.intermittent,
        "resources": r.resources,
        "golden": r.golden.as_ref().map(Golden::json),
        "stderr_tail": r.stderr_tail,
        "command": r.command,
    });
    if r.detailed() {
        v["transcript_tail"] = json!(r.transcript_tail);
        v["transcript"] = json!(r.transcript_text());
    }
    v
}

/// The JSON report.
pub fn json_report(target: &str, results: &[CaseResult]) -> serde_json::Value {
    let summary = Summary::of(results.iter().map(|r| r.verdict));
    let cases: Vec<_> = results.iter().map(json_case).collect();
    json!({"target": target, "summary": summary, "root_causes": super::root_causes(results), "cases": cases})
}

/// The JSON report of a run against one target or several: with several, the target is their
/// names joined by ` + `, the summary is the total, `sides` has each target's summary and every
/// case names its target.
pub fn json_report_sides(sides: &[(&str, &[CaseResult])]) -> serde_json::Value {
    if let [(target, results)] = sides {
        return json_report(target, results);
    }
    let mut cases = Vec::new();
    let mut per_side = Vec::new();
    for (target, results) in sides {
        for r in *results {
            let mut c = json_case(r);
            c["target"] = serde_json::Value::from(*target);
            cases.push(c);
        }
        per_side.push(json!({
            "target": target,
            "summary": Summary::of(results.iter().map(|r| r.verdict)),
            "root_causes": super::root_causes(*results),
        }));
    }
    let names: Vec<&str> = sides.iter().map(|(t, _)| *t).collect();
    json!({
        "target": names.join(" + "),
        "summary": Summary::of(sides.iter().flat_map(|(_, r)| r.iter().map(|r| r.verdict))),
        "sides": per_side,
        "cases": cases,
    })
}

/// The JUnit XML report.
pub fn junit_report(target: &str, results: &[CaseResult]) -> Result<String, quick_junit::SerializeError> {
    junit_report_sides(&[(target, results)])
}

/// The JUnit XML report of a run against several targets: one test suite per target.
pub fn junit_report_sides(sides: &[(&str, &[CaseResult])]) -> Result<String, quick_junit::SerializeError> {
    use quick_junit::Report;
    let mut report = Report::new("protomcp-conform");
    for (target, results) in sides {
        report.add_test_suite(junit_suite(target, results));
    }
    report.to_string()
}

fn junit_suite(target: &str, results: &[CaseResult]) -> quick_junit::TestSuite {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new(target);
    for r in results {
        let status = match r.verdict {
            Verdict::Pass | Verdict::Xfail | Verdict::Warn => TestCaseStatus::success(),
            // Not reached: its root cause is one failing test case of its own (below).
            Verdict::Skip | Verdict::Blocked => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(r.message.as_str());
                if r.verdict == Verdict::Blocked {
                    s.set_type("BLOCKED");
                }
                s
            }
            Verdict::Fail | Verdict::Xpass | Verdict::Flaky | Verdict::Leak => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(r.message.lines().next().unwrap_or(""));
                s.set_type(r.verdict.name());
                s.set_description(r.message.as_str());
                s
            }
            Verdict::Error => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                s.set_message(r.message.lines().next().unwrap_or(""));
                s.set_description(r.message.as_str());
                s
            }
        };
        let mut case = TestCase::new(r.id.as_str(), status);
        case.set_classname(r.id.split('.').next().unwrap_or(""));
        // The requirements cited, and for a non-PASS the ones the failing step broke.
        case.add_property(quick_junit::Property::new("requirements", r.requirements.join(",")));
        if !r.broken.is_empty() {
            case.add_property(quick_junit::Property::new("broken", r.broken.join(",")));
        }
        if let Some(c) = &r.check {
            case.add_property(quick_junit::Property::new("check", c.to_string()));
        }
        // In whole milliseconds, as the JSON report keeps it (a merged report writes the same).
        case.set_time(Duration::from_millis(u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX)));
        if !r.stderr_tail.is_empty() {
            case.set_system_err(r.stderr_tail.as_str());
        }
        // Beside the verdict: how the transcript compares with its golden file.
        if let Some(g) = &r.golden {
            case.add_property(quick_junit::Property::new("golden", g.word().to_lowercase()));
            if let Golden::Changed { diff } = g {
                case.set_system_out(diff.as_str());
            }
        }
        suite.add_test_case(case);
    }
    // Each root cause once, as the failure of the precondition it is, naming the cases it blocked.
    for c in super::root_causes(results) {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(c.line());
        s.set_type("ROOT CAUSE");
        s.set_description(format!("blocked (not reached):\n{}", c.cases.join("\n")));
        let mut case = TestCase::new(format!("root cause: {} at {}", c.requirements.join(", "), c.precondition), s);
        case.set_classname("root-cause");
        case.add_property(quick_junit::Property::new("broken", c.requirements.join(",")));
        case.add_property(quick_junit::Property::new("blocked", c.cases.len().to_string()));
        suite.add_test_case(case);
    }
    suite
}
