//! The protomcp-conform fixture (spec Appendix B, `harness/testees/README.md`) written with the
//! protomcp Rust SDK 0.3.1, through its public API only, the way its guide writes tools.
//!
//! `protomcp-testee-rust` serves the plain fixture; `protomcp-testee-rust --middleware` adds the
//! three protocol middleware `guard`, `mirror` and `broken` (Appendix B.3).
//!
//! Not here, because the SDK's public API cannot express them (see `protomcp-conform.toml`):
//! hidden tools, output schemas / structured content, the tool-list API (`narrow`), logging to
//! the bridge (`logit`), sampling (`ask`), roots (`roots`) and streams (`stream_big`).

use std::collections::BTreeMap;
use std::time::Duration;

use protomcp::{
    middleware, register_completion, register_prompt, register_resource, register_resource_template, tool, ArgDef,
    CompletionResult, PromptArg, PromptDef, PromptMessage, ResourceContent, ResourceDef, ResourceTemplateDef,
    ToolResult,
};
use serde_json::value::RawValue;
use serde_json::Value;

/// The largest `n` of `big` / `big_err`: result_json stays within 64 MiB (the contract's limit).
const MAX_BIG: i64 = 67_108_837;

fn register_tools() {
    tool("echo")
        .description("Returns its text argument")
        .arg(ArgDef::string("text"))
        .handler(|_ctx, args| ToolResult::new(args["text"].as_str().unwrap_or("")))
        .register();

    tool("add")
        .description("Adds two integers")
        .arg(ArgDef::int("a"))
        .arg(ArgDef::int("b"))
        .handler(|_ctx, args| {
            let a = args["a"].as_i64().unwrap_or(0);
            let b = args["b"].as_i64().unwrap_or(0);
            ToolResult::new(format!("{}", a as i128 + b as i128))
        })
        .register();

    // The SDK's handlers return a ToolResult; the only way for one to fail is to panic.
    tool("fail").description("Always fails by panicking").handler(|_ctx, _args| panic!("fixture failure")).register();

    tool("fail_soft")
        .description("Returns a structured, retryable error")
        .handler(|_ctx, _args| ToolResult::error("soft failure", "E_FIXTURE", "retry later", true))
        .register();

    tool("slow")
        .description("Counts to steps, 100 ms a step, reporting progress; stops when cancelled")
        .arg(ArgDef::int("steps"))
        .handler(|ctx, args| {
            let steps = args["steps"].as_i64().unwrap_or(0);
            for i in 1..=steps {
                std::thread::sleep(Duration::from_millis(100));
                if ctx.is_cancelled() {
                    return ToolResult::new("cancelled");
                }
                ctx.report_progress(i, steps);
            }
            ToolResult::new(format!("done {steps}"))
        })
        .register();

    tool("big")
        .description("Returns n times the letter x")
        .arg(ArgDef::int("n"))
        .handler(|_ctx, args| match big_n(&args) {
            Some(n) => ToolResult::new("x".repeat(n)),
            None => bad_n(),
        })
        .register();

    tool("big_err")
        .description("Returns n times the letter x as an error")
        .arg(ArgDef::int("n"))
        .handler(|_ctx, args| match big_n(&args) {
            Some(n) => {
                let mut r = ToolResult::error("x".repeat(n), "E_BIG", "", false);
                r.message = "big error".to_string();
                r
            }
            None => bad_n(),
        })
        .register();

    tool("toggle")
        .description("Enables or disables the tool secret")
        .arg(ArgDef::boolean("enable"))
        .handler(|_ctx, args| {
            let mut r = ToolResult::new("ok");
            if args["enable"].as_bool().unwrap_or(false) {
                r.enable_tools = vec!["secret".to_string()];
            } else {
                r.disable_tools = vec!["secret".to_string()];
            }
            r
        })
        .register();

    // Appendix B registers secret hidden; ToolBuilder has no way to say so (see the manifest).
    tool("secret").description("Returns secret").handler(|_ctx, _args| ToolResult::new("secret")).register();
}

/// `n` of big / big_err when it is within the limit.
fn big_n(args: &Value) -> Option<usize> {
    args["n"].as_i64().filter(|n| (0..=MAX_BIG).contains(n)).map(|n| n as usize)
}

/// The result for an `n` out of range.
fn bad_n() -> ToolResult {
    ToolResult::error(format!("n must be an integer from 0 to {MAX_BIG}"), "INVALID_ARGUMENT", "", false)
}

fn register_resources() {
    register_resource(ResourceDef {
        uri: "fixture://static".to_string(),
        name: "static".to_string(),
        description: "A fixed text".to_string(),
        mime_type: "text/plain".to_string(),
        handler: Box::new(|uri| vec![ResourceContent::text(uri, "static-content")]),
    });
    register_resource(ResourceDef {
        uri: "fixture://blob".to_string(),
        name: "blob".to_string(),
        description: "Four bytes of binary content".to_string(),
        mime_type: "application/octet-stream".to_string(),
        handler: Box::new(|uri| {
            vec![ResourceContent {
                uri: uri.to_string(),
                text: String::new(),
                blob: vec![0x00, 0xff, 0x10, 0x80],
                mime_type: "application/octet-stream".to_string(),
            }]
        }),
    });
    register_resource(ResourceDef {
        uri: "fixture://item/0".to_string(),
        name: "item-zero".to_string(),
        description: "A static resource the item template also matches".to_string(),
        mime_type: "text/plain".to_string(),
        handler: Box::new(|uri| vec![ResourceContent::text(uri, "static item zero")]),
    });
    register_resource(ResourceDef {
        uri: "fixture://fail".to_string(),
        name: "fail".to_string(),
        description: "A resource whose handler fails".to_string(),
        mime_type: "text/plain".to_string(),
        handler: Box::new(|_uri| panic!("fixture failure")),
    });
    register_resource_template(ResourceTemplateDef {
        uri_template: "fixture://item/{id}".to_string(),
        name: "item".to_string(),
        description: "One item by id".to_string(),
        mime_type: "text/plain".to_string(),
        handler: Box::new(|uri| match uri.strip_prefix("fixture://item/") {
            Some(id) => vec![ResourceContent::text(uri, &format!("item {id}"))],
            None => Vec::new(),
        }),
    });
}

fn register_prompts() {
    register_prompt(PromptDef {
        name: "greet".to_string(),
        description: "Greets someone by name".to_string(),
        arguments: vec![PromptArg {
            name: "name".to_string(),
            description: "Who to greet".to_string(),
            required: true,
        }],
        // No name (or not a string): no messages, the only "problem" this API can express.
        handler: Box::new(|args| match args["name"].as_str() {
            Some(name) => vec![PromptMessage { role: "user".to_string(), content: format!("Hello, {name}!") }],
            None => Vec::new(),
        }),
    });
    register_prompt(PromptDef {
        name: "fail".to_string(),
        description: "A prompt whose handler fails".to_string(),
        arguments: vec![PromptArg { name: "x".to_string(), description: "Anything".to_string(), required: false }],
        handler: Box::new(|_args| panic!("fixture failure")),
    });
}

/// The candidates starting with the typed prefix.
fn complete(candidates: &'static [&'static str]) -> protomcp::completion::CompletionHandler {
    Box::new(move |prefix| {
        let values: Vec<String> = candidates.iter().filter(|c| c.starts_with(prefix)).map(|c| c.to_string()).collect();
        CompletionResult { total: values.len() as i32, values, has_more: false }
    })
}

fn register_completions() {
    register_completion("ref/prompt", "greet", "name", complete(&["alice", "bob", "bobby"]));
    register_completion("ref/resource", "fixture://item/{id}", "id", complete(&["1", "2", "10"]));
    register_completion("ref/prompt", "fail", "x", Box::new(|_prefix| panic!("fixture failure")));
}

/// The reply of a middleware that changes nothing.
fn pass() -> std::collections::HashMap<String, String> {
    Default::default()
}

fn register_middleware() {
    middleware("guard", 1, |phase, tool_name, _args, _result, _is_error| {
        if phase == "before" && tool_name == "secret" {
            return [("reject", "true"), ("reject_reason", "blocked by guard")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        }
        pass()
    });
    middleware("mirror", 10, |phase, tool_name, args_json, _result, is_error| match phase {
        "before" => {
            // Every other member is kept as it was spelled.
            let mut args: BTreeMap<String, Box<RawValue>> =
                serde_json::from_str(if args_json.is_empty() { "{}" } else { args_json })
                    .expect("mirror: the arguments are not a JSON object");
            let mark = serde_json::to_string(&format!("before:{tool_name}")).expect("a string serializes");
            args.insert("mw".to_string(), RawValue::from_string(mark).expect("valid JSON"));
            let args = serde_json::to_string(&args).expect("a map serializes");
            [("arguments_json".to_string(), args)].into_iter().collect()
        }
        "after" => {
            let text = format!("after:{tool_name}:{is_error}");
            let result = serde_json::json!([{"type": "text", "text": text}]).to_string();
            [("result_json".to_string(), result)].into_iter().collect()
        }
        _ => pass(),
    });
    middleware("broken", 20, |_phase, tool_name, _args, _result, _is_error| {
        if tool_name == "boom" {
            panic!("broken middleware fails on boom");
        }
        pass()
    });
}

#[tokio::main]
async fn main() {
    let with_middleware = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--middleware") => true,
        Some(other) => {
            eprintln!("usage: protomcp-testee-rust [--middleware] (unknown argument {other:?})");
            std::process::exit(2);
        }
    };
    register_tools();
    register_resources();
    register_prompts();
    register_completions();
    if with_middleware {
        register_middleware();
    }
    protomcp::run().await;
}
