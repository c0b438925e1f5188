//! What the tool process sends unasked, dispatched by message type (the link's [`Dispatch`]):
//! tool-list control, progress, logs, resource updates, and its reverse requests (sampling and
//! roots, routed to the session whose call is in flight).

use super::*;

impl Bridge {
    pub(super) async fn sampling(&self, req: pb::SamplingRequest) -> pb::SamplingResponse {
        let fail = |e: String| pb::SamplingResponse { error: e, ..Default::default() };
        let Some(session) = self.sole_caller() else {
            return fail("no single MCP session with a call in flight to ask for sampling".into());
        };
        if !session.can_sample() {
            return fail("the MCP client did not declare the sampling capability".into());
        }
        let messages = match serde_json::from_str::<Value>(&req.messages_json) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .map(|mut m| {
                    if let Some(Value::String(s)) = m.get("content") {
                        m["content"] = json!({"type": "text", "text": s});
                    }
                    m
                })
                .collect::<Vec<_>>(),
            _ => return fail("messages_json is not a JSON array".into()),
        };
        let mut params = json!({
            "messages": messages,
            "maxTokens": if req.max_tokens > 0 { req.max_tokens } else { 1024 },
        });
        if !req.system_prompt.is_empty() {
            params["systemPrompt"] = Value::String(req.system_prompt.clone());
        }
        if let Ok(prefs @ Value::Object(_)) = serde_json::from_str::<Value>(&req.model_preferences_json) {
            params["modelPreferences"] = prefs;
        }
        match tokio::time::timeout(self.cfg.call_timeout, session.sample(params)).await {
            Err(_) => fail("the MCP client did not answer sampling/createMessage in time".into()),
            Ok(Err(e)) => fail(e),
            Ok(Ok(r)) => pb::SamplingResponse {
                role: r.get("role").and_then(Value::as_str).unwrap_or("assistant").to_owned(),
                content_json: r.get("content").map(Value::to_string).unwrap_or_default(),
                model: r.get("model").and_then(Value::as_str).unwrap_or_default().to_owned(),
                stop_reason: r.get("stopReason").and_then(Value::as_str).unwrap_or_default().to_owned(),
                error: String::new(),
            },
        }
    }

    pub(super) async fn roots(&self) -> pb::ListRootsResponse {
        let Some(session) = self.sole_caller().filter(|s| s.can_list_roots()) else {
            return pb::ListRootsResponse::default();
        };
        match tokio::time::timeout(self.cfg.call_timeout, session.list_roots()).await {
            Ok(Ok(r)) => pb::ListRootsResponse {
                roots: r
                    .get("roots")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|root| pb::RootDef {
                        uri: root.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        name: root.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    })
                    .collect(),
            },
            _ => pb::ListRootsResponse::default(),
        }
    }
}

impl Dispatch for Bridge {
    fn control(&self, op: &state::ToolOp) -> Vec<String> {
        let (changed, active) = {
            let mut g = self.inner.lock().unwrap();
            let changed = g.tools.apply(op);
            (changed, g.tools.active_names())
        };
        if changed {
            self.broadcast_list_changed(ListKind::Tools);
        }
        active
    }

    fn progress(&self, p: pb::ProgressNotification) {
        let target = {
            let mut g = self.inner.lock().unwrap();
            match g.progress.get_mut(&p.progress_token) {
                // BR-PROGRESS-05: only increasing values.
                Some(route) if route.last.is_none_or(|l| p.progress > l) => {
                    route.last = Some(p.progress);
                    Some((route.session.clone(), route.token.clone()))
                }
                _ => None,
            }
        };
        if let Some((session, token)) = target {
            let total = (p.total != 0).then_some(p.total);
            let message = (!p.message.is_empty()).then_some(p.message);
            session.progress(token, p.progress, total, message);
        }
    }

    fn log(&self, l: pb::LogMessage) {
        let level = state::log_level(&l.level);
        let data = state::log_data(&l.data_json);
        let logger = (!l.logger.is_empty()).then_some(l.logger);
        for s in self.sessions() {
            s.log(level, logger.clone(), data.clone());
        }
    }

    fn resource_changed(&self, uri: String) {
        for s in self.sessions() {
            s.resource_updated(&uri);
        }
    }

    fn reverse(&self, link: Arc<Link>, rid: String, msg: Msg) {
        // The answer may take a while (a human at the host): never block the reader
        // (BR-CONCUR-06). A weak handle is not needed: the task ends within CALL_TIMEOUT.
        let this = self.self_arc();
        tokio::spawn(async move {
            let reply: Envelope = match msg {
                Msg::SamplingRequest(r) => this.sampling(r).await.into(),
                _ => this.roots().await.into(),
            };
            let reply = reply.with_rid(rid);
            this.trace(false, &reply);
            let _ = link.send(reply);
        });
    }

    fn diag(&self, line: String) {
        diag(&line);
    }

    fn trace(&self, from_tp: bool, envelope: &Envelope) {
        Bridge::trace(self, from_tp, envelope);
    }

    fn trace_item(&self, item: &dyn Fn() -> crate::transcript::Item) {
        if let Some(t) = &self.trace {
            t.item(&item());
        }
    }
}

impl Bridge {
    pub(super) fn self_arc(&self) -> Arc<Bridge> {
        self.me.upgrade().expect("the bridge is alive while its reader runs")
    }
}
