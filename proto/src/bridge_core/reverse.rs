//! The tool process's reverse requests: sampling (§17) and roots (§18), routed to the session
//! whose call is in flight (BR-SAMPLING-02) and answered under their rid exactly once
//! (BR-SAMPLING-01, BR-ROOTS-01), with an error (sampling) or an empty list (roots) when no
//! session can answer or the host does not within the call timeout.

use serde_json::json;

use super::shapes::{roots_response, sampling_response};
use super::{Core, Envelope, EnvelopeExt, Event, Instant, Owner, Reverse, Value, pb};
use crate::fault::{self, Fault};

const NO_SAMPLER: &str = "no single MCP session with a call in flight to ask for sampling";
const NO_SAMPLING_CAP: &str = "the MCP client did not declare the sampling capability";
const SAMPLING_LATE: &str = "the MCP client did not answer sampling/createMessage in time";

fn sampling_error(e: &str) -> pb::SamplingResponse {
    pb::SamplingResponse { error: e.to_owned(), ..Default::default() }
}

/// Why a host's answer to a reverse request (sampling, roots) did not come: the tool process
/// is told so (a SamplingResponse error, an empty root list).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoAnswer {
    /// The host's session ended first.
    #[error("the session ended")]
    SessionEnded,
    /// Nothing within the call timeout (BR-SAMPLING-07).
    #[error("no answer in time")]
    Late,
    /// The host answered with an error, or an answer that does not read.
    #[error("{0}")]
    Host(String),
}

/// A SamplingRequest whose messages_json is not a JSON array (BR-SAMPLING-05).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("messages_json is not a JSON array")]
pub struct MessagesNotArray;

/// A SamplingRequest as `sampling/createMessage` params: string contents become text blocks,
/// `maxTokens` defaults to 1024.
pub fn sampling_params(req: &pb::SamplingRequest) -> Result<Value, MessagesNotArray> {
    let messages = match serde_json::from_str::<Value>(&req.messages_json) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .map(|mut m| {
                if let Some(Value::String(s)) = m.get("content")
                    && !fault::on(Fault::BrSamplingStringContentKept)
                {
                    m["content"] = json!({"type": "text", "text": s});
                }
                m
            })
            .collect::<Vec<_>>(),
        _ => return Err(MessagesNotArray),
    };
    let mut params = json!({
        "messages": messages,
        "maxTokens": if req.max_tokens > 0 || fault::on(Fault::BrSamplingZeroMaxTokens) { req.max_tokens } else { 1024 },
    });
    if !req.system_prompt.is_empty() && !fault::on(Fault::BrSamplingSystemPromptDropped) {
        params["systemPrompt"] = Value::String(req.system_prompt.clone());
    }
    if let Ok(prefs @ Value::Object(_)) = serde_json::from_str::<Value>(&req.model_preferences_json)
        && !fault::on(Fault::BrSamplingModelPreferencesDropped)
    {
        params["modelPreferences"] = prefs;
    }
    Ok(params)
}

impl Core {
    fn reply_under(&mut self, rid: String, envelope: Envelope) {
        self.transmit.push_back(envelope.with_rid(rid));
    }

    pub(super) fn sampling(&mut self, now: Instant, rid: String, req: &pb::SamplingRequest) {
        let owner = match self.sole_owner() {
            // The bugs: a session chosen among several, or among those that declared sampling.
            None if fault::on(Fault::BrSamplingPicksFirst) => self.calling.keys().min().copied().map(Owner::Session),
            _ if fault::on(Fault::BrSamplingCapableOnly) => {
                let capable = |s: &&super::SessionId| self.sessions.get(*s).is_some_and(|c| c.sampling);
                let mut them = self.calling.iter().filter(|(_, n)| **n > 0).map(|(s, _)| s).filter(capable);
                match (them.next(), them.next()) {
                    (Some(s), None) => Some(Owner::Session(*s)),
                    _ => None,
                }
            }
            owner => owner,
        };
        let session = match owner {
            None => return self.reply_under(rid, sampling_error(NO_SAMPLER).into()),
            // BR-SAMPLING-10: a modern call's input request goes in an InputRequiredResult.
            Some(Owner::Call(op)) => {
                return match sampling_params(req) {
                    Err(e) => self.reply_under(rid, sampling_error(&e.to_string()).into()),
                    Ok(params) => self.input_for_call(now, op, rid, Some(params)),
                };
            }
            Some(Owner::Session(s)) => s,
        };
        if !self.sessions.get(&session).is_some_and(|c| c.sampling) && !fault::on(Fault::BrSamplingCapabilityUnchecked)
        {
            return self.reply_under(rid, sampling_error(NO_SAMPLING_CAP).into());
        }
        match sampling_params(req) {
            Err(e) => self.reply_under(rid, sampling_error(&e.to_string()).into()),
            Ok(params) => {
                let mut deadline = now + self.cfg.call_timeout;
                if fault::on(Fault::BrSamplingUnbounded) {
                    deadline = now + std::time::Duration::from_secs(365 * 24 * 3600);
                }
                self.reverse.insert(rid.clone(), Reverse { sampling: true, deadline });
                self.events.push_back(Event::Sample { session, rid, params });
            }
        }
    }

    pub(super) fn roots(&mut self, now: Instant, rid: String) {
        let session = match self.sole_owner() {
            // BR-ROOTS-05
            Some(Owner::Call(op)) => return self.input_for_call(now, op, rid, None),
            Some(Owner::Session(s)) => Some(s),
            None => None,
        };
        let session = session
            .filter(|s| self.sessions.get(s).is_some_and(|c| c.roots) || fault::on(Fault::BrRootsCapabilityUnchecked));
        let Some(session) = session else {
            return self.reply_under(rid, pb::ListRootsResponse::default().into());
        };
        let deadline = now + self.cfg.call_timeout;
        self.reverse.insert(rid.clone(), Reverse { sampling: false, deadline });
        self.events.push_back(Event::ListRoots { session, rid });
    }

    /// The host's answer to [`Event::Sample`]: the result, or why there is none. Too late (or
    /// for a request of an ended connection) it is dropped.
    pub fn handle_sample_answer(&mut self, rid: &str, result: Result<Value, NoAnswer>) {
        if self.reverse.remove(rid).is_none() && !(result.is_ok() && fault::on(Fault::BrMcpLateAnswerPassedOn)) {
            return;
        }
        let response = match result {
            Ok(r) => sampling_response(&r),
            Err(_) if fault::on(Fault::BrSamplingHostErrorEmpty) => pb::SamplingResponse::default(),
            Err(e) => sampling_error(&e.to_string()),
        };
        if fault::on(Fault::BrConcurSamplingAnsweredTwice) {
            self.reply_under(rid.to_owned(), response.clone().into());
        }
        self.reply_under(rid.to_owned(), response.into());
    }

    /// The host's answer to [`Event::ListRoots`]; a failure becomes an empty list.
    pub fn handle_roots_answer(&mut self, rid: &str, result: Result<Value, NoAnswer>) {
        if self.reverse.remove(rid).is_none() {
            return;
        }
        let mut response = result.map(|r| roots_response(&r)).unwrap_or_default();
        if fault::on(Fault::BrRootsNameDropped) {
            response.roots.iter_mut().for_each(|r| r.name.clear());
        }
        self.reply_under(rid.to_owned(), response.into());
    }

    pub(super) fn reverse_timed_out(&mut self, rid: &str) {
        let Some(r) = self.reverse.remove(rid) else { return };
        let envelope =
            if r.sampling { sampling_error(SAMPLING_LATE).into() } else { pb::ListRootsResponse::default().into() };
        self.reply_under(rid.to_owned(), envelope);
    }
}
