//! Multi round-trip requests (spec §26.4): a modern `tools/call` whose handler asks for sampling
//! or roots is answered with an InputRequiredResult while the call stays open at the tool
//! process; the host's retry, which carries the `requestState` and the answers, finds the call
//! again and is attached to it.
//!
//! - [`StateKey`]: the `requestState` itself, minted and verified with HMAC-SHA-256 under a key
//!   the shell draws at random when the bridge starts (BR-STATELESS-20…22);
//! - [`Mrtr`]: what a modern call keeps across rounds: its handle, round, input requests and
//!   whether it is parked;
//! - the [`Core`] methods: attribution to the single call owner (BR-SAMPLING-09), parking
//!   (BR-STATELESS-17…19), the retry (BR-STATELESS-22…25), the parked call's result and its end
//!   after `T_MRTR` (BR-STATELESS-26/27).

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::{Core, Envelope, Event, HostError, OpId, Owner, SessionId, pb, shapes};
use crate::fault::{self, Fault};

type HmacSha256 = Hmac<Sha256>;

/// The prefix of every state this bridge issues (format 1).
const PREFIX: &str = "r1.";
const PAYLOAD_LEN: usize = 1 + 8 + 8 + 16 + 4 + 8 + 16;
const TAG_LEN: usize = 16;

/// What a state binds a retry to (BR-STATELESS-21): the bridge process (through the key and an
/// id derived from it), the tool process connection, the call's handle, the round, the expiry,
/// and the method, tool name and arguments (a digest of their canonical form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFacts {
    pub generation: u64,
    pub handle: [u8; 16],
    pub round: u32,
    /// Milliseconds since the core's epoch (its first state).
    pub expiry_ms: u64,
    pub digest: [u8; 16],
}

/// Why a `requestState` is refused (-32602, BR-STATELESS-22); the text says which check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadState {
    #[error("requestState is not one this bridge issued (malformed)")]
    Malformed,
    #[error("requestState does not verify: it was altered, or issued by another bridge process")]
    Forged,
    #[error("requestState has expired (it lives T_MRTR after it was issued)")]
    Expired,
    #[error("requestState was issued for another tool or other arguments")]
    OtherCall,
    #[error("requestState belongs to a call that has ended (cancelled, timed out, forgotten or its tool process lost)")]
    CallEnded,
    #[error("requestState was already used, or belongs to an earlier round")]
    Consumed,
    #[error("inputResponses needs a requestState")]
    ResponsesWithoutState,
    #[error("inputResponses[{key:?}] is not a well-formed {what} answer")]
    BadAnswer { key: String, what: &'static str },
}

/// The key of the bridge process's states: 256 random bits from the shell, never output.
#[derive(Clone)]
pub struct StateKey([u8; 32]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(…)")
    }
}

impl StateKey {
    pub fn new(bytes: [u8; 32]) -> StateKey {
        StateKey(bytes)
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The bridge process's id, derived from its key (64 bits).
    fn process_id(&self) -> [u8; 8] {
        self.mac(&[b"process"])[..8].try_into().expect("8 bytes")
    }

    /// The `n`-th call handle: 128 bits nobody without the key can predict.
    pub fn handle(&self, n: u64) -> [u8; 16] {
        self.mac(&[b"handle", &n.to_be_bytes()])[..16].try_into().expect("16 bytes")
    }

    /// A state for `facts`: `r1.` base64url(payload) `.` base64url(tag), 108 visible ASCII
    /// characters (BR-STATELESS-20).
    pub fn mint(&self, f: &StateFacts) -> String {
        let mut payload = Vec::with_capacity(PAYLOAD_LEN);
        payload.push(1u8);
        payload.extend_from_slice(&self.process_id());
        payload.extend_from_slice(&f.generation.to_be_bytes());
        payload.extend_from_slice(&f.handle);
        payload.extend_from_slice(&f.round.to_be_bytes());
        payload.extend_from_slice(&f.expiry_ms.to_be_bytes());
        payload.extend_from_slice(&f.digest);
        let tag = self.mac(&[PREFIX.as_bytes(), &payload]);
        let sep = state_separator();
        format!("{PREFIX}{}{sep}{}", B64.encode(&payload), B64.encode(&tag[..TAG_LEN]))
    }

    /// The facts of a state this key issued; the tag is compared in constant time.
    pub fn open(&self, state: &str) -> Result<StateFacts, BadState> {
        let rest = state.strip_prefix(PREFIX).ok_or(BadState::Malformed)?;
        let sep = state_separator();
        let (p, t) = rest.split_once(sep).ok_or(BadState::Malformed)?;
        let payload = B64.decode(p).map_err(|_| BadState::Malformed)?;
        let tag = B64.decode(t).map_err(|_| BadState::Malformed)?;
        if payload.len() != PAYLOAD_LEN || tag.len() != TAG_LEN || payload[0] != 1 {
            return Err(BadState::Malformed);
        }
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(PREFIX.as_bytes());
        m.update(&payload);
        m.verify_truncated_left(&tag).map_err(|_| BadState::Forged)?;
        // Base64 without padding can decode two texts to one payload: only the text we wrote
        // is ours ("differs in any character").
        if format!("{PREFIX}{}{sep}{}", B64.encode(&payload), B64.encode(&tag)) != state {
            return Err(BadState::Forged);
        }
        if payload[1..9] != self.process_id() {
            return Err(BadState::Forged);
        }
        let at = |from: usize, n: usize| &payload[from..from + n];
        Ok(StateFacts {
            generation: u64::from_be_bytes(at(9, 8).try_into().expect("8")),
            handle: at(17, 16).try_into().expect("16"),
            round: u32::from_be_bytes(at(33, 4).try_into().expect("4")),
            expiry_ms: u64::from_be_bytes(at(37, 8).try_into().expect("8")),
            digest: at(45, 16).try_into().expect("16"),
        })
    }
}

/// What separates a state's payload from its tag.
fn state_separator() -> char {
    if fault::on(Fault::BrStatelessStateSpace) { ' ' } else { '.' }
}

/// The digest that binds a state to `tools/call` of `name` with `arguments` (canonical JSON:
/// object members in byte order of their names, compact).
pub fn call_digest(name: &str, arguments: &Value) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"tools/call\0");
    h.update(name.as_bytes());
    h.update(b"\0");
    h.update(canonical(arguments).as_bytes());
    h.finalize()[..16].try_into().expect("16 bytes")
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let members: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k]))).collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// What a modern request declared that a call needs (its `_meta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModernCaps {
    pub sampling: bool,
    pub roots: bool,
    /// `io.modelcontextprotocol/logLevel` as a rank of the log levels (BR-LOG-08).
    pub log_level: Option<usize>,
}

/// A modern `tools/call`, new or a retry.
#[derive(Debug, Clone, PartialEq)]
pub struct ModernCall {
    pub name: String,
    pub arguments: Option<Value>,
    pub progress: Option<Value>,
    pub caps: ModernCaps,
    /// `requestState` and `inputResponses` of a retry.
    pub retry: Option<(String, Value)>,
}

/// An input request of the tool process, held for the host.
#[derive(Debug, Clone)]
pub(super) struct Input {
    /// Given when it is first listed in an InputRequiredResult, kept after (BR-STATELESS-18).
    key: Option<String>,
    rid: String,
    /// `sampling/createMessage` params, or `None` for `roots/list`.
    sampling: Option<Value>,
}

impl Input {
    fn request(&self) -> Value {
        match &self.sampling {
            Some(params) => json!({"method": "sampling/createMessage", "params": params}),
            None => json!({"method": "roots/list"}),
        }
    }

    /// The reply the tool process gets when the host will not answer.
    fn refusal(&self, why: &str) -> Envelope {
        match self.sampling {
            Some(_) => pb::SamplingResponse { error: why.to_owned(), ..Default::default() }.into(),
            None => pb::ListRootsResponse::default().into(),
        }
    }
}

/// A modern call's state across rounds.
#[derive(Debug)]
pub(super) struct Mrtr {
    handle: [u8; 16],
    generation: u64,
    pub(super) caps: ModernCaps,
    round: u32,
    keys_issued: u32,
    inputs: Vec<Input>,
    /// While parked: when `T_MRTR` runs out.
    pub(super) parked: Option<Instant>,
    digest: [u8; 16],
}

impl Mrtr {
    pub(super) fn is_parked(&self) -> bool {
        self.parked.is_some()
    }
}

/// The most input requests one call holds for the host at a time.
pub const MAX_INPUTS: usize = 64;

const TOO_MANY: &str = "too many input requests of this call wait for the MCP client";
const NO_CAP_SAMPLING: &str = "the MCP request attached to this call did not declare the sampling capability";
const HOST_GONE: &str = "the MCP client did not come back for this input request (T_MRTR)";
const CALL_ENDED: &str = "the call ended before the MCP client answered this input request";

impl Core {
    /// A fresh MRTR state for a modern call of `name` with `args` on connection `generation`.
    pub(super) fn new_mrtr(&mut self, generation: u64, name: &str, args: &Value, caps: ModernCaps) -> Box<Mrtr> {
        let handle = self.cfg.state_key.handle(self.handles_issued);
        self.handles_issued += 1;
        Box::new(Mrtr {
            handle,
            generation,
            caps,
            round: 0,
            keys_issued: 0,
            inputs: Vec::new(),
            parked: None,
            digest: call_digest(name, args),
        })
    }

    /// The single call owner, if there is exactly one: every legacy session with a call at the
    /// tool process, and every modern call on its own, attached or parked (BR-SAMPLING-09).
    pub(super) fn sole_owner(&self) -> Option<Owner> {
        let sessions = self.calling.iter().filter(|(_, n)| **n > 0).map(|(id, _)| Owner::Session(*id));
        let calls = self.modern_calls().map(Owner::Call);
        let mut all = sessions.chain(calls);
        let only = all.next()?;
        all.next().is_none().then_some(only)
    }

    /// An input request (sampling params, or `None` for roots) attributed to the modern call
    /// `op`: held and asked for through an InputRequiredResult when the request that would
    /// carry it declares the capability (BR-STATELESS-17, BR-SAMPLING-10, BR-ROOTS-05), else
    /// refused to the tool process at once while the call goes on.
    pub(super) fn input_for_call(&mut self, now: Instant, op: OpId, rid: String, sampling: Option<Value>) {
        let Some(m) = self.mrtr_mut(op) else { return };
        let input = Input { key: None, rid, sampling };
        // A tool process that keeps asking while the host has not answered is refused beyond a
        // bound: what it sends never decides how much the bridge holds.
        if m.inputs.len() >= MAX_INPUTS {
            let envelope = input.refusal(TOO_MANY);
            return self.transmit.push_back(envelope_for(input.rid, envelope));
        }
        if m.is_parked() {
            // The capability is that of the retry accepted next.
            m.inputs.push(input);
            return;
        }
        let declared = if input.sampling.is_some() { m.caps.sampling } else { m.caps.roots };
        if !declared && input.sampling.is_some() && crate::fault::on(crate::fault::Fault::BrSamplingPendingUnanswered) {
            return; // never answered: the fault
        }
        if !declared {
            if fault::on(Fault::BrStatelessMissingCapability32021) {
                let session = self.ops.get(&op).map(|o| o.session).unwrap_or_default();
                let result = Err(HostError::Internal(NO_CAP_SAMPLING.into()));
                self.events.push_back(Event::Answer { op, session, result });
            }
            let envelope = input.refusal(NO_CAP_SAMPLING);
            return self.transmit.push_back(envelope_for(input.rid, envelope));
        }
        m.inputs.push(input);
        if fault::on(Fault::BrStatelessInputNotAsked) {
            return;
        }
        self.park(now, op);
    }

    /// Answers the attached request of `op` with an InputRequiredResult listing every
    /// outstanding input request, and parks the call until a retry or `T_MRTR`.
    fn park(&mut self, now: Instant, op: OpId) {
        let t_mrtr = self.cfg.call_timeout;
        let epoch = *self.epoch.get_or_insert(now);
        let Some(o) = self.ops.get_mut(&op) else { return };
        let session = o.session;
        let Some(m) = o.mrtr_mut() else { return };
        m.round += 1;
        let expiry = now + t_mrtr;
        m.parked = Some(expiry);
        let mut requests = Map::new();
        for input in &mut m.inputs {
            if fault::on(Fault::BrStatelessKeyPerRound) {
                input.key = None;
            }
            let request = match &input.sampling {
                Some(params) if fault::on(Fault::BrStatelessInputBareParams) => params.clone(),
                _ => input.request(),
            };
            let key = input.key.get_or_insert_with(|| {
                m.keys_issued += 1;
                let kind = if input.sampling.is_some() { "sampling" } else { "roots" };
                format!("{kind}-{}", m.keys_issued)
            });
            requests.insert(key.clone(), request);
        }
        let facts = StateFacts {
            generation: m.generation,
            handle: m.handle,
            round: m.round,
            expiry_ms: (expiry - epoch).as_millis() as u64,
            digest: m.digest,
        };
        let state = self.cfg.state_key.mint(&facts);
        // Time parked does not count against CALL_TIMEOUT (BR-STATELESS-28).
        if let Some(rid) = &o.rid
            && let Some(p) = self.pending.get_mut(rid)
        {
            p.parked = true;
        }
        let result = json!({"resultType": "input_required", "inputRequests": requests, "requestState": state});
        self.events.push_back(Event::Answer { op, session, result: Ok(result) });
    }

    /// A retry of a parked modern call (BR-STATELESS-22…25): verified, its answers sent to
    /// the tool process under their rids, and the call attached to the new operation, which
    /// gets the call's result, a new InputRequiredResult, or waits for the tool process.
    pub(super) fn retry(
        &mut self,
        now: Instant,
        session: SessionId,
        call: ModernCall,
        args: &Value,
        state: &str,
        responses: &Value,
    ) -> Result<OpId, HostError> {
        let bad = |e: BadState| HostError::InvalidParams(e.to_string());
        let facts = self.cfg.state_key.open(state).map_err(bad)?;
        let epoch = self.epoch.ok_or(bad(BadState::Forged))?;
        if now > epoch + Duration::from_millis(facts.expiry_ms) {
            return Err(bad(BadState::Expired));
        }
        if facts.digest != call_digest(&call.name, args) && !fault::on(Fault::BrStatelessStateOtherArgs) {
            if fault::on(Fault::BrMrtrRefusedRetryForwards) {
                self.forward_answers(facts.handle, responses);
            }
            return Err(bad(BadState::OtherCall));
        }
        let old = self.handles.get(&facts.handle).copied().ok_or(bad(BadState::CallEnded))?;
        if fault::on(Fault::BrStatelessRetrySameSession) && self.ops.get(&old).map(|o| o.session) != Some(session) {
            return Err(bad(BadState::CallEnded));
        }
        let current = self.conn.as_ref().map(|c| c.generation);
        let m = self.mrtr_mut(old).ok_or(bad(BadState::CallEnded))?;
        if m.generation != facts.generation || current != Some(facts.generation) {
            return Err(bad(BadState::CallEnded));
        }
        if (m.round != facts.round || !m.is_parked()) && !fault::on(Fault::BrStatelessStateReusable) {
            return Err(bad(BadState::Consumed));
        }
        // BR-STATELESS-25: the answers for this round's keys must read; others are ignored.
        let answers = responses.as_object();
        for input in m.inputs.iter().filter(|i| i.key.is_some()) {
            let key = input.key.as_deref().unwrap_or_default();
            let Some(a) = answers.and_then(|r| r.get(key)) else { continue };
            let ok = if input.sampling.is_some() { sampling_answer_reads(a) } else { roots_answer_reads(a) };
            let ok = ok || fault::on(Fault::BrStatelessAnswerUnchecked);
            if !ok {
                let what = if input.sampling.is_some() { "sampling/createMessage" } else { "roots/list" };
                return Err(bad(BadState::BadAnswer { key: key.to_owned(), what }));
            }
        }
        // Accepted: the state is consumed (the call leaves its round), the answers go out.
        m.parked = None;
        m.caps = call.caps;
        let mut replies = Vec::new();
        let mut kept = Vec::new();
        for input in std::mem::take(&mut m.inputs) {
            let answer = input.key.as_deref().and_then(|k| answers.and_then(|r| r.get(k)));
            match (answer, &input.sampling, input.key.is_some()) {
                (Some(a), Some(_), _) => replies.push(envelope_for(input.rid, shapes::sampling_response(a).into())),
                (Some(a), None, _) => {
                    let mut roots = shapes::roots_response(a);
                    if crate::fault::on(crate::fault::Fault::BrRootsModernNameMissing) {
                        roots.roots.iter_mut().for_each(|r| r.name.clear());
                    }
                    replies.push(envelope_for(input.rid, roots.into()))
                }
                // Arrived while parked: the capability is this retry's (BR-SAMPLING-09).
                (None, s, false) if !(if s.is_some() { call.caps.sampling } else { call.caps.roots }) => {
                    replies.push(envelope_for(input.rid.clone(), input.refusal(NO_CAP_SAMPLING)))
                }
                (None, _, _) => kept.push(input),
            }
        }
        m.inputs = kept;
        let more = !m.inputs.is_empty() && !fault::on(Fault::BrStatelessUnansweredWaits);
        if fault::on(Fault::BrStatelessAnswersNotSent) {
            replies.clear();
        }
        self.transmit.extend(replies);
        let new = self.rekey(now, old, session, call.progress);
        let done = matches!(self.ops.get(&new), Some(o) if o.has_result());
        if done {
            // BR-STATELESS-27: the result kept while parked answers this retry.
            self.advance(now, new);
        } else if more {
            // BR-STATELESS-24: what is still unanswered, under the keys it had.
            self.park(now, new);
        }
        Ok(new)
    }

    /// The modern call `op`'s result arrived while it was parked: its input requests are
    /// refused, and the result waits for the next retry (BR-STATELESS-27).
    pub(super) fn refuse_inputs(&mut self, op: OpId, why: &str) {
        let Some(m) = self.mrtr_mut(op) else { return };
        let inputs = std::mem::take(&mut m.inputs);
        for input in inputs {
            let e = input.refusal(why);
            self.transmit.push_back(envelope_for(input.rid, e));
        }
    }

    /// The modern call `op` ends (cancelled, timed out, lost): its input requests are refused
    /// and its states die with it (BR-CANCEL-07, BR-STATELESS-22).
    pub(super) fn end_mrtr(&mut self, op: OpId) {
        self.refuse_inputs(op, CALL_ENDED);
        if let Some(handle) = self.mrtr_mut(op).map(|m| m.handle) {
            self.handles.remove(&handle);
        }
    }

    /// The fault `br.mrtr.refused-retry-forwards`: the answers of a retry go to the tool
    /// process before the retry is refused.
    fn forward_answers(&mut self, handle: [u8; 16], responses: &Value) {
        let Some(op) = self.handles.get(&handle).copied() else { return };
        let Some(m) = self.mrtr_of_op(op) else { return };
        let mut replies = Vec::new();
        for input in &m.inputs {
            let Some(a) = input.key.as_deref().and_then(|k| responses.get(k)) else { continue };
            let e = if input.sampling.is_some() {
                shapes::sampling_response(a).into()
            } else {
                shapes::roots_response(a).into()
            };
            replies.push(envelope_for(input.rid.clone(), e));
        }
        self.transmit.extend(replies);
    }

    /// Parked calls whose `T_MRTR` ran out: cancelled at the tool process, input requests
    /// refused, forgotten (BR-STATELESS-26).
    pub(super) fn mrtr_expired(&mut self, now: Instant) {
        if fault::on(Fault::BrMrtrNeverExpires) {
            return;
        }
        let mut due: Vec<OpId> = self
            .handles
            .values()
            .copied()
            .filter(|op| self.mrtr_of_op(*op).and_then(|m| m.parked).is_some_and(|t| t <= now))
            .collect();
        due.sort();
        for op in due {
            self.refuse_inputs(op, HOST_GONE);
            self.forget_call(op, !fault::on(Fault::BrStatelessAbandonedNotCancelled));
        }
    }

    /// When the next parked call's `T_MRTR` runs out.
    pub(super) fn mrtr_deadline(&self) -> Option<Instant> {
        if fault::on(Fault::BrMrtrNeverExpires) {
            return None;
        }
        self.handles.values().filter_map(|op| self.mrtr_of_op(*op).and_then(|m| m.parked)).min()
    }

    /// A LogMessage (#18): to every legacy session, and to the modern request attached to the
    /// single call owner when its logLevel admits the entry (BR-LOG-08); one that reaches
    /// neither goes to the bridge's stderr (BR-LOG-09).
    pub(super) fn log(&mut self, level: &'static str, logger: Option<String>, data: Value) {
        let call = match self.sole_owner() {
            Some(Owner::Call(op)) => self.ops.get(&op).and_then(|o| {
                let m = o.mrtr()?;
                let admits = m.caps.log_level.is_some_and(|r| {
                    super::shapes::level_rank(level) >= r
                        || crate::fault::on(crate::fault::Fault::BrLogModernLevelIgnored)
                });
                (admits && !m.is_parked()).then_some(o.session)
            }),
            _ => None,
        };
        if call.is_none()
            && !self.sessions.values().any(|c| c.legacy)
            && !crate::fault::on(crate::fault::Fault::BrLogNotToStderr)
        {
            let logger = logger.as_deref().map(|l| format!(" {l}")).unwrap_or_default();
            self.events.push_back(Event::Diag(format!("log from the tool process ({level}{logger}): {data}")));
        }
        self.events.push_back(Event::Log { level, logger, data, call });
    }

    /// The modern calls at the tool process or holding a result for their next retry.
    fn modern_calls(&self) -> impl Iterator<Item = OpId> + '_ {
        self.handles.values().copied()
    }

    fn mrtr_mut(&mut self, op: OpId) -> Option<&mut Mrtr> {
        self.ops.get_mut(&op).and_then(|o| o.mrtr_mut())
    }

    fn mrtr_of_op(&self, op: OpId) -> Option<&Mrtr> {
        self.ops.get(&op).and_then(|o| o.mrtr())
    }

    /// Registers `op`'s handle, so that a retry finds it.
    pub(super) fn register_mrtr(&mut self, op: OpId) {
        if let Some(h) = self.mrtr_of_op(op).map(|m| m.handle) {
            self.handles.insert(h, op);
        }
    }
}

fn envelope_for(rid: String, envelope: Envelope) -> Envelope {
    use crate::envelopes::EnvelopeExt as _;
    envelope.with_rid(rid)
}

/// A CreateMessageResult as BR-STATELESS-25 reads it: a string `role`, a string `model`, and a
/// `content` that is an object or an array of objects, each with a string `type`.
pub fn sampling_answer_reads(a: &Value) -> bool {
    let block = |b: &Value| b.get("type").is_some_and(Value::is_string);
    a.get("role").is_some_and(Value::is_string)
        && a.get("model").is_some_and(Value::is_string)
        && match a.get("content") {
            Some(b @ Value::Object(_)) => block(b),
            Some(Value::Array(items)) => items.iter().all(|b| b.is_object() && block(b)),
            _ => false,
        }
}

/// A ListRootsResult as BR-STATELESS-25 reads it: `roots`, an array of objects with a string
/// `uri`.
pub fn roots_answer_reads(a: &Value) -> bool {
    a.get("roots")
        .and_then(Value::as_array)
        .is_some_and(|roots| roots.iter().all(|r| r.get("uri").is_some_and(Value::is_string)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> StateFacts {
        StateFacts { generation: 1, handle: [7; 16], round: 1, expiry_ms: 5000, digest: [9; 16] }
    }

    #[test]
    fn a_minted_state_opens_to_its_facts_and_is_visible_ascii_of_at_most_1024_characters() {
        let key = StateKey::new([3; 32]);
        let s = key.mint(&facts());
        assert!(s.len() <= 1024 && s.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{s}");
        assert_eq!(key.open(&s), Ok(facts()));
    }

    #[test]
    fn a_state_changed_in_any_character_does_not_verify() {
        let key = StateKey::new([3; 32]);
        let s = key.mint(&facts());
        for i in 0..s.len() {
            let mut b = s.clone().into_bytes();
            b[i] = if b[i] == b'A' { b'B' } else { b'A' };
            let t = String::from_utf8(b).unwrap();
            assert!(key.open(&t).is_err(), "character {i} changed and still verifies: {t}");
        }
        assert!(key.open(&format!("{s}A")).is_err());
        assert!(key.open(&s[..s.len() - 1]).is_err());
    }

    #[test]
    fn a_state_of_another_bridge_process_does_not_verify() {
        let s = StateKey::new([3; 32]).mint(&facts());
        assert_eq!(StateKey::new([4; 32]).open(&s), Err(BadState::Forged));
    }

    #[test]
    fn the_digest_ignores_member_order_and_binds_name_and_arguments() {
        let a = call_digest("t", &json!({"a": 1, "b": [1, {"y": 2, "x": 1}]}));
        assert_eq!(a, call_digest("t", &json!({"b": [1, {"x": 1, "y": 2}], "a": 1})));
        assert_ne!(a, call_digest("u", &json!({"a": 1, "b": [1, {"x": 1, "y": 2}]})));
        assert_ne!(a, call_digest("t", &json!({"a": 2, "b": [1, {"x": 1, "y": 2}]})));
    }

    #[test]
    fn answers_read_as_the_schema_says() {
        assert!(sampling_answer_reads(&json!({"role": "assistant", "model": "m", "content": {"type": "text"}})));
        assert!(sampling_answer_reads(&json!({"role": "assistant", "model": "m", "content": [{"type": "text"}]})));
        assert!(!sampling_answer_reads(&json!({"role": "assistant", "content": {"type": "text"}})));
        assert!(!sampling_answer_reads(&json!({"role": "assistant", "model": "m", "content": [1]})));
        assert!(roots_answer_reads(&json!({"roots": [{"uri": "file:///a"}]})));
        assert!(!roots_answer_reads(&json!({"roots": [{"name": "a"}]})));
    }
}
