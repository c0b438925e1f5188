//! Runs the example scenarios of `scenarios/` that need no process of their own against the
//! in-process reference testee, with the real runner (`protomcp_harness::runner`) and its
//! in-process target. Scenarios that need a testee process are run through the CLI
//! (tests/cli_run.rs at the repository root).

use std::path::PathBuf;

use protomcp_harness::runner::{Config, Target, Verdict, run_scenario};
use protomcp_harness::scenario::load_file;

/// The examples of scenarios/README.md (the rest of the catalogue is run through the CLI).
pub const EXAMPLES: [&str; 5] = [
    "calls/echo.yaml",
    "framing/unknown-fields.yaml",
    "framing/oversize-prefix.yaml",
    "conn/socket-unset.yaml",
    "concurrency/pipelined.yaml",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_scenarios_pass_against_the_reference_testee() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let scenarios: Vec<_> =
        EXAMPLES.iter().map(|f| load_file(&root.join(f)).unwrap_or_else(|e| panic!("{e}"))).collect();
    let target = Target::in_process();
    let cfg = Config::default();
    let mut ran = 0;
    for s in &scenarios {
        let r = run_scenario(s, &target, &cfg).await;
        match r.verdict {
            Verdict::Skip => {}
            Verdict::Pass => ran += 1,
            other => panic!("{}: {other}: {}\n{}", s.id, r.message, r.transcript_tail.join("\n")),
        }
    }
    assert!(ran >= 4, "ran {ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_expectation_fails_at_its_step() {
    let text = "id: calls.wrong\ntitle: w\nrequirements: [TP-CALL-03]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n  - send: {request_id: c, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect: {envelope: {request_id: c, call_result: {result_json: [{text: ho}]}}}\n";
    let s = protomcp_harness::scenario::parse_str(std::path::Path::new("w.yaml"), text).unwrap();
    let r = run_scenario(&s, &Target::in_process(), &Config::default()).await;
    assert_eq!(r.verdict, Verdict::Fail);
    let first = r.message.lines().next().unwrap();
    assert_eq!(first, r#"w.yaml:9:5: expect: call_result.result_json[0].text: expected "ho", got "hi""#);
    assert!(r.message.contains("arrived: {"), "{}", r.message);
    assert!(r.transcript_tail.iter().any(|l| l.starts_with("← ")), "{:?}", r.transcript_tail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_should_scenario_that_fails_is_a_warning() {
    // The level is that of the requirement that broke: TP-CALL-05 is a SHOULD.
    let text = "id: calls.wrong\ntitle: w\nrequirements: [TP-CALL-05]\nlevel: SHOULD\nrole: tool-process\nsteps:\n  - handshake: {}\n  - expect: {within_ms: 50, envelope: {request_id: never}}\n";
    let s = protomcp_harness::scenario::parse_str(std::path::Path::new("w.yaml"), text).unwrap();
    let mut s2 = s.clone();
    s2.level = protomcp_harness::requirements::Level::Should;
    let r = run_scenario(&s2, &Target::in_process(), &Config::default()).await;
    assert_eq!(r.verdict, Verdict::Warn, "{}", r.message);
    assert!(r.message.contains("nothing arrived"), "{}", r.message);
}
