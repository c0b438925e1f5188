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
//!   sideband transfer or a stream: `content` mapped from result_json (BR-CALL-07/08/09),
//!   `isError` (BR-CALL-06), `structuredContent` for an object (BR-CALL-11), BR-CALL-18;
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
}

/// §10's list modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
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
    mode: Option<Mode>,
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
            Some(Mode::Open) => !self.disabled.contains(*n),
            Some(Mode::Allow) => self.allowed.contains(*n),
            Some(Mode::Block) => !self.blocked.contains(*n),
            None => false,
        };
        self.mode?;
        Some(registered.iter().filter(keep).cloned().collect())
    }

    fn enable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                Some(Mode::Open) => drop(self.disabled.remove(n)),
                Some(Mode::Allow) => drop(self.allowed.insert(n.clone())),
                Some(Mode::Block) => drop(self.blocked.remove(n)),
                None => {}
            }
        }
    }

    fn disable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                Some(Mode::Open) => drop(self.disabled.insert(n.clone())),
                Some(Mode::Allow) => drop(self.allowed.remove(n)),
                Some(Mode::Block) => drop(self.blocked.insert(n.clone())),
                None => {}
            }
        }
    }

    /// set_allowed / set_blocked: a known state whatever came before.
    fn set(&mut self, mode: Mode, names: &[String]) {
        self.disabled.clear();
        self.allowed.clear();
        self.blocked.clear();
        self.mode = Some(if names.is_empty() { Mode::Open } else { mode });
        match mode {
            _ if names.is_empty() => {}
            Mode::Allow => self.allowed.extend(names.iter().cloned()),
            Mode::Block => self.blocked.extend(names.iter().cloned()),
            Mode::Open => {}
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

    /// A message the host of `session` wrote to the bridge.
    pub fn host_sent(&mut self, session: &str, msg: &Value) {
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|i| i.is_string() || i.is_number());
        match (method, id) {
            (Some(m), Some(id)) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                let token = params.pointer("/_meta/progressToken").cloned();
                let k = (session.to_owned(), key(id));
                // An id still in flight is the host's own mistake (BR-MCP-20 judges the answer);
                // the model keeps the first.
                if !self.requests.contains_key(&k) {
                    self.answered.remove(&k);
                    self.requests.insert(
                        k,
                        HostRequest {
                            method: m.to_owned(),
                            params,
                            rid: None,
                            token,
                            cancelled: false,
                            due: None,
                            floor: self.listeners.get(session).map_or(0, |l| l.floor),
                            made: None,
                        },
                    );
                }
            }
            (Some("notifications/initialized"), None) => {
                let changed_before = self.tools.history.len() > 1;
                let l = self.listeners.entry(session.to_owned()).or_default();
                if !l.initialized {
                    l.initialized = true;
                    l.credit += usize::from(changed_before);
                }
            }
            (Some("notifications/cancelled"), None) => {
                if let Some(id) = msg.pointer("/params/requestId") {
                    let k = (session.to_owned(), key(id));
                    if let Some(r) = self.requests.get_mut(&k) {
                        r.cancelled = true;
                    }
                }
            }
            _ => {}
        }
    }

    /// A message the bridge wrote to the host of `session`, at `now_ms`.
    pub fn host_received(&mut self, session: &str, now_ms: u64, msg: &Value) {
        let method = msg.get("method").and_then(Value::as_str);
        if method.is_none() && (msg.get("result").is_some() || msg.get("error").is_some()) {
            self.response(session, now_ms, msg);
        } else if method == Some("notifications/progress") {
            self.progress(session, msg);
        } else if method == Some("notifications/tools/list_changed") {
            self.list_changed(session, now_ms);
        } else if matches!(method, Some("sampling/createMessage" | "roots/list")) {
            let busy = self
                .requests
                .iter()
                .any(|((s, _), r)| s == session && r.method == "tools/call" && r.rid.is_some() && !r.cancelled);
            if !busy {
                self.find(
                    "BR-SAMPLING-02",
                    format!("{} went to session {session:?}, which has no tools/call in flight", method.unwrap_or("")),
                );
            }
        }
    }

    fn response(&mut self, session: &str, now_ms: u64, msg: &Value) {
        if let Some(e) = msg.get("error") {
            match e.get("code") {
                Some(c) if c.is_i64() && c.as_i64() != Some(0) => {}
                other => self.find(
                    "BR-MCP-18",
                    format!("an error response carries the code {}", other.map_or("(none)".into(), Value::to_string)),
                ),
            }
        }
        let Some(id) = msg.get("id") else { return };
        if id.is_null() {
            // An answer to a line that was not a request (-32700, -32600): nothing owed it.
            return;
        }
        let k = (session.to_owned(), key(id));
        let Some(req) = self.requests.remove(&k) else {
            let why = if self.answered.contains(&k) {
                "a second response"
            } else {
                "a response to a request this session never sent (or a notification)"
            };
            self.find("BR-MCP-19", format!("{why}: id {id} on session {session:?}"));
            return;
        };
        self.answered.insert(k.clone());
        if let Some(due) = req.due
            && now_ms > due
        {
            self.find(
                "BR-LIFECYCLE-03",
                format!(
                    "{} (id {id}) answered {} ms after the tool process went away",
                    req.method,
                    now_ms + T_PROMPT.as_millis() as u64 - due
                ),
            );
        }
        if let Some(rid) = &req.rid {
            self.rids.remove(rid);
        }
        self.tokens.retain(|_, owner| *owner != k);
        if let Some(want) = self.results.remove(&k)
            && let Some(result) = msg.get("result")
        {
            self.compare(id, &want, result);
        }
        if let Some(v) = req.made {
            // The host knows the call ended: its result's enable/disable is in effect.
            let l = self.listeners.entry(session.to_owned()).or_default();
            l.floor = l.floor.max(v);
        }
        if req.method == "tools/list"
            && let Some(result) = msg.get("result")
        {
            self.tools_listed(id, &req, result);
        }
    }

    /// A tools/list result shows exactly an active set the bridge may have had between the
    /// request's floor and now (BR-TOOLLIST-11).
    fn tools_listed(&mut self, id: &Value, req: &HostRequest, result: &Value) {
        let paged = result.get("nextCursor").is_some_and(|c| !c.is_null())
            || req.params.get("cursor").is_some_and(|c| !c.is_null());
        let Some(tools) = result.get("tools").and_then(Value::as_array) else { return };
        let range = self.tools.history.get(req.floor..).unwrap_or_default();
        if paged || range.is_empty() || range.iter().any(Option::is_none) {
            return;
        }
        let shown: BTreeSet<String> =
            tools.iter().filter_map(|t| t.get("name").and_then(Value::as_str)).map(str::to_owned).collect();
        if range.iter().flatten().any(|set| *set == shown) {
            return;
        }
        let want = range.last().cloned().flatten().unwrap_or_default();
        self.find("BR-TOOLLIST-11", format!("tools/list {id} shows {shown:?} where the active set is {want:?}"));
    }

    /// `notifications/tools/list_changed` reached `session` at `now_ms`.
    fn list_changed(&mut self, session: &str, now_ms: u64) {
        let known = self.tools.history.iter().all(Option::is_some);
        let l = self.listeners.entry(session.to_owned()).or_default();
        if let Some((version, due, n)) = l.owed.take() {
            l.floor = l.floor.max(version);
            l.credit += n - 1;
            if let Some(due) = due
                && now_ms > due
            {
                let late = now_ms + T_LISTCHANGE.as_millis() as u64 - due;
                self.find(
                    "BR-TOOLLIST-12",
                    format!("notifications/tools/list_changed reached session {session:?} {late} ms after the change"),
                );
            }
        } else if l.credit > 0 {
            l.credit -= 1;
        } else if known && !self.tools.history.is_empty() {
            self.find(
                "BR-TOOLLIST-13",
                format!("notifications/tools/list_changed to session {session:?} with no change of the active set"),
            );
        }
    }

    /// The tool set after an update at `now_ms` (when known): a new version when it changed,
    /// owed to every initialized session as a list_changed.
    fn tools_updated(&mut self, before: Option<BTreeSet<String>>, now_ms: Option<u64>) -> Option<usize> {
        let after = self.tools.active();
        if before == after {
            return None;
        }
        self.tools.history.push(after.clone());
        let version = self.tools.history.len() - 1;
        if before.is_some() && after.is_some() {
            let due = now_ms.map(|t| t + T_LISTCHANGE.as_millis() as u64);
            for l in self.listeners.values_mut().filter(|l| l.initialized && !l.deaf) {
                let owed = l.owed.get_or_insert((version, due, 0));
                owed.2 += 1;
            }
        }
        Some(version)
    }

    /// An Envelope the tool process sent that may change the active set (§10).
    fn tool_list_control(&mut self, env: &pb::Envelope, now_ms: Option<u64>) {
        let before = self.tools.active();
        let t = &mut self.tools;
        if t.fresh {
            // BR-TOOLLIST-01: a bridge that has just started is open with empty sets; what the
            // tool process changes before its first tool list applies to them (BR-TOOLLIST-07).
            t.fresh = false;
            t.mode = Some(Mode::Open);
        }
        match &env.msg {
            Some(Msg::ToolList(list)) if t.discovery.remove(&env.request_id) => {
                let names = list.tools.iter().map(|d| d.name.clone()).collect();
                if t.registered.is_none() {
                    // The first discovery: version 0 is the starting set, nothing to announce.
                    t.registered = Some(names);
                    let start = t.active();
                    t.history.push(start);
                    return;
                }
                // BR-TOOLLIST-15: the mode and sets may be kept or reset.
                t.mode = None;
                t.registered = Some(names);
            }
            Some(Msg::EnableTools(r)) => t.enable(&r.tool_names),
            Some(Msg::DisableTools(r)) => t.disable(&r.tool_names),
            Some(Msg::SetAllowed(r)) => t.set(Mode::Allow, &r.tool_names),
            Some(Msg::SetBlocked(r)) => t.set(Mode::Block, &r.tool_names),
            Some(Msg::Batch(b)) if b.allow.is_empty() || b.block.is_empty() => {
                if !b.allow.is_empty() {
                    t.set(Mode::Allow, &b.allow);
                } else if !b.block.is_empty() {
                    t.set(Mode::Block, &b.block);
                }
                t.enable(&b.enable);
                t.disable(&b.disable);
            }
            _ => return,
        }
        self.tools_updated(before, now_ms);
    }

    fn compare(&mut self, id: &Value, want: &Expected, got: &Value) {
        let content = got.get("content").cloned().unwrap_or(Value::Array(Vec::new()));
        if content != want.content {
            self.find(
                "BR-CALL-18",
                format!("tools/call {id}: content {content} is not what the tool process sent ({})", want.content),
            );
        }
        let is_error = got.get("isError").and_then(Value::as_bool).unwrap_or(false);
        if is_error != want.is_error {
            self.find(
                "BR-CALL-06",
                format!("tools/call {id}: isError {is_error}, the tool process said {}", want.is_error),
            );
        }
        let structured = got.get("structuredContent");
        if structured != want.structured.as_ref() {
            self.find(
                "BR-CALL-11",
                format!(
                    "tools/call {id}: structuredContent {} where the tool process's structured_content_json gives {}",
                    structured.map_or("(none)".into(), Value::to_string),
                    want.structured.as_ref().map_or("(none)".into(), Value::to_string)
                ),
            );
        }
    }

    fn progress(&mut self, session: &str, msg: &Value) {
        let Some(token) = msg.pointer("/params/progressToken") else { return };
        let owner = self.requests.iter().find(|((s, _), r)| {
            r.method == "tools/call" && r.token.as_ref() == Some(token) && (s == session || r.rid.is_some())
        });
        match owner {
            Some(((s, _), _)) if s == session => {}
            Some(((s, _), _)) => {
                let s = s.clone();
                self.find(
                    "BR-PROGRESS-04",
                    format!("progress for a call of session {s:?} went to session {session:?}"),
                );
            }
            None => self.find(
                "BR-PROGRESS-03",
                format!(
                    "notifications/progress with token {token} and no call of this session in flight that carries it"
                ),
            ),
        }
    }

    /// An Envelope the bridge sent to the tool process.
    pub fn tool_received(&mut self, env: &pb::Envelope) {
        let rid = env.request_id.clone();
        let Some(msg) = &env.msg else { return };
        let (method, what) = match msg {
            Msg::ListTools(_) if !rid.is_empty() => {
                self.tools.discovery.insert(rid);
                return;
            }
            Msg::CallTool(c) => ("tools/call", Some(c.name.clone())),
            Msg::ReadResourceRequest(_) => ("resources/read", None),
            Msg::GetPromptRequest(_) => ("prompts/get", None),
            Msg::CompletionRequest(_) => ("completion/complete", None),
            Msg::SamplingResponse(_) | Msg::ListRootsResponse(_) => {
                let arm = crate::Arm::of(msg).name();
                if self.reverse.remove(&rid).is_some() {
                    self.reverse_answered.insert(rid);
                } else {
                    let req = if arm == "sampling_response" { "BR-SAMPLING-01" } else { "BR-ROOTS-01" };
                    let why = if self.reverse_answered.contains(&rid) { "a second" } else { "an unasked" };
                    self.find(req, format!("{why} {arm} under rid {rid:?}"));
                }
                return;
            }
            _ => return,
        };
        // The oldest request of that method (and tool name) without an Envelope yet.
        let candidate = self
            .requests
            .iter_mut()
            .find(|(_, r)| {
                r.method == method
                    && r.rid.is_none()
                    && !r.cancelled
                    && what.as_ref().is_none_or(|n| r.params.get("name").and_then(Value::as_str) == Some(n))
            })
            .map(|(k, r)| (k.clone(), r));
        match candidate {
            Some((k, r)) => {
                r.rid = Some(rid.clone());
                if let Msg::CallTool(c) = msg
                    && !c.progress_token.is_empty()
                {
                    self.tokens.insert(c.progress_token.clone(), k.clone());
                }
                self.rids.insert(rid, k);
            }
            None => {
                let requirement = if method == "tools/call" { "BR-CALL-01" } else { "BR-MCP-14" };
                self.find(
                    requirement,
                    format!(
                        "the bridge sent {} (rid {rid:?}) with no host {method} asking for it",
                        crate::Arm::of(msg).name()
                    ),
                );
            }
        }
    }

    /// An Envelope the tool process sent to the bridge; call results arrive here reassembled
    /// (a sideband transfer or a stream as the CallToolResponse it stands for). Without a time,
    /// a list_changed it makes owed is judged only at [`finish`](Self::finish), never as late.
    pub fn tool_sent(&mut self, env: &pb::Envelope) {
        self.tool_sent_inner(env, None);
    }

    /// [`tool_sent`](Self::tool_sent) at `now_ms`: a list_changed it makes owed is due within
    /// `T_LISTCHANGE` of it (BR-TOOLLIST-12).
    pub fn tool_sent_at(&mut self, now_ms: u64, env: &pb::Envelope) {
        self.tool_sent_inner(env, Some(now_ms));
    }

    /// Notifications of `session` are not seen by its host (over HTTP: no event stream is open,
    /// BR-HTTP-19): no list_changed is owed to it.
    pub fn host_unlistening(&mut self, session: &str) {
        let l = self.listeners.entry(session.to_owned()).or_default();
        l.deaf = true;
        l.owed = None;
    }

    fn tool_sent_inner(&mut self, env: &pb::Envelope, now_ms: Option<u64>) {
        let rid = env.request_id.clone();
        match &env.msg {
            Some(Msg::CallResult(r)) => {
                let Some(k) = self.rids.get(&rid).cloned() else { return };
                let structured =
                    serde_json::from_str::<Value>(&r.structured_content_json).ok().filter(Value::is_object);
                let want = Expected { content: content_of(&r.result_json), is_error: r.is_error, structured };
                // Only the first reply counts (BR-CALL-17).
                if self.results.contains_key(&k) {
                    return;
                }
                self.results.insert(k.clone(), want);
                if !r.enable_tools.is_empty() || !r.disable_tools.is_empty() {
                    let before = self.tools.active();
                    if self.requests.get(&k).is_some_and(|q| q.cancelled) {
                        // Whether the bridge applies what a cancelled call's result changes is
                        // not the model's to say.
                        self.tools.mode = None;
                    } else {
                        self.tools.enable(&r.enable_tools);
                        self.tools.disable(&r.disable_tools);
                    }
                    let made = self.tools_updated(before, now_ms);
                    if let Some(q) = self.requests.get_mut(&k) {
                        q.made = made;
                    }
                }
            }
            Some(m @ (Msg::SamplingRequest(_) | Msg::ListRootsRequest(_))) if !rid.is_empty() => {
                self.reverse.insert(rid, crate::Arm::of(m).name());
            }
            _ => self.tool_list_control(env, now_ms),
        }
    }

    /// The tool process's connection ended at `now_ms`: every host request waiting for it is
    /// owed an answer within `T_PROMPT` (BR-LIFECYCLE-03).
    pub fn tool_ended(&mut self, now_ms: u64) {
        let due = now_ms + T_PROMPT.as_millis() as u64;
        for r in self.requests.values_mut() {
            if NEEDS_TOOL.contains(&r.method.as_str()) && r.rid.is_some() && !r.cancelled {
                r.due.get_or_insert(due);
            }
        }
        self.rids.clear();
        self.reverse.clear();
        // BR-TOOLLIST-15: across a restart the mode and sets may be kept or reset.
        let before = self.tools.active();
        self.tools.mode = None;
        self.tools.fresh = false;
        self.tools.discovery.clear();
        self.tools_updated(before, Some(now_ms));
    }

    /// The end of the session at `now_ms`, after the harness waited long enough for every
    /// answer: what is still owed is a finding. Returns every finding.
    pub fn finish(mut self, now_ms: u64) -> Vec<Finding> {
        let open: Vec<_> = self.requests.iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        for ((session, id), r) in open {
            if r.cancelled {
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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::EnvelopeExt;
    use crate::envelopes as env;

    fn call(id: u64, name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}})
    }

    fn result(id: u64, content: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": content}})
    }

    fn reqs(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.requirement).collect()
    }

    #[test]
    fn a_call_forwarded_and_answered_with_what_the_tool_process_sent_is_clean() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "echo"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
        let r = pb::CallToolResponse { result_json: r#"[{"type":"text","text":"hi"},5]"#.into(), ..Default::default() };
        m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
        m.host_received("a", 10, &result(1, json!([{"type": "text", "text": "hi"}, {"type": "text", "text": "5"}])));
        assert_eq!(m.finish(20), vec![]);
    }

    #[test]
    fn a_second_response_and_a_response_to_a_notification_break_br_mcp_19() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        m.host_received("a", 2, &json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m.host_received("a", 3, &json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
        assert_eq!(reqs(&m.finish(5)), ["BR-MCP-19", "BR-MCP-19"]);
    }

    #[test]
    fn an_unanswered_request_breaks_br_mcp_19_unless_the_host_cancelled_it() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "slow"));
        m.host_sent("a", &call(2, "slow"));
        m.host_sent("a", &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}));
        let f = m.finish(100);
        assert_eq!(reqs(&f), ["BR-MCP-19"]);
        assert!(f[0].message.contains("id 1"), "{f:?}");
    }

    #[test]
    fn error_codes_must_be_integers_other_than_zero() {
        let mut m = BridgeModel::new();
        for (id, code) in [(1, json!(0)), (2, json!("x")), (3, json!(-32603))] {
            m.host_sent("a", &json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": "u"}}));
            m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "m"}}));
        }
        assert_eq!(reqs(&m.finish(2)), ["BR-MCP-18", "BR-MCP-18"]);
    }

    #[test]
    fn a_result_that_differs_from_what_the_tool_process_sent_names_the_part() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "echo"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r1"));
        let mut r = pb::CallToolResponse {
            is_error: true,
            result_json: r#"[{"type":"text","text":"x"}]"#.into(),
            structured_content_json: r#"{"n":1}"#.into(),
            ..Default::default()
        };
        m.tool_sent(&pb::Envelope {
            request_id: "r1".into(),
            msg: Some(Msg::CallResult(r.clone())),
            ..Default::default()
        });
        // Dropped structuredContent (pmcp's BR-CALL-18 case) and isError lost.
        m.host_received("a", 5, &result(1, json!([{"type": "text", "text": "x"}])));
        assert_eq!(reqs(&m.finish(6)), ["BR-CALL-06", "BR-CALL-11"]);
        // Not JSON at all: one text block with the whole string.
        r.result_json = "plain".into();
        assert_eq!(content_of(&r.result_json), json!([{"type": "text", "text": "plain"}]));
        assert_eq!(content_of(""), json!([]));
    }

    #[test]
    fn a_request_envelope_no_host_request_asked_for_is_named() {
        let mut m = BridgeModel::new();
        m.host_sent(
            "a",
            &json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}),
        );
        m.tool_received(&env::read_resource("mem://a").with_rid("r9"));
        m.tool_received(&env::call_tool("echo", "{}").with_rid("r10"));
        // Pulls and cancellations may come at any time.
        m.tool_received(&env::list_resources().with_rid("r11"));
        m.tool_received(&env::cancel("r10"));
        m.host_received("a", 1, &json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert_eq!(reqs(&m.finish(2)), ["BR-MCP-14", "BR-CALL-01"]);
    }

    #[test]
    fn progress_goes_only_to_the_calling_session_and_never_after_the_response() {
        let mut m = BridgeModel::new();
        let mut c = call(1, "slow");
        c["params"]["_meta"] = json!({"progressToken": "t"});
        m.host_sent("a", &c);
        m.host_sent("b", &call(1, "slow"));
        m.tool_received(&env::call_tool_with_progress("slow", "{}", "p1").with_rid("r1"));
        let p = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}});
        m.host_received("a", 1, &p);
        m.host_received("b", 1, &p);
        m.host_received("a", 2, &result(1, json!([])));
        m.host_received("a", 3, &p);
        let f = m.finish(4);
        assert_eq!(reqs(&f), ["BR-PROGRESS-04", "BR-PROGRESS-03", "BR-MCP-19"], "{f:?}");
    }

    #[test]
    fn calls_in_flight_when_the_tool_process_dies_are_owed_an_answer_within_t_prompt() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "slow"));
        m.host_sent("a", &call(2, "slow"));
        m.tool_received(&env::call_tool("slow", "{}").with_rid("r1"));
        m.tool_received(&env::call_tool("slow", "{}").with_rid("r2"));
        m.tool_ended(100);
        m.host_received("a", 500, &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "gone"}}));
        m.host_received("a", 2000, &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "gone"}}));
        assert_eq!(reqs(&m.finish(3000)), ["BR-LIFECYCLE-03"]);
    }

    #[test]
    fn reverse_requests_get_exactly_one_answer_under_their_rid() {
        let mut m = BridgeModel::new();
        m.host_sent("a", &call(1, "ask"));
        m.tool_received(&env::call_tool("ask", "{}").with_rid("r1"));
        let sampling = pb::Envelope {
            request_id: "s1".into(),
            msg: Some(Msg::SamplingRequest(pb::SamplingRequest::default())),
            ..Default::default()
        };
        m.tool_sent(&sampling);
        m.host_received(
            "a",
            1,
            &json!({"jsonrpc": "2.0", "id": "x", "method": "sampling/createMessage", "params": {}}),
        );
        m.host_received(
            "b",
            1,
            &json!({"jsonrpc": "2.0", "id": "y", "method": "sampling/createMessage", "params": {}}),
        );
        let answer = pb::Envelope {
            request_id: "s1".into(),
            msg: Some(Msg::SamplingResponse(pb::SamplingResponse::default())),
            ..Default::default()
        };
        m.tool_received(&answer);
        m.tool_received(&answer);
        m.host_received("a", 2, &result(1, json!([])));
        assert_eq!(reqs(&m.finish(3)), ["BR-SAMPLING-02", "BR-SAMPLING-01"]);
    }

    /// The bridge's discovery: ListToolsRequest under `d1`, the tool process's list under it.
    fn discovered(m: &mut BridgeModel, names: &[&str]) {
        m.tool_received(&env::list_tools().with_rid("d1"));
        m.tool_sent(&env::tool_list(names.iter().map(|n| env::tool(n, "", "{}"))).with_rid("d1"));
    }

    fn initialized(m: &mut BridgeModel, session: &str) {
        m.host_sent(session, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn list_changed() -> Value {
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    }

    fn tools_list(m: &mut BridgeModel, session: &str, id: u64, at: u64, shown: &[&str]) {
        m.host_sent(session, &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
        let tools: Vec<Value> = shown.iter().map(|n| json!({"name": n, "inputSchema": {}})).collect();
        m.host_received(session, at, &json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}));
    }

    fn active(m: &BridgeModel) -> Vec<String> {
        m.tools.active().expect("known").into_iter().collect()
    }

    #[test]
    fn the_active_set_follows_the_worked_example_of_section_10_with_one_list_changed_per_change() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["delete", "read", "search", "write"]);
        initialized(&mut m, "a");
        let batch = |e: &[&str], d: &[&str], a: &[&str], b: &[&str]| {
            let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
            pb::Envelope::from(pb::BatchUpdateRequest { enable: v(e), disable: v(d), allow: v(a), block: v(b) })
        };
        let steps: Vec<(pb::Envelope, &[&str])> = vec![
            (env::disable_tools(["delete"]), &["read", "search", "write"]),
            (env::enable_tools(["delete"]), &["delete", "read", "search", "write"]),
            (env::set_allowed(["search", "read"]), &["read", "search"]),
            (env::enable_tools(["write"]), &["read", "search", "write"]),
            (env::disable_tools(["read"]), &["search", "write"]),
            (env::set_blocked(["write", "delete"]), &["read", "search"]),
            (env::enable_tools(["write"]), &["read", "search", "write"]),
            (batch(&["search"], &["read"], &["read"], &[]), &["search"]),
            (batch(&[], &[], &["read"], &["write"]), &["search"]),
            (env::set_allowed(["read", "export"]), &["read"]),
            (env::get_active_tools(), &["read"]),
            (env::set_blocked(Vec::<String>::new()), &["delete", "read", "search", "write"]),
        ];
        for (i, (envelope, want)) in steps.into_iter().enumerate() {
            let step = i + 1;
            let at = 100 * step as u64;
            m.tool_sent_at(at, &envelope);
            assert_eq!(active(&m), want, "step {step}");
            let owed = m.listeners["a"].owed.is_some();
            assert_eq!(owed, step != 9 && step != 11, "step {step}: a list_changed is owed exactly after a change");
            if owed {
                m.host_received("a", at + 10, &list_changed());
            }
            tools_list(&mut m, "a", step as u64, at + 20, want);
        }
        assert_eq!(m.finish(5000), vec![]);
    }

    #[test]
    fn a_change_never_announced_to_an_initialized_session_breaks_br_toollist_12() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["a1", "b1"]);
        initialized(&mut m, "a");
        initialized(&mut m, "b");
        m.tool_sent(&env::disable_tools(["a1"]));
        m.tool_sent(&env::disable_tools(["b1"]));
        // One notification may announce both changes; session b gets none.
        m.host_received("a", 50, &list_changed());
        let f = m.finish(5000);
        assert_eq!(reqs(&f), ["BR-TOOLLIST-12"], "{f:?}");
        assert!(f[0].message.contains("\"b\"") && f[0].message.starts_with("2 change"), "{f:?}");
    }

    #[test]
    fn a_list_changed_later_than_t_listchange_breaks_br_toollist_12_and_one_within_it_does_not() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["x", "y"]);
        initialized(&mut m, "a");
        m.tool_sent_at(100, &env::disable_tools(["x"]));
        m.host_received("a", 1100, &list_changed());
        m.tool_sent_at(2000, &env::enable_tools(["x"]));
        m.host_received("a", 3200, &list_changed());
        let f = m.finish(5000);
        assert_eq!(reqs(&f), ["BR-TOOLLIST-12"], "{f:?}");
        assert!(f[0].message.contains("1200 ms"), "{f:?}");
    }

    #[test]
    fn a_tools_list_after_the_list_changed_must_show_the_new_set_but_one_in_flight_may_show_either() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["x", "y"]);
        initialized(&mut m, "a");
        // In flight while the change happens: the old set or the new one.
        m.host_sent("a", &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        m.tool_sent(&env::disable_tools(["x"]));
        let old = json!({"tools": [{"name": "x"}, {"name": "y"}]});
        m.host_received("a", 10, &json!({"jsonrpc": "2.0", "id": 1, "result": old}));
        // Sent before the notification: the bridge may not have read the change yet.
        tools_list(&mut m, "a", 2, 20, &["x", "y"]);
        m.host_received("a", 30, &list_changed());
        tools_list(&mut m, "a", 3, 40, &["y"]);
        tools_list(&mut m, "a", 4, 50, &["x", "y"]);
        let f = m.finish(5000);
        assert_eq!(reqs(&f), ["BR-TOOLLIST-11"], "{f:?}");
        assert!(f[0].message.starts_with("tools/list 4"), "{f:?}");
    }

    #[test]
    fn a_call_results_enable_and_disable_are_in_effect_once_the_host_has_the_calls_response() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["gate", "secret"]);
        initialized(&mut m, "a");
        initialized(&mut m, "b");
        m.host_sent("a", &call(1, "gate"));
        m.tool_received(&env::call_tool("gate", "{}").with_rid("r1"));
        let r = pb::CallToolResponse { disable_tools: vec!["secret".into()], ..Default::default() };
        m.tool_sent(&pb::Envelope { request_id: "r1".into(), msg: Some(Msg::CallResult(r)), ..Default::default() });
        m.host_received("a", 10, &result(1, json!([])));
        // Session a knows from the call's response; b has not been told yet and may see either.
        tools_list(&mut m, "b", 2, 15, &["gate", "secret"]);
        tools_list(&mut m, "a", 3, 20, &["gate", "secret"]);
        m.host_received("a", 30, &list_changed());
        m.host_received("b", 30, &list_changed());
        let f = m.finish(5000);
        assert_eq!(reqs(&f), ["BR-TOOLLIST-11"], "{f:?}");
        assert!(f[0].message.starts_with("tools/list 3"), "{f:?}");
    }

    #[test]
    fn a_list_changed_without_a_change_is_br_toollist_13_but_coalescing_and_late_sessions_are_not() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["x", "y", "z"]);
        initialized(&mut m, "a");
        // Two changes, two notifications (the second change may have been read late).
        m.tool_sent(&env::disable_tools(["x"]));
        m.tool_sent(&env::disable_tools(["y"]));
        m.host_received("a", 10, &list_changed());
        m.host_received("a", 20, &list_changed());
        // A session that initialized after a change may hear of it.
        initialized(&mut m, "b");
        m.host_received("b", 25, &list_changed());
        // No change at all: get_active_tools, a rejected batch, disabling what is disabled.
        m.tool_sent(&env::get_active_tools());
        let rejected =
            pb::BatchUpdateRequest { allow: vec!["x".into()], block: vec!["y".into()], ..Default::default() };
        m.tool_sent(&rejected.into());
        m.tool_sent(&env::disable_tools(["x"]));
        assert!(m.listeners.values().all(|l| l.owed.is_none()), "nothing changed, nothing owed");
        m.host_received("a", 30, &list_changed());
        let f = m.finish(5000);
        assert_eq!(reqs(&f), ["BR-TOOLLIST-13"], "{f:?}");
    }

    #[test]
    fn after_a_restart_the_tool_set_is_not_judged_until_set_allowed_or_set_blocked_makes_it_known() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["x", "y"]);
        initialized(&mut m, "a");
        m.tool_sent(&env::disable_tools(["x"]));
        m.host_received("a", 10, &list_changed());
        m.tool_ended(20);
        // BR-TOOLLIST-15: kept or reset, both are fine; so is a notification about it.
        discovered(&mut m, &["x", "y"]);
        tools_list(&mut m, "a", 1, 30, &["x", "y"]);
        m.host_received("a", 40, &list_changed());
        m.tool_sent(&env::disable_tools(["y"]));
        tools_list(&mut m, "a", 2, 50, &["x", "y"]);
        assert_eq!(m.findings(), &[]);
        // Known again (whether that was a change is not known), and the changes after it are judged.
        m.tool_sent(&env::set_blocked(["y"]));
        m.host_received("a", 60, &list_changed());
        m.tool_sent(&env::disable_tools(["x"]));
        m.host_received("a", 70, &list_changed());
        tools_list(&mut m, "a", 3, 80, &["x"]);
        tools_list(&mut m, "a", 4, 90, &[]);
        let f = m.finish(5000);
        assert_eq!(reqs(&f), ["BR-TOOLLIST-11"], "{f:?}");
        assert!(f[0].message.starts_with("tools/list 3"), "{f:?}");
    }

    #[test]
    fn a_session_without_an_event_stream_is_owed_no_list_changed_and_stray_tool_lists_change_nothing() {
        let mut m = BridgeModel::new();
        discovered(&mut m, &["x"]);
        initialized(&mut m, "a");
        m.host_unlistening("a");
        m.tool_sent(&env::disable_tools(["x"]));
        // A ToolListResponse under a rid the bridge never asked with is not a discovery.
        m.tool_sent(&env::tool_list([env::tool("other", "", "{}")]).with_rid("stray"));
        assert_eq!(active(&m), Vec::<String>::new());
        assert_eq!(m.finish(5000), vec![]);
    }

    #[test]
    fn what_the_tool_process_disables_before_its_first_tool_list_is_in_effect_after_discovery() {
        let mut m = BridgeModel::new();
        m.tool_sent(&env::disable_tools(["x"]));
        discovered(&mut m, &["x", "y"]);
        initialized(&mut m, "a");
        tools_list(&mut m, "a", 1, 10, &["y"]);
        assert_eq!(m.finish(5000), vec![], "no change after discovery, nothing owed");
        // A restart before the first discovery leaves the sets to the bridge (BR-TOOLLIST-15).
        let mut m = BridgeModel::new();
        m.tool_sent(&env::disable_tools(["x"]));
        m.tool_ended(5);
        discovered(&mut m, &["x", "y"]);
        tools_list(&mut m, "a", 1, 10, &["x", "y"]);
        tools_list(&mut m, "a", 2, 20, &["y"]);
        assert_eq!(m.finish(5000), vec![]);
    }
}
