//! The runner's process and temp-dir handling, and `run_all` over the in-process target.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use protomcp_harness::runner::process::{ScenarioDir, group_alive, spawn};
use protomcp_harness::runner::{Config, Summary, Target, Verdict, run_all};
use protomcp_harness::scenario::parse_str;

#[test]
fn scenario_dirs_are_private_and_removed() {
    let d = ScenarioDir::new().unwrap();
    let p = d.path().to_owned();
    assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o700);
    std::fs::write(p.join("x"), b"x").unwrap();
    drop(d);
    assert!(!p.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_kills_the_whole_group_even_when_sigterm_is_ignored() {
    let argv: Vec<String> =
        ["sh", "-c", "trap '' TERM; echo started >&2; sleep 300 & sleep 300"].iter().map(|s| s.to_string()).collect();
    let mut t = spawn(&argv, &BTreeMap::new(), None).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(group_alive(t.pid));
    let started = Instant::now();
    assert!(t.teardown(Duration::from_millis(300), Duration::from_secs(5)).await);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!group_alive(t.pid));
    assert!(t.exited().is_some());
    assert_eq!(t.stderr().await.trim(), "started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_all_runs_in_parallel_and_keeps_the_order() {
    let mk = |id: &str, ms: u32| {
        let text = format!(
            "id: {id}\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {{}}\n  - sleep: {{ms: {ms}}}\n  - expect_alive: {{}}\n"
        );
        parse_str(std::path::Path::new("x.yaml"), &text).unwrap()
    };
    let scenarios = Arc::new(vec![mk("calls.a", 400), mk("calls.b", 400), mk("calls.c", 400)]);
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    let started = Instant::now();
    let cfg = Config { jobs: 3, timeout_scale: 1.0, repeat: 1 };
    let results = run_all(
        scenarios,
        Arc::new(Target::in_process()),
        cfg,
        Arc::new(move |_, _, _| _ = s2.fetch_add(1, Ordering::SeqCst)),
    )
    .await;
    assert!(started.elapsed() < Duration::from_millis(1100), "{:?}", started.elapsed());
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["calls.a", "calls.b", "calls.c"]);
    assert_eq!(Summary::of(results.iter().map(|r| r.verdict)).pass, 3);
    assert!(results.iter().all(|r| r.verdict == Verdict::Pass));
}
