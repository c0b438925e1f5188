//! Bodies of the cargo-fuzz targets. Each target in `fuzz/fuzz_targets/` is a one-line call into
//! this module; `cargo test` replays every committed corpus file through the same functions, so
//! an invariant broken once stays caught without a fuzzer.
//!
//! Invariants checked (a broken one panics):
//! - nothing panics on any input;
//! - the decoder gives the same items whether the bytes arrive at once or in any chunks;
//! - every decoded Envelope re-encodes to bytes that decode back to it;
//! - the wire scanner and prost agree on what is a valid Envelope;
//! - no allocation exceeds the limits (with the `alloc-guard` feature, any single allocation
//!   above [`GUARD_LIMIT`] aborts the process).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use prost::Message;

use crate::frame::{Frame, FrameDecoder, FrameError, Limits};
use crate::mcp_input::Verdict;
use crate::pb::{Envelope, RawHeader};
use crate::sideband::{self, Compression, StreamAssembler, StreamEvent, StreamLimits};
use crate::violation::Party;
use crate::wire;

/// Limits the fuzz targets decode with: small, so that "never beyond the limit" is testable.
pub const FUZZ_LIMITS: Limits = Limits { max_frame: 1 << 20, max_sideband: 1 << 20, max_decompressed: 1 << 20 };

/// The largest single allocation the fuzz targets may make: twice the largest limit (a buffer
/// may double once while it grows to the limit) plus slack.
pub const GUARD_LIMIT: usize = 3 << 20;

/// A global allocator that counts live and peak bytes and refuses (so the process aborts) any
/// single allocation above its limit. Tests install it with `#[global_allocator]`.
pub struct CountingAlloc {
    live: AtomicUsize,
    peak: AtomicUsize,
    limit: usize,
}

impl CountingAlloc {
    pub const fn new(limit: usize) -> Self {
        CountingAlloc { live: AtomicUsize::new(0), peak: AtomicUsize::new(0), limit }
    }

    /// Bytes allocated and not yet freed.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Highest `live` since the last [`reset_peak`](Self::reset_peak).
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn reset_peak(&self) {
        self.peak.store(self.live(), Ordering::Relaxed);
    }

    /// Whether an allocation of `size` bytes is refused. Not while a panic is in flight: the
    /// fuzzer has found its crash then, and the panic hook's backtrace symbolizer reads debug
    /// sections of several MiB while it holds std's backtrace lock; refusing them would make the
    /// alloc-error hook wait for that same lock forever (a hang and no crash artifact, whenever
    /// RUST_BACKTRACE is set).
    fn refuses(&self, size: usize) -> bool {
        size > self.limit && !std::thread::panicking()
    }

    fn grew(&self, n: usize) {
        let now = self.live.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
}

#[allow(unsafe_code)]
// SAFETY: every call is forwarded to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.refuses(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.refuses(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.refuses(new_size) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
            self.grew(new_size);
        }
        p
    }
}

#[cfg(feature = "alloc-guard")]
#[global_allocator]
static GUARD: CountingAlloc = CountingAlloc::new(GUARD_LIMIT);

/// A tiny deterministic generator for chunk sizes.
struct XorShift(u32);

impl XorShift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

/// Every item and error of a byte stream, decoded with `chunks` deciding how the bytes arrive.
pub fn decode_all(data: &[u8], limits: Limits, mut chunks: impl FnMut() -> usize) -> Vec<Result<Frame, FrameError>> {
    let mut decoder = FrameDecoder::with_limits(Party::ToolProcess, limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = data;
    loop {
        let n = chunks().clamp(1, rest.len().max(1)).min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        let at_eof = rest.is_empty();
        loop {
            let step = if at_eof { decoder.decode_eof(&mut buf) } else { decoder.decode(&mut buf) };
            match step {
                Ok(Some(item)) => out.push(Ok(item)),
                Ok(None) => break,
                Err(e) => {
                    let go_on = e.is_recoverable();
                    out.push(Err(e));
                    if !go_on {
                        return out;
                    }
                }
            }
        }
        if at_eof {
            return out;
        }
    }
}

/// Checks that an Envelope survives encode → decode → encode unchanged.
fn assert_roundtrip(env: &Envelope) {
    let bytes = env.encode_to_vec();
    assert_eq!(bytes.len(), env.encoded_len(), "encoded_len agrees with encode");
    let back = Envelope::decode(bytes.as_slice()).expect("a re-encoded Envelope decodes");
    assert_eq!(&back, env, "decode(encode(e)) == e");
    assert_eq!(back.encode_to_vec(), bytes, "encoding is a fixed point");
}

/// Target `frame_decoder`: the first byte seeds how the rest arrives in chunks (0: all at once).
///
/// The oracle is a reference reading of the input itself: every item must start where the
/// previous one ended, carry the length its prefix announces, and the decoder must fail exactly
/// where the framing does (an oversize prefix, or bytes missing at the end). Each frame is
/// decoded from one contiguous slice whatever the chunking, so items that sit at the right
/// offsets with the right lengths are the same items; round trips are `envelope_roundtrip`'s.
pub fn frame_decoder(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else { return };
    let limits = FUZZ_LIMITS;
    let prefix_at = |at: usize| u32::from_be_bytes([stream[at], stream[at + 1], stream[at + 2], stream[at + 3]]);
    let mut rng = XorShift(u32::from(seed) | 0x100);
    let mut decoder = FrameDecoder::with_limits(Party::ToolProcess, limits);
    let mut buf = BytesMut::new();
    let (mut fed, mut at) = (0usize, 0usize);
    // Size of the sideband payload that must come next, if any.
    let mut payload: Option<u64> = None;
    // An over-limit payload reported at once and then skipped: where it started and its size.
    let mut skipping: Option<(usize, u64)> = None;
    loop {
        let n = if seed == 0 { stream.len() } else { (rng.next() % 17) as usize + 1 };
        let n = n.min(stream.len() - fed);
        buf.extend_from_slice(&stream[fed..fed + n]);
        fed += n;
        let eof = fed == stream.len();
        loop {
            let step = if eof { decoder.decode_eof(&mut buf) } else { decoder.decode(&mut buf) };
            match step {
                Ok(None) => break,
                Ok(Some(Frame::Envelope(d))) => {
                    assert!(payload.is_none(), "a payload was due at {at}");
                    assert_eq!(d.offset, at as u64, "frames are contiguous");
                    assert_eq!(d.len, prefix_at(at), "the announced length");
                    assert!(d.len <= limits.max_frame);
                    at += 4 + d.len as usize;
                    if let Some(crate::pb::envelope::Msg::RawHeader(h)) = &d.envelope.msg {
                        payload = Some(h.size);
                    }
                    if let Some(report) = &d.wire {
                        assert!(report.unknown.iter().all(|u| !u.raw.is_empty() && u.raw.len() <= d.len as usize));
                    }
                }
                Ok(Some(Frame::Sideband(s))) => {
                    assert_eq!(payload.take(), Some(s.header.size), "a payload only after its RawHeader");
                    assert_eq!(s.offset, at as u64, "the payload follows its header");
                    if let Ok(p) = &s.payload {
                        assert!(p.len() as u64 <= limits.max_decompressed.max(limits.max_sideband));
                    } else if s.header.size > limits.max_sideband {
                        // Reported before its bytes arrive, then skipped unread.
                        assert!(matches!(s.payload, Err(crate::sideband::SidebandError::TooLarge { .. })));
                        skipping = Some((at, s.header.size));
                    }
                    at = at.saturating_add(usize::try_from(s.header.size).unwrap_or(usize::MAX));
                }
                Err(FrameError::Undecodable { offset, len, error, body, .. }) => {
                    assert!(payload.is_none());
                    assert_eq!((offset, len), (at as u64, prefix_at(at)));
                    assert_eq!(body.len(), len as usize);
                    assert!(error.offset <= body.len(), "the error offset lies inside the body");
                    at += 4 + len as usize;
                }
                Err(FrameError::Oversize { offset, len, max, .. }) => {
                    assert!(payload.is_none());
                    assert_eq!((offset, len), (at as u64, prefix_at(at)));
                    assert!(len > max);
                    return;
                }
                Err(FrameError::Truncated { offset, have, need, .. }) => {
                    assert!(eof, "truncation is only known at the end");
                    assert!(have < need);
                    match (payload, skipping) {
                        (Some(size), _) => {
                            assert!(offset == at as u64 && ((stream.len() - at) as u64) < size, "payload cut short")
                        }
                        (None, Some((start, size))) if at > stream.len() => {
                            assert!(offset == start as u64 && ((stream.len() - start) as u64) < size, "skip cut short")
                        }
                        _ => {
                            let left = stream.len() - at;
                            assert!(left < 4 || left < 4 + prefix_at(at) as usize, "frame cut short");
                        }
                    }
                    return;
                }
            }
        }
        if eof {
            break;
        }
    }
    assert!(payload.is_none() || payload == Some(0) && at == stream.len(), "a due payload was never reported");
    assert_eq!(at, stream.len(), "every byte belongs to an item");
}

/// Target `envelope_roundtrip`: the input is one Envelope body.
pub fn envelope_roundtrip(data: &[u8]) {
    let body = bytes::Bytes::copy_from_slice(data);
    let decoded = Envelope::decode(body.clone());
    let scanned = wire::scan(&body);
    match (&decoded, &scanned) {
        (Ok(env), Ok(report)) => {
            assert_roundtrip(env);
            // The frame decoder scans only where `needs_scan` says so: elsewhere the scanner
            // must find nothing to report.
            if !crate::frame::needs_scan(env, data.len()) {
                assert!(report.is_empty(), "no unknown field or second arm in a body the decoder does not scan");
            }
            for u in &report.unknown {
                assert_eq!(&data[u.offset..u.offset + u.raw.len()], &u.raw[..]);
            }
        }
        (Err(_), Err(e)) => assert!(e.offset <= data.len()),
        (Ok(_), Err(e)) => panic!("prost decodes what the scanner rejects: {e}"),
        (Err(e), Ok(_)) => panic!("the scanner accepts what prost rejects: {e}"),
    }
}

/// Target `sideband`: byte 0 picks the mode, byte 1 the split, the rest is the payload.
pub fn sideband(data: &[u8]) {
    let [mode, split, payload @ ..] = data else { return };
    let limit: u64 = 64 * 1024;
    match mode % 4 {
        // Untrusted zstd bytes, with and without a declared size.
        0 | 1 => {
            let declared = if mode % 4 == 0 { 0 } else { u64::from(*split) * 97 };
            if let Ok(out) = sideband::decompress_bounded(payload, declared, limit) {
                assert!(out.len() as u64 <= limit);
                if declared > 0 {
                    assert_eq!(out.len() as u64, declared);
                }
            }
        }
        // Any value through encode_sideband and back through the decoder, split anywhere.
        2 => {
            let compression = if split % 2 == 0 { Compression::None } else { Compression::Zstd { level: 1 } };
            let wire = sideband::encode_sideband("c1", "result_json", payload, compression).expect("small payload");
            let at = usize::from(*split).min(wire.len());
            let mut decoder = FrameDecoder::with_limits(Party::ToolProcess, FUZZ_LIMITS);
            let mut buf = BytesMut::from(&wire[..at]);
            let mut items = Vec::new();
            while let Some(item) = decoder.decode(&mut buf).expect("valid sideband") {
                items.push(item);
            }
            buf.extend_from_slice(&wire[at..]);
            while let Some(item) = decoder.decode_eof(&mut buf).expect("valid sideband") {
                items.push(item);
            }
            let [Frame::Envelope(h), Frame::Sideband(s)] = items.as_slice() else {
                panic!("expected header and payload, got {items:?}")
            };
            assert!(h.envelope.request_id.is_empty());
            assert_eq!(s.header.request_id, "c1");
            assert_eq!(s.payload.as_deref(), Ok(payload), "payload survives the sideband");
            assert!(
                sideband::sideband_violations("", &s.header, &s.payload, Party::ToolProcess)
                    .iter()
                    .all(|v| v.rule == crate::violation::Rule::SidebandPlain)
            );
        }
        // Any value as a stream with any chunk size, interleaved with a second stream.
        _ => {
            let chunk = u32::from(*split).max(1);
            let a = sideband::encode_stream("a", "result_json", payload, chunk, split % 2 == 0);
            let b = sideband::encode_stream("b", "structured_content_json", payload, chunk + 1, true);
            let mut asm = StreamAssembler::new(
                Party::ToolProcess,
                StreamLimits { max_stream: limit, max_total: 2 * limit, max_open: 4 },
            );
            let mut done = Vec::new();
            let (mut ia, mut ib) = (a.iter(), b.iter());
            loop {
                let (x, y) = (ia.next(), ib.next());
                if x.is_none() && y.is_none() {
                    break;
                }
                for env in [x, y].into_iter().flatten() {
                    match asm.handle(env).expect("stream frame") {
                        StreamEvent::Complete { rid, data, violations, .. } => done.push((rid, data, violations)),
                        StreamEvent::Progress { .. } => {}
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
            assert_eq!(done.len(), 2);
            for (_, data, _) in &done {
                assert_eq!(&data[..], payload);
            }
            assert_eq!(asm.buffered(), 0, "finished streams release their buffers");
        }
    }
}

/// A RawHeader for tests and generators.
pub fn raw_header(call_rid: &str, size: u64, compression: &str, uncompressed_size: u64) -> RawHeader {
    RawHeader {
        request_id: call_rid.into(),
        field_name: "result_json".into(),
        size,
        compression: compression.into(),
        uncompressed_size,
    }
}

/// `session_ops`: an arbitrary op sequence through the session model. The plan keeps its
/// preconditions (at most [`MAX_IN_FLIGHT`](crate::session::MAX_IN_FLIGHT) requests in flight,
/// no rid twice in flight, every reply awaited once), a simulated conforming peer passes the
/// invariant checker, and one that answers a request twice is caught.
#[cfg(feature = "arbitrary")]
pub fn session_ops(data: &[u8]) {
    use crate::envelopes::EnvelopeExt;
    use crate::session::{self, Step};
    let mut u = arbitrary::Unstructured::new(data);
    let features: Vec<&str> = crate::session::Tool::ALL.iter().filter_map(|t| t.feature()).collect();
    let features = if u.arbitrary::<bool>().unwrap_or(true) { features } else { Vec::new() };
    let ops: Vec<session::Op> =
        u.arbitrary_iter().map(|it| it.filter_map(Result::ok).take(300).collect()).unwrap_or_default();
    let plan = session::plan(&features, &ops);
    let mut in_flight = std::collections::BTreeSet::new();
    let mut owed = 0usize;
    for step in &plan.steps {
        match step {
            Step::Send { wire, .. } => {
                let e = wire.envelope();
                if crate::session::reply_arm(e.arm().unwrap_or(crate::Arm::Log)).is_some() && !e.request_id.is_empty() {
                    assert!(in_flight.insert(e.request_id.clone()), "rid {:?} twice in flight", e.request_id);
                    owed += 1;
                    assert!(in_flight.len() <= session::MAX_IN_FLIGHT, "too many requests in flight");
                }
            }
            Step::Await { replies, .. } => {
                for r in replies {
                    assert!(in_flight.remove(&r.rid), "awaiting {:?}, which is not in flight", r.rid);
                    owed -= 1;
                }
            }
            Step::Quiet { .. } | Step::Alive => assert_eq!(owed, 0, "quiet or alive with replies owed"),
        }
    }
    assert!(in_flight.is_empty(), "requests never awaited: {in_flight:?}");
    let ok = session::simulate(&plan, None);
    assert!(ok.findings.is_empty(), "a conforming peer was flagged: {:?}", ok.findings);
    let awaited = plan.steps.iter().any(|s| matches!(s, Step::Await { replies, .. } if !replies.is_empty()));
    if awaited {
        let bad = session::simulate(&plan, Some(ops.len()));
        assert!(
            bad.findings.iter().any(|f| f.requirement == "TP-CONCUR-01" && f.message.contains("second")),
            "a duplicated reply went unnoticed: {:?}",
            bad.findings
        );
    }
}

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

/// The bound the `mcp_input` target splits lines with: small, so that over-long lines are common.
pub const MCP_INPUT_LINE: usize = 256;

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
    use crate::mcp_input::{Gate, HostLine, LineSplitter, SpecReader};
    let Some((&seed, input)) = data.split_first() else { return };
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

    let mut rng = XorShift(u32::from(seed) | 0x200);
    let mut stdio = Gate::<SpecReader>::new();
    for line in &lines {
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
        if let (Verdict::Pass, Some(id)) = (&verdict, parsed.as_ref().and_then(request_id)) {
            assert!(stdio.is_in_flight(&id), "a request passed on is in flight");
            // The server answers some of them now.
            if rng.next().is_multiple_of(2) {
                stdio.outbound_line(&serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string());
                assert!(!stdio.is_in_flight(&id), "an answered request is no longer in flight");
            }
        }
    }

    let mut http = Gate::<SpecReader>::new();
    let whole = [input].into_iter().filter(|i| i.len() <= crate::mcp_input::MAX_POST_BODY);
    for body in pieces.iter().map(|(p, _)| *p).chain(whole) {
        let parsed = serde_json::from_slice::<serde_json::Value>(body).ok();
        let was = parsed.as_ref().and_then(|v| v.get("id")).map(|id| http.is_in_flight(id));
        let (verdict, passed_id) = http.inbound_body(body);
        check_gate_verdict(false, parsed.as_ref(), was == Some(true), &verdict);
        let status = crate::mcp_input::post_status(&verdict);
        match &verdict {
            Verdict::Pass => {
                assert_eq!(status, None);
                let v = parsed.as_ref().expect("only JSON is passed on");
                assert_eq!(passed_id, request_id(v), "the id in flight is the request's");
            }
            Verdict::Answer(a) => {
                assert_eq!(status, Some(if a["id"].is_null() { 400 } else { 200 }));
                assert_eq!(passed_id, None);
            }
            Verdict::Drop => assert_eq!((status, &passed_id), (Some(202), &None)),
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
pub fn check_gate_verdict(blank: bool, parsed: Option<&serde_json::Value>, id_in_flight: bool, verdict: &Verdict) {
    if blank {
        assert_eq!(verdict, &Verdict::Drop, "a blank line is dropped");
        return;
    }
    let Some(v) = parsed else {
        let Verdict::Answer(a) = verdict else { panic!("BR-MCP-16: text that is not JSON is answered: {verdict:?}") };
        assert_eq!((check_error_response(a), &a["id"]), (-32700, &serde_json::Value::Null), "BR-MCP-16");
        return;
    };
    if let Verdict::Answer(a) = verdict {
        check_error_response(a);
        let id = v.get("id").filter(|id| crate::mcp_input::valid_id(id));
        assert!(a["id"].is_null() || Some(&a["id"]) == id, "the answer carries the message's id or null");
    }
    if v.is_array() {
        let Verdict::Answer(a) = verdict else { panic!("BR-MCP-21: a batch is answered") };
        assert_eq!((check_error_response(a), &a["id"]), (-32600, &serde_json::Value::Null));
        return;
    }
    let Some(o) = v.as_object() else {
        assert!(matches!(verdict, Verdict::Answer(_)), "BR-MCP-17: a value that is not a message is answered");
        return;
    };
    let json_rpc = o.get("jsonrpc").and_then(serde_json::Value::as_str) == Some("2.0");
    let notification = json_rpc && o.get("method").is_some_and(serde_json::Value::is_string) && !o.contains_key("id");
    let response = json_rpc
        && !o.contains_key("method")
        && (o.contains_key("result") ^ o.contains_key("error"))
        && o.get("id").is_some_and(crate::mcp_input::valid_id);
    if notification || response {
        assert!(!matches!(verdict, Verdict::Answer(_)), "BR-MCP-19/22: a notification or response is never answered");
    }
    if let Some(id) = request_id(v) {
        match verdict {
            Verdict::Pass => assert!(!id_in_flight, "BR-MCP-20: a request reusing an id in flight is not passed on"),
            Verdict::Answer(a) => {
                assert_eq!(a["id"], id, "BR-MCP-19: a request is answered with its id");
                if id_in_flight {
                    assert_eq!(a["error"]["code"], -32600, "BR-MCP-20");
                }
            }
            Verdict::Drop => panic!("BR-MCP-19: a request is never dropped"),
        }
    }
}

/// Replays every file of a committed seed corpus (`dir`, at least five files) through a target's
/// body, naming the file whose input broke an invariant. `cargo test` calls it for every target
/// of both cargo-fuzz crates (`fuzz/`, `scenario/fuzz/`).
pub fn replay_seeds(dir: &std::path::Path, body: fn(&[u8])) {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{}: a seed corpus, not {} files", dir.display(), files.len());
    for path in files {
        let data = std::fs::read(&path).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| body(&data)) {
            let why = panic.downcast_ref::<String>().cloned().or(panic.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("{}: {}", path.display(), why.unwrap_or_default());
        }
    }
}
