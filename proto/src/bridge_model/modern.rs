//! MCP 2026-07-28 (spec §26): results of modern requests, multi round-trip requests, listen
//! subscriptions.
//!
//! A modern tools/call that the bridge forwarded is a *call* here, known by the rid of its
//! CallToolRequest. An InputRequiredResult parks it and issues a `requestState`; a retry that
//! presents a state the bridge issued for a call still open is attached to that call (its result,
//! whenever the tool process sends it, is what the retry's `complete` result must show). What the
//! model is certain of, whatever the timing:
//! - every result of a modern request carries `resultType`, `input_required` only for a
//!   tools/call (BR-STATELESS-09);
//! - an InputRequiredResult answers a request attached to a call that has input requests of the
//!   tool process outstanding, and lists at least one and at most that many (BR-STATELESS-17);
//! - a state is accepted (a retry answered with a result) at most once, never after a state of a
//!   later round was issued, never after the call was cancelled, and never when the bridge did
//!   not issue it; a retry without `requestState` is never accepted (BR-STATELESS-22);
//! - a retry never makes the bridge send a CallToolRequest (it is no candidate for one:
//!   BR-CALL-01 names a CallToolRequest no host tools/call asked for);
//! - listen subscriptions: a notification tagged with a subscriptionId belongs to an open
//!   `subscriptions/listen` of that id (BR-STATELESS-31), and after the host cancelled it nothing
//!   more carries its id and no response comes (BR-STATELESS-32); an open subscription is in
//!   flight, not unanswered (§26, the table of BR-MCP-19).
//!
//! At the end ([`BridgeModel::finish`]), when every frame has been read (the transcript shows a
//! tool-side frame when a step reads it, which may be after the host's answer that caused it):
//! - a call still parked was never cancelled, although `T_MRTR` passed (BR-STATELESS-26);
//! - the bridge sent no more answers to a call's input requests (a SamplingResponse without
//!   error, a ListRootsResponse with roots) than its accepted retries carried for the keys of
//!   their rounds: a refused retry causes no Envelope traffic (BR-STATELESS-22, when one of the
//!   call's retries was refused; else BR-STATELESS-23, one reply per key answered).

use std::collections::{BTreeMap, BTreeSet};

use super::{BridgeModel, Expected, HostRequest, Msg, SessionName, Value, key, pb};

/// The `_meta` member naming a listen subscription (BR-STATELESS-30).
pub(super) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// A modern call the bridge forwarded (by the rid of its CallToolRequest).
#[derive(Debug, Default)]
pub(super) struct ModernCall {
    /// The round of the latest state issued (from 1).
    round: u32,
    /// Answered with an InputRequiredResult and no retry accepted since.
    parked: bool,
    /// Cancelled at the tool process, answered with its result, or lost with the tool process.
    ended: bool,
    /// Input requests of the tool process (rids) attributed to this call and not yet answered.
    inputs: BTreeSet<String>,
    /// The tool process's result, while no request is attached to take it (BR-STATELESS-27).
    expected: Option<Expected>,
    /// Every input request ever attributed to it.
    asked: BTreeSet<String>,
    /// The input keys of each round's InputRequiredResult.
    keys: BTreeMap<u32, BTreeSet<String>>,
    /// Answers to its input requests the bridge sent (SamplingResponse without error,
    /// ListRootsResponse with roots).
    answers_sent: usize,
    /// Answers its accepted retries carried for keys of their rounds.
    answers_carried: usize,
    /// One of its retries was refused with -32602.
    refused: bool,
}

/// A `requestState` the bridge issued.
#[derive(Debug)]
pub(super) struct IssuedState {
    rid: String,
    round: u32,
    consumed: bool,
}

fn state_of(params: &Value) -> Option<&str> {
    params.get("requestState").and_then(Value::as_str)
}

impl HostRequest {
    /// A modern tools/call that presents a state or answers (a retry, §26.4).
    pub(super) fn is_retry(&self) -> bool {
        self.method == "tools/call"
            && self.modern()
            && (self.params.get("requestState").is_some() || self.params.get("inputResponses").is_some())
    }
}

impl BridgeModel {
    /// The host sent request `k` (already in [`Self::requests`]): a retry is attached to the
    /// call its state names.
    pub(super) fn modern_host_sent(&mut self, k: &(SessionName, String)) {
        let Some(r) = self.requests.get(k) else { return };
        if !r.is_retry() {
            return;
        }
        let Some(rid) = state_of(&r.params).and_then(|s| self.states.get(s)).map(|s| s.rid.clone()) else { return };
        let Some(call) = self.calls.get_mut(&rid).filter(|c| !c.ended) else { return };
        let kept = call.expected.take();
        if let Some(r) = self.requests.get_mut(k) {
            r.rid = Some(rid.clone());
        }
        self.rids.insert(rid, k.clone());
        if let Some(want) = kept {
            self.results.insert(k.clone(), want);
        }
    }

    /// The bridge forwarded the modern tools/call `k` as the CallToolRequest `rid`.
    pub(super) fn modern_call_started(&mut self, k: &(SessionName, String), rid: &str) {
        if self.requests.get(k).is_some_and(|r| r.method == "tools/call" && r.modern()) {
            self.calls.insert(rid.to_owned(), ModernCall::default());
        }
    }

    /// An Envelope the bridge sent to the tool process, as far as MRTR is concerned.
    pub(super) fn modern_tool_received(&mut self, env: &pb::Envelope) {
        let rid = &env.request_id;
        let answer = match &env.msg {
            Some(Msg::SamplingResponse(s)) => s.error.is_empty(),
            Some(Msg::ListRootsResponse(l)) => !l.roots.is_empty(),
            Some(Msg::Cancel(c)) => {
                if let Some(call) = self.calls.get_mut(&c.request_id) {
                    call.ended = true;
                }
                return;
            }
            _ => return,
        };
        for call in self.calls.values_mut().filter(|c| c.asked.contains(rid)) {
            call.inputs.remove(rid);
            call.answers_sent += usize::from(answer);
        }
    }

    /// The tool process sent an input request `rid`: it belongs to a modern call when that call
    /// is the single call owner (BR-SAMPLING-09).
    pub(super) fn modern_input(&mut self, rid: &str) {
        let legacy = self.requests.values().any(|r| r.method == "tools/call" && r.rid.is_some() && !r.modern());
        let mut open = self.calls.iter_mut().filter(|(_, c)| !c.ended);
        if let (Some((_, call)), None, false) = (open.next(), open.next(), legacy) {
            call.inputs.insert(rid.to_owned());
            call.asked.insert(rid.to_owned());
        }
    }

    /// The tool process's result for `rid` that no attached request takes: kept for the next
    /// accepted retry (BR-STATELESS-27). Returns whether it was a modern call's.
    pub(super) fn modern_result(&mut self, rid: &str, want: &Expected) -> bool {
        match self.calls.get_mut(rid) {
            Some(call) => {
                if !call.ended && call.expected.is_none() {
                    call.expected = Some(want.clone());
                }
                true
            }
            None => false,
        }
    }

    /// The tool process's connection ended: its calls and their states with it.
    pub(super) fn modern_tool_ended(&mut self) {
        for call in self.calls.values_mut() {
            call.ended = true;
            call.inputs.clear();
        }
    }

    /// The response `msg` to `req` (id `k`, already taken out of the requests in flight).
    /// Returns whether it is an InputRequiredResult (then there is no result to compare).
    pub(super) fn modern_answered(&mut self, k: &(SessionName, String), req: &HostRequest, msg: &Value) -> bool {
        if !req.modern() {
            return false;
        }
        let id = &k.1;
        let result = msg.get("result");
        let kind = result.map(|r| r.get("resultType").and_then(Value::as_str));
        match kind {
            Some(None) => self.find(
                "BR-STATELESS-09",
                format!("the result of the modern {} (id {id}) carries no resultType", req.method),
            ),
            Some(Some("complete")) => {}
            Some(Some("input_required")) if req.method == "tools/call" => {}
            Some(Some(other)) => self.find(
                "BR-STATELESS-09",
                format!("the result of the modern {} (id {id}) has resultType {other:?}", req.method),
            ),
            None => {}
        }
        if req.method != "tools/call" {
            return false;
        }
        let presented = state_of(&req.params).map(str::to_owned);
        let rid = req.rid.clone();
        // A retry refused: the call keeps its result for the next one; nothing may have reached
        // the tool process for it.
        if result.is_none() {
            if let Some(rid) = &rid
                && let Some(want) = self.results.remove(k)
                && let Some(call) = self.calls.get_mut(rid)
            {
                call.expected.get_or_insert(want);
            }
            let refused = msg.pointer("/error/code").and_then(Value::as_i64) == Some(-32602);
            let of = presented.as_deref().and_then(|s| self.states.get(s)).map(|s| s.rid.clone());
            if let Some(call) = of.and_then(|r| self.calls.get_mut(&r)).filter(|_| refused && req.is_retry()) {
                call.refused = true;
            }
            return false;
        }
        if req.is_retry() {
            self.accepted(id, presented.as_deref(), req.params.get("inputResponses"));
        }
        let irr = kind == Some(Some("input_required"));
        let Some(rid) = rid.filter(|r| self.calls.contains_key(r)) else {
            if irr {
                self.find(
                    "BR-STATELESS-17",
                    format!("an InputRequiredResult answers tools/call {id}, which is attached to no call the bridge forwarded"),
                );
            }
            return irr;
        };
        let call = self.calls.get_mut(&rid).expect("checked above");
        if !irr {
            call.ended = true;
            call.parked = false;
            return false;
        }
        let listed = result.and_then(|r| r.get("inputRequests")).and_then(Value::as_object).map_or(0, |m| m.len());
        let outstanding = call.inputs.len();
        call.parked = true;
        call.round += 1;
        let round = call.round;
        if let Some(m) = result.and_then(|r| r.get("inputRequests")).and_then(Value::as_object) {
            call.keys.insert(round, m.keys().cloned().collect());
        }
        if let Some(want) = self.results.remove(k) {
            call.expected.get_or_insert(want);
        }
        if listed == 0 || listed > outstanding {
            self.find(
                "BR-STATELESS-17",
                format!(
                    "the InputRequiredResult of tools/call {id} lists {listed} input request(s) where the call has {outstanding} outstanding"
                ),
            );
        }
        if let Some(s) = result.and_then(|r| r.get("requestState")).and_then(Value::as_str) {
            self.states.insert(s.to_owned(), IssuedState { rid, round, consumed: false });
        }
        true
    }

    /// A retry (id `id`) presenting `state` was accepted (answered with a result).
    fn accepted(&mut self, id: &str, state: Option<&str>, responses: Option<&Value>) {
        let Some(state) = state else {
            self.find(
                "BR-STATELESS-22",
                format!("the retry (id {id}) carries inputResponses without requestState and was accepted"),
            );
            return;
        };
        let Some(s) = self.states.get_mut(state) else {
            self.find(
                "BR-STATELESS-22",
                format!("the retry (id {id}) presents a requestState the bridge never issued and was accepted"),
            );
            return;
        };
        let why = if s.consumed {
            Some("was already consumed by an accepted retry")
        } else {
            match self.calls.get(&s.rid) {
                Some(c) if c.round > s.round => Some("belongs to an earlier round"),
                Some(c) if c.ended => Some("belongs to a call that ended"),
                _ => None,
            }
        };
        s.consumed = true;
        let (rid, round) = (s.rid.clone(), s.round);
        if let Some(c) = self.calls.get_mut(&rid) {
            c.parked = false;
            let keys = c.keys.get(&round);
            let carried = responses
                .and_then(Value::as_object)
                .map_or(0, |m| m.keys().filter(|k| keys.is_some_and(|ks| ks.contains(*k))).count());
            c.answers_carried += carried;
        }
        if let Some(why) = why {
            self.find("BR-STATELESS-22", format!("the retry (id {id}) was accepted, but its requestState {why}"));
        }
    }

    /// A notification tagged with a subscriptionId reached `session`: an open listen
    /// subscription of that id must be there (BR-STATELESS-31/32).
    pub(super) fn tagged(&mut self, session: &str, method: &str, sub: &Value) {
        let k = (session.to_owned(), key(sub));
        // Until the bridge shows it read the cancellation, what it sent before is in the pipe.
        let read = self.listen_cancels.get(&k).is_some_and(|(_, read)| *read);
        match self.requests.get(&k) {
            Some(r) if r.method == "subscriptions/listen" && r.cancelled && read => self.find(
                "BR-STATELESS-32",
                format!(
                    "{method} carries the subscriptionId {sub} of a listen subscription the host cancelled, after the bridge answered a later request"
                ),
            ),
            Some(r) if r.method == "subscriptions/listen" => {}
            _ => self.find(
                "BR-STATELESS-31",
                format!("{method} carries the subscriptionId {sub}, which names no open listen subscription"),
            ),
        }
    }

    /// A response came for a listen subscription the host had cancelled (BR-STATELESS-32).
    pub(super) fn listen_answered(&mut self, session: &str, req: &HostRequest, id: &Value) {
        for ((s, _), (after, read)) in &mut self.listen_cancels {
            if s == session && req.seq >= *after {
                *read = true;
            }
        }
        if req.method == "subscriptions/listen" && req.cancelled {
            self.find(
                "BR-STATELESS-32",
                format!("a response to the listen subscription {id} after the host cancelled it"),
            );
        }
    }

    /// The end: calls still parked were never cancelled (BR-STATELESS-26); no call's input
    /// requests got more answers than its accepted retries carried (BR-STATELESS-22/23).
    pub(super) fn modern_finish(&mut self) {
        let over: Vec<(String, usize, usize, bool)> = self
            .calls
            .iter()
            .filter(|(_, c)| c.answers_sent > c.answers_carried)
            .map(|(r, c)| (r.clone(), c.answers_sent, c.answers_carried, c.refused))
            .collect();
        for (rid, sent, carried, refused) in over {
            let (requirement, why) = if refused {
                ("BR-STATELESS-22", "a refused retry caused Envelope traffic")
            } else {
                ("BR-STATELESS-23", "one reply per input key an accepted retry answers")
            };
            self.find(
                requirement,
                format!(
                    "the bridge sent {sent} answer(s) to input requests of the call {rid:?}, its accepted retries carried {carried} ({why})"
                ),
            );
        }
        let parked: Vec<String> =
            self.calls.iter().filter(|(_, c)| c.parked && !c.ended).map(|(r, _)| r.clone()).collect();
        for rid in parked {
            self.find(
                "BR-STATELESS-26",
                format!("the call {rid:?} stayed parked without a retry accepted and was never cancelled (T_MRTR)"),
            );
        }
    }
}
