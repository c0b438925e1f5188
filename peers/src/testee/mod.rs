//! The reference testee: a tool process that implements the whole fixture contract of Appendix B
//! of `spec/protocol.md` (every tool, resource, prompt, completion and, with
//! [`Options::middleware`], the middleware variant) and every TP requirement of the spec. It is
//! what `protomcp-conform testee` runs, and it is the target that passes every scenario.
//!
//! - [`run`] is the process entry: it takes the socket path from `PROTOMCP_SOCKET`, connects,
//!   and serves until the bridge closes the connection;
//! - [`serve`] speaks the protocol over an already connected stream, so tests can drive the
//!   testee in-process over `UnixStream::pair()`.
//!
//! Inside, one reader (the task running [`serve`]) decodes frames and dispatches them, one writer
//! task owns the write half (so frames never interleave, TP-FRAME-02), and every tool call runs
//! in a task of its own (so the reader keeps reading while handlers run, TP-CONCUR-04).
//! `harness/testees/README.md` states the contract this module implements.

mod call;
mod cx;
mod mcp_conformance;
mod middleware;
pub mod misbehave;
mod resources;
mod session;
pub mod sideband;
mod tools;
mod writer;

use std::ffi::OsStr;
use std::time::Duration;

use protomcp_proto::fault::{Fault, on};
use tokio::net::UnixStream;

pub use misbehave::Misbehave;

/// The socket path variable, the threshold variables and the thresholds' default (spec §1.5).
pub use protomcp_proto::spec::{DEFAULT_THRESHOLD, ENV_CHUNK_THRESHOLD, ENV_COMPRESS_THRESHOLD, ENV_SOCKET};
/// Data bytes per StreamChunk of `stream_big`.
pub const DEFAULT_STREAM_CHUNK: u32 = 65_536;
/// How long a handler waits for the answer to a reverse request (sampling, roots, tool-list
/// control with a rid): bounded, as TP-SAMPLING-04, TP-ROOTS-01 and TP-TOOLLIST-04 ask, and
/// shorter than any bridge's `CALL_TIMEOUT` scenario value.
pub const DEFAULT_REVERSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Exit statuses of the testee.
pub mod exit {
    /// The bridge closed the connection (TP-CONN-09), also inside a partial frame.
    pub const BRIDGE_CLOSED: i32 = 0;
    /// Connecting failed (TP-CONN-04), the framing was lost (TP-FRAME-12), or a socket error.
    pub const FAILURE: i32 = 1;
    /// `PROTOMCP_SOCKET` unset or empty (TP-CONN-02).
    pub const USAGE: i32 = 2;
    /// `--misbehave crash-mid-call` crashed on purpose.
    pub const CRASH: i32 = 3;
}

/// How the testee behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Register the middleware of Appendix B.3 (`guard`, `mirror`, `broken`) in every burst.
    pub middleware: bool,
    /// A hostile behaviour, for self-tests of the harness; `None` is the conforming testee.
    pub misbehave: Option<Misbehave>,
    /// `RAW_THRESHOLD`: a successful result_json longer than this goes through the sideband
    /// (TP-SIDEBAND-08).
    pub raw_threshold: usize,
    /// `COMPRESS_THRESHOLD`: a sideband payload longer than this is zstd-compressed
    /// (TP-SIDEBAND-09).
    pub compress_threshold: usize,
    /// Bound on every wait for the answer to a reverse request.
    pub reverse_timeout: Duration,
    /// `StreamHeader.chunk_size` of `stream_big` (non-zero).
    pub stream_chunk: u32,
    /// Which tools, resources, prompts and completions the testee registers.
    pub fixture: Fixture,
    /// Register `secret` hidden (Appendix B, when `hidden` is declared); `false` is the fixture
    /// of a tool process without `hidden`: nothing is hidden (`testee --no-hidden`).
    pub hidden: bool,
}

/// The registrations a testee serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fixture {
    /// Appendix B of the spec plus the catalogue's additions (harness/testees/README.md §2–§4).
    #[default]
    AppendixB,
    /// What the official MCP conformance suite's server scenarios call
    /// (harness/testees/README.md §8; `testee --mcp-conformance`).
    McpConformance,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            middleware: false,
            misbehave: None,
            raw_threshold: DEFAULT_THRESHOLD,
            compress_threshold: DEFAULT_THRESHOLD,
            reverse_timeout: DEFAULT_REVERSE_TIMEOUT,
            stream_chunk: DEFAULT_STREAM_CHUNK,
            fixture: Fixture::AppendixB,
            hidden: true,
        }
    }
}

impl Options {
    /// The defaults, with the thresholds taken from `PROTOMCP_CHUNK_THRESHOLD` and
    /// `PROTOMCP_COMPRESS_THRESHOLD` when set. A malformed value is replaced by the default with
    /// one line on stderr; it never stops the testee (TP-SIDEBAND-12/13).
    pub fn from_env() -> Self {
        let threshold = |name: &str| {
            let value = std::env::var_os(name);
            parse_threshold(value.as_deref()).unwrap_or_else(|BadThreshold(bad)| {
                if on(Fault::TpSidebandBadThresholdExits) {
                    eprintln!("protomcp-conform testee: {name}={bad:?} is not a byte count");
                    std::process::exit(exit::USAGE);
                }
                eprintln!("protomcp-conform testee: {name}={bad:?} is not a byte count; using {DEFAULT_THRESHOLD}");
                DEFAULT_THRESHOLD
            })
        };
        Options {
            raw_threshold: threshold(ENV_CHUNK_THRESHOLD),
            compress_threshold: threshold(ENV_COMPRESS_THRESHOLD),
            ..Options::default()
        }
    }
}

/// The value of a threshold variable: unset or empty means the default; otherwise a decimal
/// byte count (surrounding whitespace allowed). `Err` carries the malformed value for the
/// diagnostic; the caller then uses the default (TP-SIDEBAND-13).
pub fn parse_threshold(value: Option<&OsStr>) -> Result<usize, BadThreshold> {
    let Some(value) = value else { return Ok(DEFAULT_THRESHOLD) };
    let text = value.to_string_lossy();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(DEFAULT_THRESHOLD);
    }
    if !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadThreshold(text.into_owned()));
    }
    trimmed.parse::<usize>().map_err(|_| BadThreshold(text.into_owned()))
}

/// A threshold variable's value that is not a byte count (as it was given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a byte count")]
pub struct BadThreshold(pub String);

/// The testee process: reads `PROTOMCP_SOCKET`, connects, and serves until the connection ends.
/// Returns the exit status (see [`exit`]).
pub async fn run(opts: Options) -> i32 {
    if opts.misbehave == Some(Misbehave::NeverConnect) {
        return misbehave::never_connect().await;
    }
    // TP-CONN-02/03: unset or empty is a startup error, reported in one line, without a panic
    // and without trying to connect.
    let path = match std::env::var_os(ENV_SOCKET) {
        Some(p) if !p.is_empty() => p,
        _ => {
            eprintln!(
                "protomcp-conform testee: {ENV_SOCKET} is not set; a protomcp bridge (or the harness) starts the testee with {ENV_SOCKET} set to its socket path"
            );
            return if on(Fault::TpConnUnsetExitsZero) { 0 } else { exit::USAGE };
        }
    };
    match opts.misbehave {
        Some(Misbehave::IgnoreSigterm) => {
            if let Err(e) = misbehave::ignore_sigterm() {
                eprintln!("protomcp-conform testee: cannot install the SIGTERM handler: {e}");
            }
        }
        Some(Misbehave::Grandchild) => misbehave::spawn_grandchild(),
        _ => {}
    }
    if on(Fault::TpConnListens) {
        // Takes the file there for a stale socket of its own, as a server does, and waits.
        let _ = std::fs::remove_file(&path);
        let accepted = match tokio::net::UnixListener::bind(&path) {
            Ok(listener) => listener.accept().await.map(|(s, _)| s),
            Err(e) => Err(e),
        };
        return match accepted {
            Ok(stream) => serve(stream, opts).await,
            Err(e) => {
                eprintln!("protomcp-conform testee: cannot listen on {ENV_SOCKET}={}: {e}", path.to_string_lossy());
                exit::FAILURE
            }
        };
    }
    // TP-CONN-01/04/06: one connection, as a client; a failure is one line and a non-zero exit
    // (no retries: TP-CONN-05 only allows them).
    let mut connected = UnixStream::connect(&path).await;
    while connected.is_err() && on(Fault::TpConnRetryForever) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        connected = UnixStream::connect(&path).await;
    }
    let stream = match connected {
        Ok(s) => s,
        Err(e) => {
            eprintln!("protomcp-conform testee: cannot connect to {ENV_SOCKET}={}: {e}", path.to_string_lossy());
            return exit::FAILURE;
        }
    };
    if on(Fault::TpConnStdinEofExits) {
        // The event loop also watches stdin, and takes its end for the end of the session.
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            std::process::exit(0);
        });
    }
    if on(Fault::TpConnReconnect) {
        serve(stream, opts.clone()).await;
        return match UnixStream::connect(&path).await {
            Ok(again) => serve(again, opts).await,
            Err(_) => exit::FAILURE,
        };
    }
    serve(stream, opts).await
}

/// [`run`] on a runtime of its own, for the CLI. The runtime is shut down without waiting for
/// blocking work (a compression in progress), so the process leaves within `T_PROMPT`.
pub fn run_blocking(opts: Options) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("protomcp-conform testee: cannot start the async runtime: {e}");
            return exit::FAILURE;
        }
    };
    let code = runtime.block_on(run(opts));
    if on(Fault::TpConnLinger) {
        std::thread::sleep(Duration::from_secs(5));
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// Speaks the protocol on an already connected stream until it ends; returns the exit status.
/// Every task it starts has ended (or been aborted) when it returns.
pub async fn serve(stream: UnixStream, opts: Options) -> i32 {
    match opts.misbehave {
        Some(Misbehave::Silent) => misbehave::silent(stream).await,
        Some(Misbehave::Garbage) => misbehave::garbage(stream).await,
        Some(Misbehave::HugePrefix) => misbehave::huge_prefix(stream).await,
        _ => session::Session::serve(stream, opts).await,
    }
}

/// Diagnostics on stderr, at most [`DIAG_LIMIT`] lines per process, so a hostile bridge (or a
/// fuzzer) cannot flood the log. Fatal conditions use `eprintln!` directly.
pub(crate) fn diag_line(args: std::fmt::Arguments<'_>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static LINES: AtomicUsize = AtomicUsize::new(0);
    match LINES.fetch_add(1, Ordering::Relaxed) {
        n if n < DIAG_LIMIT => eprintln!("protomcp-conform testee: {args}"),
        DIAG_LIMIT => eprintln!("protomcp-conform testee: further diagnostics suppressed"),
        _ => {}
    }
}

const DIAG_LIMIT: usize = 200;

macro_rules! diag {
    ($($t:tt)*) => { $crate::testee::diag_line(format_args!($($t)*)) };
}
pub(crate) use diag;

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn thresholds_parse_or_fall_back() {
        let p = |s: &str| parse_threshold(Some(&OsString::from(s)));
        assert_eq!(parse_threshold(None), Ok(DEFAULT_THRESHOLD));
        assert_eq!(p(""), Ok(DEFAULT_THRESHOLD));
        assert_eq!(p("0"), Ok(0));
        assert_eq!(p(" 1024\n"), Ok(1024));
        for bad in ["abc", "-1", "+5", "1e6", "12kb", "99999999999999999999999999", "0x10"] {
            assert_eq!(p(bad), Err(BadThreshold(bad.to_owned())), "{bad}");
        }
    }
}
