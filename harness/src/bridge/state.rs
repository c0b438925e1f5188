//! Sans-IO state of the reference bridge: the registered tools, the active set with its list
//! modes (spec §10), and the MCP shapes built from Envelope lists. No sockets, no clocks: the
//! I/O side feeds it messages and asks it questions.

use std::collections::BTreeSet;

use protomcp_proto::pb;
use serde_json::{Map, Value, json};

/// The list mode of §10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
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
    mode: Mode,
    disabled: BTreeSet<String>,
    allowed: BTreeSet<String>,
    blocked: BTreeSet<String>,
}

/// Why a ToolDefinition was left out of tools/list (BR-HANDSHAKE-12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub name: String,
    pub reason: String,
}

fn object_schema(text: &str, what: &str) -> Result<(), String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) if o.get("type") == Some(&Value::String("object".into())) => Ok(()),
        Ok(_) => Err(format!("{what} is not a JSON object with \"type\": \"object\"")),
        Err(e) => Err(format!("{what} is not JSON: {e}")),
    }
}

impl ToolSet {
    /// Replaces the registered tools with a new tool list; returns the definitions left out.
    /// The mode and sets are kept (BR-TOOLLIST-15 allows either).
    pub fn register(&mut self, defs: &[pb::ToolDefinition]) -> Vec<Rejected> {
        let mut rejected = Vec::new();
        let mut seen = BTreeSet::new();
        self.tools.clear();
        for d in defs {
            let check = if d.name.is_empty() {
                Err("empty name".to_owned())
            } else if !d.input_schema_json.is_empty() {
                object_schema(&d.input_schema_json, "input_schema_json")
            } else {
                Ok(())
            }
            .and_then(|()| {
                if d.output_schema_json.is_empty() {
                    Ok(())
                } else {
                    object_schema(&d.output_schema_json, "output_schema_json")
                }
            });
            match check {
                Err(reason) => rejected.push(Rejected { name: d.name.clone(), reason }),
                // BR-HANDSHAKE-13: the first definition of a name wins.
                Ok(()) if !seen.insert(d.name.clone()) => {}
                Ok(()) => self.tools.push(d.clone()),
            }
        }
        rejected
    }

    /// Forgets the registrations and resets the mode (a dead tool process, BR-LIFECYCLE-07).
    pub fn clear(&mut self) {
        *self = ToolSet::default();
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn visible(&self, name: &str) -> bool {
        match self.mode {
            Mode::Open => !self.disabled.contains(name),
            Mode::Allow => self.allowed.contains(name),
            Mode::Block => !self.blocked.contains(name),
        }
    }

    /// Definitions of the active set, in registration order.
    pub fn active(&self) -> impl Iterator<Item = &pb::ToolDefinition> {
        self.tools.iter().filter(|t| self.visible(&t.name))
    }

    /// The definition of `name` when it is in the active set (BR-CALL-04).
    pub fn get_active(&self, name: &str) -> Option<&pb::ToolDefinition> {
        self.active().find(|t| t.name == name)
    }

    /// The active set's names in byte-wise order (ActiveToolsResponse, BR-TOOLLIST-08).
    pub fn active_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.active().map(|t| t.name.clone()).collect();
        v.sort();
        v
    }

    /// Definitions of the active set, for comparing before and after an update.
    pub fn snapshot(&self) -> Vec<pb::ToolDefinition> {
        self.active().cloned().collect()
    }

    fn enable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                Mode::Open => {
                    self.disabled.remove(n);
                }
                Mode::Allow => {
                    self.allowed.insert(n.clone());
                }
                Mode::Block => {
                    self.blocked.remove(n);
                }
            }
        }
    }

    fn disable(&mut self, names: &[String]) {
        for n in names {
            match self.mode {
                Mode::Open => {
                    self.disabled.insert(n.clone());
                }
                Mode::Allow => {
                    self.allowed.remove(n);
                }
                Mode::Block => {
                    self.blocked.insert(n.clone());
                }
            }
        }
    }

    fn switch(&mut self, mode: Mode, names: &[String]) {
        self.disabled.clear();
        self.allowed.clear();
        self.blocked.clear();
        if names.is_empty() {
            self.mode = Mode::Open;
            return;
        }
        self.mode = mode;
        let set: BTreeSet<String> = names.iter().cloned().collect();
        match mode {
            Mode::Allow => self.allowed = set,
            Mode::Block => self.blocked = set,
            Mode::Open => {}
        }
    }

    /// Applies one operation (BR-TOOLLIST-02…07, 09). Returns whether the active set or its
    /// definitions changed, i.e. whether `list_changed` is due (BR-TOOLLIST-12/13).
    pub fn apply(&mut self, op: &ToolOp) -> bool {
        let before = self.snapshot();
        match op {
            ToolOp::Enable(n) => self.enable(n),
            ToolOp::Disable(n) => self.disable(n),
            ToolOp::SetAllowed(n) => self.switch(Mode::Allow, n),
            ToolOp::SetBlocked(n) => self.switch(Mode::Block, n),
            ToolOp::Get => {}
            ToolOp::Batch { enable, disable, allow, block } => {
                if !allow.is_empty() && !block.is_empty() {
                    return false;
                }
                if !allow.is_empty() {
                    self.switch(Mode::Allow, allow);
                }
                if !block.is_empty() {
                    self.switch(Mode::Block, block);
                }
                self.enable(enable);
                self.disable(disable);
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

/// One MCP `Tool` object (§22.1 tools/list row; BR-MCP-11, BR-HANDSHAKE-11).
pub fn mcp_tool(d: &pb::ToolDefinition) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), Value::String(d.name.clone()));
    if !d.title.is_empty() {
        t.insert("title".into(), Value::String(d.title.clone()));
    }
    if !d.description.is_empty() {
        t.insert("description".into(), Value::String(d.description.clone()));
    }
    let input = if d.input_schema_json.is_empty() {
        json!({"type": "object"})
    } else {
        serde_json::from_str(&d.input_schema_json).unwrap_or_else(|_| json!({"type": "object"}))
    };
    t.insert("inputSchema".into(), input);
    if !d.output_schema_json.is_empty()
        && let Ok(v) = serde_json::from_str::<Value>(&d.output_schema_json)
    {
        t.insert("outputSchema".into(), v);
    }
    let mut ann = Map::new();
    for (flag, key) in [
        (d.read_only_hint, "readOnlyHint"),
        (d.destructive_hint, "destructiveHint"),
        (d.idempotent_hint, "idempotentHint"),
        (d.open_world_hint, "openWorldHint"),
    ] {
        if flag {
            ann.insert(key.into(), Value::Bool(true));
        }
    }
    if !ann.is_empty() {
        t.insert("annotations".into(), Value::Object(ann));
    }
    Value::Object(t)
}

fn is_block(v: &Value) -> bool {
    v.get("type").is_some_and(Value::is_string) && v.is_object()
}

/// MCP `content` from result_json (BR-CALL-07…10): array elements that are content objects
/// unchanged, other elements as text blocks of their JSON, a non-array as one text block, and
/// an empty string as no content.
pub fn content_of(result_json: &str) -> Vec<Value> {
    if result_json.is_empty() {
        return Vec::new();
    }
    match serde_json::from_str::<Value>(result_json) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .map(|v| if is_block(&v) { v } else { json!({"type": "text", "text": v.to_string()}) })
            .collect(),
        _ => vec![json!({"type": "text", "text": result_json})],
    }
}

/// A CallToolResponse as an MCP CallToolResult (§22.1 tools/call row, BR-CALL-06…13).
/// `has_output_schema` enables the derivation of BR-CALL-12.
pub fn call_result(r: &pb::CallToolResponse, has_output_schema: bool) -> Value {
    let content = content_of(&r.result_json);
    let mut out = Map::new();
    let mut structured = None;
    if !r.structured_content_json.is_empty() {
        // BR-CALL-11: only an object becomes structuredContent.
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&r.structured_content_json) {
            structured = Some(v);
        }
    } else if has_output_schema
        && !r.is_error
        && content.len() == 1
        && let Some(Value::String(text)) = content[0].get("text")
        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text)
    {
        structured = Some(v);
    }
    out.insert("content".into(), Value::Array(content));
    if let Some(s) = structured {
        out.insert("structuredContent".into(), s);
    }
    out.insert("isError".into(), Value::Bool(r.is_error));
    if let Some(e) = &r.error {
        let mut te = Map::new();
        for (k, v) in [("errorCode", &e.error_code), ("message", &e.message), ("suggestion", &e.suggestion)] {
            if !v.is_empty() {
                te.insert(k.into(), Value::String(v.clone()));
            }
        }
        te.insert("retryable".into(), Value::Bool(e.retryable));
        out.insert("_meta".into(), json!({"protomcp/toolError": te}));
    }
    Value::Object(out)
}

/// resources/list entries (BR-RESOURCE-01).
pub fn mcp_resources(defs: &[pb::ResourceDefinition]) -> Vec<Value> {
    defs.iter()
        .filter(|d| !d.uri.is_empty() && !d.uri.chars().any(char::is_whitespace) && d.uri.contains(':'))
        .map(|d| {
            let mut m = Map::new();
            m.insert("uri".into(), Value::String(d.uri.clone()));
            m.insert("name".into(), Value::String(if d.name.is_empty() { d.uri.clone() } else { d.name.clone() }));
            if !d.description.is_empty() {
                m.insert("description".into(), Value::String(d.description.clone()));
            }
            if !d.mime_type.is_empty() {
                m.insert("mimeType".into(), Value::String(d.mime_type.clone()));
            }
            if d.size > 0 {
                m.insert("size".into(), Value::from(d.size));
            }
            Value::Object(m)
        })
        .collect()
}

fn valid_template(t: &str) -> bool {
    if t.is_empty() || t.chars().any(char::is_whitespace) {
        return false;
    }
    let mut depth = 0;
    for c in t.chars() {
        match c {
            '{' if depth == 0 => depth = 1,
            '}' if depth == 1 => depth = 0,
            '{' | '}' => return false,
            _ => {}
        }
    }
    depth == 0
}

/// resources/templates/list entries (BR-RESOURCE-02, BR-RESOURCE-07).
pub fn mcp_templates(defs: &[pb::ResourceTemplateDefinition]) -> Vec<Value> {
    defs.iter()
        .filter(|d| valid_template(&d.uri_template))
        .map(|d| {
            let mut m = Map::new();
            m.insert("uriTemplate".into(), Value::String(d.uri_template.clone()));
            let name = if d.name.is_empty() { d.uri_template.clone() } else { d.name.clone() };
            m.insert("name".into(), Value::String(name));
            if !d.description.is_empty() {
                m.insert("description".into(), Value::String(d.description.clone()));
            }
            if !d.mime_type.is_empty() {
                m.insert("mimeType".into(), Value::String(d.mime_type.clone()));
            }
            Value::Object(m)
        })
        .collect()
}

/// prompts/list entries (BR-PROMPT-01).
pub fn mcp_prompts(defs: &[pb::PromptDefinition]) -> Vec<Value> {
    defs.iter()
        .filter(|d| !d.name.is_empty())
        .map(|d| {
            let mut m = Map::new();
            m.insert("name".into(), Value::String(d.name.clone()));
            if !d.description.is_empty() {
                m.insert("description".into(), Value::String(d.description.clone()));
            }
            if !d.arguments.is_empty() {
                let args: Vec<Value> = d
                    .arguments
                    .iter()
                    .map(|a| {
                        let mut am = Map::new();
                        am.insert("name".into(), Value::String(a.name.clone()));
                        if !a.description.is_empty() {
                            am.insert("description".into(), Value::String(a.description.clone()));
                        }
                        if a.required {
                            am.insert("required".into(), Value::Bool(true));
                        }
                        Value::Object(am)
                    })
                    .collect();
                m.insert("arguments".into(), Value::Array(args));
            }
            Value::Object(m)
        })
        .collect()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (resource blobs, BR-RESOURCE-04).
pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// resources/read contents (BR-RESOURCE-04); `None` when there are none (BR-RESOURCE-05).
pub fn mcp_contents(requested: &str, r: &pb::ReadResourceResponse) -> Option<Vec<Value>> {
    if r.contents.is_empty() {
        return None;
    }
    Some(
        r.contents
            .iter()
            .map(|c| {
                let mut m = Map::new();
                let uri = if c.uri.is_empty() { requested } else { &c.uri };
                m.insert("uri".into(), Value::String(uri.to_owned()));
                if !c.mime_type.is_empty() {
                    m.insert("mimeType".into(), Value::String(c.mime_type.clone()));
                }
                if !c.blob.is_empty() {
                    m.insert("blob".into(), Value::String(base64(&c.blob)));
                } else {
                    m.insert("text".into(), Value::String(c.text.clone()));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// The eight MCP log levels in ascending severity (§19).
pub const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A LogMessage level as an MCP level (BR-LOG-03).
pub fn log_level(level: &str) -> &'static str {
    if level == "warn" {
        return "warning";
    }
    LEVELS.iter().find(|l| **l == level).copied().unwrap_or("info")
}

/// Severity rank of an MCP level (0 = debug).
pub fn level_rank(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(1)
}

/// LogMessage data (BR-LOG-02).
pub fn log_data(data_json: &str) -> Value {
    serde_json::from_str(data_json).unwrap_or_else(|_| Value::String(data_json.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use protomcp_proto::envelopes::tool;

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
        assert_eq!(t.mode(), Mode::Open);
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

    #[test]
    fn result_mapping() {
        assert_eq!(content_of(""), Vec::<Value>::new());
        assert_eq!(content_of("plain"), vec![json!({"type":"text","text":"plain"})]);
        assert_eq!(
            content_of(r#"[{"type":"image","data":"AA==","mimeType":"image/png"}, 5]"#),
            vec![json!({"type":"image","data":"AA==","mimeType":"image/png"}), json!({"type":"text","text":"5"})]
        );
        let r = pb::CallToolResponse {
            is_error: true,
            result_json: r#"[{"type":"text","text":"soft"}]"#.into(),
            error: Some(pb::ToolError {
                error_code: "E".into(),
                message: "m".into(),
                suggestion: String::new(),
                retryable: true,
            }),
            ..Default::default()
        };
        let v = call_result(&r, false);
        assert_eq!(v["isError"], json!(true));
        assert_eq!(v["_meta"]["protomcp/toolError"], json!({"errorCode":"E","message":"m","retryable":true}));
        let s = pb::CallToolResponse { structured_content_json: "[1]".into(), ..Default::default() };
        assert!(call_result(&s, true).get("structuredContent").is_none());
    }

    #[test]
    fn base64_and_levels() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(log_level("warn"), "warning");
        assert_eq!(log_level("bogus"), "info");
        assert_eq!(log_data("not json"), json!("not json"));
    }
}
