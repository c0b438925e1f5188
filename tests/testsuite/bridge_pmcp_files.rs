//! The pmcp targets (`harness/bridges/pmcp` over stdio, `harness/bridges/pmcp-http` over HTTP):
//! both manifests load, and every known failure names a bridge scenario of the catalogue, the
//! requirement it breaks and a step the scenario has (or is target-wide, `"*"`). Running pmcp itself needs the module (its CI leg,
//! `harness/bridges/pmcp/ci.sh`); this checks only what a typo would silently disable.

use std::path::{Path, PathBuf};

use protomcp_harness::requirements;
use protomcp_harness::runner::TargetKind;
use protomcp_harness::runner::bridge_manifest::load_target;
use protomcp_harness::runner::target::{ANY_SCENARIO, misfit_known_failures};
use protomcp_harness::scenario::{Role, load_dir};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn pmcp_manifests_and_known_failures() {
    let scenarios = load_dir(&root().join("scenarios")).unwrap_or_else(|e| panic!("{e}"));
    for dir in ["harness/bridges/pmcp", "harness/bridges/pmcp-http"] {
        let t = load_target(&root().join(dir), PathBuf::from(env!("CARGO_BIN_EXE_protomcp-conform")))
            .unwrap_or_else(|e| panic!("{e}"));
        let TargetKind::Bridge { argv, .. } = &t.kind else { panic!("{dir}: not a bridge target") };
        assert!(argv[0].ends_with("target/pmcp/bin/protomcp"), "{dir}: {argv:?}");
        assert!(t.build.is_some(), "{dir}: the manifest installs pmcp");
        assert!(t.known_failures.len() > 20, "{dir}: {} known failures", t.known_failures.len());
        for (id, entries) in &t.known_failures {
            let s = scenarios.iter().find(|s| &s.id == id);
            assert!(
                id == ANY_SCENARIO || s.is_some_and(|s| s.role == Role::Bridge),
                "{dir}: `{id}` is no bridge scenario"
            );
            for entry in entries {
                assert!(
                    !entry.requirement.is_empty()
                        && entry.requirement.iter().all(|r| r.starts_with("BR-") && requirements::get(r).is_some()),
                    "{dir}: `{id}`: the entry names no BR requirement of the spec: {}",
                    entry.text()
                );
            }
        }
        // Every entry's check is a step its scenario has.
        let (unknown, past) = misfit_known_failures(&t.known_failures, &scenarios);
        assert!(unknown.is_empty() && past.is_empty(), "{dir}: {unknown:?} {past:?}");
    }
}
