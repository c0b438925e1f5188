//! What the bridge does for a host's request that needs the tool process: tools/call (progress
//! routes, cancellation, the call timeout, middleware), resources/read, prompts/get and
//! completion/complete.

use super::*;

impl Bridge {
    /// Forwards one tools/call (§6, §9, §13). `progress` is the host's progressToken;
    /// `cancel` resolves when the host cancels the request.
    pub async fn call_tool(
        &self,
        session: &Arc<dyn HostSession>,
        name: &str,
        arguments: Option<Value>,
        progress: Option<Value>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Value, HostError> {
        let args = match arguments {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(HostError::InvalidParams("arguments must be a JSON object".into())),
        };
        let link = self.served_link()?;
        let has_output_schema = {
            let g = self.inner.lock().unwrap();
            match g.tools.get_active(name) {
                Some(d) => !d.output_schema_json.is_empty(),
                None if std::env::var_os(PLANTED_BUG).is_some_and(|v| v == "unknown-tool-as-result") => {
                    // The planted divergence (tests/testsuite/explore_bridge.rs): an isError result where
                    // BR-CALL-04 wants error -32602.
                    return Ok(
                        json!({"content": [{"type": "text", "text": format!("unknown tool: {name}")}], "isError": true}),
                    );
                }
                None => return Err(HostError::InvalidParams(format!("unknown tool: {name}"))),
            }
        };
        if std::env::var_os(PLANTED_BUG).is_some_and(|v| v == "unanswered-after-restart") && link.generation > 1 {
            // The planted bug (tests/testsuite/explore_bridge.rs): after a restart, calls are never
            // answered (BR-MCP-19), as a bridge that lost its new link's call table would do.
            std::future::pending::<()>().await;
        }
        let mut middleware = link.middleware.lock().unwrap().clone();
        middleware.sort_by_key(|(_, p)| *p); // stable: ties keep registration order
        let mut args_json = args.to_string();
        tokio::pin!(cancel);
        for (mw, _) in &middleware {
            let req = pb::MiddlewareInterceptRequest {
                middleware_name: mw.clone(),
                phase: "before".into(),
                tool_name: name.into(),
                arguments_json: args_json.clone(),
                ..Default::default()
            };
            match self.request(&link, req.into()).await {
                Ok(Msg::MiddlewareInterceptResponse(r)) => {
                    if r.reject {
                        let text = format!("rejected by middleware {mw}: {}", r.reject_reason);
                        return Ok(json!({"content": [{"type": "text", "text": text}], "isError": true}));
                    }
                    if !r.arguments_json.is_empty() {
                        args_json = r.arguments_json;
                    }
                }
                other => return Err(HostError::Internal(format!("middleware {mw}: {}", describe(&other)))),
            }
        }
        let rid = self.next_rid();
        let token = progress.as_ref().map(|_| format!("pt-{rid}"));
        let call = pb::CallToolRequest {
            name: name.into(),
            arguments_json: args_json.clone(),
            progress_token: token.clone().unwrap_or_default(),
        };
        let envelope = Envelope::from(call).with_rid(rid.clone());
        if envelope.encoded_len() > MAX_FRAME as usize {
            // BR-FRAME-04
            return Err(HostError::InvalidParams("the arguments do not fit into one frame".into()));
        }
        {
            let mut g = self.inner.lock().unwrap();
            *g.calls.entry(session.id()).or_default() += 1;
            if let (Some(t), Some(host)) = (&token, progress) {
                g.progress.insert(t.clone(), ProgressRoute { session: session.clone(), token: host, last: None });
            }
        }
        let guard = CallGuard { bridge: self, session: session.id(), token };
        self.trace(false, &envelope);
        let rx = link.request(&rid, envelope);
        let reply = tokio::select! {
            r = rx => r.unwrap_or_else(|_| Err("the tool-process connection ended".into())),
            _ = &mut cancel => {
                // BR-CANCEL-01/03
                link.forget(&rid);
                let c = env::cancel(&rid);
                self.trace(false, &c);
                let _ = link.send(c);
                return Err(HostError::Cancelled);
            }
            _ = tokio::time::sleep(self.cfg.call_timeout) => {
                // BR-CALL-15, BR-CANCEL-05
                link.forget(&rid);
                let c = env::cancel(&rid);
                self.trace(false, &c);
                let _ = link.send(c);
                return Err(HostError::Internal(format!("the tool did not answer within {:?}", self.cfg.call_timeout)));
            }
        };
        drop(guard); // no progress after the result (BR-PROGRESS-03)
        let mut result = match reply {
            Ok(Msg::CallResult(r)) => r,
            other => return Err(HostError::Internal(format!("tools/call {name}: {}", describe(&other)))),
        };
        // BR-CALL-14: the lists take effect before the response.
        if !result.enable_tools.is_empty() || !result.disable_tools.is_empty() {
            let changed = {
                let mut g = self.inner.lock().unwrap();
                let current = g.link.as_ref().is_some_and(|l| Arc::ptr_eq(l, &link));
                current && g.tools.apply_result_lists(&result.enable_tools, &result.disable_tools)
            };
            if changed {
                self.broadcast_list_changed(ListKind::Tools);
            }
        }
        for (mw, _) in middleware.iter().rev() {
            let req = pb::MiddlewareInterceptRequest {
                middleware_name: mw.clone(),
                phase: "after".into(),
                tool_name: name.into(),
                arguments_json: args_json.clone(),
                result_json: result.result_json.clone(),
                is_error: result.is_error,
            };
            match self.request(&link, req.into()).await {
                Ok(Msg::MiddlewareInterceptResponse(r)) => {
                    if !r.result_json.is_empty() {
                        result.result_json = r.result_json;
                    }
                }
                other => return Err(HostError::Internal(format!("middleware {mw}: {}", describe(&other)))),
            }
        }
        session.flush().await;
        Ok(state::call_result(&result, has_output_schema))
    }

    // ----- resources, prompts, completion -----

    pub async fn read_resource(&self, uri: &str) -> Result<Value, HostError> {
        let link = self.served_link()?;
        match self.request(&link, env::read_resource(uri)).await {
            Ok(Msg::ReadResourceResponse(r)) => match state::mcp_contents(uri, &r) {
                Some(c) => Ok(json!({"contents": c})),
                None => Err(HostError::ResourceNotFound(format!("resource not found: {uri}"))),
            },
            other => Err(HostError::Internal(format!("resources/read: {}", describe(&other)))),
        }
    }

    pub async fn get_prompt(&self, name: &str, arguments: Option<Value>) -> Result<Value, HostError> {
        let def = {
            let g = self.inner.lock().unwrap();
            g.lists.prompts.iter().find(|p| p.name == name).cloned()
        };
        let Some(def) = def else { return Err(HostError::InvalidParams(format!("unknown prompt: {name}"))) };
        let args = match arguments {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(HostError::InvalidParams("arguments must be an object".into())),
        };
        for a in def.arguments.iter().filter(|a| a.required) {
            if !args.contains_key(&a.name) {
                return Err(HostError::InvalidParams(format!("missing required argument: {}", a.name)));
            }
        }
        let link = self.served_link()?;
        let args_json = Value::Object(args).to_string();
        match self.request(&link, env::get_prompt(name, &args_json)).await {
            Ok(Msg::GetPromptResponse(r)) => {
                let mut messages = Vec::new();
                for m in &r.messages {
                    if m.role != "user" && m.role != "assistant" {
                        return Err(HostError::Internal(format!("prompt message with role {:?}", m.role)));
                    }
                    let content = match serde_json::from_str::<Value>(&m.content_json) {
                        Ok(v) if v.get("type").is_some_and(Value::is_string) => v,
                        _ => json!({"type": "text", "text": m.content_json}),
                    };
                    messages.push(json!({"role": m.role, "content": content}));
                }
                let mut out = json!({"messages": messages});
                if !r.description.is_empty() {
                    out["description"] = Value::String(r.description.clone());
                }
                Ok(out)
            }
            other => Err(HostError::Internal(format!("prompts/get: {}", describe(&other)))),
        }
    }

    /// completion/complete (§16): `reference` is the MCP `ref` object.
    pub async fn complete(&self, reference: &Value, arg_name: &str, arg_value: &str) -> Result<Value, HostError> {
        let ref_type = reference.get("type").and_then(Value::as_str).unwrap_or_default();
        let ref_name = match ref_type {
            "ref/prompt" => reference.get("name"),
            "ref/resource" => reference.get("uri"),
            other => return Err(HostError::InvalidParams(format!("unknown reference type {other:?}"))),
        }
        .and_then(Value::as_str)
        .unwrap_or_default();
        let link = self.served_link()?;
        match self.request(&link, env::completion(ref_type, ref_name, arg_name, arg_value)).await {
            Ok(Msg::CompletionResponse(r)) => {
                let more = r.values.len() > 100;
                let values: Vec<&String> = r.values.iter().take(100).collect();
                let mut c = json!({"values": values});
                if r.total > 0 && r.total as usize >= values.len() {
                    c["total"] = json!(r.total);
                }
                if r.has_more || more {
                    c["hasMore"] = json!(true);
                }
                Ok(json!({"completion": c}))
            }
            other => Err(HostError::Internal(format!("completion/complete: {}", describe(&other)))),
        }
    }

    // ----- trace -----
}
