//! Bounds on every buffer that a peer fills (design §10, "bounded everything"), in one place.
//!
//! A tool process, a bridge or a host can send without end. Whatever the harness (or the
//! reference bridge) keeps of what a peer sent is bounded here: the transcript of a run, the
//! messages the host driver collects from a bridge (stdio lines and Streamable HTTP events), the
//! stderr of a testee or bridge, and the reference bridge's queue of notifications for a host that
//! reads slowly. Past a bound the buffer keeps its first part and its last part, and counts what
//! it dropped between them ([`crate::bounded::Kept`]); the report shows the gap as
//! `… 1,234,567 items dropped …`. In the harness a bound that dropped something fails the scenario
//! with a message that names the flood: which party, what kind of data, how much.
//!
//! The numbers are far above what a conforming peer sends in one scenario (the largest run of the
//! catalogue records about 200 transcript items; the largest single message is the 64 MiB answer
//! of `bridge.sideband.decoded-at-large-limit`) and low enough that a flood keeps the harness's
//! resident memory under 300 MB: a flood of small frames fills a transcript to its item bound
//! with a few MB (tests/flood.rs measures 28-53 MB of peak RSS for a whole run; the catalogue
//! against a flooding testee at `-j 8` peaks at about 190 MB, without the flood at about 175 MB).
//! Floods of large items meet the byte bounds instead: at most 88 MiB per buffer. A single frame is
//! bounded elsewhere: `MAX_FRAME` and `LARGE_LIMIT` in `proto/src/frame.rs`; the sizes below count
//! what is *queued*, so one legitimate large message always fits.
//!
//! Byte counts of JSON values are estimates of the memory they hold
//! ([`crate::bounded::value_size`]), not their serialized length.

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

pub use protomcp_proto::bound::Bound;

/// The transcript of one scenario run (frames both ways, host messages, events), as the report,
/// `--transcripts` and `explore` see it. The head holds the 64 MiB answer of
/// `bridge.sideband.decoded-at-large-limit` with room to spare.
pub const TRANSCRIPT: Bound = Bound { head_items: 2_000, head_bytes: 80 * MIB, tail_items: 500, tail_bytes: 8 * MIB };

/// Messages the host driver has read from a bridge's stdout ([`crate::host::StdioHost`]) and
/// events (messages and notes) of a Streamable HTTP session ([`crate::host::session::HttpSession`]),
/// each: what the scenario's host steps have not looked at yet waits here.
pub const HOST_MESSAGES: Bound =
    Bound { head_items: 2_000, head_bytes: 80 * MIB, tail_items: 500, tail_bytes: 8 * MIB };

/// Lines on a bridge's stdout that are not JSON-RPC (BR-MCP-01), each cut to [`GARBAGE_LINE`].
pub const HOST_GARBAGE: Bound = Bound { head_items: 100, head_bytes: MIB, tail_items: 100, tail_bytes: MIB };

/// How much of a line that is not JSON-RPC the host driver keeps (for the report).
pub const GARBAGE_LINE: usize = KIB;

/// The longest line the host driver takes from a bridge's stdout, and the longest response body
/// or event of a Streamable HTTP response: one message. Above `LARGE_LIMIT` (64 MiB) with room for
/// the JSON around it. A longer one is dropped (its first [`GARBAGE_LINE`] bytes are kept) and
/// fails the scenario as a flood.
pub const MESSAGE_BYTES: usize = 96 * MIB;

/// A testee's or bridge's stderr: the first `STDERR_HEAD` and the last `STDERR_TAIL` bytes are
/// kept. More than both together in one scenario fails it as a flood.
pub const STDERR_HEAD: usize = 256 * KIB;
/// See [`STDERR_HEAD`].
pub const STDERR_TAIL: usize = 768 * KIB;

/// Answers the HTTP host driver is sending at once to requests from the bridge (`ping`, and
/// `-32601` for the rest); requests beyond it are left unanswered and noted.
pub const HTTP_ANSWERS_IN_FLIGHT: usize = 64;

/// How many times the HTTP host driver resumes a POST's event stream that ended before its
/// response (GET with `Last-Event-ID`, 2025-11-25, BR-HTTP-33) before it gives up.
pub const HTTP_RESUMPTIONS: usize = 8;

/// The reference bridge: notifications queued for one host session that reads slower than the
/// tool process writes (`notifications/message`, `notifications/progress`, ...). Past the bound
/// the bridge drops the notifications between the first and the last part and tells the host
/// how many in one `notifications/message` of level `warning` where they were.
pub const BRIDGE_HOST_QUEUE: Bound =
    Bound { head_items: 1_024, head_bytes: 16 * MIB, tail_items: 1_024, tail_bytes: 16 * MIB };

/// The reference bridge over stdio: the longest line it reads from the host. A longer line is
/// read past without being kept and answered -32600 with id null; the session goes on. Room for
/// a `tools/call` whose arguments fill a whole frame (`MAX_FRAME`, 10 MiB) with JSON escapes.
pub const BRIDGE_HOST_LINE: usize = 16 * MIB;

/// The reference bridge: bytes of Envelopes queued for a tool process that does not read them.
/// Past it, further requests fail at once ("the tool process is not reading") instead of
/// queueing; what is queued is written as the tool process reads. Far above what a conforming
/// session queues (one frame of at most `MAX_FRAME`, 10 MiB, at a time).
pub const BRIDGE_TOOL_QUEUE_BYTES: usize = 64 * MIB;
