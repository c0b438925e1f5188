//! The reference bridge's Streamable HTTP endpoint sets `TCP_NODELAY` on every connection it
//! accepts. Its responses go out as several small writes (an SSE priming event, the message, the
//! end of the chunked body); with Nagle's algorithm each write after the first waits for the
//! client's delayed acknowledgement, about 40 ms per call on a keep-alive connection. The test
//! serves the endpoint in this process, connects as a client, and reads the option of the
//! server's end of that connection (found among this process's descriptors by its addresses),
//! so it asserts the option itself, never a time.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use protomcp_bridge::{self as bridge, Bridge, Config, http::Guard};

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// Runs `query` on descriptor `fd` of this process, borrowed for that call only.
fn on_fd<T>(fd: RawFd, query: impl FnOnce(BorrowedFd<'_>) -> T) -> T {
    // SAFETY: nothing safe reaches a descriptor this test does not own: the bridge's end of the
    // connection is known only by its number in /proc/self/fd. `query` makes read-only socket
    // queries (getsockname, getpeername, getsockopt) and keeps no copy; should the bridge close
    // the number meanwhile, the call fails with EBADF, or asks whatever the number names by
    // then, which the address comparison rejects.
    query(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// The address of a socket descriptor (`getsockname` or `getpeername`), if it is an IP one.
fn addr_of(fd: RawFd, peer: bool) -> Option<SocketAddr> {
    let addr =
        on_fd(
            fd,
            |fd| {
                if peer { rustix::net::getpeername(fd).ok().flatten() } else { rustix::net::getsockname(fd).ok() }
            },
        )?;
    SocketAddr::try_from(addr).ok()
}

/// The descriptor of this process whose local and peer addresses are `local` and `peer`.
fn socket_between(local: SocketAddr, peer: SocketAddr) -> Option<RawFd> {
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .find(|&fd| addr_of(fd, false) == Some(local) && addr_of(fd, true) == Some(peer))
}

fn nodelay(fd: RawFd) -> bool {
    on_fd(fd, |fd| rustix::net::sockopt::tcp_nodelay(fd))
        .unwrap_or_else(|e| panic!("getsockopt(TCP_NODELAY) on fd {fd}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_the_http_endpoint_accepts_has_nodelay() {
    let mut cfg = Config::new(vec![bin(), "testee".into()]);
    cfg.call_timeout = Duration::from_secs(5);
    let b = Bridge::start(cfg).await.expect("the bridge starts with the reference testee");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = listener.local_addr().unwrap();
    let guard = Guard { loopback: true, auth: vec![] };
    let serving = tokio::spawn(bridge::mcp::serve_http(
        b.clone(),
        listener,
        guard,
        bridge::mcp::SESSION_IDLE,
        std::future::pending(),
    ));
    // Two connections, each answered, so the option is checked on more than the first accept.
    for _ in 0..2 {
        let client = tokio::task::spawn_blocking(move || {
            let mut c = std::net::TcpStream::connect(server).unwrap();
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
            let req = format!(
                "POST /mcp HTTP/1.1\r\nHost: {server}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            c.write_all(req.as_bytes()).unwrap();
            let mut head = [0u8; 12];
            c.read_exact(&mut head).unwrap();
            assert_eq!(&head, b"HTTP/1.1 200", "the endpoint answered the initialize");
            c
        })
        .await
        .unwrap();
        let me = client.local_addr().unwrap();
        let fd = socket_between(server, me).expect("the server's end of the connection among this process's fds");
        assert!(nodelay(fd), "the accepted connection {server} <- {me} has no TCP_NODELAY");
        // The client side is not the bridge's: only the server's end is judged.
        drop(client);
    }
    serving.abort();
    b.shutdown().await;
}
