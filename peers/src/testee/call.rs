//! One tool call from CallToolRequest to its single result: the task that runs a call and how its
//! result is put on the wire. What a handler can reach while it runs is in [`super::cx`].

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use protomcp_proto::envelopes::EnvelopeExt;
use protomcp_proto::fault::{Fault, on};
use protomcp_proto::pb::{CallToolRequest, Envelope, ToolError};
use tokio_util::sync::CancellationToken;

use super::cx::{Admitted, CallCx, Reply, Shared};
use super::sideband::{self, encode_result_sideband, fit_call_result, stream_chunk_size, use_sideband};
use super::tools::{self, Args};
use super::{Fixture, Misbehave, diag, mcp_conformance};
use crate::io::Outgoing;

/// The task of one admitted call: runs it and sends its one result (TP-CALL-01).
pub(crate) async fn run_call(
    shared: Arc<Shared>,
    id: u64,
    rid: String,
    req: CallToolRequest,
    token: CancellationToken,
    bytes: usize,
) {
    let _admitted = Admitted { shared: &shared, rid: &rid, id, bytes };
    if on(Fault::TpTaskCallAsTask) && shared.opts.fixture == Fixture::AppendixB && req.name == "slow" {
        // Long-running tools become tasks: the call is answered with the task's id.
        let task = protomcp_proto::pb::CreateTaskResponse { task_id: format!("task-{id}") };
        shared.out.send(Envelope::from(task).with_rid(&rid)).await;
        return;
    }
    let reply = execute(&shared, &rid, req, &token).await;
    if on(Fault::TpCancelNoResult) && token.is_cancelled() {
        return;
    }
    let failed = matches!(&reply, Reply::Response(r) if r.is_error);
    deliver(&shared, &rid, reply).await;
    if failed && on(Fault::TpLifecycleErrorBudget) {
        ERROR_RESULTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `tp.lifecycle.error-budget`: error results sent so far, and how many the budget allows
/// before the next call ends the process.
static ERROR_RESULTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const ERROR_BUDGET: usize = 5;

/// `tp.lifecycle.error-budget`: whether the budget of error results is spent.
pub(crate) fn error_budget_spent() -> bool {
    ERROR_RESULTS.load(std::sync::atomic::Ordering::Relaxed) >= ERROR_BUDGET
}

/// The result of a call cancelled before its handler started (TP-CANCEL-03/05).
fn cancelled_before_start() -> Reply {
    tools::error("Call cancelled before it started", None)
}

async fn execute(shared: &Arc<Shared>, rid: &str, req: CallToolRequest, token: &CancellationToken) -> Reply {
    // TP-CANCEL-05: cancelled before it started, so it does not start.
    if token.is_cancelled() {
        return cancelled_before_start();
    }
    if shared.opts.fixture == Fixture::McpConformance {
        let cx = CallCx::new(Arc::clone(shared), rid, req.progress_token, token.clone());
        return match mcp_conformance::call(&cx, &req.name, &req.arguments_json).await {
            Ok(reply) => reply,
            Err(failure) => tools::error(failure.message(), None),
        };
    }
    // TP-CALL-04/05/06: unknown names are an error result with a NOT_FOUND ToolError.
    let Some(spec) = tools::find(&req.name) else {
        let text = if on(Fault::TpCallUnknownNoName) {
            "Tool not found".to_owned()
        } else {
            format!("Tool not found: {}", req.name)
        };
        let tool_error = ToolError {
            error_code: "NOT_FOUND".into(),
            message: text.clone(),
            suggestion: String::new(),
            retryable: false,
        };
        return tools::error(&text, Some(tool_error));
    };
    // TP-CALL-08..12: arguments are checked before the handler runs.
    let args: Args = match tools::check_args(spec, &req.arguments_json) {
        Ok(a) => a,
        Err(e) => return tools::error(&e.to_string(), None),
    };
    let _permit = if spec.heavy {
        tokio::select! {
            biased;
            _ = token.cancelled() => return cancelled_before_start(),
            permit = shared.heavy.acquire() => permit.ok(),
        }
    } else {
        None
    };
    let cx = CallCx::new(Arc::clone(shared), rid, req.progress_token, token.clone());
    // D-01 / TP-CALL-07: a failure or a panic in the handler is an error result carrying its
    // message (no backtrace in the result, TP-SECURITY-03), and the testee goes on serving.
    match AssertUnwindSafe(tools::handle(spec.kind, &cx, args)).catch_unwind().await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) if on(Fault::TpCallFailureMessageLost) => tools::error("internal error", None),
        Ok(Err(failure)) => tools::error(failure.message(), None),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the handler panicked".to_owned());
            tools::error(&message, None)
        }
    }
}

/// Puts the result of call `rid` on the wire: through the sideband when it qualifies, as a
/// stream for [`Reply::Stream`], otherwise as one CallToolResponse that fits a frame.
pub(crate) async fn deliver(shared: &Shared, rid: &str, reply: Reply) {
    let mut rid = match shared.opts.misbehave {
        Some(Misbehave::WrongRid) => format!("wrong-{rid}"),
        _ => rid.to_owned(),
    };
    if on(Fault::TpConcurLatestRid) {
        rid = super::cx::lock(&shared.latest_call_rid).clone();
    }
    if on(Fault::TpConcurRidTruncated) && rid.len() > 255 {
        let mut cut = 255;
        while !rid.is_char_boundary(cut) {
            cut -= 1;
        }
        rid.truncate(cut);
    }
    let items = encode_reply(shared, &rid, reply).await;
    let twice = shared.opts.misbehave == Some(Misbehave::AnswerTwice) || on(Fault::TpCallReplyTwice);
    let times = if twice { 2 } else { 1 };
    for _ in 0..times {
        for item in &items {
            let sent = match item {
                Outgoing::Envelope(e) => shared.out.send(e.clone()).await,
                Outgoing::Raw(b) => shared.out.raw(b.clone()).await,
            };
            if !sent {
                return;
            }
        }
    }
}

async fn encode_reply(shared: &Shared, rid: &str, reply: Reply) -> Vec<Outgoing> {
    match reply {
        Reply::Response(resp) if use_sideband(rid, &resp, shared.opts.raw_threshold) => {
            let threshold = shared.opts.compress_threshold;
            let also = on(Fault::TpSidebandAlsoResponse).then(|| fit_call_result(rid, resp.clone()));
            let value = bytes::Bytes::from(resp.result_json.into_bytes());
            let call_rid = rid.to_owned();
            // Compression of up to 64 MiB is CPU work: off the async threads.
            let encoded = tokio::task::spawn_blocking(move || {
                encode_result_sideband(&call_rid, value, threshold, sideband::zstd_compress)
            })
            .await;
            match encoded {
                Ok(Ok(bytes)) => {
                    let also = also.map(|r| Outgoing::Envelope(Envelope::from(r).with_rid(rid)));
                    std::iter::once(Outgoing::Raw(bytes)).chain(also).collect()
                }
                Ok(Err(e)) => {
                    diag!("cannot send the result of call {rid:?} through the sideband: {e}");
                    Vec::new()
                }
                Err(e) => {
                    diag!("encoding the result of call {rid:?} failed: {e}");
                    Vec::new()
                }
            }
        }
        Reply::Response(resp) => vec![Outgoing::Envelope(Envelope::from(fit_call_result(rid, resp)).with_rid(rid))],
        Reply::Stream(value) => {
            // TP-STREAM-02..04: header with the exact total, chunks of at most chunk_size,
            // final on the last one only, every frame under the call rid.
            let chunk = stream_chunk_size(rid, shared.opts.stream_chunk);
            // `tp.stream.also-response`: the generic reply path runs after the streaming one and
            // sends the handler's (empty) return value as well.
            let also = on(Fault::TpStreamAlsoResponse)
                .then(|| Envelope::from(protomcp_proto::pb::CallToolResponse::default()).with_rid(rid));
            protomcp_proto::sideband::encode_stream(rid, "result_json", value.as_bytes(), chunk, true)
                .into_iter()
                .chain(also)
                .map(Outgoing::Envelope)
                .collect()
        }
    }
}
