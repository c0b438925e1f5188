//! A model of a bridge under test, fed from outside: what each host session sent and received
//! (MCP JSON-RPC messages) and what crossed the tool process's socket (Envelopes, with call
//! results already reassembled from sideband transfers and streams). It checks the bridge
//! invariants that hold whatever the messages were, and names the BR requirement each finding
//! breaks. Sans-IO: time comes in as milliseconds since the session began.
//!
//! This is the judge of a bridge (issue 13's `explore --bridge`), kept apart on purpose from any
//! bridge implementation: one implements the spec, the other checks it.
//!
//! Checked as the traffic is fed:
//! - every host request gets exactly one response with its id, on its session (BR-MCP-19; a
//!   request the host cancelled may go unanswered, BR-CANCEL-02); a notification gets none;
//! - every error response carries an integer code other than 0 (BR-MCP-18);
//! - every request Envelope the bridge sends to the tool process has a host request that asks
//!   for it in flight (tools/call → CallToolRequest with the requested name, BR-CALL-01;
//!   resources/read, prompts/get, completion/complete), so nothing reaches the tool process for
//!   the methods of BR-MCP-14; list pulls and cancellations may come at any time;
//! - a tools/call result carries what the tool process sent, whether it came as one frame, a
//!   sideband transfer or a stream: `content` mapped from result_json, compared by value (§1.6)
//!   and named by the rule the first differing element breaks ([`content_rule`]: BR-CALL-07/08/
//!   09/10), `isError` (BR-CALL-06), `structuredContent` for an object (BR-CALL-11);
//! - progress only to the session whose call carried the token, and never after that call's
//!   response (BR-PROGRESS-03/04);
//! - when the tool process's connection ends, every host request waiting for it is answered
//!   within `T_PROMPT` (BR-LIFECYCLE-03);
//! - a reverse request (sampling, roots) gets exactly one answer under its rid (BR-SAMPLING-01,
//!   BR-ROOTS-01), and the host request it became goes to a session with a tools/call in flight
//!   (BR-SAMPLING-02).
//!
//! - list_changed follows enable/disable: the model keeps the active tool set (§10: the
//!   registered names of the discovery's ToolListResponse, the mode and its sets, changed by the
//!   control messages #7–#12 and by a call result's enable_tools/disable_tools); each change owes
//!   every initialized session a `notifications/tools/list_changed` within `T_LISTCHANGE`
//!   (BR-TOOLLIST-12; several changes may share one), a second one with no change in between is
//!   BR-TOOLLIST-13 (SHOULD), and a tools/list answered after the session learned of a change (by
//!   that notification, or by the response of the call whose result made it) shows exactly an
//!   active set at least that new (BR-TOOLLIST-11). Where the spec lets the bridge choose (after a
//!   restart or a second discovery the mode and sets MAY be kept or reset, BR-TOOLLIST-15) the
//!   model stops judging the tool set until a set_allowed or set_blocked makes it known again.
//!
//! [`BridgeModel::finish`] adds what is still owed at the end: requests never answered,
//! list_changed notifications never sent.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::pb::{self, envelope::Msg};
use crate::session::Finding;
use crate::spec::{T_LISTCHANGE, T_PROMPT};

mod host;
mod list;
mod modern;
mod tool;

/// A host session's name (the harness's own label: `a`, `b`, ...).
pub type SessionName = String;

/// Methods whose answer needs the tool process, with the request Envelope they may cause.
const NEEDS_TOOL: &[&str] = &["tools/call", "resources/read", "prompts/get", "completion/complete"];

#[derive(Debug, Clone)]
struct HostRequest {
    method: String,
    params: Value,
    /// The rid of the CallToolRequest (or other request Envelope) the bridge sent for it.
    rid: Option<String>,
    /// The host's `_meta.progressToken` of a tools/call.
    token: Option<Value>,
    cancelled: bool,
    /// A deadline for the answer (ms), once one applies (the tool process went away).
    due: Option<u64>,
    /// tools/list: the oldest version of the active set its answer may show.
    floor: usize,
    /// tools/call: the version of the active set its result's enable/disable made.
    made: Option<usize>,
    /// The order in which the host sent it (from 0, over all sessions).
    seq: u64,
}

impl HostRequest {
    /// An MCP 2026-07-28 request (BR-STATELESS-02).
    fn modern(&self) -> bool {
        crate::mcp_input::is_modern(&self.method, Some(&self.params))
    }
}

/// §10's list modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListMode {
    Open,
    Allow,
    Block,
}

/// The active tool set as far as the model knows it (§10).
#[derive(Debug)]
struct Tools {
    /// Rids of the bridge's ListToolsRequests (discoveries) not yet answered.
    discovery: BTreeSet<String>,
    /// The names of the latest discovery; `None` before the first.
    registered: Option<BTreeSet<String>>,
    /// `None`: not known (before discovery, or after a restart or rediscovery, BR-TOOLLIST-15).
    mode: Option<ListMode>,
    /// D, A and B.
    disabled: BTreeSet<String>,
    allowed: BTreeSet<String>,
    blocked: BTreeSet<String>,
    /// Every active set since the first discovery, by version (`None`: not known).
    history: Vec<Option<BTreeSet<String>>>,
    /// Still `true` until the first message of the tool process (the bridge just started),
    /// `false` from then on and after a restart.
    fresh: bool,
}

impl Default for Tools {
    fn default() -> Self {
        Tools {
            discovery: BTreeSet::new(),
            registered: None,
            mode: None,
            disabled: BTreeSet::new(),
            allowed: BTreeSet::new(),
            blocked: BTreeSet::new(),
            history: Vec::new(),
            fresh: true,
        }
    }
}

impl Tools {
    fn active(&self) -> Option<BTreeSet<String>> {
        let registered = self.registered.as_ref()?;
        let keep = |n: &&String| match self.mode {
            Some(ListMode::Open) => !self.disabled.contains(*n),
            Some(ListMode::Allow) => self.allowed.contains(*n),
            Some(ListMode::Block) => !self.blocked.contains(*n),
            None => false,
        };
        self.mode?;
        Some(registered.iter().filter(keep).cloned().collect())
    }

    fn enable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                Some(ListMode::Open) => drop(self.disabled.remove(n)),
                Some(ListMode::Allow) => drop(self.allowed.insert(n.clone())),
                Some(ListMode::Block) => drop(self.blocked.remove(n)),
                None => {}
            }
        }
    }

    fn disable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                Some(ListMode::Open) => drop(self.disabled.insert(n.clone())),
                Some(ListMode::Allow) => drop(self.allowed.remove(n)),
                Some(ListMode::Block) => drop(self.blocked.insert(n.clone())),
                None => {}
            }
        }
    }

    /// set_allowed / set_blocked: a known state whatever came before.
    fn set(&mut self, mode: ListMode, names: &[String]) {
        self.disabled.clear();
        self.allowed.clear();
        self.blocked.clear();
        self.mode = Some(if names.is_empty() { ListMode::Open } else { mode });
        match mode {
            _ if names.is_empty() => {}
            ListMode::Allow => self.allowed.extend(names.iter().cloned()),
            ListMode::Block => self.blocked.extend(names.iter().cloned()),
            ListMode::Open => {}
        }
    }
}

/// What the model knows of a host session's tool-list notifications.
#[derive(Debug, Default)]
struct Listener {
    initialized: bool,
    /// The host sees no notifications of this session (over HTTP: no event stream open).
    deaf: bool,
    /// Changes not yet announced: (the oldest one's version, its deadline when its time is known,
    /// how many).
    owed: Option<(usize, Option<u64>, usize)>,
    /// list_changed notifications the session may still get without a new change (several
    /// changes announced by one, a change just before the session initialized).
    credit: usize,
    /// The oldest version of the active set a tools/list sent now may show.
    floor: usize,
}

/// What the tool process answered to a CallToolRequest, as the host must see it.
#[derive(Debug, Clone, PartialEq)]
struct Expected {
    /// The shape of result_json, for naming the mapping rule a difference breaks
    /// ([`content_shape`]).
    shape: Option<Vec<bool>>,
    content: Value,
    is_error: bool,
    structured: Option<Value>,
}

/// The model. Feed it with the `host_*` and `tool_*` methods in the order things happened.
#[derive(Debug, Default)]
pub struct BridgeModel {
    /// Requests in flight per session, by id (compact JSON).
    requests: BTreeMap<(SessionName, String), HostRequest>,
    /// Requests answered, per session (a second response is a finding).
    answered: BTreeSet<(SessionName, String)>,
    /// Request Envelopes to the tool process still open: rid → (session, host id).
    rids: BTreeMap<String, (SessionName, String)>,
    /// Results of the tool process not yet seen by the host: (session, host id) → expected.
    results: BTreeMap<(SessionName, String), Expected>,
    /// Progress tokens in use: the bridge's token → (session, host id) of the call.
    tokens: BTreeMap<String, (SessionName, String)>,
    /// Reverse requests of the tool process waiting for their answer: rid → arm name.
    reverse: BTreeMap<String, &'static str>,
    reverse_answered: BTreeSet<String>,
    /// The active tool set (BR-TOOLLIST).
    tools: Tools,
    /// The host sessions' tool-list notifications.
    listeners: BTreeMap<SessionName, Listener>,
    /// Requests the host sent again under an id still in flight (its own mistake): how many
    /// answers more each id is owed (BR-MCP-20 lets the bridge answer the second with an error).
    again: BTreeMap<(SessionName, String), usize>,
    /// The tool process registered middleware: what a tools/call result shows may be what the
    /// middleware made of it, so results are no longer compared with the tool's.
    middleware: bool,
    /// Modern calls the bridge forwarded, by the rid of their CallToolRequest (§26.4).
    calls: BTreeMap<String, modern::ModernCall>,
    /// Every `requestState` the bridge issued.
    states: BTreeMap<String, modern::IssuedState>,
    /// Listen subscriptions the host cancelled: the `seq` of the next request, and whether the
    /// bridge showed it read the cancellation (it answered a request sent after it).
    listen_cancels: BTreeMap<(SessionName, String), (u64, bool)>,
    /// Requests the host sent so far.
    sent: u64,
    findings: Vec<Finding>,
}

fn key(id: &Value) -> String {
    id.to_string()
}

/// The MCP `content` a result_json maps to (BR-CALL-07/08/09).
pub fn content_of(result_json: &str) -> Value {
    if result_json.is_empty() {
        return Value::Array(Vec::new());
    }
    match serde_json::from_str::<Value>(result_json) {
        Ok(Value::Array(items)) => Value::Array(
            items
                .into_iter()
                .map(|item| {
                    if item.get("type").is_some_and(Value::is_string) && item.is_object() {
                        item
                    } else {
                        serde_json::json!({"type": "text", "text": item.to_string()})
                    }
                })
                .collect(),
        ),
        _ => serde_json::json!([{"type": "text", "text": result_json}]),
    }
}

/// JSON values equal by value (spec §1.6): objects by their members, numbers by their value.
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// The shape of a result_json, all that [`content_rule`] needs of it: `None` when it is not a JSON
/// array (or empty), else whether each element is a typed block (an object with a string `type`).
pub fn content_shape(result_json: &str) -> Option<Vec<bool>> {
    match serde_json::from_str::<Value>(result_json) {
        Ok(Value::Array(items)) => {
            Some(items.iter().map(|i| i.is_object() && i.get("type").is_some_and(Value::is_string)).collect())
        }
        _ => None,
    }
}

/// The mapping rule that `got`, a tools/call result's content, breaks when it differs from
/// `want` (what a result_json of `shape` maps to): BR-CALL-09 when result_json is not an array
/// (or empty); for an array, at the first element that differs (or is missing, or extra),
/// BR-CALL-10 for an image or audio block whose `data` or `mimeType` changed, BR-CALL-07 for
/// another typed block, BR-CALL-08 for an element that is not one.
pub fn content_rule(shape: Option<&[bool]>, want: &Value, got: &Value) -> &'static str {
    let (Some(typed), Some(want), Some(got)) = (shape, want.as_array(), got.as_array()) else { return "BR-CALL-09" };
    let at = (0..want.len().max(got.len()))
        .find(|&i| !matches!((want.get(i), got.get(i)), (Some(w), Some(g)) if same_json(w, g)))
        .unwrap_or(0);
    let (Some(&typed), Some(item)) = (typed.get(at), want.get(at)) else { return "BR-CALL-07" };
    if !typed {
        return "BR-CALL-08";
    }
    let media = matches!(item.get("type").and_then(Value::as_str), Some("image" | "audio"));
    let g = got.get(at);
    let kept = |k: &str| g.and_then(|g| g.get(k)) == item.get(k);
    if media && !(kept("data") && kept("mimeType")) { "BR-CALL-10" } else { "BR-CALL-07" }
}

impl BridgeModel {
    pub fn new() -> Self {
        BridgeModel::default()
    }

    fn find(&mut self, requirement: &'static str, message: String) {
        self.findings.push(Finding { requirement, message });
    }

    /// The findings so far.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The end of the session at `now_ms`, after the harness waited long enough for every
    /// answer: what is still owed is a finding. Returns every finding.
    pub fn finish(mut self, now_ms: u64) -> Vec<Finding> {
        self.modern_finish();
        let open: Vec<_> = self.requests.iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        for ((session, id), r) in open {
            // An open listen subscription is in flight, not unanswered (§26, BR-MCP-19).
            if r.cancelled || r.method == "subscriptions/listen" {
                continue;
            }
            match r.due {
                Some(due) if now_ms > due => self.find(
                    "BR-LIFECYCLE-03",
                    format!(
                        "{} (id {id}, session {session:?}) was never answered after the tool process went away",
                        r.method
                    ),
                ),
                _ => self.find("BR-MCP-19", format!("{} (id {id}, session {session:?}) was never answered", r.method)),
            }
        }
        for (session, l) in &self.listeners {
            if let Some((_, due, n)) = l.owed
                && due.is_none_or(|d| now_ms > d)
            {
                self.findings.push(Finding {
                    requirement: "BR-TOOLLIST-12",
                    message: format!(
                        "{n} change(s) of the active set never announced to session {session:?} (no notifications/tools/list_changed)"
                    ),
                });
            }
        }
        let unanswered: Vec<_> = self.reverse.iter().map(|(rid, arm)| (rid.clone(), *arm)).collect();
        for (rid, arm) in unanswered {
            let req = if arm == "sampling_request" { "BR-SAMPLING-01" } else { "BR-ROOTS-01" };
            self.find(req, format!("the {arm} under rid {rid:?} was never answered"));
        }
        self.findings
    }
}

#[cfg(test)]
mod tests;
