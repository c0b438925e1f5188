//! The scenario's header: id, role, level, requirements, testee, transports and its checks
//! across the steps.

use super::*;

impl Checker<'_> {
    pub(super) fn scenario(&mut self, raw: RawScenario) -> Scenario {
        let id = raw.id.value.trim().to_owned();
        if !id_syntax().is_match(&id) {
            self.error(
                loc(&raw.id),
                format!("scenario id `{id}` must be lowercase words joined by dots (at least two), e.g. calls.request-id-echo"),
            );
        }
        let title = raw.title.value.trim().to_owned();
        if title.is_empty() {
            self.error(loc(&raw.title), "the title is empty");
        }
        let role = match raw.role.value.as_str() {
            "tool-process" => Role::ToolProcess,
            "bridge" => Role::Bridge,
            other => {
                self.error(loc(&raw.role), format!("unknown role `{other}`; valid: tool-process, bridge"));
                Role::ToolProcess
            }
        };
        let level = match raw.level.value.as_str() {
            "MUST" => Level::Must,
            "SHOULD" => Level::Should,
            "MAY" => Level::May,
            other => {
                self.error(loc(&raw.level), format!("unknown level `{other}`; valid: MUST, SHOULD, MAY"));
                Level::Must
            }
        };
        let needs = self.needs(raw.needs.as_ref(), role);
        let reqs = self.requirements(&raw.requirements, role, &needs, "a scenario");
        self.check_level(&raw.level, level, &reqs);
        let timeout = raw.timeout_ms.as_ref().and_then(|t| {
            if t.value.0 == 0 {
                self.error(loc(t), "timeout_ms must be at least 1");
                None
            } else {
                Some(Duration::from_millis(t.value.0))
            }
        });
        let testee = match &raw.testee {
            Some(t) => self.testee(t, role, &needs),
            None => TesteeSetup::default(),
        };
        let host_requests = self.host_requests(raw.host_requests.as_ref(), role);
        let stale_socket = self.bridge_flag(raw.stale_socket.as_ref(), role, "stale_socket");
        let shared_tmp = self.bridge_flag(raw.shared_tmp.as_ref(), role, "shared_tmp");
        let transports = self.transports(raw.transports.as_ref(), role);
        let steps = self.steps(&raw.steps, &testee, role, &needs);
        self.check_role_steps(&steps, role);
        self.check_transport_needs(&transports, &steps);
        self.check_socket_needs(&raw, &needs, &steps);
        Scenario {
            file: self.file.to_owned(),
            id,
            id_loc: loc(&raw.id),
            title,
            requirements: reqs.into_iter().map(|(r, _)| r).collect(),
            level,
            role,
            needs: needs.into_iter().map(|(n, _)| n).collect(),
            notes: raw.notes.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()),
            timeout,
            testee,
            host_requests,
            stale_socket,
            shared_tmp,
            transports,
            exclusive: raw.exclusive.as_ref().is_some_and(|b| b.value),
            steps,
        }
    }

    /// `tool_handshake.middleware`: a list of RegisterMiddlewareRequest trees (`{name, priority}`).
    pub(super) fn registrations(&mut self, node: Option<&Node>) -> Option<Vec<serde_json::Value>> {
        let Some(n) = node else { return Some(Vec::new()) };
        let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
        let serde_json::Value::Array(items) = v else {
            self.error(n.loc, "`middleware` is a list of {name, priority}");
            return None;
        };
        for item in &items {
            let tree = serde_json::json!({"request_id": "", "register_middleware": item});
            if let Err(e) = Template::new(tree) {
                self.error(n.loc, e.to_string());
                return None;
            }
        }
        Some(items)
    }

    /// `transports: [stdio]`: the bridge transports a bridge scenario applies to.
    fn transports(&mut self, raw: Option<&Spanned<Vec<Spanned<String>>>>, role: Role) -> Vec<Transport> {
        let Some(raw) = raw else { return Vec::new() };
        if role != Role::Bridge {
            self.error(loc(raw), "`transports` applies to bridge scenarios only (role: bridge)");
            return Vec::new();
        }
        if raw.value.is_empty() {
            self.error(loc(raw), "`transports` needs at least one transport (stdio, http); leave it out for all");
        }
        let mut out = Vec::new();
        for t in &raw.value {
            match Transport::parse(t.value.trim()) {
                Some(x) if out.contains(&x) => self.error(loc(t), format!("transport `{}` is listed twice", x.name())),
                Some(x) => out.push(x),
                None => self.error(loc(t), format!("unknown transport `{}`; valid: stdio, http", t.value)),
            }
        }
        out
    }

    /// `host: NAME` of a host step: letters, digits, `-` and `_`.
    pub(super) fn step_host(&mut self, step: &RawStep) -> Option<String> {
        let h = match step {
            RawStep::HostSend(h) => h.host.as_ref(),
            RawStep::HostExpect(h) => h.host.as_ref(),
            RawStep::HostExpectNothing(h) => h.host.as_ref(),
            RawStep::HostClose(h) => h.host.as_ref(),
            _ => None,
        }?;
        let ok = !h.value.is_empty() && h.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            self.error(loc(h), format!("host `{}`: a name of letters, digits, `-` and `_`", h.value));
            return None;
        }
        Some(h.value.clone())
    }

    /// `host_expect.stream`: `get`, or `{request: ID}` (a JSON-RPC id: a number or a string).
    pub(super) fn host_stream(&mut self, n: &Node) -> Option<HostStream> {
        let wrong = "`stream` is `get` (the session's GET event stream) or `{request: ID}` (the response to the POST that carried the request with that id)";
        match &n.kind {
            NodeKind::Str(s) if s == "get" => Some(HostStream::Get),
            NodeKind::Map(entries) if entries.len() == 1 && entries[0].0.name == "request" => {
                match n.to_value().ok().and_then(|v| v.get("request").cloned()) {
                    Some(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_))) => {
                        Some(HostStream::Request(id))
                    }
                    _ => {
                        self.error(entries[0].1.loc, "`stream.request` is a JSON-RPC id: a number or a string");
                        None
                    }
                }
            }
            _ => {
                self.error(n.loc, wrong);
                None
            }
        }
    }

    /// A `host_http` step: method, headers (a mapping of strings), session and the expectation.
    pub(super) fn host_http(&mut self, h: &raw::RawHostHttp, compiler: &mut Compiler) -> Option<HostHttp> {
        let method = match &h.method {
            None => "POST".to_owned(),
            Some(m) if !m.value.is_empty() && m.value.bytes().all(|b| b.is_ascii_uppercase()) => m.value.clone(),
            Some(m) => {
                self.error(loc(m), format!("`{}` is not an HTTP method (upper-case letters, e.g. POST)", m.value));
                return None;
            }
        };
        let path = match &h.path {
            Some(p) if !p.value.starts_with('/') || p.value.contains(char::is_whitespace) => {
                self.error(loc(p), "a path starts with `/` and holds no white space");
                return None;
            }
            p => p.as_ref().map(|p| p.value.clone()),
        };
        let mut headers = Vec::new();
        if let Some(n) = &h.headers {
            let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
            let serde_json::Value::Object(map) = v else {
                self.error(n.loc, "`headers` is a mapping of header names to strings");
                return None;
            };
            for (name, value) in map {
                let ok_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                match value {
                    serde_json::Value::String(v) if ok_name && !v.contains(['\r', '\n']) => headers.push((name, v)),
                    _ => {
                        self.error(n.loc, format!("header `{name}`: a token name and a one-line string value"));
                        return None;
                    }
                }
            }
        }
        // `${name}` in the session id, header values and body: captures of earlier steps.
        let hloc = h.headers.as_ref().map_or(Loc::default(), |n| n.loc);
        let mut texts: Vec<(&str, Loc)> = headers.iter().map(|(_, v)| (v.as_str(), hloc)).collect();
        texts.extend(h.session.iter().chain(h.body.iter()).map(|t| (t.value.as_str(), loc(t))));
        for (text, at) in texts {
            match template::parse(text) {
                Ok(pieces) => {
                    for p in pieces {
                        if let template::Piece::Var(name) = p {
                            compiler.used.push((name, at));
                        }
                    }
                }
                Err(msg) => {
                    self.error(at, msg);
                    return None;
                }
            }
        }
        let session = match h.session.as_ref().map(|s| s.value.as_str()) {
            None | Some("current") => HttpSessionRef::Current,
            Some("none") => HttpSessionRef::None,
            Some(other) => HttpSessionRef::Literal(other.to_owned()),
        };
        let within = self.within(h.within_ms.as_ref(), T_PROMPT);
        let mut pat = |n: &Option<Node>, this: &mut Self| match n {
            None => Some(None),
            Some(n) => this.pattern(compiler.value(n)).map(Some),
        };
        let status = pat(&h.expect.status, self)?;
        let expect_headers = pat(&h.expect.headers, self)?;
        let expect_body = pat(&h.expect.body, self)?;
        if status.is_none() && expect_headers.is_none() && expect_body.is_none() {
            self.error(Loc::default(), "host_http: `expect` needs `status`, `headers` or `body`");
            return None;
        }
        Some(HostHttp {
            method,
            path,
            headers,
            body: h.body.as_ref().map(|b| b.value.clone()).unwrap_or_default(),
            session,
            within,
            status,
            expect_headers,
            expect_body,
        })
    }

    /// Host steps and `tool_handshake` belong to bridge scenarios; the bridge-side `handshake`,
    /// `expect_alive` and `expect_no_connect` to tool-process scenarios.
    fn check_role_steps(&mut self, steps: &[Step], role: Role) {
        for st in steps {
            let a = &st.action;
            if a.bridge_only() && role != Role::Bridge {
                self.error(st.loc, format!("`{}` belongs to bridge scenarios (role: bridge)", a.keyword()));
            }
            if a.tool_process_only() && role == Role::Bridge {
                self.error(
                    st.loc,
                    format!(
                        "`{}` belongs to tool-process scenarios; a bridge scenario uses tool_handshake",
                        a.keyword()
                    ),
                );
            }
        }
    }

    fn needs(&mut self, needs: Option<&Spanned<Vec<Spanned<String>>>>, role: Role) -> Vec<(String, Loc)> {
        let mut out: Vec<(String, Loc)> = Vec::new();
        let known = requirements::features(role.party());
        for n in needs.map(|n| n.value.as_slice()).unwrap_or_default() {
            let name = n.value.as_str();
            if !known.contains(&name) {
                self.error(
                    loc(n),
                    format!(
                        "unknown feature `{name}` for role {}; valid: {}",
                        if role == Role::Bridge { "bridge" } else { "tool-process" },
                        known.join(", ")
                    ),
                );
            } else if out.iter().any(|(o, _)| o == name) {
                self.error(loc(n), format!("feature `{name}` is listed twice"));
            } else {
                out.push((name.to_owned(), loc(n)));
            }
        }
        out
    }

    pub(super) fn requirements(
        &mut self,
        list: &Spanned<Vec<Spanned<String>>>,
        role: Role,
        needs: &[(String, Loc)],
        what: &str,
    ) -> Vec<(&'static requirements::Requirement, Loc)> {
        if list.value.is_empty() {
            self.error(loc(list), format!("{what} must cite at least one requirement"));
        }
        let mut out: Vec<(&'static requirements::Requirement, Loc)> = Vec::new();
        for item in &list.value {
            let id = item.value.trim();
            let at = loc(item);
            let Some(r) = requirements::get(id) else {
                self.error(at, unknown_requirement(id));
                continue;
            };
            if r.withdrawn {
                self.error(at, format!("{id} is withdrawn and cannot be cited"));
            }
            if r.party() != role.party() {
                self.error(
                    at,
                    format!(
                        "{id} is an obligation of a {}, but this scenario's role is {}",
                        r.party(),
                        if role == Role::Bridge { "bridge" } else { "tool-process" }
                    ),
                );
            }
            if let Some(f) = r.feature
                && !needs.iter().any(|(n, _)| n == f)
            {
                self.error(at, format!("{id} depends on feature `{f}`: add it to `needs`"));
            }
            if out.iter().any(|(o, _)| o.id == r.id) {
                self.error(at, format!("{id} is cited twice"));
                continue;
            }
            out.push((r, at));
        }
        out
    }

    /// The scenario's level must lie between the weakest and the strongest level it cites: a
    /// failure must never be reported stronger than any cited requirement allows, nor weaker
    /// than all of them.
    fn check_level(&mut self, at: &Spanned<String>, level: Level, reqs: &[(&'static requirements::Requirement, Loc)]) {
        let Some(max) = reqs.iter().map(|(r, _)| r.level).max_by_key(|l| strength(*l)) else { return };
        let min = reqs.iter().map(|(r, _)| r.level).min_by_key(|l| strength(*l)).expect("non-empty");
        let cited = reqs.iter().map(|(r, _)| format!("{} {}", r.id, r.level)).collect::<Vec<_>>().join(", ");
        if strength(level) > strength(max) {
            self.error(loc(at), format!("level {level} is stronger than every requirement cited ({cited}); use {max}"));
        } else if strength(level) < strength(min) {
            self.error(loc(at), format!("level {level} is weaker than every requirement cited ({cited}); use {min}"));
        }
    }

    fn testee(&mut self, t: &Spanned<raw::RawTestee>, role: Role, needs: &[(String, Loc)]) -> TesteeSetup {
        let t = &t.value;
        let mut out = TesteeSetup::default();
        if let Some(m) = &t.middleware {
            out.middleware = m.value;
            if m.value && !needs.iter().any(|(n, _)| n == "middleware") {
                self.error(loc(m), "the middleware variant needs `middleware` in `needs`");
            }
        }
        if let Some(m) = &t.misbehave {
            match m.value.parse::<Misbehave>() {
                Ok(kind) if role == Role::ToolProcess => out.misbehave = Some(kind),
                Ok(_) => self.error(loc(m), "misbehave applies to the reference testee (role tool-process) only"),
                Err(_) => self.error(
                    loc(m),
                    format!("unknown misbehave kind `{}`; valid: {}", m.value, Misbehave::NAMES.join(", ")),
                ),
            }
        }
        if let Some(s) = &t.socket {
            match SocketSetup::NAMES.iter().find(|(n, _)| *n == s.value) {
                Some((_, setup)) => out.socket = *setup,
                None => {
                    let valid: Vec<&str> = SocketSetup::NAMES.iter().map(|(n, _)| *n).collect();
                    self.error(loc(s), format!("unknown socket setup `{}`; valid: {}", s.value, valid.join(", ")));
                }
            }
        }
        if let Some(env) = &t.env {
            out.env = self.env(env);
        }
        out
    }

    fn env(&mut self, node: &Node) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        let Some(entries) = node.as_map() else {
            self.error(
                node.loc,
                format!("`env` is a mapping of variable names to values, found {}", node.kind.describe()),
            );
            return out;
        };
        for (k, v) in entries {
            if !env_name().is_match(&k.name) {
                self.error(k.loc, format!("`{}` is not an environment variable name", k.name));
                continue;
            }
            if k.name == protomcp_proto::spec::ENV_SOCKET {
                self.error(k.loc, "PROTOMCP_SOCKET belongs to the harness; use `testee.socket` to break it");
                continue;
            }
            let value = match &v.kind {
                NodeKind::Null => None,
                NodeKind::Str(s) => Some(s.clone()),
                NodeKind::Bool(b) => Some(b.to_string()),
                NodeKind::Int(i) => Some(i.to_string()),
                NodeKind::Float(f) => Some(f.to_string()),
                other => {
                    self.error(
                        v.loc,
                        format!("an environment value is a scalar (or null to unset it), found {}", other.describe()),
                    );
                    continue;
                }
            };
            if value.as_deref().is_some_and(|s| s.contains('\0')) {
                self.error(v.loc, "an environment value cannot hold a NUL character");
                continue;
            }
            out.insert(k.name.clone(), value);
        }
        out
    }

    /// `host_requests`: a bridge scenario's `auto` or `manual`.
    fn host_requests(&mut self, h: Option<&Spanned<String>>, role: Role) -> HostRequests {
        match h {
            None => HostRequests::Auto,
            Some(h) => match HostRequests::NAMES.iter().find(|(n, _)| *n == h.value) {
                Some((_, v)) if role == Role::Bridge => *v,
                Some(_) => {
                    self.error(loc(h), "host_requests belongs to bridge scenarios (role: bridge)");
                    HostRequests::Auto
                }
                None => {
                    self.error(loc(h), format!("unknown host_requests `{}`; valid: auto, manual", h.value));
                    HostRequests::Auto
                }
            },
        }
    }

    /// A flag that only bridge scenarios may set (`stale_socket`, `shared_tmp`).
    fn bridge_flag(&mut self, b: Option<&Spanned<bool>>, role: Role, name: &str) -> bool {
        match b {
            Some(b) if b.value && role != Role::Bridge => {
                self.error(loc(b), format!("{name} belongs to bridge scenarios (role: bridge)"));
                false
            }
            Some(b) => b.value,
            None => false,
        }
    }

    /// Steps that only work over HTTP need `transports: [http]`.
    fn check_transport_needs(&mut self, transports: &[Transport], steps: &[Step]) {
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| matches!(st.action, Action::HostHttp(_)))
        {
            self.error(st.loc, "`host_http` needs `transports: [http]` (it is a request over HTTP)");
        }
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| st.host.is_some())
        {
            self.error(st.loc, "`host` needs `transports: [http]` (a second host is a second HTTP session)");
        }
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| matches!(&st.action, Action::HostExpect(e) if e.stream.is_some()))
        {
            self.error(st.loc, "`host_expect.stream` needs `transports: [http]` (streams are HTTP's)");
        }
    }

    /// Steps and settings that use the bridge's socket need `needs: [socket]`.
    fn check_socket_needs(&mut self, raw: &RawScenario, needs: &[(String, Loc)], steps: &[Step]) {
        // `{socket}` is the bridge's socket only when the bridge command passes it (feature `socket`).
        let has_socket = needs.iter().any(|(n, _)| n == "socket");
        if !has_socket {
            if let Some(b) = raw.stale_socket.as_ref().filter(|b| b.value) {
                self.error(loc(b), "`stale_socket` needs `needs: [socket]` (the bridge is given `--socket {socket}`)");
            }
            if let Some(st) = steps.iter().find(|st| matches!(st.action, Action::ExpectSocket { .. })) {
                self.error(st.loc, "`expect_socket` needs `needs: [socket]` (the bridge is given `--socket {socket}`)");
            }
        }
    }
}
