//! A [`Plan`] of the session model as a scenario file of the normal language, so that what the
//! explorer found replays through the normal runner (`protomcp-conform --scenarios FILE`).
//!
//! Every value is written as JSON (a subset of YAML's flow style), one step per line; strings
//! have `$` doubled so that no placeholder is read into them. An Envelope whose tree does not
//! re-encode to the same bytes, and every raw body, is written as `send_frame: {body_hex: …}`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use protomcp_proto::dynamic;
use protomcp_proto::envelopes::{Direction, EnvelopeExt};
use protomcp_proto::session::{Expected, Finding, Plan, Step, Wire};
use serde_json::{Value, json};

/// Arms a peer may send at any time without breaking the plan: notifications, the optional
/// repeat of the handshake burst after a later ListToolsRequest (TP-HANDSHAKE-15).
pub const IGNORED: &[&str] = &[
    "log",
    "progress",
    "enable_tools",
    "disable_tools",
    "set_allowed",
    "set_blocked",
    "batch",
    "resource_changed",
    "reload_response",
];

/// Requirements every generated scenario checks.
pub const BASE_REQUIREMENTS: &[&str] = &["TP-CONCUR-01", "TP-CALL-01", "TP-SECURITY-01", "TP-SECURITY-02"];

/// Doubles every `$` in the strings of `v`, so that the loader reads no placeholder into them.
pub fn escape(v: &mut Value) {
    match v {
        Value::String(s) if s.contains('$') => *s = s.replace('$', "$$"),
        Value::Array(a) => a.iter_mut().for_each(escape),
        Value::Object(o) => o.values_mut().for_each(escape),
        _ => {}
    }
}

fn flow(mut v: Value) -> String {
    escape(&mut v);
    flow_verbatim(&v)
}

/// `v` as one line of flow YAML (JSON), its strings as they are: for a caller that escaped the
/// literal strings itself ([`escape`]) and put placeholders (`${name}`) in on purpose.
pub fn flow_verbatim(v: &Value) -> String {
    let text = serde_json::to_string(v).expect("JSON values serialize");
    // YAML does not allow DEL and the C1 controls printed (JSON does); inside a double-quoted
    // scalar they are escaped the same way in both.
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if ('\u{7f}'..='\u{9f}').contains(&c) || c == '\u{feff}' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The `send` or `send_frame` step of one frame.
fn send_step(wire: &Wire) -> String {
    let body = match wire {
        Wire::Envelope(e) => {
            let body = prost::Message::encode_to_vec(e);
            // Readable only for what a bridge sends; wrong-direction input carries synthesized
            // values of every field kind (bytes included) and goes as bytes.
            let readable = e.arm().is_none_or(|a| a.direction() == Direction::BridgeToTool);
            if readable
                && let Ok(tree) = dynamic::from_envelope(e)
                && dynamic::encode(&tree).is_ok_and(|b| b == body)
            {
                return format!("send: {}", flow(tree));
            }
            body
        }
        Wire::Body(b) => b.clone(),
    };
    if body.is_empty() {
        return "send_frame: {length: 0}".into();
    }
    format!("send_frame: {{body_hex: \"{}\"}}", dynamic::hex_encode(&body))
}

fn pattern(e: &Expected) -> Value {
    let mut p = json!({"request_id": e.rid, "arm": e.arm.name()});
    let mut body = serde_json::Map::new();
    if let Some(err) = e.is_error {
        body.insert("is_error".into(), Value::Bool(err));
    }
    if let Some(t) = &e.text {
        body.insert("result_json".into(), json!([{"type": "text", "text": t}]));
    }
    if !body.is_empty() {
        p[e.arm.name()] = Value::Object(body);
    }
    p
}

/// The scenario text: `id`, a one-line `title`, the plan's steps after the standard handshake,
/// and `notes` (how it was found). `findings` add their requirement IDs to the citation.
pub fn scenario_yaml(id: &str, title: &str, plan: &Plan, notes: &str, findings: &[Finding]) -> String {
    let mut reqs: Vec<&str> = BASE_REQUIREMENTS.to_vec();
    let replies = plan.steps.iter().flat_map(|s| match s {
        Step::Await { replies, .. } => replies.iter().map(|r| r.requirement).collect(),
        _ => Vec::new(),
    });
    for r in replies.chain(findings.iter().map(|f| f.requirement)) {
        if !reqs.contains(&r) {
            reqs.push(r);
        }
    }
    let ignore = flow(json!(IGNORED));
    let mut out = String::new();
    let _ = writeln!(out, "id: {id}");
    let _ = writeln!(out, "title: {}", flow(Value::String(title.to_owned())));
    let _ = writeln!(out, "requirements: [{}]", reqs.join(", "));
    let _ = writeln!(out, "level: MUST");
    let _ = writeln!(out, "role: tool-process");
    let needs: BTreeSet<&str> = plan.needs.iter().copied().collect();
    if !needs.is_empty() {
        let _ = writeln!(out, "needs: [{}]", needs.into_iter().collect::<Vec<_>>().join(", "));
    }
    let _ = writeln!(out, "notes: {}", flow(Value::String(notes.to_owned())));
    let total_ms: u64 = 20_000
        + plan
            .steps
            .iter()
            .map(|s| match s {
                Step::Await { within_ms, .. } => *within_ms,
                Step::Quiet { for_ms } => *for_ms,
                Step::Alive => 3000,
                Step::Send { .. } => 50,
            })
            .sum::<u64>();
    let _ = writeln!(out, "timeout_ms: {total_ms}");
    let _ = writeln!(out, "steps:");
    let _ = writeln!(out, "  - handshake: {{}}");
    for s in &plan.steps {
        match s {
            Step::Send { wire, why } => {
                let _ = writeln!(out, "  # {}", why.replace('\n', " "));
                let _ = writeln!(out, "  - {}", send_step(wire));
            }
            Step::Await { replies, within_ms } => {
                let _ = writeln!(out, "  - expect_any_order:");
                let _ = writeln!(out, "      within_ms: {within_ms}");
                let _ = writeln!(out, "      ignore: {ignore}");
                let _ = writeln!(out, "      envelopes:");
                for r in replies {
                    let _ = writeln!(out, "        - {}", flow(pattern(r)));
                }
                // What the step checks: the requirement that demands each reply (a failure
                // names these, not every requirement the scenario cites).
                let mut checks: Vec<&str> = Vec::new();
                for r in replies {
                    if !checks.contains(&r.requirement) {
                        checks.push(r.requirement);
                    }
                }
                let _ = writeln!(out, "    checks: [{}]", checks.join(", "));
            }
            Step::Quiet { for_ms } => {
                let _ = writeln!(out, "  - expect_nothing: {{for_ms: {for_ms}, ignore: {ignore}}}");
            }
            Step::Alive => {
                let _ = writeln!(out, "  - expect_alive: {{within_ms: 3000}}");
            }
        }
    }
    out
}
