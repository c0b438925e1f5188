//! The steps: their order and connection state, waits, soak, templates and names.

use super::*;

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
        for step in &steps.value {
            let at = loc(step);
            let mut compiler = Compiler::default();
            let checks = match &step.value.checks {
                Some(list) => {
                    self.requirements(list, role, needs, "a step's `checks`").into_iter().map(|(r, _)| r).collect()
                }
                None => Vec::new(),
            };
            let Some(action) = self.action(&step.value.step, &mut compiler) else { continue };
            for (name, used_at) in &compiler.used {
                if !defined.contains(name) {
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
                Action::Close(CloseMode::Both) => conn = Conn::Closed(at),
                Action::Close(CloseMode::Write) => conn = Conn::WriteClosed(at),
                Action::ToolHandshake(_) => conn = Conn::Open,
                _ => {}
            }
            let host = self.step_host(&step.value.step);
            out.push(Step { loc: at, action, checks, host });
        }
        out
    }

    pub(super) fn within(&mut self, d: Option<&Spanned<Ms>>, default: Duration) -> Duration {
        if let Some(m) = d
            && m.value.0 == 0
        {
            self.error(loc(m), "a time must be at least 1 ms");
        }
        ms(d, default)
    }

    /// A `soak` step: its defaults (a sample every 20th of the rounds, a tenth of them as
    /// warm-up, 5 s a round) and that enough samples follow the warm-up to judge.
    pub(super) fn soak(&mut self, k: &raw::RawSoak) -> Option<Soak> {
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

    pub(super) fn ignore(&mut self, list: Option<&Vec<Spanned<String>>>) -> Vec<Arm> {
        let mut out = Vec::new();
        for item in list.map(Vec::as_slice).unwrap_or_default() {
            match Arm::from_name(&item.value) {
                Some(arm) => out.push(arm),
                None => {
                    let valid: Vec<&str> = Arm::ALL.iter().map(|a| a.name()).collect();
                    self.error(loc(item), format!("unknown arm `{}`; valid: {}", item.value, valid.join(", ")));
                }
            }
        }
        out
    }

    pub(super) fn pattern(&mut self, r: Result<Pattern, crate::pattern::PatternError>) -> Option<Pattern> {
        r.map_err(|e| self.error(e.loc, e.message)).ok()
    }

    /// A send template: placeholders checked (and recorded as used), then the tree checked
    /// against the schema.
    pub(super) fn template(&mut self, node: &Node, compiler: &mut Compiler) -> Option<Template> {
        let mut ok = true;
        walk_strings(node, &mut |s, at| match template::parse(s) {
            Ok(pieces) => {
                for p in pieces {
                    if let template::Piece::Var(name) = p {
                        compiler.used.push((name, at));
                    }
                }
            }
            Err(m) => {
                ok = false;
                self.errors.push(ScenarioError::new(self.file, at, m));
            }
        });
        if !ok {
            return None;
        }
        let tree = match node.to_value() {
            Ok(t) => t,
            Err((at, m)) => {
                self.error(at, m);
                return None;
            }
        };
        match Template::new(tree) {
            Ok(t) => Some(t),
            Err(e) => {
                // An unknown name is reported at the key; anything else at the value.
                let at = match (&e.kind, e.path.split_last()) {
                    (DynErrorKind::UnknownField { .. }, Some((PathSeg::Key(k), parent))) => {
                        node.locate_node(parent).and_then(|n| n.key_loc(k)).unwrap_or_else(|| node.locate(&e.path))
                    }
                    _ => node.locate(&e.path),
                };
                self.error(at, e.to_string());
                None
            }
        }
    }

    pub(super) fn hex(&mut self, s: &Spanned<String>) -> Option<Vec<u8>> {
        protomcp_proto::dynamic::hex_decode(&s.value).map_err(|m| self.error(loc(s), format!("invalid hex: {m}"))).ok()
    }

    pub(super) fn names(&mut self, list: &[Spanned<String>], what: &str) -> Vec<String> {
        let mut out = Vec::new();
        for n in list {
            if n.value.is_empty() {
                self.error(loc(n), format!("a {what} name cannot be empty"));
            }
            out.push(n.value.clone());
        }
        out
    }
}
