//! Hostile modes of the testee (`--misbehave KIND`), for self-tests of the harness: each breaks
//! one thing on purpose and otherwise behaves like the conforming testee, so a harness can show
//! that it notices exactly that breakage (and that its watchdogs end every wait).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::exit;

pub use protomcp_scenario::Misbehave;

/// Bytes [`Misbehave::Garbage`] writes.
pub const GARBAGE_LEN: usize = 4096;

/// `never-connect`: alive until killed.
pub(super) async fn never_connect() -> i32 {
    eprintln!("protomcp-conform testee: misbehaving (never-connect): not connecting, waiting to be killed");
    std::future::pending::<()>().await;
    exit::FAILURE
}

/// `ignore-sigterm`: SIGTERM is caught and ignored for the life of the process.
pub(super) fn ignore_sigterm() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    // Detached on purpose: it lives as long as the runtime (the process).
    tokio::spawn(async move {
        while term.recv().await.is_some() {
            eprintln!("protomcp-conform testee: misbehaving (ignore-sigterm): SIGTERM ignored");
        }
    });
    Ok(())
}

/// `grandchild`: `sleep 3600` in our process group, never waited for.
pub(super) fn spawn_grandchild() {
    use std::process::{Command, Stdio};
    match Command::new("sleep").arg("3600").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn() {
        // Dropping a Child neither kills nor waits for it: it outlives us on purpose.
        Ok(child) => {
            eprintln!(
                "protomcp-conform testee: misbehaving (grandchild): left `sleep 3600` running as pid {}",
                child.id()
            )
        }
        Err(e) => eprintln!("protomcp-conform testee: misbehaving (grandchild): cannot start sleep: {e}"),
    }
}

/// Reads and discards until end-of-file or an error; the exit status for the end.
async fn drain(stream: &mut UnixStream) -> i32 {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => return exit::BRIDGE_CLOSED,
            Ok(_) => {}
            Err(_) => return exit::FAILURE,
        }
    }
}

/// `silent`.
pub(super) async fn silent(mut stream: UnixStream) -> i32 {
    drain(&mut stream).await
}

/// `garbage`.
pub(super) async fn garbage(mut stream: UnixStream) -> i32 {
    let bytes = garbage_bytes(GARBAGE_LEN, seed());
    if stream.write_all(&bytes).await.is_err() {
        return exit::FAILURE;
    }
    drain(&mut stream).await
}

/// `huge-prefix`.
pub(super) async fn huge_prefix(mut stream: UnixStream) -> i32 {
    if stream.write_all(&[0xFF, 0xFF, 0xFF, 0xFF]).await.is_err() {
        return exit::FAILURE;
    }
    drain(&mut stream).await
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or(Duration::ZERO);
    (nanos.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(32)
}

/// `len` pseudo-random bytes (xorshift64*) whose first byte is non-zero, so that whatever reads
/// them as a frame sees a length prefix of at least 16 MiB: above `MAX_FRAME`.
pub fn garbage_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        out.extend(word.to_le_bytes().iter().take(len - out.len()));
    }
    if let Some(first) = out.first_mut() {
        *first |= 0x01;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_never_a_legal_frame_prefix() {
        for seed in 0..200 {
            let g = garbage_bytes(16, seed);
            assert_eq!(g.len(), 16);
            let prefix = u32::from_be_bytes([g[0], g[1], g[2], g[3]]);
            assert!(prefix > protomcp_proto::MAX_FRAME, "{prefix}");
        }
    }
}
