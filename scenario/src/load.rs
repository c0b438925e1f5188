//! Reading scenario files: serde-saphyr for the structure (unknown keys rejected), then every
//! check that needs the spec, the schema or the steps before — each error with its
//! `file:line:col`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use protomcp_proto::dynamic::{DynErrorKind, PathSeg};
use protomcp_proto::envelopes::Arm;
use regex::Regex;
use serde_saphyr::Spanned;

use super::error::{ScenarioError, ScenarioErrors};
use super::model::*;
use super::pattern::{Compiler, Pattern};
use super::raw::{self, Ms, RawScenario, RawStep, RawStepEntry};
use super::template::{self, Template};
use super::yaml::{Loc, Node, NodeKind};
use crate::Misbehave;
use crate::requirements::{self, Level, strength};

/// Largest scenario file the loader reads.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Loads one scenario file.
pub fn load_file(path: &Path) -> Result<Scenario, ScenarioErrors> {
    let text = read(path)?;
    parse_str(path, &text)
}

fn read(path: &Path) -> Result<String, ScenarioError> {
    let io = |e: std::io::Error| ScenarioError::new(path, Loc::default(), format!("cannot read: {e}"));
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(ScenarioError::new(
            path,
            Loc::default(),
            format!("{} bytes is more than a scenario file may have ({MAX_FILE_BYTES})", meta.len()),
        ));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    String::from_utf8(bytes).map_err(|e| {
        ScenarioError::new(path, Loc::default(), format!("not UTF-8 (at byte {})", e.utf8_error().valid_up_to()))
    })
}

/// Every `*.yaml` / `*.yml` file under `root`, recursively, sorted by path. Directories and
/// files whose name starts with `.` are skipped; symbolic links to directories are not followed.
pub fn scenario_files(root: &Path) -> Result<Vec<PathBuf>, ScenarioError> {
    fn walk(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) -> Result<(), ScenarioError> {
        let io = |e: std::io::Error| ScenarioError::new(dir, Loc::default(), format!("cannot list the directory: {e}"));
        if depth > 32 {
            return Err(ScenarioError::new(dir, Loc::default(), "directories nested more than 32 deep"));
        }
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type().map_err(io)?;
            if kind.is_dir() && depth == 0 && entry.file_name() == "proto-mcp" {
                // Another profile's catalogue, in its own language (harness::proto_mcp).
                continue;
            }
            if kind.is_dir() {
                walk(&path, depth + 1, out)?;
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") && path.is_file() {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, 0, &mut out)?;
    out.sort();
    Ok(out)
}

/// Loads every scenario under `root` (see [`scenario_files`]), sorted by path. Every file is
/// read even after an error, so that all problems are reported at once; scenario ids must be
/// unique across the directory.
pub fn load_dir(root: &Path) -> Result<Vec<Scenario>, ScenarioErrors> {
    let files = scenario_files(root)?;
    let mut scenarios = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<String, (PathBuf, Loc)> = HashMap::new();
    for file in files {
        match load_file(&file) {
            Ok(s) => {
                if let Some((first, loc)) = seen.get(&s.id) {
                    errors.push(ScenarioError::new(
                        &s.file,
                        s.id_loc,
                        format!(
                            "duplicate scenario id `{}`: also defined at {}:{}:{}",
                            s.id,
                            first.display(),
                            loc.line,
                            loc.col
                        ),
                    ));
                } else {
                    seen.insert(s.id.clone(), (s.file.clone(), s.id_loc));
                }
                scenarios.push(s);
            }
            Err(e) => errors.extend(e.0),
        }
    }
    if errors.is_empty() { Ok(scenarios) } else { Err(ScenarioErrors(errors)) }
}

/// Parses and checks one scenario. `file` is only used for error messages and
/// [`Scenario::file`].
pub fn parse_str(file: &Path, text: &str) -> Result<Scenario, ScenarioErrors> {
    let raw: RawScenario = match serde_saphyr::from_str_with_options(text, super::yaml::options()) {
        Ok(r) => r,
        Err(e) => {
            let loc = e.location().map(|l| Loc::of(&l)).filter(|l| l.is_known()).unwrap_or(Loc::new(1, 1));
            return Err(ScenarioError::new(file, loc, super::yaml::plain_message(&e)).into());
        }
    };
    let mut c = Checker { file, errors: Vec::new() };
    let scenario = c.scenario(raw);
    if c.errors.is_empty() {
        Ok(scenario)
    } else {
        c.errors.sort_by_key(|e| (e.line, e.col));
        Err(ScenarioErrors(c.errors))
    }
}

fn loc<T>(s: &Spanned<T>) -> Loc {
    Loc::of_spanned(s)
}

fn ms(d: Option<&Spanned<Ms>>, default: Duration) -> Duration {
    d.map_or(default, |m| Duration::from_millis(m.value.0))
}

fn id_syntax() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*(?:\.[a-z0-9]+(?:[-_][a-z0-9]+)*)+$").expect("valid"))
}

fn env_name() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").expect("valid"))
}

struct Checker<'a> {
    file: &'a Path,
    errors: Vec<ScenarioError>,
}

/// What the steps so far did to the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Open,
    /// `close: {mode: write}` at this place.
    WriteClosed(Loc),
    /// `close: {}` at this place.
    Closed(Loc),
}

impl Checker<'_> {
    fn error(&mut self, loc: Loc, message: impl Into<String>) {
        self.errors.push(ScenarioError::new(self.file, loc, message));
    }

    fn scenario(&mut self, raw: RawScenario) -> Scenario {
        let id = raw.id.value.trim().to_owned();
        if !id_syntax().is_match(&id) {
            self.error(
                loc(&raw.id),
                format!("scenario id `{id}` must be lowercase words joined by dots (at least two), e.g. calls.request-id-echo"),
            );
        }
        let title = raw.title.value.trim().to_owned();
        if title.is_empty() {
            self.error(loc(&raw.title), "the title is empty");
        }
        let role = match raw.role.value.as_str() {
            "tool-process" => Role::ToolProcess,
            "bridge" => Role::Bridge,
            other => {
                self.error(loc(&raw.role), format!("unknown role `{other}`; valid: tool-process, bridge"));
                Role::ToolProcess
            }
        };
        let level = match raw.level.value.as_str() {
            "MUST" => Level::Must,
            "SHOULD" => Level::Should,
            "MAY" => Level::May,
            other => {
                self.error(loc(&raw.level), format!("unknown level `{other}`; valid: MUST, SHOULD, MAY"));
                Level::Must
            }
        };
        let needs = self.needs(raw.needs.as_ref(), role);
        let reqs = self.requirements(&raw.requirements, role, &needs, "a scenario");
        self.check_level(&raw.level, level, &reqs);
        let timeout = raw.timeout_ms.as_ref().and_then(|t| {
            if t.value.0 == 0 {
                self.error(loc(t), "timeout_ms must be at least 1");
                None
            } else {
                Some(Duration::from_millis(t.value.0))
            }
        });
        let testee = match &raw.testee {
            Some(t) => self.testee(t, role, &needs),
            None => TesteeSetup::default(),
        };
        let host_requests = match &raw.host_requests {
            None => HostRequests::Auto,
            Some(h) => match HostRequests::NAMES.iter().find(|(n, _)| *n == h.value) {
                Some((_, v)) if role == Role::Bridge => *v,
                Some(_) => {
                    self.error(loc(h), "host_requests belongs to bridge scenarios (role: bridge)");
                    HostRequests::Auto
                }
                None => {
                    self.error(loc(h), format!("unknown host_requests `{}`; valid: auto, manual", h.value));
                    HostRequests::Auto
                }
            },
        };
        let stale_socket = match &raw.stale_socket {
            Some(b) if b.value && role != Role::Bridge => {
                self.error(loc(b), "stale_socket belongs to bridge scenarios (role: bridge)");
                false
            }
            Some(b) => b.value,
            None => false,
        };
        let shared_tmp = match &raw.shared_tmp {
            Some(b) if b.value && role != Role::Bridge => {
                self.error(loc(b), "shared_tmp belongs to bridge scenarios (role: bridge)");
                false
            }
            Some(b) => b.value,
            None => false,
        };
        let transports = self.transports(raw.transports.as_ref(), role);
        let steps = self.steps(&raw.steps, &testee, role, &needs);
        self.check_role_steps(&steps, role);
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| matches!(st.action, Action::HostHttp(_)))
        {
            self.error(st.loc, "`host_http` needs `transports: [http]` (it is a request over HTTP)");
        }
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| st.host.is_some())
        {
            self.error(st.loc, "`host` needs `transports: [http]` (a second host is a second HTTP session)");
        }
        if transports != [Transport::Http]
            && let Some(st) = steps.iter().find(|st| matches!(&st.action, Action::HostExpect(e) if e.stream.is_some()))
        {
            self.error(st.loc, "`host_expect.stream` needs `transports: [http]` (streams are HTTP's)");
        }
        // `{socket}` is the bridge's socket only when the bridge command passes it (feature `socket`).
        let has_socket = needs.iter().any(|(n, _)| n == "socket");
        if !has_socket {
            if let Some(b) = raw.stale_socket.as_ref().filter(|b| b.value) {
                self.error(loc(b), "`stale_socket` needs `needs: [socket]` (the bridge is given `--socket {socket}`)");
            }
            if let Some(st) = steps.iter().find(|st| matches!(st.action, Action::ExpectSocket { .. })) {
                self.error(st.loc, "`expect_socket` needs `needs: [socket]` (the bridge is given `--socket {socket}`)");
            }
        }
        Scenario {
            file: self.file.to_owned(),
            id,
            id_loc: loc(&raw.id),
            title,
            requirements: reqs.into_iter().map(|(r, _)| r).collect(),
            level,
            role,
            needs: needs.into_iter().map(|(n, _)| n).collect(),
            notes: raw.notes.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()),
            timeout,
            testee,
            host_requests,
            stale_socket,
            shared_tmp,
            transports,
            exclusive: raw.exclusive.as_ref().is_some_and(|b| b.value),
            steps,
        }
    }

    /// `tool_handshake.middleware`: a list of RegisterMiddlewareRequest trees (`{name, priority}`).
    fn registrations(&mut self, node: Option<&Node>) -> Option<Vec<serde_json::Value>> {
        let Some(n) = node else { return Some(Vec::new()) };
        let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
        let serde_json::Value::Array(items) = v else {
            self.error(n.loc, "`middleware` is a list of {name, priority}");
            return None;
        };
        for item in &items {
            let tree = serde_json::json!({"request_id": "", "register_middleware": item});
            if let Err(e) = Template::new(tree) {
                self.error(n.loc, e.to_string());
                return None;
            }
        }
        Some(items)
    }

    /// `transports: [stdio]`: the bridge transports a bridge scenario applies to.
    fn transports(&mut self, raw: Option<&Spanned<Vec<Spanned<String>>>>, role: Role) -> Vec<Transport> {
        let Some(raw) = raw else { return Vec::new() };
        if role != Role::Bridge {
            self.error(loc(raw), "`transports` applies to bridge scenarios only (role: bridge)");
            return Vec::new();
        }
        if raw.value.is_empty() {
            self.error(loc(raw), "`transports` needs at least one transport (stdio, http); leave it out for all");
        }
        let mut out = Vec::new();
        for t in &raw.value {
            match Transport::parse(t.value.trim()) {
                Some(x) if out.contains(&x) => self.error(loc(t), format!("transport `{}` is listed twice", x.name())),
                Some(x) => out.push(x),
                None => self.error(loc(t), format!("unknown transport `{}`; valid: stdio, http", t.value)),
            }
        }
        out
    }

    /// `host: NAME` of a host step: letters, digits, `-` and `_`.
    fn step_host(&mut self, step: &RawStep) -> Option<String> {
        let h = match step {
            RawStep::HostSend(h) => h.host.as_ref(),
            RawStep::HostExpect(h) => h.host.as_ref(),
            RawStep::HostExpectNothing(h) => h.host.as_ref(),
            RawStep::HostClose(h) => h.host.as_ref(),
            _ => None,
        }?;
        let ok = !h.value.is_empty() && h.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            self.error(loc(h), format!("host `{}`: a name of letters, digits, `-` and `_`", h.value));
            return None;
        }
        Some(h.value.clone())
    }

    /// `host_expect.stream`: `get`, or `{request: ID}` (a JSON-RPC id: a number or a string).
    fn host_stream(&mut self, n: &Node) -> Option<HostStream> {
        let wrong = "`stream` is `get` (the session's GET event stream) or `{request: ID}` (the response to the POST that carried the request with that id)";
        match &n.kind {
            NodeKind::Str(s) if s == "get" => Some(HostStream::Get),
            NodeKind::Map(entries) if entries.len() == 1 && entries[0].0.name == "request" => {
                match n.to_value().ok().and_then(|v| v.get("request").cloned()) {
                    Some(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_))) => {
                        Some(HostStream::Request(id))
                    }
                    _ => {
                        self.error(entries[0].1.loc, "`stream.request` is a JSON-RPC id: a number or a string");
                        None
                    }
                }
            }
            _ => {
                self.error(n.loc, wrong);
                None
            }
        }
    }

    /// A `host_http` step: method, headers (a mapping of strings), session and the expectation.
    fn host_http(&mut self, h: &raw::RawHostHttp, compiler: &mut Compiler) -> Option<HostHttp> {
        let method = match &h.method {
            None => "POST".to_owned(),
            Some(m) if !m.value.is_empty() && m.value.bytes().all(|b| b.is_ascii_uppercase()) => m.value.clone(),
            Some(m) => {
                self.error(loc(m), format!("`{}` is not an HTTP method (upper-case letters, e.g. POST)", m.value));
                return None;
            }
        };
        let path = match &h.path {
            Some(p) if !p.value.starts_with('/') || p.value.contains(char::is_whitespace) => {
                self.error(loc(p), "a path starts with `/` and holds no white space");
                return None;
            }
            p => p.as_ref().map(|p| p.value.clone()),
        };
        let mut headers = Vec::new();
        if let Some(n) = &h.headers {
            let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
            let serde_json::Value::Object(map) = v else {
                self.error(n.loc, "`headers` is a mapping of header names to strings");
                return None;
            };
            for (name, value) in map {
                let ok_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                match value {
                    serde_json::Value::String(v) if ok_name && !v.contains(['\r', '\n']) => headers.push((name, v)),
                    _ => {
                        self.error(n.loc, format!("header `{name}`: a token name and a one-line string value"));
                        return None;
                    }
                }
            }
        }
        // `${name}` in the session id, header values and body: captures of earlier steps.
        let hloc = h.headers.as_ref().map_or(Loc::default(), |n| n.loc);
        let mut texts: Vec<(&str, Loc)> = headers.iter().map(|(_, v)| (v.as_str(), hloc)).collect();
        texts.extend(h.session.iter().chain(h.body.iter()).map(|t| (t.value.as_str(), loc(t))));
        for (text, at) in texts {
            match template::parse(text) {
                Ok(pieces) => {
                    for p in pieces {
                        if let template::Piece::Var(name) = p {
                            compiler.used.push((name, at));
                        }
                    }
                }
                Err(msg) => {
                    self.error(at, msg);
                    return None;
                }
            }
        }
        let session = match h.session.as_ref().map(|s| s.value.as_str()) {
            None | Some("current") => HttpSessionRef::Current,
            Some("none") => HttpSessionRef::None,
            Some(other) => HttpSessionRef::Literal(other.to_owned()),
        };
        let within = self.within(h.within_ms.as_ref(), T_PROMPT);
        let mut pat = |n: &Option<Node>, this: &mut Self| match n {
            None => Some(None),
            Some(n) => this.pattern(compiler.value(n)).map(Some),
        };
        let status = pat(&h.expect.status, self)?;
        let expect_headers = pat(&h.expect.headers, self)?;
        let expect_body = pat(&h.expect.body, self)?;
        if status.is_none() && expect_headers.is_none() && expect_body.is_none() {
            self.error(Loc::default(), "host_http: `expect` needs `status`, `headers` or `body`");
            return None;
        }
        Some(HostHttp {
            method,
            path,
            headers,
            body: h.body.as_ref().map(|b| b.value.clone()).unwrap_or_default(),
            session,
            within,
            status,
            expect_headers,
            expect_body,
        })
    }

    /// Host steps and `tool_handshake` belong to bridge scenarios; the bridge-side `handshake`,
    /// `expect_alive` and `expect_no_connect` to tool-process scenarios.
    fn check_role_steps(&mut self, steps: &[Step], role: Role) {
        for st in steps {
            let a = &st.action;
            if a.bridge_only() && role != Role::Bridge {
                self.error(st.loc, format!("`{}` belongs to bridge scenarios (role: bridge)", a.keyword()));
            }
            if a.tool_process_only() && role == Role::Bridge {
                self.error(
                    st.loc,
                    format!(
                        "`{}` belongs to tool-process scenarios; a bridge scenario uses tool_handshake",
                        a.keyword()
                    ),
                );
            }
        }
    }

    fn needs(&mut self, needs: Option<&Spanned<Vec<Spanned<String>>>>, role: Role) -> Vec<(String, Loc)> {
        let mut out: Vec<(String, Loc)> = Vec::new();
        let known = requirements::features(role.party());
        for n in needs.map(|n| n.value.as_slice()).unwrap_or_default() {
            let name = n.value.as_str();
            if !known.contains(&name) {
                self.error(
                    loc(n),
                    format!(
                        "unknown feature `{name}` for role {}; valid: {}",
                        if role == Role::Bridge { "bridge" } else { "tool-process" },
                        known.join(", ")
                    ),
                );
            } else if out.iter().any(|(o, _)| o == name) {
                self.error(loc(n), format!("feature `{name}` is listed twice"));
            } else {
                out.push((name.to_owned(), loc(n)));
            }
        }
        out
    }

    fn requirements(
        &mut self,
        list: &Spanned<Vec<Spanned<String>>>,
        role: Role,
        needs: &[(String, Loc)],
        what: &str,
    ) -> Vec<(&'static requirements::Requirement, Loc)> {
        if list.value.is_empty() {
            self.error(loc(list), format!("{what} must cite at least one requirement"));
        }
        let mut out: Vec<(&'static requirements::Requirement, Loc)> = Vec::new();
        for item in &list.value {
            let id = item.value.trim();
            let at = loc(item);
            let Some(r) = requirements::get(id) else {
                self.error(at, unknown_requirement(id));
                continue;
            };
            if r.withdrawn {
                self.error(at, format!("{id} is withdrawn and cannot be cited"));
            }
            if r.party() != role.party() {
                self.error(
                    at,
                    format!(
                        "{id} is an obligation of a {}, but this scenario's role is {}",
                        r.party(),
                        if role == Role::Bridge { "bridge" } else { "tool-process" }
                    ),
                );
            }
            if let Some(f) = r.feature
                && !needs.iter().any(|(n, _)| n == f)
            {
                self.error(at, format!("{id} depends on feature `{f}`: add it to `needs`"));
            }
            if out.iter().any(|(o, _)| o.id == r.id) {
                self.error(at, format!("{id} is cited twice"));
                continue;
            }
            out.push((r, at));
        }
        out
    }

    /// The scenario's level must lie between the weakest and the strongest level it cites: a
    /// failure must never be reported stronger than any cited requirement allows, nor weaker
    /// than all of them.
    fn check_level(&mut self, at: &Spanned<String>, level: Level, reqs: &[(&'static requirements::Requirement, Loc)]) {
        let Some(max) = reqs.iter().map(|(r, _)| r.level).max_by_key(|l| strength(*l)) else { return };
        let min = reqs.iter().map(|(r, _)| r.level).min_by_key(|l| strength(*l)).expect("non-empty");
        let cited = reqs.iter().map(|(r, _)| format!("{} {}", r.id, r.level)).collect::<Vec<_>>().join(", ");
        if strength(level) > strength(max) {
            self.error(loc(at), format!("level {level} is stronger than every requirement cited ({cited}); use {max}"));
        } else if strength(level) < strength(min) {
            self.error(loc(at), format!("level {level} is weaker than every requirement cited ({cited}); use {min}"));
        }
    }

    fn testee(&mut self, t: &Spanned<raw::RawTestee>, role: Role, needs: &[(String, Loc)]) -> TesteeSetup {
        let t = &t.value;
        let mut out = TesteeSetup::default();
        if let Some(m) = &t.middleware {
            out.middleware = m.value;
            if m.value && !needs.iter().any(|(n, _)| n == "middleware") {
                self.error(loc(m), "the middleware variant needs `middleware` in `needs`");
            }
        }
        if let Some(m) = &t.misbehave {
            match m.value.parse::<Misbehave>() {
                Ok(kind) if role == Role::ToolProcess => out.misbehave = Some(kind),
                Ok(_) => self.error(loc(m), "misbehave applies to the reference testee (role tool-process) only"),
                Err(_) => self.error(
                    loc(m),
                    format!("unknown misbehave kind `{}`; valid: {}", m.value, Misbehave::NAMES.join(", ")),
                ),
            }
        }
        if let Some(s) = &t.socket {
            match SocketSetup::NAMES.iter().find(|(n, _)| *n == s.value) {
                Some((_, setup)) => out.socket = *setup,
                None => {
                    let valid: Vec<&str> = SocketSetup::NAMES.iter().map(|(n, _)| *n).collect();
                    self.error(loc(s), format!("unknown socket setup `{}`; valid: {}", s.value, valid.join(", ")));
                }
            }
        }
        if let Some(env) = &t.env {
            out.env = self.env(env);
        }
        out
    }

    fn env(&mut self, node: &Node) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        let Some(entries) = node.as_map() else {
            self.error(
                node.loc,
                format!("`env` is a mapping of variable names to values, found {}", node.kind.describe()),
            );
            return out;
        };
        for (k, v) in entries {
            if !env_name().is_match(&k.name) {
                self.error(k.loc, format!("`{}` is not an environment variable name", k.name));
                continue;
            }
            if k.name == protomcp_proto::spec::ENV_SOCKET {
                self.error(k.loc, "PROTOMCP_SOCKET belongs to the harness; use `testee.socket` to break it");
                continue;
            }
            let value = match &v.kind {
                NodeKind::Null => None,
                NodeKind::Str(s) => Some(s.clone()),
                NodeKind::Bool(b) => Some(b.to_string()),
                NodeKind::Int(i) => Some(i.to_string()),
                NodeKind::Float(f) => Some(f.to_string()),
                other => {
                    self.error(
                        v.loc,
                        format!("an environment value is a scalar (or null to unset it), found {}", other.describe()),
                    );
                    continue;
                }
            };
            if value.as_deref().is_some_and(|s| s.contains('\0')) {
                self.error(v.loc, "an environment value cannot hold a NUL character");
                continue;
            }
            out.insert(k.name.clone(), value);
        }
        out
    }

    fn steps(
        &mut self,
        steps: &Spanned<Vec<Spanned<RawStepEntry>>>,
        testee: &TesteeSetup,
        role: Role,
        needs: &[(String, Loc)],
    ) -> Vec<Step> {
        if steps.value.is_empty() {
            self.error(loc(steps), "a scenario needs at least one step");
        }
        let mut out = Vec::new();
        let mut defined: HashSet<String> = HashSet::new();
        let mut conn = Conn::Open;
        for step in &steps.value {
            let at = loc(step);
            let mut compiler = Compiler::default();
            let checks = match &step.value.checks {
                Some(list) => {
                    self.requirements(list, role, needs, "a step's `checks`").into_iter().map(|(r, _)| r).collect()
                }
                None => Vec::new(),
            };
            let Some(action) = self.action(&step.value.step, &mut compiler) else { continue };
            for (name, used_at) in &compiler.used {
                if !defined.contains(name) {
                    self.error(
                        *used_at,
                        format!(
                            "`${{{name}}}` is not defined: no earlier step captures `{name}` (with {{capture: {name}}})"
                        ),
                    );
                }
            }
            defined.extend(compiler.defined);
            if testee.socket != SocketSetup::Normal && action.needs_connection() {
                self.error(
                    at,
                    format!(
                        "`{}` needs the connection, but with testee.socket set the testee never connects: only expect_exit, expect_no_connect, sleep and signal apply",
                        action.keyword()
                    ),
                );
            }
            match conn {
                // A bridge restarts its tool process: the next tool-side step (`tool_handshake`
                // or any other) plays the new one.
                Conn::Closed(_) if role == Role::Bridge && action.needs_connection() => conn = Conn::Open,
                Conn::Closed(closed) if action.needs_connection() => self.error(
                    at,
                    format!("`{}` needs the connection, which the `close` step at {closed} closed", action.keyword()),
                ),
                Conn::WriteClosed(closed) if action.writes() => self.error(
                    at,
                    format!(
                        "`{}` writes to the connection, whose sending side the `close` step at {closed} shut down",
                        action.keyword()
                    ),
                ),
                _ => {}
            }
            match action {
                Action::Close(CloseMode::Both) => conn = Conn::Closed(at),
                Action::Close(CloseMode::Write) => conn = Conn::WriteClosed(at),
                Action::ToolHandshake(_) => conn = Conn::Open,
                _ => {}
            }
            let host = self.step_host(&step.value.step);
            out.push(Step { loc: at, action, checks, host });
        }
        out
    }

    fn within(&mut self, d: Option<&Spanned<Ms>>, default: Duration) -> Duration {
        if let Some(m) = d
            && m.value.0 == 0
        {
            self.error(loc(m), "a time must be at least 1 ms");
        }
        ms(d, default)
    }

    /// A `soak` step: its defaults (a sample every 20th of the rounds, a tenth of them as
    /// warm-up, 5 s a round) and that enough samples follow the warm-up to judge.
    fn soak(&mut self, k: &super::raw::RawSoak) -> Option<Soak> {
        let repeat = k.repeat.value;
        if repeat == 0 {
            self.error(loc(&k.repeat), "`repeat` must be at least 1");
            return None;
        }
        let mut mix = Vec::new();
        for m in &k.mix.value {
            match SoakCall::NAMES.iter().find(|(_, n)| *n == m.value) {
                Some((c, _)) => mix.push(*c),
                None => {
                    let valid: Vec<&str> = SoakCall::NAMES.iter().map(|(_, n)| *n).collect();
                    self.error(
                        loc(m),
                        format!("unknown call `{}` in a soak's mix; valid: {}", m.value, valid.join(", ")),
                    );
                    return None;
                }
            }
        }
        if mix.is_empty() {
            self.error(loc(&k.mix), "a soak's `mix` needs at least one call");
            return None;
        }
        if mix.contains(&SoakCall::Reload) && mix.len() > 1 {
            self.error(loc(&k.mix), "`reload` stands alone in a soak's mix (a round is one reload and its burst)");
            return None;
        }
        let sample_every = k.sample_every.as_ref().map_or((repeat / 20).max(1), |s| s.value);
        if sample_every == 0 {
            self.error(k.sample_every.as_ref().map(loc).unwrap_or(loc(&k.repeat)), "`sample_every` must be at least 1");
            return None;
        }
        let warmup = k.warmup.as_ref().map_or(repeat / 10, |w| w.value);
        // The samples the verdict reads: round 0, every multiple of sample_every, and the last
        // round, those at or after the warm-up.
        let multiples = |n: u64| n / sample_every;
        let read = if warmup > repeat {
            0
        } else {
            let from = if warmup == 0 { 0 } else { multiples(warmup - 1) };
            let at_zero = u64::from(warmup == 0);
            let last = u64::from(!repeat.is_multiple_of(sample_every));
            multiples(repeat) - from + at_zero + last
        };
        if read < crate::LEAK_MIN_SAMPLES as u64 {
            self.error(
                loc(&k.repeat),
                format!(
                    "a soak of {repeat} rounds sampled every {sample_every} with a warm-up of {warmup} leaves {read} samples to judge; at least {} are needed",
                    crate::LEAK_MIN_SAMPLES
                ),
            );
            return None;
        }
        // Every sample is kept (for the report) and read /proc for each process of the group.
        const MAX_SAMPLES: u64 = 10_000;
        if repeat / sample_every > MAX_SAMPLES {
            self.error(
                k.sample_every.as_ref().map(loc).unwrap_or(loc(&k.repeat)),
                format!(
                    "a soak of {repeat} rounds sampled every {sample_every} takes {} samples; at most {MAX_SAMPLES} are kept: sample less often",
                    repeat / sample_every
                ),
            );
            return None;
        }
        let within = self.within(k.within_ms.as_ref(), Duration::from_secs(5));
        Some(Soak { repeat, mix, sample_every, warmup, within })
    }

    fn ignore(&mut self, list: Option<&Vec<Spanned<String>>>) -> Vec<Arm> {
        let mut out = Vec::new();
        for item in list.map(Vec::as_slice).unwrap_or_default() {
            match Arm::from_name(&item.value) {
                Some(arm) => out.push(arm),
                None => {
                    let valid: Vec<&str> = Arm::ALL.iter().map(|a| a.name()).collect();
                    self.error(loc(item), format!("unknown arm `{}`; valid: {}", item.value, valid.join(", ")));
                }
            }
        }
        out
    }

    fn pattern(&mut self, r: Result<Pattern, super::pattern::PatternError>) -> Option<Pattern> {
        r.map_err(|e| self.error(e.loc, e.message)).ok()
    }

    /// A send template: placeholders checked (and recorded as used), then the tree checked
    /// against the schema.
    fn template(&mut self, node: &Node, compiler: &mut Compiler) -> Option<Template> {
        let mut ok = true;
        walk_strings(node, &mut |s, at| match template::parse(s) {
            Ok(pieces) => {
                for p in pieces {
                    if let template::Piece::Var(name) = p {
                        compiler.used.push((name, at));
                    }
                }
            }
            Err(m) => {
                ok = false;
                self.errors.push(ScenarioError::new(self.file, at, m));
            }
        });
        if !ok {
            return None;
        }
        let tree = match node.to_value() {
            Ok(t) => t,
            Err((at, m)) => {
                self.error(at, m);
                return None;
            }
        };
        match Template::new(tree) {
            Ok(t) => Some(t),
            Err(e) => {
                // An unknown name is reported at the key; anything else at the value.
                let at = match (&e.kind, e.path.split_last()) {
                    (DynErrorKind::UnknownField { .. }, Some((PathSeg::Key(k), parent))) => {
                        node.locate_node(parent).and_then(|n| n.key_loc(k)).unwrap_or_else(|| node.locate(&e.path))
                    }
                    _ => node.locate(&e.path),
                };
                self.error(at, e.to_string());
                None
            }
        }
    }

    fn hex(&mut self, s: &Spanned<String>) -> Option<Vec<u8>> {
        protomcp_proto::dynamic::hex_decode(&s.value).map_err(|m| self.error(loc(s), format!("invalid hex: {m}"))).ok()
    }

    fn names(&mut self, list: &[Spanned<String>], what: &str) -> Vec<String> {
        let mut out = Vec::new();
        for n in list {
            if n.value.is_empty() {
                self.error(loc(n), format!("a {what} name cannot be empty"));
            }
            out.push(n.value.clone());
        }
        out
    }

    fn action(&mut self, step: &RawStep, compiler: &mut Compiler) -> Option<Action> {
        Some(match step {
            RawStep::Handshake(h) => {
                let rid = match &h.rid {
                    Some(r) if r.value.is_empty() => {
                        self.error(loc(r), "the handshake's rid cannot be empty (BR-HANDSHAKE-01)");
                        return None;
                    }
                    Some(r) => r.value.clone(),
                    None => DEFAULT_HANDSHAKE_RID.to_owned(),
                };
                let hidden = h.hidden.as_deref().map(|l| self.names(l, "tool"));
                let middleware = h.middleware.as_deref().map(|l| self.names(l, "middleware"));
                let tool_list = match &h.tool_list {
                    Some(n) => Some(self.pattern(compiler.message(n, "ToolListResponse"))?),
                    None => None,
                };
                let within = self.within(h.within_ms.as_ref(), T_START);
                Action::Handshake(Handshake { rid, hidden, middleware, tool_list, within })
            }
            RawStep::Send(node) => Action::Send(self.template(node, compiler)?),
            RawStep::SendRaw(r) => {
                let bytes = self.hex(&r.hex)?;
                if bytes.is_empty() {
                    self.error(loc(&r.hex), "send_raw needs at least one byte");
                    return None;
                }
                Action::SendRaw(bytes)
            }
            RawStep::SendFrame(f) => {
                let body = match (&f.body_hex, &f.body) {
                    (Some(_), Some(b)) => {
                        self.error(b.loc, "give the frame's body as `body_hex` or as `body`, not both");
                        return None;
                    }
                    (Some(h), None) => FrameBody::Hex(self.hex(h)?),
                    (None, Some(b)) => FrameBody::Envelope(self.template(b, compiler)?),
                    (None, None) => FrameBody::Hex(Vec::new()),
                };
                Action::SendFrame(SendFrame { length: f.length.as_ref().map(|l| l.value), body })
            }
            RawStep::Expect(e) => {
                let pattern = self.pattern(compiler.envelope(&e.envelope));
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let ignore = self.ignore(e.ignore.as_ref());
                Action::Expect(Expect { pattern: pattern?, within, ignore })
            }
            RawStep::ExpectAnyOrder(e) => {
                if e.envelopes.value.is_empty() {
                    self.error(loc(&e.envelopes), "expect_any_order needs at least one envelope pattern");
                }
                let mut patterns = Vec::new();
                let mut ok = true;
                for n in &e.envelopes.value {
                    match self.pattern(compiler.envelope(n)) {
                        Some(p) => patterns.push(p),
                        None => ok = false,
                    }
                }
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let ignore = self.ignore(e.ignore.as_ref());
                if !ok {
                    return None;
                }
                Action::ExpectAnyOrder(ExpectAnyOrder { patterns, within, ignore })
            }
            RawStep::ExpectNothing(e) => {
                let duration = self.within(Some(&e.for_ms), T_PROMPT);
                Action::ExpectNothing(ExpectNothing { duration, ignore: self.ignore(e.ignore.as_ref()) })
            }
            RawStep::ExpectClose(w) => Action::ExpectClose { within: self.within(w.within_ms.as_ref(), T_PROMPT) },
            RawStep::ExpectAlive(w) => Action::ExpectAlive { within: self.within(w.within_ms.as_ref(), T_PROMPT) },
            RawStep::ExpectExit(e) => {
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let code = match &e.code {
                    None => ExitCode::Any,
                    Some(n) => match &n.kind {
                        NodeKind::Int(i) => match i32::try_from(*i) {
                            Ok(c) => ExitCode::Exactly(c),
                            Err(_) => {
                                self.error(n.loc, format!("exit code {i} is out of range"));
                                return None;
                            }
                        },
                        NodeKind::Str(s) if s == "nonzero" => ExitCode::NonZero,
                        NodeKind::Str(s) if s == "any" => ExitCode::Any,
                        other => {
                            self.error(
                                n.loc,
                                format!("`code` is an integer, `nonzero` or `any`, found {}", other.describe()),
                            );
                            return None;
                        }
                    },
                };
                let stderr = match &e.stderr {
                    Some(n) => Some(self.pattern(compiler.value(n))?),
                    None => None,
                };
                Action::ExpectExit(ExpectExit { within, code, stderr })
            }
            RawStep::ExpectNoConnect(f) => Action::ExpectNoConnect { duration: self.within(Some(&f.for_ms), T_PROMPT) },
            RawStep::Sleep(s) => Action::Sleep(self.within(Some(&s.ms), T_PROMPT)),
            RawStep::Close(c) => Action::Close(match c.mode.as_ref().map(|m| (m.value.as_str(), loc(m))) {
                None | Some(("both", _)) => CloseMode::Both,
                Some(("write", _)) => CloseMode::Write,
                Some((other, l)) => {
                    self.error(l, format!("unknown close mode `{other}`; valid: both, write"));
                    return None;
                }
            }),
            RawStep::Signal(s) => {
                let name = s.value_name();
                match Signal::NAMES.iter().find(|(n, _)| *n == name) {
                    Some((_, sig)) => Action::Signal(*sig),
                    None => {
                        self.error(
                            loc(&s.name),
                            format!("unknown signal `{}`; valid: TERM, INT, HUP, KILL", s.name.value),
                        );
                        return None;
                    }
                }
            }
            RawStep::HostSend(h) => match (&h.message, &h.line) {
                (Some(m), None) => {
                    let mut ok = true;
                    walk_strings(m, &mut |s, at| match template::parse(s) {
                        Ok(pieces) => {
                            for p in pieces {
                                if let template::Piece::Var(name) = p {
                                    compiler.used.push((name, at));
                                }
                            }
                        }
                        Err(msg) => {
                            ok = false;
                            self.errors.push(ScenarioError::new(self.file, at, msg));
                        }
                    });
                    let v = m.to_value().map_err(|(at, msg)| self.error(at, msg)).ok()?;
                    if !ok {
                        return None;
                    }
                    Action::HostSend(HostLine::Json(v))
                }
                (None, Some(l)) => {
                    if l.value.contains('\n') {
                        self.error(loc(l), "a host_send line cannot hold a newline (it ends the line)");
                        return None;
                    }
                    Action::HostSend(HostLine::Raw(l.value.clone()))
                }
                (Some(m), Some(_)) => {
                    self.error(m.loc, "give host_send a `message` or a `line`, not both");
                    return None;
                }
                (None, None) => {
                    self.error(Loc::default(), "host_send needs a `message` (JSON-RPC) or a `line` (text)");
                    return None;
                }
            },
            RawStep::HostExpect(e) => {
                let pattern = self.pattern(compiler.value(&e.message));
                let within = self.within(e.within_ms.as_ref(), T_PROMPT);
                let ignore = e.ignore.iter().flatten().map(|m| m.value.clone()).collect();
                let stream = match &e.stream {
                    None => None,
                    Some(n) => Some(self.host_stream(n)?),
                };
                Action::HostExpect(HostExpect { pattern: pattern?, within, ignore, stream })
            }
            RawStep::HostExpectNothing(e) => {
                let duration = self.within(Some(&e.for_ms), T_PROMPT);
                let ignore = e.ignore.iter().flatten().map(|m| m.value.clone()).collect();
                Action::HostExpectNothing(HostExpectNothing { duration, ignore })
            }
            RawStep::HostClose(_) => Action::HostClose,
            RawStep::HostHttp(h) => Action::HostHttp(self.host_http(h, compiler)?),
            RawStep::Check(c) => {
                compiler.used.push((c.capture.value.clone(), loc(&c.capture)));
                let pattern = self.pattern(compiler.value(&c.pattern))?;
                Action::Check { capture: c.capture.value.clone(), pattern }
            }
            RawStep::Touch(t) => {
                use std::path::{Component, Path};
                let p = Path::new(&t.path.value);
                let inside = !t.path.value.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
                if !inside {
                    self.error(
                        loc(&t.path),
                        format!(
                            "touch: `{}` must be a relative path inside the scenario's dir (no `..`, not absolute)",
                            t.path.value
                        ),
                    );
                    return None;
                }
                Action::Touch(p.to_owned())
            }
            RawStep::ExpectSocket(e) => Action::ExpectSocket { exists: e.exists.value },
            RawStep::ExpectSocketPrivate(_) => Action::ExpectSocketPrivate,
            RawStep::ToolConnectAgain(w) => {
                Action::ToolConnectAgain { within: self.within(w.within_ms.as_ref(), T_PROMPT) }
            }
            RawStep::ExpectToolExit(w) => {
                Action::ExpectToolExit { within: self.within(w.within_ms.as_ref(), T_PROMPT) }
            }
            RawStep::Soak(k) => Action::Soak(self.soak(k)?),
            RawStep::ReloadBegins(r) => {
                let form = match &r.form {
                    None => ReloadForm::Any,
                    Some(f) => match f.value.as_str() {
                        "any" => ReloadForm::Any,
                        "restart" => ReloadForm::Restart,
                        "request" => ReloadForm::Request,
                        other => {
                            self.error(loc(f), format!("form {other:?}: one of any, restart, request"));
                            ReloadForm::Any
                        }
                    },
                };
                if let Some(x) = &r.refuse
                    && form != ReloadForm::Request
                {
                    self.error(loc(x), "`refuse` answers a ReloadRequest: it needs `form: request`");
                }
                Action::ReloadBegins(ReloadBegins {
                    form,
                    refuse: r.refuse.as_ref().map(|x| x.value.clone()),
                    within: self.within(r.within_ms.as_ref(), T_START),
                })
            }
            RawStep::ToolHandshake(h) => {
                let mut list = |node: &Option<Node>, arm: &str, field: &str| -> Option<Vec<serde_json::Value>> {
                    let Some(n) = node else { return Some(Vec::new()) };
                    let v = n.to_value().map_err(|(at, m)| self.error(at, m)).ok()?;
                    let items = match v {
                        serde_json::Value::Array(items) => items,
                        _ => {
                            self.error(n.loc, format!("`{field}` is a list"));
                            return None;
                        }
                    };
                    let tree = serde_json::json!({"request_id": "x", arm: {field: items.clone()}});
                    if let Err(e) = Template::new(tree) {
                        self.error(n.loc, e.to_string());
                        return None;
                    }
                    Some(items)
                };
                let tools = list(&h.tools, "tool_list", "tools");
                let resources = list(&h.resources, "resource_list_response", "resources");
                let resource_templates = list(&h.resource_templates, "resource_template_list_response", "templates");
                let prompts = list(&h.prompts, "prompt_list_response", "prompts");
                let middleware = self.registrations(h.middleware.as_ref());
                let hidden = h.hidden.iter().flatten().map(|n| n.value.clone()).collect();
                let within = self.within(h.within_ms.as_ref(), T_START);
                Action::ToolHandshake(ToolHandshake {
                    tools: tools?,
                    resources: resources?,
                    resource_templates: resource_templates?,
                    prompts: prompts?,
                    middleware: middleware?,
                    hidden,
                    marker: h.marker.as_ref().is_none_or(|m| m.value),
                    within,
                })
            }
        })
    }
}

impl raw::RawSignal {
    /// The name without a `SIG` prefix.
    fn value_name(&self) -> &str {
        self.name.value.strip_prefix("SIG").unwrap_or(&self.name.value)
    }
}

/// Calls `f` with every string in the tree and where it is.
fn walk_strings(node: &Node, f: &mut dyn FnMut(&str, Loc)) {
    match &node.kind {
        NodeKind::Str(s) => f(s, node.loc),
        NodeKind::Seq(items) => items.iter().for_each(|n| walk_strings(n, f)),
        NodeKind::Map(entries) => entries.iter().for_each(|(_, n)| walk_strings(n, f)),
        _ => {}
    }
}

/// "unknown requirement" with a hint: the right spelling, or the IDs of the area.
fn unknown_requirement(id: &str) -> String {
    let upper = id.to_ascii_uppercase();
    if upper != id && requirements::get(&upper).is_some() {
        return format!("unknown requirement `{id}`; did you mean {upper}?");
    }
    let prefix: String = upper.rsplit_once('-').map(|(p, _)| format!("{p}-")).unwrap_or_default();
    let area: Vec<&str> =
        requirements::all().iter().filter(|r| !prefix.is_empty() && r.id.starts_with(&prefix)).map(|r| r.id).collect();
    match (area.first(), area.last()) {
        (Some(first), Some(last)) => format!("unknown requirement `{id}`; {prefix}* runs from {first} to {last}"),
        _ => format!("unknown requirement `{id}`; IDs look like TP-CALL-01 (see spec/protocol.md)"),
    }
}
