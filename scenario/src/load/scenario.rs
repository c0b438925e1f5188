//! The scenario's header: id, role, level, requirements, testee, transports and its checks
//! across the steps.

use super::{
    Action, BTreeMap, Checker, Duration, HostRequests, Level, Loc, Misbehave, Node, NodeKind, Profile, RawScenario,
    Role, Scenario, SocketSetup, Spanned, Step, TesteeSetup, Transport, UNATTRIBUTED, env_name, id_syntax, loc, raw,
    requirements, strength,
};

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
        self.profile = match &raw.profile {
            None => Profile::Protomcp,
            Some(p) => match Profile::NAMES.iter().find(|(n, _)| *n == p.value) {
                Some((_, profile)) => *profile,
                None => {
                    self.error(loc(p), format!("unknown profile `{}`; valid: protomcp, proto-mcp", p.value));
                    Profile::Protomcp
                }
            },
        };
        let role = match (raw.role.as_ref(), self.profile) {
            (None, Profile::ProtoMcp) => Role::ToolProcess,
            (Some(r), Profile::ProtoMcp) => {
                self.error(loc(r), "a proto-mcp scenario has no `role` (the server under test is its only role)");
                Role::ToolProcess
            }
            (None, Profile::Protomcp) => {
                self.error(loc(&raw.id), "missing field `role` (tool-process or bridge; or `profile: proto-mcp`)");
                Role::ToolProcess
            }
            (Some(r), Profile::Protomcp) => match r.value.as_str() {
                "tool-process" => Role::ToolProcess,
                "bridge" => Role::Bridge,
                other => {
                    self.error(loc(r), format!("unknown role `{other}`; valid: tool-process, bridge"));
                    Role::ToolProcess
                }
            },
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
        let unless = self.unless(raw.unless.as_ref());
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
        let scenario = Scenario {
            file: self.file.to_owned(),
            id,
            id_loc: loc(&raw.id),
            title,
            requirements: reqs.into_iter().map(|(r, _)| r).collect(),
            level,
            profile: self.profile,
            role,
            needs: needs.into_iter().map(|(n, _)| n).collect(),
            unless,
            notes: raw.notes.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()),
            timeout,
            testee,
            host_requests,
            stale_socket,
            shared_tmp,
            transports,
            exclusive: raw.exclusive.as_ref().is_some_and(|b| b.value),
            duration: raw.duration_ms.as_ref().map(|d| Duration::from_millis(d.value.0)),
            steps,
        };
        self.check_step_requirements(&scenario);
        scenario
    }

    /// In a scenario citing several requirements, every step that judges the target names the
    /// one(s) it checks (`checks:`), so that a failure names what broke and nothing else
    /// ([`Scenario::unattributed_steps`]; the scenarios of [`UNATTRIBUTED`] are not converted yet).
    fn check_step_requirements(&mut self, scenario: &Scenario) {
        if !self.lint || UNATTRIBUTED.contains(&scenario.id.as_str()) {
            return;
        }
        let cited: Vec<&str> = scenario.requirements.iter().map(|r| r.id).collect();
        for st in scenario.unattributed_steps() {
            self.error(
                st.loc,
                format!(
                    "`{}` judges the target in a scenario citing several requirements: name the one(s) it checks with `checks:` (of {}, or another requirement the step is about)",
                    st.keyword(),
                    cited.join(", ")
                ),
            );
        }
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

    /// `unless`: proto-mcp features that make the scenario SKIP.
    fn unless(&mut self, raw: Option<&Spanned<Vec<Spanned<String>>>>) -> Vec<String> {
        let Some(raw) = raw else { return Vec::new() };
        if self.profile != Profile::ProtoMcp {
            self.error(loc(raw), "`unless` belongs to proto-mcp scenarios (profile: proto-mcp)");
            return Vec::new();
        }
        let mut out = Vec::new();
        for f in &raw.value {
            if !requirements::proto_mcp::FEATURES.contains(&f.value.as_str()) {
                let valid = requirements::proto_mcp::FEATURES.join(", ");
                self.error(loc(f), format!("unknown proto-mcp feature `{}`; valid: {valid}", f.value));
            } else {
                out.push(f.value.clone());
            }
        }
        out
    }

    fn needs(&mut self, needs: Option<&Spanned<Vec<Spanned<String>>>>, role: Role) -> Vec<(String, Loc)> {
        let mut out: Vec<(String, Loc)> = Vec::new();
        let known = match self.profile {
            Profile::ProtoMcp => requirements::proto_mcp::FEATURES,
            Profile::Protomcp => requirements::features(role.party()),
        };
        for n in needs.map(|n| n.value.as_slice()).unwrap_or_default() {
            let name = n.value.as_str();
            if !known.contains(&name) {
                self.error(
                    loc(n),
                    format!(
                        "unknown feature `{name}` for {}; valid: {}",
                        match (self.profile, role) {
                            (Profile::ProtoMcp, _) => "proto-mcp",
                            (_, Role::Bridge) => "role bridge",
                            _ => "role tool-process",
                        },
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
        if let Some(h) = &t.hidden {
            out.nothing_hidden = !h.value;
            if role != Role::ToolProcess {
                self.error(loc(h), "`hidden` applies to the testee (role tool-process) only");
            } else if !h.value && needs.iter().any(|(n, _)| n == "hidden") {
                self.error(loc(h), "`hidden: false` (nothing hidden) contradicts `hidden` in `needs`");
            }
        }
        if let Some(c) = &t.clean_env {
            if self.profile == Profile::ProtoMcp {
                out.clean_env = c.value;
            } else {
                self.error(loc(c), "`clean_env` belongs to proto-mcp scenarios (profile: proto-mcp)");
            }
        }
        if self.profile == Profile::ProtoMcp
            && let Some(k) = [
                t.middleware.as_ref().map(loc),
                t.misbehave.as_ref().map(loc),
                t.socket.as_ref().map(loc),
                t.hidden.as_ref().map(loc),
            ]
            .into_iter()
            .flatten()
            .chain(t.env.as_ref().map(|n| n.loc))
            .next()
        {
            self.error(k, "a proto-mcp scenario's `testee` takes `clean_env` only");
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
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| matches!(&st.action, Action::HostExpectComment { .. }))
        {
            self.error(st.loc, "`host_expect_comment` needs `transports: [http]` (SSE comments are HTTP's)");
        }
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| matches!(&st.action, Action::HostSend(_, h) if !h.is_empty()))
        {
            self.error(st.loc, "`host_send.headers` needs `transports: [http]` (they are a POST's)");
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
