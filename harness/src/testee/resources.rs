//! Resources, resource templates, prompts and completions of Appendix B.2 (§14–§16).

use std::collections::BTreeMap;

use protomcp_proto::pb::{
    CompletionRequest, CompletionResponse, GetPromptRequest, GetPromptResponse, PromptArgument, PromptDefinition,
    PromptListResponse, PromptMessage, ReadResourceResponse, ResourceContent, ResourceDefinition, ResourceListResponse,
    ResourceTemplateDefinition, ResourceTemplateListResponse,
};
use serde_json::json;

pub(crate) const STATIC_URI: &str = "fixture://static";
pub(crate) const STATIC_TEXT: &str = "static-content";
pub(crate) const ITEM_TEMPLATE: &str = "fixture://item/{id}";
const ITEM_PREFIX: &str = "fixture://item/";
const TEXT_PLAIN: &str = "text/plain";
/// Completion candidates of the `name` argument of `greet`.
pub(crate) const NAMES: &[&str] = &["alice", "bob", "bobby"];

/// TP-RESOURCE-01/03/04: the static resource with name, description, mime type and size.
pub(crate) fn list_resources() -> ResourceListResponse {
    ResourceListResponse {
        resources: vec![ResourceDefinition {
            uri: STATIC_URI.into(),
            name: "static".into(),
            description: "A static text resource".into(),
            mime_type: TEXT_PLAIN.into(),
            size: STATIC_TEXT.len() as i64,
        }],
    }
}

/// TP-RESOURCE-02/03/04: the item template.
pub(crate) fn list_templates() -> ResourceTemplateListResponse {
    ResourceTemplateListResponse {
        templates: vec![ResourceTemplateDefinition {
            uri_template: ITEM_TEMPLATE.into(),
            name: "item".into(),
            description: "One item by id".into(),
            mime_type: TEXT_PLAIN.into(),
        }],
    }
}

/// The contents of `uri`: the static resource wins over a template (TP-RESOURCE-07); `{id}`
/// matches one or more characters other than `/`, taken as they are (no percent-decoding), and
/// the whole URI must match (TP-RESOURCE-06); anything else is zero contents (TP-RESOURCE-10,
/// D-11). Contents carry the requested URI and a mime type, as text (TP-RESOURCE-08/09).
pub(crate) fn read(uri: &str) -> ReadResourceResponse {
    let text = if uri == STATIC_URI {
        Some(STATIC_TEXT.to_owned())
    } else {
        uri.strip_prefix(ITEM_PREFIX).filter(|id| !id.is_empty() && !id.contains('/')).map(|id| format!("item {id}"))
    };
    ReadResourceResponse {
        contents: text
            .map(|text| ResourceContent {
                uri: uri.into(),
                mime_type: TEXT_PLAIN.into(),
                text,
                blob: Default::default(),
            })
            .into_iter()
            .collect(),
    }
}

/// TP-PROMPT-01: `greet` with its one required argument.
pub(crate) fn list_prompts() -> PromptListResponse {
    PromptListResponse {
        prompts: vec![PromptDefinition {
            name: "greet".into(),
            description: "Greets someone by name".into(),
            arguments: vec![PromptArgument { name: "name".into(), description: "Who to greet".into(), required: true }],
        }],
    }
}

/// `greet` renders one `user` text message (TP-PROMPT-02/03). An unknown prompt, arguments that
/// are not a JSON object of strings, or a missing `name` give zero messages and a description
/// of the problem (TP-PROMPT-04).
pub(crate) fn get_prompt(req: &GetPromptRequest) -> GetPromptResponse {
    let problem = |description: String| GetPromptResponse { description, messages: Vec::new() };
    if req.name != "greet" {
        return problem(format!("Prompt not found: {}", req.name));
    }
    let text = if req.arguments_json.is_empty() { "{}" } else { &req.arguments_json };
    let arguments: BTreeMap<String, String> = match serde_json::from_str(text) {
        Ok(a) => a,
        Err(e) => return problem(format!("Invalid arguments for greet: expected a JSON object of strings ({e})")),
    };
    let Some(name) = arguments.get("name") else {
        return problem("Invalid arguments for greet: missing required argument \"name\"".into());
    };
    GetPromptResponse {
        description: "A greeting".into(),
        messages: vec![PromptMessage {
            role: "user".into(),
            content_json: json!({"type": "text", "text": format!("Hello, {name}!")}).to_string(),
        }],
    }
}

/// Completion of the `name` argument of `greet`: the candidates that start with
/// argument_value (taken unchanged, TP-COMPLETE-02), total = their number, has_more false
/// (TP-COMPLETE-04). Any other reference or argument gets the empty answer (TP-COMPLETE-01).
pub(crate) fn complete(req: &CompletionRequest) -> CompletionResponse {
    if req.ref_type != "ref/prompt" || req.ref_name != "greet" || req.argument_name != "name" {
        return CompletionResponse::default();
    }
    let values: Vec<String> =
        NAMES.iter().filter(|n| n.starts_with(req.argument_value.as_str())).map(|n| (*n).to_owned()).collect();
    CompletionResponse { total: values.len() as i32, values, has_more: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads() {
        assert_eq!(read(STATIC_URI).contents[0].text, "static-content");
        assert_eq!(read("fixture://item/42").contents[0].text, "item 42");
        assert_eq!(read("fixture://item/a%20b").contents[0].text, "item a%20b");
        for nothing in ["fixture://item/", "fixture://item/a/b", "fixture://other", "", "fixture://static/x"] {
            assert!(read(nothing).contents.is_empty(), "{nothing}");
        }
        assert_eq!(list_resources().resources[0].size, 14);
    }

    #[test]
    fn prompts_and_completions() {
        let get =
            |name: &str, args: &str| get_prompt(&GetPromptRequest { name: name.into(), arguments_json: args.into() });
        assert_eq!(
            get("greet", r#"{"name":"Ann"}"#).messages[0].content_json,
            r#"{"text":"Hello, Ann!","type":"text"}"#
        );
        for (name, args) in
            [("nope", "{}"), ("greet", "{}"), ("greet", ""), ("greet", "[1]"), ("greet", r#"{"name":1}"#)]
        {
            let r = get(name, args);
            assert!(r.messages.is_empty() && !r.description.is_empty(), "{name} {args}");
        }
        let c = |t: &str, n: &str, a: &str, v: &str| {
            complete(&CompletionRequest {
                ref_type: t.into(),
                ref_name: n.into(),
                argument_name: a.into(),
                argument_value: v.into(),
            })
        };
        assert_eq!(c("ref/prompt", "greet", "name", "bo").values, ["bob", "bobby"]);
        assert_eq!(c("ref/prompt", "greet", "name", "bo").total, 2);
        assert_eq!(c("ref/prompt", "greet", "name", "").total, 3);
        assert_eq!(c("ref/resource", ITEM_TEMPLATE, "id", ""), CompletionResponse::default());
    }
}
