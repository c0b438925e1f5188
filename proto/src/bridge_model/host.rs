//! The host side: what each session sent and received, answers, results and progress.

use super::{BridgeModel, Expected, HostRequest, T_PROMPT, Value, content_rule, key, same_json};

impl BridgeModel {
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
                // the model keeps the first, and owes the id one answer more.
                if self.requests.contains_key(&k) {
                    *self.again.entry(k).or_default() += 1;
                } else {
                    self.answered.remove(&k);
                    self.requests.insert(
                        k.clone(),
                        HostRequest {
                            method: m.to_owned(),
                            params,
                            rid: None,
                            token,
                            cancelled: false,
                            due: None,
                            floor: self.listeners.get(session).map_or(0, |l| l.floor),
                            made: None,
                            seq: self.sent,
                        },
                    );
                    self.sent += 1;
                    self.modern_host_sent(&k);
                }
            }
            (Some("notifications/initialized"), None) => {
                let changed_before = self.tools.history.len() > 1;
                let l = self.listeners.entry(session.to_owned()).or_default();
                if !l.initialized {
                    l.initialized = true;
                    l.credit += usize::from(changed_before);
                }
            }
            (Some("notifications/cancelled"), None) => {
                if let Some(id) = msg.pointer("/params/requestId") {
                    let k = (session.to_owned(), key(id));
                    if let Some(r) = self.requests.get_mut(&k) {
                        r.cancelled = true;
                        if r.method == "subscriptions/listen" {
                            self.listen_cancels.insert(k, (self.sent, false));
                        }
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
        } else if let (Some(m), Some(sub)) =
            (method, msg.get("params").and_then(|p| p.get("_meta")).and_then(|m| m.get(super::modern::SUBSCRIPTION_ID)))
        {
            // A notification of a listen subscription of MCP 2026-07-28 (BR-STATELESS-30/31).
            self.tagged(session, m, sub);
        } else if method == Some("notifications/tools/list_changed") {
            // A legacy session's list_changed.
            self.list_changed(session, now_ms);
        } else if matches!(method, Some("sampling/createMessage" | "roots/list")) {
            // Only a legacy session's call makes the session a call owner: a modern call's input
            // requests go into its InputRequiredResult (BR-STATELESS-17).
            let busy = self.requests.iter().any(|((s, _), r)| {
                s == session && r.method == "tools/call" && r.rid.is_some() && !r.cancelled && !r.modern()
            });
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
        // An answer owed to a request sent again under an id in flight: an error answers it,
        // or any answer once the first request was answered.
        if let Some(n) = self.again.get_mut(&k).filter(|n| **n > 0)
            && (msg.get("error").is_some() || !self.requests.contains_key(&k))
        {
            *n -= 1;
            return;
        }
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
        self.listen_answered(session, &req, id);
        let input_required = self.modern_answered(&k, &req, msg);
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
            && !input_required
        {
            self.compare(id, &want, result);
        }
        if let Some(v) = req.made {
            // The host knows the call ended: its result's enable/disable is in effect.
            let l = self.listeners.entry(session.to_owned()).or_default();
            l.floor = l.floor.max(v);
        }
        if req.method == "tools/list"
            && let Some(result) = msg.get("result")
        {
            self.tools_listed(id, &req, result);
        }
    }

    fn compare(&mut self, id: &Value, want: &Expected, got: &Value) {
        if self.middleware {
            // Middleware may rewrite a result (§ middleware): what the host sees is not the tool's.
            return;
        }
        let content = got.get("content").cloned().unwrap_or(Value::Array(Vec::new()));
        if !same_json(&content, &want.content) {
            self.find(
                content_rule(want.shape.as_deref(), &want.content, &content),
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
        let same = match (structured, want.structured.as_ref()) {
            (Some(a), Some(b)) => same_json(a, b),
            (a, b) => a == b,
        };
        if !same {
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

    /// Notifications of `session` are not seen by its host (over HTTP: no event stream is open,
    /// BR-HTTP-19): no list_changed is owed to it.
    pub fn host_unlistening(&mut self, session: &str) {
        let l = self.listeners.entry(session.to_owned()).or_default();
        l.deaf = true;
        l.owed = None;
    }
}
