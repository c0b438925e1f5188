//! The targets over protomcp's own framing: frames, Envelopes, sideband transfers, session ops.

use super::{
    BytesMut, Compression, Envelope, FUZZ_LIMITS, Frame, FrameDecoder, FrameError, Message, Party, StreamAssembler,
    StreamEvent, StreamLimits, XorShift, assert_roundtrip, wire,
};

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
                    } else if let Err(crate::sideband::SidebandError::Short { size, actual }) = &s.payload {
                        // A frame begins inside the announced length: the payload ended there,
                        // at a NUL (the first byte of every prefix), and the next frame follows.
                        assert_eq!(*size, s.header.size);
                        assert!(*actual < *size, "a short payload is shorter than announced");
                        let end = at + *actual as usize;
                        assert_eq!(stream[end], 0, "a short payload ends where a prefix begins");
                        at = end;
                        continue;
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
            if let Ok(out) = crate::sideband::decompress_bounded(payload, declared, limit) {
                assert!(out.len() as u64 <= limit);
                if declared > 0 {
                    assert_eq!(out.len() as u64, declared);
                }
            }
        }
        // Any value through encode_sideband and back through the decoder, split anywhere.
        2 => {
            let compression = if split % 2 == 0 { Compression::None } else { Compression::Zstd { level: 1 } };
            let wire =
                crate::sideband::encode_sideband("c1", "result_json", payload, compression).expect("small payload");
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
                crate::sideband::sideband_violations("", &s.header, &s.payload, Party::ToolProcess)
                    .iter()
                    .all(|v| v.rule == crate::violation::Rule::SidebandPlain)
            );
        }
        // Any value as a stream with any chunk size, interleaved with a second stream.
        _ => {
            let chunk = u32::from(*split).max(1);
            let a = crate::sideband::encode_stream("a", "result_json", payload, chunk, split % 2 == 0);
            let b = crate::sideband::encode_stream("b", "structured_content_json", payload, chunk + 1, true);
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
