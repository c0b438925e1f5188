//! The gate in front of rmcp for messages from a host: the decisions are sans-IO in
//! [`protomcp_proto::mcp_input`]; what rmcp can read is told to it here ([`Rmcp`]).
//!
//! rmcp drops unparsable lines (BR-MCP-16 wants -32700), answers a JSON value that is not a
//! JSON-RPC message with an error that has no `id` (BR-MCP-17 wants -32600 with `id` null),
//! reads a known method whose params do not fit its types as an unknown method (-32601, where
//! BR-LOG-04, BR-COMPLETE-02 and BR-CALL-03 want -32602), answers a notification it cannot read
//! (BR-MCP-19: never), and lets a request that reuses the id of one in flight replace the
//! original, whose answer is then lost (BR-MCP-19/20): the gate answers all of these itself.

use std::collections::HashMap;
use std::sync::Mutex;

use protomcp_proto::mcp_input::{self, ServerReader};
use rmcp::model as m;
use serde_json::{Value, json};

pub use protomcp_proto::mcp_input::Verdict;

/// What rmcp reads: its own message types decide.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rmcp;

impl ServerReader for Rmcp {
    fn reads(&self, message: &Value) -> bool {
        serde_json::from_value::<m::ClientJsonRpcMessage>(message.clone()).is_ok()
    }

    /// Whether rmcp reads `method` with these params as that method (not as a custom request).
    fn reads_params(&self, method: &str, params: Option<&Value>) -> bool {
        // The common tools/call, checked without building rmcp's request (a few µs per call).
        if method == "tools/call"
            && let Some(Value::Object(p)) = params
            && p.get("name").is_some_and(Value::is_string)
            && p.get("arguments").is_none_or(|a| a.is_object() || a.is_null())
            && p.keys().all(|k| k == "name" || k == "arguments")
        {
            return true;
        }
        let mut r = json!({"method": method});
        if let Some(p) = params {
            r["params"] = p.clone();
        }
        !matches!(serde_json::from_value::<m::ClientRequest>(r), Ok(m::ClientRequest::CustomRequest(_)) | Err(_))
    }
}

/// The per-session gate of the reference bridge.
pub type Gate = mcp_input::Gate<Rmcp>;

/// The gates of the HTTP sessions, by `Mcp-Session-Id`. Over HTTP a request is in flight from
/// its POST until the body of that POST's response ends ([`Gates::done`]).
#[derive(Debug, Default)]
pub struct Gates {
    by_session: Mutex<HashMap<String, Gate>>,
}

impl Gates {
    /// Checks the body of a POST in session `session`: the verdict and, for a request passed
    /// on, its id (in flight until [`Gates::done`]).
    pub fn check(&self, session: &str, body: &[u8]) -> (Verdict, Option<Value>) {
        self.with(session, |g| g.inbound_body(body))
    }

    /// [`Gates::check`] of a body already parsed into `message`.
    pub fn check_parsed(&self, session: &str, message: &Value) -> (Verdict, Option<Value>) {
        let verdict = self.with(session, |g| g.inbound(message));
        let id = match verdict {
            Verdict::Pass if message.get("method").is_some() => message.get("id").cloned(),
            _ => None,
        };
        (verdict, id)
    }

    /// Runs `f` on the gate of `session` (a new one for a session not seen before).
    fn with<R>(&self, session: &str, f: impl FnOnce(&mut Gate) -> R) -> R {
        let mut gates = self.by_session.lock().unwrap();
        match gates.get_mut(session) {
            Some(g) => f(g),
            None => f(gates.entry(session.to_owned()).or_default()),
        }
    }

    /// The response to request `id` of `session` has been sent (or abandoned).
    pub fn done(&self, session: &str, id: &Value) {
        if let Some(g) = self.by_session.lock().unwrap().get_mut(session) {
            g.answered(id);
        }
    }

    /// The session ended.
    pub fn remove(&self, session: &str) {
        self.by_session.lock().unwrap().remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protomcp_proto::mcp_input::SpecReader;

    /// Lines whose verdict depends on what the server reads: rmcp and the schema's shapes (what
    /// the fuzz target gates with) give the same verdicts.
    const READER_LINES: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"shouting"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/nothing","name":"x"},"argument":{"name":"a","value":"b"}}}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":"s"}}"#,
        r#"{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"error"}}"#,
        r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"x","arguments":null}}"#,
        r#"{"jsonrpc":"2.0","id":13,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"_meta":{"x":1}}}"#,
        r#"{"jsonrpc":"2.0","id":15,"method":"ping","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":16,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":17,"method":"no/such/method","params":{"a":1}}"#,
        r#"{"jsonrpc":"2.0","id":18,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}"#,
        r#"{"jsonrpc":"2.0","id":19,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":20,"method":"resources/read","params":{"uri":"file:///x"}}"#,
        r#"{"jsonrpc":"2.0","id":21,"method":"resources/read","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":22,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[]}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":3}"#,
        r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":9,"error":{"code":-1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":9,"error":"what"}"#,
    ];

    #[test]
    fn rmcp_and_the_schema_shapes_give_the_same_verdicts() {
        let (mut rmcp, mut spec) = (Gate::new(), mcp_input::Gate::<SpecReader>::new());
        for line in READER_LINES {
            assert_eq!(rmcp.inbound_line(line), spec.inbound_line(line), "{line}");
        }
        let answered =
            |line: &str| matches!(Gate::new().inbound_line(line), Verdict::Answer(v) if v["error"]["code"] == -32602);
        assert!(answered(READER_LINES[0]) && answered(READER_LINES[1]) && answered(READER_LINES[2]));
    }

    /// The gate's cost per tools/call (one line in, one response out); run with
    /// `cargo test --release -p protomcp-harness --lib gate_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn gate_cost() {
        let call = r#"{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello there"}}}"#;
        let out = r#"{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello there"}],"isError":false}}"#;
        let mut g = Gate::new();
        let n = 100_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            assert_eq!(g.inbound_line(call), Verdict::Pass);
            g.outbound_line(out);
        }
        eprintln!("gate: {:?} per tools/call (in + out)", t.elapsed() / n);
    }

    #[test]
    fn http_sessions_have_their_own_ids() {
        let gates = Gates::default();
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(gates.check("a", call), (Verdict::Pass, Some(json!(2))));
        assert_eq!(gates.check("b", call), (Verdict::Pass, Some(json!(2))), "BR-HTTP-17");
        let (Verdict::Answer(v), None) = gates.check("a", call) else { panic!() };
        assert_eq!(v["error"]["code"], -32600);
        gates.done("a", &json!(2));
        assert_eq!(gates.check("a", call), (Verdict::Pass, Some(json!(2))));
        let (Verdict::Answer(v), None) = gates.check("a", b"{nope") else { panic!() };
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (Value::Null, json!(-32700)));
        assert_eq!(
            gates.check("a", br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            (Verdict::Pass, None)
        );
        gates.remove("a");
        assert_eq!(gates.check("a", call), (Verdict::Pass, Some(json!(2))));
    }

    #[test]
    fn a_body_parsed_before_gets_the_verdict_and_id_of_its_bytes() {
        let (bytes, parsed) = (Gates::default(), Gates::default());
        let mut lines: Vec<&str> = READER_LINES.to_vec();
        // The same ids again: now requests in flight (BR-MCP-20).
        lines.extend_from_slice(READER_LINES);
        lines.extend([r#"[1]"#, r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#, r#"7"#]);
        for line in lines {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(parsed.check_parsed("s", &v), bytes.check("s", line.as_bytes()), "{line}");
        }
    }
}
