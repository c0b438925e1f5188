//! The `bridge_core_ops` target: the reference bridge's core ([`crate::bridge_core`]) driven by
//! a byte string read as operations: Envelopes from the tool process (any bytes prost accepts),
//! host calls and cancellations, time passing, the connection ending, reloads, a host's answers
//! to reverse requests.
//!
//! Invariants (a broken one panics):
//! - nothing panics, whatever the tool process sends;
//! - every operation is answered at most once, and only operations that were started;
//! - after [`Core::handle_timeout`] at `now`, nothing is due at `now` any more (a timer driven
//!   by [`Core::poll_timeout`] never spins);
//! - once the connection ends and the call timeout has passed, every operation is answered.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::json;

use crate::bridge_core::{Config, Core, Event, OpId, SessionCaps};
use crate::envelopes::{self as env, EnvelopeExt};
use crate::pb::{self, Envelope, envelope::Msg};

const CALL_TIMEOUT: Duration = Duration::from_millis(1000);

struct Run {
    core: Core,
    start: Instant,
    now: Duration,
    generation: u64,
    started: BTreeSet<OpId>,
    answered: BTreeSet<OpId>,
    cancelled: BTreeSet<OpId>,
    /// Rids of requests the core sent (for well-formed replies).
    rids: Vec<String>,
    /// Reverse requests a host was asked.
    asked: Vec<(String, bool)>,
}

impl Run {
    fn at(&self) -> Instant {
        self.start + self.now
    }

    fn drain(&mut self) {
        while let Some(e) = self.core.poll_transmit() {
            if !e.request_id.is_empty() && !matches!(e.msg, Some(Msg::Cancel(_))) {
                self.rids.push(e.request_id);
            }
        }
        while let Some(ev) = self.core.poll_event() {
            match ev {
                Event::Answer { op, .. } => {
                    assert!(self.started.contains(&op), "an answer to {op:?}, which was never started");
                    assert!(!self.cancelled.contains(&op), "an answer to {op:?}, which the host cancelled");
                    assert!(self.answered.insert(op), "{op:?} answered twice");
                }
                Event::Sample { rid, .. } => self.asked.push((rid, true)),
                Event::ListRoots { rid, .. } => self.asked.push((rid, false)),
                _ => {}
            }
        }
    }

    fn tool_sends(&mut self, envelope: Envelope) {
        let at = self.at();
        self.core.handle_envelope(at, self.generation, envelope);
        self.drain();
    }

    fn connect(&mut self) {
        let at = self.at();
        self.generation = self.core.handle_connected(at);
        self.drain();
        if let Some(rid) = self.rids.pop() {
            self.tool_sends(env::tool_list(vec![env::tool("echo", "d", "")]).with_rid(rid));
            self.tool_sends(env::reload_response(true, ""));
            // The three list pulls, answered empty: the connection serves.
            let pulls = self.rids.split_off(self.rids.len().saturating_sub(3));
            for (rid, reply) in pulls.into_iter().zip::<[Envelope; 3]>([
                pb::ResourceListResponse::default().into(),
                pb::ResourceTemplateListResponse::default().into(),
                pb::PromptListResponse::default().into(),
            ]) {
                self.tool_sends(reply.with_rid(rid));
            }
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        let at = self.at();
        self.core.handle_timeout(at);
        self.drain();
        assert!(
            self.core.poll_timeout().is_none_or(|t| t > at),
            "something is still due at the time just handled: a timer would spin"
        );
    }
}

/// The body of the `bridge_core_ops` fuzz target.
pub fn bridge_core_ops(data: &[u8]) {
    let cfg = Config { call_timeout: CALL_TIMEOUT, ..Config::default() };
    let mut run = Run {
        core: Core::new(cfg),
        start: Instant::now(),
        now: Duration::ZERO,
        generation: 0,
        started: BTreeSet::new(),
        answered: BTreeSet::new(),
        cancelled: BTreeSet::new(),
        rids: Vec::new(),
        asked: Vec::new(),
    };
    run.connect();
    assert_eq!(run.core.status(), &crate::bridge_core::Status::Ready, "the fuzz run's tool process serves");
    run.core.add_session(1, SessionCaps { sampling: true, roots: true, legacy: true });
    run.core.add_session(2, SessionCaps::default());
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let arg = rest.first().copied().unwrap_or(0);
        match op % 10 {
            0 => {
                // An Envelope of up to 255 bytes, as the tool process sent it.
                let from = 1.min(rest.len());
                let to = (from + usize::from(arg)).min(rest.len());
                let body = &rest[from..to];
                rest = &rest[to..];
                if let Ok(e) = Envelope::decode(body) {
                    run.tool_sends(e);
                }
                continue;
            }
            1 => {
                let name = ["echo", "nope", ""][usize::from(arg) % 3];
                let progress = (arg & 0x80 != 0).then(|| json!(arg));
                let at = run.at();
                if let Ok(op) = run.core.start_call(at, 1 + u64::from(arg & 1), name, None, progress) {
                    run.started.insert(op);
                }
            }
            2 => {
                let open: Vec<OpId> = run
                    .started
                    .iter()
                    .filter(|o| !run.answered.contains(o) && !run.cancelled.contains(o))
                    .copied()
                    .collect();
                if !open.is_empty() {
                    let op = open[usize::from(arg) % open.len()];
                    run.core.cancel(op);
                    run.cancelled.insert(op);
                }
            }
            3 => run.advance(Duration::from_millis(u64::from(arg) * 20)),
            4 => {
                let at = run.at();
                run.core.handle_closed(at, run.generation, "fuzz: the connection ended");
                run.drain();
                run.connect();
            }
            5 => {
                let at = run.at();
                let r = match arg % 3 {
                    0 => run.core.start_read(at, 1, "file:///x"),
                    1 => run.core.start_prompt(at, 1, "p", None),
                    _ => run.core.start_complete(at, 1, &json!({"type": "ref/prompt", "name": "p"}), "a", "v"),
                };
                if let Ok(op) = r {
                    run.started.insert(op);
                }
            }
            6 => {
                // A well-formed reply under an rid the core used.
                if !run.rids.is_empty() {
                    let rid = run.rids.remove(usize::from(arg) % run.rids.len());
                    let reply: Envelope = match arg % 4 {
                        0 => pb::CallToolResponse { result_json: "\"ok\"".into(), ..Default::default() }.into(),
                        1 => pb::MiddlewareInterceptResponse::default().into(),
                        2 => pb::ReadResourceResponse::default().into(),
                        _ => pb::PromptListResponse::default().into(),
                    };
                    run.tool_sends(reply.with_rid(rid));
                }
            }
            7 => {
                if !run.asked.is_empty() {
                    let (rid, sampling) = run.asked.remove(usize::from(arg) % run.asked.len());
                    let r = if arg & 1 == 0 {
                        Ok(json!({"roots": []}))
                    } else {
                        Err(crate::bridge_core::NoAnswer::Host("no".to_owned()))
                    };
                    if sampling {
                        run.core.handle_sample_answer(&rid, r);
                    } else {
                        run.core.handle_roots_answer(&rid, r);
                    }
                }
            }
            8 => {
                let at = run.at();
                run.core.begin_reload(at);
            }
            _ => run.core.remove_session(2),
        }
        rest = rest.get(1..).unwrap_or_default();
        run.drain();
    }
    // The end: the connection goes, time passes; every operation is answered.
    let at = run.at();
    run.core.handle_closed(at, run.generation, "fuzz: the end");
    run.drain();
    run.advance(CALL_TIMEOUT * 2);
    let open: Vec<_> = run.started.iter().filter(|o| !run.answered.contains(o) && !run.cancelled.contains(o)).collect();
    assert!(open.is_empty(), "operations never answered: {open:?}");
}
