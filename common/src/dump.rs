//! Decodes a whole captured byte stream (one direction of a connection) into readable lines:
//! each frame with its offset, arm, rid and content, every protocol rule it breaks, and where
//! the framing was lost. Used by `protomcp-conform decode`.

use std::fmt::Write as _;

use bytes::BytesMut;
use protomcp_proto::envelopes::EnvelopeExt;
use protomcp_proto::frame::{Frame, FrameDecoder, Limits};
use protomcp_proto::sideband::sideband_violations;
use protomcp_proto::violation::{Party, Violation};

/// The outcome of decoding a capture.
#[derive(Debug, Default)]
pub struct Dump {
    /// One line per item.
    pub lines: Vec<String>,
    pub frames: usize,
    pub violations: Vec<Violation>,
    /// The framing was lost before the end of the capture.
    pub framing_lost: bool,
}

/// Decodes `bytes` as sent by `sender`.
pub fn dump(bytes: &[u8], sender: Party, limits: Limits) -> Dump {
    let mut out = Dump::default();
    let mut decoder = FrameDecoder::with_limits(sender, limits);
    let mut buf = BytesMut::from(bytes);
    let mut last_rid = String::new();
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(None) => break,
            Ok(Some(Frame::Envelope(d))) => {
                out.frames += 1;
                let arm = match d.envelope.arm() {
                    Some(a) => format!("#{} {}", a.number(), a.name()),
                    None => "(no arm)".to_owned(),
                };
                let mut line = format!("@{:<8} len={:<7} {arm} rid={:?}", d.offset, d.len, d.envelope.request_id);
                if let Some(msg) = &d.envelope.msg {
                    let _ = write!(line, " {msg:?}");
                }
                if let Some(w) = &d.wire {
                    for u in &w.unknown {
                        let kind = if u.is_unknown_arm() { "unknown arm" } else { "unknown field" };
                        let _ = write!(
                            line,
                            "\n           {kind} {} in {} ({} bytes at body byte {})",
                            u.number,
                            u.path,
                            u.raw.len(),
                            u.offset
                        );
                    }
                    if w.arms.len() > 1 {
                        let _ = write!(
                            line,
                            "\n           {} arms on the wire: {:?} (the last one counts)",
                            w.arms.len(),
                            w.arms
                        );
                    }
                }
                out.violations.extend(d.violations(sender));
                last_rid = d.envelope.request_id.clone();
                out.lines.push(line);
            }
            Ok(Some(Frame::Sideband(s))) => {
                let what = match &s.payload {
                    Ok(p) => format!("{} bytes: {}", p.len(), preview(p)),
                    Err(e) => format!("not usable: {e}"),
                };
                out.lines.push(format!("@{:<8} sideband payload for call {:?}, {what}", s.offset, s.header.request_id));
                out.violations.extend(sideband_violations(&last_rid, &s.header, &s.payload, sender));
            }
            Err(e) => {
                out.lines.push(format!("!! {e}"));
                out.violations.push(e.violation());
                if !e.is_recoverable() {
                    out.framing_lost = true;
                    break;
                }
            }
        }
    }
    out
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]);
    if bytes.len() > 80 { format!("{text:?}…") } else { format!("{text:?}") }
}
