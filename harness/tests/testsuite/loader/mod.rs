//! Shared by the scenario-loader tests: a scenario text loaded as `dir/s.yaml`, and its first
//! error as the CLI prints it.

use std::path::Path;

use protomcp_harness::scenario::{Scenario, ScenarioErrors, parse_str};

pub fn parse(text: &str) -> Result<Scenario, ScenarioErrors> {
    parse_str(Path::new("dir/s.yaml"), text)
}

/// The first error, as the CLI prints it.
pub fn first_error(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.first().to_string(),
    }
}
