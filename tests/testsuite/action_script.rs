//! The GitHub Action: `.github/action/run.sh` (its logic) run locally with a fake
//! GITHUB_STEP_SUMMARY and GITHUB_OUTPUT writes the summary and the outputs and passes the run's
//! exit status on; `action.yml` and every workflow and manifest of `docs/ci.md` parse.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{EXE, Sandbox, text};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Action {
    summary: String,
    outputs: BTreeMap<String, String>,
    out: Output,
    dir: PathBuf,
}

fn run_action(sb: &Sandbox, name: &str, inputs: &[(&str, &str)]) -> Action {
    let dir = sb.dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let summary = dir.join("summary.md");
    let output = dir.join("output.txt");
    let mut c = Command::new("bash");
    c.arg(root().join(".github/action/run.sh"))
        .arg("run")
        .env("PROTOMCP_CONFORM_TMPDIR", sb.root())
        .env("PROTOMCP_CONFORM_BIN", EXE)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &output)
        .env("OUT_DIR", dir.join("reports"))
        .stdin(std::process::Stdio::null());
    std::fs::create_dir_all(sb.root()).unwrap();
    for (k, v) in inputs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let outputs = std::fs::read_to_string(&output)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    Action { summary: std::fs::read_to_string(&summary).unwrap_or_default(), outputs, out, dir }
}

#[test]
fn the_action_script_writes_a_summary_and_outputs_and_passes_the_exit_status_on() {
    let sb = Sandbox::new();
    // The default run (both sides), clean.
    let a = run_action(&sb, "clean", &[("INPUT_ARGS", "--only calls.echo --only bridge.mcp.ping-before-initialize")]);
    assert_eq!(a.out.status.code(), Some(0), "{}", text(&a.out));
    assert!(a.summary.starts_with("## protomcp-conform: OK\n"), "{}", a.summary);
    assert!(a.summary.contains("| reference testee | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |"), "{}", a.summary);
    assert!(a.summary.contains("| reference bridge (stdio) | 1 | 0 |"), "{}", a.summary);
    assert!(a.summary.contains("| **total** | 2 | 0 |"), "{}", a.summary);
    assert!(a.summary.contains("No unexpected case."), "{}", a.summary);
    assert_eq!(a.outputs["exit-code"], "0");
    assert_eq!(a.outputs["pass"], "2");
    for key in ["json", "junit", "html", "badge", "badge-json"] {
        let p = PathBuf::from(&a.outputs[key]);
        assert!(p.starts_with(a.dir.join("reports")) && p.is_file(), "{key}: {}", p.display());
    }
    assert!(!a.outputs.contains_key("sarif"), "SARIF without sarif: true");
    let badge: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a.outputs["badge-json"]).unwrap()).unwrap();
    assert_eq!(
        (badge["message"].as_str(), badge["color"].as_str()),
        (Some("2/2 MUST"), Some("brightgreen")),
        "{badge}"
    );
    // A testee that breaks rules: exit status 1, the unexpected cases listed with what they broke.
    let testee = format!("{EXE} testee --misbehave wrong-rid");
    let a = run_action(
        &sb,
        "failing",
        &[("INPUT_TESTEE", &testee), ("INPUT_ARGS", "--only calls.echo --only calls.add"), ("INPUT_SARIF", "true")],
    );
    assert_eq!(a.out.status.code(), Some(1), "{}", text(&a.out));
    assert!(a.summary.starts_with("## protomcp-conform: FAILED\n"), "{}", a.summary);
    assert!(a.summary.contains("### Unexpected (2)"), "{}", a.summary);
    assert!(
        a.summary
            .contains("- **FAIL** `calls.echo` (broken: TP-CALL-01, TP-CALL-03 at step 3): scenarios/calls/echo.yaml:"),
        "{}",
        a.summary
    );
    assert_eq!(a.outputs["exit-code"], "1");
    assert_eq!(a.outputs["fail"], "2");
    // A testee that never connects: one root cause with the count of cases it blocked, no
    // unexpected case.
    let blk = run_action(
        &sb,
        "blocked",
        &[("INPUT_TESTEE", "/bin/false"), ("INPUT_ARGS", "--only calls.echo --only calls.add")],
    );
    assert_eq!(blk.out.status.code(), Some(1), "{}", text(&blk.out));
    assert!(blk.summary.contains("| 0 | 0 | 2 |\n"), "the blocked column: {}", blk.summary);
    assert!(blk.summary.contains("### Root causes (1)"), "{}", blk.summary);
    assert!(
        blk.summary
            .contains("- **ROOT CAUSE** TP-CONN-01 at `connect`: blocked 2 case(s), not reached: scenarios/calls/"),
        "{}",
        blk.summary
    );
    assert!(blk.summary.contains("No unexpected case."), "{}", blk.summary);
    assert_eq!(blk.outputs["blocked"], "2");
    // compare-to that report: calls.echo is now a known failure (FAIL → XFAIL, changed, not
    // worse), calls.add fails as before; the diff follows the summary and is in diff.md.
    let kf = sb.file(
        "kf-echo.yaml",
        "calls.echo: {requirement: [TP-CALL-01, TP-CALL-03], check: step 3, reason: answers under the wrong rid}\n",
    );
    let before = a.outputs["json"].clone();
    let c = run_action(
        &sb,
        "compare",
        &[
            ("INPUT_TESTEE", &testee),
            ("INPUT_ARGS", "--only calls.echo --only calls.add"),
            ("INPUT_KNOWN_FAILURES", kf.to_str().unwrap()),
            ("INPUT_COMPARE_TO", &before),
        ],
    );
    assert_eq!(c.out.status.code(), Some(1), "the run's status: {}", text(&c.out));
    assert_eq!(c.outputs["diff-worse"], "false", "{}", c.summary);
    let md = std::fs::read_to_string(&c.outputs["diff"]).unwrap();
    assert!(md.starts_with("## protomcp-conform diff: nothing got worse\n"), "{md}");
    assert!(
        md.contains("|  | changed | `calls.echo` | FAIL (TP-CALL-01, TP-CALL-03) | XFAIL (TP-CALL-01, TP-CALL-03) |"),
        "{md}"
    );
    assert!(!md.contains("`calls.add`"), "{md}");
    assert!(c.summary.contains("### Unexpected (1)") && c.summary.ends_with(&format!("\n{md}")), "{}", c.summary);
    // And the other way round: worse; compare-to a path that does not exist: a note, no diff.
    let c2 = run_action(
        &sb,
        "compare-back",
        &[
            ("INPUT_TESTEE", &testee),
            ("INPUT_ARGS", "--only calls.echo --only calls.add"),
            ("INPUT_COMPARE_TO", &c.outputs["json"]),
        ],
    );
    assert_eq!(c2.outputs["diff-worse"], "true", "{}", c2.summary);
    assert!(c2.summary.contains("| ❌ | newly broken | `calls.echo` | XFAIL"), "{}", c2.summary);
    let c3 = run_action(
        &sb,
        "compare-none",
        &[("INPUT_ARGS", "--only calls.echo"), ("INPUT_COMPARE_TO", "/nonexistent/report.json")],
    );
    assert_eq!(c3.out.status.code(), Some(0), "{}", text(&c3.out));
    assert!(c3.summary.contains("No report to compare to at `/nonexistent/report.json`"), "{}", c3.summary);
    assert!(!c3.outputs.contains_key("diff"));
    // A file that is not a report: exit status 2.
    let junk = sb.file("junk.json", "{\"target\": 1}");
    let c4 = run_action(
        &sb,
        "compare-junk",
        &[("INPUT_ARGS", "--only calls.echo"), ("INPUT_COMPARE_TO", junk.to_str().unwrap())],
    );
    assert_eq!(c4.out.status.code(), Some(2), "{}", text(&c4.out));
    assert!(String::from_utf8_lossy(&c4.out.stderr).contains("junk.json:1:"), "{}", text(&c4.out));
    // sarif: true: the SARIF report, with the results the failures broke, for the upload step.
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a.outputs["sarif"]).unwrap()).unwrap();
    let rules: Vec<&str> =
        sarif["runs"][0]["results"].as_array().unwrap().iter().map(|r| r["ruleId"].as_str().unwrap()).collect();
    assert!(rules.contains(&"TP-CALL-01") && rules.contains(&"TP-CALL-03"), "{rules:?}");
    // Golden transcripts: written locally, then one edited as if the target had sent another
    // result before; the action (CI set) shows it with its diff and writes nothing.
    let golden = sb.dir.path().join("golden");
    let o = sb
        .cmd()
        .args(["--only", "calls.echo", "--golden"])
        .arg(&golden)
        .arg("--accept")
        .env_remove("CI")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let snap = golden.join("calls.echo.snap");
    let before = std::fs::read_to_string(&snap).unwrap().replacen("\"call_result\"", "\"call_result_before\"", 1);
    std::fs::write(&snap, before).unwrap();
    let a = run_action(
        &sb,
        "golden",
        &[("INPUT_GOLDEN", golden.to_str().unwrap()), ("INPUT_ARGS", "--only calls.echo"), ("CI", "true")],
    );
    assert_eq!(a.out.status.code(), Some(1), "{}", text(&a.out));
    assert!(a.summary.contains("No unexpected case."), "{}", a.summary);
    assert!(a.summary.contains("### Golden transcripts new or changed (1)"), "{}", a.summary);
    assert!(a.summary.contains("<b>CHANGED</b> <code>calls.echo</code> (verdict PASS)"), "{}", a.summary);
    assert!(a.summary.contains("```diff\n--- golden\n+++ this run\n"), "{}", a.summary);
    assert!(!golden.join("calls.echo.snap.new").exists(), "CI wrote a pending file");
    // A sarif input that is neither true nor false is a usage error.
    let a = run_action(&sb, "sarif-usage", &[("INPUT_SARIF", "yes")]);
    assert_eq!(a.out.status.code(), Some(2), "{}", text(&a.out));
    assert!(String::from_utf8_lossy(&a.out.stderr).contains("sarif must be true or false"));
    // Two targets at once is a usage error of the action, before anything runs.
    let a = run_action(&sb, "usage", &[("INPUT_TESTEE", &testee), ("INPUT_SDK", ".")]);
    assert_eq!(a.out.status.code(), Some(2), "{}", text(&a.out));
    assert!(String::from_utf8_lossy(&a.out.stderr).contains("at most one of sdk, testee, bridge"));
    sb.assert_clean();
}

/// The fenced blocks of `lang` in a markdown text.
fn blocks<'a>(md: &'a str, lang: &str) -> Vec<&'a str> {
    let open = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = md;
    while let Some(i) = rest.find(&open) {
        let body = &rest[i + open.len()..];
        let end = body.find("\n```").expect("a closed block");
        out.push(&body[..end + 1]);
        rest = &body[end + 4..];
    }
    out
}

#[test]
fn action_yml_and_the_workflows_and_manifests_of_docs_ci_md_parse() {
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("action.yml")).unwrap()).unwrap();
    assert_eq!(action["runs"]["using"], "composite");
    let inputs: Vec<&str> = action["inputs"].as_object().unwrap().keys().map(String::as_str).collect();
    for i in ["sdk", "testee", "bridge", "known-failures", "compare-to", "args", "version", "sarif", "sarif-category"] {
        assert!(inputs.contains(&i), "input {i}");
    }
    let steps = action["runs"]["steps"].as_array().unwrap();
    // sarif: true uploads the run's SARIF file for code scanning, in its category.
    let upload = steps
        .iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("github/codeql-action/upload-sarif@")))
        .expect("an upload-sarif step");
    assert_eq!(upload["with"]["sarif_file"], "${{ steps.run.outputs.sarif }}");
    assert_eq!(upload["with"]["category"], "${{ inputs.sarif-category }}");
    assert!(upload["if"].as_str().unwrap().contains("inputs.sarif == 'true'"), "{upload}");
    assert!(steps.iter().any(|s| s["run"].as_str().is_some_and(|r| r.contains(".github/action/run.sh\" run"))));
    let md = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let workflows = blocks(&md, "yaml");
    assert!(workflows.len() >= 6, "{} workflows", workflows.len());
    for w in &workflows {
        let v: serde_json::Value = serde_saphyr::from_str(w).unwrap_or_else(|e| panic!("{e}\n{w}"));
        // The ClusterFuzzLite workflows fuzz this repository's own targets; they use no action of ours.
        if w.contains("google/clusterfuzzlite/actions/") {
            continue;
        }
        let jobs = v["jobs"].as_object().unwrap_or_else(|| panic!("no jobs: {w}"));
        let uses: Vec<&serde_json::Value> = jobs
            .values()
            .flat_map(|j| j["steps"].as_array().unwrap().iter())
            .filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("protomcp-conform/protomcp-conform@")))
            .collect();
        assert_eq!(uses.len(), 1, "{w}");
        if let Some(with) = uses[0]["with"].as_object() {
            for k in with.keys() {
                assert!(inputs.contains(&k.as_str()), "unknown input {k} in {w}");
            }
        }
    }
    let manifests = blocks(&md, "toml");
    assert!(manifests.len() >= 6, "{} manifests", manifests.len());
    // Each manifest loads as the harness loads it (unknown keys and features are errors), in a
    // directory laid out as its comment says, with an empty known-failures file where it points.
    let sb = Sandbox::new();
    for (i, m) in manifests.into_iter().enumerate() {
        let t: toml::Table = m.parse().unwrap_or_else(|e| panic!("{e}\n{m}"));
        let dir = sb.dir.path().join(format!("m{i}/conformance/sub"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("protomcp-conform.toml"), m).unwrap();
        if let Some(k) = t.get("known_failures").and_then(|k| k.as_str()) {
            std::fs::write(dir.join(k), "").unwrap();
        }
        let loaded = if t.contains_key("bridge") {
            protomcp_harness::runner::bridge_manifest::load_target(&dir, EXE.into())
        } else {
            protomcp_harness::runner::Manifest::load_target(&dir)
        };
        let target = loaded.unwrap_or_else(|e| panic!("{e}\n{m}"));
        assert!(!target.features.is_empty(), "{m}");
    }
}
