//! The targets over MCP input: proto-mcp frames, and a bridge's host input through its gates.

use super::{Admission, BytesMut, FUZZ_LIMITS, Message, XorShift};
use crate::mcp_input::{Gate, HostLine, LineSplitter, SpecReader};

/// The bound the `mcp_input` target splits lines with: small, so that over-long lines are common.
pub const MCP_INPUT_LINE: usize = 256;

/// Target `mcp_message_frame`: proto-mcp frames (`[len][MCPMessage]`) through the generic
/// [`MessageDecoder`](crate::frame::MessageDecoder); the first byte seeds the chunking as in
/// [`frame_decoder`]. Oracle: frames are contiguous and carry their announced length, the
/// decoder fails exactly where the framing does, every decoded message re-encodes to a body
/// that decodes back to it, and whole-input and chunked decoding agree.
pub fn mcp_message_frame(data: &[u8]) {
    use crate::frame::{MessageDecoder, MessageFrameError};
    use crate::mcp::McpMessage;
    let Some((&seed, stream)) = data.split_first() else { return };
    let max = FUZZ_LIMITS.max_frame;
    let prefix_at = |at: usize| u32::from_be_bytes([stream[at], stream[at + 1], stream[at + 2], stream[at + 3]]);
    let run = |chunked: bool| {
        let mut rng = XorShift(u32::from(seed) | 0x100);
        let mut decoder = MessageDecoder::<McpMessage>::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut fed = 0usize;
        loop {
            let n = if chunked { (rng.next() % 17) as usize + 1 } else { stream.len() };
            let n = n.min(stream.len() - fed);
            buf.extend_from_slice(&stream[fed..fed + n]);
            fed += n;
            let eof = fed == stream.len();
            loop {
                let step = if eof { decoder.decode_eof(&mut buf) } else { decoder.decode(&mut buf) };
                match step {
                    Ok(None) => break,
                    Ok(Some(d)) => out.push(Ok(d)),
                    Err(e) => {
                        let go_on = e.is_recoverable();
                        out.push(Err(e));
                        if !go_on {
                            return out;
                        }
                    }
                }
            }
            if eof {
                return out;
            }
        }
    };
    let whole = run(false);
    assert_eq!(run(seed != 0), whole, "chunking does not change what is decoded");
    let mut at = 0usize;
    for item in &whole {
        match item {
            Ok(d) => {
                assert_eq!((d.offset, d.len), (at as u64, prefix_at(at)), "frames are contiguous");
                assert!(d.len <= max);
                let again = d.message.encode_to_vec();
                assert_eq!(McpMessage::decode(again.as_slice()).as_ref(), Ok(&d.message), "re-encoding round-trips");
                at += 4 + d.len as usize;
            }
            Err(MessageFrameError::Undecodable { offset, len, body, .. }) => {
                assert_eq!((*offset, *len), (at as u64, prefix_at(at)));
                assert_eq!(body.len(), *len as usize);
                assert!(McpMessage::decode(body.clone()).is_err(), "prost agrees the body is undecodable");
                at += 4 + *len as usize;
            }
            Err(MessageFrameError::Oversize { offset, len, max: m }) => {
                assert_eq!((*offset, *len), (at as u64, prefix_at(at)));
                assert!(len > m);
                return;
            }
            Err(MessageFrameError::Truncated { offset, have, need, .. }) => {
                assert_eq!(*offset, at as u64);
                assert!(have < need && (stream.len() - at) as u64 == *have, "the rest is a cut-short frame");
                return;
            }
        }
    }
    assert_eq!(at, stream.len(), "every byte belongs to a frame");
}

/// Target `mcp_input`: arbitrary bytes as a bridge's MCP input, through every decision of
/// [`crate::mcp_input`] without I/O. The first byte seeds the chunking of the stdio bytes (0: all
/// at once) and which requests the simulated server answers; the rest is the host's stdin.
///
/// Oracle: the lines are exactly the input's own `\n`-separated pieces (a `\r` before `\n` is the
/// line end, at most [`MCP_INPUT_LINE`] bytes, longer ones reported with their length, non-UTF-8
/// ones reported), whatever the chunking. Each line then goes through a stdio gate, and each piece
/// (and the whole input) as a POST body through an HTTP gate; for every message
/// [`check_gate_verdict`] holds.
pub fn mcp_input(data: &[u8]) {
    let Some((&seed, input)) = data.split_first() else { return };
    let (lines, pieces) = input_lines(seed, input);
    let mut rng = XorShift(u32::from(seed) | 0x200);
    stdio_gate(&lines, &mut rng);
    http_gate(input, &pieces, &mut rng);
}

/// `mcp_input`'s lines, whatever the chunking, checked against the reference reading: the
/// input's own `\n`-separated pieces (returned too, with whether a `\n` ended each).
fn input_lines(seed: u8, input: &[u8]) -> (Vec<HostLine>, Vec<(&[u8], bool)>) {
    let max = MCP_INPUT_LINE;
    let split = |chunked: bool| {
        let mut rng = XorShift(u32::from(seed) | 0x100);
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let n = if chunked { (rng.next() % 300) as usize + 1 } else { rest.len() };
            let (now, later) = rest.split_at(n.min(rest.len()));
            s.push(now);
            out.extend(std::iter::from_fn(|| s.next_line()));
            rest = later;
        }
        out.extend(s.finish());
        out
    };
    let lines = split(false);
    assert_eq!(split(seed != 0), lines, "chunking does not change the lines");
    // The reference reading: the pieces between `\n`s.
    let mut pieces: Vec<(&[u8], bool)> = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let piece = &rest[..i];
                pieces.push((piece.strip_suffix(b"\r").unwrap_or(piece), true));
                rest = &rest[i + 1..];
            }
            None => {
                pieces.push((rest, false));
                rest = &[];
            }
        }
    }
    assert_eq!(lines.len(), pieces.len(), "one line per piece");
    for (line, (piece, _)) in lines.iter().zip(&pieces) {
        let expected = if piece.len() > max {
            HostLine::TooLong { len: piece.len() }
        } else {
            match std::str::from_utf8(piece) {
                Ok(s) => HostLine::Text(s.to_owned()),
                Err(_) => HostLine::NotUtf8,
            }
        };
        assert_eq!(line, &expected, "the line is the piece");
    }
    (lines, pieces)
}

/// `mcp_input`'s lines through a stdio gate; the simulated server answers some requests passed on.
fn stdio_gate(lines: &[HostLine], rng: &mut XorShift) {
    let max = MCP_INPUT_LINE;
    let mut stdio = Gate::<SpecReader>::new();
    for line in lines {
        let HostLine::Text(text) = line else {
            let answer = line.answer(max).expect("a line that is not text is answered");
            let code = check_error_response(&answer);
            assert!(answer["id"].is_null(), "BR-MCP-16/17: id null");
            assert_eq!(code, if matches!(line, HostLine::NotUtf8) { -32700 } else { -32600 });
            continue;
        };
        assert!(text.len() <= max, "no line is longer than the bound");
        let parsed = serde_json::from_str::<serde_json::Value>(text).ok();
        let was = parsed.as_ref().and_then(|v| v.get("id")).map(|id| stdio.is_in_flight(id));
        let verdict = stdio.inbound_line(text);
        check_gate_verdict(text.trim().is_empty(), parsed.as_ref(), was == Some(true), &verdict);
        if let (Admission::Pass, Some(id)) = (&verdict, parsed.as_ref().and_then(request_id)) {
            assert!(stdio.is_in_flight(&id), "a request passed on is in flight");
            // The server answers some of them now.
            if rng.next().is_multiple_of(2) {
                stdio.outbound_line(&serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string());
                assert!(!stdio.is_in_flight(&id), "an answered request is no longer in flight");
            }
        }
    }
}

/// Each piece of `mcp_input` (and the whole input) as a POST body through an HTTP gate.
fn http_gate(input: &[u8], pieces: &[(&[u8], bool)], rng: &mut XorShift) {
    let mut http = Gate::<SpecReader>::new();
    let whole = [input].into_iter().filter(|i| i.len() <= crate::mcp_input::MAX_POST_BODY);
    for body in pieces.iter().map(|(p, _)| *p).chain(whole) {
        let parsed = serde_json::from_slice::<serde_json::Value>(body).ok();
        let was = parsed.as_ref().and_then(|v| v.get("id")).map(|id| http.is_in_flight(id));
        let (verdict, passed_id) = http.inbound_body(body);
        check_gate_verdict(false, parsed.as_ref(), was == Some(true), &verdict);
        let status = crate::mcp_input::post_status(&verdict);
        match &verdict {
            Admission::Pass => {
                assert_eq!(status, None);
                let v = parsed.as_ref().expect("only JSON is passed on");
                assert_eq!(passed_id, request_id(v), "the id in flight is the request's");
            }
            Admission::Answer(a) => {
                assert_eq!(status, Some(if a["id"].is_null() { 400 } else { 200 }));
                assert_eq!(passed_id, None);
            }
            Admission::Drop => assert_eq!((status, &passed_id), (Some(202), &None)),
        }
        if let Some(id) = passed_id
            && rng.next().is_multiple_of(2)
        {
            http.answered(&id);
        }
    }
}

/// The id of `v` when it is a request (a JSON-RPC 2.0 object with a string method and a
/// string or integer id).
fn request_id(v: &serde_json::Value) -> Option<serde_json::Value> {
    let o = v.as_object()?;
    (o.get("jsonrpc")?.as_str()? == "2.0" && o.get("method")?.is_string())
        .then(|| o.get("id").filter(|id| crate::mcp_input::valid_id(id)).cloned())
        .flatten()
}

/// An error response as BR-MCP-18 wants it: `{"jsonrpc":"2.0","id":…,"error":{"code":int≠0,
/// "message":string}}`; returns the code.
fn check_error_response(answer: &serde_json::Value) -> i64 {
    assert_eq!(answer["jsonrpc"], "2.0", "an answer is JSON-RPC 2.0: {answer}");
    assert!(answer.get("result").is_none(), "an error answer has no result");
    let id = answer.get("id").expect("an answer has an id member");
    assert!(id.is_null() || crate::mcp_input::valid_id(id), "the answer's id is null, a string or an integer");
    let code = answer["error"]["code"].as_i64().expect("BR-MCP-18: the code is an integer");
    assert_ne!(code, 0, "BR-MCP-18: the code is not 0");
    assert!(answer["error"]["message"].is_string(), "the error has a message");
    code
}

/// The gate's verdict on one message is one the spec allows: a request with a valid id is
/// passed on or answered with that id, and answered -32600 when its id is in flight (BR-MCP-19/
/// 20); a notification or a response is never answered (BR-MCP-19/22); text that is not JSON is
/// answered -32700 with id null (BR-MCP-16), a batch -32600 with id null (BR-MCP-21); blank
/// lines are dropped; an answer's id is the message's or null.
pub fn check_gate_verdict(blank: bool, parsed: Option<&serde_json::Value>, id_in_flight: bool, verdict: &Admission) {
    if blank {
        assert_eq!(verdict, &Admission::Drop, "a blank line is dropped");
        return;
    }
    let Some(v) = parsed else {
        let Admission::Answer(a) = verdict else { panic!("BR-MCP-16: text that is not JSON is answered: {verdict:?}") };
        assert_eq!((check_error_response(a), &a["id"]), (-32700, &serde_json::Value::Null), "BR-MCP-16");
        return;
    };
    if let Admission::Answer(a) = verdict {
        check_error_response(a);
        let id = v.get("id").filter(|id| crate::mcp_input::valid_id(id));
        assert!(a["id"].is_null() || Some(&a["id"]) == id, "the answer carries the message's id or null");
    }
    if v.is_array() {
        let Admission::Answer(a) = verdict else { panic!("BR-MCP-21: a batch is answered") };
        assert_eq!((check_error_response(a), &a["id"]), (-32600, &serde_json::Value::Null));
        return;
    }
    let Some(o) = v.as_object() else {
        assert!(matches!(verdict, Admission::Answer(_)), "BR-MCP-17: a value that is not a message is answered");
        return;
    };
    let json_rpc = o.get("jsonrpc").and_then(serde_json::Value::as_str) == Some("2.0");
    let notification = json_rpc && o.get("method").is_some_and(serde_json::Value::is_string) && !o.contains_key("id");
    let response = json_rpc
        && !o.contains_key("method")
        && (o.contains_key("result") ^ o.contains_key("error"))
        && o.get("id").is_some_and(crate::mcp_input::valid_id);
    if notification || response {
        assert!(!matches!(verdict, Admission::Answer(_)), "BR-MCP-19/22: a notification or response is never answered");
    }
    if let Some(id) = request_id(v) {
        match verdict {
            Admission::Pass => assert!(!id_in_flight, "BR-MCP-20: a request reusing an id in flight is not passed on"),
            Admission::Answer(a) => {
                assert_eq!(a["id"], id, "BR-MCP-19: a request is answered with its id");
                if id_in_flight {
                    assert_eq!(a["error"]["code"], -32600, "BR-MCP-20");
                }
            }
            Admission::Drop => panic!("BR-MCP-19: a request is never dropped"),
        }
    }
}
