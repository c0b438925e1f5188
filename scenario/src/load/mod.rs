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

mod action;
mod proto_mcp;
mod scenario;
mod steps;

/// Largest scenario file the loader reads.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Loads one scenario file the user names on its own (`--scenarios FILE`): a scenario `explore`
/// shrank or `capture` wrote, say. It is checked as [`parse_str`] checks, but for the `checks:`
/// lint: such a file cites the requirements of the session it replays as a whole. The catalogue
/// and scenario directories ([`load_dir`]) are held to the lint.
pub fn load_file(path: &Path) -> Result<Scenario, ScenarioErrors> {
    let text = read(path)?;
    parse(path, &text, false)
}

/// [`parse_str`] without the `checks:` lint, for scenarios written by a program (`explore`,
/// `capture`) rather than by hand; see [`load_file`].
pub fn parse_generated(file: &Path, text: &str) -> Result<Scenario, ScenarioErrors> {
    parse(file, text, false)
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
                // The proto-mcp profile's catalogue (`profile: proto-mcp`): `--profile
                // proto-mcp` loads it by itself.
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
    parse(file, text, true)
}

fn parse(file: &Path, text: &str, lint: bool) -> Result<Scenario, ScenarioErrors> {
    let raw: RawScenario = match serde_saphyr::from_str_with_options(text, super::yaml::options()) {
        Ok(r) => r,
        Err(e) => {
            let loc = e.location().map(|l| Loc::of(&l)).filter(|l| l.is_known()).unwrap_or(Loc::new(1, 1));
            return Err(ScenarioError::new(file, loc, super::yaml::plain_message(&e)).into());
        }
    };
    let mut c = Checker { file, errors: Vec::new(), profile: Profile::Protomcp, lint };
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
    /// The scenario's profile, once its header is read.
    profile: Profile,
    /// Whether the `checks:` lint applies (see [`load_file`]).
    lint: bool,
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

    fn within(&mut self, d: Option<&Spanned<Ms>>, default: Duration) -> Duration {
        if let Some(m) = d
            && m.value.0 == 0
        {
            self.error(loc(m), "a time must be at least 1 ms");
        }
        ms(d, default)
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

    fn pattern(&mut self, r: Result<Pattern, crate::pattern::PatternError>) -> Option<Pattern> {
        r.map_err(|e| self.error(e.loc, e.message)).ok()
    }

    /// A send template: placeholders checked (and recorded as used), then the tree checked
    /// against the schema.
    fn template(&mut self, node: &Node, compiler: &mut Compiler) -> Option<Template> {
        let fill = self.message_placeholders(node, compiler)?;
        let tree = match node.to_value() {
            Ok(t) => t,
            Err((at, m)) => {
                self.error(at, m);
                return None;
            }
        };
        match Template::new(tree) {
            Ok(t) => {
                if let Some(at) = fill {
                    self.fill_fits(&t.tree().clone(), at, true);
                }
                Some(t)
            }
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
            if self.profile == Profile::ProtoMcp {
                match requirements::proto_mcp::get(id) {
                    Some(r) if out.iter().any(|(o, _)| o.id == r.id) => self.error(at, format!("{id} is cited twice")),
                    Some(r) => out.push((r, at)),
                    None => {
                        self.error(at, format!("unknown requirement `{id}`: not a PM requirement of spec/proto-mcp.md"))
                    }
                }
                continue;
            }
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
}

impl raw::RawSignal {
    /// The name without a `SIG` prefix.
    fn value_name(&self) -> &str {
        self.name.value.strip_prefix("SIG").unwrap_or(&self.name.value)
    }
}

impl Checker<'_> {
    /// The placeholders of a message to send: each `${name}` recorded as used, malformed ones
    /// reported; at most one `${fill:…}`, whose place is returned. `None` when something is
    /// wrong.
    pub(super) fn message_placeholders(&mut self, node: &Node, compiler: &mut Compiler) -> Option<Option<Loc>> {
        let mut ok = true;
        let mut fill: Option<Loc> = None;
        walk_strings(node, &mut |s, at| match template::parse(s) {
            Ok(pieces) => {
                for p in pieces {
                    match p {
                        template::Piece::Var(name) => compiler.used.push((name, at)),
                        template::Piece::Fill { .. } if fill.is_some() => {
                            ok = false;
                            let first = fill.map(|l| format!("{}:{}", l.line, l.col)).unwrap_or_default();
                            let m = format!(
                                "a second `${{fill:…}}` in one message (the first is at {first}): one fill sizes the whole message"
                            );
                            self.errors.push(ScenarioError::new(self.file, at, m));
                        }
                        template::Piece::Fill { .. } => fill = Some(at),
                        _ => {}
                    }
                }
            }
            Err(m) => {
                ok = false;
                self.errors.push(ScenarioError::new(self.file, at, m.to_string()));
            }
        });
        ok.then_some(fill)
    }

    /// A message whose `${fill:N:…}` is at `at`: when it uses no capture, N must be at least
    /// its size without fill (an Envelope body, or the JSON text of a host message).
    pub(super) fn fill_fits(&mut self, v: &serde_json::Value, at: Loc, envelope: bool) {
        let mut names = Vec::new();
        template::names_in(v, &mut names);
        if !names.is_empty() {
            return;
        }
        let (Some(total), Ok(size)) =
            (template::fill_total(v), template::size_without_fill(v, &Default::default(), envelope))
        else {
            return;
        };
        if size > total {
            let what = if envelope { "the Envelope body" } else { "the message's JSON text" };
            self.error(
                at,
                format!("`${{fill:{total}:…}}`: {what} is {size} bytes without any fill, more than {total}"),
            );
        }
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
