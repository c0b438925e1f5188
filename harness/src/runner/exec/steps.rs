//! The tool-side steps: the handshake, and one method per step group that [`Exec::step`] dispatches to.

use super::{
    Action, CloseMode, Duration, EnvelopeExt, Exec, FrameBody, Got, Handshake, Instant, Item, Proc, StepError, Value,
    arm_of, compact, env, json, match_any_order, match_envelope, match_value, signo,
};
use crate::scenario::{ExpectAnyOrder, ExpectExit, SendFrame};

impl Exec<'_> {
    /// The handshake step; a handshake that ran out of its time (`T_START` by default) also
    /// names TP-HANDSHAKE-17 beside what the step was waiting for.
    async fn handshake(&mut self, h: &Handshake) -> Result<(), StepError> {
        let result = self.handshake_steps(h).await;
        if h.within >= crate::scenario::T_START
            && let Err(StepError::Fail(m)) = &result
            && m.starts_with("nothing arrived within")
        {
            self.found = with_start_budget(self.found);
        }
        result
    }

    async fn handshake_steps(&mut self, h: &Handshake) -> Result<(), StepError> {
        let within = self.t(h.within);
        let deadline = Instant::now() + within;
        self.found = &["TP-HANDSHAKE-02"];
        self.send_value(json!({"request_id": h.rid, "list_tools": {}})).await?;
        let v = self.next_required(deadline, within, &[]).await?;
        if v.get("request_id").and_then(Value::as_str).unwrap_or("") != h.rid || arm_of(&v) != Some("tool_list") {
            return Err(StepError::Fail(format!(
                "expected the tool_list under rid {:?} first, got {}",
                h.rid,
                compact(&v)
            )));
        }
        if let Some(p) = &h.tool_list {
            // What the scenario's own pattern checks is the scenario's.
            self.found = &[];
            match_value(p, v.get("tool_list"), &mut self.caps)
                .map_err(|m| StepError::Fail(format!("tool_list: {m}")))?;
        }
        let mut registered = Vec::new();
        self.found = if self.middleware { &["TP-HANDSHAKE-09", "TP-HANDSHAKE-10"] } else { &["TP-HANDSHAKE-10"] };
        loop {
            let v = self.next_required(deadline, within, &[]).await?;
            let rid = v.get("request_id").and_then(Value::as_str).unwrap_or("");
            match arm_of(&v) {
                Some("register_middleware") if rid.is_empty() => {
                    registered.push(v["register_middleware"]["name"].as_str().unwrap_or("").to_owned());
                    let ack = env::register_middleware_response(true);
                    let tree = json!({"request_id": "", "register_middleware_response": {"success": true}});
                    self.write(&ack.to_frame(), Some(tree), None).await?;
                }
                Some("reload_response") if rid.is_empty() && v["reload_response"]["success"] == json!(true) => break,
                Some("disable_tools") if rid.is_empty() => {
                    self.found = &["TP-HANDSHAKE-12"];
                    return Err(StepError::Fail(format!(
                        "the hidden-tool disable_tools came before the reload_response marker: {}",
                        compact(&v)
                    )));
                }
                _ => {
                    return Err(StepError::Fail(format!(
                        "expected a register_middleware or the reload_response marker, got {}",
                        compact(&v)
                    )));
                }
            }
        }
        let want_mw = h.middleware.clone().unwrap_or_else(|| {
            if self.middleware { ["guard", "mirror", "broken"].map(String::from).to_vec() } else { Vec::new() }
        });
        if registered != want_mw {
            self.found = &["TP-HANDSHAKE-09"];
            return Err(StepError::Fail(format!("middleware registered: {registered:?}, expected {want_mw:?}")));
        }
        let hidden = h.hidden.clone().unwrap_or_else(|| {
            if self.features.iter().any(|f| f == "hidden") { vec!["secret".to_owned()] } else { Vec::new() }
        });
        if !hidden.is_empty() {
            self.found = &["TP-HANDSHAKE-12"];
            let v = self.next_required(deadline, within, &[]).await?;
            let rid = v.get("request_id").and_then(Value::as_str).unwrap_or("");
            let mut got: Vec<String> = v["disable_tools"]["tool_names"]
                .as_array()
                .map(|a| a.iter().filter_map(|n| n.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let mut want = hidden.clone();
            got.sort();
            want.sort();
            if arm_of(&v) != Some("disable_tools") || !rid.is_empty() || got != want {
                return Err(StepError::Fail(format!(
                    "expected disable_tools {hidden:?} with an empty rid, got {}",
                    compact(&v)
                )));
            }
        }
        Ok(())
    }

    pub(crate) async fn step(&mut self, action: &Action) -> Result<(), StepError> {
        let render = |e: crate::scenario::RenderError| StepError::Error(e.to_string());
        match action {
            Action::Handshake(h) => self.handshake(h).await,
            // Writing.
            Action::Send(t) => {
                let v = t.render(&self.caps).map_err(render)?;
                let bytes = t.frame(&self.caps).map_err(render)?;
                self.write(&bytes, Some(v), None).await
            }
            Action::SendRaw(b) => self.write(b, None, None).await,
            Action::SendFrame(f) => self.send_frame(f).await,
            // Reading.
            Action::Expect(e) if e.or_close => {
                let within = self.t(e.within);
                self.reset_is_close = true;
                let got = self.next(Instant::now() + within, &e.ignore).await;
                self.reset_is_close = false;
                let v = match got? {
                    Got::Value(v) => v,
                    Got::Eof => return self.gone_within_prompt().await,
                    Got::Timeout => {
                        return Err(StepError::Fail(format!(
                            "{}, and the connection is still open (or_close: an answer, or the connection closed and the process gone)",
                            self.nothing_within(within)
                        )));
                    }
                };
                match_envelope(&e.pattern, &v, &mut self.caps)
                    .map_err(|m| StepError::Fail(format!("{m}\n  arrived: {}", compact(&v))))
            }
            Action::Expect(e) => {
                let within = self.t(e.within);
                let v = self.next_required(Instant::now() + within, within, &e.ignore).await?;
                match_envelope(&e.pattern, &v, &mut self.caps)
                    .map_err(|m| StepError::Fail(format!("{m}\n  arrived: {}", compact(&v))))
            }
            Action::ExpectAnyOrder(e) => self.expect_any_order(e).await,
            Action::ExpectNothing(e) => {
                let d = self.t(e.duration);
                match self.next(Instant::now() + d, &e.ignore).await? {
                    Got::Timeout => Ok(()),
                    Got::Eof => Err(StepError::Fail(format!("{} closed the connection within {d:?}", self.party()))),
                    Got::Value(v) => Err(StepError::Fail(format!("expected nothing for {d:?}, got {}", compact(&v)))),
                }
            }
            Action::ExpectClose { within } => self.expect_close(*within).await,
            // The process and its socket.
            Action::ExpectExit(x) => self.expect_exit(x).await,
            Action::ExpectAlive { within } => self.expect_alive(*within).await,
            Action::ExpectNoConnect { duration } => self.expect_no_connect(*duration).await,
            Action::Signal(s) => match &mut self.proc {
                Proc::Child(t) => {
                    t.signal(signo(*s));
                    self.transcript.push(Item::Signal { name: format!("{s:?}") });
                    Ok(())
                }
                Proc::Task { .. } => Err(StepError::Error("signals need a testee process".into())),
            },
            // The connection, time, captures.
            Action::Sleep(d) => {
                tokio::time::sleep(self.t(*d)).await;
                Ok(())
            }
            Action::Close(mode) => {
                self.close_step(*mode);
                Ok(())
            }
            Action::Check { capture, pattern } => {
                let v = self.caps.get(capture).cloned();
                match_value(pattern, v.as_ref(), &mut self.caps).map_err(|m| {
                    StepError::Fail(format!(
                        "{m}\n  `{capture}` holds: {}",
                        v.as_ref().map(compact).unwrap_or_default()
                    ))
                })
            }
            Action::Soak(k) => self.soak(k).await,
            // The loader keeps these out of tool-process scenarios ([`Action::bridge_only`]).
            _ => Err(StepError::Error(format!("`{}` runs only against a bridge", action.keyword()))),
        }
    }

    async fn send_frame(&mut self, f: &SendFrame) -> Result<(), StepError> {
        let body = match &f.body {
            FrameBody::Hex(b) => b.clone(),
            FrameBody::Envelope(t) => t.body(&self.caps).map_err(|e| StepError::Error(e.to_string()))?,
        };
        let len = f.length.unwrap_or(u32::try_from(body.len()).unwrap_or(u32::MAX));
        let mut bytes = len.to_be_bytes().to_vec();
        bytes.extend(&body);
        let note = format!("frame: prefix {len}, {} body bytes", body.len());
        self.write(&bytes, None, Some(note)).await
    }

    async fn expect_any_order(&mut self, e: &ExpectAnyOrder) -> Result<(), StepError> {
        let within = self.t(e.within);
        let deadline = Instant::now() + within;
        let mut values = Vec::new();
        for _ in &e.patterns {
            values.push(self.next_required(deadline, within, &e.ignore).await?);
        }
        match_any_order(&e.patterns, &values, &mut self.caps).map(|_| ()).map_err(|m| {
            let got: Vec<String> = values.iter().map(compact).collect();
            StepError::Fail(format!("{m}\n  arrived: {}", got.join("\n           ")))
        })
    }

    /// After the peer closed the connection where `expect … or_close` allows it: its process
    /// must be gone within `T_PROMPT`.
    async fn gone_within_prompt(&mut self) -> Result<(), StepError> {
        let within = self.t(crate::scenario::T_PROMPT);
        match self.proc.wait(within).await {
            Some(info) => {
                self.transcript.push(Item::Exit { status: info.to_string() });
                Ok(())
            }
            None => Err(StepError::Fail(format!(
                "{} closed the connection but was still running {within:?} later",
                self.party()
            ))),
        }
    }

    async fn expect_close(&mut self, within: Duration) -> Result<(), StepError> {
        let within = self.t(within);
        let deadline = Instant::now() + within;
        loop {
            match self.next(deadline, &[]).await {
                Ok(Got::Eof) => return Ok(()),
                Err(StepError::Fail(_)) => {
                    self.forget_violation();
                    return Ok(());
                }
                Ok(Got::Value(_)) => continue,
                Ok(Got::Timeout) => {
                    return Err(StepError::Fail(format!("the connection was still open after {within:?}")));
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn expect_exit(&mut self, x: &ExpectExit) -> Result<(), StepError> {
        let within = self.t(x.within);
        let Some(info) = self.proc.wait(within).await else {
            return Err(StepError::Fail(format!("{} was still running after {within:?}", self.party())));
        };
        self.transcript.push(Item::Exit { status: info.to_string() });
        let sent = match &self.proc {
            Proc::Child(t) => t.sent_signals.clone(),
            Proc::Task { .. } => Vec::new(),
        };
        // A death by a signal the harness sent counts as 128 + signal; by any other
        // signal as "no status" (spec §1.6: non-zero).
        let status = match (info.code, info.signal) {
            (Some(c), _) => Some(c),
            (None, Some(s)) if sent.contains(&s) => Some(128 + s),
            _ => None,
        };
        if !x.code.accepts(status) {
            return Err(StepError::Fail(format!("{} ended with {info}, expected {:?}", self.party(), x.code)));
        }
        if let Some(p) = &x.stderr {
            let text = self.proc.stderr().await;
            match_value(p, Some(&Value::String(text)), &mut self.caps)
                .map_err(|m| StepError::Fail(format!("stderr: {m}")))?;
        }
        Ok(())
    }

    async fn expect_alive(&mut self, within: Duration) -> Result<(), StepError> {
        let within = self.t(within);
        self.alive += 1;
        let rid = format!("alive-{}", self.alive);
        self.send_value(
            json!({"request_id": rid, "call_tool": {"name": "echo", "arguments_json": "{\"text\":\"alive\"}"}}),
        )
        .await?;
        let deadline = Instant::now() + within;
        loop {
            let v = self.next_required(deadline, within, &[]).await?;
            if v.get("request_id").and_then(Value::as_str) == Some(rid.as_str()) {
                return if v.get("call_result").is_some() {
                    Ok(())
                } else {
                    Err(StepError::Fail(format!("the echo call {rid} got {}", compact(&v))))
                };
            }
        }
    }

    async fn expect_no_connect(&mut self, duration: Duration) -> Result<(), StepError> {
        let d = self.t(duration);
        match tokio::time::timeout(d, self.listener.accept()).await {
            Ok(Ok(_)) => Err(StepError::Fail(format!("a connection reached the harness's socket within {d:?}"))),
            Ok(Err(e)) => Err(StepError::Error(format!("accept failed: {e}"))),
            Err(_) => Ok(()),
        }
    }

    fn close_step(&mut self, mode: CloseMode) {
        match mode {
            CloseMode::Both => {
                self.transcript.push(Item::Shutdown { how: "SHUT_RDWR".into() });
                self.close();
            }
            CloseMode::Write => {
                self.transcript.push(Item::Shutdown { how: "SHUT_WR".into() });
                self.shutdown(libc::SHUT_WR);
                if let Some(c) = self.conn.as_mut() {
                    c.tx = None;
                }
            }
        }
    }
}

/// What a handshake step names when it ran out of time: what it was waiting for, and
/// TP-HANDSHAKE-17 (the handshake is not complete within `T_START`).
fn with_start_budget(found: &'static [&'static str]) -> &'static [&'static str] {
    match found {
        ["TP-HANDSHAKE-02"] => &["TP-HANDSHAKE-02", "TP-HANDSHAKE-17"],
        ["TP-HANDSHAKE-10"] => &["TP-HANDSHAKE-10", "TP-HANDSHAKE-17"],
        ["TP-HANDSHAKE-09", "TP-HANDSHAKE-10"] => &["TP-HANDSHAKE-09", "TP-HANDSHAKE-10", "TP-HANDSHAKE-17"],
        ["TP-HANDSHAKE-12"] => &["TP-HANDSHAKE-12", "TP-HANDSHAKE-17"],
        other => other,
    }
}
