//! `protomcp-conform --profile proto-mcp` end to end: the catalogue passes against the bundled
//! reference server, and each `--misbehave` variant fails exactly the scenarios of the rule it
//! breaks.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_protomcp-conform");
const SAFE_TOOL: &str = "echo=type.googleapis.com/conform.v1.EchoRequest=0a026869";

/// Runs the profile with `args`; returns the exit status and (id, verdict, broken) per case.
fn run(args: &[&str]) -> (i32, Vec<(String, String, Vec<String>)>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(BIN)
        .args(["--profile", "proto-mcp", "--json", json.to_str().unwrap()])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }))
    .unwrap();
    let cases = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let broken = c["broken"].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_owned()).collect();
            (c["id"].as_str().unwrap().to_owned(), c["verdict"].as_str().unwrap().to_owned(), broken)
        })
        .collect();
    (out.status.code().unwrap_or(-1), cases)
}

fn not_passing(cases: &[(String, String, Vec<String>)]) -> Vec<(String, String, Vec<String>)> {
    cases.iter().filter(|(_, v, _)| v != "PASS" && v != "SKIP").cloned().collect()
}

#[test]
fn the_reference_server_passes_every_scenario() {
    let (status, cases) = run(&[]);
    assert!(cases.len() >= 70);
    assert_eq!(not_passing(&cases), vec![]);
    // The only SKIP is the scenario for servers without the JSON-RPC fallback.
    let skipped: Vec<&str> = cases.iter().filter(|(_, v, _)| v == "SKIP").map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(skipped, vec!["pm.frame.json-without-fallback"]);
    assert_eq!(status, 0);
}

#[test]
fn a_server_that_buffers_16_bytes_before_sniffing_fails_only_the_15_byte_first_frame() {
    let server = format!("{BIN} proto-mcp-server --misbehave buffer-first-16");
    let (status, cases) = run(&["--server", &server, "--safe-tool", SAFE_TOOL]);
    assert_eq!(
        not_passing(&cases),
        vec![("pm.frame.short-first-frame-15".into(), "FAIL".into(), vec!["PM-FRAME-03".into()])]
    );
    assert_eq!(status, 1);
}

#[test]
fn a_server_silent_on_undecodable_frames_fails_pm_error_08_and_warns_where_it_is_a_should() {
    let server = format!("{BIN} proto-mcp-server --misbehave silent-on-undecodable");
    let (status, cases) = run(&["--server", &server, "--safe-tool", SAFE_TOOL]);
    assert_eq!(
        not_passing(&cases),
        vec![
            ("pm.error.session-after-parse-error".into(), "WARN".into(), vec!["PM-ERROR-08".into()]),
            ("pm.error.undecodable-frame".into(), "FAIL".into(), vec!["PM-ERROR-08".into()]),
        ]
    );
    assert_eq!(status, 1);
}

#[test]
fn coverage_for_the_profile_exits_0_and_lists_nothing_missing() {
    let out = Command::new(BIN)
        .args(["coverage", "--profile", "proto-mcp"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("0 missing") && !text.contains("MISSING"), "{text}");
}

/// The cases of a JSON report: id → the case.
fn cases_of(json: &std::path::Path) -> Vec<serde_json::Value> {
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    report["cases"].as_array().unwrap().clone()
}

/// The verdicts of a folded case's runs, sorted.
fn run_verdicts(case: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> =
        case["runs"].as_array().unwrap().iter().map(|r| r["verdict"].as_str().unwrap().to_owned()).collect();
    v.sort();
    v
}

/// A manifest directory for the reference server with `args` after `proto-mcp-server`, the safe
/// tool, and `extra` TOML appended.
fn manifest(args: &[&str], extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let argv: Vec<String> = ["{self}", "proto-mcp-server"].iter().chain(args).map(|a| format!("{:?}", a)).collect();
    let toml = format!(
        "command = [{}]\n[safe_tool]\nname = \"echo\"\ntype_url = \"type.googleapis.com/conform.v1.EchoRequest\"\n\
         value_hex = \"0a026869\"\n{extra}",
        argv.join(", ")
    );
    std::fs::write(dir.path().join("proto-mcp.toml"), toml).unwrap();
    dir
}

#[test]
fn three_runs_of_every_scenario_against_the_reference_server_agree_and_the_html_report_knows_pm_levels() {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let out = Command::new(BIN)
        .args(["--profile", "proto-mcp", "--repeat", "3", "--json", json.to_str().unwrap()])
        .args(["--html", html.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cases = cases_of(&json);
    assert!(cases.len() >= 70);
    for c in &cases {
        let want = if c["id"] == "pm.frame.json-without-fallback" { "SKIP" } else { "PASS" };
        assert_eq!(run_verdicts(c), vec![want; 3], "{c}");
        assert_eq!(c["verdict"], want, "{c}");
    }
    assert!(stdout.contains("3 runs each") && !stdout.contains("FLAKY"), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // The HTML requirement table gives PM requirements their level, in spec order.
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("<tr id=\"req-PM-ERROR-08\" data-level=\"MUST\""), "no level for PM-ERROR-08");
    let (f, e) = (html.find("id=\"req-PM-FRAME-01\"").unwrap(), html.find("id=\"req-PM-ERROR-01\"").unwrap());
    assert!(f < e, "FRAME comes before ERROR in the profile");
}

#[test]
fn a_server_that_misbehaves_on_every_other_start_is_flaky_with_the_verdict_of_every_run() {
    let starts = tempfile::tempdir().unwrap();
    let server = format!(
        "{BIN} proto-mcp-server --misbehave silent-on-undecodable --every-other-start {}",
        starts.path().display()
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // One job: the two probe sessions take starts 1 and 2, the runs 3 (behaves), 4 (misbehaves)
    // and 5 (behaves).
    let out = Command::new(BIN)
        .args(["--profile", "proto-mcp", "--repeat", "3", "-j", "1", "--json", json.to_str().unwrap()])
        .args(["--only", "pm.error.undecodable-frame", "--server", &server, "--safe-tool", SAFE_TOOL])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cases = cases_of(&json);
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0]["verdict"], "FLAKY", "{stdout}");
    assert_eq!(run_verdicts(&cases[0]), ["FAIL", "PASS", "PASS"]);
    assert_eq!(cases[0]["broken"], serde_json::json!(["PM-ERROR-08"]));
    assert!(stdout.contains("the verdicts of 3 runs differ") && stdout.contains("run 3: "), "{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(std::fs::read_dir(starts.path()).unwrap().count(), 5, "two probe sessions and three runs");
}

#[test]
fn a_known_failure_marked_intermittent_folds_pass_and_xfail_of_repeated_runs_to_xfail() {
    let starts = tempfile::tempdir().unwrap();
    let m = manifest(
        &["--misbehave", "silent-on-undecodable", "--every-other-start", "${PM_STARTS}"],
        "[known_failures]\n\"pm.error.undecodable-frame\" = { requirement = [\"PM-ERROR-08\"], \
         reason = \"drops the frame every other start\", intermittent = true }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(BIN)
        .args(["--profile", "proto-mcp", "--repeat", "3", "-j", "1", "--json", json.to_str().unwrap()])
        .args(["--only", "pm.error.undecodable-frame", "--server", m.path().to_str().unwrap()])
        .env("PM_STARTS", starts.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cases = cases_of(&json);
    assert_eq!(cases[0]["verdict"], "XFAIL", "{stdout}");
    assert_eq!(run_verdicts(&cases[0]), ["PASS", "PASS", "XFAIL"]);
    assert!(cases[0]["message"].as_str().unwrap().starts_with("intermittent, failed in 1 of 3 runs"), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
}

#[test]
fn the_profile_matrix_shows_the_broken_requirement_in_the_misbehaving_servers_column_only() {
    let (good, bad) = (manifest(&[], ""), manifest(&["--misbehave", "silent-on-undecodable"], ""));
    let dir = tempfile::tempdir().unwrap();
    let (json, md, html) = (dir.path().join("m.json"), dir.path().join("m.md"), dir.path().join("m.html"));
    let out = Command::new(BIN)
        .args(["matrix", "--profile", "proto-mcp", "--no-reference", "--server", good.path().to_str().unwrap()])
        .args(["--server", bad.path().to_str().unwrap()])
        .args(["--json", json.to_str().unwrap(), "--markdown", md.to_str().unwrap()])
        .args(["--html", html.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(m["targets"].as_array().unwrap().len(), 2);
    let rows = m["rows"].as_array().unwrap();
    assert!(rows.len() >= 70, "{stdout}");
    let not_met = |cell: &serde_json::Value| ["fail", "warn", "other"].iter().any(|k| cell[k].as_u64() != Some(0));
    let mut broken: Vec<(String, usize)> = Vec::new();
    for row in rows {
        for col in 0..2 {
            if not_met(&row[1][col]) {
                broken.push((row[0].as_str().unwrap().to_owned(), col));
            }
        }
    }
    assert_eq!(broken, vec![("PM-ERROR-08".to_owned(), 1)], "{stdout}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("| PM-ERROR-08 MUST | ✓ | ✗ 1/2 |"), "{md}");
    assert_eq!(md, stdout, "the markdown file is what was printed");
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("<tr id=\"req-PM-ERROR-08\" data-level=\"MUST\""), "no PM-ERROR-08 row in the HTML");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
}

#[test]
fn a_malformed_proto_mcp_scenario_is_reported_as_file_line_col_and_the_run_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "id: pm.bad.one\ntitle: t\nrequirements: [PM-TOOLS-01]\nlevel: MUST\nprofile: proto-mcp\nsteps:\n  - initialize: {}\n  - send: {id: 2, list_tools_request: {cursr: x}}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["--profile", "proto-mcp", "--scenarios", dir.path().to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:8:11: list_tools_request: unknown field `cursr`", file.display())),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(2));
}
