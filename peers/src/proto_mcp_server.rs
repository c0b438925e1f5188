//! The reference proto-mcp server's I/O: it sniffs the first byte of stdin, then serves binary
//! frames or JSON-RPC lines on stdout until stdin ends. Every decision is
//! [`protomcp_proto::mcp::server`]'s; this module only moves bytes.

use std::io::{Read, Write};

use bytes::BytesMut;
use protomcp_proto::frame::{MessageDecoder, MessageFrameError};
use protomcp_proto::mcp::server::{JsonSession, Server, ServerFault, Sniff, sniff};
use protomcp_proto::mcp::{MCP_MAX_FRAME, McpMessage};

/// Exit status after a clean EOF.
pub const EXIT_OK: i32 = 0;
/// Exit status after a first byte that selects no protocol, an oversize frame, a stream that
/// ended inside a frame, or a failed write.
pub const EXIT_ABANDONED: i32 = 1;

/// Serves one session on stdin/stdout; returns the exit status.
pub fn run(misbehave: Option<ServerFault>, max_frame: u32) -> i32 {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    serve(stdin.lock(), stdout.lock(), misbehave, max_frame)
}

/// [`run`] over any reader and writer (tests drive it with byte slices).
pub fn serve(mut input: impl Read, mut output: impl Write, misbehave: Option<ServerFault>, max_frame: u32) -> i32 {
    let mut server = Server::new(misbehave);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut eof = false;
    while buf.len() < server.sniff_after() {
        match input.read(&mut chunk) {
            Ok(0) | Err(_) => {
                eof = true;
                break;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let Some(&first) = buf.first() else { return EXIT_OK };
    match sniff(first) {
        Sniff::Reject => EXIT_ABANDONED,
        Sniff::JsonRpc => json(input, output, buf, eof),
        Sniff::Binary => {
            let mut decoder = MessageDecoder::<McpMessage>::new(max_frame.min(MCP_MAX_FRAME));
            let mut out = BytesMut::new();
            loop {
                loop {
                    let step = if eof { decoder.decode_eof(&mut buf) } else { decoder.decode(&mut buf) };
                    match step {
                        Ok(Some(d)) => {
                            if let Some(answer) = server.handle(d.message) {
                                out.extend_from_slice(&answer.to_frame());
                            }
                        }
                        Ok(None) => break,
                        Err(MessageFrameError::Undecodable { error, .. }) => {
                            if let Some(answer) = server.undecodable(&error) {
                                out.extend_from_slice(&answer.to_frame());
                            }
                        }
                        Err(MessageFrameError::Oversize { len, max, .. }) => {
                            out.extend_from_slice(&server.oversize(len, max).to_frame());
                            let _ = output.write_all(&out).and_then(|()| output.flush());
                            return EXIT_ABANDONED;
                        }
                        Err(MessageFrameError::Truncated { .. }) => {
                            let _ = output.write_all(&out).and_then(|()| output.flush());
                            return EXIT_ABANDONED;
                        }
                    }
                }
                if !out.is_empty() {
                    if output.write_all(&out).and_then(|()| output.flush()).is_err() {
                        return EXIT_ABANDONED;
                    }
                    out.clear();
                }
                if eof {
                    return EXIT_OK;
                }
                match input.read(&mut chunk) {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        }
    }
}

/// Largest JSON-RPC line kept; a longer one is answered as unparseable once it ends.
const MAX_LINE: usize = 16 * 1024 * 1024;

fn json(mut input: impl Read, mut output: impl Write, mut buf: BytesMut, mut eof: bool) -> i32 {
    let mut session = JsonSession::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut too_long = false;
    loop {
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line = buf.split_to(nl + 1);
            let text =
                if too_long { "\u{0}too long".to_owned() } else { String::from_utf8_lossy(&line[..nl]).into_owned() };
            too_long = false;
            if let Some(answer) = session.handle_line(&text)
                && writeln!(output, "{answer}").and_then(|()| output.flush()).is_err()
            {
                return EXIT_ABANDONED;
            }
        }
        if buf.len() > MAX_LINE {
            buf.clear();
            too_long = true;
        }
        if eof {
            if !buf.is_empty()
                && let Some(answer) = session.handle_line(&String::from_utf8_lossy(&buf))
            {
                let _ = writeln!(output, "{answer}").and_then(|()| output.flush());
            }
            return EXIT_OK;
        }
        match input.read(&mut chunk) {
            Ok(0) | Err(_) => eof = true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
