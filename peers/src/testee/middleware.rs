//! The protocol middleware of Appendix B.3 and the answer to MiddlewareInterceptRequest (§13).

use protomcp_proto::fault::{Fault, on};
use protomcp_proto::frame::MAX_FRAME;
use protomcp_proto::pb::{MiddlewareInterceptRequest, MiddlewareInterceptResponse};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// The middleware of the variant, in registration order, with their priorities. Names are
/// non-empty and distinct (TP-MIDDLEWARE-01).
pub(crate) const MIDDLEWARE: &[(&str, i32)] = &[("guard", 1), ("mirror", 10), ("broken", 20)];

/// A middleware handler that failed (the Rust form of "raises").
struct Failed(String);

/// The answer to `req`, to be sent under `rid`. `registered` tells whether the middleware of
/// [`MIDDLEWARE`] were registered (the middleware variant); an intercept for a name that was not registered gets the
/// pass-through answer (TP-MIDDLEWARE-03). A failing handler becomes reject=true with a
/// non-empty reason (TP-MIDDLEWARE-04).
pub(crate) fn intercept(registered: bool, rid: &str, req: &MiddlewareInterceptRequest) -> MiddlewareInterceptResponse {
    // TP-MIDDLEWARE-02: everything passes through unless the middleware changes it.
    let pass = MiddlewareInterceptResponse {
        arguments_json: req.arguments_json.clone(),
        result_json: if on(Fault::TpMiddlewarePassDropsResult) { String::new() } else { req.result_json.clone() },
        reject: false,
        reject_reason: String::new(),
    };
    let unknown = !registered || !MIDDLEWARE.iter().any(|(n, _)| *n == req.middleware_name);
    if on(Fault::TpMiddlewareUnknownRejects) && unknown {
        return MiddlewareInterceptResponse { reject: true, reject_reason: "no such middleware".into(), ..pass };
    }
    if !registered {
        return pass;
    }
    // TP-MIDDLEWARE-05: the handlers see the request's fields as they came.
    let outcome = match req.middleware_name.as_str() {
        "guard" => Ok(guard(req, pass)),
        "mirror" => mirror(req, pass),
        "broken" => broken(req, pass),
        _ => Ok(pass),
    };
    let response = match outcome {
        Ok(r) => r,
        Err(_) if on(Fault::TpMiddlewareFailurePasses) => pass_through(req),
        // TP-MIDDLEWARE-04 is a MUST and applies in every phase; TP-MIDDLEWARE-06 (reject only
        // in `before`) is a SHOULD, so a failure in `after` still rejects.
        Err(Failed(why)) => MiddlewareInterceptResponse {
            arguments_json: req.arguments_json.clone(),
            result_json: req.result_json.clone(),
            reject: true,
            reject_reason: format!("middleware {} failed: {why}", req.middleware_name),
        },
    };
    fit(rid.len(), req, response)
}

/// `guard` (priority 1): in `before`, rejects calls of `secret` with reason `blocked by guard`.
/// The pass-through response to `req`.
fn pass_through(req: &MiddlewareInterceptRequest) -> MiddlewareInterceptResponse {
    MiddlewareInterceptResponse {
        arguments_json: req.arguments_json.clone(),
        result_json: req.result_json.clone(),
        reject: false,
        reject_reason: String::new(),
    }
}

fn guard(req: &MiddlewareInterceptRequest, pass: MiddlewareInterceptResponse) -> MiddlewareInterceptResponse {
    if req.phase == "before" && req.tool_name == "secret" {
        MiddlewareInterceptResponse { reject: true, reject_reason: "blocked by guard".into(), ..pass }
    } else {
        pass
    }
}

/// `mirror` (priority 10): in `before`, the received arguments object plus the member
/// `"mw": "before:<tool_name>"`; in `after`, the result
/// `[{"type":"text","text":"after:<tool_name>:<is_error>"}]`.
fn mirror(
    req: &MiddlewareInterceptRequest,
    pass: MiddlewareInterceptResponse,
) -> Result<MiddlewareInterceptResponse, Failed> {
    match req.phase.as_str() {
        "before" => {
            // The other members are kept byte-for-byte (no number or escape is re-spelled).
            let text = if req.arguments_json.is_empty() { "{}" } else { &req.arguments_json };
            let mut members: BTreeMap<String, Box<RawValue>> =
                serde_json::from_str(text).map_err(|e| Failed(format!("the arguments are not a JSON object ({e})")))?;
            let mw = Value::from(format!("before:{}", req.tool_name)).to_string();
            let mw = RawValue::from_string(mw).map_err(|e| Failed(e.to_string()))?;
            members.insert("mw".to_owned(), mw);
            let arguments_json = serde_json::to_string(&members).map_err(|e| Failed(e.to_string()))?;
            Ok(MiddlewareInterceptResponse { arguments_json, ..pass })
        }
        "after" => {
            let is_error = req.is_error && !on(Fault::TpMiddlewareIsErrorDropped);
            let text = format!("after:{}:{}", req.tool_name, is_error);
            Ok(MiddlewareInterceptResponse { result_json: super::cx::text_json(&text), ..pass })
        }
        _ => Ok(pass),
    }
}

/// `broken` (priority 20): fails whenever tool_name is `boom`.
fn broken(
    req: &MiddlewareInterceptRequest,
    pass: MiddlewareInterceptResponse,
) -> Result<MiddlewareInterceptResponse, Failed> {
    if req.tool_name == "boom" { Err(Failed("broken middleware failure".into())) } else { Ok(pass) }
}

/// A response that would not fit a frame under a rid of `rid_len` bytes (only `mirror` can grow
/// one) becomes a rejection that does, so the request is still answered (TP-CONCUR-01) within
/// `MAX_FRAME` (TP-FRAME-04).
fn fit(
    rid_len: usize,
    req: &MiddlewareInterceptRequest,
    response: MiddlewareInterceptResponse,
) -> MiddlewareInterceptResponse {
    use prost::Message;
    // Arm tag, two length varints and the rid's tag: 16 bytes cover them.
    if response.encoded_len() + rid_len + 16 <= MAX_FRAME as usize {
        return response;
    }
    MiddlewareInterceptResponse {
        arguments_json: String::new(),
        result_json: String::new(),
        reject: true,
        reject_reason: format!("middleware {}: the changed value would exceed the frame limit", req.middleware_name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(mw: &str, phase: &str, tool: &str, args: &str) -> MiddlewareInterceptRequest {
        MiddlewareInterceptRequest {
            middleware_name: mw.into(),
            phase: phase.into(),
            tool_name: tool.into(),
            arguments_json: args.into(),
            result_json: r#"[{"type":"text","text":"r"}]"#.into(),
            is_error: false,
        }
    }

    #[test]
    fn mirror_keeps_members_verbatim() {
        let r = intercept(true, "r", &req("mirror", "before", "echo", r#"{"text":"h\u00e9","n":1e400}"#));
        assert_eq!(r.arguments_json, r#"{"mw":"before:echo","n":1e400,"text":"h\u00e9"}"#);
        assert!(!r.reject);
        let r = intercept(true, "r", &req("mirror", "before", "echo", "[1]"));
        assert!(r.reject && r.reject_reason.contains("mirror"));
    }

    #[test]
    fn an_oversize_answer_becomes_a_rejection() {
        let args = format!(r#"{{"t":"{}"}}"#, "x".repeat(MAX_FRAME as usize - 100));
        let tool = "t".repeat(100);
        let r = intercept(true, "r", &req("mirror", "before", &tool, &args));
        assert!(r.reject);
        assert!(r.arguments_json.is_empty());
    }
}
