//! A fourth published modern MCP client, the official Rust SDK's client (rmcp, pinned in
//! Cargo.toml and Cargo.lock), drives the reference bridge in front of the reference testee over
//! stdio and over Streamable HTTP, speaking MCP 2026-07-28 (the stateless revision).
//!
//! Per transport, each step printed as it passes:
//!
//! - connect: `ClientLifecycleMode::Auto` (server/discover first, initialize only as a fallback);
//!   the negotiated version must be 2026-07-28;
//! - list: tools/list names echo, toggle and ask, not the hidden tool secret;
//! - call: echo returns its text; fail_soft is an isError result;
//! - listen: `Peer::listen` with toolsListChanged is acknowledged; toggle {enable: true} makes
//!   the testee enable secret, and notifications/tools/list_changed must arrive on the
//!   subscription; tools/list then names secret;
//! - mrtr: tools/call ask: the testee sends a SamplingRequest, the bridge answers with an
//!   InputRequiredResult, and the SDK's `call_tool` fulfils it through this client's
//!   `create_message` and retries; the result must be that answer, asked once.
//!
//! Usage: `rust-modern --bin path/to/protomcp-conform [--transport stdio|http|both]`.
//! Exit status 0 when every step passes; 1 with the failing step otherwise. Every wait is
//! bounded, and every bridge runs in a process group of its own that is ended at the end.

#![allow(deprecated)] // sampling's types are deprecated by SEP-2577; MRTR still carries them

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    Implementation, ProtocolVersion, Role, SamplingMessage, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

const MODEL_ANSWER: &str = "42, says the Rust client's model";
const STEP: Duration = Duration::from_secs(15);

#[derive(Clone, Default)]
struct Client {
    asked: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        // Declares `sampling`, so a bridge serving 2026-07-28 may ask for it through MRTR.
        let capabilities: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"sampling": {}})).expect("a capabilities object");
        ClientConfig::new(capabilities, Implementation::new("protomcp-conform-rust-modern", "1.0.0"))
    }

    // Sampling is deprecated in 2026-07-28 (SEP-2577) but served through MRTR: what this checks.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(CreateMessageResult::new(
            SamplingMessage::new(Role::Assistant, rmcp::model::SamplingMessageContentBlock::text(MODEL_ANSWER)),
            "rust-client-model".to_owned(),
        ))
    }
}

fn step(transport: &str, name: &str, what: &str) {
    println!("rust-modern: {transport}: {name}: {what}");
}

async fn bounded<T, E: Into<anyhow::Error>>(what: &str, f: impl Future<Output = Result<T, E>>) -> Result<T> {
    match timeout(STEP, f).await {
        Ok(r) => r.map_err(Into::into).with_context(|| what.to_owned()),
        Err(_) => bail!("{what}: no answer within {} s", STEP.as_secs()),
    }
}

fn text_of(r: &rmcp::model::CallToolResult) -> Option<String> {
    r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone())
}

async fn names(client: &RunningService<RoleClient, Client>) -> Result<Vec<String>> {
    let mut v: Vec<String> =
        bounded("tools/list", client.list_all_tools()).await?.into_iter().map(|t| t.name.into_owned()).collect();
    v.sort();
    Ok(v)
}

fn call(name: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    let serde_json::Value::Object(map) = args else { unreachable!("arguments are an object") };
    CallToolRequestParams::new(name).with_arguments(map)
}

async fn session<T, E, A>(transport: &str, io: T) -> Result<()>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handler = Client::default();
    let asked = Arc::clone(&handler.asked);
    let lifecycle =
        ClientLifecycleMode::Auto { preferred_versions: vec![ProtocolVersion::V_2026_07_28], legacy_version: None };
    let client = bounded("connect", handler.serve_with_lifecycle(io, lifecycle)).await?;
    let result = steps(transport, &client, &asked).await;
    let _ = timeout(STEP, client.cancel()).await;
    result
}

async fn steps(transport: &str, client: &RunningService<RoleClient, Client>, asked: &AtomicUsize) -> Result<()> {
    let version = client.peer().peer_info().map(|i| i.protocol_version.clone());
    ensure!(
        version == Some(ProtocolVersion::V_2026_07_28),
        "connect: negotiated {version:?}, want {}",
        ProtocolVersion::V_2026_07_28
    );
    step(transport, "connect", "2026-07-28 through server/discover");

    let listed = names(client).await?;
    ensure!(
        ["echo", "toggle", "ask"].iter().all(|n| listed.iter().any(|l| l == n))
            && !listed.iter().any(|l| l == "secret"),
        "list: {listed:?}"
    );
    step(transport, "list", &listed.join(", "));

    let echo =
        bounded("echo", client.call_tool(call("echo", serde_json::json!({"text": "hello from rust, modern"})))).await?;
    ensure!(
        echo.is_error != Some(true) && text_of(&echo).as_deref() == Some("hello from rust, modern"),
        "call: echo gave {echo:?}"
    );
    let soft = bounded("fail_soft", client.call_tool(call("fail_soft", serde_json::json!({})))).await?;
    ensure!(soft.is_error == Some(true), "call: fail_soft gave {soft:?}");
    step(transport, "call", "echo, fail_soft (isError)");

    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut sub = bounded("subscriptions/listen", client.peer().listen(filter)).await?;
    step(transport, "listen", "acknowledged");
    let toggled = bounded("toggle", client.call_tool(call("toggle", serde_json::json!({"enable": true})))).await?;
    ensure!(toggled.is_error != Some(true), "listen: toggle gave {toggled:?}");
    let event = bounded("listen: notifications/tools/list_changed", sub.next()).await?;
    ensure!(
        matches!(event, Some(ServerNotification::ToolListChangedNotification(_))),
        "listen: the first event is {event:?}"
    );
    let after = names(client).await?;
    ensure!(after.iter().any(|n| n == "secret"), "listen: secret not listed after the change: {after:?}");
    step(transport, "listen", "tools/list_changed after toggle; secret now listed");
    drop(sub);

    let answer =
        bounded("ask", client.call_tool(call("ask", serde_json::json!({"question": "What is 6 x 7?"})))).await?;
    ensure!(
        answer.is_error != Some(true) && text_of(&answer).as_deref() == Some(MODEL_ANSWER),
        "mrtr: ask gave {answer:?}"
    );
    let n = asked.load(Ordering::SeqCst);
    ensure!(n == 1, "mrtr: create_message ran {n} times, want once");
    step(transport, "mrtr", &format!("ask answered {MODEL_ANSWER:?} through InputRequiredResult and a retry"));
    Ok(())
}

/// Ends a process group: SIGTERM, up to 3 s, then SIGKILL.
async fn end_group(child: &mut tokio::process::Child) {
    let Some(pid) = child.id() else { return };
    let group = format!("-{pid}");
    let _ = std::process::Command::new("kill").args(["-TERM", "--", &group]).status();
    if timeout(Duration::from_secs(3), child.wait()).await.is_err() {
        let _ = std::process::Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = child.wait().await;
    }
}

async fn over_http(bin: &str) -> Result<()> {
    let mut bridge = tokio::process::Command::new(bin)
        .args(["bridge", "--transport", "http", "--host", "127.0.0.1", "--port", "0", "--call-timeout", "5s", "--"])
        .args([bin, "testee"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .context("starting the bridge")?;
    let mut lines = BufReader::new(bridge.stderr.take().expect("piped")).lines();
    let url = timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            eprintln!("{line}");
            if let Some(url) = line.strip_prefix("protomcp-conform bridge: listening on ") {
                return Ok::<_, std::io::Error>(Some(url.trim().to_owned()));
            }
        }
        Ok(None)
    })
    .await;
    // Keep draining the bridge's stderr so it never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}")
        }
    });
    let result = match url {
        Ok(Ok(Some(url))) => session("http", StreamableHttpClientTransport::from_uri(url)).await,
        Ok(Ok(None)) => Err(anyhow!("connect: the bridge exited before listening")),
        Ok(Err(e)) => Err(anyhow!("connect: reading the bridge's stderr: {e}")),
        Err(_) => Err(anyhow!("connect: the bridge did not print its address within 30 s")),
    };
    end_group(&mut bridge).await;
    result
}

async fn over_stdio(bin: &str) -> Result<()> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["bridge", "--call-timeout", "5s", "--", bin, "testee"]).process_group(0);
    session("stdio", TokioChildProcess::new(cmd).context("starting the bridge")?).await
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let (Some(bin), which) = (flag("--bin"), flag("--transport").unwrap_or_else(|| "both".into())) else {
        eprintln!("usage: rust-modern --bin path/to/protomcp-conform [--transport stdio|http|both]");
        return std::process::ExitCode::from(2);
    };
    let mut failed = false;
    if which != "http" {
        if let Err(e) = over_stdio(&bin).await {
            println!("rust-modern: stdio: FAILED: {e:#}");
            failed = true;
        }
    }
    if which != "stdio" {
        if let Err(e) = over_http(&bin).await {
            println!("rust-modern: http: FAILED: {e:#}");
            failed = true;
        }
    }
    if failed { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS }
}
