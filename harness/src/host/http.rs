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

/// Sends one request; `headers` are added verbatim (a `Host` among them replaces the default).
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    within: Duration,
) -> Result<Response, HttpError> {
    let run = async {
        let mut stream = TcpStream::connect(addr).await?;
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {addr}\r\n"));
        }
        for (n, v) in headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse(&raw)
    };
    tokio::time::timeout(within, run).await.map_err(|_| HttpError::Timeout(within))?
}

fn parse(raw: &[u8]) -> Result<Response, HttpError> {
    let split =
        raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| HttpError::Malformed("no header end".into()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| HttpError::Malformed(format!("status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body)?;
    }
    Ok(Response { status, headers, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, HttpError> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else { return Ok(out) };
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| HttpError::Malformed(format!("chunk size {size_text:?}")))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
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
}
