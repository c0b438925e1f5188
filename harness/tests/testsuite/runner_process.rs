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
    let cfg = Config { jobs: 3, timeout_scale: 1.0, repeat: 1, keep_transcripts: true };
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

/// With one job the scenarios end in the order they start: exclusive ones first, then the
/// longest by their fixed waits, their `duration_ms` or what they took in the target's last run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_all_starts_exclusive_scenarios_first_then_the_longest_whatever_order_tasks_start_in() {
    let mk = |id: &str, extra: &str, steps: &str| {
        let text = format!(
            "id: {id}\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n{extra}steps:\n  - handshake: {{}}\n{steps}"
        );
        parse_str(std::path::Path::new("x.yaml"), &text).unwrap()
    };
    let nap = "  - sleep: {ms: 10}\n";
    // Three `slow` steps of 100 ms: 300 ms that no fixed wait shows.
    let slow = "  - send: {request_id: s, call_tool: {name: slow, arguments_json: {steps: 3}}}\n  - expect: {envelope: {request_id: s, call_result: {}}}\n";
    let scenarios = Arc::new(vec![
        mk("order.short", "", nap),
        mk("order.learned", "", slow),
        mk("order.long", "", "  - sleep: {ms: 150}\n"),
        mk("order.hinted", "duration_ms: 250\n", nap),
        mk("order.exclusive", "exclusive: true\n", nap),
    ]);
    // A target name of this test's own: its table of learned durations is no other test's.
    let mut target = Target::in_process();
    target.name = format!("run-order test {}", std::process::id());
    let target = Arc::new(target);
    let cfg = Config { jobs: 1, timeout_scale: 1.0, repeat: 1, keep_transcripts: true };
    let order = || async {
        let ended = Arc::new(std::sync::Mutex::new(Vec::new()));
        let e2 = ended.clone();
        let on_done: protomcp_harness::runner::OnDone = Arc::new(move |r, _, _| e2.lock().unwrap().push(r.id.clone()));
        // From a task on a worker thread, as the command line runs it: tasks spawned there start
        // in no fixed order (the worker's own queue, its LIFO slot, other workers stealing).
        let run = run_all(scenarios.clone(), target.clone(), cfg.clone(), on_done);
        let results = tokio::spawn(run).await.unwrap();
        assert!(results.iter().all(|r| r.verdict == Verdict::Pass), "{results:?}");
        ended.lock().unwrap().clone()
    };
    // The first run knows nothing of order.learned's 300 ms.
    assert_eq!(order().await, ["order.exclusive", "order.hinted", "order.long", "order.short", "order.learned"]);
    assert_eq!(order().await, ["order.exclusive", "order.learned", "order.hinted", "order.long", "order.short"]);
    let _ = std::fs::remove_file(protomcp_harness::runner::durations::Durations::path(&target.name));
}

/// Without `keep_transcripts` a result keeps no transcript once `on_done` has seen it (a run's
/// memory does not grow with the transcripts of the scenarios done); with it, it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_keep_their_transcripts_only_when_asked_to() {
    let text = "id: calls.a\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n";
    let scenarios = Arc::new(vec![parse_str(std::path::Path::new("x.yaml"), text).unwrap()]);
    for keep in [false, true] {
        let seen = Arc::new(AtomicUsize::new(0));
        let s2 = seen.clone();
        let cfg = Config { jobs: 1, timeout_scale: 1.0, repeat: 1, keep_transcripts: keep };
        let on_done = Arc::new(move |r: &protomcp_harness::runner::CaseResult, _: usize, _: usize| {
            s2.store(r.transcript.items.len(), Ordering::SeqCst)
        });
        let results = run_all(scenarios.clone(), Arc::new(Target::in_process()), cfg, on_done).await;
        assert_eq!(results[0].verdict, Verdict::Pass, "{}", results[0].message);
        let at_done = seen.load(Ordering::SeqCst);
        assert!(at_done > 0, "on_done saw an empty transcript");
        assert_eq!(results[0].transcript.items.len(), if keep { at_done } else { 0 }, "keep_transcripts: {keep}");
    }
}
