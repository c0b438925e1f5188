//! The rmcp server handler of one session: each MCP method onto the core.

use super::{
    Arc, Bridge, Cow, DeserializeOwned, ErrorData, Handler, HostSession, InFlight, Life, NEWEST_VERSION,
    NotificationContext, OnceLock, Ordering, Registry, RequestContext, RoleServer, ServerHandler, Session, Value,
    from_json, host_error, json, m, page, state, to_json,
};

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut calls = self.session.calls.lock().unwrap();
        if let Some(i) = calls.iter().position(|c| *c == self.id) {
            calls.remove(i);
        }
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        self.session.end();
        self.bridge.remove_session(self.session.id);
        if let Some((registry, key)) = &self.registry
            && let Some(k) = key.get()
        {
            registry.sessions.lock().unwrap().remove(k);
            registry.gates.remove(k);
        }
    }
}

impl Handler {
    /// `trace`: record MCP messages at the handler (transports that do not trace raw lines).
    pub fn new(bridge: Arc<Bridge>, trace: bool) -> Handler {
        Handler::with_registry(bridge, trace, None)
    }

    pub(super) fn with_registry(bridge: Arc<Bridge>, trace: bool, registry: Option<Registry>) -> Handler {
        let session = Session::new(bridge.clone(), trace);
        let registry = registry.map(|r| (r, Arc::new(OnceLock::new())));
        let life = Arc::new(Life { bridge: bridge.clone(), session: session.clone(), registry: registry.clone() });
        Handler { bridge, session, registry, _life: life }
    }

    fn as_host(&self) -> Arc<dyn HostSession> {
        self.session.clone()
    }

    /// Records a host request as the JSON-RPC message it was (transports that do not trace raw lines).
    /// A list method's answer (`tools/list`, …): one page of `items` under `key`, traced.
    fn list_page<T: serde::Serialize + DeserializeOwned>(
        &self,
        id: &m::RequestId,
        method: &str,
        key: &str,
        items: Vec<Value>,
        request: &Option<m::PaginatedRequestParams>,
    ) -> Result<T, ErrorData> {
        self.trace_request(id, method, request);
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        self.traced(id, page(self.bridge.cfg.page_size, key, items, cursor).and_then(from_json))
    }

    fn trace_request(&self, id: &m::RequestId, method: &str, params: &impl serde::Serialize) {
        if !self.session.trace {
            return;
        }
        let msg = json!({"jsonrpc": "2.0", "id": to_json(id), "method": method, "params": to_json(params)});
        self.bridge.trace_mcp(true, &msg);
    }

    /// Records the answer to request `id` as the JSON-RPC response it becomes.
    fn traced<T: serde::Serialize>(&self, id: &m::RequestId, r: Result<T, ErrorData>) -> Result<T, ErrorData> {
        if !self.session.trace {
            return r;
        }
        let msg = match &r {
            Ok(v) => json!({"jsonrpc": "2.0", "id": to_json(id), "result": to_json(v)}),
            Err(e) => json!({"jsonrpc": "2.0", "id": to_json(id), "error": to_json(e)}),
        };
        self.bridge.trace_mcp(false, &msg);
        r
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> m::ServerConfig {
        // BR-MCP-05/07: everything advertised always; subscriptions are implemented
        // (BR-RESOURCE-08); never tasks (BR-TASK-03).
        serde_json::from_value(json!({
            "protocolVersion": NEWEST_VERSION,
            "capabilities": {
                "tools": {"listChanged": true},
                "completions": {},
                "logging": {},
                "resources": {"listChanged": true, "subscribe": true},
                "prompts": {"listChanged": true},
            },
            "serverInfo": {"name": "protomcp-conform-bridge", "version": env!("CARGO_PKG_VERSION")},
        }))
        .expect("static server info")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [m::ProtocolVersion]> {
        Cow::Borrowed(m::ProtocolVersion::known_up_to(&m::ProtocolVersion::V_2025_11_25))
    }

    async fn initialize(
        &self,
        request: m::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::InitializeResult, ErrorData> {
        self.trace_request(&context.id, "initialize", &request);
        context.peer.set_peer_info(request.clone());
        self.session.attach(context.peer.clone());
        // The session follows the lists from initialize on; what changes before
        // notifications/initialized is announced right after it (see `Session::attach`).
        self.bridge.add_session(self.as_host());
        self.traced(&context.id, self.negotiate_initialize(&request))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.session.trace {
            self.bridge.trace_mcp(true, &json!({"method": "notifications/initialized"}));
        }
        self.session.attach(context.peer.clone());
        if let Some((registry, key)) = &self.registry
            && let Some(id) = context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())
            && key.set(id.to_owned()).is_ok()
        {
            registry.sessions.lock().unwrap().insert(id.to_owned(), self.session.clone());
        }
        self.bridge.add_session(self.as_host());
        self.session.initialized();
    }

    async fn list_tools(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListToolsResult, ErrorData> {
        self.list_page(&context.id, "tools/list", "tools", self.bridge.tools(), &request)
    }

    async fn call_tool(
        &self,
        request: m::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::CallToolResponse, ErrorData> {
        self.trace_request(&context.id, "tools/call", &request);
        let progress = context.meta.get_progress_token().map(|t| to_json(&t));
        let arguments = request.arguments.map(Value::Object);
        let ct = context.ct.clone();
        let ended = self.session.ended.clone();
        let cancel = async move {
            tokio::select! {
                _ = ct.cancelled() => {}
                _ = ended.cancelled() => {}
            }
        };
        self.session.calls.lock().unwrap().push(context.id.clone());
        let _in_flight = InFlight { session: &self.session, id: context.id.clone() };
        let r = self.bridge.call_tool(&self.as_host(), &request.name, arguments, progress, cancel).await;
        let r = match r {
            Ok(v) => from_json::<m::CallToolResult>(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r).map(m::CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListResourcesResult, ErrorData> {
        self.list_page(&context.id, "resources/list", "resources", self.bridge.resources(), &request)
    }

    async fn list_resource_templates(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListResourceTemplatesResult, ErrorData> {
        self.list_page(&context.id, "resources/templates/list", "resourceTemplates", self.bridge.templates(), &request)
    }

    async fn read_resource(
        &self,
        request: m::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ReadResourceResponse, ErrorData> {
        self.trace_request(&context.id, "resources/read", &request);
        let r = match self.bridge.read_resource(self.session.id, &request.uri).await {
            Ok(v) => from_json::<m::ReadResourceResult>(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r).map(Into::into)
    }

    async fn subscribe(
        &self,
        request: m::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.trace_request(&context.id, "resources/subscribe", &request);
        self.session.subscriptions.lock().unwrap().insert(request.uri);
        self.traced(&context.id, Ok(json!({})))?;
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: m::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.trace_request(&context.id, "resources/unsubscribe", &request);
        self.session.subscriptions.lock().unwrap().remove(&request.uri);
        self.traced(&context.id, Ok(json!({})))?;
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<m::PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<m::ListPromptsResult, ErrorData> {
        self.list_page(&context.id, "prompts/list", "prompts", self.bridge.prompts(), &request)
    }

    async fn get_prompt(
        &self,
        request: m::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::GetPromptResponse, ErrorData> {
        self.trace_request(&context.id, "prompts/get", &request);
        let r = match self.bridge.get_prompt(self.session.id, &request.name, request.arguments.map(Value::Object)).await
        {
            Ok(v) => from_json::<m::GetPromptResult>(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r).map(Into::into)
    }

    async fn complete(
        &self,
        request: m::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::CompleteResult, ErrorData> {
        self.trace_request(&context.id, "completion/complete", &request);
        let reference = to_json(&request.r#ref);
        let r = match self
            .bridge
            .complete(self.session.id, &reference, &request.argument.name, &request.argument.value)
            .await
        {
            Ok(v) => from_json(v),
            Err(e) => Err(host_error(e)),
        };
        self.traced(&context.id, r)
    }

    async fn set_level(
        &self,
        request: m::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.trace_request(&context.id, "logging/setLevel", &request);
        let level = to_json(&request.level);
        let Some(rank) = level.as_str().and_then(|l| state::LEVELS.iter().position(|x| *x == l)) else {
            return self.traced(&context.id, Err(ErrorData::invalid_params("unknown log level", None)));
        };
        self.session.threshold.store(rank, Ordering::Relaxed);
        self.traced(&context.id, Ok(json!({})))?;
        Ok(())
    }
}
