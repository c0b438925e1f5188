//! The steps of proto-mcp scenarios (`profile: proto-mcp`): the profile's own ([`PmAction`]),
//! and which shared steps it takes, with its default wait ([`T_REPLY`]).

use protomcp_proto::mcp::{Arm, default_handshake};
use serde_json::{Value, json};

use super::{
    Action, Checker, Compiler, ExpectExit, Loc, Node, NodeKind, RawStep, ScenarioError, Spanned, loc, raw,
    requirements, template, walk_strings,
};
use crate::proto_mcp::{self as pm, ExpectAnswer, ExpectJson, Initialize, PmAction, PmItem, PmWrite, Probe, T_REPLY};

/// The shared steps a proto-mcp scenario may use.
const SHARED: &[&str] =
    &["send_raw", "send_frame", "expect_nothing", "expect_exit", "expect_alive", "close", "signal", "sleep", "check"];

impl Checker<'_> {
    /// A step of a proto-mcp scenario: `None` when it could not be checked (errors recorded).
    pub(super) fn pm_action(&mut self, step: &RawStep, at: Loc, compiler: &mut Compiler) -> Option<Action> {
        let pm = |a: PmAction| Some(Action::ProtoMcp(a));
        match step {
            RawStep::Initialize(i) => pm(PmAction::Initialize(self.pm_initialize(i, at)?)),
            RawStep::Send(node) => {
                let item = self.pm_message(node, compiler)?;
                pm(PmAction::Write(PmWrite { keyword: "send", items: vec![item], pace: None }))
            }
            RawStep::SendJson(node) => {
                let v = self.pm_json(node, compiler)?;
                pm(PmAction::Write(PmWrite { keyword: "send_json", items: vec![PmItem::Json(v)], pace: None }))
            }
            RawStep::SendText(t) => {
                if t.text.value.is_empty() {
                    self.error(loc(&t.text), "send_text needs at least one character");
                    return None;
                }
                let items = vec![PmItem::Text(t.text.value.clone())];
                pm(PmAction::Write(PmWrite { keyword: "send_text", items, pace: None }))
            }
            RawStep::SendBatch(b) => pm(PmAction::Write(self.pm_batch(b, compiler)?)),
            RawStep::ExpectAnswer(e) => pm(PmAction::ExpectAnswer(self.pm_expect_answer(e, compiler)?)),
            RawStep::ExpectError(e) => pm(PmAction::ExpectError(self.pm_expect_error(e))),
            RawStep::ExpectNext(e) => {
                pm(PmAction::ExpectNext { id: e.id.value, within: self.within(e.within_ms.as_ref(), T_REPLY) })
            }
            RawStep::ExpectJson(e) => {
                let id = match e.id.to_value() {
                    Ok(v @ (Value::Null | Value::Number(_))) => v,
                    Ok(_) => {
                        self.error(e.id.loc, "expect_json.id is a number or null");
                        return None;
                    }
                    Err((l, m)) => {
                        self.error(l, m);
                        return None;
                    }
                };
                let within = self.within(e.within_ms.as_ref(), T_REPLY);
                pm(PmAction::ExpectJson(ExpectJson {
                    id,
                    result: e.result,
                    error_code: e.error_code,
                    any: e.any,
                    within,
                }))
            }
            RawStep::Probe(node) => {
                let probe = self.pm_probe(node)?;
                compiler.defined.extend(probe.defines().iter().map(|n| (*n).to_owned()));
                pm(PmAction::Probe(probe))
            }
            RawStep::ExpectAlive(w) => Some(Action::ExpectAlive { within: self.within(w.within_ms.as_ref(), T_REPLY) }),
            RawStep::ExpectExit(e) => {
                let within = self.within(e.within_ms.as_ref(), T_REPLY);
                match self.expect_exit(e, compiler)? {
                    Action::ExpectExit(x) => Some(Action::ExpectExit(ExpectExit { within, ..x })),
                    other => Some(other),
                }
            }
            RawStep::SendFrame(f) if f.body.is_some() => {
                self.error(at, "proto-mcp: `send_frame` takes `body_hex`; an MCPMessage by field name is `send`");
                None
            }
            RawStep::ExpectNothing(e) if e.ignore.is_some() => {
                self.error(at, "proto-mcp: `expect_nothing` takes no `ignore` (every byte on stdout counts)");
                None
            }
            RawStep::Close(c) if c.mode.as_ref().is_none_or(|m| m.value != "write") => {
                self.error(at, "proto-mcp: `close: {mode: write}` closes the server's stdin; there is no other close");
                None
            }
            other => {
                let action = self.action(other, compiler)?;
                if !SHARED.contains(&action.keyword()) {
                    self.error(
                        at,
                        format!(
                            "`{}` is a protomcp step; a proto-mcp scenario uses {}, initialize, send, send_json, send_text, send_batch, expect_answer, expect_error, expect_next, expect_json and probe",
                            action.keyword(),
                            SHARED.join(", ")
                        ),
                    );
                    return None;
                }
                Some(action)
            }
        }
    }

    /// `initialize`: the default handshake, or an initialize_request with the options given.
    fn pm_initialize(&mut self, i: &raw::RawInitialize, at: Loc) -> Option<Initialize> {
        let id = i.id.as_ref().map_or(pm::DEFAULT_INITIALIZE_ID, |x| x.value);
        let within = self.within(i.within_ms.as_ref(), T_REPLY);
        if i.protocol_version.is_none() && i.supports_bsr_refs.is_none() && i.capabilities.is_none() {
            return Some(Initialize { id, frame: default_handshake(id).to_frame().to_vec(), within });
        }
        let version = i.protocol_version.as_ref().map_or("1.0.0", |v| v.value.as_str());
        let mut init = json!({"protocol_version": version, "metadata": {"client": "protomcp-conform"}});
        if i.capabilities.as_ref().is_none_or(|c| c.value) {
            let bsr = i.supports_bsr_refs.as_ref().is_none_or(|b| b.value);
            init["capabilities"] = json!({"supports_bsr_refs": bsr, "encodings": ["protobuf"]});
        }
        match pm::message_frame(&json!({"id": id, "initialize_request": init})) {
            Ok((frame, _)) => Some(Initialize { id, frame, within }),
            Err(e) => {
                self.error(i.id.as_ref().map_or(at, loc), e.to_string());
                None
            }
        }
    }

    /// A JSON tree with its placeholders recorded (each must be captured earlier or be one of
    /// [`pm::CONFIGURED`]).
    fn pm_json(&mut self, node: &Node, compiler: &mut Compiler) -> Option<Value> {
        let mut ok = true;
        walk_strings(node, &mut |s, at| match template::parse(s) {
            Ok(pieces) => {
                for p in pieces {
                    if let template::Piece::Fill { .. } = p {
                        ok = false;
                        let m = format!("{}; proto-mcp messages do not", template::FILL_MISPLACED);
                        self.errors.push(ScenarioError::new(self.file, at, m));
                    } else if let template::Piece::Var(name) = p
                        && !pm::CONFIGURED.contains(&name.as_str())
                    {
                        compiler.used.push((name, at));
                    }
                }
            }
            Err(m) => {
                ok = false;
                self.errors.push(ScenarioError::new(self.file, at, m.to_string()));
            }
        });
        let v = node.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
        ok.then_some(v)
    }

    /// An MCPMessage by field name: built once with every placeholder as `00`, so that a wrong
    /// field is reported at load time.
    fn pm_message(&mut self, node: &Node, compiler: &mut Compiler) -> Option<PmItem> {
        let v = self.pm_json(node, compiler)?;
        let mut names = Vec::new();
        template::names_in(&v, &mut names);
        let dummy: template::Captures = names.into_iter().map(|n| (n, json!("00"))).collect();
        let built = template::substitute(&v, &dummy)
            .map_err(|e| e.to_string())
            .and_then(|d| pm::message_frame(&d).map_err(|e| e.to_string()));
        match built {
            Ok(_) => Some(PmItem::Message(v)),
            Err(m) => {
                self.error(node.loc, m);
                None
            }
        }
    }

    /// `send_batch`: items written in one write, optionally one byte per `pace_ms`.
    fn pm_batch(&mut self, b: &raw::RawSendBatch, compiler: &mut Compiler) -> Option<PmWrite> {
        if b.items.value.is_empty() {
            self.error(loc(&b.items), "send_batch needs at least one item");
        }
        let mut items = Vec::new();
        let mut ok = true;
        for item in &b.items.value {
            let one = match &item.value {
                raw::RawPmItem::Message(n) => self.pm_message(n, compiler),
                raw::RawPmItem::Hex(h) => self.hex(h).map(PmItem::Raw),
                raw::RawPmItem::Text(t) => Some(PmItem::Text(t.value.clone())),
                raw::RawPmItem::Json(n) => self.pm_json(n, compiler).map(PmItem::Json),
                raw::RawPmItem::Initialize(i) => {
                    Some(PmItem::Initialize(i.id.as_ref().map_or(pm::DEFAULT_INITIALIZE_ID, |x| x.value)))
                }
            };
            match one {
                Some(i) => items.push(i),
                None => ok = false,
            }
        }
        let pace = b.pace_ms.as_ref().map(|p| self.within(Some(p), T_REPLY));
        ok.then_some(PmWrite { keyword: "send_batch", items, pace })
    }

    fn pm_arms(&mut self, node: &Node) -> Vec<Arm> {
        let names: Vec<(String, Loc)> = match &node.kind {
            NodeKind::Str(s) => vec![(s.clone(), node.loc)],
            NodeKind::Seq(items) => items.iter().map(|n| (n.as_str().unwrap_or("").to_owned(), n.loc)).collect(),
            other => {
                self.error(node.loc, format!("`arm` is an arm name or a list of them, found {}", other.describe()));
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (name, at) in names {
            match Arm::from_name(&name) {
                Some(a) => out.push(a),
                None => {
                    let valid: Vec<&str> = Arm::ALL.iter().map(|a| a.name()).collect();
                    self.error(at, format!("unknown proto-mcp arm `{name}`; valid: {}", valid.join(", ")));
                }
            }
        }
        if out.is_empty() && !self.errors.iter().any(|e| e.loc() == node.loc) {
            self.error(node.loc, "`arm` names at least one arm");
        }
        out
    }

    fn pm_expect_answer(&mut self, e: &raw::RawExpectAnswer, compiler: &mut Compiler) -> Option<ExpectAnswer> {
        let arms = self.pm_arms(&e.arm);
        let message = match &e.message {
            Some(n) => Some(self.pattern(compiler.value(n))?),
            None => None,
        };
        let within = self.within(e.within_ms.as_ref(), T_REPLY);
        (!arms.is_empty()).then_some(ExpectAnswer { id: e.id.value, arms, within, message })
    }

    fn pm_requirement(&mut self, r: Option<&Spanned<String>>) -> Option<String> {
        let r = r?;
        match requirements::proto_mcp::get(&r.value) {
            Some(q) => Some(q.id.to_owned()),
            None => {
                self.error(loc(r), format!("`{}` is not a PM requirement", r.value));
                None
            }
        }
    }

    fn pm_expect_error(&mut self, e: &raw::RawExpectError) -> pm::ExpectError {
        if e.should.is_some() == e.should_codes.is_empty() {
            self.error(loc(&e.id), "`should` and `should_codes` go together");
        }
        pm::ExpectError {
            id: e.id.value,
            codes: e.codes.clone(),
            should_codes: e.should_codes.clone(),
            should: self.pm_requirement(e.should.as_ref()),
            server_defined_ok: e.server_defined_ok,
            if_resources_not_advertised: e.if_resources_not_advertised.clone(),
            success_ok: e.success_ok,
            call_error: self.pm_requirement(e.call_error.as_ref()),
            within: self.within(e.within_ms.as_ref(), T_REPLY),
        }
    }

    /// `probe: NAME` or `probe: {NAME: {ARGS}}`.
    fn pm_probe(&mut self, node: &Node) -> Option<Probe> {
        let (name, at, args): (&str, Loc, Option<&Node>) = match (&node.kind, node.as_map()) {
            (NodeKind::Str(s), _) => (s.as_str(), node.loc, None),
            (_, Some([(k, v)])) => (k.name.as_str(), k.loc, Some(v)),
            _ => {
                self.error(node.loc, "probe is a name or a one-entry map `{name: {args}}`");
                return None;
            }
        };
        let allowed: &[&str] = match name {
            "tools" => &["include_schemas"],
            "version" => &["sent"],
            "many" => &["count", "batch"],
            "resources" | "bsr_filter" | "init_flags" | "newer_major" | "safe_call" => &[],
            other => {
                self.error(
                    at,
                    format!("unknown probe `{other}`; valid: tools, resources, bsr_filter, init_flags, version, newer_major, safe_call, many"),
                );
                return None;
            }
        };
        let mut bad = false;
        for (k, _) in args.and_then(Node::as_map).unwrap_or_default() {
            if !allowed.contains(&k.name.as_str()) {
                self.error(
                    k.loc,
                    format!("probe {name} has no argument `{}`; it takes: {}", k.name, allowed.join(", ")),
                );
                bad = true;
            }
        }
        if let Some(a) = args
            && a.as_map().is_none()
            && !matches!(a.kind, NodeKind::Null)
        {
            self.error(a.loc, format!("the arguments of probe {name} are a mapping"));
            return None;
        }
        let arg = |k: &str| args.and_then(|a| a.get(k));
        let uint = |k: &str, d: u64| match arg(k).map(|n| &n.kind) {
            Some(NodeKind::Int(i)) => u64::try_from(*i).ok(),
            None => Some(d),
            _ => None,
        };
        let probe = match name {
            "tools" => Probe::Tools {
                include_schemas: match arg("include_schemas").map(|n| &n.kind) {
                    None => false,
                    Some(NodeKind::Bool(b)) => *b,
                    Some(_) => return self.pm_bad_arg(at, "include_schemas is true or false"),
                },
            },
            "version" => match arg("sent").and_then(Node::as_str) {
                Some(s) => Probe::Version { sent: s.to_owned() },
                None if arg("sent").is_none() => Probe::Version { sent: "1.0.0".into() },
                None => return self.pm_bad_arg(at, "sent is a version string"),
            },
            "many" => match (uint("count", 10_000), uint("batch", 100)) {
                (Some(count), Some(batch)) if batch > 0 => Probe::Many { count, batch },
                _ => return self.pm_bad_arg(at, "count and batch are positive integers"),
            },
            "resources" => Probe::Resources,
            "bsr_filter" => Probe::BsrFilter,
            "init_flags" => Probe::InitFlags,
            "newer_major" => Probe::NewerMajor,
            _ => Probe::SafeCall,
        };
        (!bad).then_some(probe)
    }

    fn pm_bad_arg<T>(&mut self, at: Loc, message: &str) -> Option<T> {
        self.error(at, message);
        None
    }
}
