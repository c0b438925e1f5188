//! The host side of a bridge run: the bridge's messages as they arrive (stdout lines, HTTP
//! responses and event streams), which host session they belong to, and the `host_expect` and
//! `host_expect_nothing` waits over them.

use crate::host::PAGES_JOINED;

use super::{
    Arrival, Dir, Duration, HostStream, Http, HttpSend, HttpSession, Instant, Item, LIST_METHODS, MAX_PAGES, Other,
    Pages, Pattern, Run, StepError, Value, compact, json, match_value,
};

impl Run<'_> {
    /// Makes host `name`'s session the one the host steps act on, or puts it back: the sessions
    /// are swapped, so a second call with the same name undoes the first. The first use opens
    /// it (a session of its own at the same endpoint; its `initialize` is the script's).
    pub(super) fn switch_host(&mut self, name: &str) {
        let i = match self.others.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                // The loader lets `host` into HTTP scenarios only.
                let http = self.http.as_ref().map(|main| {
                    let session = HttpSession::new(main.session.endpoint.clone());
                    session.answer_requests(self.ex.scenario.host_requests == crate::scenario::HostRequests::Auto);
                    Http { session, url: main.url.clone() }
                });
                self.others.push((
                    name.to_owned(),
                    Other { http, consumed: Default::default(), cursor: 0, pages: Pages::default() },
                ));
                self.others.len() - 1
            }
        };
        let o = &mut self.others[i].1;
        std::mem::swap(&mut self.http, &mut o.http);
        std::mem::swap(&mut self.consumed, &mut o.consumed);
        std::mem::swap(&mut self.cursor, &mut o.cursor);
        std::mem::swap(&mut self.pages, &mut o.pages);
    }

    /// Over HTTP: waits until every queued send is done (a scenario ending with sends that never
    /// reached the bridge does not pass), the other hosts' too.
    pub(super) async fn http_drain_all(&mut self) -> Result<(), StepError> {
        self.http_drain().await?;
        let names: Vec<String> = self.others.iter().map(|(n, _)| n.clone()).collect();
        for n in names {
            self.switch_host(&n);
            let r = self.http_drain().await;
            self.switch_host(&n);
            r?;
        }
        Ok(())
    }

    /// Over HTTP: waits until every queued send is done (a scenario ending with sends that never
    /// reached the bridge does not pass).
    pub(super) async fn http_drain(&mut self) -> Result<(), StepError> {
        loop {
            self.http_check().await?;
            if self.http.as_ref().is_none_or(|h| h.session.pending() == 0) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(super) fn stdout_clean(&mut self) -> Result<(), StepError> {
        if self.http.is_some() {
            return Ok(());
        }
        match self.host.garbage().first() {
            // The mock's own stdout line: the tool process's stdout is the MCP output.
            Some(line) if line.trim_end() == crate::mock::STDOUT_LINE => {
                self.ex.found = &["BR-CONN-06"];
                Err(StepError::Fail(format!(
                    "the tool process's stdout reached the bridge's MCP output (stdout): {line:?}"
                )))
            }
            Some(line) => {
                self.ex.found = &["BR-MCP-01"];
                Err(StepError::Fail(format!("the bridge wrote a line that is not JSON-RPC on stdout: {line:?}")))
            }
            None => Ok(()),
        }
    }

    /// What the bridge sent from the oldest message no step looked at on, in arrival order, with
    /// their numbers: over stdio one stream (0).
    pub(super) fn inbox(&self) -> Vec<(u64, Arrival)> {
        match &self.http {
            None => self
                .host
                .messages_since(self.cursor)
                .into_iter()
                .map(|(n, value)| (n, Arrival::Message { stream: 0, value }))
                .collect(),
            Some(h) => h.session.events_since(self.cursor),
        }
    }

    /// Message `n` was looked at (the host driver forgets the ones before the oldest not looked
    /// at: the transcript has them).
    pub(super) fn mark(&mut self, n: u64) {
        self.consumed.insert(n);
        let cursor = self.cursor;
        while self.consumed.remove(&self.cursor) {
            self.cursor += 1;
        }
        if self.cursor > cursor {
            match &self.http {
                None => self.host.forget_before(self.cursor),
                Some(h) => h.session.forget_before(self.cursor),
            }
        }
    }

    /// When the bridge sent more than the harness keeps ([`crate::limits`]): the failure
    /// naming the flood (the transcript, the host driver's messages, stderr).
    pub(super) fn flood(&self) -> Option<String> {
        let host = match &self.http {
            None => self.host.flood(),
            Some(h) => h.session.flood(),
        };
        self.ex.flood().or(host).or_else(|| self.stderr.flood("the bridge"))
    }

    pub(super) fn record(&mut self, e: &Arrival) {
        let item = match e {
            Arrival::Message { value, .. } => {
                Item::Host { dir: Dir::FromTestee, message: Some(value.clone()), raw: None }
            }
            Arrival::Note { text, .. } => {
                Item::Host { dir: Dir::FromTestee, message: None, raw: Some(format!("<{text}>")) }
            }
            Arrival::Comment { text, .. } => {
                Item::Host { dir: Dir::FromTestee, message: None, raw: Some(format!("<SSE comment: {text}>")) }
            }
        };
        self.ex.transcript.push(item);
    }

    /// The oldest unread message of every stream (index, message), oldest first. Notes go to the
    /// transcript as they are met; messages with a method in `ignore` are read and passed over.
    pub(super) fn heads(&mut self, ignore: &[String]) -> Vec<(u64, Value)> {
        let events = self.inbox();
        let mut heads: Vec<(u64, Value)> = Vec::new();
        let mut streams: Vec<usize> = Vec::new();
        for (i, e) in events {
            if self.consumed.contains(&i) || streams.contains(&e.stream()) {
                continue;
            }
            match e {
                Arrival::Note { .. } | Arrival::Comment { .. } => {
                    self.mark(i);
                    self.record(&e);
                }
                Arrival::Message { stream, value } => {
                    let ignored =
                        value.get("method").and_then(Value::as_str).is_some_and(|x| ignore.iter().any(|i| i == x));
                    if ignored {
                        self.mark(i);
                        self.record(&Arrival::Message { stream, value });
                    } else {
                        streams.push(stream);
                        heads.push((i, value));
                    }
                }
            }
        }
        heads
    }

    pub(super) fn take(&mut self, i: u64, m: &Value) {
        self.mark(i);
        if is_response(m)
            && let Some(id) = m.get("id")
        {
            *self.pages.answered.entry(compact(id)).or_default() += 1;
        }
        self.ex.transcript.push(Item::Host { dir: Dir::FromTestee, message: Some(m.clone()), raw: None });
    }

    /// Whether `m`, a message of the bridge not read yet, replies to no request of this host
    /// session: a response under an id the host never sent, or one more response than requests
    /// under its id (BR-MCP-19: exactly one response per request). Named when it arrives, not
    /// at the deadline of the step waiting for another. A null id (the answer to a line that is
    /// not JSON, BR-MCP-16) and sessions where the host sent what the harness cannot read as
    /// requests are not judged.
    pub(super) fn unmatched(&self, m: &Value) -> Option<String> {
        let id = m.get("id").filter(|id| !id.is_null() && is_response(m) && !self.pages.opaque)?;
        let key = compact(id);
        let asked = self.pages.asked.get(&key).copied().unwrap_or(0);
        let answered = self.pages.answered.get(&key).copied().unwrap_or(0);
        match (asked, answered) {
            (0, _) => {
                Some(format!("the bridge sent a response under id {key}, which the host never used: {}", compact(m)))
            }
            (a, n) if n >= a => Some(format!(
                "the bridge sent response {} under id {key}, for {a} request(s) under it: {}",
                n + 1,
                compact(m)
            )),
            _ => None,
        }
    }

    /// Fails the step when message `i` replies to no request ([`Run::unmatched`]).
    fn check_reply(&mut self, i: u64, m: &Value) -> Result<(), StepError> {
        match self.unmatched(m) {
            Some(why) => {
                self.take(i, m);
                let v = protomcp_proto::violation::Violation::new(
                    protomcp_proto::violation::Rule::UnmatchedReply,
                    protomcp_proto::violation::Party::Bridge,
                    why,
                );
                Err(self.ex.violation(v))
            }
            None => Ok(()),
        }
    }

    /// One round of a host wait: what is wrong already fails the step (a flood, a stray stdout
    /// line, an HTTP failure), the bridge's list pulls are answered, and a wait that began while
    /// the tool process was (re)starting starts over once it is up.
    pub(super) async fn wait_round(&mut self, deadline: &mut Instant, within: Duration) -> Result<(), StepError> {
        if let Some(f) = self.flood() {
            return Err(StepError::Fail(f));
        }
        self.stdout_clean()?;
        self.http_check().await?;
        self.ex.poll_pulls().await;
        if self.starting() {
            *deadline = Instant::now() + within;
        }
        Ok(())
    }

    /// A bridge message matching `pattern` before `deadline`. Over stdio the next message must
    /// match; over HTTP the oldest unread message of any stream may.
    pub(super) async fn expect_host(
        &mut self,
        pattern: &Pattern,
        within: Duration,
        ignore: &[String],
        stream: Option<&HostStream>,
    ) -> Result<(), StepError> {
        let mut deadline = Instant::now() + within;
        loop {
            self.wait_round(&mut deadline, within).await?;
            let mut heads = self.heads(ignore);
            for (i, m) in &heads {
                self.check_reply(*i, m)?;
            }
            for (i, m) in &mut heads {
                *m = self.whole_list(*i, m, deadline).await?;
            }
            let mut mismatch = None;
            for (i, m) in &heads {
                // A match on the wrong stream binds nothing.
                let saved = stream.map(|_| self.ex.caps.clone());
                match match_value(pattern, Some(m), &mut self.ex.caps) {
                    Ok(()) => match self.wrong_stream(*i, stream) {
                        None => {
                            self.take(*i, m);
                            return Ok(());
                        }
                        Some(x) => {
                            if let Some(c) = saved {
                                self.ex.caps = c;
                            }
                            mismatch.get_or_insert((*i, m.clone(), x));
                        }
                    },
                    Err(x) => {
                        mismatch.get_or_insert((*i, m.clone(), x.to_string()));
                    }
                }
            }
            let late = Instant::now() >= deadline;
            if let Some((i, m, x)) = mismatch
                && (self.http.is_none() || late)
            {
                self.take(i, &m);
                return Err(StepError::Fail(format!("{x}\n  arrived: {}", compact(&m))));
            }
            if late {
                return Err(StepError::Fail(format!("no message from the bridge within {within:?}")));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `expect` with `or_host`: the next tool-side frame (arms in `ignore` passed over) must
    /// match, unless the host gets a message matching `or_host` first; another host message
    /// (methods in `or_host.ignore` passed over) fails the step when it arrives.
    pub(super) async fn expect_or_host(&mut self, e: &crate::scenario::Expect) -> Result<(), StepError> {
        let Some(h) = &e.or_host else { return self.ex.step(&crate::scenario::Action::Expect(e.clone())).await };
        let within = self.ex.t(e.within);
        let mut deadline = Instant::now() + within;
        loop {
            self.wait_round(&mut deadline, within).await?;
            if let Some((i, m)) = self.heads(&h.ignore).into_iter().next() {
                self.check_reply(i, &m)?;
                let matched = match_value(&h.pattern, Some(&m), &mut self.ex.caps);
                self.take(i, &m);
                return matched.map_err(|x| {
                    StepError::Fail(format!(
                        "the host got a message that is neither the frame expected on the tool side nor the `or_host` answer: {x}\n  arrived: {}",
                        compact(&m)
                    ))
                });
            }
            let poll = (Instant::now() + Duration::from_millis(10)).min(deadline);
            if let Some(v) = self.ex.next_if_any(poll, &e.ignore).await? {
                return crate::scenario::match_envelope(&e.pattern, &v, &mut self.ex.caps)
                    .map_err(|m| StepError::Fail(format!("{m}\n  arrived: {}", compact(&v))));
            }
            if Instant::now() >= deadline {
                return Err(StepError::Fail(format!(
                    "{}, and the host got no message (or_host: the frame, or the host's answer)",
                    self.ex.nothing_within(within)
                )));
            }
        }
    }

    /// `host_expect_comment` (HTTP): an SSE comment line of the bridge, on `stream` when given,
    /// before the time runs out. What else arrives meanwhile stays unread for later steps; a
    /// comment on another stream fails the step at its deadline, naming the stream.
    pub(super) async fn expect_comment(
        &mut self,
        within: Duration,
        stream: Option<&HostStream>,
    ) -> Result<(), StepError> {
        let mut deadline = Instant::now() + within;
        loop {
            self.wait_round(&mut deadline, within).await?;
            let comments: Vec<(u64, Arrival)> = self
                .inbox()
                .into_iter()
                .filter(|(n, e)| !self.consumed.contains(n) && matches!(e, Arrival::Comment { .. }))
                .collect();
            let mut elsewhere = None;
            for (n, e) in comments {
                match self.wrong_stream(n, stream) {
                    None => {
                        self.mark(n);
                        self.record(&e);
                        return Ok(());
                    }
                    Some(why) => {
                        elsewhere.get_or_insert(why);
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(StepError::Fail(match elsewhere {
                    Some(why) => format!("an SSE comment came within {within:?}, but {why}"),
                    None => format!("no SSE comment line from the bridge within {within:?}"),
                }));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// When message `i` is the first page of a paginated answer to one of the host's list
    /// requests (a `nextCursor` in its result): the answer with every page's items, the harness
    /// asking for the following pages itself (BR-MCP-12); otherwise `m` as it is.
    pub(super) async fn whole_list(&mut self, i: u64, m: &Value, deadline: Instant) -> Result<Value, StepError> {
        if let Some(done) = self.pages.merged.get(&i) {
            return Ok(done.clone());
        }
        let Some(method) = m.get("id").and_then(|id| self.pages.requests.get(&compact(id))).copied() else {
            return Ok(m.clone());
        };
        if m.pointer("/result/nextCursor").is_none_or(Value::is_null) {
            return Ok(m.clone());
        }
        let key = LIST_METHODS.iter().find(|(x, _)| *x == method).map_or("", |(_, k)| k);
        let mut whole = m.clone();
        let mut seen = std::collections::BTreeSet::new();
        // The first page stays unread until a step takes it; it goes to the transcript now.
        self.ex.transcript.push(Item::Host { dir: Dir::FromTestee, message: Some(m.clone()), raw: None });
        while let Some(cursor) = whole.pointer("/result/nextCursor").filter(|c| !c.is_null()).cloned() {
            self.ex.found = &["BR-MCP-12"];
            if !cursor.is_string() {
                return Err(StepError::Fail(format!("{method}: nextCursor {} is not a string", compact(&cursor))));
            }
            if !seen.insert(compact(&cursor)) || seen.len() > MAX_PAGES {
                return Err(StepError::Fail(format!(
                    "{method}: the bridge handed out the cursor {} again (or more than {MAX_PAGES} pages): following nextCursor does not end",
                    compact(&cursor)
                )));
            }
            self.pages.sent += 1;
            let id = json!(format!("conform-page-{}", self.pages.sent));
            let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"cursor": cursor}});
            self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: Some(req.clone()), raw: None });
            self.host_send(req.to_string());
            let page = self.response_to(&id, deadline).await.map_err(|e| match e {
                StepError::Fail(x) => StepError::Fail(format!("{method} with the cursor it issued: {x}")),
                e => e,
            })?;
            let Some(items) = page.pointer(&format!("/result/{key}")).and_then(Value::as_array).cloned() else {
                return Err(StepError::Fail(format!(
                    "{method} with the cursor {} it issued: no `{key}` list in the answer: {}",
                    compact(&cursor),
                    compact(&page)
                )));
            };
            let result = whole["result"].as_object_mut().expect("a result with nextCursor is an object");
            match result.get_mut(key).and_then(Value::as_array_mut) {
                Some(all) => all.extend(items),
                None => {
                    result.insert(key.to_owned(), Value::Array(items));
                }
            }
            match page.pointer("/result/nextCursor") {
                Some(next) => result.insert("nextCursor".to_owned(), next.clone()),
                None => result.remove("nextCursor"),
            };
        }
        self.ex.found = &[];
        self.ex.transcript.push(Item::Host {
            dir: Dir::FromTestee,
            message: None,
            raw: Some(format!("<{} pages of {method} {PAGES_JOINED}>", seen.len() + 1)),
        });
        self.pages.merged.insert(i, whole.clone());
        Ok(whole)
    }

    /// The bridge's response with `id` (a request of the harness's own), read wherever it
    /// arrives before `deadline` and marked read; an error response fails.
    pub(super) async fn response_to(&mut self, id: &Value, deadline: Instant) -> Result<Value, StepError> {
        let value = self.answer_to(id, deadline, Duration::from_millis(5)).await?;
        if value.get("error").is_some() {
            return Err(StepError::Fail(format!("the bridge answered with an error: {}", compact(&value))));
        }
        Ok(value)
    }

    /// The bridge's response (result or error) with `id`, read wherever it arrives before
    /// `deadline` and marked read, looking every `poll`.
    pub(super) async fn answer_to(
        &mut self,
        id: &Value,
        deadline: Instant,
        poll: Duration,
    ) -> Result<Value, StepError> {
        loop {
            self.http_check().await?;
            self.ex.poll_pulls().await;
            let found = self.inbox().into_iter().find(|(n, e)| {
                !self.consumed.contains(n)
                    && matches!(e, Arrival::Message { value, .. } if value.get("id") == Some(id) && value.get("method").is_none())
            });
            if let Some((n, Arrival::Message { value, .. })) = found {
                self.take(n, &value);
                return Ok(value);
            }
            if Instant::now() >= deadline {
                return Err(StepError::Fail(format!("no answer to request {} before its deadline", compact(id))));
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Over HTTP, with `host_expect.stream`: why message `i` (a head of [`Run::heads`]) is not on
    /// the stream the step wants; `None` when it is (or when the step wants none).
    pub(super) fn wrong_stream(&self, i: u64, want: Option<&HostStream>) -> Option<String> {
        let (want, h) = (want?, self.http.as_ref()?);
        let on = self.inbox().into_iter().find(|(n, _)| *n == i).map(|(_, e)| e.stream());
        let (expected, name) = match want {
            HostStream::Get => (h.session.get_stream(), "the session's GET event stream".to_owned()),
            HostStream::Request(id) => {
                (h.session.request_stream(id), format!("the response to the POST of request {}", compact(id)))
            }
        };
        if on.is_some() && on == expected {
            return None;
        }
        let actual = match on {
            Some(s) if Some(s) == h.session.get_stream() => "the session's GET event stream".to_owned(),
            Some(s) => match h.session.request_of_stream(s) {
                Some(id) => format!("the response to the POST of request {}", compact(&id)),
                None => format!("HTTP stream {s}"),
            },
            None => "an unknown stream".to_owned(),
        };
        Some(format!("the message arrived on {actual}, expected on {name}"))
    }

    /// No bridge message (except `ignore`d methods) for `d`.
    pub(super) async fn expect_no_host(&mut self, d: Duration, ignore: &[String]) -> Result<(), StepError> {
        let mut deadline = Instant::now() + d;
        loop {
            self.wait_round(&mut deadline, d).await?;
            if let Some((i, m)) = self.heads(ignore).into_iter().next() {
                self.check_reply(i, &m)?;
                self.take(i, &m);
                return Err(StepError::Fail(format!("expected no message for {d:?}, got {}", compact(&m))));
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The start-up watchdog's deadline for the first HTTP send: `T_START` (scaled) from now, and
    /// never past the scenario's budget.
    pub(super) fn watchdog(&self) -> Instant {
        (Instant::now() + self.ex.t(crate::scenario::T_START)).min(self.budget_end - Duration::from_millis(300))
    }

    /// Over HTTP: fails when the start-up watchdog gave up on the endpoint, or when the bridge
    /// exited with sends queued before it ever accepted a connection.
    pub(super) async fn http_check(&mut self) -> Result<(), StepError> {
        let Some(h) = &self.http else { return Ok(()) };
        if let Some(f) = h.session.failure() {
            return Err(StepError::Fail(format!("{f}; the bridge is killed")));
        }
        if h.session.pending() > 0 && !h.session.listening() {
            let url = h.url.clone();
            if let Some(st) = self.host.wait_exit(Duration::ZERO).await {
                return Err(StepError::Fail(format!("the bridge exited ({st}) before accepting connections at {url}")));
            }
        }
        Ok(())
    }

    /// Over HTTP: sends are queued and the endpoint has not accepted a connection yet. The time
    /// of a host expectation starts only once it has (the start-up watchdog bounds the wait).
    pub(super) fn starting(&self) -> bool {
        self.http.as_ref().is_some_and(|h| h.session.pending() > 0 && !h.session.listening())
    }

    /// Sends one host message (`json`) or line (`raw`): a line on stdin, or a queued POST.
    pub(super) fn host_send(&mut self, bytes: String) {
        self.host_send_with(bytes, &[]);
    }

    /// [`Self::host_send`] with headers for its POST (`host_send.headers`; ignored over stdio,
    /// where the loader refuses them).
    pub(super) fn host_send_with(&mut self, bytes: String, headers: &[(String, String)]) {
        match serde_json::from_str::<Value>(&bytes) {
            Ok(v) if v.is_object() => {
                if let (Some(_), Some(id)) = (v.get("method"), v.get("id")) {
                    *self.pages.asked.entry(compact(id)).or_default() += 1;
                }
            }
            _ => self.pages.opaque = true,
        }
        let watchdog = self.watchdog();
        match &self.http {
            None => self.host.send_line(&bytes),
            Some(h) if headers.is_empty() => h.session.send(HttpSend::Post(bytes.into_bytes()), watchdog),
            Some(h) => h.session.send(HttpSend::PostWith(bytes.into_bytes(), headers.to_vec()), watchdog),
        }
    }
}

/// Whether `m` is a JSON-RPC response (an id, a result or an error, no method).
fn is_response(m: &Value) -> bool {
    m.get("method").is_none() && m.get("id").is_some() && (m.get("result").is_some() || m.get("error").is_some())
}
