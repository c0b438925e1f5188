//! MCP over stdin/stdout: the gate, the hot path of tools/call, and one whole line at a time.

use super::{
    Arc, Bridge, FastCalls, Gate, Handler, Mutex, Out, ServeError, ServiceExt, Session, Value, Verdict, mpsc, oneshot,
};

/// The most lines the output writes at once.
const OUTPUT_BATCH: usize = 64;

/// The hot path of stdio ([`super::fast`]): the call's answer goes straight to the output as a
/// line, in order with the session's notifications ([`Session::lines`]). Returns the message
/// when it is not such a call.
fn fast_call(session: &Arc<Session>, calls: &FastCalls, out: &mpsc::UnboundedSender<Out>, v: Value) -> Option<Value> {
    let call = match super::fast::FastRequest::of(session, v) {
        Ok(call) => call,
        Err(v) => return Some(v),
    };
    let ct = tokio_util::sync::CancellationToken::new();
    let key = call.key();
    calls.lock().unwrap().insert(key.clone(), ct.clone());
    let (session, calls, out) = (session.clone(), calls.clone(), out.clone());
    tokio::spawn(async move {
        let id = call.id.clone();
        let line = call.run(&session, ct).await;
        calls.lock().unwrap().remove(&key);
        if let Some(line) = line {
            let _ = out.send(Out { line, answers: Some(id), written: None });
        }
    });
    None
}

/// Serves one MCP session on stdin/stdout until the host closes stdin or `stop` resolves.
/// Lines pass through the session's [`Gate`] and, with `--trace`, into the trace; stdout gets
/// whole lines only (the server's, the gate's answers and the hot path's never interleave).
pub async fn serve_stdio(bridge: Arc<Bridge>, stop: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
    let handler = Handler::new(bridge.clone(), false);
    let session = handler.session.clone();
    let session_id = session.id;
    let (server_in, feed) = tokio::io::duplex(1 << 16);
    let (server_out, from_server) = tokio::io::duplex(1 << 16);
    let (answers, answers_rx) = mpsc::unbounded_channel::<Out>();
    let _ = session.lines.set(answers.clone());
    let gate = Arc::new(Mutex::new(Gate::new()));
    let output = tokio::spawn(write_output(bridge.clone(), gate.clone(), from_server, answers_rx));
    let input = tokio::spawn(read_input(bridge.clone(), handler.session.clone(), gate, feed, answers));
    tokio::pin!(stop);
    let served = async {
        match handler.serve((server_in, server_out)).await {
            Ok(running) => running.waiting().await.map(|_| ()).map_err(|e| ServeError::Session(e.to_string())),
            // The host went away before initializing: an orderly end all the same.
            Err(e) => {
                eprintln!("protomcp-conform bridge: the MCP session ended before it started: {e}");
                Ok(())
            }
        }
    };
    let r = tokio::select! {
        r = served => r,
        _ = &mut stop => Ok(()),
    };
    input.abort();
    session.end();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), output).await;
    bridge.remove_session(session_id);
    r
}

/// The output task of [`serve_stdio`]: the server's lines, the gate's answers, the hot path's
/// answers and the session's notifications, one whole line at a time.
async fn write_output(
    out_bridge: Arc<Bridge>,
    out_gate: Arc<Mutex<Gate>>,
    from_server: tokio::io::DuplexStream,
    mut answers_rx: mpsc::UnboundedReceiver<Out>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut stdout = crate::stdio::stdout();
    let mut lines = BufReader::new(from_server).lines();
    // A notification waits for the server's first line, the answer to initialize: before it
    // the host has no session to take a notification in (a tool process that logs right
    // after its handshake would otherwise be heard before the bridge's initialize result).
    // The session's sender waits for each note to be written, so at most one is held here.
    let mut opened = false;
    let mut held: Option<Out> = None;
    let mut buf = Vec::new();
    loop {
        let mut batch: Batch = Vec::new();
        tokio::select! {
            l = lines.next_line() => match l {
                Ok(Some(line)) => {
                    out_gate.lock().unwrap().outbound_line(&line);
                    batch.push((line, None));
                    if !opened {
                        opened = true;
                        batch.extend(held.take().map(|o| (o.line, o.written)));
                    }
                }
                _ => break,
            },
            a = answers_rx.recv() => match a {
                Some(out) => take(out, &mut batch, &mut held, opened, &out_gate),
                None => continue,
            },
        };
        // Whatever else is ready goes out in the same write: one write per batch of lines, not
        // per line (under load answers come in runs).
        while batch.len() < OUTPUT_BATCH
            && let Ok(out) = answers_rx.try_recv()
        {
            take(out, &mut batch, &mut held, opened, &out_gate);
        }
        if batch.is_empty() {
            continue;
        }
        buf.clear();
        for (line, _) in &batch {
            if out_bridge.tracing()
                && let Ok(v) = serde_json::from_str::<Value>(line)
            {
                out_bridge.trace_mcp(false, &v);
            }
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
        }
        if stdout.write_all(&buf).await.is_err() || stdout.flush().await.is_err() {
            return;
        }
        out_bridge.spin.wrote();
        for (_, written) in batch {
            if let Some(w) = written {
                let _ = w.send(());
            }
        }
    }
}

/// Lines for one write, each with what waits for it to be written.
type Batch = Vec<(String, Option<oneshot::Sender<()>>)>;

/// Puts a message that is not the server's into `batch`, or holds a notification that comes
/// before the answer to initialize.
fn take(out: Out, batch: &mut Batch, held: &mut Option<Out>, opened: bool, gate: &Mutex<Gate>) {
    match out {
        note @ Out { written: Some(_), .. } if !opened => *held = Some(note),
        Out { line, answers, written } => {
            // The gate's own answers never end a request of the server's.
            if let Some(id) = answers {
                gate.lock().unwrap().answered(&id);
            }
            batch.push((line, written));
        }
    }
}

/// The input task of [`serve_stdio`]: the host's lines through the gate, to the hot path or the
/// server; end-of-file ends the session.
async fn read_input(
    in_bridge: Arc<Bridge>,
    in_session: Arc<Session>,
    gate: Arc<Mutex<Gate>>,
    mut feed: tokio::io::DuplexStream,
    answers: mpsc::UnboundedSender<Out>,
) {
    use tokio::io::AsyncWriteExt;
    let fast: FastCalls = Arc::default();
    let mut lines = crate::host_lines::HostLines::new(crate::stdio::stdin(), crate::limits::BRIDGE_HOST_LINE);
    while let Some(line) = lines.next().await {
        in_bridge.spin.arrived();
        let mut line = match line {
            crate::host_lines::HostLine::Text(l) => l,
            bad => {
                // BR-MCP-16/17: answered with id null, and the session goes on.
                let Some(v) = bad.answer(lines.max()) else { continue };
                if in_bridge.tracing() {
                    in_bridge.trace_host_line(true, &format!("<{}>", v["error"]["message"].as_str().unwrap_or("")));
                }
                let _ = answers.send(Out { line: v.to_string(), answers: None, written: None });
                continue;
            }
        };
        let (verdict, parsed) = gate.lock().unwrap().inbound_parsed(&line);
        if in_bridge.tracing() {
            match &parsed {
                Some(v) => in_bridge.trace_mcp(true, v),
                None => in_bridge.trace_host_line(true, &line),
            }
        }
        match verdict {
            Verdict::Pass => {
                let Some(v) = parsed else { continue };
                // The host cancels a call of the hot path: rmcp never saw it.
                if v.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
                    && let Some(rid) = v.get("params").and_then(|p| p.get("requestId"))
                    && let Some(ct) = fast.lock().unwrap().remove(&rid.to_string())
                {
                    ct.cancel();
                    continue;
                }
                if fast_call(&in_session, &fast, &answers, v).is_none() {
                    continue;
                }
                line.push('\n');
                if feed.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
            Verdict::Answer(v) => {
                let _ = answers.send(Out { line: v.to_string(), answers: None, written: None });
            }
            Verdict::Drop => {}
        }
    }
    // End-of-file on stdin ends the session: its calls in flight are cancelled
    // (BR-CANCEL-06), and the server sees end-of-file too (BR-LIFECYCLE-09).
    in_session.end();
    let _ = feed.shutdown().await;
}
