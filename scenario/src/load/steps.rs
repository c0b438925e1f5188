//! The steps in order: the connection state each leaves, the host each names, its checks.

use super::{
    Action, Checker, CloseMode, Compiler, Conn, HashSet, Loc, Profile, RawStep, RawStepEntry, Role, SocketSetup,
    Spanned, Step, TesteeSetup, loc,
};

impl Checker<'_> {
    pub(super) fn steps(
        &mut self,
        steps: &Spanned<Vec<Spanned<RawStepEntry>>>,
        testee: &TesteeSetup,
        role: Role,
        needs: &[(String, Loc)],
    ) -> Vec<Step> {
        if steps.value.is_empty() {
            self.error(loc(steps), "a scenario needs at least one step");
        }
        let mut out = Vec::new();
        let mut defined: HashSet<String> = HashSet::new();
        let mut conn = Conn::Open;
        let mut marked = false;
        for step in &steps.value {
            let at = loc(step);
            let mut compiler = Compiler::default();
            let checks = match &step.value.checks {
                Some(list) => {
                    self.requirements(list, role, needs, "a step's `checks`").into_iter().map(|(r, _)| r).collect()
                }
                None => Vec::new(),
            };
            let deviation = self.deviation(step.value.deviation.as_ref());
            let action = match self.profile {
                Profile::ProtoMcp => self.pm_action(&step.value.step, at, &mut compiler),
                Profile::Protomcp if is_proto_mcp_step(&step.value.step) => {
                    self.error(at, "this step belongs to proto-mcp scenarios (profile: proto-mcp)");
                    None
                }
                Profile::Protomcp => self.action(&step.value.step, &mut compiler),
            };
            let Some(action) = action else { continue };
            for (name, used_at) in &compiler.used {
                let configured =
                    self.profile == Profile::ProtoMcp && crate::proto_mcp::CONFIGURED.contains(&name.as_str());
                if !defined.contains(name) && !configured {
                    self.error(
                        *used_at,
                        format!(
                            "`${{{name}}}` is not defined: no earlier step captures `{name}` (with {{capture: {name}}})"
                        ),
                    );
                }
            }
            defined.extend(compiler.defined);
            if testee.socket != SocketSetup::Normal && action.needs_connection() {
                self.error(
                    at,
                    format!(
                        "`{}` needs the connection, but with testee.socket set the testee never connects: only expect_exit, expect_no_connect, sleep and signal apply",
                        action.keyword()
                    ),
                );
            }
            match conn {
                // A bridge restarts its tool process: the next tool-side step (`tool_handshake`
                // or any other) plays the new one.
                Conn::Closed(_) if role == Role::Bridge && action.needs_connection() => conn = Conn::Open,
                Conn::Closed(closed) if action.needs_connection() => self.error(
                    at,
                    format!("`{}` needs the connection, which the `close` step at {closed} closed", action.keyword()),
                ),
                Conn::WriteClosed(closed) if action.writes() => self.error(
                    at,
                    format!(
                        "`{}` writes to the connection, whose sending side the `close` step at {closed} shut down",
                        action.keyword()
                    ),
                ),
                _ => {}
            }
            match action {
                Action::MemoryMark => marked = true,
                Action::ExpectMemory { .. } if !marked => {
                    self.error(at, "`expect_memory` measures from a `memory_mark` step, and no earlier step is one")
                }
                _ => {}
            }
            match action {
                Action::Close(CloseMode::Both) => conn = Conn::Closed(at),
                Action::Close(CloseMode::Write) => conn = Conn::WriteClosed(at),
                Action::ToolHandshake(_) => conn = Conn::Open,
                _ => {}
            }
            let host = self.step_host(&step.value.step);
            out.push(Step { loc: at, action, checks, deviation, host });
        }
        out
    }

    /// `deviation: true`: proto-mcp only.
    fn deviation(&mut self, d: Option<&Spanned<bool>>) -> bool {
        match d {
            Some(d) if self.profile != Profile::ProtoMcp => {
                self.error(loc(d), "`deviation` belongs to proto-mcp scenarios (profile: proto-mcp)");
                false
            }
            Some(d) => d.value,
            None => false,
        }
    }

    /// `host: NAME` of a host step: letters, digits, `-` and `_`.
    fn step_host(&mut self, step: &RawStep) -> Option<String> {
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
}

/// A step only proto-mcp scenarios have.
fn is_proto_mcp_step(step: &RawStep) -> bool {
    matches!(
        step,
        RawStep::Initialize(_)
            | RawStep::SendJson(_)
            | RawStep::SendText(_)
            | RawStep::SendBatch(_)
            | RawStep::ExpectAnswer(_)
            | RawStep::ExpectError(_)
            | RawStep::ExpectNext(_)
            | RawStep::ExpectJson(_)
            | RawStep::Probe(_)
    )
}
