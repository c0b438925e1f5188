//! A model of a bridge under test, fed from outside: what each host session sent and received
//! (MCP JSON-RPC messages) and what crossed the tool process's socket (Envelopes, with call
//! results already reassembled from sideband transfers and streams). It checks the bridge
//! invariants that hold whatever the messages were, and names the BR requirement each finding
//! breaks. Sans-IO: time comes in as milliseconds since the session began.
//!
//! This is the judge of a bridge (issue 13's `explore --bridge`), kept apart on purpose from any
//! bridge implementation: one implements the spec, the other checks it.
//!
//! Checked as the traffic is fed:
//! - every host request gets exactly one response with its id, on its session (BR-MCP-19; a
//!   request the host cancelled may go unanswered, BR-CANCEL-02); a notification gets none;
//! - every error response carries an integer code other than 0 (BR-MCP-18);
//! - every request Envelope the bridge sends to the tool process has a host request that asks
//!   for it in flight (tools/call → CallToolRequest with the requested name, BR-CALL-01;
//!   resources/read, prompts/get, completion/complete), so nothing reaches the tool process for
//!   the methods of BR-MCP-14; list pulls and cancellations may come at any time;
//! - a tools/call result carries what the tool process sent, whether it came as one frame, a
//!   sideband transfer or a stream: `content` mapped from result_json (BR-CALL-07/08/09),
//!   `isError` (BR-CALL-06), `structuredContent` for an object (BR-CALL-11), BR-CALL-18;
//! - progress only to the session whose call carried the token, and never after that call's
//!   response (BR-PROGRESS-03/04);
//! - when the tool process's connection ends, every host request waiting for it is answered
//!   within `T_PROMPT` (BR-LIFECYCLE-03);
//! - a reverse request (sampling, roots) gets exactly one answer under its rid (BR-SAMPLING-01,
//!   BR-ROOTS-01), and the host request it became goes to a session with a tools/call in flight
//!   (BR-SAMPLING-02).
//!
//! [`BridgeModel::finish`] adds what is still owed at the end: requests never answered.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::pb::{self, envelope::Msg};
use crate::session::Finding;
use crate::spec::T_PROMPT;

/// A host session's name (the harness's own label: `a`, `b`, ...).
pub type SessionName = String;

/// Methods whose answer needs the tool process, with the request Envelope they may cause.
const NEEDS_TOOL: &[&str] = &["tools/call", "resources/read", "prompts/get", "completion/complete"];

#[derive(Debug, Clone)]
struct HostRequest {
    method: String,
    params: Value,
    /// The rid of the CallToolRequest (or other request Envelope) the bridge sent for it.
    rid: Option<String>,
    /// The host's `_meta.progressToken` of a tools/call.
    token: Option<Value>,
    cancelled: bool,
    /// A deadline for the answer (ms), once one applies (the tool process went away).
    due: Option<u64>,
}

/// What the tool process answered to a CallToolRequest, as the host must see it.
#[derive(Debug, Clone, PartialEq)]
struct Expected {
    content: Value,
    is_error: bool,
    structured: Option<Value>,
}

/// The model. Feed it with the `host_*` and `tool_*` methods in the order things happened.
#[derive(Debug, Default)]
pub struct BridgeModel {
    /// Requests in flight per session, by id (compact JSON).
    requests: BTreeMap<(SessionName, String), HostRequest>,
    /// Requests answered, per session (a second response is a finding).
    answered: BTreeSet<(SessionName, String)>,
    /// Request Envelopes to the tool process still open: rid → (session, host id).
    rids: BTreeMap<String, (SessionName, String)>,
    /// Results of the tool process not yet seen by the host: (session, host id) → expected.
    results: BTreeMap<(SessionName, String), Expected>,
    /// Progress tokens in use: the bridge's token → (session, host id) of the call.
    tokens: BTreeMap<String, (SessionName, String)>,
    /// Reverse requests of the tool process waiting for their answer: rid → arm name.
    reverse: BTreeMap<String, &'static str>,
    reverse_answered: BTreeSet<String>,
    findings: Vec<Finding>,
}

fn key(id: &Value) -> String {
    id.to_string()
}

/// The MCP `content` a result_json maps to (BR-CALL-07/08/09).
pub fn content_of(result_json: &str) -> Value {
    if result_json.is_empty() {
        return Value::Array(Vec::new());
    }
    match serde_json::from_str::<Value>(result_json) {
        Ok(Value::Array(items)) => Value::Array(
            items
                .into_iter()
                .map(|item| {
                    if item.get("type").is_some_and(Value::is_string) && item.is_object() {
                        item
                    } else {
                        serde_json::json!({"type": "text", "text": item.to_string()})
                    }
                })
                .collect(),
        ),
        _ => serde_json::json!([{"type": "text", "text": result_json}]),
    }
}

impl BridgeModel {
    pub fn new() -> Self {
        BridgeModel::default()
    }

    fn find(&mut self, requirement: &'static str, message: String) {
        self.findings.push(Finding { requirement, message });
    }

    /// The findings so far.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// A message the host of `session` wrote to the bridge.
    pub fn host_sent(&mut self, session: &str, msg: &Value) {
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|i| i.is_string() || i.is_number());
        match (method, id) {
            (Some(m), Some(id)) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                let token = params.pointer("/_meta/progressToken").cloned();
                let k = (session.to_owned(), key(id));
                // An id still in flight is the host's own mistake (BR-MCP-20 judges the answer);
                // the model keeps the first.
                if !self.requests.contains_key(&k) {
                    self.answered.remove(&k);
                    self.requests.insert(
                        k,
                        HostRequest { method: m.to_owned(), params, rid: None, token, cancelled: false, due: None },
                    );
                }
            }
            (Some("notifications/cancelled"), None) => {
                if let Some(id) = msg.pointer("/params/requestId") {
                    let k = (session.to_owned(), key(id));
                    if let Some(r) = self.requests.get_mut(&k) {
                        r.cancelled = true;
                    }
                }
            }
            _ => {}
        }
    }

    /// A message the bridge wrote to the host of `session`, at `now_ms`.
    pub fn host_received(&mut self, session: &str, now_ms: u64, msg: &Value) {
        let method = msg.get("method").and_then(Value::as_str);
        if method.is_none() && (msg.get("result").is_some() || msg.get("error").is_some()) {
            self.response(session, now_ms, msg);
        } else if method == Some("notifications/progress") {
            self.progress(session, msg);
        } else if matches!(method, Some("sampling/createMessage" | "roots/list")) {
            let busy = self
                .requests
                .iter()
                .any(|((s, _), r)| s == session && r.method == "tools/call" && r.rid.is_some() && !r.cancelled);
            if !busy {
                self.find(
                    "BR-SAMPLING-02",
                    format!("{} went to session {session:?}, which has no tools/call in flight", method.unwrap_or("")),
                );
            }
        }
    }

    fn response(&mut self, session: &str, now_ms: u64, msg: &Value) {
        if let Some(e) = msg.get("error") {
            match e.get("code") {
                Some(c) if c.is_i64() && c.as_i64() != Some(0) => {}
                other => self.find(
                    "BR-MCP-18",
                    format!("an error response carries the code {}", other.map_or("(none)".into(), Value::to_string)),
                ),
            }
        }
        let Some(id) = msg.get("id") else { return };
        if id.is_null() {
            // An answer to a line that was not a request (-32700, -32600): nothing owed it.
            return;
        }
        let k = (session.to_owned(), key(id));
        let Some(req) = self.requests.remove(&k) else {
            let why = if self.answered.contains(&k) {
                "a second response"
            } else {
                "a response to a request this session never sent (or a notification)"
            };
            self.find("BR-MCP-19", format!("{why}: id {id} on session {session:?}"));
            return;
        };
        self.answered.insert(k.clone());
        if let Some(due) = req.due
            && now_ms > due
        {
            self.find(
                "BR-LIFECYCLE-03",
                format!(
                    "{} (id {id}) answered {} ms after the tool process went away",
                    req.method,
                    now_ms + T_PROMPT.as_millis() as u64 - due
                ),
            );
        }
        if let Some(rid) = &req.rid {
            self.rids.remove(rid);
        }
        self.tokens.retain(|_, owner| *owner != k);
        if let Some(want) = self.results.remove(&k)
            && let Some(result) = msg.get("result")
        {
            self.compare(id, &want, result);
        }
    }

    fn compare(&mut self, id: &Value, want: &Expected, got: &Value) {
        let content = got.get("content").cloned().unwrap_or(Value::Array(Vec::new()));
        if content != want.content {
            self.find(
                "BR-CALL-18",
                format!("tools/call {id}: content {content} is not what the tool process sent ({})", want.content),
            );
        }
        let is_error = got.get("isError").and_then(Value::as_bool).unwrap_or(false);
        if is_error != want.is_error {
            self.find(
                "BR-CALL-06",
                format!("tools/call {id}: isError {is_error}, the tool process said {}", want.is_error),
            );
        }
        let structured = got.get("structuredContent");
        if structured != want.structured.as_ref() {
            self.find(
                "BR-CALL-11",
                format!(
                    "tools/call {id}: structuredContent {} where the tool process's structured_content_json gives {}",
                    structured.map_or("(none)".into(), Value::to_string),
                    want.structured.as_ref().map_or("(none)".into(), Value::to_string)
                ),
            );
        }
    }

    fn progress(&mut self, session: &str, msg: &Value) {
        let Some(token) = msg.pointer("/params/progressToken") else { return };
        let owner = self.requests.iter().find(|((s, _), r)| {
            r.method == "tools/call" && r.token.as_ref() == Some(token) && (s == session || r.rid.is_some())
        });
        match owner {
            Some(((s, _), _)) if s == session => {}
            Some(((s, _), _)) => {
                let s = s.clone();
                self.find(
                    "BR-PROGRESS-04",
                    format!("progress for a call of session {s:?} went to session {session:?}"),
                );
            }
            None => self.find(
                "BR-PROGRESS-03",
                format!(
                    "notifications/progress with token {token} and no call of this session in flight that carries it"
                ),
            ),
        }
    }

    /// An Envelope the bridge sent to the tool process.
    pub fn tool_received(&mut self, env: &pb::Envelope) {
        let rid = env.request_id.clone();
        let Some(msg) = &env.msg else { return };
        let (method, what) = match msg {
            Msg::CallTool(c) => ("tools/call", Some(c.name.clone())),
            Msg::ReadResourceRequest(_) => ("resources/read", None),
            Msg::GetPromptRequest(_) => ("prompts/get", None),
            Msg::CompletionRequest(_) => ("completion/complete", None),
            Msg::SamplingResponse(_) | Msg::ListRootsResponse(_) => {
                let arm = crate::Arm::of(msg).name();
                if self.reverse.remove(&rid).is_some() {
                    self.reverse_answered.insert(rid);
                } else {
                    let req = if arm == "sampling_response" { "BR-SAMPLING-01" } else { "BR-ROOTS-01" };
                    let why = if self.reverse_answered.contains(&rid) { "a second" } else { "an unasked" };
                    self.find(req, format!("{why} {arm} under rid {rid:?}"));
                }
                return;
            }
            _ => return,
        };
        // The oldest request of that method (and tool name) without an Envelope yet.
        let candidate = self
            .requests
            .iter_mut()
            .find(|(_, r)| {
                r.method == method
                    && r.rid.is_none()
                    && !r.cancelled
                    && what.as_ref().is_none_or(|n| r.params.get("name").and_then(Value::as_str) == Some(n))
            })
            .map(|(k, r)| (k.clone(), r));
        match candidate {
            Some((k, r)) => {
                r.rid = Some(rid.clone());
                if let Msg::CallTool(c) = msg
                    && !c.progress_token.is_empty()
                {
                    self.tokens.insert(c.progress_token.clone(), k.clone());
                }
                self.rids.insert(rid, k);
            }
            None => {
                let requirement = if method == "tools/call" { "BR-CALL-01" } else { "BR-MCP-14" };
                self.find(
                    requirement,
                    format!(
                        "the bridge sent {} (rid {rid:?}) with no host {method} asking for it",
                        crate::Arm::of(msg).name()
                    ),
                );
            }
        }
    }

    /// An Envelope the tool process sent to the bridge; call results arrive here reassembled
    /// (a sideband transfer or a stream as the CallToolResponse it stands for).
    pub fn tool_sent(&mut self, env: &pb::Envelope) {
        let rid = env.request_id.clone();
        match &env.msg {
            Some(Msg::CallResult(r)) => {
                let Some(k) = self.rids.get(&rid).cloned() else { return };
                let structured =
                    serde_json::from_str::<Value>(&r.structured_content_json).ok().filter(Value::is_object);
                let want = Expected { content: content_of(&r.result_json), is_error: r.is_error, structured };
                // Only the first reply counts (BR-CALL-17).
                self.results.entry(k).or_insert(want);
            }
            Some(m @ (Msg::SamplingRequest(_) | Msg::ListRootsRequest(_))) if !rid.is_empty() => {
                self.reverse.insert(rid, crate::Arm::of(m).name());
            }
            _ => {}
        }
    }

    /// The tool process's connection ended at `now_ms`: every host request waiting for it is
    /// owed an answer within `T_PROMPT` (BR-LIFECYCLE-03).
    pub fn tool_ended(&mut self, now_ms: u64) {
        let due = now_ms + T_PROMPT.as_millis() as u64;
        for r in self.requests.values_mut() {
            if NEEDS_TOOL.contains(&r.method.as_str()) && r.rid.is_some() && !r.cancelled {
                r.due.get_or_insert(due);
            }
        }
        self.rids.clear();
        self.reverse.clear();
    }

    /// The end of the session at `now_ms`, after the harness waited long enough for every
    /// answer: what is still owed is a finding. Returns every finding.
    pub fn finish(mut self, now_ms: u64) -> Vec<Finding> {
        let open: Vec<_> = self.requests.iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        for ((session, id), r) in open {
            if r.cancelled {
                continue;
            }
            match r.due {
                Some(due) if now_ms > due => self.find(
                    "BR-LIFECYCLE-03",
                    format!(
                        "{} (id {id}, session {session:?}) was never answered after the tool process went away",
                        r.method
                    ),
                ),
                _ => self.find("BR-MCP-19", format!("{} (id {id}, session {session:?}) was never answered", r.method)),
            }
        }
        let unanswered: Vec<_> = self.reverse.iter().map(|(rid, arm)| (rid.clone(), *arm)).collect();
        for (rid, arm) in unanswered {
            let req = if arm == "sampling_request" { "BR-SAMPLING-01" } else { "BR-ROOTS-01" };
            self.find(req, format!("the {arm} under rid {rid:?} was never answered"));
        }
        self.findings
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::EnvelopeExt;
    use crate::envelopes as env;

    fn call(id: u64, name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}})
    }

    fn result(id: u64, content: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": content}})
    }

    fn reqs(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.requirement).collect()
    }

    #[test]
    fn a_call_forwarded_and_answered_with_what_the_tool_process_sent_is_clean() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "echo"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
        let r = pb::CallToolResponse { result_json: r#"[{"type":"text","text":"hi"},5]"#.into(), ..Default::default() };
        m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
        m.host_received("a", 10, &result(1, json!([{"type": "text", "text": "hi"}, {"type": "text", "text": "5"}])));
        assert_eq!(m.finish(20), vec![]);
    }

    #[test]
    fn a_second_response_and_a_response_to_a_notification_break_br_mcp_19() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        m.host_received("a", 2, &json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m.host_received("a", 3, &json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
        assert_eq!(reqs(&m.finish(5)), ["BR-MCP-19", "BR-MCP-19"]);
    }

    #[test]
    fn an_unanswered_request_breaks_br_mcp_19_unless_the_host_cancelled_it() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "slow"));
        m.host_sent("a", &call(2, "slow"));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}));
        let f = m.finish(100);
        assert_eq!(reqs(&f), ["BR-MCP-19"]);
        assert!(f[0].message.contains("id 1"), "{f:?}");
    }

    #[test]
    fn error_codes_must_be_integers_other_than_zero() {
        let mut m = BridgeModel::new();
        for (id, code) in [(1, json!(0)), (2, json!("x")), (3, json!(-32603))] {
            m.host_sent("a", &json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": "u"}}));
            m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "m"}}));
        }
        assert_eq!(reqs(&m.finish(2)), ["BR-MCP-18", "BR-MCP-18"]);
    }

    #[test]
    fn a_result_that_differs_from_what_the_tool_process_sent_names_the_part() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "echo"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
        let mut r = pb::CallToolResponse {
            is_error: true,
            result_json: r#"[{"type":"text","text":"x"}]"#.into(),
            structured_content_json: r#"{"n":1}"#.into(),
            ..Default::default()
        };
        m.tool_sent(&pb::Envelope {
            request_id: "r1".into(),
            msg: Some(Msg::CallResult(r.clone())),
            ..Default::default()
        });
        // Dropped structuredContent (pmcp's BR-CALL-18 case) and isError lost.
        m.host_received("a", 5, &result(1, json!([{"type": "text", "text": "x"}])));
        assert_eq!(reqs(&m.finish(6)), ["BR-CALL-06", "BR-CALL-11"]);
        // Not JSON at all: one text block with the whole string.
        r.result_json = "plain".into();
        assert_eq!(content_of(&r.result_json), json!([{"type": "text", "text": "plain"}]));
        assert_eq!(content_of(""), json!([]));
    }

    #[test]
    fn a_request_envelope_no_host_request_asked_for_is_named() {
        let mut m = BridgeModel::new();
        m.host_sent(
            "a",
            &json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}),
        );
        m.tool_received(&env::read_resource("mem://a").with_rid("r9"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r10"));
        // Pulls and cancellations may come at any time.
        m.tool_received(&env::list_resources().with_rid("r11"));
        m.tool_received(&env::cancel("r10"));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert_eq!(reqs(&m.finish(2)), ["BR-MCP-14", "BR-CALL-01"]);
    }

    #[test]
    fn progress_goes_only_to_the_calling_session_and_never_after_the_response() {
        let mut m = BridgeModel::new();
        let mut c = call(1, "slow");
        c["params"]["_meta"] = json!({"progressToken": "t"});
        m.host_sent("a", &c);
        m.host_sent("b", &call(1, "slow"));
        m.tool_received(&env::call_tool_with_progress("slow", "{}", "p1").with_rid("r1"));
        let p = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}});
        m.host_received("a", 1, &p);
        m.host_received("b", 1, &p);
        m.host_received("a", 2, &result(1, json!([])));
        m.host_received("a", 3, &p);
        let f = m.finish(4);
        assert_eq!(reqs(&f), ["BR-PROGRESS-04", "BR-PROGRESS-03", "BR-MCP-19"], "{f:?}");
    }

    #[test]
    fn calls_in_flight_when_the_tool_process_dies_are_owed_an_answer_within_t_prompt() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "slow"));
        m.host_sent("a", &call(2, "slow"));
        m.tool_received(&env::call_tool("slow", "{}").with_rid("r1"));
        m.tool_received(&env::call_tool("slow", "{}").with_rid("r2"));
        m.tool_ended(100);
        m.host_received("a", 500, &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "gone"}}));
        m.host_received("a", 2000, &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "gone"}}));
        assert_eq!(reqs(&m.finish(3000)), ["BR-LIFECYCLE-03"]);
    }

    #[test]
    fn reverse_requests_get_exactly_one_answer_under_their_rid() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "ask"));
        m.tool_received(&env::call_tool("ask", "{}").with_rid("r1"));
        let sampling = pb::Envelope {
            request_id: "s1".into(),
            msg: Some(Msg::SamplingRequest(pb::SamplingRequest::default())),
            ..Default::default()
        };
        m.tool_sent(&sampling);
        m.host_received(
            "a",
            1,
            &json!({"jsonrpc": "2.0", "id": "x", "method": "sampling/createMessage", "params": {}}),
        );
        m.host_received(
            "b",
            1,
            &json!({"jsonrpc": "2.0", "id": "y", "method": "sampling/createMessage", "params": {}}),
        );
        let answer = pb::Envelope {
            request_id: "s1".into(),
            msg: Some(Msg::SamplingResponse(pb::SamplingResponse::default())),
            ..Default::default()
        };
        m.tool_received(&answer);
        m.tool_received(&answer);
        m.host_received("a", 2, &result(1, json!([])));
        assert_eq!(reqs(&m.finish(3)), ["BR-SAMPLING-02", "BR-SAMPLING-01"]);
    }
}
