//! The bytes of one sideband payload as the field's value: verbatim, or zstd decompressed with a
//! bound (no announced size trusted for an allocation, decompression stopped at the limit). A
//! leaf: the frame decoder and the sideband encoders both build on it.

use std::io::Read;

use bytes::Bytes;

use crate::pb::RawHeader;

/// The compression value for zstd.
pub const ZSTD: &str = "zstd";
/// Magic number that starts every zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Why a sideband payload could not be turned into the field's bytes. Any of these fails the
/// call it belongs to; the connection stays in frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SidebandError {
    #[error("payload of {size} bytes is above the limit of {limit}; skipped unread")]
    TooLarge { size: u64, limit: u64 },
    #[error("unknown compression {0:?} (expected \"zstd\" or \"\")")]
    UnknownCompression(String),
    #[error("zstd payload does not decode: {0}")]
    Zstd(String),
    #[error("zstd payload decodes to more than the limit of {limit} bytes; decompression stopped")]
    DecompressedTooLarge { limit: u64 },
    #[error("zstd payload decodes to {actual} bytes, but uncompressed_size says {declared}")]
    SizeMismatch { declared: u64, actual: u64 },
    /// The payload ended before `RawHeader.size` bytes: the frame that follows it began inside
    /// the announced length.
    #[error("payload of {actual} bytes, shorter than the {size} RawHeader.size announced: a frame begins after it")]
    Short { size: u64, actual: u64 },
}

/// Turns a received payload into the field's bytes according to its header.
pub fn decode_payload(header: &RawHeader, payload: Bytes, max_decompressed: u64) -> Result<Bytes, SidebandError> {
    match header.compression.as_str() {
        // Verbatim; uncompressed_size is ignored (BR-SIDEBAND-04).
        "" => Ok(payload),
        ZSTD => decompress_bounded(&payload, header.uncompressed_size, max_decompressed),
        other => Err(SidebandError::UnknownCompression(other.to_owned())),
    }
}

/// Decompresses one zstd payload, never holding more than `limit` (or a non-zero `declared`)
/// output bytes plus one probe byte, and never letting the zstd window exceed the limit.
pub fn decompress_bounded(payload: &[u8], declared: u64, limit: u64) -> Result<Bytes, SidebandError> {
    if declared > limit {
        return Err(SidebandError::DecompressedTooLarge { limit });
    }
    // br.security.inflate-then-check: everything is decompressed first, the limit judged after.
    let late = declared == 0 && crate::fault::on(crate::fault::Fault::BrSecurityInflateThenCheck);
    let cap = if declared > 0 {
        declared
    } else if late || crate::fault::on(crate::fault::Fault::BrSidebandBombUnbounded) {
        u64::MAX
    } else {
        limit
    };
    let zstd_err = |e: std::io::Error| SidebandError::Zstd(e.to_string());
    let mut decoder = zstd::stream::read::Decoder::with_buffer(payload).map_err(zstd_err)?;
    // A frame header may ask for a window of up to 2 GiB; refuse windows above what the limit
    // could ever need (at least 8 MiB, the common encoders' default, at most zstd's 128 MiB).
    let window_log = (64 - limit.max(1).saturating_sub(1).leading_zeros()).clamp(23, 27);
    decoder.window_log_max(window_log).map_err(zstd_err)?;
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = decoder.read(&mut chunk).map_err(zstd_err)?;
        if n == 0 {
            break;
        }
        if (out.len() + n) as u64 > cap {
            return Err(if declared > 0 {
                SidebandError::SizeMismatch { declared, actual: (out.len() + n) as u64 }
            } else {
                SidebandError::DecompressedTooLarge { limit }
            });
        }
        // Grow by doubling, but never past the cap.
        if out.capacity() - out.len() < n {
            let want = (out.capacity() * 2).max(out.len() + n).max(64 * 1024).min(cap as usize);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
    if late && out.len() as u64 > limit {
        return Err(SidebandError::DecompressedTooLarge { limit });
    }
    if declared > 0 && out.len() as u64 != declared {
        return Err(SidebandError::SizeMismatch { declared, actual: out.len() as u64 });
    }
    Ok(Bytes::from(out))
}
