//! What the tool process sends, dispatched by message type, then by rid: registrations and
//! markers of a handshake, tool-list control, progress, logs, resource updates, reverse
//! requests, sideband transfers and streams, and the replies to our requests.

use super::{Core, Envelope, EnvelopeExt, Event, Instant, ListKind, Msg, NoReply, ToolOp, pb, shapes};
use crate::envelopes as env;
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
                if let Some(c) = self.conn.as_mut() {
                    c.middleware.push((r.name, r.priority));
                }
                self.transmit.push_back(env::register_middleware_response(true));
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
                        if field_name == "structured_content_json" {
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
                (!l.logger.is_empty()).then_some(l.logger),
                shapes::log_data(&l.data_json),
            ),
            Msg::ResourceChanged(r) => self.events.push_back(Event::ResourceUpdated(r.uri)),
            // BR-SAMPLING-01, BR-ROOTS-01: an empty rid is ignored.
            Msg::SamplingRequest(r) if !rid.is_empty() => self.sampling(now, rid, &r),
            Msg::ListRootsRequest(_) if !rid.is_empty() => self.roots(now, rid),
            Msg::SamplingRequest(_) | Msg::ListRootsRequest(_) => {}
            // BR-SIDEBAND-02: the payload that follows is matched by RawHeader.request_id in
            // `handle_sideband`; the Envelope rid of the RawHeader frame means nothing.
            Msg::RawHeader(_) => {}
            // BR-TASK-01: ignored.
            Msg::CreateTask(_) | Msg::TaskStatusResponse(_) => {}
            // The burst of a reload by ReloadRequest (BR-RELOAD-02): the new tool list. Outside
            // a reload, a tool list with empty rid is ignored (BR-HANDSHAKE-14).
            Msg::ToolList(t) if rid.is_empty() => self.burst_tool_list(now, &t),
            // Replies (and wrong-typed messages under a pending rid, BR-CALL-16) go to the
            // waiter; anything else is discarded (BR-CALL-17, BR-FRAME-05).
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
        let rid = sb.header.request_id.clone();
        let reply = match sb.payload {
            Err(e) => Err(NoReply::Sideband(e.to_string())),
            Ok(bytes) => match String::from_utf8(bytes.to_vec()) {
                Err(_) => Err(NoReply::SidebandNotUtf8),
                Ok(text) => match sb.header.field_name.as_str() {
                    "result_json" => {
                        Ok(Msg::CallResult(pb::CallToolResponse { result_json: text, ..Default::default() }))
                    }
                    "structured_content_json" => Ok(Msg::CallResult(pb::CallToolResponse {
                        structured_content_json: text,
                        ..Default::default()
                    })),
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
        let staged = self.conn.as_mut().and_then(|c| c.staging.as_mut());
        let active = match staged {
            Some(set) => {
                set.apply(op);
                set.active_names()
            }
            None => {
                if self.tools.apply(op) {
                    self.events.push_back(Event::ListChanged(ListKind::Tools));
                }
                self.tools.active_names()
            }
        };
        if !rid.is_empty() {
            self.transmit.push_back(env::active_tools(active).with_rid(rid));
        }
    }
}
