//! What the steps and probes of a running scenario share: its state, step failures, one
//! request and its answer.

use super::{
    Arm, BTreeSet, Captures, Duration, Finding, Instant, McpMessage, Payload, ServerProcess, T_REPLY, Target, pb,
};

/// Why a step failed: the requirements it breaks and what was seen.
pub(super) struct StepFailure {
    pub(super) broken: Vec<String>,
    pub(super) message: String,
}

pub(super) fn fail(reqs: &[&str], message: impl Into<String>) -> StepFailure {
    StepFailure { broken: reqs.iter().map(|r| (*r).to_owned()).collect(), message: message.into() }
}

/// State of one running scenario.
pub(super) struct Ctx<'a> {
    pub(super) target: &'a Target,
    pub(super) features: &'a BTreeSet<String>,
    /// The configured names (the safe tool), what probes bind and what patterns capture:
    /// the values of `${name}`.
    pub(super) vars: Captures,
    pub(super) init: Option<pb::InitializeResponse>,
    pub(super) next_id: u64,
    /// SHOULD-level findings of steps (deviation: true) and probes.
    pub(super) deviations: Vec<Finding>,
    /// Requirements checked by steps that passed.
    pub(super) held: Vec<String>,
    /// Requirements the current step checks (a probe evaluates only these when non-empty).
    pub(super) checks: Vec<String>,
}

impl Ctx<'_> {
    pub(super) fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(super) fn wants(&self, id: &str) -> bool {
        self.checks.is_empty() || self.checks.iter().any(|c| c == id)
    }

    pub(super) fn deviate(&mut self, s: &mut ServerProcess, requirement: &str, message: String) {
        s.note_harness(&format!("deviation {requirement}: {message}"));
        self.deviations.push(Finding { requirement: requirement.into(), message });
    }
}

pub(super) fn within(ms: Option<u64>) -> Instant {
    Instant::now() + ms.map(Duration::from_millis).unwrap_or(T_REPLY)
}

pub(super) fn describe(m: &McpMessage) -> String {
    match (&m.payload, m.error()) {
        (_, Some(e)) => format!("error_response code {} ({:?})", e.code, e.message),
        (Some(p), None) => Arm::of(p).to_string(),
        (None, None) => "a message with no payload".into(),
    }
}

/// One request and its answer (a probe's building block).
pub(super) fn ask(
    s: &mut ServerProcess,
    ctx: &mut Ctx,
    payload: Payload,
    label: &str,
) -> Result<McpMessage, StepFailure> {
    let id = ctx.fresh_id();
    let arm = Arm::of(&payload);
    s.send(&McpMessage::with(id, payload).to_frame(), None, &format!("{label} ({arm} id={id})"));
    s.answer(id, within(None)).ok_or_else(|| {
        let r = match arm {
            Arm::ListResourcesRequest => "PM-RESOURCES-01",
            Arm::CallToolRequest => "PM-TOOLS-10",
            Arm::ReadResourceRequest => "PM-RESOURCES-04",
            _ => "PM-TOOLS-01",
        };
        fail(&[r, "PM-LIFECYCLE-03"], format!("{arm} (id {id}) got no answer within {} ms", T_REPLY.as_millis()))
    })
}

/// Every page of a tool listing: the tools, and for each the number of its page (from 1).
pub(super) fn list_all_tools(
    s: &mut ServerProcess,
    ctx: &mut Ctx,
    base: pb::ListToolsRequest,
) -> Result<(Vec<pb::Tool>, Vec<usize>), StepFailure> {
    let (mut tools, mut page_of, mut pages, mut cursor) = (Vec::new(), Vec::new(), 0usize, String::new());
    loop {
        let req = pb::ListToolsRequest { cursor: cursor.clone(), ..base.clone() };
        let m = ask(s, ctx, Payload::ListToolsRequest(req), "list tools")?;
        let Some(Payload::ListToolsResponse(page)) = m.payload.clone() else {
            return Err(fail(&["PM-TOOLS-01"], format!("list_tools_request answered by {}", describe(&m))));
        };
        pages += 1;
        page_of.extend(std::iter::repeat_n(pages, page.tools.len()));
        tools.extend(page.tools);
        if page.next_cursor.is_empty() {
            return Ok((tools, page_of));
        }
        if pages >= 1000 {
            return Err(fail(&["PM-TOOLS-07"], "the tool listing did not end within 1000 pages"));
        }
        cursor = page.next_cursor;
    }
}
