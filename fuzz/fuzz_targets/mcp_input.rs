#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| protomcp_proto::fuzzing::mcp_input(data));
