//! MCP over stdin/stdout: lines from the host into the session's core, its messages out as
//! whole lines, in the order the core gives them.

use std::sync::Arc;

use protomcp_proto::host_core::Intake;
use serde_json::Value;

use super::session::McpSession;
use crate::Bridge;
use crate::error::ServeError;

/// The most lines the output writes at once.
const OUTPUT_BATCH: usize = 64;

/// How long a session that ends gives its output to write what is queued.
const DRAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Serves one MCP session on stdin/stdout until the host closes stdin or `stop` resolves.
/// With `--trace` every message goes into the trace.
pub async fn serve_stdio(bridge: Arc<Bridge>, stop: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
    let session = McpSession::new(bridge, false, false);
    let mut output = tokio::spawn(write_output(session.clone()));
    let written = tokio::select! {
        _ = read_input(&session) => Ok(()),
        _ = stop => Ok(()),
        // The host's end of stdout is gone: nothing can be answered any more.
        w = &mut output => w.unwrap_or(Ok(())),
    };
    if let Err(e) = written {
        session.end();
        return Err(ServeError::Session(e));
    }
    // An orderly shutdown (stdin closed, a signal) ends the listen subscriptions first
    // (BR-STATELESS-33). What is queued goes out (bounded), then the session ends: its calls
    // in flight are cancelled (BR-CANCEL-06).
    let _ = session.shutdown();
    let _ = tokio::time::timeout(DRAIN, async {
        while !session.is_idle() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    session.end();
    session.settle(DRAIN).await;
    output.abort();
    Ok(())
}

/// The output task: the core's messages, a batch of whole lines per write; an error when stdout
/// fails.
async fn write_output(session: Arc<McpSession>) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut stdout = crate::stdio::stdout();
    let bridge = session.bridge.clone();
    let mut buf = Vec::new();
    loop {
        let woken = session.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let batch = session.take(OUTPUT_BATCH);
        if batch.is_empty() {
            woken.await;
            continue;
        }
        buf.clear();
        for t in batch {
            let v = t.message.to_value();
            if bridge.tracing() {
                bridge.trace_mcp(false, &v);
            }
            buf.extend_from_slice(v.to_string().as_bytes());
            buf.push(b'\n');
        }
        stdout.write_all(&buf).await?;
        stdout.flush().await?;
        bridge.spin.wrote();
    }
}

/// The input: the host's lines into the core; end-of-file ends the session.
async fn read_input(session: &McpSession) {
    let bridge = &session.bridge;
    let mut lines = crate::host_lines::HostLines::new(crate::stdio::stdin(), crate::limits::BRIDGE_HOST_LINE);
    while let Some(line) = lines.next().await {
        bridge.spin.arrived();
        let line = match line {
            crate::host_lines::HostLine::Text(l) => l,
            bad => {
                // BR-MCP-16/17: answered with id null, and the session goes on.
                let Some(v) = bad.answer(lines.max()) else { continue };
                if bridge.tracing() {
                    bridge.trace_host_line(true, &format!("<{}>", v["error"]["message"].as_str().unwrap_or("")));
                }
                session.with(|c, _| c.refuse(v));
                continue;
            }
        };
        // Traced before the core sees it: its answer can go out at once.
        let parsed = serde_json::from_str::<Value>(&line).ok();
        if bridge.tracing() && !line.trim().is_empty() {
            match &parsed {
                Some(v) => bridge.trace_mcp(true, v),
                None => bridge.trace_host_line(true, &line),
            }
        }
        session.with(|c, now| {
            let intake = match &parsed {
                Some(v) => c.handle_value(now, v),
                None => c.handle_bytes(now, line.as_bytes()).0,
            };
            if let Intake::Refused(v) = intake {
                c.refuse(v);
            }
        });
    }
}
