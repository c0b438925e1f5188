//! The bridge's stdin and stdout for the MCP stdio transport.
//!
//! `tokio::io::stdin()` and `stdout()` run every read, write and flush on the blocking thread
//! pool: two thread hand-offs per line each way, most of the latency the bridge added to a
//! `tools/call`. When stdin or stdout is a pipe (what MCP hosts give a stdio server), it is
//! read or written through the reactor instead, non-blocking; anything else (a terminal, a
//! file, a socket) keeps tokio's blocking-pool handle.

use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// The bridge's stdin, read through the reactor when it is a pipe.
pub fn stdin() -> Pin<Box<dyn AsyncRead + Send>> {
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| tokio::net::unix::pipe::Receiver::from_file(std::fs::File::from(fd)));
    match pipe {
        Ok(p) => Box::pin(p),
        Err(_) => Box::pin(tokio::io::stdin()),
    }
}

/// The bridge's stdout, written through the reactor when it is a pipe. Writes are whole lines
/// from one task, so no write is ever split by another.
pub fn stdout() -> Pin<Box<dyn AsyncWrite + Send>> {
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| tokio::net::unix::pipe::Sender::from_file(std::fs::File::from(fd)));
    match pipe {
        Ok(p) => Box::pin(p),
        Err(_) => Box::pin(tokio::io::stdout()),
    }
}

/// Resolves when the host has closed stdin with nothing left unread in it (the pipe's writer
/// is gone: `POLLHUP`, and no byte pending), without reading from it: what the host wrote before
/// the bridge serves is left for [`stdin`]. Never resolves for a stdin that does not hang up
/// (a file, a terminal) or that still holds bytes when it does: serving reads them, then the
/// end-of-file. Polled on the blocking pool, every 200 ms at most while it waits.
pub async fn hung_up() {
    loop {
        let hup = tokio::task::spawn_blocking(|| crate::os::hung_up(std::io::stdin(), 200)).await;
        match hup {
            Ok(Some(true)) => return,
            Ok(Some(false)) | Err(_) => return std::future::pending().await,
            Ok(None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_pipe_goes_through_the_reactor() {
        // The same construction as stdin/stdout, on a fresh pipe.
        let (r, w) = std::io::pipe().unwrap();
        let mut rx =
            tokio::net::unix::pipe::Receiver::from_file(std::fs::File::from(std::os::fd::OwnedFd::from(r))).unwrap();
        let mut tx =
            tokio::net::unix::pipe::Sender::from_file(std::fs::File::from(std::os::fd::OwnedFd::from(w))).unwrap();
        tx.write_all(b"line\n").await.unwrap();
        drop(tx);
        let mut s = String::new();
        rx.read_to_string(&mut s).await.unwrap();
        assert_eq!(s, "line\n");
        // A regular file is not a pipe: the caller falls back to the blocking-pool handle.
        let f = tempfile::tempfile().unwrap();
        assert!(tokio::net::unix::pipe::Receiver::from_file(f).is_err());
    }
}
