#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| protomcp_harness::fuzzing::scenario_parser(data));
