//! A hand-rolled Streamable HTTP client for driving a bridge: plain HTTP/1.1 over TCP, one
//! connection per request (`Connection: close`), so that tests control every header (wrong Host,
//! foreign Origin, missing token) and see every status.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP response, body already de-chunked.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages in the body: the body itself for `application/json`, the `data:`
    /// lines of an event stream otherwise.
    pub fn messages(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        if self.header("content-type").is_some_and(|c| c.starts_with("application/json")) {
            return match serde_json::from_str::<Value>(&text) {
                Ok(Value::Array(a)) => a,
                Ok(v) => vec![v],
                Err(_) => vec![],
            };
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("no complete response within {0:?}")]
    Timeout(Duration),
    #[error("malformed response: {0}")]
    Malformed(String),
}

/// Opens a TCP connection with `TCP_NODELAY`: every request goes out in one write, so Nagle's
/// algorithm could only delay it.
pub async fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The bytes of one request: the head (`headers` verbatim, `Host` added unless among them,
/// `Content-Length`, `Connection: close`) and the body, as one buffer for one write.
pub fn request_bytes(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body);
    out
}

/// Sends one request; `headers` are added verbatim (a `Host` among them replaces the default).
///
/// The request goes out in one write. A server may answer before it has read the body (a 403
/// for a foreign `Host`) and close; the kernel then resets the connection, and the write or the
/// read fails after the response already arrived. So the write's failure does not stop the
/// read, everything that arrives before end-of-file or an error is kept, and a response that
/// arrived complete (by its `Content-Length` or last chunk) is the result whatever came after it.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    within: Duration,
) -> Result<Response, HttpError> {
    let run = async {
        let mut stream = connect(addr).await?;
        let written = stream.write_all(&request_bytes(&addr.to_string(), method, path, headers, body)).await;
        let mut raw = Vec::new();
        let read = read_all(&mut stream, &mut raw).await;
        match (read, written) {
            // End-of-file: the response is what arrived (a body without a length ends here).
            (Ok(()), _) if !raw.is_empty() => parse(&raw),
            (Ok(()), Err(e)) => Err(HttpError::Io(e)),
            (Ok(()), Ok(())) => parse(&raw),
            (Err(e), _) => match complete(&raw) {
                Some(r) => Ok(r),
                None => Err(HttpError::Io(e)),
            },
        }
    };
    tokio::time::timeout(within, run).await.map_err(|_| HttpError::Timeout(within))?
}

/// Reads until end-of-file or an error, keeping every byte that arrived in `raw`; a response
/// longer than one message ([`crate::limits::MESSAGE_BYTES`], with room for the head) is an error.
async fn read_all(stream: &mut TcpStream, raw: &mut Vec<u8>) -> std::io::Result<()> {
    let max = crate::limits::MESSAGE_BYTES + 64 * 1024;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => return Ok(()),
            Ok(n) if raw.len() + n > max => {
                return Err(std::io::Error::other(format!("a response of more than {max} bytes (a flood)")));
            }
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The response in `raw` if it is complete by its own framing: a `Content-Length` body that
/// arrived in full, a chunked body up to its last chunk, or a status without a body (1xx, 204,
/// 304). A body delimited by the close alone cannot be told complete.
fn complete(raw: &[u8]) -> Option<Response> {
    let (status, headers, start) = head(raw).ok()?;
    let rest = &raw[start..];
    if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        return match dechunk(rest) {
            Ok((body, true)) => Some(Response { status, headers, body }),
            _ => None,
        };
    }
    let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse::<usize>().ok());
    match length {
        Some(l) if rest.len() >= l => Some(Response { status, headers, body: rest[..l].to_vec() }),
        None if status == 204 || status == 304 => Some(Response { status, headers, body: Vec::new() }),
        _ => None,
    }
}

/// Header fields: names in lower case, values trimmed.
type Headers = Vec<(String, String)>;

/// Status, headers and where the body starts; interim 1xx responses are skipped.
fn head(raw: &[u8]) -> Result<(u16, Headers, usize), HttpError> {
    let mut at = 0;
    loop {
        let split = raw[at..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| HttpError::Malformed("no header end".into()))?;
        let text = String::from_utf8_lossy(&raw[at..at + split]);
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| HttpError::Malformed(format!("status line {status_line:?}")))?;
        let headers: Headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        at += split + 4;
        if !(100..200).contains(&status) {
            return Ok((status, headers, at));
        }
    }
}

fn parse(raw: &[u8]) -> Result<Response, HttpError> {
    let (status, headers, start) = head(raw)?;
    let mut body = raw[start..].to_vec();
    if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body)?.0;
    } else if let Some(l) = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()) {
        body.truncate(l);
    }
    Ok(Response { status, headers, body })
}

/// The body of a chunked encoding, and whether its last (zero-size) chunk arrived.
fn dechunk(mut data: &[u8]) -> Result<(Vec<u8>, bool), HttpError> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else { return Ok((out, false)) };
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| HttpError::Malformed(format!("chunk size {size_text:?}")))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok((out, true));
        }
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        if take < size {
            return Ok((out, false));
        }
        data = data.get(take + 2..).unwrap_or_default();
    }
}

/// A Streamable HTTP session with a bridge: remembers the session id and the token.
pub struct HttpHost {
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub session: Option<String>,
    pub version: String,
    pub timeout: Duration,
}

impl HttpHost {
    pub fn new(addr: SocketAddr, token: Option<String>) -> HttpHost {
        HttpHost { addr, token, session: None, version: "2025-06-18".into(), timeout: Duration::from_secs(10) }
    }

    /// POSTs one JSON-RPC message to `/mcp` with the session's headers.
    pub async fn post(&self, message: &Value) -> Result<Response, HttpError> {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        if let Some(a) = &auth {
            headers.push(("Authorization", a));
        }
        if let Some(s) = &self.session {
            headers.push(("Mcp-Session-Id", s));
            headers.push(("MCP-Protocol-Version", &self.version));
        }
        request(self.addr, "POST", "/mcp", &headers, message.to_string().as_bytes(), self.timeout).await
    }

    /// initialize + notifications/initialized; keeps the session id.
    pub async fn initialize(&mut self) -> Result<Value, HttpError> {
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": self.version, "capabilities": {},
            "clientInfo": {"name": "protomcp-conform-host", "version": env!("CARGO_PKG_VERSION")}}});
        let r = self.post(&init).await?;
        self.session = r.header("mcp-session-id").map(str::to_owned);
        let result =
            r.messages().into_iter().next().ok_or_else(|| HttpError::Malformed(format!("status {}", r.status)))?;
        self.post(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        Ok(result)
    }

    /// A request; returns the response message with that id.
    pub async fn call(&self, id: i64, method: &str, params: Value) -> Result<Value, HttpError> {
        let r = self.post(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await?;
        r.messages().into_iter().find(|m| m["id"] == id).ok_or_else(|| {
            HttpError::Malformed(format!(
                "status {}, no response {id} in {:?}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_and_sse() {
        let raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:\r\n1a\r\n {\"jsonrpc\":\"2.0\",\"id\":1}\n\r\n0\r\n\r\n";
        let r = parse(raw).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.messages(), vec![serde_json::json!({"jsonrpc": "2.0", "id": 1})]);
    }

    #[test]
    fn a_response_is_complete_by_its_length_or_last_chunk_only() {
        let sized = b"HTTP/1.1 403 Forbidden\r\ncontent-length: 5\r\n\r\nno!!!";
        assert_eq!(complete(sized).map(|r| (r.status, r.body)), Some((403, b"no!!!".to_vec())));
        assert!(complete(&sized[..sized.len() - 1]).is_none());
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        assert_eq!(complete(chunked).map(|r| r.body), Some(b"ab".to_vec()));
        assert!(complete(&chunked[..chunked.len() - 7]).is_none());
        assert!(complete(b"HTTP/1.1 200 OK\r\n\r\nuntil the close").is_none());
        assert_eq!(complete(b"HTTP/1.1 204 No Content\r\n\r\n").map(|r| r.status), Some(204));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(complete(interim).map(|r| r.status), Some(202));
    }

    #[test]
    fn one_request_is_one_write_with_the_body_after_the_head() {
        let bytes = request_bytes("127.0.0.1:1", "POST", "/mcp", &[("X-A", "b")], b"{}");
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-A: b\r\n"), "{text}");
        assert!(text.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n{}"), "{text}");
    }

    /// How the test server ends the connection after answering.
    #[derive(Clone, Copy, Debug)]
    enum Ending {
        /// `SO_LINGER` 0: close sends a reset at once.
        Linger0,
        /// An ordinary close with most of a large request body unread: the kernel resets.
        UnreadBody,
    }

    /// A server that reads only the first bytes of each request, answers 403 and closes.
    async fn refusing_server(ending: Ending) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else { return };
                let mut first = [0u8; 64];
                let _ = s.read(&mut first).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 9\r\n\r\nforbidden",
                    )
                    .await;
                if let Ending::Linger0 = ending {
                    crate::os::linger_zero(&s).unwrap();
                }
                drop(s);
            }
        });
        (addr, task)
    }

    async fn refused_every_time(ending: Ending, body: &[u8]) {
        let (addr, server) = refusing_server(ending).await;
        let headers = [("Host", "evil.example"), ("Content-Type", "application/json")];
        for i in 0..50 {
            let r = request(addr, "POST", "/mcp", &headers, body, Duration::from_secs(5)).await;
            match r {
                Ok(r) => {
                    assert_eq!((r.status, r.body.as_slice()), (403, b"forbidden".as_slice()), "{ending:?} run {i}")
                }
                Err(e) => panic!("{ending:?}, run {i}: the 403 was lost: {e}"),
            }
        }
        server.abort();
    }

    #[tokio::test]
    async fn a_403_sent_before_a_reset_is_reported_every_time() {
        refused_every_time(Ending::Linger0, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
    }

    #[tokio::test]
    async fn a_403_sent_before_the_unread_body_is_reset_is_reported_every_time() {
        refused_every_time(Ending::UnreadBody, &vec![b' '; 4 << 20]).await;
    }

    #[tokio::test]
    async fn the_drivers_connections_have_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = connect(listener.local_addr().unwrap()).await.unwrap();
        assert!(s.nodelay().unwrap());
    }
}
