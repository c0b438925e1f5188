//! The host's stdin split into lines with a bound ([`crate::limits::BRIDGE_HOST_LINE`]): the
//! splitting is sans-IO ([`protomcp_proto::mcp_input::LineSplitter`]); this reads the bytes.

use protomcp_proto::mcp_input::LineSplitter;
use tokio::io::{AsyncRead, AsyncReadExt};

pub use protomcp_proto::mcp_input::HostLine;

/// Lines of `reader`, each at most `max` bytes.
pub struct HostLines<R> {
    reader: R,
    lines: LineSplitter,
    chunk: Box<[u8]>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> HostLines<R> {
    pub fn new(reader: R, max: usize) -> Self {
        HostLines { reader, lines: LineSplitter::new(max), chunk: vec![0u8; 64 * 1024].into(), eof: false }
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.lines.max()
    }

    /// The next line; `None` at the end of the input (a last line without `\n` comes first).
    pub async fn next(&mut self) -> Option<HostLine> {
        loop {
            if let Some(line) = self.lines.next_line() {
                return Some(line);
            }
            if self.eof {
                return None;
            }
            match self.reader.read(&mut self.chunk).await {
                Ok(0) | Err(_) => {
                    self.eof = true;
                    if let Some(last) = self.lines.finish() {
                        return Some(last);
                    }
                }
                Ok(n) => self.lines.push(&self.chunk[..n]),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_come_from_the_reader_and_the_last_one_needs_no_newline() {
        let mut input = vec![b'x'; 300_000];
        input.extend_from_slice(b"\n\xff\n{}\r\nlast");
        let mut lines = HostLines::new(&input[..], 1000);
        let mut got = Vec::new();
        while let Some(l) = lines.next().await {
            got.push(l);
        }
        let text = |s: &str| HostLine::Text(s.into());
        assert_eq!(got, vec![HostLine::TooLong { len: 300_000 }, HostLine::NotUtf8, text("{}"), text("last")]);
    }
}
