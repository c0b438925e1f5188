//! What a bridge decides about the MCP input of its host, sans-IO: the host's stdio bytes split
//! into bounded lines ([`LineSplitter`]), and the gate in front of an MCP server ([`Gate`]) that
//! checks each message the way JSON-RPC 2.0 and the BR requirements want it checked and answers
//! here what the server would answer wrongly.
//!
//! The gate answers -32700 for a line that is not JSON (BR-MCP-16), -32600 with `id` null for a
//! JSON value that is not a JSON-RPC message and for a batch (BR-MCP-17/21), -32602 for a known
//! method whose params do not fit its types (BR-LOG-04, BR-COMPLETE-02, BR-CALL-03), never answers
//! a notification or a response (BR-MCP-19/22), and answers -32600 to a request that reuses the id
//! of one in flight, which stays in flight and gets its own answer (BR-MCP-19/20). It tracks the
//! ids in flight: [`Gate::outbound`] sees every message the server sends.
//!
//! Which messages the server behind the gate can read at all is not known here: a
//! [`ServerReader`] says so. The reference bridge implements it with its MCP library's types;
//! [`SpecReader`] implements it from the shapes of the MCP schema (used by the fuzz target and
//! by the tests of this module).

use std::collections::{HashSet, VecDeque};

use serde_json::{Map, Value, json};

use crate::jsonrpc::ErrorCode;

/// The largest POST body the reference bridge reads; a longer one is refused with 413.
pub const MAX_POST_BODY: usize = 4 << 20;

// ---------------------------------------------------------------------------------------------
// Lines

/// One line from the host, without its `\n` (or `\r\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostLine {
    Text(String),
    /// A line longer than the bound, read past and dropped; `len` counts its bytes (without the
    /// line end).
    TooLong {
        len: usize,
    },
    /// A line that is not UTF-8.
    NotUtf8,
}

impl HostLine {
    /// The answer to a line that is not a message (BR-MCP-16/17: id null, the session goes on);
    /// `None` for a line of text, which goes to the [`Gate`]. `max` is the splitter's bound.
    pub fn answer(&self, max: usize) -> Option<Value> {
        match self {
            HostLine::Text(_) => None,
            HostLine::TooLong { len } => Some(error_response(
                Value::Null,
                ErrorCode::INVALID_REQUEST,
                &format!("a line of {len} bytes, longer than this bridge reads ({max} bytes)"),
            )),
            HostLine::NotUtf8 => Some(error_response(Value::Null, ErrorCode::PARSE_ERROR, "the line is not UTF-8")),
        }
    }
}

/// The host's stdio bytes split into lines of at most `max` bytes: a host that writes without
/// ever ending a line costs at most the bound, and a line that is not UTF-8 is a line like any
/// other instead of the end of the session. The lines are the same however the bytes are cut
/// into [`push`](LineSplitter::push)es.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    /// The line being read (at most `max + 1` bytes: a `\r` may still be its end).
    buf: Vec<u8>,
    /// Bytes of the over-long line being read past, and whether the last one was `\r`.
    skipping: Option<(usize, bool)>,
    ready: VecDeque<HostLine>,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter { max, buf: Vec::new(), skipping: None, ready: VecDeque::new() }
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Takes bytes from the host; the lines they complete come out of [`next_line`](Self::next_line).
    pub fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let nl = bytes.iter().position(|&b| b == b'\n');
            let part = &bytes[..nl.unwrap_or(bytes.len())];
            if let Some((n, cr)) = &mut self.skipping {
                *n += part.len();
                if let Some(&last) = part.last() {
                    *cr = last == b'\r';
                }
            } else {
                let room = (self.max + 1).saturating_sub(self.buf.len());
                if part.len() > room {
                    self.skipping = Some((self.buf.len() + part.len(), part.last() == Some(&b'\r')));
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            match nl {
                Some(i) => {
                    let line = self.end_line(true);
                    self.ready.push_back(line);
                    bytes = &bytes[i + 1..];
                }
                None => break,
            }
        }
    }

    /// The next complete line.
    pub fn next_line(&mut self) -> Option<HostLine> {
        self.ready.pop_front()
    }

    /// The end of the input: the last line, when it had no `\n` (after the complete lines, which
    /// [`next_line`](Self::next_line) still hands out).
    pub fn finish(&mut self) -> Option<HostLine> {
        if self.skipping.is_none() && self.buf.is_empty() {
            return None;
        }
        Some(self.end_line(false))
    }

    /// The line read so far; `at_newline`: it ended with `\n` (then a `\r` before it is part of
    /// the line end; at the end of the input it is not).
    fn end_line(&mut self, at_newline: bool) -> HostLine {
        if let Some((n, cr)) = self.skipping.take() {
            return HostLine::TooLong { len: n - usize::from(cr && at_newline) };
        }
        let mut line = std::mem::take(&mut self.buf);
        if at_newline && line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.len() > self.max {
            return HostLine::TooLong { len: line.len() };
        }
        match String::from_utf8(line) {
            Ok(s) => HostLine::Text(s),
            Err(_) => HostLine::NotUtf8,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What the server reads

/// What the MCP server behind the gate can read.
pub trait ServerReader {
    /// Whether the server reads `message` (a JSON object) at all, as a request, a notification
    /// or a response of its client's.
    fn reads(&self, message: &Value) -> bool;

    /// Whether the server reads a request of `method` (one of [`TYPED_METHODS`]) with these
    /// params as that method, rather than as an unknown one.
    fn reads_params(&self, method: &str, params: Option<&Value>) -> bool;
}

/// Methods served with params that the server reads into types: a request whose params do not
/// fit is answered -32602 (invalid params), not -32601.
pub const TYPED_METHODS: &[&str] = &[
    "initialize",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// `_meta` member of a modern (MCP 2026-07-28) request naming its protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Whether a request of `method` with `params` is modern (MCP 2026-07-28, spec §26.1,
/// BR-STATELESS-02): not `initialize`, and `server/discover`, `subscriptions/listen` or a request
/// whose `params._meta` names a protocol version. Every other request is legacy.
pub fn is_modern(method: &str, params: Option<&Value>) -> bool {
    method != "initialize"
        && ((method == "server/discover" && !crate::fault::on(crate::fault::Fault::BrStatelessDiscoverNeedsMeta))
            || method == "subscriptions/listen"
            || params.and_then(|p| p.get("_meta")).and_then(|m| m.get(META_VERSION)).is_some())
}

/// The levels of `logging/setLevel` (RFC 5424 names, as the MCP schema lists them).
pub const LOG_LEVELS: &[&str] = &crate::bridge_core::shapes::LEVELS;

/// A [`ServerReader`] from the shapes the MCP schema gives the client's messages: a server that
/// reads what the schema allows and nothing else (unknown members are allowed, as the schema
/// does not close its objects).
#[derive(Debug, Default, Clone, Copy)]
pub struct SpecReader;

impl SpecReader {
    fn meta_ok(p: &Map<String, Value>) -> bool {
        p.get("_meta").is_none_or(Value::is_object)
    }
}

fn is_str(v: Option<&Value>) -> bool {
    v.is_some_and(Value::is_string)
}

fn opt_str(v: Option<&Value>) -> bool {
    v.is_none_or(|v| v.is_string() || v.is_null())
}

fn is_id(v: Option<&Value>) -> bool {
    v.is_some_and(|v| v.is_string() || v.is_i64())
}

impl ServerReader for SpecReader {
    fn reads(&self, message: &Value) -> bool {
        let Some(o) = message.as_object() else { return false };
        if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return false;
        }
        let params = o.get("params");
        if let Some(method) = o.get("method") {
            let Some(method) = method.as_str() else { return false };
            if params.is_some_and(|p| !p.is_object() && !p.is_null()) {
                return false;
            }
            return match (o.get("id"), method) {
                (Some(id), m) => is_id(Some(id)) && (!TYPED_METHODS.contains(&m) || self.reads_params(m, params)),
                // A notification whose params do not fit its method is read as an unknown one
                // (and ignored), as the spec wants unknown notifications to be.
                (None, _) => true,
            };
        }
        let null_id_error = o.contains_key("error") && o.get("id").is_some_and(Value::is_null);
        if !(is_id(o.get("id")) || null_id_error) {
            return false;
        }
        match (o.get("result"), o.get("error")) {
            (Some(r), None) => r.is_object(),
            (None, Some(e)) => {
                e.as_object().is_some_and(|e| e.get("code").is_some_and(Value::is_i64) && is_str(e.get("message")))
            }
            _ => false,
        }
    }

    fn reads_params(&self, method: &str, params: Option<&Value>) -> bool {
        let empty = Map::new();
        let p = match params {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return false,
        };
        if !Self::meta_ok(p) {
            return false;
        }
        let obj_of_strings = |v: Option<&Value>| {
            v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(|o| o.values().all(Value::is_string)))
        };
        match method {
            "initialize" => {
                is_str(p.get("protocolVersion"))
                    && p.get("capabilities").is_some_and(Value::is_object)
                    && p.get("clientInfo")
                        .and_then(Value::as_object)
                        .is_some_and(|c| is_str(c.get("name")) && is_str(c.get("version")))
            }
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => opt_str(p.get("cursor")),
            "tools/call" => {
                is_str(p.get("name"))
                    && p.get("arguments").is_none_or(|a| {
                        a.is_object()
                            || a.is_null()
                            || crate::fault::on(crate::fault::Fault::BrCallNonObjectArgsForwarded)
                    })
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => is_str(p.get("uri")),
            "prompts/get" => is_str(p.get("name")) && obj_of_strings(p.get("arguments")),
            "completion/complete" => {
                let r = p.get("ref").and_then(Value::as_object);
                let ref_ok = r.is_some_and(|r| match r.get("type").and_then(Value::as_str) {
                    Some("ref/prompt") => is_str(r.get("name")),
                    Some("ref/resource") => is_str(r.get("uri")),
                    _ => crate::fault::on(crate::fault::Fault::BrCompleteOtherRefForwarded),
                });
                let arg = p.get("argument").and_then(Value::as_object);
                ref_ok && arg.is_some_and(|a| is_str(a.get("name")) && is_str(a.get("value")))
            }
            "logging/setLevel" => p.get("level").and_then(Value::as_str).is_some_and(|l| {
                LOG_LEVELS.contains(&l) || crate::fault::on(crate::fault::Fault::BrLogInvalidLevelAccepted)
            }),
            _ => false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The gate

/// What to do with one message from the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Hand it to the MCP server.
    Pass,
    /// Answer it here with this error response; the server never sees it.
    Answer(Value),
    /// Drop it (an empty line, or a notification or response nobody can read).
    Drop,
}

/// A JSON-RPC error response.
pub fn error_response(id: Value, code: ErrorCode, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.code(), "message": message}})
}

/// A request id as MCP allows it: a string or an integer, never null.
pub fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64()
}

/// The key of an id in the in-flight set (`1` and `"1"` are different ids).
fn key(id: &Value) -> String {
    id.to_string()
}

/// The per-session state of the gate (the ids of the host's requests in flight) and the
/// server's reader.
#[derive(Debug, Default)]
pub struct Gate<R> {
    reader: R,
    in_flight: HashSet<String>,
}

impl<R: ServerReader + Default> Gate<R> {
    pub fn new() -> Self {
        Gate { reader: R::default(), in_flight: HashSet::new() }
    }
}

impl<R: ServerReader> Gate<R> {
    pub fn with_reader(reader: R) -> Self {
        Gate { reader, in_flight: HashSet::new() }
    }

    /// Checks one line from the host (stdio).
    pub fn inbound_line(&mut self, line: &str) -> Admission {
        self.inbound_parsed(line).0
    }

    /// [`Gate::inbound_line`], also handing back the message it parsed (when it is JSON), so
    /// that the caller need not parse the line again.
    pub fn inbound_parsed(&mut self, line: &str) -> (Admission, Option<Value>) {
        if line.trim().is_empty() {
            return (Admission::Drop, None);
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) => (self.inbound(&v), Some(v)),
            Err(_) => (Admission::Answer(error_response(Value::Null, ErrorCode::PARSE_ERROR, "parse error")), None),
        }
    }

    /// Checks the body of an HTTP POST: the verdict and, for a request passed on, its id (in
    /// flight until [`Gate::answered`]).
    pub fn inbound_body(&mut self, body: &[u8]) -> (Admission, Option<Value>) {
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return (Admission::Answer(error_response(Value::Null, ErrorCode::PARSE_ERROR, "parse error")), None);
        };
        let verdict = self.inbound(&v);
        let id = match verdict {
            Admission::Pass if v.get("method").is_some() => v.get("id").cloned(),
            _ => None,
        };
        (verdict, id)
    }

    /// The response to the host's request `id` is being sent (or abandoned): the id is free again.
    pub fn answered(&mut self, id: &Value) {
        self.in_flight.remove(&key(id));
    }

    /// Checks one JSON value from the host.
    pub fn inbound(&mut self, v: &Value) -> Admission {
        let o = match v {
            // BR-MCP-21
            Value::Array(_) if crate::fault::on(crate::fault::Fault::BrMcpBatchUnanswered) => return Admission::Drop,
            Value::Array(_) => {
                return Admission::Answer(error_response(
                    Value::Null,
                    ErrorCode::INVALID_REQUEST,
                    "batches are not supported",
                ));
            }
            Value::Object(o) => o,
            _ => {
                return Admission::Answer(error_response(
                    Value::Null,
                    ErrorCode::INVALID_REQUEST,
                    "not a JSON-RPC message",
                ));
            }
        };
        let id = o.get("id");
        let reply_id = id.filter(|i| valid_id(i)).cloned().unwrap_or(Value::Null);
        let invalid = |why: &str| Admission::Answer(error_response(reply_id.clone(), ErrorCode::INVALID_REQUEST, why));
        if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            if crate::fault::on(crate::fault::Fault::BrMcpInvalidMessageDropped) {
                return Admission::Drop;
            }
            return invalid("not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\"");
        }
        let Some(method) = o.get("method") else {
            // A response to a request of the bridge (sampling, roots), or nothing at all.
            let (result, error) = (o.contains_key("result"), o.contains_key("error"));
            if !(result ^ error) || !id.is_some_and(|i| valid_id(i) || (error && i.is_null())) {
                return invalid("not a JSON-RPC message: neither a request, a notification nor a response");
            }
            // An answer the server cannot read is dropped, never answered (BR-MCP-22).
            return if self.reader.reads(v) { Admission::Pass } else { Admission::Drop };
        };
        let Some(method) = method.as_str() else { return invalid("\"method\" must be a string") };
        let params = o.get("params");
        let bad_params = params.is_some_and(|p| !p.is_object() && !p.is_array() && !p.is_null());
        let Some(id) = id else {
            if bad_params {
                return Admission::Drop;
            }
            // A notification: never answered (BR-MCP-19); one the server cannot read is dropped.
            if method == "notifications/cancelled"
                && let Some(rid) = params.and_then(|p| p.get("requestId"))
            {
                self.in_flight.remove(&key(rid));
            }
            return if self.reader.reads(v) { Admission::Pass } else { Admission::Drop };
        };
        if !valid_id(id) {
            return invalid("a request id must be a string or an integer");
        }
        if bad_params {
            return invalid("\"params\" must be an object");
        }
        if self.in_flight.contains(&key(id)) {
            // BR-MCP-20: the original stays in flight and gets its own answer.
            return Admission::Answer(error_response(
                id.clone(),
                ErrorCode::INVALID_REQUEST,
                "a request with this id is still in flight",
            ));
        }
        if TYPED_METHODS.contains(&method) {
            // A modern request's params are checked after its era's own checks (spec §26.2),
            // by the host core.
            if !is_modern(method, params) && !self.reader.reads_params(method, params) {
                return Admission::Answer(error_response(
                    id.clone(),
                    ErrorCode::INVALID_PARAMS,
                    &format!("invalid params for {method}"),
                ));
            }
        } else if !self.reader.reads(v) {
            return invalid("not a valid MCP request");
        }
        self.in_flight.insert(key(id));
        Admission::Pass
    }

    /// Sees one message the server sends to the host: a response ends its request.
    pub fn outbound(&mut self, v: &Value) {
        if v.get("method").is_none()
            && (v.get("result").is_some() || v.get("error").is_some())
            && let Some(id) = v.get("id")
        {
            self.in_flight.remove(&key(id));
        }
    }

    /// [`Gate::outbound`] for one line the server writes, read only as far as needed (the id,
    /// and whether it is a response), without building the message.
    pub fn outbound_line(&mut self, line: &str) {
        if self.in_flight.is_empty() {
            return;
        }
        if let Some(id) = response_id(line) {
            self.in_flight.remove(&key(&id));
        }
    }

    /// How many of the host's requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Whether the host's request `id` is in flight.
    pub fn is_in_flight(&self, id: &Value) -> bool {
        self.in_flight.contains(&key(id))
    }
}

/// The id of `line` when it is a JSON-RPC response (a `result` or an `error`, no `method`), read
/// only as far as needed.
pub fn response_id(line: &str) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<Value>,
        method: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_str::<Head>(line) {
        Ok(Head { id: Some(id), method: None, result, error }) if result.is_some() || error.is_some() => Some(id),
        _ => None,
    }
}

/// The HTTP status of the gate's own answer to a POST: a message without an id to answer (parse
/// error, invalid request) is a bad request (400); an error answer to a request is an ordinary
/// JSON-RPC response (200); nothing to answer is 202 (BR-HTTP-07). `None`: the server answers.
pub fn post_status(verdict: &Admission) -> Option<u16> {
    match verdict {
        Admission::Answer(v) if v["id"].is_null() => Some(400),
        Admission::Answer(_) => Some(200),
        Admission::Drop => Some(202),
        Admission::Pass => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Vec<HostLine> {
        let mut s = LineSplitter::new(max);
        s.push(input);
        let mut out: Vec<HostLine> = std::iter::from_fn(|| s.next_line()).collect();
        out.extend(s.finish());
        out
    }

    #[test]
    fn lines_end_at_newline_or_crlf_and_a_last_line_needs_no_newline() {
        let got = all(b"a\r\nbb\n\nlast", 100);
        let text = |s: &str| HostLine::Text(s.into());
        assert_eq!(got, vec![text("a"), text("bb"), text(""), text("last")]);
    }

    #[test]
    fn a_line_past_the_bound_is_dropped_and_counted_and_the_next_line_is_read() {
        let mut input = vec![b'x'; 300_000];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        let got = all(&input, 1000);
        assert_eq!(got, vec![HostLine::TooLong { len: 300_000 }, HostLine::Text("{\"ok\":1}".into())]);
        let got = all(&vec![b'y'; 200_000], 1000);
        assert_eq!(got, vec![HostLine::TooLong { len: 200_000 }], "an endless line at the end of the input");
    }

    #[test]
    fn a_line_that_is_not_utf8_is_reported_and_reading_goes_on() {
        let got = all(b"\xff\xfe\n{}\n", 100);
        assert_eq!(got, vec![HostLine::NotUtf8, HostLine::Text("{}".into())]);
    }

    #[test]
    fn the_lines_are_the_same_however_the_bytes_are_cut() {
        let input: &[u8] = b"abc\r\nabcd\r\nabcde\r\n\r\r\nab\xffc\nabcdefgh\rx\nabc\r";
        let whole = all(input, 4);
        assert_eq!(whole[0], HostLine::Text("abc".into()));
        assert_eq!(whole[1], HostLine::Text("abcd".into()), "the \\r of \\r\\n does not count");
        assert_eq!(whole[2], HostLine::TooLong { len: 5 });
        assert_eq!(whole[3], HostLine::Text("\r".into()), "only one \\r is the line's end");
        assert_eq!(whole[5], HostLine::TooLong { len: 10 });
        assert_eq!(whole[6], HostLine::Text("abc\r".into()), "a last line keeps its \\r");
        for size in 1..input.len() {
            let mut s = LineSplitter::new(4);
            let mut got = Vec::new();
            for chunk in input.chunks(size) {
                s.push(chunk);
                got.extend(std::iter::from_fn(|| s.next_line()));
            }
            got.extend(s.finish());
            assert_eq!(got, whole, "chunks of {size}");
        }
    }

    #[test]
    fn a_line_that_is_not_a_message_is_answered_with_id_null() {
        let too_long = HostLine::TooLong { len: 9 }.answer(4).unwrap();
        assert_eq!((too_long["id"].clone(), too_long["error"]["code"].clone()), (Value::Null, json!(-32600)));
        let not_utf8 = HostLine::NotUtf8.answer(4).unwrap();
        assert_eq!((not_utf8["id"].clone(), not_utf8["error"]["code"].clone()), (Value::Null, json!(-32700)));
        assert_eq!(HostLine::Text("{}".into()).answer(4), None);
    }

    type SpecGate = Gate<SpecReader>;

    fn answer(g: &mut SpecGate, line: &str) -> (Value, i64) {
        match g.inbound_line(line) {
            Admission::Answer(v) => (v["id"].clone(), v["error"]["code"].as_i64().unwrap()),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn what_is_not_json_rpc_is_answered_minus_32700_or_minus_32600() {
        let mut g = SpecGate::new();
        assert_eq!(g.inbound_line("  "), Admission::Drop);
        assert_eq!(answer(&mut g, "nope"), (Value::Null, -32700));
        assert_eq!(answer(&mut g, "[]"), (Value::Null, -32600));
        assert_eq!(answer(&mut g, "3"), (Value::Null, -32600));
        assert_eq!(answer(&mut g, r#"{"hello":"world"}"#), (Value::Null, -32600));
        assert_eq!(answer(&mut g, r#"{"id":4,"method":"ping"}"#), (json!(4), -32600));
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), (Value::Null, -32600));
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":5,"method":7}"#), (json!(5), -32600));
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":3}"#), (json!(6), -32600));
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":7}"#), (json!(7), -32600));
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#), (Value::Null, -32600));
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":8,"result":{},"error":{}}"#), (json!(8), -32600));
        assert_eq!(g.in_flight(), 0);
    }

    #[test]
    fn params_that_do_not_fit_are_invalid_params() {
        let mut g = SpecGate::new();
        let bad_level = r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"shouting"}}"#;
        assert_eq!(answer(&mut g, bad_level), (json!(1), -32602));
        let bad_ref = r#"{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/nothing","name":"x"},"argument":{"name":"a","value":"b"}}}"#;
        assert_eq!(answer(&mut g, bad_ref), (json!(2), -32602));
        let call = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":"s"}}"#;
        assert_eq!(answer(&mut g, call), (json!("a"), -32602));
        assert_eq!(g.in_flight(), 0);
        for ok in [
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"x":1}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"no/such/method","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}"#,
        ] {
            assert_eq!(g.inbound_line(ok), Admission::Pass, "{ok}");
        }
    }

    #[test]
    fn notifications_and_responses_are_never_answered() {
        let mut g = SpecGate::new();
        assert_eq!(g.inbound_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), Admission::Pass);
        assert_eq!(
            g.inbound_line(r#"{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}"#),
            Admission::Pass
        );
        // Whatever the server makes of these, the host gets no answer.
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":3}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":9,"error":"what"}"#,
        ] {
            assert!(!matches!(g.inbound_line(line), Admission::Answer(_)), "{line}");
        }
        assert_eq!(g.inbound_line(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#), Admission::Pass);
    }

    #[test]
    fn http_bodies_go_through_the_same_gate_and_give_the_id_in_flight() {
        let mut g = SpecGate::new();
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(g.inbound_body(call), (Admission::Pass, Some(json!(2))));
        let (again, None) = g.inbound_body(call) else { panic!() };
        assert_eq!(post_status(&again), Some(200));
        g.answered(&json!(2));
        assert_eq!(g.inbound_body(call), (Admission::Pass, Some(json!(2))));
        let (bad, None) = g.inbound_body(b"{nope") else { panic!() };
        assert_eq!(post_status(&bad), Some(400));
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(g.inbound_body(note), (Admission::Pass, None));
        let (unread, None) = g.inbound_body(br#"{"jsonrpc":"2.0","id":3,"error":"x"}"#) else { panic!() };
        assert_eq!(post_status(&unread), Some(202));
    }

    #[test]
    fn an_id_in_flight_is_not_taken_twice() {
        let mut g = SpecGate::new();
        let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(g.inbound_line(call), Admission::Pass);
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), (json!(2), -32600));
        // "2" is another id than 2.
        assert_eq!(g.inbound_line(r#"{"jsonrpc":"2.0","id":"2","method":"ping"}"#), Admission::Pass);
        g.outbound(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}));
        assert_eq!(g.in_flight(), 2);
        g.outbound(&json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
        assert_eq!(g.inbound_line(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), Admission::Pass);
        // The same, from the line the server writes: a request of the server's does not count.
        g.outbound_line(r#"{"jsonrpc":"2.0","id":2,"method":"roots/list"}"#);
        assert_eq!(answer(&mut g, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), (json!(2), -32600));
        g.outbound_line(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"m"}}"#);
        assert_eq!(g.inbound_line(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), Admission::Pass);
        // A cancelled request is no longer in flight.
        let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#;
        assert_eq!(g.inbound_line(cancel), Admission::Pass);
        assert_eq!(g.inbound_line(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), Admission::Pass);
    }

    #[test]
    fn the_spec_reader_reads_the_schema_shapes_of_the_typed_methods() {
        let r = SpecReader;
        let init =
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}});
        assert!(r.reads_params("initialize", Some(&init)));
        assert!(!r.reads_params("initialize", Some(&json!({"protocolVersion": 1}))));
        assert!(!r.reads_params("initialize", None));
        assert!(r.reads_params("resources/read", Some(&json!({"uri": "file:///x"}))));
        assert!(!r.reads_params("resources/read", Some(&json!({}))));
        assert!(r.reads_params("prompts/get", Some(&json!({"name": "p", "arguments": {"a": "b"}}))));
        assert!(!r.reads_params("prompts/get", Some(&json!({"name": "p", "arguments": {"a": 1}}))));
        assert!(!r.reads_params("tools/list", Some(&json!({"cursor": 3}))));
        assert!(!r.reads_params("tools/list", Some(&json!({"_meta": 3}))));
        assert!(r.reads(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 0.5}})));
        assert!(
            r.reads(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}))
        );
        assert!(!r.reads(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": 1})));
        assert!(!r.reads(&json!({"jsonrpc": "2.0", "id": 1, "result": 3})));
    }
}
