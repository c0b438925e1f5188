//! `--trace FILE`: the decoded traffic of both sides in the transcript line format
//! ([`crate::transcript`]), verbatim (real request ids, full strings), the bridge standing where
//! a bridge scenario's transcript has the testee:
//!
//! - `host→bridge …` / `bridge→host …`: MCP messages (`line: …` for a host line that is not JSON);
//! - `testee→harness …`: a frame the bridge sent to the tool process;
//! - `harness→testee …`: a frame the tool process sent (a sideband payload as the summary the
//!   runner shows, after its `sideband header` frame);
//! - `-- connected`: a tool process connected; `harness→testee shutdown(reason)`: its connection
//!   ended.
//!
//! Each item is one `write` of one whole line to an unbuffered file, in the order the bridge saw
//! them: nothing is held in memory, and a crash loses at most the item being written.
//! [`crate::transcript::read`] reads a trace back; [`crate::transcript::render`] normalizes it.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use protomcp_proto::pb::Envelope;
use serde_json::Value;

use crate::transcript::{Dir, Item, Normalizer};

/// An open trace file.
#[derive(Debug)]
pub struct Trace {
    file: Mutex<File>,
}

impl Trace {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> std::io::Result<Trace> {
        Ok(Trace { file: Mutex::new(File::create(path)?) })
    }

    /// Appends one item as one line. Write errors are ignored: the trace never stops the bridge.
    pub fn item(&self, item: &Item) {
        let mut line = Normalizer::verbatim().line(item);
        line.push('\n');
        let _ = self.file.lock().unwrap_or_else(|e| e.into_inner()).write_all(line.as_bytes());
    }

    /// A frame between the bridge and the tool process (`from_tp`: the tool process sent it).
    pub fn frame(&self, from_tp: bool, envelope: &Envelope) {
        let tree = protomcp_proto::dynamic::from_envelope(envelope).ok();
        let hex = match &tree {
            Some(_) => None,
            None => Some(crate::transcript::hex(&prost::Message::encode_to_vec(envelope))),
        };
        self.item(&Item::Frame { dir: tp_dir(from_tp), tree, hex, note: None });
    }

    /// An MCP message (`from_host`: the host sent it).
    pub fn host(&self, from_host: bool, message: &Value) {
        self.item(&Item::Host { dir: host_dir(from_host), message: Some(message.clone()), raw: None });
    }

    /// A host line that is not JSON.
    pub fn host_line(&self, from_host: bool, line: &str) {
        self.item(&Item::Host { dir: host_dir(from_host), message: None, raw: Some(line.to_owned()) });
    }
}

/// The transcript direction of a tool-process frame: the bridge is the testee.
fn tp_dir(from_tp: bool) -> Dir {
    if from_tp { Dir::ToTestee } else { Dir::FromTestee }
}

/// The transcript direction of a host message (as [`Item::Host`] has it).
fn host_dir(from_host: bool) -> Dir {
    if from_host { Dir::ToTestee } else { Dir::FromTestee }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protomcp_proto::EnvelopeExt;
    use serde_json::json;

    #[test]
    fn every_line_is_written_at_once_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let t = Trace::create(&path).unwrap();
        t.host(true, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        t.frame(false, &protomcp_proto::envelopes::list_tools().with_rid("req-7"));
        t.item(&Item::Connected);
        // Written already, before the trace is dropped.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "host→bridge {\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"tools/list\"}\n\
             testee→harness {\"list_tools\":{},\"request_id\":\"req-7\"}\n-- connected\n"
        );
        t.host_line(true, "not json");
        let items = crate::transcript::read(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[3], Item::Host { dir: Dir::ToTestee, message: None, raw: Some("not json".into()) });
    }
}
