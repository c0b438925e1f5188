//! The invariant oracle ([`Checker`]) and a simulated conforming peer to drive it ([`simulate`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{Plan, Step, reply_arm};
use crate::envelopes::{Arm, EnvelopeExt};
use crate::pb::{self, Envelope};

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The requirement ID of the spec.
    pub requirement: &'static str,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.requirement, self.message)
    }
}

#[derive(Debug, Clone)]
struct Outstanding {
    reply: Arm,
    token: String,
    requirement: &'static str,
}

/// The invariant oracle, fed with both directions of a session after the handshake.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    outstanding: BTreeMap<String, Outstanding>,
    answered: BTreeSet<String>,
    /// Rids the harness put on frames that are not requests.
    notifications: BTreeSet<String>,
    /// Progress tokens of calls in flight.
    tokens: BTreeSet<String>,
    /// Every progress token the harness sent.
    all_tokens: BTreeSet<String>,
    /// Calls the harness cancelled while they were outstanding.
    cancelled: BTreeSet<String>,
    /// Rids the harness put on a request while another request under them was in flight: which
    /// reply answers which is not knowable, so replies under them are never findings.
    ambiguous: BTreeSet<String>,
    pub findings: Vec<Finding>,
}

fn short(s: &str) -> String {
    if s.chars().count() > 40 { format!("{:?}…", s.chars().take(40).collect::<String>()) } else { format!("{s:?}") }
}

impl Checker {
    pub fn new() -> Self {
        Checker::default()
    }

    fn find(&mut self, requirement: &'static str, message: String) {
        self.findings.push(Finding { requirement, message });
    }

    /// The harness sent an Envelope with this rid and arm (`None`: no arm, or not decodable as
    /// an Envelope); `progress_token` of a call.
    pub fn sent(&mut self, rid: &str, arm: Option<Arm>, progress_token: &str) {
        let reply = arm.and_then(reply_arm);
        match reply {
            // A request without a rid may be answered under the empty rid or not at all
            // (TP-CALL-21): such answers are never findings.
            Some(_) if rid.is_empty() => drop(self.ambiguous.insert(String::new())),
            Some(reply) => {
                if self.outstanding.contains_key(rid) {
                    self.ambiguous.insert(rid.to_owned());
                }
                let requirement = if arm == Some(Arm::CallTool) { "TP-CALL-01" } else { "TP-CONCUR-01" };
                self.answered.remove(rid);
                self.outstanding
                    .insert(rid.to_owned(), Outstanding { reply, token: progress_token.to_owned(), requirement });
                if !progress_token.is_empty() {
                    self.tokens.insert(progress_token.to_owned());
                    self.all_tokens.insert(progress_token.to_owned());
                }
            }
            _ => {
                if !rid.is_empty() && !self.outstanding.contains_key(rid) {
                    self.notifications.insert(rid.to_owned());
                }
            }
        }
    }

    /// The harness sent a CancelRequest naming `call_rid` (in its body).
    pub fn cancel(&mut self, call_rid: &str) {
        if self.outstanding.contains_key(call_rid) {
            self.cancelled.insert(call_rid.to_owned());
        }
    }

    /// The peer sent a frame (a sideband transfer or a stream counts as its call result).
    pub fn received(&mut self, rid: &str, arm: Option<Arm>, progress_token: &str) {
        let Some(arm) = arm else { return };
        if arm == Arm::Progress {
            if !self.tokens.contains(progress_token) {
                let (req, why) = if self.all_tokens.contains(progress_token) {
                    ("TP-PROGRESS-03", "after its call's result")
                } else if progress_token.is_empty() {
                    ("TP-PROGRESS-02", "with an empty token: no call asked for progress without one")
                } else {
                    ("TP-PROGRESS-02", "for a token no call in flight carries")
                };
                self.find(req, format!("a ProgressNotification {} {why}", short(progress_token)));
            }
            return;
        }
        if matches!(arm, Arm::CreateTask | Arm::TaskStatusResponse) && self.outstanding.contains_key(rid) {
            self.find("TP-TASK-02", format!("{} in place of the result of {}", arm.name(), short(rid)));
            return;
        }
        let is_reply =
            matches!(arm.kind(), crate::envelopes::Kind::Response | crate::envelopes::Kind::ResponseOrNotification);
        if !is_reply || (rid.is_empty() && arm.kind() == crate::envelopes::Kind::ResponseOrNotification) {
            return;
        }
        if self.ambiguous.contains(rid) {
            if self.outstanding.get(rid).is_some_and(|o| o.reply == arm) {
                self.outstanding.remove(rid);
            }
            return;
        }
        match self.outstanding.get(rid) {
            Some(o) if o.reply == arm => {
                let o = self.outstanding.remove(rid).expect("present");
                self.tokens.remove(&o.token);
                self.answered.insert(rid.to_owned());
            }
            Some(o) => {
                let msg = format!("{} answered with {}, expected {}", short(rid), arm.name(), o.reply.name());
                self.find("TP-CONCUR-01", msg);
            }
            None if self.answered.contains(rid) => self.find(
                "TP-CONCUR-01",
                format!("a second {} for {}: exactly one reply is allowed", arm.name(), short(rid)),
            ),
            None if self.notifications.contains(rid) => self.find(
                "TP-FRAME-06",
                format!("a {} under {}, the rid of a frame that must not be answered", arm.name(), short(rid)),
            ),
            None => {
                self.find("TP-CONCUR-01", format!("a {} under {}, which no request carried", arm.name(), short(rid)))
            }
        }
    }

    /// Requests still owed a reply.
    pub fn unanswered(&self) -> Vec<Finding> {
        self.outstanding
            .iter()
            .map(|(rid, o)| {
                let (requirement, after) = if self.cancelled.contains(rid) {
                    ("TP-CANCEL-03", " after a cancel")
                } else {
                    (o.requirement, "")
                };
                Finding { requirement, message: format!("{} never got its {}{after}", short(rid), o.reply.name()) }
            })
            .collect()
    }
}

fn token_of(e: &Envelope) -> &str {
    match &e.msg {
        Some(pb::envelope::Msg::CallTool(c)) => &c.progress_token,
        Some(pb::envelope::Msg::Progress(p)) => &p.progress_token,
        _ => "",
    }
}

/// Plays `plan` against a simulated conforming peer (every owed reply once, progress before
/// results, nothing for notifications) through a [`Checker`]; with `duplicate = Some(i)` the
/// peer answers the `i`-th reply (modulo) twice. Returns the checker after the end of the
/// session, its unanswered requests added to its findings. For tests and the fuzz target.
pub fn simulate(plan: &Plan, duplicate: Option<usize>) -> Checker {
    let mut c = Checker::new();
    let mut tokens: BTreeMap<String, String> = BTreeMap::new();
    let total: usize =
        plan.steps.iter().map(|s| if let Step::Await { replies, .. } = s { replies.len() } else { 0 }).sum();
    let dup = duplicate.filter(|_| total > 0).map(|i| i % total);
    let mut k = 0usize;
    let mut alive = 0u32;
    for step in &plan.steps {
        match step {
            Step::Send { wire, .. } => {
                let e = wire.envelope();
                if e.arm().and_then(reply_arm).is_some() && !e.request_id.is_empty() {
                    tokens.insert(e.request_id.clone(), token_of(&e).to_owned());
                }
                c.sent(&e.request_id, e.arm(), token_of(&e));
                if let Some(pb::envelope::Msg::Cancel(x)) = &e.msg {
                    c.cancel(&x.request_id);
                }
            }
            Step::Await { replies, .. } => {
                for r in replies.iter().rev() {
                    if let Some(t) = tokens.get(&r.rid).filter(|t| !t.is_empty()) {
                        c.received("", Some(Arm::Progress), t);
                    }
                    c.received(&r.rid, Some(r.arm), "");
                    if dup == Some(k) {
                        c.received(&r.rid, Some(r.arm), "");
                    }
                    k += 1;
                }
            }
            Step::Quiet { .. } => {}
            Step::Alive => {
                alive += 1;
                let rid = format!("alive-{alive}");
                c.sent(&rid, Some(Arm::CallTool), "");
                c.received(&rid, Some(Arm::CallResult), "");
            }
        }
    }
    let left = c.unanswered();
    c.findings.extend(left);
    c
}
