//! Soak scenarios and the LEAK verdict (issue 16), through the CLI: the reference testee with a
//! planted leak (`--misbehave leak-fd-per-cancel`) is reported as LEAK with its rate in every
//! report, a known-failures entry turns it into XFAIL, and the clean reference testee holds as
//! much after the catalogue's soaks (10,000 echo calls, 200 cancelled calls) as before them.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{EXE, Sandbox, code, text};

fn soak(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/soak").join(name)
}

fn leaky() -> String {
    format!("{EXE} testee --misbehave leak-fd-per-cancel")
}

/// Runs the CLI with `args` and a JSON report, expects exit 0 and two PASS, and gives the report.
fn two_passes(sb: &Sandbox, args: &[std::ffi::OsString]) -> Value {
    let json = sb.dir.path().join("r.json");
    let o = sb.cmd().args(args).arg("--json").arg(&json).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["summary"]["pass"], 2, "{v}");
    v
}

#[test]
fn a_planted_leak_of_one_fd_per_cancelled_call_is_a_leak_with_its_rate_in_every_report() {
    let sb = Sandbox::new();
    let json = sb.dir.path().join("r.json");
    let junit = sb.dir.path().join("r.xml");
    let html = sb.dir.path().join("r.html");
    let o = sb
        .cmd()
        .args(["--testee", &leaky()])
        .arg("--scenarios")
        .arg(soak("cancel.yaml"))
        .arg("--json")
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    // A LEAK fails the run like a FAIL.
    assert_eq!(code(&o), 1, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("LEAK  soak.cancel"), "{out}");
    assert!(out.contains("1 leak"), "{out}");
    // 200 cancelled calls, one file each: the rate, the resource and the figures.
    assert!(out.contains("fd (file): +1 fd (file) per cancelled call"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["summary"]["leak"], 1, "{v}");
    let case = &v["cases"][0];
    assert_eq!(case["verdict"], "LEAK");
    assert!(case["message"].as_str().unwrap().contains("+1 fd (file) per cancelled call"), "{case}");
    // The samples: taken before the first round and every 2 rounds of 5 cancelled calls.
    let samples = case["resources"]["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 21, "{samples:?}");
    let files = |s: &Value| s["figures"]["fds_file"].as_u64().unwrap();
    assert_eq!(files(&samples[20]) - files(&samples[0]), 200, "one file per cancelled call");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("type=\"LEAK\""), "{xml}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("v-leak"), "the HTML report shows the verdict");
    assert!(page.contains("<section id=\"resources\">"), "and the figures");
    assert!(page.contains("200 files"), "the last sample holds the 200 leaked files");
    sb.assert_clean();
}

#[test]
fn a_leak_the_known_failures_name_is_xfail_and_one_naming_another_requirement_fails_the_run() {
    let sb = Sandbox::new();
    let run = |kf: &PathBuf| {
        sb.cmd()
            .args(["--testee", &leaky()])
            .arg("--scenarios")
            .arg(soak("cancel.yaml"))
            .arg("--known-failures")
            .arg(kf)
            .output()
            .unwrap()
    };
    let right = sb.file(
        "kf.yaml",
        "soak.cancel: {requirement: TP-CANCEL-06, check: step 2, reason: \"an fd per cancelled call\"}\n",
    );
    let o = run(&right);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("XFAIL soak.cancel"), "{}", text(&o));
    let wrong =
        sb.file("kf2.yaml", "soak.cancel: {requirement: TP-CALL-01, check: step 2, reason: \"something else\"}\n");
    let o = run(&wrong);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL  soak.cancel"), "{}", text(&o));
    sb.assert_clean();
}

#[test]
fn the_reference_testee_holds_no_more_after_10000_echo_calls_and_200_cancelled_calls() {
    let sb = Sandbox::new();
    let v = two_passes(
        &sb,
        &["--scenarios".into(), soak("echo.yaml").into(), "--scenarios".into(), soak("cancel.yaml").into()],
    );
    for case in v["cases"].as_array().unwrap() {
        let samples = case["resources"]["samples"].as_array().expect("samples");
        assert_eq!(samples.len(), 21, "{}: {samples:?}", case["id"]);
        let last = samples.last().unwrap();
        let rounds = last["rounds"].as_u64().unwrap();
        assert!(rounds == 10_000 || rounds == 40, "{}", case["id"]);
        // The same descriptors at the end as after the warm-up: nothing per call.
        let fds = |s: &Value| {
            let f = &s["figures"];
            ["fds_socket", "fds_pipe", "fds_file", "fds_other"].iter().map(|k| f[k].as_u64().unwrap()).sum::<u64>()
        };
        assert_eq!(fds(&samples[2]), fds(last), "{}: {samples:?}", case["id"]);
    }
    sb.assert_clean();
}

/// The catalogue's bridge soak scaled down to 40 rounds of ten calls (the 1,000 rounds of
/// `bridge.soak.echo` take about 20 s in a debug build; `--only 'bridge.soak.*'` runs them).
#[test]
fn the_reference_bridge_and_its_tool_process_are_sampled_and_hold_no_more_after_400_calls_and_200_cancellations() {
    let sb = Sandbox::new();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let echo = std::fs::read_to_string(root.join("scenarios/bridge/soak/echo.yaml"))
        .unwrap()
        .replace("repeat: 1000,", "repeat: 40,")
        .replace("sample_every: 50, warmup: 100", "sample_every: 2, warmup: 4");
    assert!(echo.contains("repeat: 40,"), "the scenario's soak step changed: {echo}");
    let echo = sb.file("echo.yaml", &echo);
    let v = two_passes(
        &sb,
        &[
            "--bridge".into(),
            root.join("harness/bridges/reference").into(),
            "--scenarios".into(),
            echo.into(),
            "--scenarios".into(),
            root.join("scenarios/bridge/soak/cancel.yaml").into(),
        ],
    );
    for case in v["cases"].as_array().unwrap() {
        let r = &case["resources"];
        // The bridge and the tool process it started (the mock), at the start and the end.
        assert_eq!(r["start"]["processes"], 2, "{}: {r}", case["id"]);
        assert_eq!(r["end"]["processes"], 2, "{}: {r}", case["id"]);
        let samples = r["samples"].as_array().expect("samples");
        assert_eq!(samples.len(), 21, "{}: {samples:?}", case["id"]);
    }
    sb.assert_clean();
}

/// Every scenario is sampled every second while it runs: a testee kept busy 2.5 s by a `sleep`
/// step has at least one such sample, and it is in the JSON report beside the start and end.
#[test]
fn a_scenario_that_runs_for_seconds_is_sampled_every_second_while_it_runs() {
    let sb = Sandbox::new();
    let s = sb.file(
        "long.yaml",
        "id: calls.long\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n  - sleep: {ms: 2500}\n  - expect_alive: {}\n",
    );
    let json = sb.dir.path().join("r.json");
    let o = sb.cmd().arg("--scenarios").arg(&s).arg("--json").arg(&json).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["cases"][0]["resources"];
    let during = r["during"].as_array().expect("samples while it ran");
    assert!(!during.is_empty(), "{r}");
    assert!(during[0]["ms"].as_u64().unwrap() >= 1000, "{r}");
    assert_eq!(during[0]["figures"]["processes"], 1, "{r}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("at any sample (also every second while one ran)"),
        "{}",
        text(&o)
    );
    sb.assert_clean();
}
