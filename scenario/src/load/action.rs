//! One step's action: the raw step checked into an [`Action`] (handshakes, sends, expectations,
//! host messages and requests, soak).

use super::{
    Action, Checker, CloseMode, Compiler, DEFAULT_HANDSHAKE_RID, Duration, ExitCode, Expect, ExpectAnyOrder,
    ExpectExit, ExpectNothing, FrameBody, Handshake, HostExpect, HostExpectNothing, HostHttp, HostStream,
    HttpSessionRef, Loc, Node, NodeKind, OrHost, Profile, RawStep, ReloadBegins, ReloadForm, SendFrame, SendLine,
    Signal, Soak, SoakCall, T_PROMPT, T_START, Template, ToolHandshake, loc, raw, requirements, template,
};

/// The most bytes one `send_raw` writes (its hex times its `repeat`): 64 MiB, as `${repeat}`.
const MAX_SEND_RAW: usize = 64 * 1024 * 1024;

impl Checker<'_> {
    pub(super) fn action(&mut self, step: &RawStep, compiler: &mut Compiler) -> Option<Action> {
        Some(match step {
            RawStep::Handshake(h) => self.handshake(h, compiler)?,
            RawStep::Send(node) => Action::Send(self.template(node, compiler)?),
            RawStep::SendRaw(r) => {
                let bytes = self.hex(&r.hex)?;
                if bytes.is_empty() {
                    self.error(loc(&r.hex), "send_raw needs at least one byte");
                    return None;
                }
                let times = r.repeat.as_ref().map_or(1, |n| n.value as usize);
                if let Some(n) = &r.repeat
                    && (n.value == 0 || bytes.len().saturating_mul(times) > MAX_SEND_RAW)
                {
                    self.error(
                        loc(n),
                        format!("send_raw's repeat must be at least 1 and write at most {MAX_SEND_RAW} bytes"),
                    );
                    return None;
                }
                Action::SendRaw(bytes.repeat(times))
            }
            RawStep::SendFrame(f) => self.send_frame(f, compiler)?,
            RawStep::Expect(e) => {
                let pattern = self.pattern(compiler.envelope(&e.envelope));
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let ignore = self.ignore(e.ignore.as_ref());
                let or_host = match &e.or_host {
                    None => None,
                    Some(h) => {
                        if e.or_close {
                            self.error(h.message.loc, "`or_host` and `or_close` exclude each other");
                        }
                        let pattern = self.pattern(compiler.value(&h.message))?;
                        let ignore = h.ignore.iter().flatten().map(|m| m.value.clone()).collect();
                        Some(OrHost { pattern, ignore })
                    }
                };
                Action::Expect(Expect { pattern: pattern?, within, ignore, or_close: e.or_close, or_host })
            }
            RawStep::ExpectAnyOrder(e) => self.expect_any_order(e, compiler)?,
            RawStep::ExpectNothing(e) => {
                let duration = self.within(Some(&e.for_ms), T_PROMPT);
                Action::ExpectNothing(ExpectNothing { duration, ignore: self.ignore(e.ignore.as_ref()) })
            }
            RawStep::ExpectClose(w) => Action::ExpectClose { within: self.within(w.within_ms.as_ref(), T_PROMPT) },
            RawStep::ExpectAlive(w) => Action::ExpectAlive { within: self.within(w.within_ms.as_ref(), T_PROMPT) },
            RawStep::ExpectExit(e) => self.expect_exit(e, compiler)?,
            RawStep::ExpectNoConnect(f) => Action::ExpectNoConnect { duration: self.within(Some(&f.for_ms), T_PROMPT) },
            RawStep::Sleep(s) => Action::Sleep(self.within(Some(&s.ms), T_PROMPT)),
            RawStep::Close(c) => Action::Close(match c.mode.as_ref().map(|m| (m.value.as_str(), loc(m))) {
                None | Some(("both", _)) => CloseMode::Both,
                Some(("write", _)) => CloseMode::Write,
                Some((other, l)) => {
                    self.error(l, format!("unknown close mode `{other}`; valid: both, write"));
                    return None;
                }
            }),
            RawStep::Signal(s) => {
                let name = s.value_name();
                match Signal::NAMES.iter().find(|(n, _)| *n == name) {
                    Some((_, sig)) => Action::Signal(*sig),
                    None => {
                        self.error(
                            loc(&s.name),
                            format!("unknown signal `{}`; valid: TERM, INT, HUP, KILL", s.name.value),
                        );
                        return None;
                    }
                }
            }
            RawStep::HostSend(h) => self.host_send(h, compiler)?,
            RawStep::HostExpect(e) => {
                let pattern = self.pattern(compiler.value(&e.message));
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let ignore = e.ignore.iter().flatten().map(|m| m.value.clone()).collect();
                let stream = match &e.stream {
                    None => None,
                    Some(n) => Some(self.host_stream(n)?),
                };
                Action::HostExpect(HostExpect { pattern: pattern?, within, ignore, stream })
            }
            RawStep::HostExpectNothing(e) => {
                let duration = self.within(Some(&e.for_ms), T_PROMPT);
                let ignore = e.ignore.iter().flatten().map(|m| m.value.clone()).collect();
                Action::HostExpectNothing(HostExpectNothing { duration, ignore })
            }
            RawStep::HostClose(_) => Action::HostClose,
            RawStep::HostHttp(h) => Action::HostHttp(self.host_http(h, compiler)?),
            RawStep::Check(c) => {
                compiler.used.push((c.capture.value.clone(), loc(&c.capture)));
                let pattern = self.pattern(compiler.value(&c.pattern))?;
                Action::Check { capture: c.capture.value.clone(), pattern }
            }
            RawStep::Touch(t) => self.touch(t)?,
            RawStep::ExpectSocket(e) => Action::ExpectSocket { exists: e.exists.value },
            RawStep::ExpectSocketPrivate(_) => Action::ExpectSocketPrivate,
            RawStep::ToolConnectAgain(w) => {
                Action::ToolConnectAgain { within: self.within(w.within_ms.as_ref(), T_PROMPT) }
            }
            RawStep::ExpectToolExit(w) => {
                Action::ExpectToolExit { within: self.within(w.within_ms.as_ref(), T_PROMPT) }
            }
            RawStep::HostExpectComment(e) => {
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let stream = match &e.stream {
                    None => None,
                    Some(n) => Some(self.host_stream(n)?),
                };
                Action::HostExpectComment { stream, within }
            }
            RawStep::TcpListen(t) => {
                let name = &t.capture.value;
                if !is_capture_name(name) {
                    self.error(
                        loc(&t.capture),
                        format!("`{name}` is no capture name: letters, digits and `_`, not starting with a digit"),
                    );
                    return None;
                }
                compiler.defined.push(name.clone());
                Action::TcpListen { capture: name.clone() }
            }
            RawStep::ExpectNoTcpConnect(e) => {
                compiler.used.push((e.listener.value.clone(), loc(&e.listener)));
                let duration = self.within(e.for_ms.as_ref(), T_PROMPT);
                Action::ExpectNoTcpConnect { listener: e.listener.value.clone(), duration }
            }
            RawStep::MemoryMark(_) => Action::MemoryMark,
            RawStep::ExpectMemory(m) => {
                if m.peak_growth_below_mib.value == 0 {
                    self.error(loc(&m.peak_growth_below_mib), "peak_growth_below_mib must be at least 1");
                    return None;
                }
                Action::ExpectMemory { peak_growth_below_kib: m.peak_growth_below_mib.value.saturating_mul(1024) }
            }
            RawStep::Soak(k) => Action::Soak(self.soak(k)?),
            RawStep::ReloadBegins(r) => self.reload_begins(r)?,
            RawStep::ToolHandshake(h) => self.tool_handshake(h, compiler)?,
            // proto-mcp's own steps: `steps` refuses them elsewhere, `pm_action` checks them.
            RawStep::Initialize(_)
            | RawStep::SendJson(_)
            | RawStep::SendText(_)
            | RawStep::SendBatch(_)
            | RawStep::ExpectAnswer(_)
            | RawStep::ExpectError(_)
            | RawStep::ExpectNext(_)
            | RawStep::ExpectJson(_)
            | RawStep::Probe(_) => return None,
        })
    }

    /// `handshake`: the bridge's handshake with its rid, hidden tools and middleware.
    fn handshake(&mut self, h: &raw::RawHandshake, compiler: &mut Compiler) -> Option<Action> {
        let rid = match &h.rid {
            Some(r) if r.value.is_empty() => {
                self.error(loc(r), "the handshake's rid cannot be empty (BR-HANDSHAKE-01)");
                return None;
            }
            Some(r) => r.value.clone(),
            None => DEFAULT_HANDSHAKE_RID.to_owned(),
        };
        let hidden = h.hidden.as_deref().map(|l| self.names(l, "tool"));
        let middleware = h.middleware.as_deref().map(|l| self.names(l, "middleware"));
        let tool_list = match &h.tool_list {
            Some(n) => Some(self.pattern(compiler.message(n, "ToolListResponse"))?),
            None => None,
        };
        let within = self.within(h.within_ms.as_ref(), T_START);
        Some(Action::Handshake(Handshake { rid, hidden, middleware, tool_list, within }))
    }

    /// `send_frame`: a length prefix and a body (hex or an Envelope template).
    fn send_frame(&mut self, f: &raw::RawSendFrame, compiler: &mut Compiler) -> Option<Action> {
        let body = match (&f.body_hex, &f.body) {
            (Some(_), Some(b)) => {
                self.error(b.loc, "give the frame's body as `body_hex` or as `body`, not both");
                return None;
            }
            (Some(h), None) => FrameBody::Hex(self.hex(h)?),
            (None, Some(b)) => FrameBody::Envelope(self.template(b, compiler)?),
            (None, None) => FrameBody::Hex(Vec::new()),
        };
        Some(Action::SendFrame(SendFrame { length: f.length.as_ref().map(|l| l.value), body }))
    }

    /// `expect_any_order`: every pattern compiled, at least one.
    fn expect_any_order(&mut self, e: &raw::RawExpectAnyOrder, compiler: &mut Compiler) -> Option<Action> {
        if e.envelopes.value.is_empty() {
            self.error(loc(&e.envelopes), "expect_any_order needs at least one envelope pattern");
        }
        let mut patterns = Vec::new();
        let mut ok = true;
        for n in &e.envelopes.value {
            match self.pattern(compiler.envelope(n)) {
                Some(p) => patterns.push(p),
                None => ok = false,
            }
        }
        let within = self.within(e.within_ms.as_ref(), T_PROMPT);
        let ignore = self.ignore(e.ignore.as_ref());
        if !ok {
            return None;
        }
        Some(Action::ExpectAnyOrder(ExpectAnyOrder { patterns, within, ignore }))
    }

    /// `expect_exit`: the exit code (an integer, `nonzero` or `any`) and a stderr pattern.
    pub(super) fn expect_exit(&mut self, e: &raw::RawExpectExit, compiler: &mut Compiler) -> Option<Action> {
        let within = self.within(e.within_ms.as_ref(), T_PROMPT);
        let code = match &e.code {
            None => ExitCode::Any,
            Some(n) => match &n.kind {
                NodeKind::Int(i) => match i32::try_from(*i) {
                    Ok(c) => ExitCode::Exactly(c),
                    Err(_) => {
                        self.error(n.loc, format!("exit code {i} is out of range"));
                        return None;
                    }
                },
                NodeKind::Str(s) if s == "nonzero" => ExitCode::NonZero,
                NodeKind::Str(s) if s == "any" => ExitCode::Any,
                other => {
                    self.error(n.loc, format!("`code` is an integer, `nonzero` or `any`, found {}", other.describe()));
                    return None;
                }
            },
        };
        let stderr = match &e.stderr {
            Some(n) => Some(self.pattern(compiler.value(n))?),
            None => None,
        };
        let unless = e.unless.as_ref().map(|u| {
            let known = requirements::proto_mcp::FEATURES.contains(&u.value.as_str()) || u.value == "2gib";
            if self.profile != Profile::ProtoMcp {
                self.error(loc(u), "`expect_exit.unless` belongs to proto-mcp scenarios (profile: proto-mcp)");
            } else if !known {
                self.error(loc(u), format!("unknown proto-mcp feature `{}` (or 2gib)", u.value));
            }
            u.value.clone()
        });
        Some(Action::ExpectExit(ExpectExit { within, code, stderr, unless }))
    }

    /// `touch`: a relative path inside the scenario's dir.
    fn touch(&mut self, t: &raw::RawTouch) -> Option<Action> {
        use std::path::{Component, Path};
        let p = Path::new(&t.path.value);
        let inside = !t.path.value.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
        if !inside {
            self.error(
                loc(&t.path),
                format!(
                    "touch: `{}` must be a relative path inside the scenario's dir (no `..`, not absolute)",
                    t.path.value
                ),
            );
            return None;
        }
        Some(Action::Touch(p.to_owned()))
    }

    /// `reload_begins`: the form of the reload and a refusal (which needs `form: request`).
    fn reload_begins(&mut self, r: &raw::RawReloadBegins) -> Option<Action> {
        let form = match &r.form {
            None => ReloadForm::Any,
            Some(f) => match f.value.as_str() {
                "any" => ReloadForm::Any,
                "restart" => ReloadForm::Restart,
                "request" => ReloadForm::Request,
                other => {
                    self.error(loc(f), format!("form {other:?}: one of any, restart, request"));
                    ReloadForm::Any
                }
            },
        };
        if let Some(x) = &r.refuse
            && form != ReloadForm::Request
        {
            self.error(loc(x), "`refuse` answers a ReloadRequest: it needs `form: request`");
        }
        Some(Action::ReloadBegins(ReloadBegins {
            form,
            refuse: r.refuse.as_ref().map(|x| x.value.clone()),
            within: self.within(r.within_ms.as_ref(), T_START),
        }))
    }

    /// `tool_handshake`: the lists the tool process announces, each checked as an Envelope template.
    fn tool_handshake(&mut self, h: &raw::RawToolHandshake, compiler: &mut Compiler) -> Option<Action> {
        // `${name}` in the tools' strings: captures of earlier steps (a `tcp_listen` port in a
        // schema's `$ref`, BR-SECURITY-09), filled in when the step runs.
        if let Some(n) = &h.tools {
            self.message_placeholders(n, compiler)?;
        }
        let mut list = |node: &Option<Node>, arm: &str, field: &str| -> Option<Vec<serde_json::Value>> {
            let Some(n) = node else { return Some(Vec::new()) };
            let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
            let items = match v {
                serde_json::Value::Array(items) => items,
                _ => {
                    self.error(n.loc, format!("`{field}` is a list"));
                    return None;
                }
            };
            let tree = serde_json::json!({"request_id": "x", arm: {field: items.clone()}});
            if let Err(e) = Template::new(tree) {
                self.error(n.loc, e.to_string());
                return None;
            }
            Some(items)
        };
        let tools = list(&h.tools, "tool_list", "tools");
        let resources = list(&h.resources, "resource_list_response", "resources");
        let resource_templates = list(&h.resource_templates, "resource_template_list_response", "templates");
        let prompts = list(&h.prompts, "prompt_list_response", "prompts");
        let middleware = self.registrations(h.middleware.as_ref());
        let hidden = h.hidden.iter().flatten().map(|n| n.value.clone()).collect();
        let within = self.within(h.within_ms.as_ref(), T_START);
        Some(Action::ToolHandshake(ToolHandshake {
            tools: tools?,
            resources: resources?,
            resource_templates: resource_templates?,
            prompts: prompts?,
            middleware: middleware?,
            hidden,
            marker: h.marker.as_ref().is_none_or(|m| m.value),
            within,
            hold_pulls: h.hold_pulls_ms.as_ref().map(|ms| self.within(Some(ms), T_PROMPT)),
        }))
    }

    /// `host_send`: a JSON-RPC message (its placeholders checked) or a raw line.
    fn host_send(&mut self, h: &raw::RawHostSend, compiler: &mut Compiler) -> Option<Action> {
        match (&h.message, &h.line) {
            (Some(m), None) => {
                let fill = self.message_placeholders(m, compiler);
                let v = m.to_value().map_err(|(at, msg)| self.error(at, msg)).ok()?;
                if let Some(at) = fill? {
                    self.fill_fits(&v, at, false);
                }
                Some(Action::HostSend(SendLine::Json(v), self.send_headers(h)?))
            }
            (None, Some(l)) => {
                if l.value.contains('\n') {
                    self.error(loc(l), "a host_send line cannot hold a newline (it ends the line)");
                    return None;
                }
                Some(Action::HostSend(SendLine::Raw(l.value.clone()), self.send_headers(h)?))
            }
            (Some(m), Some(_)) => {
                self.error(m.loc, "give host_send a `message` or a `line`, not both");
                None
            }
            (None, None) => {
                self.error(Loc::default(), "host_send needs a `message` (JSON-RPC) or a `line` (text)");
                None
            }
        }
    }

    /// `tool_handshake.middleware`: a list of RegisterMiddlewareRequest trees (`{name, priority}`).
    fn registrations(&mut self, node: Option<&Node>) -> Option<Vec<serde_json::Value>> {
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

    /// `host_expect.stream`: `get`, or `{request: ID}` (a JSON-RPC id: a number or a string).
    fn host_stream(&mut self, n: &Node) -> Option<HostStream> {
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
    /// `host_send.headers`: a mapping of header names to one-line strings (no placeholders).
    fn send_headers(&mut self, h: &raw::RawHostSend) -> Option<Vec<(String, String)>> {
        self.header_map(h.headers.as_ref(), false)
    }

    /// A `headers:` mapping of token names to one-line strings; `${…}` placeholders only where
    /// `placeholders` (they are checked by the caller).
    fn header_map(&mut self, node: Option<&Node>, placeholders: bool) -> Option<Vec<(String, String)>> {
        let mut headers = Vec::new();
        let Some(n) = node else { return Some(headers) };
        let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
        let serde_json::Value::Object(map) = v else {
            self.error(n.loc, "`headers` is a mapping of header names to strings");
            return None;
        };
        for (name, value) in map {
            let ok_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            match value {
                serde_json::Value::String(v)
                    if ok_name && !v.contains(['\r', '\n']) && (placeholders || !v.contains("${")) =>
                {
                    headers.push((name, v))
                }
                _ => {
                    self.error(n.loc, format!("header `{name}`: a token name and a one-line string value"));
                    return None;
                }
            }
        }
        Some(headers)
    }

    fn host_http(&mut self, h: &raw::RawHostHttp, compiler: &mut Compiler) -> Option<HostHttp> {
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
        let headers = self.header_map(h.headers.as_ref(), true)?;
        // `${name}` in the session id, header values and body: captures of earlier steps.
        let hloc = h.headers.as_ref().map_or(Loc::default(), |n| n.loc);
        let mut texts: Vec<(&str, Loc)> = headers.iter().map(|(_, v)| (v.as_str(), hloc)).collect();
        texts.extend(h.session.iter().chain(h.body.iter()).map(|t| (t.value.as_str(), loc(t))));
        for (text, at) in texts {
            match template::parse(text) {
                Ok(pieces) => {
                    for p in pieces {
                        match p {
                            template::Piece::Var(name) => compiler.used.push((name, at)),
                            template::Piece::Fill { .. } => {
                                self.error(at, format!("{}; `host_http` does not", template::FILL_MISPLACED));
                                return None;
                            }
                            _ => {}
                        }
                    }
                }
                Err(msg) => {
                    self.error(at, msg.to_string());
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

    /// A `soak` step: its defaults (a sample every 20th of the rounds, a tenth of them as
    /// warm-up, 5 s a round) and that enough samples follow the warm-up to judge.
    fn soak(&mut self, k: &raw::RawSoak) -> Option<Soak> {
        let repeat = k.repeat.value;
        if repeat == 0 {
            self.error(loc(&k.repeat), "`repeat` must be at least 1");
            return None;
        }
        let mut mix = Vec::new();
        for m in &k.mix.value {
            match SoakCall::NAMES.iter().find(|(_, n)| *n == m.value) {
                Some((c, _)) => mix.push(*c),
                None => {
                    let valid: Vec<&str> = SoakCall::NAMES.iter().map(|(_, n)| *n).collect();
                    self.error(
                        loc(m),
                        format!("unknown call `{}` in a soak's mix; valid: {}", m.value, valid.join(", ")),
                    );
                    return None;
                }
            }
        }
        if mix.is_empty() {
            self.error(loc(&k.mix), "a soak's `mix` needs at least one call");
            return None;
        }
        if mix.contains(&SoakCall::Reload) && mix.len() > 1 {
            self.error(loc(&k.mix), "`reload` stands alone in a soak's mix (a round is one reload and its burst)");
            return None;
        }
        let sample_every = k.sample_every.as_ref().map_or((repeat / 20).max(1), |s| s.value);
        if sample_every == 0 {
            self.error(k.sample_every.as_ref().map(loc).unwrap_or(loc(&k.repeat)), "`sample_every` must be at least 1");
            return None;
        }
        let warmup = k.warmup.as_ref().map_or(repeat / 10, |w| w.value);
        // The samples the verdict reads: round 0, every multiple of sample_every, and the last
        // round, those at or after the warm-up.
        let multiples = |n: u64| n / sample_every;
        let read = if warmup > repeat {
            0
        } else {
            let from = if warmup == 0 { 0 } else { multiples(warmup - 1) };
            let at_zero = u64::from(warmup == 0);
            let last = u64::from(!repeat.is_multiple_of(sample_every));
            multiples(repeat) - from + at_zero + last
        };
        if read < crate::LEAK_MIN_SAMPLES as u64 {
            self.error(
                loc(&k.repeat),
                format!(
                    "a soak of {repeat} rounds sampled every {sample_every} with a warm-up of {warmup} leaves {read} samples to judge; at least {} are needed",
                    crate::LEAK_MIN_SAMPLES
                ),
            );
            return None;
        }
        // Every sample is kept (for the report) and read /proc for each process of the group.
        const MAX_SAMPLES: u64 = 10_000;
        if repeat / sample_every > MAX_SAMPLES {
            self.error(
                k.sample_every.as_ref().map(loc).unwrap_or(loc(&k.repeat)),
                format!(
                    "a soak of {repeat} rounds sampled every {sample_every} takes {} samples; at most {MAX_SAMPLES} are kept: sample less often",
                    repeat / sample_every
                ),
            );
            return None;
        }
        let within = self.within(k.within_ms.as_ref(), Duration::from_secs(5));
        Some(Soak { repeat, mix, sample_every, warmup, within })
    }
}

/// A capture's name: letters, digits and `_`, not starting with a digit (as in `${name}`).
fn is_capture_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
