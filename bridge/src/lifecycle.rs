//! The tool process's life as the bridge sees it: starting an instance (spawn, accept, then the
//! core's handshake and list pulls), supervising it (restart with backoff, every call in flight
//! answered), watch-mode reloads by restart or by ReloadRequest, and shutdown.

use std::sync::atomic::Ordering;

use protomcp_proto::fault::{self, Fault};

use super::error::StartFailure;
use super::{
    Arc, Bridge, Core, Duration, Link, RESTART_ATTEMPTS, RESTART_DELAY, SHUTDOWN_GRACE, diag, link, oneshot, process,
};

/// A reload's start failed (kept only by `br.reload.no-retry-after-failure`).
static RELOAD_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Bridge {
    /// One start: process, connection, then the core's handshake and list pulls. On success the
    /// connection is served.
    pub(super) async fn start_instance(self: Arc<Self>) -> Result<(), StartFailure> {
        let mut proc = process::ToolProcess::spawn(&self.cfg.command, self.cfg.socket.as_deref())
            .map_err(|source| StartFailure::Spawn { command: self.cfg.command.clone(), source })?;
        let accepted = tokio::select! {
            r = proc.accept(self.cfg.call_timeout) => r.map_err(StartFailure::from),
            _ = self.shutdown.cancelled() => Err(StartFailure::Stopped),
        };
        let stream = match accepted {
            Ok(s) => s,
            Err(e) => {
                proc.terminate().await;
                return Err(e);
            }
        };
        let (tx, rx) = oneshot::channel();
        let sink: Arc<dyn link::Sink> = self.clone();
        let link = self.drive(|sh, now| {
            let generation = sh.core.handle_connected(now);
            let link = Link::start(stream, generation, sink);
            sh.starts.insert(generation, tx);
            sh.link = Some(link.clone());
            link
        });
        if fault::on(Fault::BrLifecycleServeBeforeHandshake) {
            // Served at once: the handshake goes on behind the host's requests.
            drop(rx);
            self.shared.lock().unwrap().process = Some(proc);
            return Ok(());
        }
        let started = tokio::select! {
            r = rx => match r {
                Ok(r) => r,
                Err(_) => Err(StartFailure::Ended),
            },
            _ = self.shutdown.cancelled() => Err(StartFailure::Stopped),
        };
        match started {
            Ok(()) => {
                self.shared.lock().unwrap().process = Some(proc);
                Ok(())
            }
            Err(e) => {
                self.close_link(&link, format!("failed start: {e}"));
                self.drive(|sh, _| {
                    if sh.link.as_ref().is_some_and(|l| Arc::ptr_eq(l, &link)) {
                        sh.link = None;
                    }
                });
                proc.terminate().await;
                Err(e)
            }
        }
    }

    /// Ends `link` from our side: its writer stops after what is queued, and the core answers
    /// everything that waited for it now (BR-LIFECYCLE-03).
    pub(super) fn close_link(&self, link: &Link, reason: String) {
        link.close(reason.clone());
        self.drive(|sh, now| sh.core.handle_closed(now, link.generation, &reason));
    }

    /// Waits for the served link to end and restarts with backoff.
    pub(super) async fn supervise(self: Arc<Self>) {
        let mut served = self.served.subscribe();
        loop {
            let link = self.shared.lock().unwrap().link.clone();
            let Some(link) = link.filter(|l| !l.is_closed() || !self.reloading.load(Ordering::SeqCst)) else {
                // No tool process (given up, or a reload is replacing it): wait for the next.
                tokio::select! {
                    r = served.changed() => if r.is_err() { return },
                    _ = self.shutdown.cancelled() => return,
                }
                continue;
            };
            tokio::select! {
                _ = link.closed() => {}
                _ = self.shutdown.cancelled() => return,
            }
            if self.shutdown.is_cancelled() {
                return;
            }
            if self.reloading.load(Ordering::SeqCst) {
                continue;
            }
            let reason = link.end.lock().unwrap().clone().unwrap_or_default();
            diag(&format!("tool process {} failed: {reason}", link.generation));

            let proc = {
                let mut sh = self.shared.lock().unwrap();
                sh.link = None;
                sh.process.take()
            };
            self.drive(|sh, now| sh.core.handle_closed(now, link.generation, &reason));
            if fault::on(Fault::BrLifecycleListenEndedAtFailure) {
                // The fault: the tool process's end is taken for the end of the subscriptions.
                let sessions: Vec<_> = self.shared.lock().unwrap().sessions.values().cloned().collect();
                for s in sessions {
                    s.end_listens();
                }
            }
            if fault::on(Fault::BrLifecycleExitOnFailure) {
                // The calls that waited are answered; then the bridge gives up.
                tokio::time::sleep(Duration::from_millis(300)).await;
                std::process::exit(1);
            }
            // BR-LIFECYCLE-08: a process that closed the connection but lives on is ended.
            if let Some(mut p) = proc {
                if let Some(status) = p.exit_status() {
                    diag(&format!("tool process {} exited: {status}", link.generation));
                }
                if p.exit_status().is_none() && fault::on(Fault::BrLifecycleClosedLivesOn) {
                    std::mem::forget(p);
                } else {
                    p.terminate().await;
                }
            }
            let mut restarted = false;
            let attempts = if fault::on(Fault::BrLifecycleNoRestart) { 0 } else { RESTART_ATTEMPTS };
            for attempt in 0..attempts {
                let delay = RESTART_DELAY * 2u32.pow(attempt);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.shutdown.cancelled() => return,
                }
                diag(&format!("restarting the tool process (attempt {} of {RESTART_ATTEMPTS})", attempt + 1));
                self.drive(|sh, _| sh.core.begin_restart());
                match self.clone().start_instance().await {
                    Ok(()) => {
                        diag("tool process restarted");
                        restarted = true;
                        break;
                    }
                    Err(e) => {
                        diag(&format!("restart failed: {e}"));
                        self.drive(|sh, _| sh.core.restart_failed(&e.to_string()));
                    }
                }
            }
            if !restarted {
                // BR-LIFECYCLE-07: an empty tool list, announced.
                diag("giving up on the tool process; serving an empty tool list");
                self.drive(|sh, _| sh.core.give_up());
            }
        }
    }

    /// Reloads the tool process (watch mode, BR-RELOAD-01): by ReloadRequest with `--reload
    /// request`, else by restart: calls in flight finish first (bounded by `CALL_TIMEOUT`); new
    /// calls get an error meanwhile; then a fresh process with a full handshake, and
    /// `list_changed` for every list that changed (BR-RELOAD-04/05). A failed start keeps the
    /// bridge up and waits for the next trigger (BR-RELOAD-08).
    pub async fn reload(&self) {
        let _one = self.reload_lock.lock().await;
        if fault::on(Fault::BrReloadNoRetryAfterFailure) && RELOAD_FAILED.load(Ordering::SeqCst) {
            return;
        }
        if self.cfg.reload_by_request {
            let (tx, rx) = oneshot::channel();
            let begun = self.drive(|sh, now| {
                let begun = sh.link.as_ref().is_some_and(|l| !l.is_closed()) && sh.core.begin_reload(now);
                if begun {
                    sh.reload = Some(tx);
                }
                begun
            });
            if begun {
                diag("reloading the tool process (ReloadRequest)");
                match rx.await.unwrap_or(Err(StartFailure::Ended)) {
                    Ok(()) => diag("tool process reloaded"),
                    Err(e) => diag(&format!("reload failed, the previous lists stay: {e}")),
                }
                return;
            }
        }
        self.reloading.store(true, Ordering::SeqCst);
        let link = self.drive(|sh, _| {
            sh.core.begin_restart();
            sh.link.clone()
        });
        // br.reload.in-flight-left: the process is ended at once, its calls left waiting.
        if let Some(link) = link.as_ref().filter(|_| !fault::on(Fault::BrReloadInFlightLeft)) {
            let deadline = tokio::time::Instant::now() + self.cfg.call_timeout;
            while self.read(Core::pending_count) > 0 && !link.is_closed() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let proc = {
            let mut sh = self.shared.lock().unwrap();
            sh.link = None;
            sh.process.take()
        };
        if let Some(link) = link {
            self.close_link(&link, "reloading the tool process".into());
        }
        if let Some(mut p) = proc {
            // As at shutdown: what is queued (a CancelRequest of a call that timed out while the
            // reload waited) is written and the connection closed; a process that leaves on
            // end-of-file is not signalled.
            p.wait_exit(SHUTDOWN_GRACE).await;
            p.terminate().await;
        }
        diag("reloading the tool process");
        match self.self_arc().start_instance().await {
            Ok(()) => diag("tool process reloaded"),
            Err(e) => {
                diag(&format!("reload failed: {e}"));
                if fault::on(Fault::BrReloadNoRetryAfterFailure) {
                    RELOAD_FAILED.store(true, Ordering::SeqCst);
                }
                self.drive(|sh, _| sh.core.restart_failed(&e.to_string()));
            }
        }
        self.reloading.store(false, Ordering::SeqCst);
    }

    /// Ends the bridge: the connection closed, the tool process gone, the socket removed
    /// (BR-LIFECYCLE-09/10/11).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let (link, proc) = {
            let mut sh = self.shared.lock().unwrap();
            (sh.link.take(), sh.process.take())
        };
        if let Some(l) = &link {
            self.close_link(l, "the bridge is shutting down".into());
        }
        if let Some(mut p) = proc {
            // What is still queued (CancelRequest for the calls of an ended session,
            // BR-CANCEL-06) is written and the connection closed; a process that leaves on
            // end-of-file is not signalled (BR-LIFECYCLE-09).
            p.wait_exit(SHUTDOWN_GRACE).await;
            p.terminate().await;
        }
        // The reader records the connection's end in the trace; the process must not exit
        // before it has (the tool process is gone, so its end of the socket is closed).
        if let Some(l) = link {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, l.reader_finished()).await;
        }
    }
}
