//! The scenario crate's integration tests: the committed seeds of the `scenario_parser` fuzz
//! target (`fuzz/`, seeds in `fuzz/seeds/scenario_parser/`) replayed through the function the target calls.

use std::path::PathBuf;

fn replay(target: &str, body: fn(&[u8])) {
    protomcp_proto::fuzzing::replay_seeds(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target),
        body,
    );
}

#[test]
fn scenario_parser_seeds() {
    replay("scenario_parser", protomcp_scenario::fuzzing::scenario_parser);
}

#[test]
fn broken_scenarios_report_locations() {
    // Not a tautology: these inputs do produce errors, each checked for its location.
    for text in [
        "id: x\n",
        "steps: [",
        "id: a.b\ntitle: t\nrequirements: [TP-NOPE-1]\nlevel: MUST\nrole: tool-process\nsteps: [{handshake: {}}]\n",
    ] {
        assert!(protomcp_scenario::parse_str(std::path::Path::new("fuzz.yaml"), text).is_err());
        protomcp_scenario::fuzzing::scenario_parser(text.as_bytes());
    }
}
