//! The `host_http` step of bridge scenarios over HTTP: one request on its own connection, with
//! headers the scenario chooses (a foreign `Host` or `Origin`, a wrong media type, no or a bogus
//! session id), and its status, headers and body matched against patterns.

use std::collections::BTreeMap;

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

/// What a `host_http` step gets from the run besides the session.
pub struct Ctx<'a> {
    /// How long the whole response may take.
    pub within: std::time::Duration,
    /// The bridge's environment as the target and the scenario set it (`{env:NAME}`).
    pub env: &'a BTreeMap<String, String>,
}

/// Replaces every `{env:NAME}` with the value the target gave the bridge for `NAME` (a secret
/// such as the bearer token of `--auth`, set in a manifest's `env`); `{env:NAME|upper}`,
/// `|lower` and `|chop` (without its last character) give near misses.
pub fn fill_env(s: &str, env: &BTreeMap<String, String>) -> Result<String, StepError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{env:") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 5..];
        let Some(end) = after.find('}') else {
            return Err(StepError::Error(format!("`{{env:` without a closing `}}` in {s:?}")));
        };
        let (name, filter) = after[..end].split_once('|').unwrap_or((&after[..end], ""));
        let value = env.get(name).ok_or_else(|| {
            StepError::Error(format!("{{env:{name}}}: the target sets no {name} for the bridge (a manifest's `env`)"))
        })?;
        let value = match filter {
            "" => value.clone(),
            "upper" => value.to_uppercase(),
            "lower" => value.to_lowercase(),
            "chop" => value.chars().take(value.chars().count().saturating_sub(1)).collect(),
            other => return Err(StepError::Error(format!("{{env:{name}|{other}}}: filters are upper, lower, chop"))),
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `h` with the captures of earlier steps, and `{env:NAME}`, filled into the session id, header
/// values and body.
fn fill(h: &HostHttp, caps: &Captures, env: &BTreeMap<String, String>) -> Result<HostHttp, StepError> {
    let text = |s: &str| match substitute(&Value::String(s.to_owned()), caps) {
        Ok(Value::String(s)) => fill_env(&s, env),
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
    ctx: Ctx<'_>,
    caps: &mut Captures,
    transcript: &mut Transcript,
) -> Result<(), StepError> {
    // The transcript shows the request as written (`${name}` unfilled: ids are random).
    let written = h;
    let h = &fill(h, caps, ctx.env)?;
    let within = ctx.within;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_placeholders() {
        let env: BTreeMap<String, String> = [("T".to_owned(), "s3cret".to_owned())].into();
        assert_eq!(fill_env("Bearer {env:T}", &env).unwrap(), "Bearer s3cret");
        assert_eq!(fill_env("{env:T}{env:T}x", &env).unwrap(), "s3crets3cretx");
        assert_eq!(fill_env("plain {x}", &env).unwrap(), "plain {x}");
        assert!(fill_env("{env:U}", &env).is_err());
        assert!(fill_env("{env:T", &env).is_err());
        assert_eq!(fill_env("{env:T|upper} {env:T|lower} {env:T|chop}", &env).unwrap(), "S3CRET s3cret s3cre");
        assert!(fill_env("{env:T|rot13}", &env).is_err());
    }
}
