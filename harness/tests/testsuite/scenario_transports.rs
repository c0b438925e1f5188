//! The `transports` key of bridge scenarios: parsed, checked at `file:line:col`, and used by the
//! bridge target to skip scenarios of another transport.

use crate::loader::{first_error, parse};

use std::path::PathBuf;

use protomcp_harness::runner::{Target, TargetKind, bridge::BridgeTransport};
use protomcp_harness::scenario::Transport;

const BRIDGE: &str = "id: bridge.mcp.x\ntitle: X\nrequirements: [BR-MCP-08]\nlevel: MUST\nrole: bridge\n";
const STEPS: &str = "steps:\n  - host_send: {message: {jsonrpc: '2.0', id: 1, method: ping}}\n";

#[test]
fn transports_parse_and_default_to_all() {
    assert_eq!(parse(&format!("{BRIDGE}{STEPS}")).unwrap().transports, Vec::<Transport>::new());
    let s = parse(&format!("{BRIDGE}transports: [stdio]\n{STEPS}")).unwrap();
    assert_eq!(s.transports, vec![Transport::Stdio]);
    let s = parse(&format!("{BRIDGE}transports: [http, stdio]\n{STEPS}")).unwrap();
    assert_eq!(s.transports, vec![Transport::Http, Transport::Stdio]);
}

#[test]
fn transport_errors_have_positions() {
    assert_eq!(
        first_error(&format!("{BRIDGE}transports: [stdio, tcp]\n{STEPS}")),
        "dir/s.yaml:6:21: unknown transport `tcp`; valid: stdio, http"
    );
    assert_eq!(
        first_error(&format!("{BRIDGE}transports: [http, http]\n{STEPS}")),
        "dir/s.yaml:6:20: transport `http` is listed twice"
    );
    assert!(
        first_error(&format!("{BRIDGE}transports: []\n{STEPS}")).starts_with("dir/s.yaml:6:13: `transports` needs")
    );
    let tp = "id: calls.echo\ntitle: Echo\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n";
    assert_eq!(
        first_error(&format!("{tp}transports: [stdio]\nsteps:\n  - handshake: {{}}\n")),
        "dir/s.yaml:6:13: `transports` applies to bridge scenarios only (role: bridge)"
    );
}

#[test]
fn a_bridge_target_skips_scenarios_of_another_transport() {
    let stdio_only = parse(&format!("{BRIDGE}transports: [stdio]\n{STEPS}")).unwrap();
    let any = parse(&format!("{BRIDGE}{STEPS}")).unwrap();
    let mut t = Target::bridge(vec!["b".into(), "{mock}".into()], PathBuf::from("/x"));
    assert!(t.plan(&stdio_only).is_ok());
    if let TargetKind::Bridge { transport, .. } = &mut t.kind {
        *transport = BridgeTransport::Http { url: "http://127.0.0.1:{port}/mcp".into() };
    }
    let why = t.plan(&stdio_only).unwrap_err().to_string();
    assert_eq!(why, "runs only over stdio (transports:), the bridge is driven over http");
    assert!(t.plan(&any).is_ok());
}
