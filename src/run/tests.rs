use super::output::folded_skips;
use super::targets::{reference_bridge_http_target, reference_bridge_target};
use super::*;

#[test]
fn a_catalogue_run_leaves_the_soaks_out_unless_asked_for_or_named() {
    let none = Selection { scenarios: Vec::new(), only: Vec::new(), soak: false };
    let all = load(&none).unwrap();
    let soaks: Vec<&str> = all.iter().filter(|(s, _)| s.is_soak()).map(|(s, _)| s.id.as_str()).collect();
    assert!(soaks.contains(&"soak.echo") && soaks.contains(&"bridge.soak.echo"), "{soaks:?}");
    let (run, left) = leave_out_soaks(&none, all.clone());
    assert_eq!(left, soaks.len());
    assert!(run.iter().all(|(s, _)| !s.is_soak()) && run.len() + left == all.len());
    let (run, left) = leave_out_soaks(&Selection { soak: true, ..none.clone() }, all.clone());
    assert_eq!((run.len(), left), (all.len(), 0));
    let only = Selection { only: vec!["soak.*".into()], ..none };
    let (run, left) = leave_out_soaks(&only, load(&only).unwrap());
    assert_eq!(left, 0);
    assert!(run.iter().any(|(s, _)| s.id == "soak.echo"));
}

#[test]
fn the_default_runs_bridge_is_the_reference_bridge_manifest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = PathBuf::from("/bin/protomcp-conform");
    for (manifest, ours) in [
        ("harness/bridges/reference", reference_bridge_target(exe.clone()).unwrap()),
        ("harness/bridges/reference-http", reference_bridge_http_target(exe.clone()).unwrap()),
    ] {
        same_target_as_manifest(&ours, &root.join(manifest), &exe);
    }
}

fn same_target_as_manifest(ours: &Target, manifest: &Path, exe: &Path) {
    let from_manifest = runner::bridge_manifest::load_target(manifest, exe.to_owned()).unwrap();
    assert_eq!(ours.name, from_manifest.name);
    assert_eq!(format!("{:?}", ours.kind), format!("{:?}", from_manifest.kind));
    assert_eq!(ours.features, from_manifest.features);
    let keys = |t: &Target| t.known_failures.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(ours), keys(&from_manifest));
    assert!(from_manifest.env.is_empty() && from_manifest.skip.is_empty() && from_manifest.build.is_none());
}

#[test]
fn skipped_scenarios_fold_into_one_line_per_reason() {
    let s = |id: &str, why: &str| CaseResult {
        verdict: runner::Verdict::Skip,
        message: why.into(),
        ..CaseResult::blank(id)
    };
    let mut rs: Vec<CaseResult> = (0..5).map(|i| s(&format!("bridge.x{i}"), "a bridge scenario")).collect();
    rs.push(s("calls.a", "feature not claimed: x\nmore"));
    rs.push(s("calls.b", "feature not claimed: x"));
    rs.push(s("calls.c", "cannot"));
    let lines = folded_skips(&rs, false);
    assert_eq!(
        lines,
        [
            "SKIP  5 scenarios: a bridge scenario",
            "SKIP  2 scenarios: feature not claimed: x [calls.a, calls.b]",
            "SKIP  calls.c (0 ms): cannot",
        ]
    );
}
