//! The registered tools of a bridge and its active set with the list modes of spec §10: the
//! tool-list control operations (#7–#12, a call result's lists) and whether each changed what
//! tools/list shows.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::fault::{self, Fault};
use crate::pb;

/// The list mode of §10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListMode {
    #[default]
    Open,
    Allow,
    Block,
}

/// One tool-list control operation (#7–#12, or the lists of a call result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOp {
    Enable(Vec<String>),
    Disable(Vec<String>),
    SetAllowed(Vec<String>),
    SetBlocked(Vec<String>),
    Get,
    Batch { enable: Vec<String>, disable: Vec<String>, allow: Vec<String>, block: Vec<String> },
}

impl ToolOp {
    /// The operation an Envelope carries, if it is a control message.
    pub fn of(msg: &pb::envelope::Msg) -> Option<ToolOp> {
        use pb::envelope::Msg;
        Some(match msg {
            Msg::EnableTools(m) => ToolOp::Enable(m.tool_names.clone()),
            Msg::DisableTools(m) => ToolOp::Disable(m.tool_names.clone()),
            Msg::SetAllowed(m) => ToolOp::SetAllowed(m.tool_names.clone()),
            Msg::SetBlocked(m) => ToolOp::SetBlocked(m.tool_names.clone()),
            Msg::GetActiveTools(_) => ToolOp::Get,
            Msg::Batch(m) => ToolOp::Batch {
                enable: m.enable.clone(),
                disable: m.disable.clone(),
                allow: m.allow.clone(),
                block: m.block.clone(),
            },
            _ => return None,
        })
    }
}

/// The registered tools (validated, deduplicated) and the active set's mode and name sets.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    /// Valid definitions in registration order, one per name (BR-HANDSHAKE-12/13).
    tools: Vec<pb::ToolDefinition>,
    mode: ListMode,
    disabled: BTreeSet<String>,
    allowed: BTreeSet<String>,
    blocked: BTreeSet<String>,
    /// Tools whose output schema is a JSON object whose `type` is not `"object"`: left out of
    /// legacy tools/list (BR-HANDSHAKE-12), served to modern requests (BR-STATELESS-35).
    modern_only: BTreeSet<String>,
}

/// Why a ToolDefinition was left out of tools/list (BR-HANDSHAKE-12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub name: String,
    pub reason: Invalid,
}

/// Why a tool definition is left out of tools/list (BR-HANDSHAKE-12): the tool process's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("empty name")]
    EmptyName,
    /// `field` (input_schema_json, output_schema_json) is JSON but not an object schema.
    #[error("{field} is not a JSON object with \"type\": \"object\"")]
    NotObjectSchema { field: &'static str },
    #[error("{field} is not JSON: {error}")]
    NotJson { field: &'static str, error: String },
    /// output_schema_json is a JSON object whose `type` is not `"object"`: left out of legacy
    /// tools/list only; modern requests get it (BR-STATELESS-35).
    #[error(
        "output_schema_json is a JSON object whose \"type\" is not \"object\" (served to MCP 2026-07-28 requests only)"
    )]
    ModernOnly,
}

fn object_schema(text: &str, field: &'static str) -> Result<(), Invalid> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) if o.get("type") == Some(&Value::String("object".into())) => Ok(()),
        Ok(_) => Err(Invalid::NotObjectSchema { field }),
        Err(e) => Err(Invalid::NotJson { field, error: e.to_string() }),
    }
}

impl ToolSet {
    /// Replaces the registered tools with a new tool list; returns the definitions left out.
    /// The mode and sets are kept (BR-TOOLLIST-15 allows either).
    pub fn register(&mut self, defs: &[pb::ToolDefinition]) -> Vec<Rejected> {
        let mut rejected = Vec::new();
        let mut seen = BTreeSet::new();
        if !fault::on(Fault::BrToollistRegisterMerges) {
            self.tools.clear();
        }
        self.modern_only.clear();
        for d in defs {
            let check = if d.name.is_empty() {
                Err(Invalid::EmptyName)
            } else if !d.input_schema_json.is_empty() && !fault::on(Fault::BrHandshakeSchemaUnchecked) {
                object_schema(&d.input_schema_json, "input_schema_json")
            } else {
                Ok(())
            }
            .and_then(|()| {
                if d.output_schema_json.is_empty() {
                    Ok(())
                } else {
                    match object_schema(&d.output_schema_json, "output_schema_json") {
                        Err(Invalid::NotObjectSchema { .. })
                            if serde_json::from_str::<Value>(&d.output_schema_json).is_ok_and(|v| v.is_object()) =>
                        {
                            Err(Invalid::ModernOnly)
                        }
                        other => other,
                    }
                }
            });
            match check {
                Err(Invalid::ModernOnly) if !seen.contains(&d.name) => {
                    rejected.push(Rejected { name: d.name.clone(), reason: Invalid::ModernOnly });
                    seen.insert(d.name.clone());
                    self.modern_only.insert(d.name.clone());
                    self.tools.push(d.clone());
                }
                Err(reason) => rejected.push(Rejected { name: d.name.clone(), reason }),
                // BR-HANDSHAKE-13: the first definition of a name wins.
                Ok(()) if !seen.insert(d.name.clone()) && !fault::on(Fault::BrHandshakeDuplicatesListed) => {}
                Ok(()) => self.tools.push(d.clone()),
            }
        }
        rejected
    }

    /// Forgets the registrations and resets the mode (a dead tool process, BR-LIFECYCLE-07).
    pub fn clear(&mut self) {
        *self = ToolSet::default();
    }

    pub fn mode(&self) -> ListMode {
        self.mode
    }

    fn visible(&self, name: &str) -> bool {
        match self.mode {
            ListMode::Open => !self.disabled.contains(name),
            ListMode::Allow => self.allowed.contains(name),
            ListMode::Block => !self.blocked.contains(name),
        }
    }

    /// Definitions of the active set, in registration order.
    pub fn active(&self) -> impl Iterator<Item = &pb::ToolDefinition> {
        self.tools.iter().filter(|t| self.visible(&t.name))
    }

    /// The definition of `name` when it is in the active set as a legacy session sees it
    /// (BR-CALL-04).
    pub fn get_active(&self, name: &str) -> Option<&pb::ToolDefinition> {
        if fault::on(Fault::BrToollistCallDisabled) {
            return self.tools.iter().find(|t| t.name == name && !self.modern_only.contains(&t.name));
        }
        self.legacy_active().find(|t| t.name == name)
    }

    /// The definition of `name` when it is in the active set as a modern request sees it.
    pub fn get_active_modern(&self, name: &str) -> Option<&pb::ToolDefinition> {
        self.active().find(|t| t.name == name)
    }

    /// The active set as legacy tools/list shows it: without the tools only modern requests get
    /// (BR-HANDSHAKE-12, BR-STATELESS-35).
    pub fn legacy_active(&self) -> impl Iterator<Item = &pb::ToolDefinition> {
        self.active().filter(|t| !self.modern_only.contains(&t.name))
    }

    /// The active set's names in byte-wise order (ActiveToolsResponse, BR-TOOLLIST-08).
    pub fn active_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.active().map(|t| t.name.clone()).collect();
        if fault::on(Fault::BrToollistUnregisteredActive) && self.mode == ListMode::Allow {
            v.extend(self.allowed.iter().cloned());
            v.dedup();
        }
        v.sort();
        v.dedup();
        v
    }

    /// Definitions of the active set, for comparing before and after an update.
    pub fn snapshot(&self) -> Vec<pb::ToolDefinition> {
        self.active().cloned().collect()
    }

    fn enable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                ListMode::Open => {
                    self.disabled.remove(n);
                }
                ListMode::Allow => {
                    self.allowed.insert(n.clone());
                }
                ListMode::Block if fault::on(Fault::BrToollistBlockSwapped) => {
                    self.blocked.insert(n.clone());
                }
                ListMode::Block => {
                    self.blocked.remove(n);
                }
            }
        }
    }

    fn disable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                ListMode::Open => {
                    self.disabled.insert(n.clone());
                }
                ListMode::Allow => {
                    self.allowed.remove(n);
                }
                ListMode::Block if fault::on(Fault::BrToollistBlockSwapped) => {
                    self.blocked.remove(n);
                }
                ListMode::Block => {
                    self.blocked.insert(n.clone());
                }
            }
        }
    }

    fn switch(&mut self, mode: ListMode, names: &[String]) {
        self.disabled.clear();
        self.allowed.clear();
        self.blocked.clear();
        if names.is_empty() && !fault::on(Fault::BrToollistEmptySwitchNotOpen) {
            self.mode = ListMode::Open;
            return;
        }
        self.mode = mode;
        let set: BTreeSet<String> = names.iter().cloned().collect();
        match mode {
            ListMode::Allow => self.allowed = set,
            ListMode::Block => self.blocked = set,
            ListMode::Open => {}
        }
    }

    /// Applies one operation (BR-TOOLLIST-02…07, 09). Returns whether the active set or its
    /// definitions changed, i.e. whether `list_changed` is due (BR-TOOLLIST-12/13).
    pub fn apply(&mut self, op: &ToolOp) -> bool {
        let before = self.snapshot();
        match op {
            ToolOp::Enable(n) => self.enable(n),
            ToolOp::Disable(n) => self.disable(n),
            ToolOp::SetAllowed(n) if fault::on(Fault::BrToollistAllowAsBlock) => self.switch(ListMode::Block, n),
            ToolOp::SetAllowed(n) => self.switch(ListMode::Allow, n),
            ToolOp::SetBlocked(n) => self.switch(ListMode::Block, n),
            ToolOp::Get if fault::on(Fault::BrToollistGetResets) => self.switch(ListMode::Open, &[]),
            ToolOp::Get => {}
            ToolOp::Batch { enable, disable, allow, block } => {
                if !allow.is_empty() && !block.is_empty() && !fault::on(Fault::BrToollistConflictApplied) {
                    return false;
                }
                if !allow.is_empty() {
                    self.switch(ListMode::Allow, allow);
                }
                if !block.is_empty() {
                    self.switch(ListMode::Block, block);
                }
                if fault::on(Fault::BrToollistBatchDisableFirst) {
                    self.disable(disable);
                    self.enable(enable);
                } else {
                    self.enable(enable);
                    self.disable(disable);
                }
            }
        }
        before != self.snapshot()
    }

    /// The lists of a call result: enable, then disable (BR-CALL-14).
    pub fn apply_result_lists(&mut self, enable: &[String], disable: &[String]) -> bool {
        let before = self.snapshot();
        self.enable(enable);
        self.disable(disable);
        before != self.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelopes::tool;
    use serde_json::json;

    use super::super::shapes::mcp_tool;

    fn names(s: &[&str]) -> Vec<String> {
        s.iter().map(|n| (*n).to_owned()).collect()
    }

    /// The worked example of spec §10, step by step.
    #[test]
    fn worked_example() {
        let mut t = ToolSet::default();
        t.register(&["delete", "read", "search", "write"].map(|n| tool(n, "d", "")));
        let steps: Vec<(ToolOp, &[&str], bool)> = vec![
            (ToolOp::Disable(names(&["delete"])), &["read", "search", "write"], true),
            (ToolOp::Enable(names(&["delete"])), &["delete", "read", "search", "write"], true),
            (ToolOp::SetAllowed(names(&["search", "read"])), &["read", "search"], true),
            (ToolOp::Enable(names(&["write"])), &["read", "search", "write"], true),
            (ToolOp::Disable(names(&["read"])), &["search", "write"], true),
            (ToolOp::SetBlocked(names(&["write", "delete"])), &["read", "search"], true),
            (ToolOp::Enable(names(&["write"])), &["read", "search", "write"], true),
            (
                ToolOp::Batch {
                    allow: names(&["read"]),
                    enable: names(&["search"]),
                    disable: names(&["read"]),
                    block: vec![],
                },
                &["search"],
                true,
            ),
            (
                ToolOp::Batch { allow: names(&["read"]), block: names(&["write"]), enable: vec![], disable: vec![] },
                &["search"],
                false,
            ),
            (ToolOp::SetAllowed(names(&["read", "export"])), &["read"], true),
            (ToolOp::Get, &["read"], false),
            (ToolOp::SetBlocked(vec![]), &["delete", "read", "search", "write"], true),
        ];
        for (i, (op, want, changed)) in steps.into_iter().enumerate() {
            assert_eq!(t.apply(&op), changed, "step {}", i + 1);
            assert_eq!(t.active_names(), names(want), "step {}", i + 1);
        }
        assert_eq!(t.mode(), ListMode::Open);
    }

    #[test]
    fn invalid_and_duplicate_definitions() {
        let mut t = ToolSet::default();
        let mut bad_out = tool("bad_out", "d", "");
        bad_out.output_schema_json = "[1]".into();
        let rej = t.register(&[
            tool("", "d", ""),
            tool("a", "first", ""),
            tool("a", "second", ""),
            tool("s", "d", r#"{"type":"string"}"#),
            bad_out,
        ]);
        assert_eq!(rej.len(), 3);
        assert_eq!(t.active_names(), names(&["a"]));
        assert_eq!(t.get_active("a").unwrap().description, "first");
        assert_eq!(mcp_tool(t.get_active("a").unwrap())["inputSchema"], json!({"type": "object"}));
    }
}
