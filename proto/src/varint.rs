//! The one protobuf varint reader, with the key and length-prefix reads built on it, shared by
//! the wire scanner ([`crate::wire`]) and the schema-driven decoder ([`crate::dynamic`]). Each
//! caller turns a [`ReadError`] into its own error type; the limits live here only.
//!
//! A leaf: it uses nothing else of the crate.

/// Nesting limit for nested messages and groups; prost uses the same.
pub const RECURSION_LIMIT: u32 = 100;

/// Longest varint on the wire: ten bytes, the tenth holding only bit 63.
pub const MAX_VARINT_LEN: usize = 10;

/// Why a read failed; `offset` (in [`ReadError`]) is where the item being read started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadErrorKind {
    /// The varint runs past the end of the bytes it may use.
    TruncatedVarint,
    /// Its tenth byte carries more than bit 63: the value does not fit 64 bits.
    OverlongVarint,
    /// A key above `u32::MAX`.
    InvalidKey(u64),
    /// A key whose wire type is 6 or 7.
    InvalidWireType(u8),
    /// A key with field number 0.
    FieldNumberZero,
    /// A length prefix announcing more bytes than are left.
    LengthOverrun { len: u64, left: usize },
}

/// A failed read and the offset where the item (varint, key or length prefix) began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadError {
    pub offset: usize,
    pub kind: ReadErrorKind,
}

fn fail<T>(offset: usize, kind: ReadErrorKind) -> Result<T, ReadError> {
    Err(ReadError { offset, kind })
}

/// Reads a varint from `buf[*pos..end]`, advancing `pos` past it.
pub fn read(buf: &[u8], pos: &mut usize, end: usize) -> Result<u64, ReadError> {
    let start = *pos;
    let mut value: u64 = 0;
    for i in 0..MAX_VARINT_LEN {
        if *pos >= end {
            return fail(start, ReadErrorKind::TruncatedVarint);
        }
        let b = buf[*pos];
        *pos += 1;
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return fail(start, ReadErrorKind::OverlongVarint);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(value);
        }
    }
    fail(start, ReadErrorKind::OverlongVarint)
}

/// Reads a field key; returns (field number, wire type).
pub fn read_key(buf: &[u8], pos: &mut usize, end: usize) -> Result<(u32, u8), ReadError> {
    let at = *pos;
    let key = read(buf, pos, end)?;
    if key > u64::from(u32::MAX) {
        return fail(at, ReadErrorKind::InvalidKey(key));
    }
    let wire_type = (key & 7) as u8;
    if wire_type > 5 {
        return fail(at, ReadErrorKind::InvalidWireType(wire_type));
    }
    let number = (key >> 3) as u32;
    if number == 0 {
        return fail(at, ReadErrorKind::FieldNumberZero);
    }
    Ok((number, wire_type))
}

/// Reads a length prefix and steps over the bytes it announces; returns their range.
pub fn read_len_delimited(buf: &[u8], pos: &mut usize, end: usize) -> Result<(usize, usize), ReadError> {
    let at = *pos;
    let len = read(buf, pos, end)?;
    let left = end - *pos;
    if len > left as u64 {
        return fail(at, ReadErrorKind::LengthOverrun { len, left });
    }
    let start = *pos;
    *pos += len as usize;
    Ok((start, *pos))
}

/// Appends `v` as a varint (the canonical, shortest form).
pub fn put(v: u64, out: &mut Vec<u8>) {
    prost::encoding::encode_varint(v, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<(u64, usize), ReadError> {
        let mut pos = 0;
        read(bytes, &mut pos, bytes.len()).map(|v| (v, pos))
    }

    #[test]
    fn a_varint_written_by_put_reads_back_with_its_length() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put(v, &mut out);
            assert_eq!(read_all(&out), Ok((v, out.len())), "{v}");
        }
        let mut out = Vec::new();
        put(u64::MAX, &mut out);
        assert_eq!(out.len(), MAX_VARINT_LEN);
    }

    #[test]
    fn a_varint_past_the_end_or_above_64_bits_is_refused_at_its_start() {
        let truncated = ReadError { offset: 0, kind: ReadErrorKind::TruncatedVarint };
        assert_eq!(read_all(&[0x80, 0x80]), Err(truncated));
        assert_eq!(read_all(&[]), Err(truncated));
        let mut eleven = vec![0xff; 9];
        eleven.push(0x02);
        assert_eq!(read_all(&eleven), Err(ReadError { offset: 0, kind: ReadErrorKind::OverlongVarint }));
        let mut pos = 1;
        assert_eq!(
            read(&[0x05, 0x80], &mut pos, 2),
            Err(ReadError { offset: 1, kind: ReadErrorKind::TruncatedVarint })
        );
    }

    #[test]
    fn keys_with_wire_type_6_or_field_number_0_are_refused() {
        let mut pos = 0;
        assert_eq!(read_key(&[0x0e], &mut pos, 1).unwrap_err().kind, ReadErrorKind::InvalidWireType(6));
        pos = 0;
        assert_eq!(read_key(&[0x02], &mut pos, 1).unwrap_err().kind, ReadErrorKind::FieldNumberZero);
        pos = 0;
        assert_eq!(read_key(&[0x0a], &mut pos, 1), Ok((1, 2)));
        let mut big = Vec::new();
        put(u64::from(u32::MAX) + 1, &mut big);
        pos = 0;
        assert!(matches!(read_key(&big, &mut pos, big.len()).unwrap_err().kind, ReadErrorKind::InvalidKey(_)));
    }

    #[test]
    fn a_length_prefix_beyond_the_end_is_an_overrun() {
        let mut pos = 0;
        assert_eq!(
            read_len_delimited(&[0x03, 1, 2], &mut pos, 3),
            Err(ReadError { offset: 0, kind: ReadErrorKind::LengthOverrun { len: 3, left: 2 } })
        );
        pos = 0;
        assert_eq!(read_len_delimited(&[0x02, 1, 2], &mut pos, 3), Ok((1, 3)));
        assert_eq!(pos, 3);
    }
}
