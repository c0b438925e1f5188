//! Transports.

pub mod codec;

pub use codec::{CodecError, EnvelopeCodec, Incoming, Outgoing};
pub mod resources;
