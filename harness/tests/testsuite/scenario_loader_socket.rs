//! The scenario loader: `stale_socket` (header) and `expect_socket` (step) of bridge scenarios,
//! both only with `needs: [socket]` (the bridge is given `--socket {socket}`).

use crate::loader::{first_error, parse};

use protomcp_harness::scenario::Action;

const BRIDGE: &str = "id: bridge.conn.x\ntitle: X\nrequirements: [BR-CONN-04]\nlevel: MUST\nrole: bridge\n";

#[test]
fn stale_socket_and_expect_socket_load_with_needs_socket() {
    let text = format!(
        "{BRIDGE}needs: [socket]\nstale_socket: true\nsteps:\n  - host_close: {{}}\n  - expect_socket: {{exists: false}}\n"
    );
    let s = parse(&text).unwrap();
    assert!(s.stale_socket);
    assert_eq!(s.needs, ["socket"]);
    match &s.steps[1].action {
        Action::ExpectSocket { exists } => assert!(!exists),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.steps[1].keyword(), "expect_socket");
    assert!(!s.steps[1].action.needs_connection());
    let s = parse(&format!("{BRIDGE}needs: [socket]\nsteps:\n  - expect_socket: {{exists: true}}\n")).unwrap();
    assert!(!s.stale_socket, "stale_socket defaults to false");
    assert!(matches!(s.steps[0].action, Action::ExpectSocket { exists: true }));
}

#[test]
fn both_need_the_feature_socket() {
    let e = first_error(&format!("{BRIDGE}stale_socket: true\nsteps:\n  - host_close: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:6:15: `stale_socket` needs `needs: [socket]` (the bridge is given `--socket {socket}`)");
    let e = first_error(&format!("{BRIDGE}steps:\n  - host_close: {{}}\n  - expect_socket: {{exists: false}}\n"));
    assert_eq!(e, "dir/s.yaml:8:5: `expect_socket` needs `needs: [socket]` (the bridge is given `--socket {socket}`)");
    // `stale_socket: false` needs nothing.
    parse(&format!("{BRIDGE}stale_socket: false\nsteps:\n  - host_close: {{}}\n")).unwrap();
}

#[test]
fn expect_socket_needs_exists_and_both_belong_to_bridge_scenarios() {
    let e = first_error(&format!("{BRIDGE}needs: [socket]\nsteps:\n  - expect_socket: {{}}\n"));
    assert!(e.contains("exists"), "{e}");
    let e = first_error(&format!("{BRIDGE}needs: [socket]\nsteps:\n  - expect_socket: {{exists: maybe}}\n"));
    assert!(e.starts_with("dir/s.yaml:8:"), "{e}");
    let tp = "id: calls.x\ntitle: X\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\n";
    let e = first_error(&format!("{tp}stale_socket: true\nsteps:\n  - close: {{}}\n"));
    assert_eq!(e, "dir/s.yaml:6:15: stale_socket belongs to bridge scenarios (role: bridge)");
    let e = first_error(&format!("{tp}steps:\n  - expect_socket: {{exists: false}}\n"));
    assert_eq!(e, "dir/s.yaml:7:5: `expect_socket` belongs to bridge scenarios (role: bridge)");
}
