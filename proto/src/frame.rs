//! Framing: `[u32 big-endian length][Envelope]`, and the raw sideband payload that follows a
//! RawHeader frame.
//!
//! [`FrameDecoder`] is incremental and sans-IO: hand it whatever bytes arrived and it returns
//! `Ok(None)` until a whole item is there. It never trusts a length prefix: the announced length
//! is checked against the limit before a single byte is reserved for it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

use crate::payload::{SidebandError, ZSTD, ZSTD_MAGIC, decode_payload};
use crate::pb::{Envelope, RawHeader, envelope::Msg};
use crate::violation::{Party, Rule, Violation};
use crate::wire::{self, WireError, WireReport};

/// Largest Envelope body in either direction (spec §1.5), the prefix not counted.
pub const MAX_FRAME: u32 = 10 * 1024 * 1024;
/// Default for the largest sideband or stream payload, before and after decompression.
pub const LARGE_LIMIT: u64 = 64 * 1024 * 1024;
/// Bytes of the length prefix.
pub const PREFIX_LEN: usize = 4;

/// What the decoder accepts. Every allocation it makes on a peer's behalf is bounded by these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame body; a longer prefix is refused before anything is allocated.
    pub max_frame: u32,
    /// Largest raw sideband payload (`RawHeader.size`) that is buffered; a larger one is
    /// reported at once and then skipped without being stored.
    pub max_sideband: u64,
    /// Largest decompressed sideband payload.
    pub max_decompressed: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_frame: MAX_FRAME, max_sideband: LARGE_LIMIT, max_decompressed: LARGE_LIMIT }
    }
}

/// A decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// Stream offset of the frame's length prefix.
    pub offset: u64,
    /// Body length from the prefix.
    pub len: u32,
    pub envelope: Envelope,
    /// Present when the body held more than its decoded Envelope shows: unknown fields or arms
    /// (with their raw bytes), several oneof arms, or non-canonical encodings.
    pub wire: Option<Box<WireReport>>,
}

impl Decoded {
    /// Framing-layer rules this frame breaks when `party` sent it: a non-empty `namespace`
    /// (TP-FRAME-08, BR-FRAME-06).
    pub fn violations(&self, party: Party) -> Vec<Violation> {
        let mut v = Vec::new();
        if !self.envelope.namespace.is_empty() {
            v.push(Violation::new(
                Rule::NamespaceNotEmpty,
                party,
                format!("frame at offset {} sets namespace {:?}", self.offset, self.envelope.namespace),
            ));
        }
        v
    }
}

/// The raw payload that followed a RawHeader frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Sideband {
    /// Stream offset of the first payload byte.
    pub offset: u64,
    pub header: RawHeader,
    /// The payload as the field's bytes (decompressed), or why it could not be had. An error
    /// here fails that call only; the stream stays in frame.
    pub payload: Result<Bytes, SidebandError>,
}

/// One item of the byte stream.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "the common item stays inline; only the rare one is boxed")]
pub enum Frame {
    Envelope(Decoded),
    /// Boxed: rare, and it keeps the common item small.
    Sideband(Box<Sideband>),
}

/// Where the stream ended when it ended too early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Prefix,
    Body,
    SidebandPayload,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Prefix => "length prefix",
            Stage::Body => "frame body",
            Stage::SidebandPayload => "sideband payload",
        })
    }
}

/// Why the decoder could not produce the next item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fatal: the framing is lost. Nothing was allocated for the announced length.
    #[error("the {party} sent a frame at stream offset {offset} announcing {len} bytes, above the limit of {max}")]
    Oversize { party: Party, offset: u64, len: u32, max: u32 },
    /// Recoverable: the frame was consumed and the decoder continues with the next one.
    #[error("the {party} sent a frame at stream offset {offset} whose {len}-byte body is not an Envelope: {error}")]
    Undecodable { party: Party, offset: u64, len: u32, error: Box<WireError>, body: Bytes },
    /// The stream ended inside an item.
    #[error(
        "the {party}'s stream ended inside the {stage} of the item at offset {offset}: {have} of {need} bytes arrived"
    )]
    Truncated { party: Party, offset: u64, stage: Stage, have: u64, need: u64 },
}

impl FrameError {
    /// Whether decoding can go on after this error.
    pub fn is_recoverable(&self) -> bool {
        matches!(self, FrameError::Undecodable { .. })
    }

    /// The protocol rule this error shows broken, with the party at fault.
    pub fn violation(&self) -> Violation {
        match self {
            // A prefix far above the limit whose bytes, swapped, are a legal length: little-endian.
            FrameError::Oversize { party, len, max, .. }
                if *len / 2 > *max && (1..=*max).contains(&len.swap_bytes()) =>
            {
                Violation::new(
                    Rule::PrefixByteOrder,
                    *party,
                    format!(
                        "{self}; read little-endian it would be {} bytes: the prefix is not big-endian",
                        len.swap_bytes()
                    ),
                )
            }
            FrameError::Oversize { party, .. } => Violation::new(Rule::FrameTooLong, *party, self.to_string()),
            FrameError::Undecodable { party, body, .. } if let Some(inner) = inner_prefix(body) => Violation::new(
                Rule::FramesInterleaved,
                *party,
                format!(
                    "{self}; the body begins with another length prefix (announcing {inner} bytes): the bytes of two \
                     frames are interleaved"
                ),
            ),
            FrameError::Undecodable { party, .. } => Violation::new(Rule::BodyNotEnvelope, *party, self.to_string()),
            FrameError::Truncated { party, stage: Stage::SidebandPayload, .. } => {
                Violation::new(Rule::SidebandTruncated, *party, self.to_string())
            }
            FrameError::Truncated { party, .. } => Violation::new(Rule::PartialFrame, *party, self.to_string()),
        }
    }
}

/// The length a frame body begins with when it begins with another frame's length prefix: its
/// first byte is 0, which no Envelope field's key is (field number 0), and its first four bytes
/// read big-endian are a legal length. A body that is exactly one whole Envelope frame (the
/// prefix counted twice, a frame framed again) is no interleaving and gives `None`.
fn inner_prefix(body: &[u8]) -> Option<u32> {
    let (head, rest) = body.split_first_chunk::<PREFIX_LEN>()?;
    let inner = u32::from_be_bytes(*head);
    if head[0] != 0 || inner > MAX_FRAME {
        return None;
    }
    let framed_again = inner as usize == rest.len() && Envelope::decode(rest).is_ok();
    (!framed_again).then_some(inner)
}

#[derive(Debug)]
enum State {
    Head,
    Body {
        len: usize,
    },
    /// Payload of a RawHeader: buffered up to the limit, or skipped when over it. `scanned`:
    /// how far the buffered payload was searched for a frame that begins inside it
    /// ([`early_end`]).
    Raw {
        header: Option<RawHeader>,
        offset: u64,
        size: u64,
        left: u64,
        scanned: usize,
    },
    Failed(FrameError),
}

/// Incremental decoder of one direction of a protomcp connection.
#[derive(Debug)]
pub struct FrameDecoder {
    limits: Limits,
    /// Who sends the bytes being decoded (for violations).
    party: Party,
    state: State,
    /// Stream offset of the first byte not yet consumed.
    consumed: u64,
    /// Where the last sideband payload ended, until the next frame is decoded: a prefix there
    /// that loses the framing shows a payload longer than its header said ([`Self::violation_of`]).
    sideband_end: Option<SidebandEnd>,
}

/// The end of a sideband payload that was delivered whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SidebandEnd {
    /// Stream offset just after the payload.
    at: u64,
    /// Stream offset of the RawHeader frame's payload.
    payload: u64,
    size: u64,
    /// The payload began with a frame's length prefix (a NUL, then a legal length): a frame, or
    /// its prefix, was written between the RawHeader frame and its payload (neither JSON text
    /// nor a zstd frame begins with a NUL).
    frame_first: bool,
}

/// An item the decoder has begun and not finished: which part, where, and how many of the bytes
/// it needs have arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfinished {
    pub stage: Stage,
    /// Stream offset of the item (for a sideband payload: of its first byte).
    pub offset: u64,
    pub have: u64,
    pub need: u64,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stage {
            Stage::SidebandPayload => write!(
                f,
                "the sideband payload at stream offset {} has {} of the {} bytes its RawHeader.size announced",
                self.offset, self.have, self.need
            ),
            stage => write!(
                f,
                "the {stage} of the item at stream offset {} has {} of its {} bytes",
                self.offset, self.have, self.need
            ),
        }
    }
}

impl FrameDecoder {
    /// A decoder for bytes sent by `party`, with the default limits.
    pub fn new(party: Party) -> Self {
        Self::with_limits(party, Limits::default())
    }

    pub fn with_limits(party: Party, limits: Limits) -> Self {
        FrameDecoder { limits, party, state: State::Head, consumed: 0, sideband_end: None }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Stream offset of the next unconsumed byte.
    pub fn position(&self) -> u64 {
        self.consumed
    }

    /// True between items (nothing partial pending apart from what `src` holds).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head)
    }

    /// Decodes the next item from the front of `src`, consuming it. `Ok(None)` means more bytes
    /// are needed. After an `Undecodable` error, call again for the next frame; after any other
    /// error the same error is returned on every call.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        loop {
            match &mut self.state {
                State::Failed(e) => return Err(e.clone()),
                State::Head => {
                    let Some(len) = announced(src) else { return Ok(None) };
                    let at_limit_refused = len == self.limits.max_frame
                        && self.party == Party::ToolProcess
                        && crate::fault::on(crate::fault::Fault::BrFrameMaxExclusive);
                    if len > self.limits.max_frame || at_limit_refused {
                        let e = FrameError::Oversize {
                            party: self.party,
                            offset: self.consumed,
                            len,
                            max: self.limits.max_frame,
                        };
                        self.state = State::Failed(e.clone());
                        return Err(e);
                    }
                    let total = PREFIX_LEN + len as usize;
                    if src.len() >= total {
                        // The whole frame is here: decode it without a state change.
                        return self.take_frame(src, total);
                    }
                    self.state = State::Body { len: len as usize };
                }
                State::Body { len } => {
                    let total = PREFIX_LEN + *len;
                    if src.len() < total {
                        // Bounded by max_frame, checked above.
                        src.reserve(total - src.len());
                        return Ok(None);
                    }
                    self.state = State::Head;
                    return self.take_frame(src, total);
                }
                State::Raw { header, offset, size, left, scanned } => {
                    let over_limit = *size > self.limits.max_sideband;
                    if let Some(h) = header.take_if(|_| over_limit) {
                        // Report at once; the bytes are then skipped as they come.
                        let error = SidebandError::TooLarge { size: *size, limit: self.limits.max_sideband };
                        return Ok(Some(Frame::Sideband(Box::new(Sideband {
                            offset: *offset,
                            header: h,
                            payload: Err(error),
                        }))));
                    }
                    if over_limit {
                        let n = (*left).min(src.len() as u64) as usize;
                        src.advance(n);
                        self.consumed += n as u64;
                        *left -= n as u64;
                        if *left > 0 {
                            return Ok(None);
                        }
                        self.state = State::Head;
                        continue;
                    }
                    let need =
                        *size as usize + usize::from(crate::fault::on(crate::fault::Fault::BrSidebandReadsOneMore));
                    let compression = header.as_ref().map_or("", |h| h.compression.as_str());
                    let early = if crate::fault::on(crate::fault::Fault::BrSidebandReadsOneMore) {
                        None // reads on, into the next frame
                    } else {
                        early_end(compression, src, need, scanned, self.limits.max_frame)
                    };
                    if early == Some(WAIT) {
                        // Frames begin inside the announced length; the rest of them is due.
                        return Ok(None);
                    }
                    if let Some(end) = early {
                        // A frame begins inside the announced length: the payload was short.
                        let (offset, size) = (*offset, *size);
                        let header = header.take().expect("header present until delivered");
                        src.advance(end);
                        self.consumed += end as u64;
                        self.state = State::Head;
                        let payload = Err(SidebandError::Short { size, actual: end as u64 });
                        return Ok(Some(Frame::Sideband(Box::new(Sideband { offset, header, payload }))));
                    }
                    if src.len() < need {
                        src.reserve(need - src.len());
                        return Ok(None);
                    }
                    let payload = src.split_to(need).freeze();
                    self.consumed += need as u64;
                    let (offset, header) = (*offset, header.take().expect("header present until delivered"));
                    self.state = State::Head;
                    let frame_first = payload.first() == Some(&0)
                        && announced(&payload).is_some_and(|len| len <= self.limits.max_frame);
                    self.sideband_end =
                        Some(SidebandEnd { at: self.consumed, payload: offset, size: need as u64, frame_first });
                    let payload = decode_payload(&header, payload, self.limits.max_decompressed);
                    return Ok(Some(Frame::Sideband(Box::new(Sideband { offset, header, payload }))));
                }
            }
        }
    }

    /// Like [`decode`](Self::decode), for when the stream has ended: anything partial left over
    /// is reported as [`FrameError::Truncated`].
    pub fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if let Some(item) = self.decode(src)? {
            return Ok(Some(item));
        }
        if let State::Raw { size, scanned, .. } = &mut self.state
            && src.len() as u64 >= *size
        {
            // The frames a short payload seemed to hold will not complete: it was whole.
            *scanned = WAIT;
            if let Some(item) = self.decode(src)? {
                return Ok(Some(item));
            }
        }
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        let Some(Unfinished { stage, offset, have, need }) = self.unfinished(src.len()) else { return Ok(None) };
        let e = FrameError::Truncated { party: self.party, offset, stage, have, need };
        self.state = State::Failed(e.clone());
        Err(e)
    }

    /// The item begun and not finished, with `buffered` bytes of the stream held unconsumed by
    /// the caller: what a peer that stopped sending left open (`None` between items).
    pub fn unfinished(&self, buffered: usize) -> Option<Unfinished> {
        let buffered = buffered as u64;
        let (stage, have, need) = match &self.state {
            State::Head | State::Failed(_) if buffered == 0 => return None,
            State::Failed(_) => return None,
            State::Head => (Stage::Prefix, buffered, PREFIX_LEN as u64),
            State::Body { len } => (Stage::Body, buffered, (PREFIX_LEN + len) as u64),
            State::Raw { size, left, .. } if *size > self.limits.max_sideband => {
                (Stage::SidebandPayload, size - left, *size)
            }
            State::Raw { size, .. } => (Stage::SidebandPayload, buffered, *size),
        };
        let offset = match &self.state {
            State::Raw { offset, .. } => *offset,
            _ => self.consumed,
        };
        Some(Unfinished { stage, offset, have, need })
    }

    /// The rule `e` (an error of this decoder) shows broken. A prefix that loses the framing
    /// right where a sideband payload ended shows the payload longer than its RawHeader.size
    /// (TP-SIDEBAND-01); otherwise [`FrameError::violation`].
    pub fn violation_of(&self, e: &FrameError) -> Violation {
        match (e, self.sideband_end) {
            (FrameError::Oversize { party, offset, len, .. }, Some(end)) if *offset == end.at && end.frame_first => {
                Violation::new(
                    Rule::FramesInterleaved,
                    *party,
                    format!(
                        "the {}-byte sideband payload at stream offset {} begins with a frame's length prefix and goes \
                         on past its RawHeader.size (the bytes after it, read as a prefix, announce {len} bytes): a frame was \
                         written between the RawHeader frame and its payload",
                        end.size, end.payload
                    ),
                )
            }
            (FrameError::Oversize { party, offset, len, .. }, Some(end)) if *offset == end.at => Violation::new(
                Rule::SidebandSize,
                *party,
                format!(
                    "the {}-byte sideband payload at stream offset {} is followed by bytes that are not a frame \
                     (read as a prefix they announce {len} bytes, above MAX_FRAME): the payload is longer than its RawHeader.size",
                    end.size, end.payload
                ),
            ),
            _ => e.violation(),
        }
    }

    /// Decodes the complete frame at the front of `src` and consumes it. Decoding reads
    /// straight from the buffer; bytes are copied out only for frames that need them kept
    /// (unknown fields, undecodable bodies).
    #[inline]
    fn take_frame(&mut self, src: &mut BytesMut, total: usize) -> Result<Option<Frame>, FrameError> {
        let offset = self.consumed;
        let item = self.finish_frame(offset, &src[PREFIX_LEN..total]);
        src.advance(total);
        self.consumed += total as u64;
        self.sideband_end = None;
        item
    }

    #[inline]
    fn finish_frame(&mut self, offset: u64, body: &[u8]) -> Result<Option<Frame>, FrameError> {
        let len = body.len() as u32;
        // Decoded in place inside the item that is returned: the Envelope is never moved.
        let mut item = Frame::Envelope(Decoded { offset, len, envelope: Envelope::default(), wire: None });
        let Frame::Envelope(d) = &mut item else { unreachable!() };
        if let Err(prost_error) = d.envelope.merge(body) {
            let body = Bytes::copy_from_slice(body);
            let error = Box::new(match wire::scan(&body) {
                Err(e) => e,
                // The scanner mirrors prost; should they ever disagree, keep prost's word.
                Ok(_) => WireError {
                    offset: 0,
                    path: "Envelope".into(),
                    kind: wire::WireErrorKind::Other(prost_error.to_string()),
                },
            });
            return Err(FrameError::Undecodable { party: self.party, offset, len, error, body });
        }
        if needs_scan(&d.envelope, body.len()) {
            d.wire = wire::scan(&Bytes::copy_from_slice(body)).ok().filter(|r| !r.is_empty()).map(Box::new);
        }
        if self.party == Party::Bridge
            && crate::fault::on(crate::fault::Fault::TpFrameArmResets)
            && let Some(at) = wire::last_arm_at(&Bytes::copy_from_slice(body)).filter(|&at| at > 0)
        {
            // A decoder that starts a fresh Envelope at the arm: what came before it is lost.
            d.envelope = Envelope::decode(&body[at..]).unwrap_or_default();
        }
        // Only a tool process sends sideband payloads (§11): from a bridge a RawHeader is an
        // ordinary frame (and a BR-SIDEBAND-10 violation), with no unframed bytes after it.
        if let (Party::ToolProcess, Some(Msg::RawHeader(h))) = (self.party, &d.envelope.msg) {
            let payload_at = self.consumed + (PREFIX_LEN + body.len()) as u64;
            self.state =
                State::Raw { header: Some(h.clone()), offset: payload_at, size: h.size, left: h.size, scanned: 0 };
        }
        Ok(Some(item))
    }
}

/// Where a sideband payload shorter than its RawHeader.size (`need`) ends in `src` (the buffered
/// bytes from the payload's first on): the offset, below `need`, at which frames begin that run
/// past `need`. A plain payload is the UTF-8 text of JSON, which never holds a NUL byte, while
/// every frame's prefix begins with one (MAX_FRAME is below 16 MiB); a zstd payload is one zstd
/// frame, which ends where its last block says, and no zstd frame begins with a NUL. From such
/// a place on, whole frames with a message in each must follow one another until one of them
/// runs past the announced end: a payload of the announced length ends there and the next
/// frame's prefix begins, so a frame inside it that crossed the end would have to be made of its
/// last bytes and the next prefix. While the frames there have not all arrived the payload is
/// not delivered (a short payload would be misread); anything else (a NUL that begins no frame,
/// frames that end exactly at `need`) is payload. `scanned` keeps how far a plain payload was
/// searched, so each byte is searched once.
fn early_end(compression: &str, src: &[u8], need: usize, scanned: &mut usize, max_frame: u32) -> Option<usize> {
    // Searched to the end for good: the payload is read to its announced length.
    const DONE: usize = WAIT;
    if *scanned == DONE {
        return None;
    }
    let have = &src[..src.len().min(need)];
    let at = match compression {
        "" => {
            // Only the first NUL can be where the payload ended: text before it, nothing after.
            let from = (*scanned).min(have.len());
            let Some(at) = have[from..].iter().position(|&b| b == 0).map(|i| from + i) else {
                *scanned = have.len();
                return None;
            };
            if std::str::from_utf8(&have[..at]).is_err() {
                *scanned = DONE;
                return None;
            }
            at
        }
        ZSTD if have.starts_with(&ZSTD_MAGIC) => {
            zstd::zstd_safe::find_frame_compressed_size(have).ok().filter(|&n| n < have.len() && have[n] == 0)?
        }
        _ => return None,
    };
    match frames_past(src, at, need, max_frame) {
        Some(true) => Some(at),
        None => {
            // Not all there yet: wait for them, whether or not `need` bytes have arrived.
            *scanned = at;
            Some(WAIT)
        }
        Some(false) => {
            *scanned = DONE;
            None
        }
    }
}

/// What [`early_end`] returns while the frames that would show a short payload are arriving.
const WAIT: usize = usize::MAX;

/// Whether whole frames, each with a message, follow one another in `src` from `at` until one
/// ends past `need` (`Some(true)`), or not (`Some(false)`: a prefix above `max_frame`, a body
/// that is no Envelope, frames that end exactly at `need`); `None` while bytes are missing.
fn frames_past(src: &[u8], mut at: usize, need: usize, max_frame: u32) -> Option<bool> {
    while at < need {
        let len = announced(&src[at..])?;
        if len > max_frame {
            return Some(false);
        }
        let end = at + PREFIX_LEN + len as usize;
        if src.len() < end {
            return None;
        }
        match Envelope::decode(&src[at + PREFIX_LEN..end]) {
            Ok(e) if e.msg.is_some() => at = end,
            _ => return Some(false),
        }
    }
    Some(at > need)
}

/// Whether a body that decoded to `envelope` may hold more than the Envelope shows (unknown
/// fields, several arms, non-canonical encodings), so that the wire scanner must look at it.
///
/// Re-encoding drops unknown fields and shortens non-canonical ones, so a different length is
/// the sign. The one thing that lengthens a body is a negative int32: prost writes it as a
/// 10-byte varint, while the wire may carry it in 5. That growth can make up for a dropped
/// unknown field exactly, so an Envelope holding one is always scanned.
pub(crate) fn needs_scan(envelope: &Envelope, body_len: usize) -> bool {
    let negative_int32 = match &envelope.msg {
        Some(Msg::RegisterMiddleware(m)) => m.priority < 0,
        Some(Msg::CompletionResponse(m)) => m.total < 0,
        Some(Msg::SamplingRequest(m)) => m.max_tokens < 0,
        _ => false,
    };
    negative_int32 || envelope.encoded_len() != body_len
}

/// Why a frame could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("a message of {len} bytes is above the frame limit of {max}")]
    TooLarge { len: usize, max: u32 },
}

/// Appends `[len][body]` for `envelope` to `dst`, refusing bodies above `max_frame`.
pub fn encode_frame_into(envelope: &Envelope, max_frame: u32, dst: &mut BytesMut) -> Result<(), EncodeError> {
    encode_message_frame_into(envelope, max_frame, dst)
}

/// Appends `[len][body]` for any prost message (an Envelope, a proto-mcp `MCPMessage`) to
/// `dst`, refusing bodies above `max_frame`.
pub fn encode_message_frame_into<M: Message>(
    message: &M,
    max_frame: u32,
    dst: &mut BytesMut,
) -> Result<(), EncodeError> {
    let len = message.encoded_len();
    if len > max_frame as usize {
        return Err(EncodeError::TooLarge { len, max: max_frame });
    }
    dst.reserve(PREFIX_LEN + len);
    if crate::fault::none() {
        dst.put_u32(len as u32);
    } else if crate::fault::on(crate::fault::Fault::TpFrameLittleEndian)
        || crate::fault::on(crate::fault::Fault::BrFrameLittleEndian)
    {
        dst.put_u32_le(len as u32);
    } else if crate::fault::on(crate::fault::Fault::TpFrameLengthPlusOne) {
        dst.put_u32(len as u32 + 1);
    } else {
        dst.put_u32(len as u32);
    }
    message.encode_raw(dst);
    Ok(())
}

/// [`encode_message_frame_into`] without the fault checks, as it was before the fault catalogue:
/// the baseline of `benches/fault_guard.rs` (same crate, same code generation). Not for use.
#[doc(hidden)]
pub fn encode_message_frame_into_unguarded<M: Message>(
    message: &M,
    max_frame: u32,
    dst: &mut BytesMut,
) -> Result<(), EncodeError> {
    let len = message.encoded_len();
    if len > max_frame as usize {
        return Err(EncodeError::TooLarge { len, max: max_frame });
    }
    dst.reserve(PREFIX_LEN + len);
    dst.put_u32(len as u32);
    message.encode_raw(dst);
    Ok(())
}

/// `[len][body]` for any prost message, within `max_frame`.
pub fn encode_message_frame<M: Message>(message: &M, max_frame: u32) -> Result<Bytes, EncodeError> {
    let mut dst = BytesMut::new();
    encode_message_frame_into(message, max_frame, &mut dst)?;
    Ok(dst.freeze())
}

/// `[len][body]` for `envelope`, within [`MAX_FRAME`].
pub fn encode_frame(envelope: &Envelope) -> Result<Bytes, EncodeError> {
    let mut dst = BytesMut::new();
    encode_frame_into(envelope, MAX_FRAME, &mut dst)?;
    Ok(dst.freeze())
}

/// A frame around arbitrary body bytes (they need not be an Envelope). Panics above 4 GiB.
pub fn frame_bytes(body: &[u8]) -> Bytes {
    let len = u32::try_from(body.len()).expect("a frame body fits a u32 prefix");
    frame_with_prefix(len, body)
}

/// A length prefix that may lie about the body that follows it: for hostile-peer scenarios.
pub fn frame_with_prefix(announced: u32, body: &[u8]) -> Bytes {
    let mut dst = BytesMut::with_capacity(PREFIX_LEN + body.len());
    dst.put_u32(announced);
    dst.put_slice(body);
    dst.freeze()
}

/// The length a complete prefix at the front of `src` announces, or `None` while fewer than
/// [`PREFIX_LEN`] bytes are there. Both decoders read prefixes through this and check the length
/// against their limit before reserving anything for it.
#[inline]
fn announced(src: &[u8]) -> Option<u32> {
    (src.len() >= PREFIX_LEN).then(|| u32::from_be_bytes([src[0], src[1], src[2], src[3]]))
}

/// A frame of [`MessageDecoder`]: one message and where it sat in the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedMessage<M> {
    /// Stream offset of the frame's length prefix.
    pub offset: u64,
    /// Body length from the prefix.
    pub len: u32,
    pub message: M,
}

/// Why a [`MessageDecoder`] could not produce the next frame. The same three cases as
/// [`FrameError`], without the protomcp parties and sideband.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageFrameError {
    /// Fatal: the framing is lost. Nothing was allocated for the announced length.
    #[error("a frame at stream offset {offset} announces {len} bytes, above the limit of {max}")]
    Oversize { offset: u64, len: u32, max: u32 },
    /// Recoverable: the frame was consumed and the decoder continues with the next one.
    #[error("the {len}-byte body of the frame at stream offset {offset} is not a {message}: {error}")]
    Undecodable { offset: u64, len: u32, message: &'static str, error: String, body: Bytes },
    /// The stream ended inside a frame.
    #[error("the stream ended inside the {stage} of the frame at offset {offset}: {have} of {need} bytes arrived")]
    Truncated { offset: u64, stage: Stage, have: u64, need: u64 },
}

impl MessageFrameError {
    /// Whether decoding can go on after this error.
    pub fn is_recoverable(&self) -> bool {
        matches!(self, MessageFrameError::Undecodable { .. })
    }
}

#[derive(Debug)]
enum MessageState {
    Head,
    Body { len: usize },
    Failed(MessageFrameError),
}

/// Incremental, bounded decoder of `[u32 BE length][M]` frames for any prost message `M`: the
/// decoder proto-mcp's `MCPMessage` streams use (protomcp's [`FrameDecoder`] adds the sideband).
/// Like [`FrameDecoder`] it never trusts a prefix: an announced length above `max_frame` is an
/// error before a byte is reserved for it.
#[derive(Debug)]
pub struct MessageDecoder<M> {
    max_frame: u32,
    state: MessageState,
    consumed: u64,
    _message: std::marker::PhantomData<fn() -> M>,
}

impl<M: Message + Default> MessageDecoder<M> {
    pub fn new(max_frame: u32) -> Self {
        MessageDecoder { max_frame, state: MessageState::Head, consumed: 0, _message: std::marker::PhantomData }
    }

    pub fn max_frame(&self) -> u32 {
        self.max_frame
    }

    /// Stream offset of the next unconsumed byte.
    pub fn position(&self) -> u64 {
        self.consumed
    }

    /// True between frames.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, MessageState::Head)
    }

    /// Decodes the next frame from the front of `src`, consuming it; `Ok(None)` means more bytes
    /// are needed. After `Undecodable` call again; after any other error the same error is
    /// returned on every call.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<DecodedMessage<M>>, MessageFrameError> {
        loop {
            match &self.state {
                MessageState::Failed(e) => return Err(e.clone()),
                MessageState::Head => {
                    let Some(len) = announced(src) else { return Ok(None) };
                    if len > self.max_frame {
                        let e = MessageFrameError::Oversize { offset: self.consumed, len, max: self.max_frame };
                        self.state = MessageState::Failed(e.clone());
                        return Err(e);
                    }
                    self.state = MessageState::Body { len: len as usize };
                }
                MessageState::Body { len } => {
                    let total = PREFIX_LEN + *len;
                    if src.len() < total {
                        // Bounded by max_frame, checked above.
                        src.reserve(total - src.len());
                        return Ok(None);
                    }
                    self.state = MessageState::Head;
                    let offset = self.consumed;
                    let body = src.split_to(total).freeze().slice(PREFIX_LEN..);
                    self.consumed += total as u64;
                    let len = body.len() as u32;
                    return match M::decode(body.clone()) {
                        Ok(message) => Ok(Some(DecodedMessage { offset, len, message })),
                        Err(e) => Err(MessageFrameError::Undecodable {
                            offset,
                            len,
                            message: std::any::type_name::<M>().rsplit("::").next().unwrap_or("message"),
                            error: e.to_string(),
                            body,
                        }),
                    };
                }
            }
        }
    }

    /// Like [`decode`](Self::decode), for when the stream has ended: a partial frame left over
    /// is [`MessageFrameError::Truncated`].
    pub fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<DecodedMessage<M>>, MessageFrameError> {
        if let Some(item) = self.decode(src)? {
            return Ok(Some(item));
        }
        let (stage, need) = match &self.state {
            MessageState::Head if src.is_empty() => return Ok(None),
            MessageState::Head => (Stage::Prefix, PREFIX_LEN as u64),
            MessageState::Body { len } => (Stage::Body, (PREFIX_LEN + len) as u64),
            MessageState::Failed(e) => return Err(e.clone()),
        };
        let e = MessageFrameError::Truncated { offset: self.consumed, stage, have: src.len() as u64, need };
        self.state = MessageState::Failed(e.clone());
        Err(e)
    }
}
