//! Reference testee, resources, prompts and completions (§14–§16, Appendix B.2).

use crate::common::*;
use protomcp_harness::testee::Options;
use protomcp_proto::Envelope;
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{CompletionResponse, ResourceContent};
use serde_json::{Value, json};

async fn ask(p: &mut Peer, request: Envelope) -> Msg {
    p.send(request.with_rid("q")).await;
    let e = p.envelope().await;
    assert_eq!(e.request_id, "q", "TP-CONCUR-01");
    e.msg.expect("an arm")
}

#[tokio::test]
async fn resource_lists() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-RESOURCE-01/03/04.
    let Msg::ResourceListResponse(l) = ask(&mut p, env::list_resources()).await else { panic!() };
    // The static resource of Appendix B plus the catalogue's additions (testees README §3).
    let uris: Vec<&str> = l.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["fixture://static", "fixture://blob", "fixture://item/0", "fixture://fail"]);
    let r = &l.resources[0];
    assert_eq!(
        (r.uri.as_str(), r.name.as_str(), r.mime_type.as_str(), r.size),
        ("fixture://static", "static", "text/plain", 14)
    );
    assert!(!r.description.is_empty());
    // TP-RESOURCE-02.
    let Msg::ResourceTemplateListResponse(t) = ask(&mut p, env::list_resource_templates()).await else { panic!() };
    assert_eq!(t.templates.len(), 1);
    let t = &t.templates[0];
    assert_eq!(
        (t.uri_template.as_str(), t.name.as_str(), t.mime_type.as_str()),
        ("fixture://item/{id}", "item", "text/plain")
    );
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn resource_reads() {
    let mut p = Peer::ready(Options::default()).await;
    let read = |uri: &str| env::read_resource(uri);
    let text_of = |uri: &str, text: &str| ResourceContent {
        uri: uri.into(),
        mime_type: "text/plain".into(),
        text: text.into(),
        blob: Default::default(),
    };
    // TP-RESOURCE-05/08/09.
    let Msg::ReadResourceResponse(r) = ask(&mut p, read("fixture://static")).await else { panic!() };
    assert_eq!(r.contents, [text_of("fixture://static", "static-content")]);
    // TP-RESOURCE-06.
    for id in ["42", "a b", "ünï", "x%2Fy"] {
        let uri = format!("fixture://item/{id}");
        let Msg::ReadResourceResponse(r) = ask(&mut p, read(&uri)).await else { panic!() };
        assert_eq!(r.contents, [text_of(&uri, &format!("item {id}"))]);
    }
    // TP-RESOURCE-06/10: no empty placeholder, no `/` in it, the whole URI must match; unknown
    // URIs are answered with zero contents (D-11).
    for uri in ["fixture://item/", "fixture://item/a/b", "fixture://items/1", "fixture://static/", "", "\u{0}"] {
        let Msg::ReadResourceResponse(r) = ask(&mut p, read(uri)).await else { panic!() };
        assert!(r.contents.is_empty(), "{uri:?}: {r:?}");
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn prompts() {
    let mut p = Peer::ready(Options::default()).await;
    // TP-PROMPT-01.
    let Msg::PromptListResponse(l) = ask(&mut p, env::list_prompts()).await else { panic!() };
    // greet of Appendix B plus the catalogue's failing prompt (testees README §3).
    let names: Vec<&str> = l.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["greet", "fail"]);
    let greet = &l.prompts[0];
    assert_eq!(greet.name, "greet");
    assert!(!greet.description.is_empty());
    assert_eq!(greet.arguments.len(), 1);
    assert_eq!((greet.arguments[0].name.as_str(), greet.arguments[0].required), ("name", true));
    // TP-PROMPT-02/03.
    let Msg::GetPromptResponse(g) = ask(&mut p, env::get_prompt("greet", r#"{"name":"Zoë"}"#)).await else { panic!() };
    assert_eq!(g.messages.len(), 1);
    assert_eq!(g.messages[0].role, "user");
    let content: Value = serde_json::from_str(&g.messages[0].content_json).unwrap();
    assert_eq!(content, json!({"type":"text","text":"Hello, Zoë!"}));
    // TP-PROMPT-04/05: zero messages and a description of the problem; the testee lives on.
    for (name, args) in [("nope", "{}"), ("greet", ""), ("greet", "{}"), ("greet", "{"), ("greet", r#"{"name":7}"#)] {
        let Msg::GetPromptResponse(g) = ask(&mut p, env::get_prompt(name, args)).await else { panic!() };
        assert!(g.messages.is_empty() && !g.description.is_empty(), "{name} {args}: {g:?}");
    }
    assert_eq!(p.close().await, 0);
}

#[tokio::test]
async fn completions() {
    let mut p = Peer::ready(Options::default()).await;
    let complete = |t: &str, n: &str, a: &str, v: &str| env::completion(t, n, a, v);
    for (value, want) in
        [("", &["alice", "bob", "bobby"][..]), ("b", &["bob", "bobby"]), ("bobb", &["bobby"]), ("z", &[]), ("B", &[])]
    {
        let Msg::CompletionResponse(c) = ask(&mut p, complete("ref/prompt", "greet", "name", value)).await else {
            panic!()
        };
        // TP-COMPLETE-02/04.
        assert_eq!(c.values, want, "{value:?}");
        assert_eq!(c.total as usize, want.len());
        assert!(!c.has_more);
    }
    // TP-COMPLETE-01/03: other references are answered, empty.
    for (t, n, a) in [
        ("ref/resource", "fixture://item/{id}", "id"),
        ("ref/prompt", "greet", "other"),
        ("ref/prompt", "nope", "name"),
        ("", "", ""),
    ] {
        let Msg::CompletionResponse(c) = ask(&mut p, complete(t, n, a, "a")).await else { panic!() };
        assert_eq!(c, CompletionResponse::default());
    }
    assert_eq!(p.close().await, 0);
}
