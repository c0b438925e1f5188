//! What the tool process sends, dispatched by message type, then by rid: registrations and
//! markers of a handshake, tool-list control, progress, logs, resource updates, reverse
//! requests, sideband transfers and streams, and the replies to our requests.

use super::{Core, Envelope, EnvelopeExt, Event, Instant, ListKind, Msg, NoReply, ToolOp, pb, shapes};
use crate::envelopes as env;
use crate::fault::{self, Fault};
use crate::frame::Sideband;
use crate::sideband::StreamEvent;

impl Core {
    fn current(&self, generation: u64) -> bool {
        self.conn.as_ref().is_some_and(|c| c.generation == generation)
    }

    /// One Envelope from the connection `generation` (frames of an ended connection are
    /// ignored).
    pub fn handle_envelope(&mut self, now: Instant, generation: u64, envelope: Envelope) {
        if !self.current(generation) {
            return;
        }
        let rid = envelope.request_id.clone();
        let Some(msg) = envelope.msg else { return };
        match msg {
            Msg::RegisterMiddleware(r) => {
                // BR-HANDSHAKE-04: acknowledge every registration, in arrival order.
                let serving = self.conn.as_ref().is_some_and(|c| matches!(c.phase, super::handshake::Phase::Serving));
                if let Some(c) = self.conn.as_mut() {
                    c.middleware.push((r.name, r.priority));
                }
                if !(serving && fault::on(Fault::BrHandshakeLateMiddlewareUnanswered)) {
                    self.transmit.push_back(env::register_middleware_response(true));
                }
                self.burst_activity(now);
            }
            // The handshake-complete marker (a failed one means nothing).
            Msg::ReloadResponse(r) if rid.is_empty() && r.success => self.burst_marker(now),
            Msg::ReloadResponse(_) if rid.is_empty() => {}
            m @ (Msg::StreamHeader(_) | Msg::StreamChunk(_)) => {
                let Some(c) = self.conn.as_mut() else { return };
                match c.streams.handle(&Envelope { request_id: rid, msg: Some(m), ..Default::default() }) {
                    Some(StreamEvent::Complete { rid, field_name, data, .. }) => {
                        let text = String::from_utf8_lossy(&data).into_owned();
                        let mut r = pb::CallToolResponse::default();
                        if field_name == "structured_content_json" && !fault::on(Fault::BrSidebandFieldIgnored) {
                            r.structured_content_json = text;
                        } else {
                            r.result_json = text;
                        }
                        self.resolve(now, &rid, Ok(Msg::CallResult(r)));
                    }
                    Some(StreamEvent::Failed { rid, error, .. }) => {
                        self.resolve(now, &rid, Err(NoReply::Stream(error.to_string())));
                    }
                    Some(StreamEvent::Orphan { violation, .. }) => self.diag(violation.to_string()),
                    Some(StreamEvent::Progress { rid }) if fault::on(Fault::BrStreamChunksExtendDeadline) => {
                        let timeout = self.cfg.call_timeout;
                        if let Some(p) = self.pending.get_mut(&rid) {
                            p.deadline = now + timeout;
                        }
                    }
                    _ => {}
                }
            }
            m @ (Msg::EnableTools(_)
            | Msg::DisableTools(_)
            | Msg::SetAllowed(_)
            | Msg::SetBlocked(_)
            | Msg::GetActiveTools(_)
            | Msg::Batch(_)) => {
                let op = ToolOp::of(&m).expect("a control message");
                self.control(&rid, &op);
            }
            Msg::Progress(p) => self.route_progress(p),
            Msg::Log(l) => self.log(
                shapes::log_level(&l.level),
                (!l.logger.is_empty() || fault::on(Fault::BrLogEmptyLogger)).then_some(l.logger),
                shapes::log_data(&l.data_json),
            ),
            Msg::ResourceChanged(r) => {
                if fault::on(Fault::BrResourceChangedAsReply)
                    && let Some(rid) = self.pending.keys().min().cloned()
                {
                    self.resolve(now, &rid, Ok(Msg::ResourceChanged(r.clone())));
                }
                self.events.push_back(Event::ResourceUpdated(r.uri))
            }
            m @ (Msg::SamplingRequest(_) | Msg::ListRootsRequest(_))
                if fault::on(Fault::BrConcurReverseAsReply) && self.pending.contains_key(&rid) =>
            {
                self.resolve(now, &rid, Ok(m));
            }
            // BR-SAMPLING-01, BR-ROOTS-01: an empty rid is ignored.
            Msg::SamplingRequest(r) if !rid.is_empty() => self.sampling(now, rid, &r),
            Msg::ListRootsRequest(_) if !rid.is_empty() => self.roots(now, rid),
            Msg::SamplingRequest(_) if fault::on(Fault::BrSamplingEmptyRidAnswered) => {
                let e =
                    pb::SamplingResponse { error: "a SamplingRequest needs a request id".into(), ..Default::default() };
                self.transmit.push_back(e.into());
            }
            Msg::ListRootsRequest(_) if fault::on(Fault::BrRootsEmptyRidAnswered) => {
                self.transmit.push_back(pb::ListRootsResponse::default().into());
            }
            Msg::SamplingRequest(_) | Msg::ListRootsRequest(_) => {}
            // BR-SIDEBAND-02: the payload that follows is matched by RawHeader.request_id in
            // `handle_sideband`; the Envelope rid of the RawHeader frame means nothing.
            Msg::RawHeader(_) => {
                if fault::on(Fault::BrSidebandEnvelopeRid)
                    && let Some(c) = self.conn.as_mut()
                {
                    c.raw_rid = rid;
                }
            }
            // BR-TASK-01: ignored.
            m @ Msg::CreateTask(_) if !rid.is_empty() && fault::on(Fault::BrTaskCreateFailsCall) => {
                self.resolve(now, &rid, Ok(m));
            }
            Msg::CreateTask(t) if !rid.is_empty() && fault::on(Fault::BrTaskPollsStatus) => {
                self.transmit.push_back(pb::TaskStatusRequest { task_id: t.task_id }.into());
            }
            Msg::CreateTask(_) | Msg::TaskStatusResponse(_) => {}
            // The burst of a reload by ReloadRequest (BR-RELOAD-02): the new tool list. Outside
            // a reload, a tool list with empty rid is ignored (BR-HANDSHAKE-14).
            Msg::ToolList(t) if rid.is_empty() => self.burst_tool_list(now, &t),
            // Replies (and wrong-typed messages under a pending rid, BR-CALL-16) go to the
            // waiter; anything else is discarded (BR-CALL-17, BR-FRAME-05).
            other
                if fault::on(Fault::BrCallWrongTypeIgnored)
                    && !is_op_reply(&other)
                    && self.pending.get(&rid).is_some_and(|p| matches!(p.what, super::Waiting::Op(_))) => {}
            other if !rid.is_empty() => self.resolve(now, &rid, Ok(other)),
            _ => {}
        }
    }

    /// A raw sideband transfer (BR-SIDEBAND-03/05/09): its payload becomes the named result
    /// field, or fails the call; a payload for no pending request is discarded.
    pub fn handle_sideband(&mut self, now: Instant, generation: u64, sb: Sideband) {
        if !self.current(generation) {
            return;
        }
        let mut rid = sb.header.request_id.clone();
        if let Some(c) = self.conn.as_mut()
            && !c.raw_rid.is_empty()
        {
            // br.sideband.envelope-rid: the frame's Envelope rid wins.
            rid = std::mem::take(&mut c.raw_rid);
        }
        if fault::on(Fault::BrSidebandStrayAnswers) && !self.pending.contains_key(&rid) {
            let calls: Vec<&String> =
                self.pending.iter().filter(|(_, p)| matches!(p.what, super::Waiting::Op(_))).map(|(r, _)| r).collect();
            if let [only] = calls[..] {
                rid = only.clone();
            }
        }
        let plain_mismatch = sb.header.compression.is_empty()
            && sb.header.uncompressed_size != 0
            && sb.payload.as_ref().is_ok_and(|b| b.len() as u64 != sb.header.uncompressed_size);
        let reply = match sb.payload {
            Err(crate::sideband::SidebandError::TooLarge { .. }) if fault::on(Fault::BrSidebandOversizeUnanswered) => {
                return;
            }
            Ok(b) if plain_mismatch && fault::on(Fault::BrSidebandPlainSizeChecked) => Err(NoReply::Sideband(
                crate::sideband::SidebandError::SizeMismatch {
                    declared: sb.header.uncompressed_size,
                    actual: b.len() as u64,
                }
                .to_string(),
            )),
            Err(e) => Err(NoReply::Sideband(e.to_string())),
            Ok(bytes) => match String::from_utf8(bytes.to_vec()) {
                Err(_) => Err(NoReply::SidebandNotUtf8),
                Ok(text) => match sb.header.field_name.as_str() {
                    "result_json" => {
                        Ok(Msg::CallResult(pb::CallToolResponse { result_json: text, ..Default::default() }))
                    }
                    "structured_content_json" if fault::on(Fault::BrCallSidebandFieldIgnored) => {
                        Ok(Msg::CallResult(pb::CallToolResponse { result_json: text, ..Default::default() }))
                    }
                    "structured_content_json" if fault::on(Fault::BrSidebandFieldIgnored) => {
                        Ok(Msg::CallResult(pb::CallToolResponse { result_json: text, ..Default::default() }))
                    }
                    "structured_content_json" => Ok(Msg::CallResult(pb::CallToolResponse {
                        structured_content_json: text,
                        ..Default::default()
                    })),
                    _ if fault::on(Fault::BrSidebandUnknownFieldAccepted) => {
                        Ok(Msg::CallResult(pb::CallToolResponse { result_json: text, ..Default::default() }))
                    }
                    other => Err(NoReply::SidebandField(other.to_owned())),
                },
            },
        };
        self.resolve(now, &rid, reply);
    }

    /// Tool-list control (BR-TOOLLIST-02…09): on the staged set while a handshake or burst
    /// runs, else on the served set, with `list_changed` when what tools/list shows changed
    /// (BR-TOOLLIST-12/13); answered with the active set when it has an rid.
    fn control(&mut self, rid: &str, op: &ToolOp) {
        let pulling = self.conn.as_ref().is_some_and(|c| matches!(c.phase, super::handshake::Phase::Pulling { .. }));
        let staged = self.conn.as_mut().and_then(|c| c.staging.as_mut());
        let staged = staged.filter(|_| !(pulling && fault::on(Fault::BrHandshakeControlLost)));
        let before = if fault::on(Fault::BrToollistReplyBeforeUpdate) {
            Some(staged.as_ref().map_or_else(|| self.tools.active_names(), |s| s.active_names()))
        } else {
            None
        };
        let active = match staged {
            Some(set) => {
                set.apply(op);
                set.active_names()
            }
            None => {
                let changed = self.tools.apply(op);
                if (changed && !fault::on(Fault::BrToollistNoListChanged))
                    || fault::on(Fault::BrToollistListChangedAlways)
                {
                    self.events.push_back(Event::ListChanged(ListKind::Tools));
                }
                self.tools.active_names()
            }
        };
        let active = before.unwrap_or(active);
        if !rid.is_empty() {
            self.transmit.push_back(env::active_tools(active).with_rid(rid));
        }
    }
}

/// The reply types some host operation waits for (only `br.call.wrong-type-ignored` asks).
fn is_op_reply(m: &Msg) -> bool {
    matches!(
        m,
        Msg::CallResult(_)
            | Msg::ReadResourceResponse(_)
            | Msg::GetPromptResponse(_)
            | Msg::CompletionResponse(_)
            | Msg::MiddlewareInterceptResponse(_)
    )
}
