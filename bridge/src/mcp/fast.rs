//! What the hot paths of tools/call share (stdio: [`super::on_stdio`], Streamable HTTP:
//! [`super::on_http_fast`]): a `tools/call` of an initialized session that the gate passed goes
//! to the core directly, not through rmcp, which would parse the message again into its own
//! types and hand the request and its response through a task and a channel each. rmcp keeps
//! serving initialize, every other method, the host's notifications and the calls that do not
//! take this form.
//!
//! What rmcp does with such a call, this does too: the progress token of `_meta` (as rmcp reads
//! it), the call's id among the session's calls in flight (for routing sampling and roots),
//! cancellation by the host (no answer, BR-CANCEL-02) and by the session's end, the result built
//! as rmcp's `CallToolResult` (a result that does not fit is an internal error) and written as
//! rmcp writes a response.

use super::{Arc, HostError, HostSession, InFlight, Session, Value, from_json, host_error, m, to_json};

/// A tools/call the hot path takes.
pub(super) struct FastRequest {
    pub id: Value,
    pub rid: m::RequestId,
    name: String,
    arguments: Option<Value>,
    pub progress: Option<Value>,
}

impl FastRequest {
    /// The call `v` is, when it is a tools/call of an initialized session in the form rmcp
    /// takes (params `name`, `arguments`, `_meta` only); else `v` back.
    pub fn of(session: &Session, v: Value) -> Result<FastRequest, Value> {
        let fits = session.ready.is_cancelled()
            && v.get("method").and_then(Value::as_str) == Some("tools/call")
            && v.get("id").is_some_and(|id| id.is_string() || id.is_i64())
            && v.get("params").and_then(Value::as_object).is_some_and(|p| {
                p.get("name").is_some_and(Value::is_string)
                    && p.get("arguments").is_none_or(|a| a.is_object() || a.is_null())
                    && p.get("_meta").is_none_or(Value::is_object)
                    && p.keys().all(|k| k == "name" || k == "arguments" || k == "_meta")
            });
        if !fits {
            return Err(v);
        }
        let Ok(rid) = serde_json::from_value::<m::RequestId>(v["id"].clone()) else { return Err(v) };
        let Value::Object(mut msg) = v else { unreachable!("checked: an object") };
        let id = msg.remove("id").unwrap_or_default();
        let Some(Value::Object(mut params)) = msg.remove("params") else { unreachable!("checked: params") };
        let Some(Value::String(name)) = params.remove("name") else { unreachable!("checked: a name") };
        let arguments = params.remove("arguments").filter(|a| !a.is_null());
        let progress = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .and_then(|t| serde_json::from_value::<m::ProgressToken>(t.clone()).ok())
            .map(|t| to_json(&t));
        Ok(FastRequest { id, rid, name, arguments, progress })
    }

    /// The gate's key of the call's id (the key `notifications/cancelled` names it by).
    pub fn key(&self) -> String {
        self.id.to_string()
    }

    /// Runs the call: the JSON-RPC response as it goes on the wire, or `None` when it was
    /// cancelled (by `cancel`, or by the session's end).
    pub async fn run(self, session: &Arc<Session>, cancel: tokio_util::sync::CancellationToken) -> Option<String> {
        let ended = session.ended.clone();
        let cancelled = async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = ended.cancelled() => {}
            }
        };
        session.calls.lock().unwrap().push(self.rid.clone());
        let in_flight = InFlight { session, id: self.rid };
        let host: Arc<dyn HostSession> = session.clone();
        let r = session.bridge.call_tool(&host, &self.name, self.arguments, self.progress, cancelled).await;
        drop(in_flight);
        let body = match r.map(from_json::<m::CallToolResult>) {
            Err(HostError::Cancelled) => return None,
            Ok(Ok(result)) => serde_json::to_string(&result).map(|r| format!("\"result\":{r}")),
            Ok(Err(e)) => serde_json::to_string(&e).map(|e| format!("\"error\":{e}")),
            Err(e) => serde_json::to_string(&host_error(e)).map(|e| format!("\"error\":{e}")),
        };
        let internal = crate::jsonrpc::ErrorCode::INTERNAL_ERROR.code();
        let body =
            body.unwrap_or_else(|e| format!(r#""error":{{"code":{internal},"message":"writing the answer: {e}"}}"#));
        Some(format!(r#"{{"jsonrpc":"2.0","id":{},{body}}}"#, self.id))
    }
}
