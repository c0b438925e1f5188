//! Protocol rules broken on the wire, each with the party at fault and the requirement ID of
//! `spec/protocol.md` it breaks. The framing layer produces these; later layers add their own
//! variants here, one per rule.

use std::fmt;

/// Who sent the bytes that broke a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Party {
    Bridge,
    ToolProcess,
}

impl Party {
    /// The requirement prefix of this party's obligations.
    pub fn prefix(self) -> &'static str {
        match self {
            Party::Bridge => "BR",
            Party::ToolProcess => "TP",
        }
    }

    pub fn other(self) -> Party {
        match self {
            Party::Bridge => Party::ToolProcess,
            Party::ToolProcess => Party::Bridge,
        }
    }
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Party::Bridge => "bridge",
            Party::ToolProcess => "tool process",
        })
    }
}

/// Requirement level (RFC 2119 keyword) of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    Must,
    Should,
    May,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
            Level::May => "MAY",
        })
    }
}

/// One rule of the framing layer (FRAME, SIDEBAND and STREAM areas).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A length prefix above `MAX_FRAME`.
    FrameTooLong,
    /// A frame body that is not a serialized Envelope.
    BodyNotEnvelope,
    /// A length prefix above `MAX_FRAME` that, read little-endian, is a frame length: the prefix
    /// was written in the wrong byte order.
    PrefixByteOrder,
    /// A frame body that begins with another length prefix: the bytes of two frames were
    /// interleaved (a frame's prefix, then another frame or its prefix, then the body).
    FramesInterleaved,
    /// The connection ended inside a frame.
    PartialFrame,
    /// `namespace` set on a sent Envelope.
    NamespaceNotEmpty,
    /// The connection ended before all `RawHeader.size` payload bytes arrived.
    SidebandTruncated,
    /// A payload shorter or longer than `RawHeader.size`: a frame began inside it, or what
    /// follows its announced end is not a frame.
    SidebandSize,
    /// A RawHeader frame with a non-empty Envelope rid.
    SidebandEnvelopeRid,
    /// `RawHeader.field_name` other than `result_json` / `structured_content_json`.
    SidebandFieldName,
    /// A compression value other than `zstd` or `""`.
    SidebandCompression,
    /// A zstd payload that does not decode, or decodes to another length than announced.
    SidebandZstd,
    /// An uncompressed payload with `uncompressed_size` set, or that is not UTF-8.
    SidebandPlain,
    /// The bridge sent a RawHeader (only tool processes may).
    SidebandFromBridge,
    /// A StreamChunk without an open stream, a second header, or a stream cut off.
    StreamSequence,
    /// Stream data that is not the UTF-8 text of a known field.
    StreamField,
    /// chunk_size zero, a chunk longer than chunk_size, or total_size not the byte total.
    StreamSizes,
    /// The bridge sent a StreamHeader or StreamChunk (only tool processes may).
    StreamFromBridge,
    /// A reply to no request: under an id (rid) that was never sent, or one more reply than
    /// requests sent under it.
    UnmatchedReply,
}

impl Rule {
    /// The requirement this rule breaks when `party` sent the offending bytes.
    pub fn requirement(self, party: Party) -> &'static str {
        use Party::*;
        use Rule::*;
        match (self, party) {
            (FrameTooLong, ToolProcess) => "TP-FRAME-04",
            (FrameTooLong, Bridge) => "BR-FRAME-04",
            (BodyNotEnvelope | PartialFrame | PrefixByteOrder, ToolProcess) => "TP-FRAME-01",
            (BodyNotEnvelope | PartialFrame | PrefixByteOrder, Bridge) => "BR-FRAME-01",
            (FramesInterleaved, ToolProcess) => "TP-FRAME-02",
            (FramesInterleaved, Bridge) => "BR-FRAME-01",
            (NamespaceNotEmpty, ToolProcess) => "TP-FRAME-08",
            (NamespaceNotEmpty, Bridge) => "BR-FRAME-06",
            (SidebandTruncated | SidebandSize, ToolProcess) => "TP-SIDEBAND-01",
            (SidebandEnvelopeRid, ToolProcess) => "TP-SIDEBAND-03",
            (SidebandFieldName, ToolProcess) => "TP-SIDEBAND-04",
            (SidebandCompression, ToolProcess) => "TP-SIDEBAND-14",
            (SidebandZstd, ToolProcess) => "TP-SIDEBAND-06",
            (SidebandPlain, ToolProcess) => "TP-SIDEBAND-07",
            (StreamSequence, ToolProcess) => "TP-STREAM-02",
            (StreamField, ToolProcess) => "TP-STREAM-03",
            (StreamSizes, ToolProcess) => "TP-STREAM-04",
            // A bridge never sends sideband or stream frames at all.
            (
                SidebandTruncated | SidebandSize | SidebandEnvelopeRid | SidebandFieldName | SidebandCompression
                | SidebandZstd | SidebandPlain | SidebandFromBridge,
                _,
            ) => "BR-SIDEBAND-10",
            (StreamSequence | StreamField | StreamSizes | StreamFromBridge, _) => "BR-STREAM-08",
            (UnmatchedReply, ToolProcess) => "TP-CALL-01",
            (UnmatchedReply, Bridge) => "BR-MCP-19",
        }
    }

    pub fn level(self, party: Party) -> Level {
        match (self, party) {
            (Rule::SidebandEnvelopeRid, Party::ToolProcess) => Level::Should,
            _ => Level::Must,
        }
    }
}

/// A rule broken on the wire: what, by whom, and the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    pub party: Party,
    /// What was seen, in words, with offsets where known.
    pub detail: String,
}

impl Violation {
    pub fn new(rule: Rule, party: Party, detail: impl Into<String>) -> Self {
        Violation { rule, party, detail: detail.into() }
    }

    pub fn requirement(&self) -> &'static str {
        self.rule.requirement(self.party)
    }

    pub fn level(&self) -> Level {
        self.rule.level(self.party)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}] broken by the {}: {}", self.requirement(), self.level(), self.party, self.detail)
    }
}
