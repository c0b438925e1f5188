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
        a.summary.contains("- **FAIL** `calls.echo` (broken: TP-CALL-01, TP-CALL-03): scenarios/calls/echo.yaml:"),
        "{}",
        a.summary
    );
    assert_eq!(a.outputs["exit-code"], "1");
    assert_eq!(a.outputs["fail"], "2");
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
    for i in ["sdk", "testee", "bridge", "known-failures", "args", "version", "sarif", "sarif-category"] {
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
