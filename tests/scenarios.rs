//! One test per scenario file of `scenarios/` (libtest-mimic), named by the scenario's id: it
//! runs the scenario against the reference testee (this package's binary, started by the real
//! runner as the CLI's default run does) and fails with the runner's message unless the verdict
//! is PASS (or SKIP). It then checks the normalized transcript against its insta snapshot in
//! `golden/<id>.snap`, unless its transcript is not deterministic
//! ([`golden::NOT_DETERMINISTIC`], with the reasons). The CLI's `--golden DIR` compares the same
//! text ([`golden::golden_text`]) with files in the same format.
//!
//! `INSTA_UPDATE=always cargo test --test scenarios` rewrites the snapshots; with `CI=true`
//! insta never writes them.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use protomcp_harness::runner::{self, Config, Target, Verdict, golden};
use protomcp_harness::scenario::{Role, Scenario, Transport, load_dir};

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn check(s: &Scenario, target: &Target, rt: &tokio::runtime::Runtime) -> Result<(), Failed> {
    let cfg = Config { jobs: 1, timeout_scale: 1.0, repeat: 1, keep_transcripts: true };
    let r = rt.block_on(runner::run_scenario(s, target, &cfg));
    match r.verdict {
        Verdict::Pass | Verdict::Skip | Verdict::Xfail => {}
        other => {
            return Err(format!(
                "{other}: {}\n  transcript (last lines):\n    {}\n  stderr:\n{}",
                r.message,
                r.transcript_tail.join("\n    "),
                r.stderr_tail
            )
            .into());
        }
    }
    // Bridge scenarios have golden files too: the transcript lists host and tool-side messages
    // in the order the steps consumed them, and the reference bridge sends its three list pulls
    // in a fixed order. Scenarios that leave messages unread at the end race with teardown.
    if golden::not_deterministic(&s.id).is_some() {
        return Ok(());
    }
    let text = golden::golden_text(&r);
    let id = s.id.clone();
    let golden = root().join("golden");
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        insta::with_settings!({
            snapshot_path => golden,
            prepend_module_to_snapshot => false,
            omit_expression => true,
            description => format!("{} — {}", s.id, s.title),
        }, {
            insta::assert_snapshot!(id, text);
        });
    }))
    .map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "snapshot mismatch".into());
        Failed::from(format!("golden/{}.snap: {msg}", s.id))
    })
}

fn main() {
    let mut args = Arguments::from_args();
    // A scenario mostly waits (quiet windows, a peer's deadline), as the catalogue runner knows:
    // it runs eight per core. libtest's default of one test per core would leave the machine
    // idle most of this binary's run; half the runner's default keeps the golden comparisons
    // beside them cheap. `--test-threads N` still decides.
    if args.test_threads.is_none() {
        args.test_threads = Some((runner::default_jobs() / 2).max(1));
    }
    let scenarios = load_dir(&root().join("scenarios")).unwrap_or_else(|e| panic!("{e}"));
    runner::process::become_subreaper();
    let rt =
        Arc::new(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime"));
    let target = Arc::new(Target::reference(PathBuf::from(EXE)));
    // `role: bridge` scenarios run against the reference bridge with the mock; its known bugs
    // are XFAIL (an XPASS fails the test: remove the entry then).
    let mut bridge = Target::bridge(
        [EXE, "bridge", "--call-timeout", "3s", "--watch", "{dir}/watched", "--socket", "{socket}", "--", "{mock}"]
            .map(String::from)
            .to_vec(),
        PathBuf::from(EXE),
    );
    // The reference bridge implements resources/subscribe (BR-RESOURCE-09) and watch mode (it
    // watches `{dir}/watched`, see harness/bridges/reference/).
    // It listens on `{socket}` (feature `socket`: stale file, socket path after the exit).
    bridge.features = vec!["subscribe".to_owned(), "watch".to_owned(), "socket".to_owned()];
    bridge.known_failures =
        runner::load_known_failures(&root().join("harness/data/reference-bridge-known-failures.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
    let bridge = Arc::new(bridge);
    // Scenarios that run only over HTTP (`transports: [http]`, e.g. `host_http` steps) run
    // against the reference bridge over Streamable HTTP, with that manifest's known failures.
    let http_bridge = Arc::new(
        runner::bridge_manifest::load_target(&root().join("harness/bridges/reference-http"), PathBuf::from(EXE))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    // Scenarios that need `auth` run against the reference bridge with a bearer token.
    let auth_bridge = Arc::new(
        runner::bridge_manifest::load_target(&root().join("harness/bridges/reference-http-auth"), PathBuf::from(EXE))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    // Scenarios that need `apikey` run against it with a bearer token and an API key.
    let apikey_bridge = Arc::new(
        runner::bridge_manifest::load_target(&root().join("harness/bridges/reference-http-apikey"), PathBuf::from(EXE))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let mut tests = Vec::new();
    for s in scenarios {
        let target = match s.role {
            Role::Bridge if s.needs.iter().any(|n| n == "apikey") => apikey_bridge.clone(),
            Role::Bridge if s.needs.iter().any(|n| n == "auth") => auth_bridge.clone(),
            Role::Bridge if s.transports == [Transport::Http] => http_bridge.clone(),
            Role::Bridge => bridge.clone(),
            _ => target.clone(),
        };
        let rt = rt.clone();
        let name = s.id.clone();
        // The bridge soaks take about 20 s each in a debug build: run with --include-ignored
        // (tests/soak.rs runs a scaled-down one by default).
        let long = s.id.starts_with("bridge.soak.");
        tests.push(Trial::test(name, move || check(&s, &target, &rt)).with_ignored_flag(long));
    }
    for (id, _) in golden::NOT_DETERMINISTIC {
        assert!(tests.iter().any(|t| t.name() == *id), "NOT_DETERMINISTIC names no scenario: {id}");
    }
    libtest_mimic::run(&args, tests).exit();
}
