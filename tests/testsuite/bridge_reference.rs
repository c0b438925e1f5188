//! Choices of the reference bridge beyond what the BR catalogue requires, written as bridge
//! scenarios in `tests/bridge_reference/` and run against the reference bridge over stdio and
//! over Streamable HTTP (its manifest `harness/bridges/reference-http`).

use std::path::Path;

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

use crate::common::{Sandbox, text};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(bridge: &str) {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .arg("--bridge")
        .arg(bridge)
        .arg("--scenarios")
        .arg(root().join("tests/bridge_reference"))
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("PASS  reference-bridge.toollist.change-before-initialized"), "{t}");
    assert!(!t.contains("SKIP") && !t.contains("WARN"), "{t}");
    sb.assert_clean();
}

#[test]
fn reference_bridge_choices_over_stdio() {
    run(&format!("{EXE} bridge --call-timeout 3s -- {{mock}}"));
}

#[test]
fn reference_bridge_choices_over_http() {
    run(root().join("harness/bridges/reference-http").to_str().unwrap());
}
