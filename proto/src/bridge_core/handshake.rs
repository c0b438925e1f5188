//! A connection's start (§5): discovery (ListToolsRequest), the burst of registrations ended by
//! the marker or `HANDSHAKE_QUIET` of quiet (BR-HANDSHAKE-06/07), the list pulls (step 7), and
//! installing what it staged; and a reload by ReloadRequest (BR-RELOAD-01…03), which runs the
//! same burst and pulls on the running connection.

use super::{
    Conn, Core, Event, Instant, ListKind, Lists, Msg, Pull, Reply, Status, ToolSet, Waiting, describe, pb, streams,
};
use crate::envelopes as env;
use crate::fault::{self, Fault};

/// Where a connection's start (or a reload by ReloadRequest) stands.
#[derive(Debug, Clone)]
pub(super) enum Phase {
    /// ListToolsRequest sent.
    Discovery,
    /// The burst: ends at the marker, or at `deadline` (quiet since the last registration).
    Burst {
        deadline: Instant,
        reload: Option<Reload>,
    },
    /// The three list pulls in flight; `left` of them unanswered.
    Pulling {
        lists: Lists,
        left: u8,
        reload: Option<Reload>,
    },
    Serving,
    /// The start failed ([`Event::StartFailed`] given): the shell ends the connection.
    Failed,
    /// ReloadRequest sent, its answer awaited.
    Reloading(Reload),
}

/// What a reload by ReloadRequest keeps to undo itself (BR-RELOAD-03).
#[derive(Debug, Clone)]
pub(super) struct Reload {
    /// The registrations before it.
    middleware: Vec<(String, i32)>,
    /// The burst's ToolListResponse (empty rid) arrived.
    got_list: bool,
}

impl Phase {
    /// What the end of the connection in this phase means: a start or a reload that failed.
    pub(super) fn ended(&self, generation: u64, reason: &str) -> Option<Event> {
        match self {
            Phase::Serving | Phase::Failed => None,
            Phase::Discovery | Phase::Burst { reload: None, .. } | Phase::Pulling { reload: None, .. } => {
                Some(Event::StartFailed { generation, reason: reason.to_owned() })
            }
            Phase::Reloading(_) | Phase::Burst { reload: Some(_), .. } | Phase::Pulling { reload: Some(_), .. } => {
                Some(Event::ReloadFailed { reason: format!("the connection ended during the reload: {reason}") })
            }
        }
    }

    pub(super) fn deadline(&self) -> Option<Instant> {
        match self {
            Phase::Burst { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }
}

impl Core {
    /// A tool process connected: its start begins (discovery). Returns the connection's
    /// generation, which every later input about it carries.
    pub fn handle_connected(&mut self, now: Instant) -> u64 {
        self.generations += 1;
        let generation = self.generations;
        if fault::on(Fault::BrConcurRidsResetOnRestart) {
            self.rids = 0;
        }
        let kept =
            if fault::on(Fault::BrMiddlewareKeptAfterRestart) { self.last_middleware.clone() } else { Vec::new() };
        // br.toollist.register-merges: the new list is registered on top of the served one.
        let staging = if fault::on(Fault::BrToollistRegisterMerges) { self.tools.clone() } else { ToolSet::default() };
        self.conn = Some(Conn {
            generation,
            staging: Some(staging),
            middleware: kept,
            phase: Phase::Discovery,
            streams: streams(),
            raw_rid: String::new(),
        });
        let rid = self.request(now, env::list_tools(), Waiting::Discovery);
        if fault::on(Fault::BrHandshakeEmptyRid)
            && let Some(e) = self.transmit.back_mut()
        {
            e.request_id.clear();
        }
        if fault::on(Fault::BrHandshakeDiscoveryUnbounded)
            && let Some(p) = self.pending.get_mut(&rid)
        {
            p.deadline = now + std::time::Duration::from_secs(365 * 86400);
        }
        generation
    }

    fn phase_mut(&mut self) -> Option<&mut Phase> {
        self.conn.as_mut().map(|c| &mut c.phase)
    }

    fn start_failed(&mut self, reason: String) {
        let generation = self.generation();
        if let Some(p) = self.phase_mut() {
            *p = Phase::Failed;
        }
        self.events.push_back(Event::StartFailed { generation, reason });
    }

    pub(super) fn discovery_reply(&mut self, now: Instant, reply: Reply) {
        match reply {
            Ok(Msg::ToolList(t)) => {
                let rejected = match self.conn.as_mut().and_then(|c| c.staging.as_mut()) {
                    Some(set) => set.register(&t.tools),
                    None => Vec::new(),
                };
                for r in rejected {
                    self.diag(format!("tool {:?} left out of tools/list: {}", r.name, r.reason));
                }
                let deadline = now + self.cfg.handshake_quiet;
                if let Some(p) = self.phase_mut() {
                    *p = Phase::Burst { deadline, reload: None };
                }
                if fault::on(Fault::BrHandshakePullsEarly) {
                    self.end_burst(now);
                }
            }
            Ok(_) if fault::on(Fault::BrHandshakeWrongReplyEmpty) => {
                self.discovery_reply(now, Ok(Msg::ToolList(pb::ToolListResponse::default())))
            }
            Ok(other) => {
                let arm = crate::Arm::of(&other).name();
                self.start_failed(format!("the tool process answered ListToolsRequest with {arm}"));
            }
            Err(e) => self.start_failed(e.to_string()),
        }
    }

    /// A registration during a burst restarts its quiet time (BR-HANDSHAKE-07).
    pub(super) fn burst_activity(&mut self, now: Instant) {
        let quiet = self.cfg.handshake_quiet;
        if fault::on(Fault::BrHandshakeQuietNotRestarted) {
            return;
        }
        if let Some(Phase::Burst { deadline, .. }) = self.phase_mut() {
            *deadline = now + quiet;
        }
    }

    /// The handshake-complete marker ends a burst at once (BR-HANDSHAKE-06).
    pub(super) fn burst_marker(&mut self, now: Instant) {
        if fault::on(Fault::BrHandshakeMarkerIgnored) {
            return;
        }
        if matches!(self.conn.as_ref().map(|c| &c.phase), Some(Phase::Burst { .. })) {
            self.end_burst(now);
        }
    }

    /// A ToolListResponse with empty rid: the new tool list of a reload's burst; ignored
    /// anywhere else (BR-HANDSHAKE-14).
    pub(super) fn burst_tool_list(&mut self, now: Instant, t: &pb::ToolListResponse) {
        let Some(c) = self.conn.as_mut() else { return };
        let reload = match &mut c.phase {
            Phase::Burst { reload: Some(r), .. } | Phase::Reloading(r) => r,
            Phase::Serving if fault::on(Fault::BrHandshakeUnsolicitedApplied) => {
                let before = self.tools.snapshot();
                self.tools.register(&t.tools);
                if before != self.tools.snapshot() {
                    self.events.push_back(Event::ListChanged(ListKind::Tools));
                }
                return;
            }
            _ => return,
        };
        reload.got_list = true;
        let rejected = c.staging.as_mut().map(|set| set.register(&t.tools)).unwrap_or_default();
        for r in rejected {
            self.diag(format!("tool {:?} left out of tools/list: {}", r.name, r.reason));
        }
        self.burst_activity(now);
    }

    /// The burst is over: the list pulls, concurrently (§5 step 7).
    pub(super) fn end_burst(&mut self, now: Instant) {
        let Some(Phase::Burst { reload, .. }) = self.conn.as_ref().map(|c| c.phase.clone()) else { return };
        if let Some(r) = &reload
            && !r.got_list
        {
            return self.reload_failed(r.middleware.clone(), "the burst had no ToolListResponse".into());
        }
        let first_start = reload.is_none();
        if let Some(p) = self.phase_mut() {
            *p = Phase::Pulling { lists: Lists::default(), left: 3, reload };
        }
        let pulls = [
            self.request(now, env::list_resources(), Waiting::Pull(Pull::Resources)),
            self.request(now, env::list_resource_templates(), Waiting::Pull(Pull::Templates)),
            self.request(now, env::list_prompts(), Waiting::Pull(Pull::Prompts)),
        ];
        for (i, rid) in pulls.iter().enumerate() {
            let Some(p) = self.pending.get_mut(rid) else { continue };
            if fault::on(Fault::BrHandshakePullTimeoutsAdd) {
                p.deadline = now + self.cfg.call_timeout * (i as u32 + 1);
            }
        }
        if first_start && self.generation() == 1 && fault::on(Fault::BrHandshakeServedBeforePulls) {
            // Served with the staged tools and the lists still empty.
            if let Some(set) = self.conn.as_ref().and_then(|c| c.staging.clone()) {
                self.tools = set;
            }
            self.status = Status::Ready;
            let generation = self.generation();
            self.events.push_back(Event::Served { generation });
        }
    }

    /// One list pull answered; an unanswered list counts as empty (BR-HANDSHAKE-10).
    pub(super) fn pull_reply(&mut self, _now: Instant, which: Pull, reply: Reply) {
        let mut note = None;
        let Some(Phase::Pulling { lists, left, .. }) = self.phase_mut() else { return };
        match (which, reply) {
            (Pull::Resources, Ok(Msg::ResourceListResponse(r))) => lists.resources = r.resources,
            (Pull::Templates, Ok(Msg::ResourceTemplateListResponse(t))) => lists.templates = t.templates,
            (Pull::Prompts, Ok(Msg::PromptListResponse(p))) => lists.prompts = p.prompts,
            (which, other) => {
                let what = match which {
                    Pull::Resources => "resource list",
                    Pull::Templates => "resource template list",
                    Pull::Prompts => "prompt list",
                };
                note = Some(format!("{what}: {}", describe(&other)));
            }
        }
        *left -= 1;
        let done = *left == 0;
        if let Some(n) = note {
            self.diag(n);
        }
        if done {
            self.install();
        }
    }

    /// Serves the connection with the tool set it staged and the pulled lists, and announces
    /// every list that differs from what was served (BR-RELOAD-05).
    fn install(&mut self) {
        let Some(c) = self.conn.as_mut() else { return };
        let Phase::Pulling { lists, .. } = std::mem::replace(&mut c.phase, Phase::Serving) else { return };
        let new_tools = c.staging.take().unwrap_or_default();
        let generation = c.generation;
        let new_tools = if fault::on(Fault::BrReloadToolsKept) && self.tools.active().next().is_some() {
            std::mem::take(&mut self.tools)
        } else {
            new_tools
        };
        let announce = !fault::on(Fault::BrReloadNoListChanged);
        if self.tools.snapshot() != new_tools.snapshot() && announce {
            self.events.push_back(Event::ListChanged(ListKind::Tools));
        }
        if (self.lists.resources != lists.resources || self.lists.templates != lists.templates) && announce {
            self.events.push_back(Event::ListChanged(ListKind::Resources));
        }
        if self.lists.prompts != lists.prompts && announce {
            self.events.push_back(Event::ListChanged(ListKind::Prompts));
        }
        self.tools = new_tools;
        self.lists = lists;
        self.status = Status::Ready;
        self.restarting = false;
        self.events.push_back(Event::Served { generation });
    }

    /// A reload by ReloadRequest (`--reload request`, BR-RELOAD-01): the running tool process
    /// answers, sends its burst (BR-RELOAD-02: the ToolListResponse with empty rid is the new
    /// list, registrations start over), then the lists are pulled again and served. Calls in
    /// flight go on (TP-RELOAD-04); calls that arrive meanwhile get an error. Returns false
    /// when there is no served connection to reload.
    pub fn begin_reload(&mut self, now: Instant) -> bool {
        let Some(c) = self.conn.as_mut().filter(|c| matches!(c.phase, Phase::Serving)) else { return false };
        let middleware = std::mem::take(&mut c.middleware);
        c.staging = Some(ToolSet::default());
        c.phase = Phase::Reloading(Reload { middleware, got_list: false });
        self.status = Status::Starting;
        self.request(now, env::reload(), Waiting::Reload);
        true
    }

    pub(super) fn reload_reply(&mut self, now: Instant, reply: Reply) {
        let Some(Phase::Reloading(reload)) = self.conn.as_ref().map(|c| c.phase.clone()) else { return };
        match reply {
            Ok(Msg::ReloadResponse(r)) if r.success => {
                let deadline = now + self.cfg.handshake_quiet;
                if let Some(p) = self.phase_mut() {
                    *p = Phase::Burst { deadline, reload: Some(reload) };
                }
                if fault::on(Fault::BrReloadListRequestInBurst) {
                    let rid = self.next_rid();
                    self.transmit.push_back(crate::envelopes::EnvelopeExt::with_rid(env::list_tools(), rid));
                }
            }
            Ok(Msg::ReloadResponse(r)) => {
                self.reload_failed(reload.middleware, format!("the tool process refused: {}", r.error))
            }
            Ok(other) => {
                let arm = crate::Arm::of(&other).name();
                self.reload_failed(reload.middleware, format!("the tool process answered ReloadRequest with {arm}"))
            }
            Err(e) => self.reload_failed(reload.middleware, e.to_string()),
        }
    }

    /// A reload that failed: the previous registrations are back (BR-RELOAD-03), nothing staged
    /// is kept, and the connection serves on.
    fn reload_failed(&mut self, middleware: Vec<(String, i32)>, reason: String) {
        if let Some(c) = self.conn.as_mut() {
            c.staging = None;
            c.middleware = middleware;
            c.phase = Phase::Serving;
            self.status = Status::Ready;
        }
        if fault::on(Fault::BrReloadFailureClearsTools) {
            self.tools.clear();
            self.events.push_back(Event::ListChanged(ListKind::Tools));
        }
        self.events.push_back(Event::ReloadFailed { reason });
    }
}
