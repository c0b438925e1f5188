//! How a call result reaches the wire: in a CallToolResponse frame (shortened when it would not
//! fit), through the raw sideband (plain or zstd), or as a chunked stream. Pure functions, so the
//! size rules can be tested without a socket.

use bytes::Bytes;
use prost::Message;
use prost::encoding::encoded_len_varint;
use protomcp_proto::frame::{EncodeError, MAX_FRAME};
use protomcp_proto::pb::CallToolResponse;
use protomcp_proto::sideband::{ZSTD, frame_sideband};
use serde_json::Value;

use protomcp_proto::fault::{Fault, on};

use super::diag;

/// zstd level of sideband payloads (zstd's own default).
pub const ZSTD_LEVEL: i32 = 3;

/// Body length of the Envelope carrying `resp` under `rid`, computed without building it.
pub fn call_result_envelope_len(rid: &str, resp: &CallToolResponse) -> usize {
    let m = resp.encoded_len();
    // Arm 6 has a one-byte tag; the rid (field 14) is left out when empty.
    let arm = 1 + encoded_len_varint(m as u64) + m;
    let rid = if rid.is_empty() { 0 } else { 1 + encoded_len_varint(rid.len() as u64) + rid.len() };
    arm + rid
}

/// Whether `resp` may travel through the sideband or a stream: only a plain successful result
/// whose sole non-default field is result_json (TP-SIDEBAND-05, TP-STREAM-05).
pub fn sideband_allowed(resp: &CallToolResponse) -> bool {
    let errors_too = on(Fault::TpSidebandErrorAllowed);
    (errors_too || (!resp.is_error && resp.error.is_none()))
        && resp.enable_tools.is_empty()
        && resp.disable_tools.is_empty()
        && resp.structured_content_json.is_empty()
}

/// Whether `resp` goes through the sideband: allowed, and either longer than the threshold
/// (TP-SIDEBAND-08) or too long for a frame whatever the threshold says (TP-SIDEBAND-10).
pub fn use_sideband(rid: &str, resp: &CallToolResponse, raw_threshold: usize) -> bool {
    let too_long = !on(Fault::TpSidebandFrameLimitIgnored) && call_result_envelope_len(rid, resp) > MAX_FRAME as usize;
    sideband_allowed(resp) && (resp.result_json.len() > raw_threshold || too_long)
}

/// zstd with [`ZSTD_LEVEL`]: one standard frame that records its content size.
pub fn zstd_compress(value: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::bulk::compress(value, ZSTD_LEVEL)
}

/// `[RawHeader frame][payload]` for the result_json `value` of call `rid`, in one piece so the
/// writer puts it on the wire without anything in between (TP-SIDEBAND-01).
///
/// - The call rid goes into `RawHeader.request_id`; the Envelope rid stays empty
///   (TP-SIDEBAND-02/03).
/// - The payload is compressed when longer than `compress_threshold` (TP-SIDEBAND-09), with
///   `uncompressed_size` set (TP-SIDEBAND-06); otherwise it is the bytes verbatim with
///   `uncompressed_size` 0 (TP-SIDEBAND-07).
/// - If `compress` fails, the payload goes out uncompressed, described as such
///   (TP-SIDEBAND-14).
pub fn encode_result_sideband(
    rid: &str,
    value: Bytes,
    compress_threshold: usize,
    compress: impl FnOnce(&[u8]) -> std::io::Result<Vec<u8>>,
) -> Result<Bytes, EncodeError> {
    let (payload, compression, uncompressed_size) = if value.len() > compress_threshold {
        match compress(&value) {
            Ok(c) if on(Fault::TpSidebandZstdSizeWrong) => {
                let len = c.len() as u64;
                (Bytes::from(c), ZSTD.to_owned(), len)
            }
            Ok(c) => (Bytes::from(c), ZSTD.to_owned(), value.len() as u64),
            Err(e) => {
                diag!("zstd compression failed ({e}); sending the {}-byte result uncompressed", value.len());
                (value, String::new(), 0)
            }
        }
    } else {
        let size = if on(Fault::TpSidebandPlainSizeSet) { value.len() as u64 } else { 0 };
        (value, String::new(), size)
    };
    frame_sideband(rid, "result_json", &payload, &compression, uncompressed_size)
}

/// `StreamHeader.chunk_size` for call `rid`: `preferred`, made small enough that a chunk frame
/// (rid, data and a few tag bytes) stays within `MAX_FRAME` even for a very long rid.
pub fn stream_chunk_size(rid: &str, preferred: u32) -> u32 {
    let room = (MAX_FRAME as usize).saturating_sub(rid.len() + 32);
    u32::try_from(room).unwrap_or(u32::MAX).clamp(1, preferred.max(1))
}

/// `resp` made to fit one frame under `rid` (TP-FRAME-04), for results that may not use the
/// sideband: the longest text (a text element of result_json, or the ToolError message) is
/// shortened until the Envelope fits, keeping is_error and the ToolError (TP-SIDEBAND-11).
/// Shortened texts are prefixes of the originals, cut at a character boundary.
pub fn fit_call_result(rid: &str, mut resp: CallToolResponse) -> CallToolResponse {
    if on(Fault::TpSidebandErrorNotShortened) || on(Fault::TpFrameNoWriteLimit) {
        return resp;
    }
    for _ in 0..16 {
        let len = call_result_envelope_len(rid, &resp);
        if len <= MAX_FRAME as usize {
            return resp;
        }
        // Cutting k bytes of text removes at least k bytes of JSON (escapes only add more), and
        // the margin covers shorter length varints.
        let excess = len - MAX_FRAME as usize + 64;
        let message_len = resp.error.as_ref().map_or(0, |e| e.message.len());
        let text_len = longest_text(&resp.result_json).map_or(resp.result_json.len(), |(_, l)| l);
        if message_len > text_len {
            if let Some(e) = resp.error.as_mut() {
                truncate_at_char(&mut e.message, message_len.saturating_sub(excess));
            }
        } else if text_len > 0 {
            resp.result_json = shorten_text(&resp.result_json, text_len.saturating_sub(excess));
        } else {
            break;
        }
    }
    resp
}

/// Index and byte length of the longest text element of a content array.
fn longest_text(result_json: &str) -> Option<(usize, usize)> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(result_json) else { return None };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| item.get("text").and_then(Value::as_str).map(|t| (i, t.len())))
        .max_by_key(|(_, l)| *l)
}

/// result_json with its longest text element cut to `keep` bytes; a result_json that is not a
/// content array becomes one text element holding a prefix of it.
fn shorten_text(result_json: &str, keep: usize) -> String {
    if let Ok(Value::Array(mut items)) = serde_json::from_str::<Value>(result_json)
        && let Some((i, _)) = longest_text(result_json)
        && let Some(Value::String(t)) = items.get_mut(i).and_then(|item| item.get_mut("text"))
    {
        truncate_at_char(t, keep);
        return Value::Array(items).to_string();
    }
    let mut raw = result_json.to_owned();
    truncate_at_char(&mut raw, keep);
    super::cx::text_json(&raw)
}

fn truncate_at_char(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use protomcp_proto::frame::{Frame, FrameDecoder, Limits};
    use protomcp_proto::pb::Envelope;
    use protomcp_proto::pb::ToolError;
    use protomcp_proto::violation::Party;

    fn decode_all(bytes: &[u8]) -> Vec<Frame> {
        let mut d = FrameDecoder::with_limits(Party::ToolProcess, Limits::default());
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(f) = d.decode_eof(&mut buf).unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn compressed_and_plain_sideband() {
        let value = Bytes::from("y".repeat(100_000));
        for (threshold, zstd) in [(65_536, true), (200_000, false)] {
            let bytes = encode_result_sideband("c1", value.clone(), threshold, zstd_compress).unwrap();
            let frames = decode_all(&bytes);
            assert_eq!(frames.len(), 2);
            let Frame::Envelope(h) = &frames[0] else { panic!() };
            assert_eq!(h.envelope.request_id, "", "TP-SIDEBAND-03");
            let Frame::Sideband(s) = &frames[1] else { panic!() };
            assert_eq!(s.header.request_id, "c1");
            assert_eq!(s.header.field_name, "result_json");
            assert_eq!(s.header.compression, if zstd { "zstd" } else { "" });
            assert_eq!(s.header.uncompressed_size, if zstd { 100_000 } else { 0 });
            assert_eq!(s.payload.as_deref(), Ok(&value[..]));
        }
    }

    #[test]
    fn failed_compression_falls_back_to_plain() {
        let value = Bytes::from("z".repeat(70_000));
        let bytes =
            encode_result_sideband("c1", value.clone(), 10, |_| Err(std::io::Error::other("no memory"))).unwrap();
        let frames = decode_all(&bytes);
        let Frame::Sideband(s) = &frames[1] else { panic!() };
        assert_eq!((s.header.compression.as_str(), s.header.uncompressed_size), ("", 0), "TP-SIDEBAND-14");
        assert_eq!(s.header.size, 70_000);
        assert_eq!(s.payload.as_deref(), Ok(&value[..]));
    }

    #[test]
    fn the_envelope_length_formula_matches_prost() {
        let resp = CallToolResponse { result_json: "é".repeat(70_000), is_error: true, ..Default::default() };
        for rid in ["", "r", &"x".repeat(300)] {
            let e = Envelope { request_id: rid.into(), ..Envelope::from(resp.clone()) };
            assert_eq!(call_result_envelope_len(rid, &resp), e.encoded_len());
        }
    }

    #[test]
    fn error_results_are_shortened_to_fit() {
        let text = "\u{1}é\"".repeat(2_000_000); // escapes grow the JSON well past the text
        let resp = CallToolResponse {
            is_error: true,
            result_json: crate::testee::cx::text_json(&text),
            error: Some(ToolError { error_code: "E".into(), message: "m".repeat(11_000_000), ..Default::default() }),
            ..Default::default()
        };
        let fitted = fit_call_result("rid", resp);
        assert!(call_result_envelope_len("rid", &fitted) <= MAX_FRAME as usize);
        assert!(fitted.is_error);
        let e = fitted.error.as_ref().unwrap();
        assert_eq!(e.error_code, "E");
        assert!(e.message.len() < 11_000_000);
        let v: Value = serde_json::from_str(&fitted.result_json).unwrap();
        assert!(text.starts_with(v[0]["text"].as_str().unwrap()), "a prefix of the original");
        let small = CallToolResponse { result_json: "[]".into(), ..Default::default() };
        assert_eq!(fit_call_result("r", small.clone()), small);
    }

    #[test]
    fn chunk_size_leaves_room_for_the_rid() {
        assert_eq!(stream_chunk_size("r", 65_536), 65_536);
        let rid = "r".repeat(MAX_FRAME as usize - 1000);
        assert!(stream_chunk_size(&rid, 65_536) <= 1000);
        assert_eq!(stream_chunk_size(&"r".repeat(MAX_FRAME as usize), 65_536), 1);
    }
}
