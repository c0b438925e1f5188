//! The reference bridge's errors at its boundaries, each saying which party it concerns: the
//! tool process (it did not start, connect or read), a host (it did not answer a reverse
//! request), or the bridge's own serving of MCP.

use std::process::ExitStatus;
use std::time::Duration;

/// Why the tool process's connection was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptError {
    #[error("the tool process's connection was already accepted")]
    AlreadyAccepted,
    #[error("accept failed: {0}")]
    Io(#[source] std::io::Error),
    #[error("the tool process exited before connecting ({0})")]
    Exited(ExitStatus),
    #[error("the tool process did not connect within {0:?}")]
    TimedOut(Duration),
}

/// Why one start of the tool process failed (BR-LIFECYCLE-02).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartFailure {
    #[error("cannot start {command:?}: {source}")]
    Spawn { command: Vec<String>, source: std::io::Error },
    #[error(transparent)]
    Accept(#[from] AcceptError),
    /// The handshake or the list pulls failed; the core says why.
    #[error("{0}")]
    Handshake(String),
    #[error("the bridge ended during the start")]
    Ended,
    /// The bridge was told to stop (the host closed stdin, a signal) before the start was done.
    #[error("stopped during the start")]
    Stopped,
}

/// Why a frame could not be queued for the tool process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The connection has ended, for this reason.
    #[error("{0}")]
    Closed(String),
    /// The tool process stopped reading (bounded by `BRIDGE_TOOL_QUEUE_BYTES`).
    #[error("the tool process is not reading: {queued} bytes are queued for it")]
    NotReading { queued: usize },
    #[error("the tool-process writer stopped")]
    WriterStopped,
}

/// Why a host gave no result to a reverse request (sampling/createMessage, roots/list): the
/// host core decides it.
pub use protomcp_proto::host_core::ReverseError;

/// Why serving MCP to the host ended with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The MCP session's transport failed (stdout could not be written).
    #[error("the MCP session failed (stdout)")]
    Session(#[source] std::io::Error),
}
