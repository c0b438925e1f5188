//! `--sdk DIR` on Go and TypeScript SDK checkouts, with stand-in checkouts we wrote ourselves
//! (`tests/fixtures/sdk-checkouts/`): the harness recognises each, builds its bundled testee against
//! it and starts the result. The stand-ins have the SDKs' layout and public names but speak no
//! protocol (their `Run`/`run()` prints a line and exits 1), so the one scenario run fails at the
//! handshake; what is checked is the road to it. Without the toolchain (go; node and npm) a test
//! says SKIPPED, except under CI=true, where that is a failure.

use std::path::{Path, PathBuf};

use crate::common::{Sandbox, text};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sdk-checkouts").join(name)
}

/// Whether every program is on PATH; under CI=true a missing one fails the test.
fn have(programs: &[&str]) -> bool {
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| !std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| d.join(p).is_file()))
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI=true but {missing:?} is not installed");
    eprintln!("SKIPPED: {missing:?} not installed");
    false
}

/// Copies a stand-in checkout into the sandbox (the harness must not write into the repository).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Runs `calls.echo` with `--sdk` on the copy of stand-in `name`, at `sdk_dir` inside it, and checks
/// that the checkout was recognised as `language`, the testee built and started.
fn run_on_checkout(name: &str, sdk_dir: &str, language: &str, marker: &str, env: &[(&str, &str)]) {
    let sb = Sandbox::new();
    let checkout = sb.dir.path().join("checkout");
    copy_tree(&fixture(name), &checkout);
    let mut cmd = sb.cmd();
    cmd.args(["--sdk"]).arg(checkout.join(sdk_dir)).args(["--only", "calls.echo", "--json"]);
    cmd.arg(sb.dir.path().join("report.json")).env("PROTOMCP_CONFORM_CACHE", sb.dir.path().join("cache"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let all = text(&out);
    assert!(all.contains(&format!("{language} testee on the checkout")), "not recognised as {language}:\n{all}");
    let report = std::fs::read(sb.dir.path().join("report.json"))
        .unwrap_or_else(|e| panic!("no JSON report ({e}): the build failed?\n{all}"));
    let report: serde_json::Value = serde_json::from_slice(&report).unwrap();
    assert_eq!(report["cases"].as_array().map(Vec::len), Some(1), "{report}");
    // The testee ran: the stand-in's line is in the case's stderr tail (the case is not reached:
    // the stand-in never connects).
    let tail = report["cases"][0]["stderr_tail"].as_str().unwrap_or_default();
    assert!(tail.contains(marker), "the testee built against the checkout did not run:\n{report}\n{all}");
    sb.assert_clean();
}

#[test]
fn a_go_sdk_checkout_is_recognised_and_the_bundled_testee_is_built_against_it_without_fetching() {
    if !have(&["go"]) {
        return;
    }
    // GOPROXY=off: the stand-in has no dependencies, so nothing may be fetched.
    run_on_checkout(
        "go",
        "sdk/go",
        "go",
        "stand-in Go SDK checkout: the bundled testee was built against it",
        &[("GOPROXY", "off")],
    );
}

#[test]
fn a_typescript_sdk_checkout_is_recognised_built_and_the_bundled_testee_compiled_against_it() {
    if !have(&["node", "npm"]) {
        return;
    }
    run_on_checkout(
        "typescript",
        "sdk/typescript",
        "typescript",
        "stand-in TypeScript SDK checkout: the bundled testee was built against it",
        &[],
    );
}
