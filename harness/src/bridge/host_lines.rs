//! The host's stdin split into lines with a bound ([`crate::limits::BRIDGE_HOST_LINE`]): a host
//! that writes without ever ending a line costs the reference bridge at most the bound, and a
//! line that is not UTF-8 is a line like any other (answered -32700, BR-MCP-16) instead of the
//! end of the session.

use tokio::io::{AsyncRead, AsyncReadExt};

/// One line from the host, without its `\n` (or `\r\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostLine {
    Text(String),
    /// A line longer than the bound, read past and dropped; `len` counts its bytes.
    TooLong {
        len: usize,
    },
    /// A line that is not UTF-8.
    NotUtf8,
}

/// Lines of `reader`, each at most `max` bytes.
pub struct HostLines<R> {
    reader: R,
    max: usize,
    buf: Vec<u8>,
    /// Bytes of the over-long line being read past.
    skipping: Option<usize>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> HostLines<R> {
    pub fn new(reader: R, max: usize) -> Self {
        HostLines { reader, max, buf: Vec::new(), skipping: None, eof: false }
    }

    /// The next line; `None` at the end of the input (a last line without `\n` comes first).
    pub async fn next(&mut self) -> Option<HostLine> {
        let mut scanned = 0;
        loop {
            if let Some(i) = self.buf[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + i;
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Some(self.finish(line));
            }
            scanned = self.buf.len();
            if let Some(n) = &mut self.skipping {
                *n += self.buf.len();
                self.buf.clear();
                scanned = 0;
            } else if self.buf.len() > self.max {
                self.skipping = Some(self.buf.len());
                self.buf.clear();
                scanned = 0;
            }
            if self.eof {
                if let Some(len) = self.skipping.take() {
                    return Some(HostLine::TooLong { len });
                }
                if self.buf.is_empty() {
                    return None;
                }
                let line = std::mem::take(&mut self.buf);
                return Some(self.finish(line));
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.reader.read(&mut chunk).await {
                Ok(0) | Err(_) => self.eof = true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn finish(&mut self, line: Vec<u8>) -> HostLine {
        if let Some(len) = self.skipping.take() {
            return HostLine::TooLong { len: len + line.len() };
        }
        if line.len() > self.max {
            return HostLine::TooLong { len: line.len() };
        }
        match String::from_utf8(line) {
            Ok(s) => HostLine::Text(s),
            Err(_) => HostLine::NotUtf8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<HostLine> {
        let mut lines = HostLines::new(input, max);
        let mut out = Vec::new();
        while let Some(l) = lines.next().await {
            out.push(l);
        }
        out
    }

    #[tokio::test]
    async fn lines_end_at_newline_or_crlf_and_a_last_line_needs_no_newline() {
        let got = all(b"a\r\nbb\n\nlast", 100).await;
        let text = |s: &str| HostLine::Text(s.into());
        assert_eq!(got, vec![text("a"), text("bb"), text(""), text("last")]);
    }

    #[tokio::test]
    async fn a_line_past_the_bound_is_dropped_and_counted_and_the_next_line_is_read() {
        let mut input = vec![b'x'; 300_000];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        let got = all(&input, 1000).await;
        assert_eq!(got, vec![HostLine::TooLong { len: 300_000 }, HostLine::Text("{\"ok\":1}".into())]);
        let got = all(&vec![b'y'; 200_000], 1000).await;
        assert_eq!(got, vec![HostLine::TooLong { len: 200_000 }], "an endless line at the end of the input");
    }

    #[tokio::test]
    async fn a_line_that_is_not_utf8_is_reported_and_reading_goes_on() {
        let got = all(b"\xff\xfe\n{}\n", 100).await;
        assert_eq!(got, vec![HostLine::NotUtf8, HostLine::Text("{}".into())]);
    }
}
