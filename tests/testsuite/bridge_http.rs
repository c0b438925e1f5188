//! The reference bridge over Streamable HTTP, driven by the harness's hand-rolled HTTP client
//! against the reference testee: DNS-rebinding and Origin checks, bearer token, loopback only.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::time::Duration;

use protomcp_harness::host::http::{HttpHost, request};
use serde_json::json;
use tokio::process::{Child, Command};

use crate::common::free_port;

const TOKEN: &str = "s3cret-token";

fn bin() -> String {
    env!("CARGO_BIN_EXE_protomcp-conform").to_owned()
}

/// Starts the bridge on a free loopback port with `TOK` set (or removed) and waits until it
/// accepts connections.
async fn start(token: Option<&str>) -> (Child, SocketAddr) {
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["bridge", "--transport", "http", "--port", &port.to_string(), "--auth-token-env", "TOK"])
        .args(["--call-timeout", "5s", "--", &bin(), "testee"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true);
    match token {
        Some(t) => cmd.env("TOK", t),
        None => cmd.env_remove("TOK"),
    };
    let child = cmd.spawn().unwrap();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    (child, addr)
}

async fn wait_listening(addr: SocketAddr) {
    crate::common::wait_listening(addr, Duration::from_secs(10)).await;
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_http_refuses_foreign_origin_host_and_missing_token() {
    let (_child, addr) = start(Some(TOKEN)).await;
    wait_listening(addr).await;
    let t = Duration::from_secs(5);
    let json = ("Content-Type", "application/json");
    let accept = ("Accept", "application/json, text/event-stream");
    let good = format!("Bearer {TOKEN}");
    let auth = ("Authorization", good.as_str());
    let post = |h: Vec<(&'static str, &'static str)>| async move {
        let mut all = vec![json, accept];
        all.extend(h);
        request(addr, "POST", "/mcp", &all, INIT.as_bytes(), t).await.unwrap()
    };
    // No token, wrong tokens: 401 with WWW-Authenticate: Bearer (BR-HTTP-20, BR-SECURITY-07).
    let r = post(vec![]).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    // (Whitespace after the value is not part of an HTTP field value, so only inner whitespace
    // can be sent.)
    for wrong in ["Bearer S3CRET-TOKEN", "Bearer  s3cret-token", "Bearer s3cret", "Basic s3cret-token", "s3cret-token"]
    {
        assert_eq!(post(vec![("Authorization", wrong)]).await.status, 401, "{wrong}");
    }
    // Foreign Origin and foreign Host: 403, even with the token (BR-HTTP-04/05).
    let r =
        request(addr, "POST", "/mcp", &[json, accept, auth, ("Origin", "https://evil.example")], INIT.as_bytes(), t)
            .await
            .unwrap();
    assert_eq!(r.status, 403);
    let r = request(addr, "POST", "/mcp", &[json, accept, auth, ("Host", "evil.example:80")], INIT.as_bytes(), t)
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    // Other methods: 405 with Allow.
    let r = request(addr, "PUT", "/mcp", &[auth], b"", t).await.unwrap();
    assert_eq!(r.status, 405);
    assert!(r.header("allow").is_some_and(|a| a.contains("POST")));
    // A loopback Origin and the token: served.
    let r =
        request(addr, "POST", "/mcp", &[json, accept, auth, ("Origin", "http://localhost:3000")], INIT.as_bytes(), t)
            .await
            .unwrap();
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    // A full session: initialize, tools/list, tools/call.
    let mut host = HttpHost::new(addr, Some(TOKEN.into()));
    let init = host.initialize().await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert!(host.session.as_ref().is_some_and(|s| s.len() >= 16), "{:?}", host.session);
    let list = host.call(2, "tools/list", json!({})).await.unwrap();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"echo") && !names.contains(&"secret"), "{names:?}");
    let r = host.call(3, "tools/call", json!({"name": "echo", "arguments": {"text": "over http"}})).await.unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "over http", "{r}");
    // A valid session id does not replace the token (BR-HTTP-23).
    let mut stolen = HttpHost::new(addr, None);
    stolen.session = host.session.clone();
    assert_eq!(stolen.post(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})).await.unwrap().status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_http_binds_loopback_only() {
    let (_child, addr) = start(Some(TOKEN)).await;
    wait_listening(addr).await;
    // A non-loopback address of this machine, if it has one: the port must not answer there.
    let local = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect((Ipv4Addr::new(10, 255, 255, 255), 9)).map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip());
    match local {
        Ok(ip) if !ip.is_loopback() && !ip.is_unspecified() => {
            let r = tokio::net::TcpStream::connect((ip, addr.port())).await;
            assert!(r.is_err(), "the bridge answers on {ip}:{}", addr.port());
        }
        other => eprintln!("no non-loopback address to check ({other:?})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_http_refuses_to_start_without_the_secret() {
    for token in [None, Some("")] {
        let (mut child, addr) = start(token).await;
        let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await.unwrap().unwrap();
        assert!(!status.success(), "{token:?}: {status}");
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "{token:?}: it listened");
    }
}

/// Starts the bridge with `--auth token:TOK --auth apikey:KEY`, the variables set as given.
async fn start_token_and_key(token: Option<&str>, key: Option<&str>) -> (Child, SocketAddr) {
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["bridge", "--transport", "http", "--port", &port.to_string(), "--auth", "token:TOK"])
        .args(["--auth", "apikey:KEY", "--call-timeout", "5s", "--", &bin(), "testee"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (var, value) in [("TOK", token), ("KEY", key)] {
        match value {
            Some(v) => cmd.env(var, v),
            None => cmd.env_remove(var),
        };
    }
    (cmd.spawn().unwrap(), SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_http_api_key_and_token_are_both_required() {
    const KEY: &str = "k3y-value";
    let (_child, addr) = start_token_and_key(Some(TOKEN), Some(KEY)).await;
    wait_listening(addr).await;
    let t = Duration::from_secs(5);
    let bearer = format!("Bearer {TOKEN}");
    let base = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let post = |extra: Vec<(&'static str, String)>| async move {
        let mut all: Vec<(&str, &str)> = base.to_vec();
        all.extend(extra.iter().map(|(k, v)| (*k, v.as_str())));
        request(addr, "POST", "/mcp", &all, INIT.as_bytes(), t).await.unwrap()
    };
    // BR-HTTP-21/22: the token alone, the key alone, a wrong key, the key in Authorization.
    let r = post(vec![("Authorization", bearer.clone())]).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), None, "a missing API key is no bearer challenge");
    let r = post(vec![("X-API-Key", KEY.into())]).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    for wrong in ["K3Y-VALUE", "k3y-valu", "s3cret-token"] {
        let r = post(vec![("Authorization", bearer.clone()), ("X-API-Key", wrong.into())]).await;
        assert_eq!(r.status, 401, "{wrong}");
    }
    assert_eq!(post(vec![("Authorization", format!("Bearer {KEY}")), ("X-API-Key", KEY.into())]).await.status, 401);
    // Both: served.
    let r = post(vec![("Authorization", bearer.clone()), ("X-API-Key", KEY.into())]).await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_http_refuses_to_start_without_any_named_secret() {
    // BR-HTTP-24 for each of several `--auth` options; the message names the option.
    for (token, key, named) in
        [(Some(TOKEN), None, "apikey:KEY"), (Some(TOKEN), Some(""), "apikey:KEY"), (None, Some("k"), "token:TOK")]
    {
        let (child, addr) = start_token_and_key(token, key).await;
        let out = tokio::time::timeout(Duration::from_secs(5), child.wait_with_output()).await.unwrap().unwrap();
        assert!(!out.status.success(), "{token:?} {key:?}: {}", out.status);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{stderr}");
        assert!(!stderr.contains(TOKEN), "{stderr}");
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "{token:?} {key:?}: it listened");
    }
}
