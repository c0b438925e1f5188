//! The tool process's life as the bridge sees it: starting an instance (spawn, accept, handshake,
//! list pulls), installing it, supervising it (restart with backoff, every call in flight
//! answered), watch-mode reloads by restart or by ReloadRequest, and shutdown.

use super::*;

impl Bridge {
    /// One start: process, connection, handshake, list pulls. On success the link is served.
    pub(super) async fn start_instance(self: Arc<Self>) -> Result<(), String> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let mut proc = process::ToolProcess::spawn(&self.cfg.command, self.cfg.socket.as_deref())
            .map_err(|e| format!("cannot start {:?}: {e}", self.cfg.command))?;
        let stream = match proc.accept(self.cfg.call_timeout).await {
            Ok(s) => s,
            Err(e) => {
                proc.terminate().await;
                return Err(e);
            }
        };
        let (link, hs) = Link::start(stream, generation, self.clone());
        match self.handshake(&link, hs).await {
            Ok(lists) => {
                self.install(&link, lists, Some(proc));
                Ok(())
            }
            Err(e) => {
                link.close(format!("failed start: {e}"));
                proc.terminate().await;
                Err(e)
            }
        }
    }

    /// Serves `link` with the tool set it staged and `lists` (and `proc`, after a start), and
    /// sends `list_changed` for every list that differs from what was served (BR-RELOAD-05).
    pub(super) fn install(&self, link: &Arc<Link>, lists: Lists, proc: Option<process::ToolProcess>) {
        let mut changed = Vec::new();
        {
            let mut g = self.inner.lock().unwrap();
            let new_tools = link.staging.lock().unwrap().take().unwrap_or_default();
            if g.tools.snapshot() != new_tools.snapshot() {
                changed.push(ListKind::Tools);
            }
            if g.lists.resources != lists.resources || g.lists.templates != lists.templates {
                changed.push(ListKind::Resources);
            }
            if g.lists.prompts != lists.prompts {
                changed.push(ListKind::Prompts);
            }
            g.tools = new_tools;
            g.lists = lists;
            g.link = Some(link.clone());
            g.status = Status::Ready;
            if let Some(p) = proc {
                g.process = Some(p);
            }
        }
        self.served.send_modify(|n| *n += 1);
        for kind in changed {
            self.broadcast_list_changed(kind);
        }
    }

    pub(super) async fn wait_reply(&self, link: &Link, rid: &str, rx: tokio::sync::oneshot::Receiver<Reply>) -> Reply {
        match tokio::time::timeout(self.cfg.call_timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err("the tool-process connection ended".into()),
            Err(_) => {
                link.forget(rid);
                Err(format!("no reply from the tool process within {:?}", self.cfg.call_timeout))
            }
        }
    }

    pub(super) async fn request(&self, link: &Link, envelope: Envelope) -> Reply {
        let rid = self.next_rid();
        let envelope = envelope.with_rid(rid.clone());
        self.trace(false, &envelope);
        let rx = link.request(&rid, envelope);
        self.wait_reply(link, &rid, rx).await
    }

    /// §5: ListToolsRequest, the burst (marker or `HANDSHAKE_QUIET`), then the list pulls.
    pub(super) async fn handshake(
        &self,
        link: &Arc<Link>,
        mut hs: mpsc::UnboundedReceiver<HsEvent>,
    ) -> Result<Lists, String> {
        match self.request(link, env::list_tools()).await? {
            Msg::ToolList(t) => {
                let mut staging = link.staging.lock().unwrap();
                let set = staging.get_or_insert_with(ToolSet::default);
                for r in set.register(&t.tools) {
                    diag(&format!("tool {:?} left out of tools/list: {}", r.name, r.reason));
                }
            }
            other => {
                return Err(format!(
                    "the tool process answered ListToolsRequest with {}",
                    protomcp_proto::Arm::of(&other).name()
                ));
            }
        }
        // BR-HANDSHAKE-06/07: the marker ends it at once; otherwise 500 ms of quiet, restarted
        // by each registration.
        loop {
            match tokio::time::timeout(HANDSHAKE_QUIET, hs.recv()).await {
                Ok(Some(HsEvent::Registration)) => continue,
                Ok(Some(HsEvent::Marker)) => break,
                Ok(Some(HsEvent::BurstToolList)) => continue,
                Ok(None) => {
                    return Err(link.end.lock().unwrap().clone().unwrap_or_else(|| "connection ended".into()));
                }
                Err(_) => break,
            }
        }
        link.end_handshake();
        self.pull_lists(link).await
    }

    /// Step (7) of §5, concurrently; an unanswered list counts as empty (BR-HANDSHAKE-10).
    pub(super) async fn pull_lists(&self, link: &Arc<Link>) -> Result<Lists, String> {
        let (r, t, p) = tokio::join!(
            self.request(link, env::list_resources()),
            self.request(link, env::list_resource_templates()),
            self.request(link, env::list_prompts()),
        );
        if link.is_closed() {
            return Err(link.end.lock().unwrap().clone().unwrap_or_default());
        }
        let mut lists = Lists::default();
        match r {
            Ok(Msg::ResourceListResponse(r)) => lists.resources = r.resources,
            other => diag(&format!("resource list: {}", describe(&other))),
        }
        match t {
            Ok(Msg::ResourceTemplateListResponse(t)) => lists.templates = t.templates,
            other => diag(&format!("resource template list: {}", describe(&other))),
        }
        match p {
            Ok(Msg::PromptListResponse(p)) => lists.prompts = p.prompts,
            other => diag(&format!("prompt list: {}", describe(&other))),
        }
        Ok(lists)
    }

    /// Waits for the served link to end, fails everything pending, and restarts with backoff.
    pub(super) async fn supervise(self: Arc<Self>) {
        let mut served = self.served.subscribe();
        loop {
            let link = self.inner.lock().unwrap().link.clone();
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
                let mut g = self.inner.lock().unwrap();
                g.link = None;
                g.status = Status::Down(reason.clone());
                g.progress.clear();
                g.process.take()
            };
            // BR-LIFECYCLE-08: a process that closed the connection but lives on is ended.
            if let Some(mut p) = proc {
                if let Some(status) = p.exit_status() {
                    diag(&format!("tool process {} exited: {status}", link.generation));
                }
                p.terminate().await;
            }
            let mut restarted = false;
            for attempt in 0..RESTART_ATTEMPTS {
                let delay = RESTART_DELAY * 2u32.pow(attempt);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.shutdown.cancelled() => return,
                }
                diag(&format!("restarting the tool process (attempt {} of {RESTART_ATTEMPTS})", attempt + 1));
                self.inner.lock().unwrap().status = Status::Starting;
                match self.clone().start_instance().await {
                    Ok(()) => {
                        diag("tool process restarted");
                        restarted = true;
                        break;
                    }
                    Err(e) => {
                        diag(&format!("restart failed: {e}"));
                        self.inner.lock().unwrap().status = Status::Down(e);
                    }
                }
            }
            if !restarted {
                // BR-LIFECYCLE-07: an empty tool list, announced.
                diag("giving up on the tool process; serving an empty tool list");
                let changed = {
                    let mut g = self.inner.lock().unwrap();
                    let had = !g.tools.active_names().is_empty();
                    g.tools.clear();
                    had
                };
                if changed {
                    self.broadcast_list_changed(ListKind::Tools);
                }
            }
        }
    }

    /// Restarts the tool process (watch mode, BR-RELOAD-01): calls in flight finish first
    /// (bounded by `CALL_TIMEOUT`); new calls get an error meanwhile; then a fresh process with
    /// a full handshake, and `list_changed` for every list that changed (BR-RELOAD-04/05).
    /// A failed start keeps the bridge up and waits for the next trigger (BR-RELOAD-08).
    pub async fn reload(&self) {
        let _one = self.reload_lock.lock().await;
        if self.cfg.reload_by_request {
            let link = self.inner.lock().unwrap().link.clone().filter(|l| !l.is_closed());
            if let Some(link) = link {
                diag("reloading the tool process (ReloadRequest)");
                match self.reload_in_place(&link).await {
                    Ok(()) => diag("tool process reloaded"),
                    Err(e) => diag(&format!("reload failed, the previous lists stay: {e}")),
                }
                return;
            }
        }
        self.reloading.store(true, Ordering::SeqCst);
        let link = {
            let mut g = self.inner.lock().unwrap();
            g.status = Status::Starting;
            g.link.clone()
        };
        if let Some(link) = &link {
            let deadline = tokio::time::Instant::now() + self.cfg.call_timeout;
            while link.pending_count() > 0 && !link.is_closed() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let proc = {
            let mut g = self.inner.lock().unwrap();
            g.link = None;
            g.progress.clear();
            g.process.take()
        };
        if let Some(link) = link {
            link.close("reloading the tool process".into());
        }
        if let Some(mut p) = proc {
            p.terminate().await;
        }
        diag("reloading the tool process");
        match self.self_arc().start_instance().await {
            Ok(()) => diag("tool process reloaded"),
            Err(e) => {
                diag(&format!("reload failed: {e}"));
                self.inner.lock().unwrap().status = Status::Down(e);
            }
        }
        self.reloading.store(false, Ordering::SeqCst);
    }

    /// A reload by ReloadRequest (`--reload request`, BR-RELOAD-01): the running tool process
    /// answers, sends its burst (BR-RELOAD-02: the ToolListResponse with empty rid is the new
    /// list, registrations are acknowledged, nothing else is sent before the marker or
    /// `HANDSHAKE_QUIET` of silence), then the lists are pulled again and served. Calls in
    /// flight go on (TP-RELOAD-04); calls that arrive meanwhile get an error. A refusal keeps
    /// the previous lists and registrations (BR-RELOAD-03).
    pub(super) async fn reload_in_place(&self, link: &Arc<Link>) -> Result<(), String> {
        let (mut hs, before) = link.begin_reload();
        self.inner.lock().unwrap().status = Status::Starting;
        let fail = |e: String| {
            link.abort_reload(before.clone());
            let mut g = self.inner.lock().unwrap();
            if !link.is_closed() {
                g.status = Status::Ready;
            }
            Err(e)
        };
        match self.request(link, env::reload()).await {
            Ok(Msg::ReloadResponse(r)) if r.success => {}
            Ok(Msg::ReloadResponse(r)) => return fail(format!("the tool process refused: {}", r.error)),
            Ok(other) => {
                return fail(format!(
                    "the tool process answered ReloadRequest with {}",
                    protomcp_proto::Arm::of(&other).name()
                ));
            }
            Err(e) => return fail(e),
        }
        let mut list = false;
        loop {
            match tokio::time::timeout(HANDSHAKE_QUIET, hs.recv()).await {
                Ok(Some(HsEvent::BurstToolList)) => list = true,
                Ok(Some(HsEvent::Registration)) => {}
                Ok(Some(HsEvent::Marker)) => break,
                Ok(None) => return fail("the connection ended during the reload".into()),
                Err(_) => break,
            }
        }
        link.end_handshake();
        if !list {
            return fail("the burst had no ToolListResponse".into());
        }
        let lists = match self.pull_lists(link).await {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        self.install(link, lists, None);
        Ok(())
    }

    /// Ends the bridge: the connection closed, the tool process gone, the socket removed
    /// (BR-LIFECYCLE-09/10/11).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let (link, proc) = {
            let mut g = self.inner.lock().unwrap();
            g.status = Status::Down("the bridge is shutting down".into());
            (g.link.take(), g.process.take())
        };
        if let Some(l) = &link {
            l.close("the bridge is shutting down".into());
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

    // ----- sessions -----
}
