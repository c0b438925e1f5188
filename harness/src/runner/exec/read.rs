//! Reading the tool side: the next frame as a tree (sideband and streams folded into their
//! result), list pulls answered on the way, transcript items deferred while polling.

use super::{
    Arm, Conn, Dir, Duration, Exec, Frame, Got, Incoming, Instant, Item, Party, StepError, StreamEvent, StreamExt,
    Value, Violation, arm_of, frame_value, from, hex, json, record, sideband_value, stream_value,
};
use protomcp_proto::violation::Rule;

impl Exec<'_> {
    /// The next tree (not in `ignore`) until `deadline`; sideband transfers and completed streams
    /// arrive as their equivalent result.
    pub(super) async fn next(&mut self, deadline: Instant, ignore: &[Arm]) -> Result<Got, StepError> {
        self.flush_held().await?;
        while let Some(got) = self.stash.pop_front() {
            self.flush_deferred();
            if got.is_err()
                && let Some((step, _)) = &mut self.violated
            {
                // Read while polling during an earlier step: it fails this one.
                *step = self.current;
            }
            match got? {
                Got::Value(v) if arm_of(&v).and_then(Arm::from_name).is_some_and(|a| ignore.contains(&a)) => {}
                got => return Ok(got),
            }
        }
        loop {
            // A peer that sends without end ends the step here, not at its deadline.
            if let Some(f) = self.flood() {
                return Err(StepError::Fail(f));
            }
            let conn = self.conn.as_mut().ok_or_else(|| StepError::Error("no connection".into()))?;
            let rx = conn.rx.as_mut().ok_or_else(|| StepError::Error("the connection is closed".into()))?;
            let item = match tokio::time::timeout_at(deadline, rx.next()).await {
                Err(_) => return Ok(Got::Timeout),
                Ok(None) => {
                    record(&mut self.deferred, &mut self.transcript, self.deferring, Item::Eof);
                    return Ok(Got::Eof);
                }
                Ok(Some(Err(crate::io::CodecError::Io(e))))
                    if self.reset_is_close && e.kind() == std::io::ErrorKind::ConnectionReset =>
                {
                    record(&mut self.deferred, &mut self.transcript, self.deferring, Item::Eof);
                    return Ok(Got::Eof);
                }
                Ok(Some(Err(e))) => {
                    record(
                        &mut self.deferred,
                        &mut self.transcript,
                        self.deferring,
                        Item::StreamError { error: e.to_string() },
                    );
                    let broke = match &e {
                        crate::io::CodecError::Frame(f) => Some(rx.decoder().frames().violation_of(f)),
                        _ => None,
                    };
                    return Err(match broke {
                        Some(v) => self.violation(v),
                        None => StepError::Fail(format!("the connection broke: {e}")),
                    });
                }
                Ok(Some(Ok(i))) => i,
            };
            let Some(v) = self.tree_of(item)? else { continue };
            let ignored = arm_of(&v).and_then(Arm::from_name).is_some_and(|a| ignore.contains(&a));
            let pulled = self.lists.as_ref().and_then(|l| l.answer(&v));
            let note = if pulled.is_some() {
                Some("a list pull: answered by the harness".to_owned())
            } else {
                ignored.then(|| "ignored".to_owned())
            };
            let item = Item::Frame { dir: Dir::FromTestee, tree: Some(v.clone()), hex: None, note };
            if pulled.is_some() {
                self.transcript.push(item);
            } else {
                record(&mut self.deferred, &mut self.transcript, self.deferring, item);
            }
            if let Some(mut reply) = pulled {
                reply["request_id"] = v.get("request_id").cloned().unwrap_or(json!(""));
                self.send_value(reply).await?;
                continue;
            }
            if !ignored {
                return Ok(Got::Value(v));
            }
        }
    }

    /// The tree a frame read from the tool process stands for: a sideband transfer or a
    /// completed stream as its result; `None` for a frame that only announces what follows (a
    /// RawHeader, a stream's chunk), which is recorded here.
    fn tree_of(&mut self, item: Incoming) -> Result<Option<Value>, StepError> {
        Ok(Some(match item {
            Incoming::Malformed(e) => {
                let body = match &e {
                    protomcp_proto::frame::FrameError::Undecodable { body, .. } => Some(hex(body)),
                    _ => None,
                };
                record(
                    &mut self.deferred,
                    &mut self.transcript,
                    self.deferring,
                    Item::Malformed { error: e.to_string(), hex: body },
                );
                return Err(self.violation(e.violation()));
            }
            Incoming::Frame(Frame::Sideband(sb)) => {
                let rid = self.conn_mut()?.raw_header_rid.take().unwrap_or_default();
                if let Err(e @ protomcp_proto::sideband::SidebandError::Short { .. }) = &sb.payload {
                    // Named when the frame after it arrives, not at the step's deadline.
                    let detail = format!("the sideband payload at stream offset {} (call {rid:?}): {e}", sb.offset);
                    return Err(self.violation(Violation::new(Rule::SidebandSize, self.peer(), detail)));
                }
                sideband_value(&sb, &rid)
            }
            Incoming::Frame(Frame::Envelope(d)) => {
                let tree = frame_value(&d).map_err(|e| StepError::Error(e.to_string()))?;
                let arm = arm_of(&tree);
                if self.peer() == Party::Bridge
                    && let Some(rule) = match arm {
                        Some("raw_header") => Some(Rule::SidebandFromBridge),
                        Some("stream_header" | "stream_chunk") => Some(Rule::StreamFromBridge),
                        _ => None,
                    }
                {
                    record(
                        &mut self.deferred,
                        &mut self.transcript,
                        self.deferring,
                        from(tree, "only a tool process sends this"),
                    );
                    let detail = format!("the bridge sent a {} frame at stream offset {}", arm.unwrap_or(""), d.offset);
                    return Err(self.violation(Violation::new(rule, Party::Bridge, detail)));
                }
                if arm == Some("raw_header") {
                    // The payload follows as a Sideband item, which stands for the result.
                    record(&mut self.deferred, &mut self.transcript, self.deferring, from(tree, "sideband header"));
                    self.conn_mut()?.raw_header_rid = Some(d.envelope.request_id.clone());
                    return Ok(None);
                }
                match self.conn_mut()?.streams.handle(&d.envelope) {
                    None => tree,
                    Some(ev @ StreamEvent::Complete { .. }) => {
                        record(
                            &mut self.deferred,
                            &mut self.transcript,
                            self.deferring,
                            from(tree.clone(), "stream end"),
                        );
                        if let StreamEvent::Complete { violations, .. } = &ev
                            && let Some(v) = violations.first()
                        {
                            return Err(self.violation(v.clone()));
                        }
                        stream_value(&ev).unwrap_or(tree)
                    }
                    Some(StreamEvent::Progress { .. }) => {
                        record(&mut self.deferred, &mut self.transcript, self.deferring, from(tree, "stream"));
                        return Ok(None);
                    }
                    Some(StreamEvent::Failed { rid, error, violations }) => {
                        record(
                            &mut self.deferred,
                            &mut self.transcript,
                            self.deferring,
                            from(tree.clone(), "stream failed"),
                        );
                        // Chunks that cannot add up to their total_size are named when they
                        // arrive; a failure without a broken rule (over the harness's own
                        // limits) is the stream's result.
                        if let Some(v) = violations.into_iter().next() {
                            return Err(self.violation(v));
                        }
                        json!({"request_id": rid, "via": "stream", "stream": {"error": error.to_string()}})
                    }
                    // A chunk without an open stream (one after the final chunk, or under a
                    // rid that never had a header) breaks TP-STREAM-02: it is a frame the
                    // steps see, so `expect` and `expect_nothing` catch it.
                    Some(StreamEvent::Orphan { violation, .. }) => {
                        let mut tree = tree;
                        if let Some(obj) = tree.as_object_mut() {
                            obj.insert("stream".into(), json!({"orphan": violation.to_string()}));
                        }
                        tree
                    }
                }
            }
        }))
    }

    fn conn_mut(&mut self) -> Result<&mut Conn, StepError> {
        self.conn.as_mut().ok_or_else(|| StepError::Error("no connection".into()))
    }

    /// The next frame before `deadline`, or `None` when the connection ends (end of file, or it
    /// broke, as `expect_close` counts it); nothing within the time is a failure.
    pub(crate) async fn next_or_end(
        &mut self,
        deadline: Instant,
        within: Duration,
    ) -> Result<Option<Value>, StepError> {
        match self.next(deadline, &[]).await {
            Ok(Got::Value(v)) => Ok(Some(v)),
            Ok(Got::Eof) => Ok(None),
            Err(StepError::Fail(_)) => {
                self.forget_violation();
                Ok(None)
            }
            Ok(Got::Timeout) => Err(StepError::Fail(self.nothing_within(within))),
            Err(e) => Err(e),
        }
    }

    /// The next frame (not in `ignore`) if one arrives before `deadline`, `None` if none does;
    /// the connection ending is a failure (`expect … or_host` polls it beside the host side).
    pub(crate) async fn next_if_any(&mut self, deadline: Instant, ignore: &[Arm]) -> Result<Option<Value>, StepError> {
        match self.next(deadline, ignore).await? {
            Got::Value(v) => Ok(Some(v)),
            Got::Eof => Err(StepError::Fail(format!("{} closed the connection", self.party()))),
            Got::Timeout => Ok(None),
        }
    }

    pub(crate) async fn next_required(
        &mut self,
        deadline: Instant,
        within: Duration,
        ignore: &[Arm],
    ) -> Result<Value, StepError> {
        match self.next(deadline, ignore).await? {
            Got::Value(v) => Ok(v),
            Got::Eof => Err(StepError::Fail(format!("{} closed the connection", self.party()))),
            Got::Timeout => Err(StepError::Fail(self.nothing_within(within))),
        }
    }

    /// The failure of a read that timed out: `nothing arrived within …`, and what the peer left
    /// unfinished, when it began something (a sideband payload short of its RawHeader.size, a
    /// stream without its final chunk, a partial frame), so that a size that does not add up is
    /// named even when no later byte shows it.
    pub(crate) fn nothing_within(&self, within: Duration) -> String {
        let mut m = format!("nothing arrived within {within:?}");
        let Some(conn) = &self.conn else { return m };
        if let Some(rx) = &conn.rx
            && let Some(u) = rx.decoder().frames().unfinished(rx.read_buffer().len())
        {
            m.push_str(&format!("; {} sent no more: {u}", self.party()));
        }
        for (rid, have, total) in conn.streams.open() {
            let of = if total == 0 { String::new() } else { format!(" of the {total} its total_size announced") };
            m.push_str(&format!("; the stream of rid {rid:?} has {have} bytes{of} and no final chunk"));
        }
        m
    }

    pub(super) fn flush_deferred(&mut self) {
        for item in std::mem::take(&mut self.deferred) {
            self.transcript.push(item);
        }
    }

    /// Reads what the tool process has sent without waiting, so that list pulls the bridge makes
    /// on demand (BR-HANDSHAKE-09) are answered while host steps wait for the bridge; anything
    /// else is kept for the next step that reads. Does nothing before `tool_handshake` set
    /// [`Exec::lists`] or while a step's result is already kept.
    pub(crate) async fn poll_pulls(&mut self) {
        if self.lists.is_none() || !self.stash.is_empty() || self.conn.as_ref().is_none_or(|c| c.rx.is_none()) {
            return;
        }
        self.deferring = true;
        let got = self.next(Instant::now(), &[]).await;
        self.deferring = false;
        match got {
            // Chunks of a stream still open stay deferred: they belong to its end.
            Ok(Got::Timeout) => {}
            got => self.stash.push_back(got),
        }
    }
}
