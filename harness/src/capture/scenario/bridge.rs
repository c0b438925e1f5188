//! The bridge scenario of a capture: the harness plays the host and the tool process.

use super::steps::*;
use super::{
    CaptureError, Chan, Dir, Duration, HOST_EOF, HashSet, Item, Recording, SIDEBAND_PAYLOAD, TOOL_PLACEHOLDER,
    UNSOLICITED, Value, Vars,
};

/// The bridge command for a replay: `{tool}` becomes the mock.
pub fn replay_bridge(bridge: &[String]) -> Vec<String> {
    bridge.iter().map(|a| a.replace(TOOL_PLACEHOLDER, "{mock}")).collect()
}

/// The bridge scenario: the harness plays the host and the tool process(es) against the bridge.
pub fn bridge(s: &Recording, id: &str) -> Result<String, CaptureError> {
    // The end of stdin alone is no session (an HTTP bridge, whose host side is not interposed).
    let host_message = |e: &&crate::capture::Recorded| match &e.item {
        Item::Host { raw: Some(r), .. } => r != HOST_EOF,
        Item::Host { .. } => true,
        _ => false,
    };
    if !s.events.iter().any(|e| e.chan == Chan::Host && host_message(&e)) {
        return Err(CaptureError::Unsupported(
            "nothing crossed the host's stdin or stdout, so there is no bridge scenario".into(),
        ));
    }
    let Gathered { events, handshake, call, manual } = bridge_events(s)?;
    let mut vars = Vars::new(&s.paths);
    let steps = write_steps(&events, &mut vars);
    let mut reqs = vec!["BR-MCP-01"];
    if handshake {
        reqs.push("BR-HANDSHAKE-01");
    }
    if call {
        reqs.push("BR-CALL-01");
    }
    let mut extra = vec!["transports: [stdio]".to_owned()];
    if manual {
        extra.push("host_requests: manual".into());
    }
    let notes = format!(
        "Captured from the bridge `{}` with the tool process `{}`. The harness plays the host (what the host sent) and the tool process (what it sent, through the mock), and expects what the bridge sent on either side (fields a pattern leaves out are ignored; ids the bridge chose are captured; list_changed notifications are not judged). A failure means the bridge behaved differently from the capture; judge it against the cited requirements. Replay: protomcp-conform --bridge '{}' --scenarios THIS_FILE",
        command(&s.bridge),
        command(&s.tool),
        command(&replay_bridge(&s.bridge)),
    );
    Ok(file(
        &format!("{id}.bridge"),
        "The bridge carries the captured session as it did when it was captured",
        &reqs,
        "bridge",
        &extra,
        &notes,
        &steps,
    ))
}

/// What the events of a bridge session add up to.
struct Gathered {
    events: Vec<(Duration, Ev)>,
    handshake: bool,
    call: bool,
    manual: bool,
}

/// The events of the whole session, as the steps of the host and the tool process to write.
fn bridge_events(s: &Recording) -> Result<Gathered, CaptureError> {
    let mut events: Vec<(Duration, Ev)> = Vec::new();
    let mut open: Option<u32> = None;
    let mut bridge_closed: HashSet<u32> = HashSet::new();
    let mut tool_closed: HashSet<u32> = HashSet::new();
    let mut host_closed = false;
    let (mut handshake, mut call, mut manual) = (false, false, false);
    for e in &s.events {
        if let Some(c) = ended_by_capture(e) {
            events.push((e.at, c));
            break;
        }
        one_tool_process(&mut open, e)?;
        let ev = match (e.chan, &e.item) {
            (Chan::Host, Item::Host { dir: Dir::ToTestee, message: Some(m), .. }) => {
                Ev::Act(Action::HostSend(m.clone()))
            }
            (Chan::Host, Item::Host { dir: Dir::ToTestee, raw: Some(r), .. }) if r == HOST_EOF => {
                host_closed = true;
                Ev::Act(Action::HostClose)
            }
            (Chan::Host, Item::Host { dir: Dir::ToTestee, raw: Some(r), .. }) => Ev::Act(Action::HostLine(r.clone())),
            (Chan::Host, Item::Host { dir: Dir::FromTestee, message: Some(m), .. }) => {
                let method = m.get("method").and_then(Value::as_str);
                if method.is_some_and(|x| UNSOLICITED.contains(&x)) {
                    continue;
                }
                if method == Some("tools/call") || m.pointer("/result/content").is_some() {
                    call = true;
                }
                manual |= method.is_some() && m.get("id").is_some();
                Ev::Peer(Peer::Message(m.clone()))
            }
            (Chan::Host, Item::Host { dir: Dir::FromTestee, raw: Some(r), .. }) => {
                Ev::Comment(format!("the bridge wrote a line that is not JSON here: {r}"))
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::FromTestee, tree: Some(t), .. }) => {
                let a = arm(t);
                handshake |= a == Some("list_tools");
                call |= a == Some("call_tool");
                Ev::Peer(Peer::Frame(t.clone()))
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::FromTestee, tree: None, .. })
            | (Chan::Tool(_), Item::Malformed { .. }) => {
                return Err(CaptureError::Unsupported(
                    "the bridge sent the tool process a frame that does not decode: a replay of it would only show the same error; see the capture file".into(),
                ));
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::ToTestee, hex: Some(h), note: Some(n), .. })
                if n == SIDEBAND_PAYLOAD =>
            {
                Ev::Act(Action::Raw(h.clone()))
            }
            (Chan::Tool(_), Item::Frame { dir: Dir::ToTestee, tree, hex, .. }) => {
                Ev::Act(Action::Frame { tree: tree.clone(), hex: hex.clone() })
            }
            (Chan::Tool(n), Item::Eof) => {
                if tool_closed.contains(&n) {
                    continue;
                }
                bridge_closed.insert(n);
                Ev::Peer(Peer::Closed)
            }
            (Chan::Tool(n), Item::Shutdown { .. }) => {
                open = None;
                tool_closed.insert(n);
                if bridge_closed.contains(&n) {
                    continue;
                }
                // After the host closed stdin the bridge ends its tool process (the mock, on
                // replay): the connection's end is the bridge's doing. Before, the tool process
                // went away by itself: the harness's tool side closes.
                if host_closed { Ev::Peer(Peer::Closed) } else { Ev::Act(Action::Close { write_only: false }) }
            }
            (Chan::Tool(n), Item::StreamError { error }) => {
                open = None;
                Ev::Comment(format!("tool process connection {n} broke here: {error}"))
            }
            (Chan::Bridge, Item::Exit { status }) => match exit_code(status) {
                Some(code) if host_closed || code != 0 => Ev::Peer(Peer::Exit(code)),
                _ => Ev::Comment(format!("the bridge ended here: {status}")),
            },
            _ => continue,
        };
        events.push((e.at, ev));
    }
    Ok(Gathered { events, handshake, call, manual })
}

/// Tracks the open tool-process connection in `open`: a bridge scenario plays one at a time.
fn one_tool_process(open: &mut Option<u32>, e: &crate::capture::Recorded) -> Result<(), CaptureError> {
    if let Chan::Tool(n) = e.chan {
        match (&e.item, *open) {
            (Item::Connected, Some(o)) if o != n => {
                return Err(CaptureError::Unsupported(format!(
                    "tool process connection {n} began while connection {o} was open: a bridge scenario plays one tool process at a time"
                )));
            }
            (Item::Connected, _) => *open = Some(n),
            (_, Some(o)) if o != n => {
                return Err(CaptureError::Unsupported(format!(
                    "tool process connections {o} and {n} were open at once: a bridge scenario plays one tool process at a time"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}
