//! The `host_http` step of bridge scenarios over HTTP: one request on its own connection, with
//! headers the scenario chooses (a foreign `Host` or `Origin`, a wrong media type, no or a bogus
//! session id), and its status, headers and body matched against patterns.

use serde_json::{Map, Value};

use super::exec::StepError;
use crate::host::http;
use crate::host::session::HttpSession;
use crate::scenario::template::substitute;
use crate::scenario::{Captures, HostHttp, HttpSessionRef, match_value};
use crate::transcript::{Dir, Item, Transcript};

/// The headers of the request: the defaults (`Host`; for POST `Content-Type: application/json`
/// and `Accept: application/json, text/event-stream`; `Mcp-Session-Id` per `session`), then the
/// scenario's, each replacing a default of the same name (case-insensitive) and dropping it when
/// empty.
pub fn headers(h: &HostHttp, authority: &str, current: Option<&str>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![("Host".into(), authority.into())];
    if h.method == "POST" {
        out.push(("Content-Type".into(), "application/json".into()));
        out.push(("Accept".into(), "application/json, text/event-stream".into()));
    }
    let id = match &h.session {
        HttpSessionRef::Current => current.map(str::to_owned),
        HttpSessionRef::None => None,
        HttpSessionRef::Literal(s) => Some(s.clone()),
    };
    if let Some(id) = id {
        out.push(("Mcp-Session-Id".into(), id));
    }
    for (n, v) in &h.headers {
        out.retain(|(m, _)| !m.eq_ignore_ascii_case(n));
        if !v.is_empty() {
            out.push((n.clone(), v.clone()));
        }
    }
    out
}

/// The body as the `body` pattern sees it: the JSON-RPC messages (a list) of an event stream,
/// the JSON value of a body that parses, else the text (`""` when empty).
pub fn body_value(r: &http::Response) -> Value {
    if r.header("content-type").is_some_and(|c| c.starts_with("text/event-stream")) {
        return Value::Array(r.messages());
    }
    let text = String::from_utf8_lossy(&r.body);
    serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned()))
}

/// `h` with the captures of earlier steps filled into the session id, header values and body.
fn fill(h: &HostHttp, caps: &Captures) -> Result<HostHttp, StepError> {
    let text = |s: &str| match substitute(&Value::String(s.to_owned()), caps) {
        Ok(Value::String(s)) => Ok(s),
        Ok(v) => Ok(v.to_string()),
        Err(e) => Err(StepError::Error(e.to_string())),
    };
    let mut out = h.clone();
    if let HttpSessionRef::Literal(s) = &h.session {
        out.session = HttpSessionRef::Literal(text(s)?);
    }
    for (_, v) in &mut out.headers {
        *v = text(v)?;
    }
    out.body = text(&h.body)?;
    Ok(out)
}

/// Sends the request of `h` and checks the response; both go into the transcript (the request
/// line and the scenario's headers, not the defaults; the status and the body).
pub async fn run(
    session: &HttpSession,
    h: &HostHttp,
    within: std::time::Duration,
    caps: &mut Captures,
    transcript: &mut Transcript,
) -> Result<(), StepError> {
    // The transcript shows the request as written (`${name}` unfilled: ids are random).
    let written = h;
    let h = &fill(h, caps)?;
    let ep = &session.endpoint;
    let path = h.path.clone().unwrap_or_else(|| ep.path.clone());
    let mut shown = format!("<HTTP {} {path}", h.method);
    match &written.session {
        HttpSessionRef::Current => {}
        HttpSessionRef::None => shown.push_str(" | no session"),
        HttpSessionRef::Literal(s) => shown.push_str(&format!(" | Mcp-Session-Id: {s}")),
    }
    for (n, v) in &written.headers {
        shown.push_str(&format!(" | {n}: {v}"));
    }
    if !written.body.is_empty() {
        shown.push_str(&format!(" | {}", written.body));
    }
    shown.push('>');
    transcript.push(Item::Host { dir: Dir::ToTestee, message: None, raw: Some(shown) });
    let current = session.session_id();
    let list = headers(h, &ep.authority, current.as_deref());
    let refs: Vec<(&str, &str)> = list.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let addr = ep.addr().await.map_err(|e| StepError::Error(format!("{}: {e}", ep.host)))?;
    let r = http::request(addr, &h.method, &path, &refs, h.body.as_bytes(), within)
        .await
        .map_err(|e| StepError::Fail(format!("{} {path}: {e}", h.method)))?;
    let body = body_value(&r);
    let ctype = r.header("content-type").map(|c| format!(" ({c})")).unwrap_or_default();
    transcript.push(Item::Host {
        dir: Dir::FromTestee,
        message: None,
        raw: Some(format!("<HTTP {}{ctype}>", r.status)),
    });
    if body != Value::String(String::new()) {
        transcript.push(Item::Host { dir: Dir::FromTestee, message: Some(body.clone()), raw: None });
    }
    if let Some(p) = &h.status {
        match_value(p, Some(&Value::from(r.status)), caps).map_err(|m| StepError::Fail(format!("status: {m}")))?;
    }
    if let Some(p) = &h.expect_headers {
        let map: Map<String, Value> = r.headers.iter().map(|(n, v)| (n.clone(), Value::String(v.clone()))).collect();
        match_value(p, Some(&Value::Object(map)), caps).map_err(|m| StepError::Fail(format!("headers: {m}")))?;
    }
    if let Some(p) = &h.expect_body {
        match_value(p, Some(&body), caps).map_err(|m| StepError::Fail(format!("body: {m}")))?;
    }
    Ok(())
}
