//! Runs the example scenarios of `scenarios/` that need no process of their own against the
//! in-process reference testee, with a minimal test-only executor: it shows that the examples
//! are right and that the scenario API is easy to drive. (The real runner lives elsewhere.)

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::Peer;
use protomcp_harness::io::Incoming;
use protomcp_harness::scenario::normalize::frame_value;
use protomcp_harness::scenario::{Action, Captures, FrameBody, Scenario, load_dir, match_any_order, match_envelope};
use protomcp_harness::testee::Options;
use protomcp_proto::dynamic::arm_of;
use protomcp_proto::envelopes::Arm;
use protomcp_proto::frame::Frame;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// The next Envelope tree whose arm is not ignored, or `None` at end of stream / timeout.
async fn next_value(peer: &mut Peer, within: Duration, ignore: &[Arm]) -> Result<Option<Value>, String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match peer.try_next(left).await {
            Err(()) => return Err(format!("nothing within {within:?}")),
            Ok(None) => return Ok(None),
            Ok(Some(Ok(Incoming::Frame(Frame::Envelope(d))))) => {
                let v = frame_value(&d).map_err(|e| e.to_string())?;
                if arm_of(&v).and_then(Arm::from_name).is_some_and(|a| ignore.contains(&a)) {
                    continue;
                }
                return Ok(Some(v));
            }
            Ok(other) => return Err(format!("unexpected item {other:?}")),
        }
    }
}

async fn run(s: &Scenario) -> Result<(), String> {
    let mut peer = Peer::start(Options { middleware: s.testee.middleware, ..Options::default() });
    let mut caps = Captures::new();
    for step in &s.steps {
        let at = s.at(step.loc);
        let fail = |m: String| format!("{at}: {}: {m}", step.keyword());
        match &step.action {
            Action::Handshake(h) => {
                peer.send_raw(&protomcp_proto::frame::frame_bytes(
                    &protomcp_proto::dynamic::encode(&json!({"request_id": h.rid, "list_tools": {}})).unwrap(),
                ))
                .await;
                let v = next_value(&mut peer, h.within, &[]).await.map_err(fail)?.ok_or_else(|| fail("EOF".into()))?;
                if v["request_id"] != json!(h.rid) || arm_of(&v) != Some("tool_list") {
                    return Err(fail(format!("not the tool list: {v}")));
                }
                loop {
                    let v =
                        next_value(&mut peer, h.within, &[]).await.map_err(fail)?.ok_or_else(|| fail("EOF".into()))?;
                    match arm_of(&v) {
                        Some("register_middleware") => {
                            peer.send(protomcp_proto::envelopes::register_middleware_response(true)).await;
                        }
                        Some("reload_response") => break,
                        _ => return Err(fail(format!("unexpected {v}"))),
                    }
                }
                // The reference claims `hidden`: `secret` is disabled right after the marker.
                let hidden = h.hidden.clone().unwrap_or_else(|| vec!["secret".into()]);
                if !hidden.is_empty() {
                    let v =
                        next_value(&mut peer, h.within, &[]).await.map_err(fail)?.ok_or_else(|| fail("EOF".into()))?;
                    if v != json!({"disable_tools": {"tool_names": hidden}}) {
                        return Err(fail(format!("expected the hidden-tool disable, got {v}")));
                    }
                }
            }
            Action::Send(t) => peer.send_raw(&t.frame(&caps).map_err(|e| fail(e.to_string()))?).await,
            Action::SendRaw(b) => peer.send_raw(b).await,
            Action::SendFrame(f) => {
                let body = match &f.body {
                    FrameBody::Hex(b) => b.clone(),
                    FrameBody::Envelope(t) => t.body(&caps).map_err(|e| fail(e.to_string()))?,
                };
                let mut bytes = f.length.unwrap_or(body.len() as u32).to_be_bytes().to_vec();
                bytes.extend(body);
                peer.send_raw(&bytes).await;
            }
            Action::Expect(e) => {
                let v = next_value(&mut peer, e.within, &e.ignore)
                    .await
                    .map_err(fail)?
                    .ok_or_else(|| fail("EOF".into()))?;
                match_envelope(&e.pattern, &v, &mut caps).map_err(|m| fail(m.to_string()))?;
            }
            Action::ExpectAnyOrder(e) => {
                let mut values = Vec::new();
                for _ in &e.patterns {
                    values.push(
                        next_value(&mut peer, e.within, &e.ignore)
                            .await
                            .map_err(fail)?
                            .ok_or_else(|| fail("EOF".into()))?,
                    );
                }
                match_any_order(&e.patterns, &values, &mut caps).map_err(|m| fail(m.to_string()))?;
            }
            Action::ExpectNothing(e) => match next_value(&mut peer, e.duration, &e.ignore).await {
                Err(_) => {}
                Ok(got) => return Err(fail(format!("got {got:?}"))),
            },
            Action::ExpectClose { within } => loop {
                match next_value(&mut peer, *within, &[]).await {
                    Ok(None) => break,
                    Ok(Some(_)) => continue,
                    Err(m) => return Err(fail(m)),
                }
            },
            Action::ExpectExit(x) => {
                let code =
                    tokio::time::timeout(x.within, &mut peer.testee).await.map_err(|_| fail("no exit".into()))?;
                let code = code.map_err(|e| fail(e.to_string()))?;
                if !x.code.accepts(Some(code)) {
                    return Err(fail(format!("exit status {code}")));
                }
            }
            Action::ExpectAlive { within } => {
                peer.send(protomcp_proto::envelopes::EnvelopeExt::with_rid(
                    protomcp_proto::envelopes::call_tool("echo", r#"{"text":"alive"}"#),
                    "alive-1",
                ))
                .await;
                loop {
                    let v =
                        next_value(&mut peer, *within, &[]).await.map_err(fail)?.ok_or_else(|| fail("EOF".into()))?;
                    if v["request_id"] == json!("alive-1") {
                        break;
                    }
                }
            }
            Action::Sleep(d) => tokio::time::sleep(*d).await,
            Action::Close(_) => {
                // Both modes shut the write half; this executor keeps reading either way.
                if let Some(mut tx) = peer.tx.take() {
                    let _ = tx.shutdown().await;
                }
            }
            other => return Err(fail(format!("not supported by this test executor: {other:?}"))),
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_scenarios_pass_against_the_reference_testee() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let scenarios = load_dir(&root).unwrap_or_else(|e| panic!("{e}"));
    let mut ran = 0;
    for s in scenarios.iter().filter(|s| s.connects() && s.testee.env.is_empty() && s.testee.misbehave.is_none()) {
        run(s).await.unwrap_or_else(|e| panic!("{}: {e}", s.id));
        ran += 1;
    }
    assert!(ran >= 4, "ran {ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_expectation_fails_at_its_step() {
    let text = "id: calls.wrong\ntitle: w\nrequirements: [TP-CALL-03]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n  - send: {request_id: c, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect: {envelope: {request_id: c, call_result: {result_json: [{text: ho}]}}}\n";
    let s = protomcp_harness::scenario::parse_str(std::path::Path::new("w.yaml"), text).unwrap();
    let e = run(&s).await.unwrap_err();
    assert_eq!(e, r#"w.yaml:9:5: expect: call_result.result_json[0].text: expected "ho", got "hi""#);
}
