//! The tool side of a bridge run: the tool process's connection as the mock relays it (its
//! socket report), its handshake and the reloads of watch mode.

use super::{
    Duration, Instant, PullAnswers, REPORT, ReloadBegins, ReloadForm, Run, StepError, ToolHandshake, Value, arm_of,
    compact, json,
};

impl Run<'_> {
    /// The tools of a `tool_handshake`, placeholders filled in from the captures.
    fn tools_of(&self, h: &ToolHandshake) -> Result<Value, StepError> {
        crate::scenario::template::substitute(&Value::Array(h.tools.clone()), &self.ex.caps)
            .map_err(|e| StepError::Error(e.to_string()))
    }

    /// What the mock on the current tool-side connection found before it connected to the
    /// bridge ([`crate::mock::SocketReport`]).
    pub(super) fn tool_report(&self) -> Result<crate::mock::SocketReport, StepError> {
        let pid = self.ex.peer_pid.ok_or_else(|| StepError::Error("no tool process is connected".into()))?;
        crate::mock::read_reports(&self.dir.join(REPORT))
            .into_iter()
            .rfind(|r| i32::try_from(r.pid) == Ok(pid))
            .ok_or_else(|| StepError::Error(format!("the mock (pid {pid}) wrote no report into {REPORT}")))
    }

    /// `reload_begins` ([`ReloadBegins`]): waits for the end of the tool process's connection
    /// or a ReloadRequest, passing over anything else (a CancelRequest for a call in flight, a
    /// pull), as `expect_close` does.
    pub(super) async fn reload_begins(&mut self, r: &ReloadBegins) -> Result<(), StepError> {
        let within = self.ex.t(r.within);
        let deadline = Instant::now() + within;
        loop {
            let v = match self.ex.next_or_end(deadline, within).await {
                Ok(v) => v,
                Err(StepError::Fail(_)) => {
                    return Err(StepError::Fail(format!(
                        "no reload began within {within:?}: the tool process's connection is still open and no ReloadRequest came"
                    )));
                }
                Err(e) => return Err(e),
            };
            match v {
                None if r.form == ReloadForm::Request => {
                    return Err(StepError::NotApplicable(
                        "the bridge reloads by restarting the tool process, which BR-RELOAD-01 allows; this scenario is about reloads by ReloadRequest".into(),
                    ));
                }
                None => {
                    self.ex.forget_conn();
                    return Ok(());
                }
                Some(v) if arm_of(&v) == Some("reload") => {
                    if r.form == ReloadForm::Restart {
                        return Err(StepError::NotApplicable(
                            "the bridge reloads by sending ReloadRequest, which BR-RELOAD-01 allows; this scenario is about reloads by restart".into(),
                        ));
                    }
                    let rid = v.get("request_id").cloned().unwrap_or(json!(""));
                    return match &r.refuse {
                        Some(error) => {
                            let reply =
                                json!({"request_id": rid, "reload_response": {"success": false, "error": error}});
                            self.ex.send_value(reply).await
                        }
                        None => {
                            self.reload_rid = Some(rid);
                            Ok(())
                        }
                    };
                }
                Some(_) => continue,
            }
        }
    }

    /// The burst that answers a ReloadRequest (spec §21, TP-RELOAD-01/02): ReloadResponse with
    /// its rid, ToolListResponse with empty rid, each registration acknowledged, the marker, the
    /// hidden-tool DisableToolsRequest. Until the marker the bridge sends nothing but
    /// acknowledgements (BR-RELOAD-02). Later list pulls are answered as they come.
    pub(super) async fn reload_burst(&mut self, rid: Value, h: &ToolHandshake) -> Result<(), StepError> {
        let within = self.ex.t(h.within);
        let deadline = Instant::now() + within;
        self.ex.send_value(json!({"request_id": rid, "reload_response": {"success": true}})).await?;
        let tools = self.tools_of(h)?;
        self.ex.send_value(json!({"request_id": "", "tool_list": {"tools": tools}})).await?;
        self.ex.found = &["BR-RELOAD-02"];
        self.registrations_and_marker(h, deadline, within, "during the reload's burst, ").await?;
        self.ex.lists = Some(PullAnswers {
            resources: json!(h.resources),
            templates: json!(h.resource_templates),
            prompts: json!(h.prompts),
        });
        Ok(())
    }

    /// The part a startup and a reload's burst share: each of `h.middleware` registered and its
    /// acknowledgement awaited (nothing else may come first), the marker unless `h.marker` is
    /// false, the DisableToolsRequest for `h.hidden`.
    pub(super) async fn registrations_and_marker(
        &mut self,
        h: &ToolHandshake,
        deadline: Instant,
        within: Duration,
        when: &str,
    ) -> Result<(), StepError> {
        for m in &h.middleware {
            self.ex.send_value(json!({"request_id": "", "register_middleware": m})).await?;
            let v = self.ex.next_required(deadline, within, &[]).await?;
            if arm_of(&v) != Some("register_middleware_response") {
                return Err(StepError::Fail(format!(
                    "{when}expected the RegisterMiddlewareResponse for {}, got {}",
                    compact(m),
                    compact(&v)
                )));
            }
        }
        if h.marker {
            self.ex.send_value(json!({"request_id": "", "reload_response": {"success": true}})).await?;
        }
        if !h.hidden.is_empty() {
            self.ex.send_value(json!({"request_id": "", "disable_tools": {"tool_names": h.hidden}})).await?;
        }
        Ok(())
    }

    /// The tool side of the startup (see [`ToolHandshake`]).
    pub(super) async fn tool_handshake(&mut self, h: &ToolHandshake) -> Result<(), StepError> {
        if let Some(rid) = self.reload_rid.take() {
            return self.reload_burst(rid, h).await;
        }
        let within = self.ex.t(h.within);
        let deadline = Instant::now() + within;
        self.ex.found = &["BR-HANDSHAKE-01"];
        let v = self.ex.next_required(deadline, within, &[]).await?;
        if arm_of(&v) != Some("list_tools") {
            return Err(StepError::Fail(format!("expected the ListToolsRequest first, got {}", compact(&v))));
        }
        let rid = v.get("request_id").cloned().unwrap_or(json!(""));
        let tools = self.tools_of(h)?;
        self.ex.send_value(json!({"request_id": rid, "tool_list": {"tools": tools}})).await?;
        self.ex.found = &["BR-HANDSHAKE-04"];
        self.registrations_and_marker(h, deadline, within, "").await?;
        let quiet = self.ex.t(crate::scenario::HANDSHAKE_QUIET);
        // Without the marker the bridge first waits HANDSHAKE_QUIET itself.
        let mut first = !h.marker;
        let mut answered = 0;
        let mut held = Vec::new();
        while answered < 3 {
            let wait = Instant::now() + if first { quiet * 3 } else { quiet };
            first = false;
            let v = match self.ex.next_required(wait, quiet, &[]).await {
                Ok(v) => v,
                Err(StepError::Fail(_)) => {
                    self.ex.forget_violation();
                    break;
                }
                Err(e) => return Err(e),
            };
            let rid = v.get("request_id").cloned().unwrap_or(json!(""));
            // A bridge may answer the hidden-tool DisableToolsRequest, a notification, with an
            // ActiveToolsResponse with empty rid (BR-TOOLLIST-10): not a pull, let it pass.
            if arm_of(&v) == Some("active_tools") && rid.as_str().unwrap_or("").is_empty() {
                continue;
            }
            let reply = match arm_of(&v) {
                Some("list_resources_request") => json!({"resource_list_response": {"resources": h.resources}}),
                Some("list_resource_templates_request") => {
                    json!({"resource_template_list_response": {"templates": h.resource_templates}})
                }
                Some("list_prompts_request") => json!({"prompt_list_response": {"prompts": h.prompts}}),
                _ => {
                    return Err(StepError::Fail(format!(
                        "expected the list pulls after the handshake, got {}",
                        compact(&v)
                    )));
                }
            };
            let mut reply = reply;
            reply["request_id"] = rid;
            if h.hold_pulls.is_some() {
                held.push(reply);
            } else {
                self.ex.send_value(reply).await?;
            }
            answered += 1;
        }
        // `hold_pulls_ms`: the answers go out only after the hold; host messages wait meanwhile.
        if let Some(hold) = h.hold_pulls
            && !held.is_empty()
        {
            tokio::time::sleep(self.ex.t(hold)).await;
            for reply in held {
                self.ex.send_value(reply).await?;
            }
        }
        // Pulls that come later (on demand, BR-HANDSHAKE-09) get the same answers.
        self.ex.lists = Some(PullAnswers {
            resources: json!(h.resources),
            templates: json!(h.resource_templates),
            prompts: json!(h.prompts),
        });
        Ok(())
    }
}
