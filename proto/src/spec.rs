//! The constants of the specification (§1.5), in one place: its times and the environment
//! variables a bridge hands to a tool process. `MAX_FRAME` and `LARGE_LIMIT` live with the frame
//! decoder ([`crate::frame`]) that enforces them.

use std::time::Duration;

/// `T_PROMPT`: the meaning of "promptly" in requirements.
pub const T_PROMPT: Duration = Duration::from_millis(1000);
/// `T_START`: the budget from starting a tool process to its handshake-complete marker.
pub const T_START: Duration = Duration::from_millis(10_000);
/// `T_LISTCHANGE`: the largest delay between a list change and its `list_changed`.
pub const T_LISTCHANGE: Duration = Duration::from_millis(1000);
/// `HANDSHAKE_QUIET`: the silence after which a bridge ends the handshake without the marker.
pub const HANDSHAKE_QUIET: Duration = Duration::from_millis(500);
/// `CALL_TIMEOUT`'s default (configurable by the bridge's `--call-timeout`).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// `RAW_THRESHOLD` and `COMPRESS_THRESHOLD`'s defaults.
pub const DEFAULT_THRESHOLD: usize = 65_536;

/// The socket path a bridge hands to its tool process.
pub const ENV_SOCKET: &str = "PROTOMCP_SOCKET";
/// Overrides `RAW_THRESHOLD`.
pub const ENV_CHUNK_THRESHOLD: &str = "PROTOMCP_CHUNK_THRESHOLD";
/// Overrides `COMPRESS_THRESHOLD`.
pub const ENV_COMPRESS_THRESHOLD: &str = "PROTOMCP_COMPRESS_THRESHOLD";
