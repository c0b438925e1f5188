//! A tokio-util codec over the sans-IO [`FrameDecoder`]: wraps a unix socket (or any async byte
//! stream) into a stream of decoded items and a sink of Envelopes or raw bytes.
//!
//! A frame whose body does not decode is *not* a stream error here: tokio-util ends a framed
//! stream after its first error, but the protocol says such a frame is skipped and the connection
//! stays in service (TP-FRAME-13, BR-FRAME-07). So it arrives as [`Incoming::Malformed`]; only
//! errors that lose the framing (an oversize prefix, a stream cut inside an item) or I/O errors
//! end the stream.

use bytes::{Bytes, BytesMut};
use protomcp_proto::frame::{EncodeError, Frame, FrameDecoder, FrameError, Limits, encode_frame_into};
use protomcp_proto::pb::Envelope;
use protomcp_proto::violation::Party;
use tokio_util::codec::{Decoder, Encoder};

/// What the peer sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Frame(Frame),
    /// A frame of legal length whose body is not an Envelope; decoding continues after it.
    Malformed(FrameError),
}

/// What we send: an Envelope (framed and checked against the limit), or bytes exactly as given
/// (sideband payloads, and hostile frames for scenarios).
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    Envelope(Envelope),
    Raw(Bytes),
}

impl From<Envelope> for Outgoing {
    fn from(e: Envelope) -> Self {
        Outgoing::Envelope(e)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}

/// The codec for one connection. `peer` is who sends the bytes we decode.
#[derive(Debug)]
pub struct EnvelopeCodec {
    decoder: FrameDecoder,
    max_frame: u32,
}

impl EnvelopeCodec {
    pub fn new(peer: Party, limits: Limits) -> Self {
        EnvelopeCodec { decoder: FrameDecoder::with_limits(peer, limits), max_frame: limits.max_frame }
    }

    /// Stream offset of the next byte to decode.
    pub fn position(&self) -> u64 {
        self.decoder.position()
    }

    /// The sans-IO decoder (what it has begun, what its errors break).
    pub fn frames(&self) -> &FrameDecoder {
        &self.decoder
    }
}

fn incoming(step: Result<Option<Frame>, FrameError>) -> Result<Option<Incoming>, CodecError> {
    match step {
        Ok(item) => Ok(item.map(Incoming::Frame)),
        Err(e) if e.is_recoverable() => Ok(Some(Incoming::Malformed(e))),
        Err(e) => Err(e.into()),
    }
}

impl Decoder for EnvelopeCodec {
    type Item = Incoming;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Incoming>, CodecError> {
        incoming(self.decoder.decode(src))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Incoming>, CodecError> {
        incoming(self.decoder.decode_eof(src))
    }
}

impl Encoder<Outgoing> for EnvelopeCodec {
    type Error = CodecError;

    fn encode(&mut self, item: Outgoing, dst: &mut BytesMut) -> Result<(), CodecError> {
        match item {
            Outgoing::Envelope(e) => encode_frame_into(&e, self.max_frame, dst)?,
            Outgoing::Raw(b) => dst.extend_from_slice(&b),
        }
        Ok(())
    }
}
