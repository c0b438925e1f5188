//! The tool process's side: the Envelopes it received and sent, and its connection's end.

use super::{
    BridgeModel, Expected, Msg, NEEDS_TOOL, SessionName, T_PROMPT, Value, content_of, content_shape, pb, same_json,
};

impl BridgeModel {
    /// An Envelope the bridge sent to the tool process.
    pub fn tool_received(&mut self, env: &pb::Envelope) {
        let rid = env.request_id.clone();
        let Some(msg) = &env.msg else { return };
        let (method, what) = match msg {
            Msg::ListTools(_) if !rid.is_empty() => {
                self.tools.discovery.insert(rid);
                return;
            }
            // A reloaded tool process registers anew with a tool list under the empty rid
            // (§ reload): that list is a discovery like any other.
            Msg::Reload(_) => {
                self.tools.discovery.insert(String::new());
                return;
            }
            Msg::CallTool(c) => {
                self.modern_tool_received(env);
                ("tools/call", Some(c.name.clone()))
            }
            Msg::Cancel(_) => {
                self.modern_tool_received(env);
                return;
            }
            Msg::ReadResourceRequest(_) => ("resources/read", None),
            Msg::GetPromptRequest(_) => ("prompts/get", None),
            Msg::CompletionRequest(_) => ("completion/complete", None),
            Msg::SamplingResponse(_) | Msg::ListRootsResponse(_) => {
                self.modern_tool_received(env);
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
        // The host request it stands for: of that method (and tool name), without an Envelope
        // yet; the one whose copied fields it carries, else the oldest.
        let candidates: Vec<(SessionName, String)> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                r.method == method
                    && r.rid.is_none()
                    && !r.cancelled
                    && !r.is_retry()
                    && what.as_ref().is_none_or(|n| r.params.get("name").and_then(Value::as_str) == Some(n))
            })
            .map(|(k, _)| k.clone())
            .collect();
        // Middleware may rewrite a request before it is forwarded: then nothing is compared.
        let faithful = if self.middleware {
            None
        } else {
            candidates.iter().find(|k| copy_mismatch(msg, &self.requests[*k].params).is_none())
        };
        // A mismatch is certain only when no other request could be the one the Envelope is for.
        let mismatch = match (faithful, candidates.as_slice()) {
            (None, [only]) if !self.middleware => copy_mismatch(msg, &self.requests[only].params),
            _ => None,
        };
        let chosen = faithful.or(candidates.first()).cloned();
        if let Some((requirement, why)) = mismatch {
            self.find(requirement, format!("{} (rid {rid:?}): {why}", crate::Arm::of(msg).name()));
        }
        match chosen {
            Some(k) => {
                self.modern_call_started(&k, &rid);
                let r = self.requests.get_mut(&k).expect("a candidate is a request in flight");
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
    /// (a sideband transfer or a stream as the CallToolResponse it stands for). Without a time,
    /// a list_changed it makes owed is judged only at [`finish`](Self::finish), never as late.
    pub fn tool_sent(&mut self, env: &pb::Envelope) {
        self.tool_sent_inner(env, None);
    }

    /// [`tool_sent`](Self::tool_sent) at `now_ms`: a list_changed it makes owed is due within
    /// `T_LISTCHANGE` of it (BR-TOOLLIST-12).
    pub fn tool_sent_at(&mut self, now_ms: u64, env: &pb::Envelope) {
        self.tool_sent_inner(env, Some(now_ms));
    }

    fn tool_sent_inner(&mut self, env: &pb::Envelope, now_ms: Option<u64>) {
        let rid = env.request_id.clone();
        match &env.msg {
            Some(Msg::CallResult(r)) => {
                let k = self.rids.get(&rid).cloned();
                // An object for a legacy session (BR-CALL-11), any JSON value for a modern
                // request (BR-STATELESS-34).
                let modern = k.as_ref().is_none_or(|k| self.requests.get(k).is_some_and(|q| q.modern()));
                let structured =
                    serde_json::from_str::<Value>(&r.structured_content_json).ok().filter(|v| modern || v.is_object());
                let want = Expected {
                    shape: content_shape(&r.result_json),
                    content: content_of(&r.result_json),
                    is_error: r.is_error,
                    structured,
                };
                // A parked modern call's result waits for the next accepted retry (BR-STATELESS-27).
                let Some(k) = k else {
                    self.modern_result(&rid, &want);
                    return;
                };
                // Only the first reply counts (BR-CALL-17).
                if self.results.contains_key(&k) {
                    return;
                }
                self.results.insert(k.clone(), want);
                if !r.enable_tools.is_empty() || !r.disable_tools.is_empty() {
                    let before = self.tools.active();
                    if self.requests.get(&k).is_some_and(|q| q.cancelled) {
                        // Whether the bridge applies what a cancelled call's result changes is
                        // not the model's to say.
                        self.tools.mode = None;
                    } else {
                        self.tools.enable(&r.enable_tools);
                        self.tools.disable(&r.disable_tools);
                    }
                    let made = self.tools_updated(before, now_ms);
                    if let Some(q) = self.requests.get_mut(&k) {
                        q.made = made;
                    }
                }
            }
            Some(Msg::RegisterMiddleware(_)) => self.middleware = true,
            Some(m @ (Msg::SamplingRequest(_) | Msg::ListRootsRequest(_))) if !rid.is_empty() => {
                self.modern_input(&rid);
                self.reverse.insert(rid, crate::Arm::of(m).name());
            }
            _ => self.tool_list_control(env, now_ms),
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
        self.modern_tool_ended();
        // BR-TOOLLIST-15: across a restart the mode and sets may be kept or reset.
        let before = self.tools.active();
        self.tools.mode = None;
        self.tools.fresh = false;
        self.tools.discovery.clear();
        self.tools_updated(before, Some(now_ms));
    }
}

/// The first field of request Envelope `msg` that is not a faithful copy of the host request's
/// `params`: tools/call arguments (BR-CALL-02) and whether a progress token was asked for
/// (BR-PROGRESS-01), the resource URI (BR-RESOURCE-03), the prompt's name and arguments
/// (BR-PROMPT-04). JSON is compared by value (numbers by value too, `1` and `1.0` alike); text that
/// does not parse here (e.g. nested deeper than this parser goes) is not judged.
fn copy_mismatch(msg: &Msg, params: &Value) -> Option<(&'static str, String)> {
    let arguments = |json: &str, requirement: &'static str| {
        let want = match params.get("arguments") {
            None | Some(Value::Null) => serde_json::json!({}),
            Some(v) => v.clone(),
        };
        let got = serde_json::from_str::<Value>(json).ok()?;
        (!same_json(&got, &want))
            .then(|| (requirement, format!("arguments_json {json} is not the host's arguments {want}")))
    };
    match msg {
        Msg::CallTool(c) => {
            let asked = params.pointer("/_meta/progressToken").is_some_and(|t| !t.is_null());
            if asked == c.progress_token.is_empty() {
                let why = if asked {
                    "progress_token is empty though the host's tools/call carries _meta.progressToken"
                } else {
                    "progress_token is set though the host's tools/call carries no _meta.progressToken"
                };
                return Some(("BR-PROGRESS-01", why.to_owned()));
            }
            arguments(&c.arguments_json, "BR-CALL-02")
        }
        Msg::ReadResourceRequest(r) => {
            let want = params.get("uri").and_then(Value::as_str)?;
            (r.uri != want).then(|| ("BR-RESOURCE-03", format!("uri {:?} is not the requested {want:?}", r.uri)))
        }
        Msg::GetPromptRequest(g) => {
            let want = params.get("name").and_then(Value::as_str)?;
            if g.name != want {
                return Some(("BR-PROMPT-04", format!("name {:?} is not the requested {want:?}", g.name)));
            }
            arguments(&g.arguments_json, "BR-PROMPT-04")
        }
        _ => None,
    }
}
