//! One step's action: the raw step checked into an [`Action`].

use super::*;

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
                Action::SendRaw(bytes)
            }
            RawStep::SendFrame(f) => self.send_frame(f, compiler)?,
            RawStep::Expect(e) => {
                let pattern = self.pattern(compiler.envelope(&e.envelope));
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let ignore = self.ignore(e.ignore.as_ref());
                Action::Expect(Expect { pattern: pattern?, within, ignore })
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
            RawStep::Soak(k) => Action::Soak(self.soak(k)?),
            RawStep::ReloadBegins(r) => self.reload_begins(r)?,
            RawStep::ToolHandshake(h) => self.tool_handshake(h)?,
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
    fn expect_exit(&mut self, e: &raw::RawExpectExit, compiler: &mut Compiler) -> Option<Action> {
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
        Some(Action::ExpectExit(ExpectExit { within, code, stderr }))
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
    fn tool_handshake(&mut self, h: &raw::RawToolHandshake) -> Option<Action> {
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
        }))
    }

    /// `host_send`: a JSON-RPC message (its placeholders checked) or a raw line.
    fn host_send(&mut self, h: &raw::RawHostSend, compiler: &mut Compiler) -> Option<Action> {
        match (&h.message, &h.line) {
            (Some(m), None) => {
                let mut ok = true;
                walk_strings(m, &mut |s, at| match template::parse(s) {
                    Ok(pieces) => {
                        for p in pieces {
                            if let template::Piece::Var(name) = p {
                                compiler.used.push((name, at));
                            }
                        }
                    }
                    Err(msg) => {
                        ok = false;
                        self.errors.push(ScenarioError::new(self.file, at, msg));
                    }
                });
                let v = m.to_value().map_err(|(at, msg)| self.error(at, msg)).ok()?;
                if !ok {
                    return None;
                }
                Some(Action::HostSend(HostLine::Json(v)))
            }
            (None, Some(l)) => {
                if l.value.contains('\n') {
                    self.error(loc(l), "a host_send line cannot hold a newline (it ends the line)");
                    return None;
                }
                Some(Action::HostSend(HostLine::Raw(l.value.clone())))
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
}
