//! Large results: the raw sideband (a RawHeader frame followed by `size` unframed bytes, plain or
//! zstd) and chunked streams (StreamHeader, then StreamChunks until `final`). Decoding is bounded:
//! no announced size is trusted for an allocation, and decompression stops at the limit.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::{EncodeError, MAX_FRAME, encode_frame_into};
use crate::pb::{Envelope, RawHeader, StreamChunk, StreamHeader, envelope::Msg};
use crate::violation::{Party, Rule, Violation};

pub use crate::payload::{SidebandError, ZSTD, ZSTD_MAGIC, decode_payload, decompress_bounded};

/// The two fields a sideband transfer or a stream may carry.
pub const RESULT_FIELDS: [&str; 2] = ["result_json", "structured_content_json"];
/// How a sideband payload is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd { level: i32 },
}

/// `[RawHeader frame][payload]` for a result field of call `call_rid`: the Envelope rid is left
/// empty and the call rid goes into `RawHeader.request_id`, as the spec lays out.
pub fn encode_sideband(
    call_rid: &str,
    field_name: &str,
    value: &[u8],
    compression: Compression,
) -> Result<Bytes, EncodeError> {
    let (payload, compression, uncompressed_size) = match compression {
        Compression::None => (value.to_vec(), String::new(), 0),
        Compression::Zstd { level } => (
            zstd::bulk::compress(value, level).expect("zstd compression of an in-memory buffer"),
            ZSTD.to_owned(),
            value.len() as u64,
        ),
    };
    frame_sideband(call_rid, field_name, &payload, &compression, uncompressed_size)
}

/// `[RawHeader frame][payload]` for a payload already in its final form: `compression` and
/// `uncompressed_size` describe it (`""` and 0 for plain bytes). The Envelope rid stays empty.
pub fn frame_sideband(
    call_rid: &str,
    field_name: &str,
    payload: &[u8],
    compression: &str,
    uncompressed_size: u64,
) -> Result<Bytes, EncodeError> {
    use crate::fault::{Fault, on};
    let header = RawHeader {
        request_id: if on(Fault::TpSidebandRidDropped) { String::new() } else { call_rid.to_owned() },
        field_name: if on(Fault::TpSidebandFieldName) { "result".to_owned() } else { field_name.to_owned() },
        size: (payload.len() as u64).saturating_sub(u64::from(on(Fault::TpSidebandSizeShort))),
        compression: compression.to_owned(),
        uncompressed_size,
    };
    let mut dst = BytesMut::with_capacity(payload.len() + call_rid.len() + 64);
    encode_frame_into(&Envelope::from(header), MAX_FRAME, &mut dst)?;
    dst.put_slice(payload);
    Ok(dst.freeze())
}

/// What a received RawHeader and its payload break, if anything.
pub fn sideband_violations(
    envelope_rid: &str,
    header: &RawHeader,
    payload: &Result<Bytes, SidebandError>,
    party: Party,
) -> Vec<Violation> {
    let mut v = Vec::new();
    if party == Party::Bridge {
        v.push(Violation::new(Rule::SidebandFromBridge, party, "the bridge sent a RawHeader"));
        return v;
    }
    if !envelope_rid.is_empty() {
        v.push(Violation::new(
            Rule::SidebandEnvelopeRid,
            party,
            format!("RawHeader frame carries Envelope rid {envelope_rid:?}; it should be empty"),
        ));
    }
    if !RESULT_FIELDS.contains(&header.field_name.as_str()) {
        v.push(Violation::new(
            Rule::SidebandFieldName,
            party,
            format!("field_name {:?} is neither result_json nor structured_content_json", header.field_name),
        ));
    }
    match (header.compression.as_str(), payload) {
        ("", Ok(bytes)) => {
            if header.uncompressed_size != 0 {
                v.push(Violation::new(
                    Rule::SidebandPlain,
                    party,
                    format!("uncompressed payload with uncompressed_size {} (must be 0)", header.uncompressed_size),
                ));
            }
            if std::str::from_utf8(bytes).is_err() {
                v.push(Violation::new(Rule::SidebandPlain, party, "uncompressed payload is not UTF-8"));
            }
        }
        (ZSTD, Ok(bytes)) if header.uncompressed_size == 0 && !bytes.is_empty() => {
            v.push(Violation::new(
                Rule::SidebandZstd,
                party,
                format!("zstd payload decodes to {} bytes but uncompressed_size is 0", bytes.len()),
            ));
        }
        (_, Err(SidebandError::UnknownCompression(c))) => {
            v.push(Violation::new(
                Rule::SidebandCompression,
                party,
                format!("compression {c:?} is not \"zstd\" or \"\""),
            ));
        }
        (_, Err(e @ (SidebandError::Zstd(_) | SidebandError::SizeMismatch { .. }))) => {
            v.push(Violation::new(Rule::SidebandZstd, party, e.to_string()));
        }
        (_, Err(e @ SidebandError::Short { .. })) => {
            v.push(Violation::new(Rule::SidebandSize, party, e.to_string()));
        }
        // Over our own limit: no rule broken, the receiver just will not take it.
        _ => {}
    }
    v
}

/// The Envelopes of a stream carrying `value` for call `call_rid` in chunks of `chunk_size`.
/// An empty value is one empty final chunk. `total_size` is announced when `announce_total`.
pub fn encode_stream(
    call_rid: &str,
    field_name: &str,
    value: &[u8],
    chunk_size: u32,
    announce_total: bool,
) -> Vec<Envelope> {
    assert!(chunk_size > 0, "chunk_size must be non-zero");
    let header = StreamHeader {
        field_name: field_name.to_owned(),
        total_size: if announce_total {
            value.len() as u64 + u64::from(crate::fault::on(crate::fault::Fault::TpStreamTotalSizeWrong))
        } else {
            0
        },
        chunk_size,
    };
    let mut out = vec![Envelope::from(header).with_rid(call_rid)];
    let value = Bytes::copy_from_slice(value);
    let chunks: Vec<Bytes> = if value.is_empty() {
        vec![Bytes::new()]
    } else {
        (0..value.len())
            .step_by(chunk_size as usize)
            .map(|i| value.slice(i..(i + chunk_size as usize).min(value.len())))
            .collect()
    };
    let last = chunks.len() - 1;
    let no_final = crate::fault::on(crate::fault::Fault::TpStreamNoFinal);
    let lose_last = crate::fault::on(crate::fault::Fault::TpStreamLastChunkLost);
    for (i, mut data) in chunks.into_iter().enumerate() {
        if lose_last && i == last && i > 0 && data.len() < chunk_size as usize {
            data = Bytes::new();
        }
        out.push(Envelope::from(StreamChunk { data, r#final: i == last && !no_final }).with_rid(call_rid));
    }
    out
}

use crate::envelopes::EnvelopeExt;

/// Limits of the stream assembler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Largest assembled value of one stream.
    pub max_stream: u64,
    /// Largest sum of all partly assembled streams.
    pub max_total: u64,
    /// Most streams open at once.
    pub max_open: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits { max_stream: crate::frame::LARGE_LIMIT, max_total: 2 * crate::frame::LARGE_LIMIT, max_open: 1024 }
    }
}

/// Why a stream failed. The call it belongs to fails; other traffic is not disturbed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("stream grew past the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("{open} streams are open, the limit is {limit}")]
    TooManyStreams { open: usize, limit: usize },
    #[error("unknown field_name {0:?}")]
    UnknownField(String),
    #[error("assembled {actual} bytes, but total_size says {declared}")]
    TotalMismatch { declared: u64, actual: u64 },
    #[error("a second StreamHeader arrived while the stream was open")]
    DuplicateHeader,
    #[error("the stream was cut off: {reason}")]
    Aborted { reason: String },
}

/// What one stream frame did.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A header opened a stream, or a chunk was appended.
    Progress { rid: String },
    /// The final chunk arrived: the assembled value of the named field.
    Complete { rid: String, field_name: String, data: Bytes, violations: Vec<Violation> },
    /// The stream failed; its buffer is released.
    Failed { rid: String, error: StreamError, violations: Vec<Violation> },
    /// A chunk with no open stream for its rid: discarded.
    Orphan { rid: String, violation: Violation },
}

#[derive(Debug)]
struct Partial {
    header: StreamHeader,
    data: BytesMut,
    violations: Vec<Violation>,
}

/// Reassembles StreamHeader/StreamChunk sequences per rid, within limits.
#[derive(Debug)]
pub struct StreamAssembler {
    limits: StreamLimits,
    party: Party,
    open: HashMap<String, Partial>,
    buffered: u64,
}

impl StreamAssembler {
    pub fn new(party: Party, limits: StreamLimits) -> Self {
        StreamAssembler { limits, party, open: HashMap::new(), buffered: 0 }
    }

    /// Bytes held by open streams.
    pub fn buffered(&self) -> u64 {
        self.buffered
    }

    pub fn open_streams(&self) -> usize {
        self.open.len()
    }

    /// Feeds one Envelope; returns `None` for anything that is not a stream frame.
    pub fn handle(&mut self, envelope: &Envelope) -> Option<StreamEvent> {
        let rid = envelope.request_id.clone();
        let party = self.party;
        match &envelope.msg {
            Some(Msg::StreamHeader(h)) => Some(self.header(rid, h.clone())),
            Some(Msg::StreamChunk(c)) => {
                use crate::fault::{Fault, on};
                let mut rid = rid;
                if on(Fault::BrStreamFirstOpen)
                    && let Some(first) = self.open.keys().min()
                {
                    rid = first.clone();
                }
                if on(Fault::BrStreamOrphanOpens) && !self.open.contains_key(&rid) {
                    let header = StreamHeader { field_name: RESULT_FIELDS[0].to_owned(), ..Default::default() };
                    self.open.insert(rid.clone(), Partial { header, data: BytesMut::new(), violations: Vec::new() });
                }
                let total_ignored = on(Fault::BrStreamTotalIgnored);
                let Some(p) = self.open.get_mut(&rid) else {
                    return Some(StreamEvent::Orphan {
                        violation: Violation::new(
                            Rule::StreamSequence,
                            party,
                            format!("StreamChunk for rid {rid:?} without a StreamHeader"),
                        ),
                        rid,
                    });
                };
                if c.data.len() as u64 > u64::from(p.header.chunk_size) && p.header.chunk_size > 0 {
                    p.violations.push(Violation::new(
                        Rule::StreamSizes,
                        party,
                        format!("chunk of {} bytes exceeds chunk_size {}", c.data.len(), p.header.chunk_size),
                    ));
                }
                let grown = p.data.len() as u64 + c.data.len() as u64;
                if p.header.total_size != 0 && grown > p.header.total_size && !total_ignored {
                    // More data than total_size announced: it can no longer add up.
                    p.violations.push(Violation::new(
                        Rule::StreamSizes,
                        party,
                        format!("total_size {} but {grown} bytes arrived before the final chunk", p.header.total_size),
                    ));
                    let declared = p.header.total_size;
                    return Some(self.fail(&rid, StreamError::TotalMismatch { declared, actual: grown }));
                }
                if grown > self.limits.max_stream || self.buffered + c.data.len() as u64 > self.limits.max_total {
                    return Some(self.fail(&rid, StreamError::TooLarge { limit: self.limits.max_stream }));
                }
                let kept = if c.r#final && on(Fault::BrStreamFinalDataDropped) { &[][..] } else { &c.data[..] };
                p.data.extend_from_slice(kept);
                self.buffered += kept.len() as u64;
                if !c.r#final {
                    return Some(StreamEvent::Progress { rid });
                }
                let p = self.open.remove(&rid).expect("open stream");
                self.buffered -= p.data.len() as u64;
                let mut violations = p.violations;
                let actual = p.data.len() as u64;
                if p.header.total_size != 0 && p.header.total_size != actual && !total_ignored {
                    // Fewer bytes than announced that are no whole JSON value: data was lost
                    // (TP-STREAM-03), not only the total miscounted; named before the total.
                    if actual < p.header.total_size && serde_json::from_slice::<serde::de::IgnoredAny>(&p.data).is_err()
                    {
                        violations.push(Violation::new(
                            Rule::StreamField,
                            party,
                            format!(
                                "the {actual} bytes that arrived are not a whole JSON value: chunk data is missing"
                            ),
                        ));
                    }
                    violations.push(Violation::new(
                        Rule::StreamSizes,
                        party,
                        format!("total_size {} but {} bytes arrived", p.header.total_size, actual),
                    ));
                    return Some(StreamEvent::Failed {
                        rid,
                        error: StreamError::TotalMismatch { declared: p.header.total_size, actual },
                        violations,
                    });
                }
                if std::str::from_utf8(&p.data).is_err() {
                    violations.push(Violation::new(Rule::StreamField, party, "stream data is not UTF-8"));
                }
                Some(StreamEvent::Complete { rid, field_name: p.header.field_name, data: p.data.freeze(), violations })
            }
            _ => None,
        }
    }

    fn header(&mut self, rid: String, header: StreamHeader) -> StreamEvent {
        let party = self.party;
        let mut violations = Vec::new();
        if party == Party::Bridge {
            violations.push(Violation::new(Rule::StreamFromBridge, party, "the bridge sent a StreamHeader"));
        }
        if header.chunk_size == 0 {
            violations.push(Violation::new(Rule::StreamSizes, party, "chunk_size is 0"));
        }
        if self.open.contains_key(&rid) {
            violations.push(Violation::new(
                Rule::StreamSequence,
                party,
                format!("second StreamHeader for open rid {rid:?}"),
            ));
            let failed = self.fail(&rid, StreamError::DuplicateHeader);
            return match failed {
                StreamEvent::Failed { rid, error, violations: mut v } => {
                    v.extend(violations);
                    StreamEvent::Failed { rid, error, violations: v }
                }
                other => other,
            };
        }
        if !RESULT_FIELDS.contains(&header.field_name.as_str())
            && !crate::fault::on(crate::fault::Fault::BrStreamUnknownFieldAsResult)
        {
            violations.push(Violation::new(
                Rule::StreamField,
                party,
                format!("field_name {:?} is not a result field", header.field_name),
            ));
            return StreamEvent::Failed { error: StreamError::UnknownField(header.field_name), rid, violations };
        }
        if self.open.len() >= self.limits.max_open {
            return StreamEvent::Failed {
                rid,
                error: StreamError::TooManyStreams { open: self.open.len(), limit: self.limits.max_open },
                violations,
            };
        }
        // total_size is not trusted for a reservation (BR-STREAM-04).
        let data = if crate::fault::on(crate::fault::Fault::BrStreamReserveTotal) {
            BytesMut::with_capacity(header.total_size as usize)
        } else {
            BytesMut::new()
        };
        self.open.insert(rid.clone(), Partial { header, data, violations });
        StreamEvent::Progress { rid }
    }

    fn fail(&mut self, rid: &str, error: StreamError) -> StreamEvent {
        let violations = match self.open.remove(rid) {
            Some(p) => {
                self.buffered -= p.data.len() as u64;
                p.violations
            }
            None => Vec::new(),
        };
        StreamEvent::Failed { rid: rid.to_owned(), error, violations }
    }

    /// The streams open, by rid: the bytes assembled so far and the header's total_size (0: not
    /// announced), in rid order.
    pub fn open(&self) -> Vec<(String, u64, u64)> {
        let mut out: Vec<(String, u64, u64)> =
            self.open.iter().map(|(rid, p)| (rid.clone(), p.data.len() as u64, p.header.total_size)).collect();
        out.sort();
        out
    }

    /// Ends one stream early (its call timed out or was cancelled), releasing its buffer.
    pub fn abort(&mut self, rid: &str, reason: &str) -> Option<StreamEvent> {
        self.open.contains_key(rid).then(|| self.fail(rid, StreamError::Aborted { reason: reason.to_owned() }))
    }

    /// Ends every open stream (the connection ended), releasing all buffers.
    pub fn abort_all(&mut self, reason: &str) -> Vec<StreamEvent> {
        let mut rids: Vec<String> = self.open.keys().cloned().collect();
        rids.sort();
        let party = self.party;
        rids.iter()
            .map(|rid| match self.fail(rid, StreamError::Aborted { reason: reason.to_owned() }) {
                StreamEvent::Failed { rid, error, mut violations } => {
                    violations.push(Violation::new(
                        Rule::StreamSequence,
                        party,
                        format!("stream {rid:?} never sent its final chunk"),
                    ));
                    StreamEvent::Failed { rid, error, violations }
                }
                other => other,
            })
            .collect()
    }
}
