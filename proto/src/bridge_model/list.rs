//! The active tool set and the list_changed notifications each change owes (§10).

use super::{BTreeSet, BridgeModel, HostRequest, ListMode, Msg, T_LISTCHANGE, Value, pb};

impl BridgeModel {
    /// A tools/list result shows exactly an active set the bridge may have had between the
    /// request's floor and now (BR-TOOLLIST-11).
    pub(super) fn tools_listed(&mut self, id: &Value, req: &HostRequest, result: &Value) {
        let paged = result.get("nextCursor").is_some_and(|c| !c.is_null())
            || req.params.get("cursor").is_some_and(|c| !c.is_null());
        let Some(tools) = result.get("tools").and_then(Value::as_array) else { return };
        // A modern request's list also holds the tools only modern requests get
        // (BR-STATELESS-35); the model follows the legacy active set only.
        if req.modern() {
            return;
        }
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
    pub(super) fn list_changed(&mut self, session: &str, now_ms: u64) {
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
    pub(super) fn tools_updated(&mut self, before: Option<BTreeSet<String>>, now_ms: Option<u64>) -> Option<usize> {
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
    pub(super) fn tool_list_control(&mut self, env: &pb::Envelope, now_ms: Option<u64>) {
        let before = self.tools.active();
        let t = &mut self.tools;
        if t.fresh {
            // BR-TOOLLIST-01: a bridge that has just started is open with empty sets; what the
            // tool process changes before its first tool list applies to them (BR-TOOLLIST-07).
            t.fresh = false;
            t.mode = Some(ListMode::Open);
        }
        match &env.msg {
            Some(Msg::ToolList(list)) if t.discovery.remove(&env.request_id) => {
                // A definition that breaks TP-HANDSHAKE-04/05 is left out (BR-HANDSHAKE-12).
                let names = list.tools.iter().filter(|d| valid_definition(d)).map(|d| d.name.clone()).collect();
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
            Some(Msg::SetAllowed(r)) => t.set(ListMode::Allow, &r.tool_names),
            Some(Msg::SetBlocked(r)) => t.set(ListMode::Block, &r.tool_names),
            Some(Msg::Batch(b)) if b.allow.is_empty() || b.block.is_empty() => {
                if !b.allow.is_empty() {
                    t.set(ListMode::Allow, &b.allow);
                } else if !b.block.is_empty() {
                    t.set(ListMode::Block, &b.block);
                }
                t.enable(&b.enable);
                t.disable(&b.disable);
            }
            _ => return,
        }
        self.tools_updated(before, now_ms);
    }
}

/// Whether a tool definition keeps TP-HANDSHAKE-04/05: a name, and schemas that are empty or JSON
/// objects whose `type` is `"object"`.
fn valid_definition(d: &pb::ToolDefinition) -> bool {
    let object = |schema: &str| {
        schema.is_empty()
            || serde_json::from_str::<Value>(schema)
                .is_ok_and(|v| v.get("type").and_then(Value::as_str) == Some("object"))
    };
    !d.name.is_empty() && object(&d.input_schema_json) && object(&d.output_schema_json)
}
