//! Feeding the core and carrying out what it asks: every input goes through [`Bridge::drive`],
//! which then hands the core's Envelopes to the link (in order; a frame the link refuses fails
//! its request in the core) and its events to their addressees: answers to the host requests
//! waiting for them, notifications to sessions, reverse requests to a host, the end of a start
//! or reload to whoever waits for it. One timer task sleeps towards the core's next deadline.

use protomcp_proto::bridge_core::NoAnswer;
use protomcp_proto::fault::{self, Fault};
use protomcp_proto::frame::Sideband;
use protomcp_proto::pb::Envelope;

use super::error::{ReverseError, StartFailure};
use super::{
    Arc, Bridge, Core, Duration, HostError, HostSession, Instant, SessionId, Shared, Value, bcore, diag, oneshot,
};
use crate::link::Sink;
use bcore::Event;

impl Bridge {
    /// Runs `f` on the core (and the shell's state) with the current time, then carries out
    /// everything the core asks for.
    pub(super) fn drive<R>(&self, f: impl FnOnce(&mut Shared, Instant) -> R) -> R {
        let (r, events, sessions) = {
            let mut sh = self.shared.lock().unwrap();
            let r = f(&mut sh, Instant::now());
            // Envelopes first: a frame the link refuses fails its request, which may make more.
            while let Some(envelope) = sh.core.poll_transmit() {
                let Some(link) = sh.link.clone() else { continue };
                self.trace(false, &envelope);
                let rid = envelope.request_id.clone();
                if let Err(e) = link.send(envelope) {
                    sh.core.handle_send_failed(Instant::now(), &rid, e.to_string());
                }
            }
            let events: Vec<Event> = std::iter::from_fn(|| sh.core.poll_event()).collect();
            let next = sh.core.poll_timeout();
            if next.is_some_and(|t| sh.armed.is_none_or(|a| t < a)) {
                sh.armed = next;
                self.timer.notify_one();
            }
            // An answer goes to its waiter: only the other events need the sessions.
            let for_sessions = events.iter().any(|e| !matches!(e, Event::Answer { .. }));
            let sessions = if for_sessions { sh.sessions.values().cloned().collect() } else { Vec::new() };
            (r, self.take_waiters(&mut sh, events), sessions)
        };
        for (event, waiter) in events {
            self.deliver(event, waiter, &sessions);
        }
        r
    }

    /// Pairs each event with what waits for it, taken out of the shared state.
    fn take_waiters(&self, sh: &mut Shared, events: Vec<Event>) -> Vec<(Event, Waiter)> {
        events
            .into_iter()
            .map(|e| {
                let w = match &e {
                    Event::Answer { .. } if fault::on(Fault::BrConcurAnswerToNewestWaiter) => {
                        let newest = sh.waiters.keys().max().copied();
                        newest.and_then(|op| sh.waiters.remove(&op)).map(Waiter::Op)
                    }
                    Event::Answer { op, .. } => sh.waiters.remove(op).map(Waiter::Op),
                    Event::Served { generation } => match sh.starts.remove(generation) {
                        Some(tx) => Some(Waiter::Start(tx)),
                        None => sh.reload.take().map(Waiter::Start),
                    },
                    Event::StartFailed { generation, .. } => sh.starts.remove(generation).map(Waiter::Start),
                    Event::ReloadFailed { .. } => sh.reload.take().map(Waiter::Start),
                    _ => None,
                };
                (e, w.unwrap_or(Waiter::None))
            })
            .collect()
    }

    fn deliver(&self, event: Event, waiter: Waiter, sessions: &[Arc<dyn HostSession>]) {
        let session = |id: SessionId| sessions.iter().find(|s| s.id() == id).cloned();
        match (event, waiter) {
            (Event::Answer { result, .. }, Waiter::Op(tx)) => {
                let _ = tx.send(result);
            }
            (Event::Answer { .. }, _) => {}
            (Event::Progress { token, progress, total, message, .. }, _) if fault::on(Fault::BrProgressAllSessions) => {
                for s in sessions {
                    s.progress(token.clone(), progress, total, message.clone());
                }
            }
            (Event::Progress { session: id, token, progress, total, message }, _) => {
                if let Some(s) = session(id) {
                    s.progress(token, progress, total, message);
                }
            }
            (Event::Log { level, logger, data, call }, _) => {
                for s in sessions {
                    s.log(level, logger.clone(), data.clone(), call == Some(s.id()));
                }
            }
            (Event::ListChanged(kind), _) => {
                let reached = if fault::on(Fault::BrHttpListChangedOneSession) { 1 } else { sessions.len() };
                for s in sessions.iter().take(reached) {
                    s.list_changed(kind);
                }
            }
            (Event::ResourceUpdated(uri), _) => {
                for s in sessions {
                    s.resource_updated(&uri);
                }
            }
            (Event::Sample { session: id, rid, params }, _) => {
                let Some(s) = session(id) else {
                    return self.drive(|sh, _| sh.core.handle_sample_answer(&rid, Err(NoAnswer::SessionEnded)));
                };
                if fault::on(Fault::BrSecuritySamplingFannedOut) {
                    for other in sessions.iter().filter(|o| o.id() != id) {
                        let params = params.clone();
                        let asked = other.sample(params);
                        tokio::spawn(asked);
                    }
                }
                self.ask_host(rid, async move { s.sample(params).await }, Core::handle_sample_answer);
            }
            (Event::ListRoots { session: id, rid }, _) => {
                let Some(s) = session(id) else {
                    return self.drive(|sh, _| sh.core.handle_roots_answer(&rid, Err(NoAnswer::SessionEnded)));
                };
                self.ask_host(rid, async move { s.list_roots().await }, Core::handle_roots_answer);
            }
            (Event::Served { .. }, w) => {
                self.served.send_modify(|n| *n += 1);
                if let Waiter::Start(tx) = w {
                    let _ = tx.send(Ok(()));
                }
            }
            (Event::StartFailed { reason, .. } | Event::ReloadFailed { reason }, Waiter::Start(tx)) => {
                let _ = tx.send(Err(StartFailure::Handshake(reason)));
            }
            (Event::StartFailed { reason, .. } | Event::ReloadFailed { reason }, _) => diag(&reason),
            (Event::Diag(line), _) => diag(&line),
        }
    }

    /// Asks a host a reverse request without blocking the reader (the answer may take a while:
    /// a human at the host, BR-CONCUR-06). The core answers the tool process when the call
    /// timeout passes first; the task's own bound only keeps it from outliving that.
    fn ask_host(
        &self,
        rid: String,
        ask: impl Future<Output = Result<Value, ReverseError>> + Send + 'static,
        answer: fn(&mut Core, &str, Result<Value, NoAnswer>),
    ) {
        let this = self.self_arc();
        let mut bound = self.cfg.call_timeout + Duration::from_secs(1);
        if protomcp_proto::fault::on(protomcp_proto::fault::Fault::BrSamplingUnbounded) {
            bound = Duration::from_secs(365 * 24 * 3600);
        }
        tokio::spawn(async move {
            let r = match tokio::time::timeout(bound, ask).await {
                Ok(r) => r.map_err(|e| NoAnswer::Host(e.to_string())),
                Err(_) => Err(NoAnswer::Late),
            };
            this.drive(|sh, _| answer(&mut sh.core, &rid, r));
        });
    }

    /// Sleeps towards the core's next deadline and passes the time in; woken earlier when a
    /// nearer deadline appears.
    pub(super) async fn run_timer(self: Arc<Self>) {
        let weak = Arc::downgrade(&self);
        drop(self);
        loop {
            let Some(this) = weak.upgrade() else { return };
            let next = {
                let mut sh = this.shared.lock().unwrap();
                sh.armed = sh.core.poll_timeout();
                sh.armed
            };
            let sleep = async {
                match next {
                    Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
                    None => std::future::pending().await,
                }
            };
            let woken = tokio::select! {
                _ = sleep => false,
                _ = this.timer.notified() => true,
                _ = this.shutdown.cancelled() => return,
            };
            if !woken {
                this.drive(|sh, now| sh.core.handle_timeout(now));
            }
        }
    }
}

/// What waits for an event.
enum Waiter {
    None,
    Op(oneshot::Sender<Result<Value, HostError>>),
    Start(oneshot::Sender<Result<(), StartFailure>>),
}

impl Sink for Bridge {
    fn envelope(&self, generation: u64, envelope: Envelope) {
        self.spin.arrived();
        self.drive(|sh, now| sh.core.handle_envelope(now, generation, envelope));
    }

    fn sideband(&self, generation: u64, sideband: Sideband) {
        self.spin.arrived();
        self.drive(|sh, now| sh.core.handle_sideband(now, generation, sideband));
    }

    fn wrote(&self) {
        self.spin.wrote();
    }

    fn waiting_on_host(&self) -> bool {
        self.shared.lock().unwrap().core.waiting_on_host()
    }

    fn closed(&self, generation: u64, reason: String) {
        self.drive(|sh, now| sh.core.handle_closed(now, generation, &reason));
    }

    fn diag(&self, line: String) {
        diag(&line);
    }

    fn trace(&self, from_tp: bool, envelope: &Envelope) {
        Bridge::trace(self, from_tp, envelope);
    }

    fn trace_item(&self, item: &dyn Fn() -> crate::transcript::Item) {
        if let Some(t) = &self.trace {
            t.item(&item());
        }
    }
}
