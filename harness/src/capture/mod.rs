//! `protomcp-conform capture`: a real session between a host, a bridge and a tool process,
//! recorded and written as two scenarios that replay it against each side.
//!
//! The capture interposes on both channels of the bridge:
//!
//! - the **tool process's socket**: the bridge command names the tool as `{tool}`, a launcher
//!   ([`launcher`]) that the bridge starts in its place. The launcher tells the capture the
//!   bridge's `PROTOMCP_SOCKET`, gets a socket of the capture's own, and `exec`s the real tool
//!   command with that socket (so the tool process is still the bridge's child, same pid). The
//!   capture accepts the tool process's connection, connects onward to the bridge's socket and
//!   relays every byte both ways, decoding a copy ([`run`]);
//! - over **stdio**, the host's stdin and stdout: the capture is the host's bridge command, starts
//!   the real bridge with piped stdin/stdout and relays each line both ways (its stderr passes
//!   through).
//!
//! Everything is recorded with its time in the transcript line format of
//! [`crate::transcript`] (the convention of the bridge's `--trace`: the bridge is the testee), one
//! item per line after the seconds since the start and the channel ([`Recording::render`],
//! [`Recording::parse`]). [`scenario`] turns a session into the scenario files (sans-IO).

pub mod launcher;
pub mod run;
pub mod scenario;

use std::time::Duration;

use serde_json::Value;

use crate::transcript::{Item, Normalizer, read::parse_line};

/// Environment variable (set on the bridge, inherited by the launcher) naming the capture's
/// control socket.
pub const ENV_CAPTURE: &str = "PROTOMCP_CONFORM_CAPTURE";
/// File name of the launcher (a symbolic link to this binary), which `src/main.rs` dispatches on.
pub const LAUNCHER_NAME: &str = "protomcp-conform-capture-tool";
/// The placeholder of the bridge command that becomes the launcher's path.
pub const TOOL_PLACEHOLDER: &str = "{tool}";
/// First line of a capture file.
pub const MAGIC: &str = "# protomcp-conform capture 1";
/// How many items a session keeps for the scenarios (the capture file has them all).
pub const MAX_EVENTS: usize = 20_000;

/// What went wrong with a capture, its file or its scenarios.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(
        "the bridge command names no `{TOOL_PLACEHOLDER}`: write it where the bridge takes its tool file or command (e.g. `pmcp run {TOOL_PLACEHOLDER}`, `protomcp-conform bridge -- {TOOL_PLACEHOLDER}`)"
    )]
    NoToolPlaceholder,
    #[error("{0} is empty")]
    EmptyCommand(&'static str),
    #[error("capture file line {line}: {message}")]
    Parse { line: usize, message: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl CaptureError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> CaptureError {
        CaptureError::Io { what: what.into(), source }
    }
}

/// Which channel an item belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Chan {
    /// The host's stdin/stdout.
    Host,
    /// The `n`-th connection of a tool process (from 1).
    Tool(u32),
    /// The bridge process itself (its exit).
    Bridge,
}

impl Chan {
    fn name(self) -> String {
        match self {
            Chan::Host => "host".into(),
            Chan::Tool(n) => format!("tp{n}"),
            Chan::Bridge => "bridge".into(),
        }
    }

    fn parse(s: &str) -> Option<Chan> {
        match s {
            "host" => Some(Chan::Host),
            "bridge" => Some(Chan::Bridge),
            _ => s.strip_prefix("tp").and_then(|n| n.parse().ok()).filter(|&n| n > 0).map(Chan::Tool),
        }
    }
}

/// Seconds with up to six decimals, exactly.
fn parse_time(s: &str) -> Option<Duration> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    if frac.is_empty() || frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: u32 = format!("{frac:0<6}").parse().ok()?;
    Some(Duration::from_secs(secs.parse().ok()?) + Duration::from_micros(micros.into()))
}

/// One recorded item; `at` in whole microseconds (as the capture file keeps it).
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// Since the capture started.
    pub at: Duration,
    pub chan: Chan,
    pub item: Item,
}

/// A recorded session: the commands, the paths that differ from run to run, and the items.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// The bridge command as given, with `{tool}`.
    pub bridge: Vec<String>,
    /// The tool process's command.
    pub tool: Vec<String>,
    /// Paths that belong to this capture only (its temp dir, the sockets): in what the peer
    /// sends they are matched as "any path".
    pub paths: Vec<String>,
    pub events: Vec<Recorded>,
    /// Items that were not kept past [`MAX_EVENTS`].
    pub dropped: u64,
}

fn header(key: &str, v: &Value) -> String {
    format!("# {key}: {}\n", serde_json::to_string(v).unwrap_or_default())
}

impl Recording {
    /// The header lines of a capture file.
    pub fn render_header(&self) -> String {
        let mut s = format!("{MAGIC}\n");
        s.push_str(&header("bridge", &Value::from(self.bridge.clone())));
        s.push_str(&header("tool", &Value::from(self.tool.clone())));
        for p in &self.paths {
            s.push_str(&header("path", &Value::String(p.clone())));
        }
        s
    }

    /// One item as one line of a capture file.
    pub fn render_event(e: &Recorded) -> String {
        let line = Normalizer::verbatim().line(&e.item);
        format!("{:>6}.{:06} {:<6} {line}\n", e.at.as_secs(), e.at.subsec_micros(), e.chan.name())
    }

    /// The whole capture file.
    pub fn render(&self) -> String {
        let mut s = self.render_header();
        for e in &self.events {
            s.push_str(&Self::render_event(e));
        }
        if self.dropped > 0 {
            s.push_str(&header("dropped", &Value::from(self.dropped)));
        }
        s
    }

    /// Reads a capture file back.
    pub fn parse(text: &str) -> Result<Recording, CaptureError> {
        let mut s = Recording::default();
        let mut lines = text.lines().enumerate();
        let err = |line: usize, message: String| CaptureError::Parse { line: line + 1, message };
        match lines.next() {
            Some((_, l)) if l.trim_end() == MAGIC => {}
            _ => return Err(err(0, format!("not a capture file: the first line is not `{MAGIC}`"))),
        }
        for (i, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let (key, json) = rest.split_once(": ").ok_or_else(|| err(i, "a header line without `: `".into()))?;
                let v: Value = serde_json::from_str(json).map_err(|e| err(i, format!("header `{key}`: {e}")))?;
                let strings = |v: &Value| -> Result<Vec<String>, CaptureError> {
                    v.as_array()
                        .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>())
                        .ok_or_else(|| err(i, format!("header `{key}`: not a list of strings")))
                };
                match key {
                    "bridge" => s.bridge = strings(&v)?,
                    "tool" => s.tool = strings(&v)?,
                    "path" => {
                        s.paths.push(v.as_str().ok_or_else(|| err(i, "header `path`: not a string".into()))?.into())
                    }
                    "dropped" => s.dropped = v.as_u64().unwrap_or(0),
                    _ => {}
                }
                continue;
            }
            let rest = line.trim_start();
            let (at, rest) = rest.split_once(' ').ok_or_else(|| err(i, "no time".into()))?;
            let at = parse_time(at).ok_or_else(|| err(i, format!("time {at:?}: seconds with six decimals")))?;
            let (chan, rest) = rest.trim_start().split_once(' ').ok_or_else(|| err(i, "no channel".into()))?;
            let chan = Chan::parse(chan).ok_or_else(|| err(i, format!("channel {chan:?}: host, bridge or tpN")))?;
            let item = parse_line(rest.trim_start()).map_err(|e| err(i, e.to_string()))?;
            s.events.push(Recorded { at, chan, item });
        }
        if s.bridge.is_empty() || s.tool.is_empty() {
            return Err(err(0, "the header names no bridge or no tool command".into()));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Dir;
    use serde_json::json;

    #[test]
    fn a_capture_file_reads_back_to_the_same_session() {
        let s = Recording {
            bridge: vec!["pmcp".into(), "run".into(), "{tool}".into()],
            tool: vec!["python3".into(), "testee.py".into()],
            paths: vec!["/tmp/x".into()],
            events: vec![
                Recorded {
                    at: Duration::from_millis(12),
                    chan: Chan::Host,
                    item: Item::Host {
                        dir: Dir::ToTestee,
                        message: Some(json!({"id": 1, "method": "ping"})),
                        raw: None,
                    },
                },
                Recorded { at: Duration::from_millis(20), chan: Chan::Tool(1), item: Item::Connected },
                Recorded {
                    at: Duration::from_millis(1500),
                    chan: Chan::Tool(1),
                    item: Item::Frame {
                        dir: Dir::FromTestee,
                        tree: Some(json!({"request_id": "a b", "list_tools": {}})),
                        hex: None,
                        note: None,
                    },
                },
                Recorded { at: Duration::from_secs(2), chan: Chan::Tool(1), item: Item::Eof },
                Recorded {
                    at: Duration::from_secs(3),
                    chan: Chan::Bridge,
                    item: Item::Exit { status: "exit status 0".into() },
                },
            ],
            dropped: 0,
        };
        let text = s.render();
        assert!(text.contains("     1.500000 tp1    testee→harness {"), "{text}");
        assert_eq!(Recording::parse(&text).unwrap(), s);
    }

    #[test]
    fn a_file_that_is_no_capture_is_refused_with_its_line() {
        let e = Recording::parse("hello\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("not a capture file"), "{e}");
        let text =
            format!("{MAGIC}\n# bridge: [\"b\",\"{{tool}}\"]\n# tool: [\"t\"]\n     0.100000 tp0    -- connected\n");
        let e = Recording::parse(&text).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("channel"), "{e}");
        let text = format!("{MAGIC}\n# bridge: [\"b\"]\n# tool: [\"t\"]\n     0.100000 host   what\n");
        assert!(Recording::parse(&text).unwrap_err().to_string().contains("line 4"));
    }
}
