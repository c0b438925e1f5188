//! MCP's Streamable HTTP transport: the guard, DELETE, and POSTs through the session's gate.

use super::{
    Arc, Bridge, HOLD_FOR_ANSWER, Handler, Held, HttpBody, HttpService, MAX_POST_BODY, Registry, Release, ServeError,
    UntilAnswer, Value, Verdict, m,
};

/// Accepts the next connection of the HTTP endpoint, with `TCP_NODELAY` set. A response goes
/// out as several small writes (the head with the SSE priming event, then the message, then the
/// end of the chunked body); with Nagle's algorithm on, each write after the first waits for the
/// client's (delayed) acknowledgement, about 40 ms per call on a keep-alive connection.
pub async fn accept(listener: &tokio::net::TcpListener) -> std::io::Result<tokio::net::TcpStream> {
    let (stream, _) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Serves MCP's Streamable HTTP transport on `listener` (rmcp's server, one session per
/// `Mcp-Session-Id`), behind `guard` (Host, Origin, credentials), until `stop` resolves.
pub async fn serve_http(
    bridge: Arc<Bridge>,
    listener: tokio::net::TcpListener,
    guard: crate::http::Guard,
    idle: std::time::Duration,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

    let ct = tokio_util::sync::CancellationToken::new();
    // Host and Origin are checked by `guard`, in front of rmcp, as the spec words them.
    let config =
        StreamableHttpServerConfig::default().disable_allowed_hosts().with_cancellation_token(ct.child_token());
    let factory_bridge = bridge.clone();
    let registry: Registry = Arc::default();
    let factory_registry = registry.clone();
    // Idle sessions end after `idle` (BR-HTTP-26); rmcp then drops the handler (`Life`).
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(idle);
    let manager = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(Handler::with_registry(factory_bridge.clone(), true, Some(factory_registry.clone()))),
        manager.clone(),
        config,
    );
    let guard = Arc::new(guard);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            a = accept(&listener) => match a {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("protomcp-conform bridge: accept failed: {e}");
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let service = service.clone();
        let guard = guard.clone();
        let registry = registry.clone();
        let bridge = bridge.clone();
        let manager = manager.clone();
        tokio::spawn(async move {
            // One request at a time on an HTTP/1.1 connection: one hold timer for all of them.
            let hold = Arc::new(super::on_http_fast::Hold::default());
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let hold = hold.clone();
                let service = service.clone();
                let guard = guard.clone();
                let registry = registry.clone();
                let bridge = bridge.clone();
                let manager = manager.clone();
                async move {
                    bridge.spin.arrived();
                    let r = answer(req, &service, &guard, &registry, &bridge, &manager, &hold).await;
                    // Written by hyper right after this returns; the host's next request follows.
                    bridge.spin.wrote();
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
        });
    }
    ct.cancel();
    Ok(())
}

/// The answer to one HTTP request: a refusal of the guard, or the request through DELETE's
/// session end, the gated POST or rmcp.
async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    service: &HttpService,
    guard: &crate::http::Guard,
    registry: &Registry,
    bridge: &Arc<Bridge>,
    manager: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    hold: &super::on_http_fast::Hold,
) -> hyper::Response<HttpBody> {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use rmcp::transport::streamable_http_server::SessionManager;

    let header = |name: http::header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
    let refusal = guard.check(
        req.method().as_str(),
        req.uri().path(),
        header(http::header::HOST),
        header(http::header::ORIGIN),
        crate::http::Credentials {
            authorization: header(http::header::AUTHORIZATION),
            api_key: header(http::header::HeaderName::from_static("x-api-key")),
        },
    );
    match refusal {
        Some(r) => {
            let mut resp = hyper::Response::new(Full::new(Bytes::from(r.reason)).boxed());
            *resp.status_mut() = http::StatusCode::from_u16(r.status).unwrap_or_default();
            let headers = resp.headers_mut();
            if r.challenge {
                headers.insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
            }
            if r.status == 405 {
                headers.insert(http::header::ALLOW, http::HeaderValue::from_static("GET, POST, DELETE"));
            }
            resp
        }
        None => {
            // DELETE ends the session at once: its calls in flight are cancelled
            // (BR-CANCEL-06) and it gets no more notifications; rmcp then closes it.
            if req.method() == http::Method::DELETE
                && let Some(id) = header(http::header::HeaderName::from_static("mcp-session-id"))
                && let Some(session) = registry.sessions.lock().unwrap().remove(id)
            {
                session.end();
                bridge.remove_session(session.id);
                registry.gates.remove(id);
            }
            if req.method() == http::Method::POST {
                gated_post(req, service, manager, registry, hold).await
            } else if req.method() == http::Method::DELETE
                && let Some(id) = header(http::header::HeaderName::from_static("mcp-session-id"))
                && !manager.has_session(&Arc::from(id)).await.unwrap_or(false)
            {
                // BR-HTTP-12: an ended or unknown session is gone (rmcp answers
                // a DELETE of an unknown id with 202).
                let body = Full::new(Bytes::from("Not Found: Session not found")).boxed();
                let mut resp = hyper::Response::new(body);
                *resp.status_mut() = http::StatusCode::NOT_FOUND;
                resp
            } else {
                service.handle(req).await
            }
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        self.registry.gates.done(&self.session, &self.id);
    }
}

impl UntilAnswer {
    /// Whether `data` (events of the stream) holds the response to request `id`.
    fn answers(data: &[u8], id: &Value) -> bool {
        use serde::de::IgnoredAny;
        #[derive(serde::Deserialize)]
        struct Head {
            id: Option<Value>,
            method: Option<IgnoredAny>,
            result: Option<IgnoredAny>,
            error: Option<IgnoredAny>,
        }
        let text = String::from_utf8_lossy(data);
        text.lines().filter_map(|l| l.strip_prefix("data:")).any(|d| {
            matches!(serde_json::from_str::<Head>(d.trim()),
                Ok(Head { id: Some(i), method: None, result, error }) if &i == id && (result.is_some() || error.is_some()))
        })
    }
}

impl hyper::body::Body for UntilAnswer {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let Some(release) = &self.release else { return Poll::Ready(None) };
        let id = release.id.clone();
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && frame.data_ref().is_some_and(|d| UntilAnswer::answers(d, &id))
        {
            self.release = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.release.is_none() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Held {
    pub(super) async fn gather(mut rest: UntilAnswer) -> Held {
        use http_body_util::BodyExt;
        let mut first = Vec::new();
        let deadline = tokio::time::sleep(HOLD_FOR_ANSWER);
        tokio::pin!(deadline);
        while rest.release.is_some() {
            let frame = tokio::select! {
                f = rest.frame() => f,
                _ = &mut deadline => break,
            };
            match frame.map(|f| f.map(|f| f.into_data())) {
                Some(Ok(Ok(data))) => first.extend_from_slice(&data),
                // rmcp's event streams carry data only; anything else ends the stream here.
                _ => {
                    rest.release = None;
                    break;
                }
            }
        }
        Held::new(first, rest)
    }
}

/// A POST of an established session goes through the session's [`Gate`] (as stdio lines do);
/// anything else (initialize, a missing or unknown session, an unsupported protocol version,
/// another media type) is left to rmcp, which answers it as BR-HTTP-08/11/15 want.
async fn gated_post(
    req: hyper::Request<hyper::body::Incoming>,
    service: &HttpService,
    manager: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    registry: &Registry,
    hold: &super::on_http_fast::Hold,
) -> hyper::Response<HttpBody> {
    use http_body_util::{BodyExt, Full, Limited};
    use hyper::body::Bytes;
    use rmcp::transport::streamable_http_server::SessionManager;

    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let json = header("content-type")
        .is_some_and(|c| c.get(..16).is_some_and(|prefix| prefix.eq_ignore_ascii_case("application/json")));
    let accept = header("accept");
    let accepts_json = accept.is_none_or(|a| a.contains("application/json") || a.contains("*/*"));
    let known = m::ProtocolVersion::known_up_to(&m::ProtocolVersion::V_2025_11_25);
    let version_ok = header("mcp-protocol-version").is_none_or(|v| known.iter().any(|k| k.as_str() == v));
    // Whether the host reads event streams (the hot path answers on one).
    let sse = accept.is_none_or(|a| a.contains("text/event-stream") || a.contains("*/*"));
    let session = match header("mcp-session-id") {
        Some(id) if json && accepts_json && version_ok => id.to_owned(),
        _ => return service.handle(req).await,
    };
    if !manager.has_session(&Arc::from(session.as_str())).await.unwrap_or(false) {
        return service.handle(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_POST_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let mut resp = hyper::Response::new(Full::new(Bytes::from(format!("cannot read the body: {e}"))).boxed());
            *resp.status_mut() = http::StatusCode::PAYLOAD_TOO_LARGE;
            return resp;
        }
    };
    // The hot path's own traffic: answers to its requests, cancellations of its calls.
    let ours = registry.sessions.lock().unwrap().get(&session).cloned();
    let parsed = ours.as_ref().and_then(|_| serde_json::from_slice::<Value>(&bytes).ok());
    if let (Some(s), Some(v)) = (&ours, &parsed)
        && super::on_http_fast::intercept(s, v)
    {
        let mut resp = hyper::Response::new(Full::new(Bytes::new()).boxed());
        *resp.status_mut() = http::StatusCode::ACCEPTED;
        return resp;
    }
    let (verdict, id) = match &parsed {
        Some(v) => registry.gates.check_parsed(&session, v),
        None => registry.gates.check(&session, &bytes),
    };
    // A message without an id to answer (parse error, invalid request) is a bad request; an error
    // answer to a request is an ordinary JSON-RPC response; nothing to answer is 202 (BR-HTTP-07).
    let status = protomcp_proto::mcp_input::post_status(&verdict).and_then(|s| http::StatusCode::from_u16(s).ok());
    match verdict {
        Verdict::Answer(v) => {
            let status = status.unwrap_or(http::StatusCode::OK);
            let mut resp = hyper::Response::new(Full::new(Bytes::from(v.to_string())).boxed());
            *resp.status_mut() = status;
            resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
            resp
        }
        Verdict::Drop => {
            let mut resp = hyper::Response::new(Full::new(Bytes::new()).boxed());
            *resp.status_mut() = status.unwrap_or(http::StatusCode::ACCEPTED);
            resp
        }
        Verdict::Pass => {
            // A tools/call takes the hot path when the host reads event streams.
            if let (Some(s), Some(v), Some(id), true) = (ours, parsed, &id, sse) {
                let traced = s.trace.then(|| v.clone());
                if let Ok(call) = super::fast::FastRequest::of(&s, v) {
                    if let Some(v) = traced {
                        s.bridge.trace_mcp(true, &v);
                    }
                    let release = Release { registry: registry.clone(), session, id: id.clone() };
                    return super::on_http_fast::post(s, call, release, hold).await;
                }
            }
            let resp = service.handle(hyper::Request::from_parts(parts, Full::new(bytes))).await;
            match id {
                None => resp,
                Some(id) => {
                    let release = Release { registry: registry.clone(), session, id };
                    let stream = resp
                        .headers()
                        .get(http::header::CONTENT_TYPE)
                        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
                    let (head, body) = resp.into_parts();
                    let body = UntilAnswer { inner: body, release: Some(release) };
                    let body = if stream { Held::gather(body).await.boxed() } else { body.boxed() };
                    hyper::Response::from_parts(head, body)
                }
            }
        }
    }
}
