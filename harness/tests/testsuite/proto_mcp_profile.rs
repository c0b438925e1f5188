//! The proto-mcp profile's tables and catalogue: the PM requirement table matches the profile,
//! every scenario loads, and coverage leaves no PM MUST/SHOULD without a scenario or a reason.

use std::path::PathBuf;

use protomcp_harness::proto_mcp::{self as pm, requirements as pmreq};
use protomcp_harness::scenario;

fn spec_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/proto-mcp.md")
}

fn catalogue() -> Vec<scenario::Scenario> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(pm::CATALOGUE_DIR);
    scenario::load_dir(&dir).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_pm_requirement_table_matches_the_profile() {
    let Ok(spec) = std::fs::read_to_string(spec_path()) else {
        eprintln!("{} not present: table not re-checked", spec_path().display());
        return;
    };
    let table = pmreq::table_of(&spec).expect("the profile's bullets parse");
    if std::env::var_os("UPDATE_REQUIREMENTS").is_some() {
        let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/proto-mcp-requirements.tsv");
        std::fs::write(out, &table).unwrap();
        return;
    }
    assert_eq!(pmreq::TABLE, table, "harness/data/proto-mcp-requirements.tsv is stale: regenerate it");
}

#[test]
fn the_table_holds_the_78_requirements_of_appendix_b() {
    let all = pmreq::all();
    let count = |l: &str| all.iter().filter(|r| r.level.to_string() == l).count();
    assert_eq!((all.len(), count("MUST"), count("SHOULD"), count("MAY")), (78, 60, 17, 1));
    assert_eq!(pmreq::get("PM-TOOLS-07").and_then(|r| r.feature), Some("paging"));
    assert_eq!(pmreq::features_of(pmreq::get("PM-RESOURCES-03").unwrap()), vec!["resources", "paging"]);
}

#[test]
fn every_scenario_loads_and_cites_only_pm_requirements() {
    let all = catalogue();
    assert!(all.len() >= 70, "{} scenarios", all.len());
    for s in &all {
        assert!(s.id.starts_with("pm."), "{}", s.id);
        assert!(s.requirements.iter().all(|r| r.id.starts_with("PM-")), "{}", s.id);
    }
}

#[test]
fn coverage_leaves_no_pm_must_or_should_without_a_scenario_or_a_reason() {
    let untestable = pm::untestable().expect("the untestable list parses");
    let (entries, stale) = pm::coverage(&catalogue(), &untestable);
    let missing: Vec<&str> = entries.iter().filter(|e| e.missing()).map(|e| e.requirement.id).collect();
    assert_eq!(missing, Vec::<&str>::new());
    assert_eq!(stale, Vec::<String>::new());
    assert_eq!(entries.len(), 77);
}

#[test]
fn a_scenario_citing_an_unknown_requirement_or_with_two_steps_in_one_is_refused_at_its_place() {
    let p = std::path::Path::new("x.yaml");
    let head = "id: pm.x.y\ntitle: t\nlevel: MUST\nprofile: proto-mcp\n";
    let bad_req = format!("{head}requirements: [PM-NOPE-01]\nsteps: [{{initialize: {{}}}}]\n");
    let e = scenario::parse_str(p, &bad_req).unwrap_err().to_string();
    assert!(e.starts_with("x.yaml:5:16: ") && e.contains("PM-NOPE-01"), "{e}");
    let two = format!("{head}requirements: [PM-INIT-01]\nsteps: [{{initialize: {{}}, expect_alive: {{}}}}]\n");
    let e = scenario::parse_str(p, &two).unwrap_err().to_string();
    assert!(e.starts_with("x.yaml:6:") && e.contains("a step has one keyword"), "{e}");
    let ok = format!("{head}requirements: [PM-INIT-01]\nsteps: [{{initialize: {{}}}}]\n");
    assert_eq!(scenario::parse_str(p, &ok).unwrap().steps.len(), 1);
}

#[test]
fn the_reference_server_shell_answers_a_byte_stream_and_exits_cleanly() {
    use protomcp_proto::mcp::{McpMessage, default_handshake};
    let mut input = default_handshake(1).to_frame().to_vec();
    input.extend_from_slice(&[0, 0, 0, 0]);
    let mut out = Vec::new();
    let status = pm::server::serve(input.as_slice(), &mut out, None, 1 << 20);
    assert_eq!(status, pm::server::EXIT_OK);
    let mut dec = protomcp_proto::frame::MessageDecoder::<McpMessage>::new(1 << 20);
    let mut buf = bytes::BytesMut::from(&out[..]);
    let first = dec.decode(&mut buf).unwrap().unwrap().message;
    let second = dec.decode(&mut buf).unwrap().unwrap().message;
    assert_eq!((first.id, first.arm().map(|a| a.name())), (1, Some("initialize_response")));
    assert_eq!(second.error().map(|e| e.code), Some(-32600));
    assert!(buf.is_empty());
}

#[test]
fn the_one_runner_skips_a_scenario_of_the_other_profile_on_either_kind_of_target() {
    let pm_scenario = catalogue().into_iter().next().unwrap();
    let tp_text = "id: calls.one\ntitle: t\nrequirements: [TP-CONN-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n";
    let tp_scenario = scenario::parse_str(std::path::Path::new("tp.yaml"), tp_text).unwrap();
    let protomcp = protomcp_harness::runner::Target::reference("protomcp-conform".into());
    let why = protomcp.plan(&pm_scenario).unwrap_err().to_string();
    assert_eq!(why, "a proto-mcp scenario: runs with --profile proto-mcp");
    let server = pm::run::Server { target: Default::default(), features: Default::default() };
    let target = server.into_target("a proto-mcp server".into());
    assert!(target.plan(&pm_scenario).is_ok());
    let why = target.plan(&tp_scenario).unwrap_err().to_string();
    assert_eq!(why, "a protomcp scenario; the target is a proto-mcp server");
}
