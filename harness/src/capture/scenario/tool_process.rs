//! The tool-process scenario of a capture: the harness plays the bridge.

use super::steps::*;
use super::{
    CaptureError, Chan, Dir, Duration, HOST_EOF, Item, Map, Party, Recording, SIDEBAND_HEADER, SIDEBAND_PAYLOAD,
    StreamAssembler, StreamLimits, Value, Vars,
};

/// The tool-process scenario: the harness plays the bridge against the first tool process's
/// connection.
pub fn tool_process(s: &Recording, id: &str) -> Result<String, CaptureError> {
    let conns: Vec<u32> = s
        .events
        .iter()
        .filter_map(|e| match (e.chan, &e.item) {
            (Chan::Tool(n), Item::Connected) => Some(n),
            _ => None,
        })
        .collect();
    let Some(&first) = conns.first() else {
        return Err(CaptureError::Unsupported(
            "no tool process connected during the capture, so there is no tool-process scenario".into(),
        ));
    };
    let Gathered { events, frames, handshake, call } = tool_events(s, first)?;
    if frames == 0 {
        return Err(CaptureError::Unsupported("the tool process's connection carried no frame".into()));
    }
    let mut vars = Vars::new(&s.paths);
    let steps = write_steps(&events, &mut vars);
    let mut reqs = vec!["TP-CONCUR-01"];
    if handshake {
        reqs.push("TP-HANDSHAKE-02");
    }
    if call {
        reqs.push("TP-CALL-01");
    }
    let more = if conns.len() > 1 {
        format!(" The session had {} tool-process connections; this scenario replays the first.", conns.len())
    } else {
        String::new()
    };
    let notes = format!(
        "Captured from the bridge `{}` with the tool process `{}`. The harness plays the bridge: it sends what the bridge sent and expects what the tool process answered (fields a pattern leaves out are ignored; ids the tool process chose are captured). A failure means the tool process answered differently from the capture; judge it against the cited requirements.{more} Replay: protomcp-conform --testee '{}' --scenarios THIS_FILE",
        command(&s.bridge),
        command(&s.tool),
        command(&s.tool),
    );
    Ok(file(
        &format!("{id}.tool-process"),
        "The tool process answers the captured session as it did when it was captured",
        &reqs,
        "tool-process",
        &[],
        &notes,
        &steps,
    ))
}

/// What the events of the first tool-process connection add up to.
struct Gathered {
    events: Vec<(Duration, Ev)>,
    frames: usize,
    handshake: bool,
    call: bool,
}

/// The events of tool-process connection `first` (and the bridge's), as steps to write.
fn tool_events(s: &Recording, first: u32) -> Result<Gathered, CaptureError> {
    let mut events: Vec<(Duration, Ev)> = Vec::new();
    let mut frames = 0usize;
    let (mut handshake, mut call) = (false, false);
    let host_eof = s
        .events
        .iter()
        .find(|e| matches!(&e.item, Item::Host { dir: Dir::ToTestee, raw: Some(r), .. } if r == HOST_EOF))
        .map(|e| e.at);
    let (mut bridge_closed, mut tool_closed) = (false, false);
    let mut streams = StreamAssembler::new(Party::ToolProcess, StreamLimits::default());
    for e in s.events.iter().filter(|e| e.chan == Chan::Tool(first) || e.chan == Chan::Bridge) {
        if let Some(c) = ended_by_capture(e) {
            events.push((e.at, c));
            break;
        }
        let ev = match &e.item {
            Item::Frame { dir: Dir::FromTestee, tree, hex, .. } => {
                let a = tree.as_ref().and_then(arm);
                handshake |= a == Some("list_tools");
                call |= a == Some("call_tool");
                frames += 1;
                Ev::Act(Action::Frame { tree: tree.clone(), hex: hex.clone() })
            }
            Item::Frame { dir: Dir::ToTestee, note: Some(n), .. } if n == SIDEBAND_HEADER => continue,
            Item::Frame { dir: Dir::ToTestee, tree: Some(t), note: Some(n), .. } if n == SIDEBAND_PAYLOAD => {
                // The runner turns a sideband transfer into the equivalent result (TP-STREAM-01):
                // expect that, whatever form it takes on replay.
                let mut p = Map::new();
                for k in ["request_id", "call_result"] {
                    if let Some(v) = t.get(k) {
                        p.insert(k.into(), v.clone());
                    }
                }
                frames += 1;
                Ev::Peer(Peer::Frame(Value::Object(p)))
            }
            Item::Frame { dir: Dir::ToTestee, tree: Some(t), hex, .. } => {
                frames += 1;
                if !matches!(arm(t), Some("stream_header" | "stream_chunk")) {
                    Ev::Peer(Peer::Frame(t.clone()))
                } else {
                    // The runner reassembles a stream into the equivalent result (TP-STREAM-01)
                    // and shows the steps no chunk: expect that result at the final chunk.
                    match stream_result(&mut streams, t, hex.as_deref())? {
                        Some(p) => Ev::Peer(Peer::Frame(p)),
                        None => continue,
                    }
                }
            }
            Item::Frame { dir: Dir::ToTestee, tree: None, .. } | Item::Malformed { .. } => {
                return Err(CaptureError::Unsupported(
                    "the tool process sent a frame that does not decode: a replay of it would only show the same error; see the capture file".into(),
                ));
            }
            Item::Eof if tool_closed => continue,
            Item::Eof => {
                bridge_closed = true;
                Ev::Act(Action::Close { write_only: true })
            }
            Item::Shutdown { .. } => {
                tool_closed = true;
                if !bridge_closed && host_eof.is_some_and(|t| e.at >= t) {
                    // The bridge ends its tool process when the host is gone (by a signal,
                    // which the capture does not see): no part of the tool process's behaviour.
                    events.push((
                        e.at,
                        Ev::Comment(
                            "the connection ended here, after the host closed stdin: the bridge ended the tool process"
                                .into(),
                        ),
                    ));
                    break;
                }
                Ev::Peer(Peer::Closed)
            }
            Item::StreamError { error } => Ev::Comment(format!("the connection broke here: {error}")),
            _ => continue,
        };
        events.push((e.at, ev));
    }
    Ok(Gathered { events, frames, handshake, call })
}
