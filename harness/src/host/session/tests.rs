use super::*;

#[test]
fn endpoints() {
    let e = Endpoint::parse("http://127.0.0.1:8080/mcp").unwrap();
    assert_eq!((e.host.as_str(), e.port, e.path.as_str()), ("127.0.0.1", 8080, "/mcp"));
    assert_eq!(e.authority, "127.0.0.1:8080");
    let e = Endpoint::parse("http://[::1]:9/x/y").unwrap();
    assert_eq!((e.host.as_str(), e.port, e.path.as_str()), ("::1", 9, "/x/y"));
    assert_eq!(Endpoint::parse("http://localhost").unwrap().port, 80);
    assert!(Endpoint::parse("https://x:1/").is_err());
    assert!(Endpoint::parse("http://x:no/").is_err());
}

/// A server that answers one POST with an event stream in two pieces, and a GET with a
/// notification: both land in the log, on their own streams, in order.
#[tokio::test]
async fn posts_and_event_streams() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                if req.starts_with("GET") {
                    assert!(req.contains("Mcp-Session-Id: s1"), "{req}");
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n")
                        .await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\ntransfer-encoding: chunked\r\n\r\n";
                s.write_all(head.as_bytes()).await.unwrap();
                let e1 = "data: {\"jsonrpc\":\"2.0\",\"method\":\"p\"}\n\n";
                s.write_all(format!("{:x}\r\n{e1}\r\n", e1.len()).as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                let e2 = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
                s.write_all(format!("{:x}\r\n{e2}\r\n0\r\n\r\n", e2.len()).as_bytes()).await.unwrap();
            });
        }
    });
    let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
    h.wait_listening(Instant::now() + Duration::from_secs(2)).await.unwrap();
    h.post(b"{}".to_vec()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while h.events().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ev = h.events();
    assert_eq!(h.session_id().as_deref(), Some("s1"));
    let post: Vec<&Arrival> = ev.iter().filter(|e| e.stream() == 1).collect();
    assert_eq!(post.len(), 2, "{ev:?}");
    assert!(matches!(post[0], Arrival::Message { value, .. } if value["method"] == "p"));
    assert!(matches!(post[1], Arrival::Message { value, .. } if value["id"] == 1));
    assert!(ev.iter().any(|e| matches!(e, Arrival::Message { stream: 2, value } if value["method"] == "n")), "{ev:?}");
}

/// JSON bodies (with a length), error statuses with and without a JSON-RPC body, the queued
/// sender (in order, after the endpoint listens), DELETE, and the automatic answer to a
/// request from the bridge.
#[tokio::test]
async fn json_bodies_statuses_and_the_queue() {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
    // Queued before anything listens: sent once the server is up.
    let watchdog = Instant::now() + Duration::from_secs(5);
    h.send(HttpSend::Post(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#.to_vec()), watchdog);
    h.send(HttpSend::Post(b"{not json".to_vec()), watchdog);
    h.send(HttpSend::Post(br#"{"jsonrpc":"2.0","id":3,"method":"x"}"#.to_vec()), watchdog);
    h.send(HttpSend::Delete, watchdog);
    assert!(!h.listening() && h.pending() == 4);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let l = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return; // the listening probe
                }
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let first = req.lines().next().unwrap_or("").to_owned();
                let body = req.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
                log.lock().unwrap().push(format!("{first} {body}"));
                let reply = if first.starts_with("DELETE") {
                    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned()
                } else if body.contains("initialize") {
                    let b = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","serverInfo":{}}}"#;
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: abc\r\ncontent-length: {}\r\n\r\n{b}",
                        b.len()
                    )
                } else if body.starts_with("{not") {
                    let b = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#;
                    format!(
                        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
                        b.len()
                    )
                } else if first.starts_with("GET") {
                    // The session's stream carries a request from the bridge.
                    let e = "data: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"roots/list\"}\n\n";
                    let _ = s
                        .write_all(format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{e}").as_bytes())
                        .await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    return;
                } else if body.contains("\"s1\"") {
                    "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned()
                } else {
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\noops".to_owned()
                };
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while (h.pending() > 0 || seen.lock().unwrap().len() < 6) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(h.listening() && h.failure().is_none());
    let seen = seen.lock().unwrap().clone();
    let posts: Vec<&String> = seen.iter().filter(|l| l.starts_with("POST") && !l.contains("s1")).collect();
    assert_eq!(posts.len(), 3, "{seen:?}");
    assert!(
        posts[0].contains("initialize") && posts[1].contains("{not") && posts[2].contains("\"id\":3"),
        "in order: {seen:?}"
    );
    assert!(seen.iter().any(|l| l.starts_with("DELETE")), "{seen:?}");
    assert!(seen.iter().any(|l| l.contains("\"id\":\"s1\"") && l.contains("-32601")), "roots/list answered: {seen:?}");
    let ev = h.events();
    let has = |f: &dyn Fn(&Arrival) -> bool| ev.iter().any(f);
    assert!(has(&|e| matches!(e, Arrival::Message { value, .. } if value["id"] == 1)), "{ev:?}");
    assert!(has(&|e| matches!(e, Arrival::Message { value, .. } if value["error"]["code"] == -32700)), "{ev:?}");
    assert!(has(&|e| matches!(e, Arrival::Note { text, .. } if text == "HTTP 400 (application/json)")), "{ev:?}");
    assert!(has(&|e| matches!(e, Arrival::Note { text, .. } if text == "HTTP 500")), "{ev:?}");
    assert!(has(&|e| matches!(e, Arrival::Note { text, .. } if text == "body: oops")), "{ev:?}");
    assert!(has(&|e| matches!(e, Arrival::Note { text, .. } if text == "DELETE: HTTP 404")), "{ev:?}");
    assert_eq!(h.session_id().as_deref(), Some("abc"));
}

#[tokio::test]
async fn the_watchdog_gives_up_on_an_endpoint_that_never_listens() {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
    h.send(HttpSend::Post(b"{}".to_vec()), Instant::now() + Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(700)).await;
    let f = h.failure().expect("the watchdog fired");
    assert!(
        f.starts_with(&format!(
            "start-up watchdog: the bridge did not accept connections at http://127.0.0.1:{port}/mcp within"
        )),
        "{f}"
    );
    assert!(!h.listening());
}

/// An event stream's comment lines (a keep-alive, BR-HTTP-36) arrive as comments of their
/// stream, in order with its messages; a comment is no event and ends none.
#[tokio::test]
async fn sse_comments_are_reported_on_their_stream() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            if s.read(&mut buf).await.unwrap_or(0) == 0 {
                continue; // the listening probe
            }
            let body = ": keep-alive\n\ndata: {\"jsonrpc\":\"2.0\",\n:between lines\ndata: \"method\":\"n\"}\n\n:\n\n";
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(reply.as_bytes()).await.unwrap();
        }
    });
    let h = HttpSession::new(Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap());
    h.wait_listening(Instant::now() + Duration::from_secs(2)).await.unwrap();
    h.post(b"{}".to_vec()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while h.events().len() < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ev = h.events();
    let comment = |e: &Arrival, want: &str| matches!(e, Arrival::Comment { stream: 1, text } if text == want);
    assert_eq!(ev.len(), 4, "{ev:?}");
    assert!(comment(&ev[0], "keep-alive"), "{ev:?}");
    assert!(comment(&ev[1], "between lines"), "{ev:?}");
    assert!(matches!(&ev[2], Arrival::Message { stream: 1, value } if value["method"] == "n"), "{ev:?}");
    assert!(comment(&ev[3], ""), "{ev:?}");
}
