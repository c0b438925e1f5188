//! The SARIF 2.1.0 report (`--sarif FILE`), for code scanning: one rule per requirement the run's
//! scenarios cite or broke, one result per requirement a scenario broke (its `broken` list),
//! located at the scenario file and the line of the step that failed.
//!
//! A pure function of the results of each side (target) of a run, as the JUnit writer takes
//! them, and of the requirement tables: the same results give the same bytes (no times, no
//! paths of this machine beyond the scenario files), so a report built from merged results is
//! the report of one run with them.
//!
//! Mapping:
//! - a rule's `defaultConfiguration.level` is its requirement's level: MUST `error`, SHOULD
//!   `warning`, MAY `note`;
//! - a result is `kind: fail`; its level is its requirement's, but a LEAK is `error` (it fails
//!   the run at any level) and a FLAKY `warning` (only some runs broke it); a MAY in a failing
//!   step's `broken` list (beside a stronger requirement) gives no result;
//! - an XFAIL (the known-failures file lists it) is a result with a suppression of kind
//!   `external` whose justification is the known failure's message;
//! - an ERROR (the harness could not judge) breaks no requirement: it is a tool execution
//!   notification, and the invocation is then not successful; XPASS (a stale known-failures
//!   entry) and SKIP give nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{CaseResult, Summary, Verdict};
use crate::requirements::{self, Level, Requirement};

/// Where SARIF 2.1.0's schema is published (OASIS, errata 01).
pub const SCHEMA_URI: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The key of every result's partial fingerprint: target, scenario and requirement, which stay
/// the same from one run to the next while the failure does.
pub const FINGERPRINT: &str = "protomcpConformCase/v1";

/// The SARIF level of a requirement level.
pub fn level(l: Level) -> &'static str {
    match l {
        Level::Must => "error",
        Level::Should => "warning",
        Level::May => "note",
    }
}

/// The SARIF log of a run against `sides` (target name, its results).
pub fn report(sides: &[(&str, &[CaseResult])]) -> Value {
    let all = || sides.iter().flat_map(|(t, rs)| rs.iter().map(move |r| (*t, r)));
    // Every requirement cited or broken, in spec order; unknown IDs (a scenario of another
    // catalogue) after them, by name.
    let mut ids: Vec<&str> =
        all().flat_map(|(_, r)| r.requirements.iter().chain(&r.broken)).map(String::as_str).collect();
    ids.sort_by(|a, b| requirements::spec_order(a).cmp(&requirements::spec_order(b)).then(a.cmp(b)));
    ids.dedup();
    let index: BTreeMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let rules: Vec<Value> = ids.iter().map(|id| rule(id, requirements::any(id))).collect();

    let mut results = Vec::new();
    let mut notifications = Vec::new();
    for (target, r) in all() {
        if r.verdict == Verdict::Error {
            notifications.push(json!({
                "level": "error",
                "message": {"text": format!("{} ({target}): ERROR, the harness could not judge: {}", r.id, r.message)},
                "locations": [location(r)],
                "properties": {"scenario": r.id, "target": target},
            }));
            continue;
        }
        if !matches!(r.verdict, Verdict::Fail | Verdict::Warn | Verdict::Xfail | Verdict::Leak | Verdict::Flaky) {
            continue;
        }
        // A failure without a step's attribution (none was running) broke what the scenario cites.
        // A MAY among them was not broken (what a MAY allows never fails): the step checks it
        // beside a stronger one.
        let broken = if r.broken.is_empty() { &r.requirements } else { &r.broken };
        for id in broken.iter().filter(|id| requirements::any(id).is_none_or(|q| q.level != Level::May)) {
            results.push(result(target, r, id, index[id.as_str()]));
        }
    }
    let summary = Summary::of(all().map(|(_, r)| r.verdict));
    let per_target: Vec<Value> = sides
        .iter()
        .map(|(t, rs)| json!({"target": t, "summary": Summary::of(rs.iter().map(|r| r.verdict))}))
        .collect();
    json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "protomcp-conform",
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "informationUri": env!("CARGO_PKG_REPOSITORY"),
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": summary.error == 0,
                "exitCode": summary.exit_code(),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
            "columnKind": "unicodeCodePoints",
            "properties": {
                "targets": sides.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
                "summary": summary,
                "sides": per_target,
            },
        }],
    })
}

fn rule(id: &str, req: Option<&Requirement>) -> Value {
    let explain = format!("protomcp-conform explain {id}");
    let Some(req) = req else {
        return json!({
            "id": id,
            "shortDescription": {"text": id},
            "help": {"text": format!("Not in the requirement tables of this version; `{explain}` may say more.")},
        });
    };
    let head = match req.feature {
        Some(f) => format!("{} [{} · {f}]", req.id, req.level),
        None => format!("{} [{}]", req.id, req.level),
    };
    let party = match req.party() {
        requirements::Party::Bridge => "bridge",
        requirements::Party::ToolProcess => "tool-process",
    };
    let mut tags = vec!["protomcp".to_owned(), req.level.to_string(), party.to_owned()];
    tags.extend(req.feature.map(str::to_owned));
    json!({
        "id": req.id,
        "shortDescription": {"text": short(req.text)},
        "fullDescription": {"text": req.text},
        "defaultConfiguration": {"level": level(req.level)},
        "help": {
            "text": format!("{head} {}\n\nThe scenarios that check it, and how to re-run one: `{explain}`.", req.text),
            "markdown": format!("**{head}** {}\n\nThe scenarios that check it, and how to re-run one: `{explain}`", req.text),
        },
        "properties": {"tags": tags, "precision": "very-high"},
    })
}

/// The first sentence of a requirement's text (its short description).
fn short(text: &str) -> &str {
    match text.find(". ") {
        Some(i) => &text[..=i],
        None => text,
    }
}

fn result(target: &str, r: &CaseResult, id: &str, rule_index: usize) -> Value {
    let req = requirements::any(id);
    let lvl = match r.verdict {
        Verdict::Leak => "error",
        Verdict::Flaky => "warning",
        _ => req.map_or("error", |q| level(q.level)),
    };
    let first = r.message.lines().next().unwrap_or("");
    let mut text = format!("{id} broken: {} {} against {target}", r.verdict, r.id);
    if !r.title.is_empty() {
        let _ = write!(text, " ({})", r.title);
    }
    let _ = write!(text, ": {}", r.message);
    let mut v = json!({
        "ruleId": id,
        "ruleIndex": rule_index,
        "kind": "fail",
        "level": lvl,
        "message": {"text": text},
        "locations": [location(r)],
        "partialFingerprints": {FINGERPRINT: format!("{target}/{}/{id}", r.id)},
        "properties": {"scenario": r.id, "target": target, "verdict": r.verdict.name(), "scenarioLevel": r.level.to_string()},
    });
    if r.verdict == Verdict::Xfail {
        v["suppressions"] = json!([{"kind": "external", "status": "accepted", "justification": first}]);
    }
    v
}

/// The scenario file and the failing step's line (the file's first line when no step failed).
fn location(r: &CaseResult) -> Value {
    let uri = file_uri(&r.file);
    json!({
        "physicalLocation": {
            "artifactLocation": {"uri": uri},
            "region": {"startLine": r.step_line.unwrap_or(1).max(1)},
        },
        "logicalLocations": [{"name": r.id, "kind": "object"}],
    })
}

/// A scenario file's path as a URI reference: a relative path stays relative (GitHub resolves it
/// against the repository's root), an absolute one becomes a `file://` URI; characters outside
/// the unreserved set and `/` are percent-encoded.
pub fn file_uri(path: &str) -> String {
    let mut out = String::new();
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, verdict: Verdict, broken: &[&str]) -> CaseResult {
        let mut r = CaseResult::blank(id);
        r.file = "scenarios/calls/echo.yaml".into();
        r.requirements = vec!["TP-CALL-01".into(), "TP-CALL-03".into()];
        r.broken = broken.iter().map(|s| (*s).to_owned()).collect();
        r.verdict = verdict;
        r.step_line = (!broken.is_empty()).then_some(12);
        r.message = format!("{verdict} message\nsecond line");
        r
    }

    #[test]
    fn a_result_per_broken_requirement_at_the_failing_step_and_a_suppression_for_a_known_failure() {
        let rs = vec![
            case("calls.echo", Verdict::Fail, &["TP-CALL-01", "TP-CALL-03"]),
            case("calls.add", Verdict::Xfail, &["TP-CALL-03"]),
            case("calls.ok", Verdict::Pass, &[]),
            case("calls.err", Verdict::Error, &[]),
            case("calls.skip", Verdict::Skip, &[]),
        ];
        let v = report(&[("t", &rs)]);
        let run = &v["runs"][0];
        let rules: Vec<&str> =
            run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(rules, ["TP-CALL-01", "TP-CALL-03"]);
        let results = run["results"].as_array().unwrap();
        assert_eq!(results.len(), 3, "{results:#?}");
        assert_eq!(results[0]["ruleId"], "TP-CALL-01");
        assert_eq!(results[0]["ruleIndex"], 0);
        assert_eq!(results[1]["ruleIndex"], 1);
        assert_eq!(results[0]["level"], "error");
        assert_eq!(results[0]["locations"][0]["physicalLocation"]["region"]["startLine"], 12);
        assert_eq!(
            results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "scenarios/calls/echo.yaml"
        );
        assert!(results[0].get("suppressions").is_none());
        assert_eq!(results[2]["suppressions"][0]["kind"], "external");
        assert_eq!(results[2]["suppressions"][0]["justification"], "XFAIL message");
        let inv = &run["invocations"][0];
        assert_eq!(inv["executionSuccessful"], false);
        assert_eq!(inv["toolExecutionNotifications"].as_array().unwrap().len(), 1);
        assert_eq!(run["properties"]["summary"]["fail"], 1);
    }

    #[test]
    fn rule_levels_follow_the_requirement_levels() {
        let must = requirements::all().iter().find(|r| r.level == Level::Must).unwrap();
        let should = requirements::all().iter().find(|r| r.level == Level::Should).unwrap();
        assert_eq!(rule(must.id, Some(must))["defaultConfiguration"]["level"], "error");
        assert_eq!(rule(should.id, Some(should))["defaultConfiguration"]["level"], "warning");
        assert!(
            rule(must.id, Some(must))["help"]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("protomcp-conform explain {}", must.id))
        );
    }

    #[test]
    fn file_uris_are_relative_or_file_urls_and_percent_encoded() {
        assert_eq!(file_uri("scenarios/calls/echo.yaml"), "scenarios/calls/echo.yaml");
        assert_eq!(file_uri("/tmp/my scenarios/a.yaml"), "file:///tmp/my%20scenarios/a.yaml");
    }
}
