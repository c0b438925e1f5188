#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| protomcp_proto::fuzzing::host_core_ops(data));
