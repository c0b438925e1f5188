//! Plays the bridge against the reference testee, in-process: `serve` runs on one end of a
//! `UnixStream::pair()`, the test drives the other end. Every wait has a deadline, so a test
//! that goes wrong fails instead of hanging.

#![allow(dead_code, reason = "each test binary uses a different part of this module")]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use protomcp_harness::io::{CodecError, EnvelopeCodec, Incoming};
use protomcp_harness::testee::{self, Options};
use protomcp_proto::envelopes::{self as env, EnvelopeExt};
use protomcp_proto::frame::{Frame, Limits};
use protomcp_proto::pb::envelope::Msg;
use protomcp_proto::pb::{CallToolResponse, Envelope, ToolDefinition, ToolError};
use protomcp_proto::violation::Party;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;

/// Deadline of every single wait.
pub const WAIT: Duration = Duration::from_secs(5);
pub use protomcp_proto::spec::T_PROMPT;

/// Every tool of Appendix B.1.
pub const ALL_TOOLS: [&str; 15] = [
    "echo",
    "add",
    "fail",
    "fail_soft",
    "slow",
    "big",
    "big_err",
    "toggle",
    "secret",
    "structured",
    "logit",
    "narrow",
    "ask",
    "roots",
    "stream_big",
];

/// The bridge's end of a connection to an in-process testee.
pub struct Peer {
    pub rx: FramedRead<OwnedReadHalf, EnvelopeCodec>,
    pub tx: Option<OwnedWriteHalf>,
    pub testee: JoinHandle<i32>,
}

impl Peer {
    pub fn start(opts: Options) -> Peer {
        let (ours, theirs) = UnixStream::pair().expect("socket pair");
        let testee = tokio::spawn(testee::serve(theirs, opts));
        let (rd, wr) = ours.into_split();
        // We decode what the tool process sends, with the spec's limits.
        let rx = FramedRead::new(rd, EnvelopeCodec::new(Party::ToolProcess, Limits::default()));
        Peer { rx, tx: Some(wr), testee }
    }

    pub fn with_defaults() -> Peer {
        Peer::start(Options::default())
    }

    /// Started and past the handshake (hidden-tool DisableToolsRequest read).
    pub async fn ready(opts: Options) -> Peer {
        let mut p = Peer::start(opts);
        p.handshake().await;
        p
    }

    pub async fn send(&mut self, e: Envelope) {
        self.send_raw(&e.to_frame()).await;
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let tx = self.tx.as_mut().expect("write half still open");
        tokio::time::timeout(WAIT, tx.write_all(bytes)).await.expect("write within 5 s").expect("write");
    }

    /// The next item the testee sends, or `None` at end of stream.
    pub async fn try_next(&mut self, within: Duration) -> Result<Option<Result<Incoming, CodecError>>, ()> {
        tokio::time::timeout(within, self.rx.next()).await.map_err(|_| ())
    }

    /// The next decoded frame; fails on timeout, end of stream or a decoding error.
    pub async fn frame(&mut self) -> Frame {
        match self.try_next(WAIT).await {
            Ok(Some(Ok(Incoming::Frame(f)))) => f,
            Ok(other) => panic!("expected a frame, got {other:?}"),
            Err(()) => panic!("no frame within {WAIT:?}"),
        }
    }

    /// The next frame, which must be an Envelope.
    pub async fn envelope(&mut self) -> Envelope {
        match self.frame().await {
            Frame::Envelope(d) => {
                assert!(d.envelope.namespace.is_empty(), "TP-FRAME-08: namespace sent: {:?}", d.envelope);
                d.envelope
            }
            other => panic!("expected an Envelope, got {other:?}"),
        }
    }

    /// Asserts that nothing arrives for `d`.
    pub async fn silence(&mut self, d: Duration) {
        if let Ok(item) = self.try_next(d).await {
            panic!("expected silence for {d:?}, got {item:?}");
        }
    }

    /// The standard handshake: ListToolsRequest `req-0`, the tool list, acknowledgements for
    /// any registrations, the marker and the hidden-tool DisableToolsRequest. Returns the tools.
    pub async fn handshake(&mut self) -> Vec<ToolDefinition> {
        self.send(env::list_tools().with_rid("req-0")).await;
        let list = self.envelope().await;
        assert_eq!(list.request_id, "req-0");
        let Some(Msg::ToolList(tools)) = list.msg else { panic!("expected the tool list, got {list:?}") };
        loop {
            let e = self.envelope().await;
            match e.msg {
                Some(Msg::RegisterMiddleware(_)) => self.send(env::register_middleware_response(true)).await,
                Some(Msg::ReloadResponse(r)) => {
                    assert!(r.success && e.request_id.is_empty(), "marker expected: {r:?}");
                    break;
                }
                other => panic!("unexpected {other:?} in the burst"),
            }
        }
        let disable = self.envelope().await;
        assert_eq!(disable, env::disable_tools(["secret"]), "hidden-tool DisableToolsRequest");
        tools.tools
    }

    /// Sends a call.
    pub async fn call(&mut self, rid: &str, name: &str, args: &str) {
        self.send(env::call_tool(name, args).with_rid(rid)).await;
    }

    /// The next frame, which must be the CallToolResponse for `rid`.
    pub async fn result(&mut self, rid: &str) -> CallToolResponse {
        let e = self.envelope().await;
        assert_eq!(e.request_id, rid, "{e:?}");
        match e.msg {
            Some(Msg::CallResult(r)) => {
                check_result_shape(&r);
                r
            }
            other => panic!("expected a call result for {rid}, got {other:?}"),
        }
    }

    /// Calls and returns the result, which must come next as a CallToolResponse.
    pub async fn call_result(&mut self, rid: &str, name: &str, args: &str) -> CallToolResponse {
        self.call(rid, name, args).await;
        self.result(rid).await
    }

    /// Reads frames until the result of call `rid` in any of its three forms (response,
    /// sideband, stream), returned as the CallToolResponse it stands for; other frames are
    /// returned too, in arrival order.
    pub async fn any_result(&mut self, rid: &str) -> (CallToolResponse, Vec<Envelope>) {
        let mut others = Vec::new();
        let mut stream: Option<Vec<u8>> = None;
        loop {
            match self.frame().await {
                Frame::Envelope(d) => {
                    let e = d.envelope;
                    match &e.msg {
                        Some(Msg::CallResult(r)) if e.request_id == rid => return (r.clone(), others),
                        Some(Msg::RawHeader(h)) if h.request_id == rid => {
                            assert_eq!(e.request_id, "", "TP-SIDEBAND-03");
                            let Frame::Sideband(s) = self.frame().await else { panic!("payload expected") };
                            let payload = s.payload.expect("payload decodes");
                            let json = String::from_utf8(payload.to_vec()).expect("UTF-8");
                            return (CallToolResponse { result_json: json, ..Default::default() }, others);
                        }
                        Some(Msg::StreamHeader(_)) if e.request_id == rid => stream = Some(Vec::new()),
                        Some(Msg::StreamChunk(c)) if e.request_id == rid => {
                            let buf = stream.as_mut().expect("header before chunks");
                            buf.extend_from_slice(&c.data);
                            if c.r#final {
                                let json = String::from_utf8(std::mem::take(buf)).expect("UTF-8");
                                return (CallToolResponse { result_json: json, ..Default::default() }, others);
                            }
                        }
                        _ => others.push(e),
                    }
                }
                Frame::Sideband(s) => panic!("sideband payload without its header: {s:?}"),
            }
        }
    }

    /// Closes our end (the testee sees end-of-file) and returns the testee's exit status,
    /// which must come within `T_PROMPT`.
    pub async fn close(mut self) -> i32 {
        drop(self.tx.take());
        let Peer { rx, testee, .. } = self;
        drop(rx);
        exit_within(testee, T_PROMPT).await
    }
}

/// The exit status of a testee task that must end within `d`.
pub async fn exit_within(testee: JoinHandle<i32>, d: Duration) -> i32 {
    let started = Instant::now();
    match tokio::time::timeout(d, testee).await {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => panic!("the testee task failed: {e}"),
        Err(_) => panic!("the testee did not end within {d:?} (after {:?})", started.elapsed()),
    }
}

/// TP-CALL-02/14: result_json is an array of objects with a string `type`; a ToolError only
/// with is_error.
pub fn check_result_shape(r: &CallToolResponse) {
    let v: Value = serde_json::from_str(&r.result_json).expect("result_json is JSON");
    let items = v.as_array().expect("result_json is an array");
    for item in items {
        assert!(item.get("type").and_then(Value::as_str).is_some(), "element without a string type: {item}");
    }
    if !r.is_error {
        assert!(r.error.is_none(), "TP-CALL-14: ToolError on a success: {r:?}");
    }
}

/// The text of the first (and only) text element.
pub fn text(r: &CallToolResponse) -> String {
    let v: Value = serde_json::from_str(&r.result_json).expect("JSON");
    v[0]["text"].as_str().unwrap_or_else(|| panic!("no text element in {}", r.result_json)).to_owned()
}

/// Asserts a successful text result.
pub fn ok_text(r: &CallToolResponse, want: &str) {
    assert!(!r.is_error, "expected success, got {r:?}");
    assert_eq!(text(r), want);
}

/// Asserts an error result whose text contains `needle`.
pub fn err_text(r: &CallToolResponse, needle: &str) {
    assert!(r.is_error, "expected an error result, got {r:?}");
    let t = text(r);
    assert!(t.contains(needle), "{t:?} does not contain {needle:?}");
}

pub fn tool_error(code: &str, message: &str, suggestion: &str, retryable: bool) -> ToolError {
    ToolError { error_code: code.into(), message: message.into(), suggestion: suggestion.into(), retryable }
}

/// `[{"type":"text","text":"x…"}]` with n x's.
pub fn x_json(n: usize) -> String {
    format!(r#"[{{"type":"text","text":"{}"}}]"#, "x".repeat(n))
}
