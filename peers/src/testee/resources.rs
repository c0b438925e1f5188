//! Resources, resource templates, prompts and completions of Appendix B.2 (§14–§16).

use std::collections::BTreeMap;

use protomcp_proto::fault::{Fault, on};
use protomcp_proto::pb::{
    CompletionRequest, CompletionResponse, GetPromptRequest, GetPromptResponse, PromptArgument, PromptDefinition,
    PromptListResponse, PromptMessage, ReadResourceResponse, ResourceContent, ResourceDefinition, ResourceListResponse,
    ResourceTemplateDefinition, ResourceTemplateListResponse,
};
use serde_json::json;

pub(crate) const STATIC_URI: &str = "fixture://static";
pub(crate) const STATIC_TEXT: &str = "static-content";
/// Catalogue additions (testees README §3): binary content, a static URI that a template also
/// matches, and a resource whose handler fails.
pub(crate) const BLOB_URI: &str = "fixture://blob";
pub(crate) const BLOB_BYTES: &[u8] = &[0x00, 0xff, 0x10, 0x80];
pub(crate) const ITEM_ZERO_URI: &str = "fixture://item/0";
pub(crate) const ITEM_ZERO_TEXT: &str = "static item zero";
pub(crate) const FAIL_URI: &str = "fixture://fail";
const OCTET_STREAM: &str = "application/octet-stream";
/// The message of every failing fixture handler (resource, prompt, completion).
const FIXTURE_FAILURE: &str = "fixture failure";
pub(crate) const ITEM_TEMPLATE: &str = "fixture://item/{id}";
const ITEM_PREFIX: &str = "fixture://item/";
const TEXT_PLAIN: &str = "text/plain";
/// Completion candidates of the `name` argument of `greet`.
pub(crate) const NAMES: &[&str] = &["alice", "bob", "bobby"];
/// Completion candidates of the `id` argument of the item template.
pub(crate) const IDS: &[&str] = &["1", "2", "10"];

/// One resource of a ResourceListResponse (also the MCP conformance fixture's).
pub(crate) fn resource_def(uri: &str, name: &str, description: &str, mime: &str, size: usize) -> ResourceDefinition {
    ResourceDefinition {
        uri: uri.into(),
        name: name.into(),
        description: description.into(),
        mime_type: mime.into(),
        size: size as i64,
    }
}

/// TP-RESOURCE-01/03/04: the static resources with name, description, mime type and size
/// (none for `fixture://fail`, whose content is never produced).
pub(crate) fn list_resources() -> ResourceListResponse {
    let def = resource_def;
    let mut list = ResourceListResponse {
        resources: vec![
            def(STATIC_URI, "static", "A static text resource", TEXT_PLAIN, STATIC_TEXT.len()),
            def(BLOB_URI, "blob", "Four bytes of binary content", OCTET_STREAM, BLOB_BYTES.len()),
            def(
                ITEM_ZERO_URI,
                "item-zero",
                "A static resource that the item template also matches",
                TEXT_PLAIN,
                ITEM_ZERO_TEXT.len(),
            ),
            def(FAIL_URI, "fail", "A resource whose handler always fails", TEXT_PLAIN, 0),
        ],
    };
    if on(Fault::TpResourceListDropsLast) {
        list.resources.pop();
    }
    list
}

/// TP-RESOURCE-02/03/04: the item template.
pub(crate) fn list_templates() -> ResourceTemplateListResponse {
    if on(Fault::TpResourceTemplatesEmpty) {
        return ResourceTemplateListResponse::default();
    }
    ResourceTemplateListResponse {
        templates: vec![ResourceTemplateDefinition {
            uri_template: if on(Fault::TpResourceTemplateColon) {
                "fixture://item/:id".into()
            } else {
                ITEM_TEMPLATE.into()
            },
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
/// Binary content travels as blob, never as text (TP-RESOURCE-08). The failing handler gives
/// zero contents, with a line on stderr (TP-RESOURCE-10/11).
pub(crate) fn read(uri: &str) -> ReadResourceResponse {
    let content = |mime: &str, text: String, blob: &[u8]| resource_content(uri, mime, text, blob);
    let templated = uri.strip_prefix(ITEM_PREFIX).filter(|id| on(Fault::TpResourceStaticShadowed) && !id.is_empty());
    let found = match uri {
        _ if templated.is_some() => templated.map(|id| content(TEXT_PLAIN, format!("item {id}"), &[])),
        STATIC_URI if on(Fault::TpResourceStaticNewline) => Some(content(TEXT_PLAIN, format!("{STATIC_TEXT}\n"), &[])),
        STATIC_URI => Some(content(TEXT_PLAIN, STATIC_TEXT.into(), &[])),
        ITEM_ZERO_URI => Some(content(TEXT_PLAIN, ITEM_ZERO_TEXT.into(), &[])),
        BLOB_URI if on(Fault::TpResourceBlobAlsoText) => {
            Some(content(OCTET_STREAM, String::from_utf8_lossy(BLOB_BYTES).into_owned(), BLOB_BYTES))
        }
        BLOB_URI => Some(content(OCTET_STREAM, String::new(), BLOB_BYTES)),
        FAIL_URI if on(Fault::TpResourceFailExits) => std::process::exit(1),
        FAIL_URI => {
            super::diag!("the handler of {FAIL_URI} failed: {FIXTURE_FAILURE}");
            None
        }
        _ => uri
            .strip_prefix(ITEM_PREFIX)
            .filter(|id| on(Fault::TpResourceTemplateSlash) || (!id.is_empty() && !id.contains('/')))
            .map(|id| content(TEXT_PLAIN, format!("item {id}"), &[])),
    };
    ReadResourceResponse { contents: found.into_iter().collect() }
}

/// TP-PROMPT-01: `greet` with its one required argument, and `fail` (one optional argument
/// `x`), whose handler always fails.
pub(crate) fn list_prompts() -> PromptListResponse {
    PromptListResponse {
        prompts: vec![
            PromptDefinition {
                name: "greet".into(),
                description: "Greets someone by name".into(),
                arguments: vec![PromptArgument {
                    name: "name".into(),
                    description: "Who to greet".into(),
                    required: !on(Fault::TpPromptRequiredDropped),
                }],
            },
            PromptDefinition {
                name: "fail".into(),
                description: "A prompt whose handler always fails".into(),
                arguments: vec![PromptArgument {
                    name: "x".into(),
                    description: "Ignored; its completion handler fails too".into(),
                    required: false,
                }],
            },
        ],
    }
}

/// `greet` renders one `user` text message (TP-PROMPT-02/03). An unknown prompt, arguments that
/// are not a JSON object of strings, or a missing `name` give zero messages and a description
/// of the problem (TP-PROMPT-04).
pub(crate) fn get_prompt(req: &GetPromptRequest) -> GetPromptResponse {
    let problem = |description: String| GetPromptResponse { description, messages: Vec::new() };
    if req.name == "fail" {
        if on(Fault::TpPromptFailExits) {
            std::process::exit(1);
        }
        // TP-PROMPT-04/05: the failing handler is a problem like any other.
        super::diag!("the handler of prompt fail failed: {FIXTURE_FAILURE}");
        return problem(format!("Prompt fail failed: {FIXTURE_FAILURE}"));
    }
    if req.name != "greet" {
        return problem(format!("Prompt not found: {}", req.name));
    }
    let text = if req.arguments_json.is_empty() { "{}" } else { &req.arguments_json };
    let arguments: BTreeMap<String, String> = match serde_json::from_str(text) {
        Ok(a) => a,
        Err(e) => return problem(format!("Invalid arguments for greet: expected a JSON object of strings ({e})")),
    };
    let quoted = arguments.get("name").map(|n| serde_json::Value::from(n.as_str()).to_string());
    let name = if on(Fault::TpPromptArgumentQuoted) { quoted.as_ref() } else { arguments.get("name") };
    let Some(name) = name else {
        return problem("Invalid arguments for greet: missing required argument \"name\"".into());
    };
    GetPromptResponse {
        description: "A greeting".into(),
        messages: vec![PromptMessage {
            role: if on(Fault::TpPromptRoleSystem) { "system".into() } else { "user".into() },
            content_json: json!({"type": "text", "text": format!("Hello, {name}!")}).to_string(),
        }],
    }
}

/// Completion of the `name` argument of `greet` and of the `id` argument of the item template
/// (TP-COMPLETE-03): the candidates that start with argument_value (taken unchanged,
/// TP-COMPLETE-02), total = their number, has_more false (TP-COMPLETE-04). The handler of
/// argument `x` of prompt `fail` fails: the empty answer (TP-COMPLETE-05). Any other reference
/// or argument gets the empty answer too (TP-COMPLETE-01).
pub(crate) fn complete(req: &CompletionRequest) -> CompletionResponse {
    let candidates = match (req.ref_type.as_str(), req.ref_name.as_str(), req.argument_name.as_str()) {
        ("ref/prompt", "greet", "name") => NAMES,
        ("ref/resource", ITEM_TEMPLATE, "id") if !on(Fault::TpCompleteResourceRefIgnored) => IDS,
        ("ref/prompt", "fail", "x") => {
            if on(Fault::TpCompleteFailExits) {
                std::process::exit(1);
            }
            super::diag!("the completion handler of prompt fail failed: {FIXTURE_FAILURE}");
            return CompletionResponse::default();
        }
        _ => return CompletionResponse::default(),
    };
    let mut value = req.argument_value.as_str();
    if on(Fault::TpCompleteValueCut) {
        value = value.char_indices().nth(1).map_or("", |(i, _)| &value[i..]);
    }
    let values: Vec<String> = candidates.iter().filter(|n| n.starts_with(value)).map(|n| (*n).to_owned()).collect();
    CompletionResponse { total: values.len() as i32, values, has_more: on(Fault::TpCompleteHasMore) }
}

/// One content of a resource read: `text` or `blob` (binary never travels as text,
/// TP-RESOURCE-08), with the URI asked for and a mime type.
pub(crate) fn resource_content(uri: &str, mime: &str, text: String, blob: &[u8]) -> ResourceContent {
    ResourceContent { uri: uri.into(), mime_type: mime.into(), text, blob: blob.to_vec().into() }
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
        assert_eq!(read(ITEM_ZERO_URI).contents[0].text, ITEM_ZERO_TEXT);
        let blob = &read(BLOB_URI).contents[0];
        assert!(blob.text.is_empty() && blob.blob.as_ref() == BLOB_BYTES);
        assert!(read(FAIL_URI).contents.is_empty());
    }

    #[test]
    fn prompts_and_completions() {
        let get =
            |name: &str, args: &str| get_prompt(&GetPromptRequest { name: name.into(), arguments_json: args.into() });
        assert_eq!(
            get("greet", r#"{"name":"Ann"}"#).messages[0].content_json,
            r#"{"text":"Hello, Ann!","type":"text"}"#
        );
        for (name, args) in [
            ("fail", "{}"),
            ("nope", "{}"),
            ("greet", "{}"),
            ("greet", ""),
            ("greet", "[1]"),
            ("greet", r#"{"name":1}"#),
        ] {
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
        assert_eq!(c("ref/resource", ITEM_TEMPLATE, "id", "1").values, ["1", "10"]);
        assert_eq!(c("ref/resource", ITEM_TEMPLATE, "x", ""), CompletionResponse::default());
        assert_eq!(c("ref/prompt", "fail", "x", ""), CompletionResponse::default());
    }
}
