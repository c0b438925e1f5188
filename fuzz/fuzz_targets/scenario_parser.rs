#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| protomcp_scenario::fuzzing::scenario_parser(data));
