//! The harness's integration tests, one binary (one link) for all of them: each file is a
//! module named after what it tests; `common` plays the bridge in-process, `loader` loads
//! scenario texts.

mod common;
mod loader;

mod module_cycles;
mod proto_mcp_profile;
mod runner_process;
mod scenario_dynamic;
mod scenario_examples;
mod scenario_loader;
mod scenario_loader_fill;
mod scenario_loader_hosts;
mod scenario_loader_repeat;
mod scenario_loader_soak;
mod scenario_loader_socket;
mod scenario_matcher;
mod scenario_requirements;
mod scenario_transports;
mod socket_codec;
mod testee_calls;
mod testee_cancel_progress;
mod testee_handshake;
mod testee_mcp_conformance;
mod testee_middleware;
mod testee_resources_prompts;
mod testee_robustness;
mod testee_sideband_stream;
mod testee_toollist_sampling_roots;
