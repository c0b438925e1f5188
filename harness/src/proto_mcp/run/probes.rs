//! The probes: steps that walk what the server offers (tools, resources, versions) and judge
//! each answer.

use super::ctx::*;
use super::{
    BTreeMap, BTreeSet, FileDescriptorSet, McpMessage, Message, Payload, ServerProcess, Value, json, message_frame, pb,
};

/// `^buf\.build/owner/repo/pkg.Message:version$` (§2.5).
pub fn bsr_ref_ok(r: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"^buf\.build/[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9_-]*/([A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*:[^/:\s]+$").expect("valid")
    })
    .is_match(r)
}

pub(super) fn probe_tools(s: &mut ServerProcess, ctx: &mut Ctx, include_schemas: bool) -> Result<(), StepFailure> {
    let (tools, page_of) = list_all_tools(s, ctx, pb::ListToolsRequest { include_schemas, ..Default::default() })?;
    s.note_harness(&format!("{} tools in {} pages", tools.len(), page_of.last().copied().unwrap_or(1)));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (t, &page) in tools.iter().zip(&page_of) {
        if t.name.is_empty() && ctx.wants("PM-TOOLS-02") {
            return Err(fail(&["PM-TOOLS-02"], "a tool with an empty name"));
        }
        if let Some(first) = seen.insert(&t.name, page) {
            // On one page it is a duplicate name; across pages, the chain repeats (PM-TOOLS-07).
            let r = if first == page { "PM-TOOLS-02" } else { "PM-TOOLS-07" };
            if ctx.wants(r) || ctx.wants("PM-TOOLS-02") {
                return Err(fail(
                    &[r],
                    format!("tool name {:?} on page {page} was listed before on page {first}", t.name),
                ));
            }
        }
    }
    for t in &tools {
        match &t.schema_source {
            None if ctx.wants("PM-TOOLS-03") => {
                return Err(fail(
                    &["PM-TOOLS-03"],
                    format!("tool {:?} carries neither bsr_ref nor inline_schema", t.name),
                ));
            }
            Some(pb::tool::SchemaSource::BsrRef(r)) if r.is_empty() && ctx.wants("PM-TOOLS-03") => {
                return Err(fail(&["PM-TOOLS-03"], format!("tool {:?} carries an empty bsr_ref", t.name)));
            }
            Some(pb::tool::SchemaSource::BsrRef(r)) if !bsr_ref_ok(r) && ctx.wants("PM-SCHEMA-01") => {
                return Err(fail(
                    &["PM-SCHEMA-01"],
                    format!("tool {:?}: bsr_ref {r:?} is not buf.build/<owner>/<repo>/<pkg.Message>:<version>", t.name),
                ));
            }
            Some(pb::tool::SchemaSource::InlineSchema(fds)) if ctx.wants("PM-SCHEMA-04") => check_inline(&t.name, fds)?,
            Some(pb::tool::SchemaSource::InlineSchema(fds)) if ctx.wants("PM-SCHEMA-05") => {
                if let Some(missing) = missing_dependency(fds) {
                    ctx.deviate(
                        s,
                        "PM-SCHEMA-05",
                        format!("tool {:?}: inline_schema imports {missing:?}, which the set does not hold", t.name),
                    );
                }
            }
            _ => {}
        }
    }
    for (req, label) in
        [("PM-SCHEMA-02", "include_schemas was true"), ("PM-SCHEMA-03", "the session declared no supports_bsr_refs")]
    {
        if ctx.wants(req) && !ctx.checks.is_empty() {
            for t in &tools {
                if !matches!(t.schema_source, Some(pb::tool::SchemaSource::InlineSchema(_))) {
                    ctx.deviate(s, req, format!("tool {:?} carries no inline_schema although {label}", t.name));
                }
            }
        }
    }
    let caps = ctx.init.as_ref().and_then(|i| i.capabilities);
    if ctx.wants("PM-INIT-09") && !tools.is_empty() && caps.as_ref().is_none_or(|c| c.tools.is_none()) {
        return Err(fail(
            &["PM-INIT-09"],
            format!("{} tools listed, but capabilities.tools was not advertised", tools.len()),
        ));
    }
    let with_ref = tools.iter().find(|t| matches!(t.schema_source, Some(pb::tool::SchemaSource::BsrRef(_))));
    if ctx.wants("PM-INIT-10")
        && let Some(t) = with_ref
        && !caps.as_ref().is_some_and(|c| c.supports_bsr_refs)
    {
        return Err(fail(
            &["PM-INIT-10"],
            format!("tool {:?} carries a bsr_ref, but capabilities.supports_bsr_refs was not true", t.name),
        ));
    }
    if let Some(pb::tool::SchemaSource::BsrRef(r)) = with_ref.and_then(|t| t.schema_source.clone()) {
        ctx.vars.insert("first_bsr_ref".into(), Value::String(r));
    }
    ctx.vars.insert("tool_count".into(), Value::String(tools.len().to_string()));
    Ok(())
}

pub(super) fn check_inline(name: &str, fds: &FileDescriptorSet) -> Result<(), StepFailure> {
    // Re-decode through the wire to be sure the bytes are a FileDescriptorSet.
    let fds = FileDescriptorSet::decode(fds.encode_to_vec().as_slice())
        .map_err(|e| fail(&["PM-SCHEMA-04"], format!("tool {name:?}: inline_schema does not decode: {e}")))?;
    if fds.file.is_empty() {
        return Err(fail(&["PM-SCHEMA-04"], format!("tool {name:?}: inline_schema holds no file")));
    }
    if let Some(f) = fds.file.iter().find(|f| f.name().is_empty()) {
        return Err(fail(
            &["PM-SCHEMA-04"],
            format!("tool {name:?}: a file of inline_schema has no name (package {:?})", f.package()),
        ));
    }
    if fds.file.iter().all(|f| f.message_type.is_empty()) {
        return Err(fail(&["PM-SCHEMA-04"], format!("tool {name:?}: inline_schema defines no message type")));
    }
    Ok(())
}

pub(super) fn missing_dependency(fds: &FileDescriptorSet) -> Option<String> {
    let names: BTreeSet<&str> = fds.file.iter().map(|f| f.name()).collect();
    fds.file
        .iter()
        .flat_map(|f| f.dependency.iter())
        .find(|d| !d.starts_with("google/protobuf/") && !names.contains(d.as_str()))
        .cloned()
}

pub(super) fn probe_resources(s: &mut ServerProcess, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let advertised = ctx.init.as_ref().and_then(|i| i.capabilities.as_ref()).is_some_and(|c| c.resources.is_some());
    let (mut all, mut page_of, mut cursor, mut pages) = (Vec::new(), Vec::new(), String::new(), 0usize);
    loop {
        let m = ask(
            s,
            ctx,
            Payload::ListResourcesRequest(pb::ListResourcesRequest { cursor: cursor.clone() }),
            "list resources",
        )?;
        match m.payload.clone() {
            Some(Payload::ListResourcesResponse(page)) => {
                pages += 1;
                page_of.extend(std::iter::repeat_n(pages, page.resources.len()));
                all.extend(page.resources);
                if page.next_cursor.is_empty() {
                    break;
                }
                if pages >= 1000 {
                    return Err(fail(&["PM-RESOURCES-03"], "the resource listing did not end within 1000 pages"));
                }
                cursor = page.next_cursor;
            }
            Some(Payload::ErrorResponse(e))
                if pages == 0 && !advertised && e.code == protomcp_proto::mcp::code::METHOD_NOT_FOUND =>
            {
                s.note_harness("resources not offered (-32601, not advertised)");
                return Ok(());
            }
            _ => {
                return Err(fail(
                    &["PM-RESOURCES-01"],
                    format!(
                        "list_resources_request answered by {}{}",
                        describe(&m),
                        if advertised { " although capabilities.resources was advertised" } else { "" }
                    ),
                ));
            }
        }
    }
    s.note_harness(&format!("{} resources in {pages} pages", all.len()));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (r, &page) in all.iter().zip(&page_of) {
        if r.uri.is_empty() && ctx.wants("PM-RESOURCES-02") {
            return Err(fail(&["PM-RESOURCES-02"], format!("resource {:?} has an empty uri", r.name)));
        }
        if let Some(first) = seen.insert(&r.uri, page) {
            let req = if first == page { "PM-RESOURCES-02" } else { "PM-RESOURCES-03" };
            if ctx.wants(req) || ctx.wants("PM-RESOURCES-02") {
                return Err(fail(&[req], format!("uri {:?} on page {page} was listed before on page {first}", r.uri)));
            }
        }
    }
    if ctx.wants("PM-INIT-11") && !all.is_empty() && !advertised {
        return Err(fail(
            &["PM-INIT-11"],
            format!("{} resources listed, but capabilities.resources was not advertised", all.len()),
        ));
    }
    if let Some(first) = all.first() {
        ctx.vars.insert("first_resource_uri".into(), Value::String(first.uri.clone()));
        if ctx.wants("PM-RESOURCES-04") {
            let uri = first.uri.clone();
            let m = ask(
                s,
                ctx,
                Payload::ReadResourceRequest(pb::ReadResourceRequest { uri: uri.clone() }),
                "read the first listed resource",
            )?;
            let Some(Payload::ReadResourceResponse(r)) = m.payload.clone() else {
                return Err(fail(
                    &["PM-RESOURCES-04"],
                    format!("reading the listed {uri:?} was answered by {}", describe(&m)),
                ));
            };
            if r.contents.is_empty() {
                return Err(fail(&["PM-RESOURCES-04"], format!("reading {uri:?} returned no content")));
            }
            if let Some(c) = r.contents.iter().find(|c| c.content.is_none()) {
                return Err(fail(
                    &["PM-RESOURCES-04"],
                    format!("a content of {uri:?} (uri {:?}) sets neither text nor blob", c.uri),
                ));
            }
        }
    }
    Ok(())
}

pub(super) fn probe_bsr_filter(s: &mut ServerProcess, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let (all, _) = list_all_tools(s, ctx, Default::default())?;
    let refs: Vec<(String, String)> = all
        .iter()
        .filter_map(|t| match &t.schema_source {
            Some(pb::tool::SchemaSource::BsrRef(r)) => Some((t.name.clone(), r.clone())),
            _ => None,
        })
        .collect();
    if let Some((_, r)) = refs.first() {
        let (got, _) =
            list_all_tools(s, ctx, pb::ListToolsRequest { bsr_refs: vec![r.clone()], ..Default::default() })?;
        if let Some(t) =
            got.iter().find(|t| !matches!(&t.schema_source, Some(pb::tool::SchemaSource::BsrRef(x)) if x == r))
        {
            return Err(fail(
                &["PM-TOOLS-04"],
                format!(
                    "filter [{r:?}] returned tool {:?} whose schema source is {:?}",
                    t.name,
                    t.schema_source.as_ref().map(|x| match x {
                        pb::tool::SchemaSource::BsrRef(b) => b.clone(),
                        _ => "inline_schema".into(),
                    })
                ),
            ));
        }
        let want: BTreeSet<&str> = refs.iter().filter(|(_, x)| x == r).map(|(n, _)| n.as_str()).collect();
        let have: BTreeSet<&str> = got.iter().map(|t| t.name.as_str()).collect();
        let missing: Vec<&&str> = want.difference(&have).collect();
        if ctx.wants("PM-TOOLS-05") && !missing.is_empty() {
            ctx.deviate(
                s,
                "PM-TOOLS-05",
                format!("filter [{r:?}] left out {missing:?}, which the unfiltered listing shows with that bsr_ref"),
            );
        }
    } else {
        s.note_harness("no tool carries a bsr_ref: only the one-letter filter is checked");
    }
    let (got, _) = list_all_tools(s, ctx, pb::ListToolsRequest { bsr_refs: vec!["a".into()], ..Default::default() })?;
    if let Some(t) =
        got.iter().find(|t| !matches!(&t.schema_source, Some(pb::tool::SchemaSource::BsrRef(x)) if x == "a"))
    {
        return Err(fail(
            &["PM-TOOLS-04"],
            format!(
                "filter [\"a\"] returned {} tools, e.g. {:?}: entries are matched as search text, not exactly",
                got.len(),
                t.name
            ),
        ));
    }
    Ok(())
}

pub(super) fn probe_init_flags(s: &mut ServerProcess, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let Some(init) = ctx.init.clone() else { return Err(fail(&[], "probe init_flags needs a handshake first")) };
    match &init.capabilities {
        None => {
            if ctx.wants("PM-INIT-08") {
                ctx.deviate(s, "PM-INIT-08", "the initialize_response carries no capabilities (field 2)".into());
            }
        }
        Some(c) if ctx.wants("PM-INIT-12") => {
            let mut set = Vec::new();
            if c.supports_streaming {
                set.push("supports_streaming");
            }
            if c.resources.as_ref().is_some_and(|r| r.supports_subscribe) {
                set.push("resources.supports_subscribe");
            }
            if c.prompts.is_some() {
                set.push("prompts");
            }
            for f in set {
                ctx.deviate(s, "PM-INIT-12", format!("advertises {f}, which proto-mcp 1.0 cannot carry"));
            }
        }
        Some(_) => {}
    }
    Ok(())
}

pub(super) fn probe_version(s: &mut ServerProcess, ctx: &mut Ctx, sent: &str) -> Result<(), StepFailure> {
    let Some(init) = ctx.init.clone() else { return Err(fail(&[], "probe version needs a handshake first")) };
    let v = init.protocol_version;
    let re = regex::Regex::new(r"^1\.\d+\.\d+$").expect("valid");
    if !re.is_match(&v) {
        return Err(fail(
            &["PM-INIT-02"],
            format!("asked for {sent}; the server answered protocol_version {v:?}, not 1.MINOR.PATCH"),
        ));
    }
    if sent == "1.0.0" && !v.starts_with("1.0.") {
        ctx.deviate(s, "PM-INIT-02", format!("asked for 1.0.0; the server answered {v}, a newer minor"));
    }
    Ok(())
}

pub(super) fn probe_newer_major(s: &mut ServerProcess, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let id = ctx.fresh_id();
    let (frame, _) = message_frame(&json!({"id": id, "initialize_request": {"protocol_version": "2.0.0", "capabilities": {"supports_bsr_refs": true, "encodings": ["protobuf"]}}, "pad_to": 64}))
        .map_err(|e| fail(&[], e.to_string()))?;
    s.send(&frame, None, &format!("initialize_request 2.0.0 id={id}"));
    let m = s
        .answer(id, within(None))
        .ok_or_else(|| fail(&["PM-INIT-03", "PM-INIT-01"], format!("no answer to initialize 2.0.0 (id {id})")))?;
    match &m.payload {
        Some(Payload::ErrorResponse(e)) if e.code == protomcp_proto::mcp::code::VERSION_UNSUPPORTED => Ok(()),
        Some(Payload::InitializeResponse(r)) if r.protocol_version.starts_with("1.") => Ok(()),
        Some(Payload::InitializeResponse(r)) => {
            Err(fail(&["PM-INIT-03"], format!("asked for 2.0.0, the server claims {:?}", r.protocol_version)))
        }
        _ => Err(fail(
            &["PM-INIT-03"],
            format!("initialize 2.0.0 answered by {}; expected -33002 or a 1.x initialize_response", describe(&m)),
        )),
    }
}

pub(super) fn probe_safe_call(s: &mut ServerProcess, ctx: &mut Ctx) -> Result<(), StepFailure> {
    let Some(tool) = ctx.target.safe_tool.clone() else { return Err(fail(&[], "no safe tool configured")) };
    if ctx.wants("PM-SCHEMA-08") {
        let (all, _) = list_all_tools(s, ctx, Default::default())?;
        if let Some(pb::tool::SchemaSource::BsrRef(r)) =
            all.iter().find(|t| t.name == tool.name).and_then(|t| t.schema_source.clone())
        {
            let message = r.rsplit_once(':').map(|(a, _)| a).unwrap_or(&r).rsplit('/').next().unwrap_or("");
            let want = format!("type.googleapis.com/{message}");
            if tool.type_url != want {
                return Err(fail(
                    &[],
                    format!(
                        "configuration: the safe tool's type_url {:?} is not {want:?} (from its bsr_ref {r:?}); PM-SCHEMA-08 is judged with that one",
                        tool.type_url
                    ),
                ));
            }
        }
    }
    let args = protomcp_proto::mcp::prost_types::Any { type_url: tool.type_url.clone(), value: tool.value.clone() };
    let m = ask(
        s,
        ctx,
        Payload::CallToolRequest(pb::CallToolRequest {
            name: tool.name.clone(),
            arguments: Some(args),
            metadata: Default::default(),
        }),
        "call the safe tool",
    )?;
    let reqs: Vec<&str> =
        if ctx.wants("PM-SCHEMA-08") { vec!["PM-TOOLS-10", "PM-SCHEMA-08"] } else { vec!["PM-TOOLS-10"] };
    let Some(Payload::CallToolResponse(r)) = m.payload.clone() else {
        return Err(fail(&reqs, format!("the safe tool call was answered by {}", describe(&m))));
    };
    match r.result {
        None => Err(fail(&["PM-TOOLS-10"], "call_tool_response sets neither success nor error")),
        Some(pb::call_tool_response::Result::Error(e)) if ctx.wants("PM-SCHEMA-08") => Err(fail(
            &["PM-SCHEMA-08"],
            format!("the safe tool call with its bsr_ref's type_url failed: {} {:?}", e.code, e.message),
        )),
        Some(pb::call_tool_response::Result::Error(_)) => Ok(()),
        Some(pb::call_tool_response::Result::Success(ok)) => {
            if ctx.wants("PM-TOOLS-11") {
                for (i, c) in ok.content.iter().enumerate() {
                    match &c.content {
                        None => {
                            return Err(fail(
                                &["PM-TOOLS-11"],
                                format!("content item {i} sets none of text, image, data"),
                            ));
                        }
                        Some(pb::tool_content::Content::Data(a)) if a.type_url.is_empty() => {
                            return Err(fail(
                                &["PM-TOOLS-11"],
                                format!("content item {i}: a data Any with an empty type_url"),
                            ));
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        }
    }
}

pub(super) fn probe_many(s: &mut ServerProcess, ctx: &mut Ctx, total: u64, batch: u64) -> Result<(), StepFailure> {
    let batch = batch.max(1);
    let mut answered = 0u64;
    let mut sent = 0u64;
    while sent < total {
        let n = batch.min(total - sent);
        let first = ctx.next_id + 1;
        let mut bytes = Vec::new();
        for _ in 0..n {
            let id = ctx.fresh_id();
            bytes.extend_from_slice(&McpMessage::with(id, Payload::ListToolsRequest(Default::default())).to_frame());
        }
        s.send(&bytes, None, &format!("{n} list_tools_requests, ids {first}..={}", ctx.next_id));
        sent += n;
        for id in first..=ctx.next_id {
            match s.answer(id, within(Some(30_000))) {
                Some(_) => answered += 1,
                None => {
                    return Err(fail(
                        &["PM-LIFECYCLE-12"],
                        format!(
                            "request {} of {total} (id {id}) got no answer; {answered} answered",
                            sent - n + (id - first) + 1
                        ),
                    ));
                }
            }
        }
    }
    s.note_harness(&format!("{answered} of {total} answered"));
    Ok(())
}
