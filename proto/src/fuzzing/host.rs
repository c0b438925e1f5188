//! The `host_core_ops` target: the reference bridge's MCP side ([`crate::host_core`]) driven by a
//! byte string read as operations: raw messages from a host, the bridge's outcomes of forwarded
//! requests, notifications of the bridge core, requests of ours to the host and the host's
//! answers to them, the session's end.
//!
//! Invariants (a broken one panics):
//! - nothing panics, whatever the host sends;
//! - every request the core took gets at most one response, and only requests it took; a
//!   request forwarded to the bridge gets its response only after its outcome (or never, when
//!   the host cancelled it); notifications are never answered (BR-MCP-19);
//! - the gate's refusals carry an error code and a valid id or null;
//! - nothing goes out after the session's end; the outbox stays within its bound.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::json;

use crate::bound::Bound;
use crate::bridge_core::{HostError, ListKind};
use crate::host_core::msg::{Message, Response};
use crate::host_core::{Action, Ask, AskId, Config, HostCore, Intake, Note, Route};
use crate::jsonrpc::RequestId;

const QUEUE: Bound = Bound { head_items: 8, head_bytes: 1 << 16, tail_items: 8, tail_bytes: 1 << 16 };

#[derive(Default)]
struct Seen {
    /// Requests taken, minus responses given, by id.
    open: HashMap<RequestId, usize>,
    forwarded: Vec<RequestId>,
    /// Forwarded requests whose outcome the core has had.
    decided: Vec<RequestId>,
    asks: Vec<(AskId, RequestId)>,
    /// Requests the core cancelled at the bridge (the host cancelled them, BR-CANCEL-02).
    cancelled: Vec<RequestId>,
    ended: bool,
}

/// The body of the `host_core_ops` fuzz target.
pub fn host_core_ops(data: &[u8]) {
    let mut core = HostCore::new(Config {
        page_size: Some(2),
        queue: QUEUE,
        name: "fuzz".into(),
        version: "1".into(),
        private_cache: false,
        http: false,
    });
    let now = Instant::now();
    let mut seen = Seen::default();
    let mut i = 0;
    while i < data.len() {
        let op = data[i];
        let arg = data.get(i + 1).copied().unwrap_or(0) as usize;
        i += 2;
        match op % 6 {
            0 => {
                let end = (i + arg).min(data.len());
                let intake = core.handle_bytes(now, &data[i.min(end)..end]).0;
                i = end;
                match intake {
                    Intake::Request(id) => {
                        assert!(!seen.ended, "a request taken after the end");
                        seen.cancelled.retain(|c| *c != id);
                        *seen.open.entry(id).or_default() += 1;
                    }
                    Intake::Refused(v) => {
                        assert!(v["error"]["code"].is_i64(), "a refusal without a code: {v}");
                        assert!(v["id"].is_null() || RequestId::of(&v["id"]).is_some(), "a refusal's id: {v}");
                    }
                    Intake::Taken | Intake::Dropped => {}
                }
            }
            1 => {
                if let Some(id) = seen.forwarded.get(arg % seen.forwarded.len().max(1)).cloned() {
                    let outcome = match arg % 3 {
                        0 => Ok(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}])),
                        1 => Ok(json!({"content": []})),
                        _ => Err(HostError::Internal("fuzz".into())),
                    };
                    seen.decided.push(id.clone());
                    core.handle_outcome(now, id, outcome);
                }
            }
            2 => {
                let note = match arg % 4 {
                    0 => Note::ListChanged(ListKind::Tools),
                    1 => Note::Log { level: "error", logger: None, data: json!(arg), for_call: false },
                    2 => Note::Progress { token: json!(arg % 3), progress: 1, total: None, message: None },
                    _ => Note::ResourceUpdated("x:y".into()),
                };
                core.handle_note(now, note);
            }
            3 => {
                let ask = if arg.is_multiple_of(2) {
                    Ask::ListRoots
                } else {
                    Ask::Sample(json!({"messages": [], "maxTokens": 1}))
                };
                let _ = core.ask(now, ask);
            }
            4 => {
                core.close();
                seen.ended = true;
            }
            _ => {
                if let Some((ask, _)) = seen.asks.get(arg % seen.asks.len().max(1)).cloned() {
                    core.forget(ask);
                }
            }
        }
        drain(&mut core, &mut seen);
    }
}

fn drain(core: &mut HostCore, seen: &mut Seen) {
    while let Some(a) = core.poll_action() {
        match a {
            Action::Forward { id, .. } => seen.forwarded.push(id),
            Action::Cancel { id } => seen.cancelled.push(id),
            _ => {}
        }
    }
    while let Some(t) = core.poll_transmit() {
        assert!(!seen.ended, "a message after the session's end: {:?}", t.message);
        match t.message {
            Message::Response(Response { id: Some(id), .. }) => {
                let open = seen.open.get_mut(&id).filter(|n| **n > 0);
                let open = open.unwrap_or_else(|| panic!("a response to {id}, which is not open"));
                *open -= 1;
                let forwarded = seen.forwarded.iter().filter(|f| **f == id).count();
                let decided = seen.decided.iter().filter(|f| **f == id).count();
                assert!(forwarded == 0 || decided > 0, "{id} answered before the bridge's outcome");
                assert!(!seen.cancelled.contains(&id), "{id} answered after the host cancelled it");
                assert_eq!(t.route, Route::Answer(id));
            }
            Message::Request(r) => {
                if let Some(ask) = r.id.to_value().as_u64() {
                    seen.asks.push((AskId(ask), r.id));
                }
            }
            _ => {}
        }
    }
    assert!(core.is_idle());
}
