//! Observers: the sans-IO models that judge every run's traffic, whatever the scenario cites.
//!
//! A tool-process run's transcript goes through the session model's invariant checker
//! ([`Checker`]: replies of the right type to requests in flight, once each; progress only for
//! calls in flight; no task in place of a result), a bridge run's through the bridge model
//! ([`BridgeModel`]: every host request answered once, error codes, what a tools/call result
//! carries, progress routing, list changes). Each finding is something the model is certain of:
//! it names the requirement, the party that sent the bytes, the rule (`session-model`,
//! `bridge-model`) a known-failures entry pins, and where in the transcript it was seen. What
//! only the end of a session would show (a request never answered) is left to the scenario's
//! steps, which know whether an answer was due; so is traffic the harness itself makes break the
//! protocol on purpose (see [`observable`]).
//!
//! `explore` uses the same functions on its generated sessions, with the end included.

use std::collections::BTreeMap;

use protomcp_proto::bridge_model::BridgeModel;
use protomcp_proto::envelopes::{Arm, EnvelopeExt};
use protomcp_proto::frame::{Frame, FrameDecoder};
use protomcp_proto::pb;
use protomcp_proto::session::{Checker, Finding};
use protomcp_proto::violation::Party;
use serde_json::Value;

use super::verdict::{Check, KnownFailure, Outcome, Verdict, judge};
use crate::requirements::Level;
use crate::scenario::Scenario;
use crate::transcript::{Dir, Item};

/// The rule of the tool-process observer, as a known-failures entry names it (`rule session-model`).
pub const SESSION_RULE: &str = "session-model";
/// The rule of the bridge observer (`rule bridge-model`).
pub const BRIDGE_RULE: &str = "bridge-model";

/// A violation an observer is certain of, in one case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    pub requirement: String,
    /// The requirement's level in the requirement table.
    #[serde(serialize_with = "level_name", deserialize_with = "super::json_report::level")]
    pub level: Level,
    /// Who sent the bytes: `tool process` or `bridge`.
    pub party: String,
    /// The observer (`session-model`, `bridge-model`).
    pub rule: String,
    pub message: String,
    /// The step running when it was seen (from 1), if any.
    #[serde(default)]
    pub step: Option<usize>,
    /// The transcript item (from 0) that showed it.
    pub item: usize,
}

/// A level as the reports write it (`MUST`); [`super::json_report`] reads it back.
fn level_name<S: serde::Serializer>(l: &Level, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&l.to_string())
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.step.map_or_else(|| format!("item {}", self.item), |s| format!("step {s}, item {}", self.item));
        write!(
            f,
            "{} [{}] rule {} ({at}), the {}: {}",
            self.requirement, self.level, self.rule, self.party, self.message
        )
    }
}

fn observed(f: Finding, rule: &str, step: Option<usize>, item: usize) -> Observed {
    let party = if f.requirement.starts_with("BR-") { Party::Bridge } else { Party::ToolProcess };
    Observed {
        requirement: f.requirement.to_owned(),
        level: crate::requirements::get(f.requirement).map_or(Level::Must, |r| r.level),
        party: party.to_string(),
        rule: rule.to_owned(),
        message: f.message,
        step,
        item,
    }
}

/// Whether the observer of its role can judge scenario `s`: not with several host sessions, which
/// the transcript does not tell apart. (What the harness itself does on purpose that the models
/// cannot attribute, a rid reused in flight or left empty, a host id sent again, the models leave
/// unjudged themselves.)
pub fn observable(s: &Scenario) -> bool {
    s.steps.iter().all(|st| st.host.is_none())
}

/// The observers' findings on a finished case of `s` (`bridge`: a bridge run).
pub fn observe(s: &Scenario, bridge: bool, items: &[Item]) -> Vec<Observed> {
    if !observable(s) {
        return Vec::new();
    }
    if bridge {
        // What the end found still owed is the steps' to judge: they know whether it was due.
        let (found, streaming) = bridge_findings(items);
        found.into_iter().take(streaming).map(|(i, step, f)| observed(f, BRIDGE_RULE, step, i)).collect()
    } else {
        tp_findings(items, false).into_iter().map(|(i, step, f)| observed(f, SESSION_RULE, step, i)).collect()
    }
}

/// The requirement findings of a transcript: both directions through a [`Checker`].
pub fn check_transcript(items: &[Item], include_unanswered: bool) -> Vec<Finding> {
    tp_findings(items, include_unanswered).into_iter().map(|(_, _, f)| f).collect()
}

/// [`check_transcript`] with the place of each finding: the item that showed it and the step
/// then running (what was still unanswered at the end: the last item).
fn tp_findings(items: &[Item], include_unanswered: bool) -> Vec<(usize, Option<usize>, Finding)> {
    let mut c = Checker::new();
    let mut out = Vec::new();
    let mut step = None;
    for (i, it) in items.iter().enumerate() {
        let before = c.findings.len();
        match it {
            Item::Step { index, .. } => step = Some(*index),
            Item::Frame { dir: Dir::ToTestee, tree, hex, .. } => {
                // What the testee reads: the Envelope as protobuf decodes it (of several arms the
                // last one wins); bytes written by hand, frame by frame.
                let sent: Vec<pb::Envelope> = match (tree, hex) {
                    (Some(t), _) => tree_env(t).into_iter().collect(),
                    (None, Some(h)) => {
                        frames_of(&protomcp_proto::dynamic::hex_decode(&h.replace(' ', "")).unwrap_or_default())
                    }
                    _ => continue,
                };
                for e in sent {
                    let token = match &e.msg {
                        Some(pb::envelope::Msg::CallTool(c)) => c.progress_token.as_str(),
                        _ => "",
                    };
                    c.sent(&e.request_id, e.arm(), token);
                    if let Some(pb::envelope::Msg::Cancel(x)) = &e.msg {
                        c.cancel(&x.request_id);
                    }
                }
            }
            Item::Frame { dir: Dir::FromTestee, tree, note, .. } => {
                let skip = note.as_deref().is_some_and(|n| n != "ignored");
                if let (Some(t), false) = (tree, skip) {
                    let (rid, arm, token) = fields(t);
                    c.received(&rid, arm, &token);
                }
            }
            _ => {}
        }
        out.extend(c.findings[before..].iter().cloned().map(|f| (i, step, f)));
    }
    if include_unanswered {
        let last = items.len().saturating_sub(1);
        out.extend(c.unanswered().into_iter().map(|f| (last, step, f)));
    }
    out
}

/// The Envelopes of the whole frames at the start of `bytes` (written by the harness, on the
/// bridge's side of the connection), read by the one frame decoder up to the first that does not
/// frame or decode.
fn frames_of(bytes: &[u8]) -> Vec<pb::Envelope> {
    let mut decoder = FrameDecoder::new(Party::Bridge);
    let mut buf = bytes::BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        if let Frame::Envelope(d) = frame {
            out.push(d.envelope);
        }
    }
    out
}

fn fields(t: &Value) -> (String, Option<Arm>, String) {
    let rid = t.get("request_id").and_then(Value::as_str).unwrap_or("").to_owned();
    let arm = protomcp_proto::dynamic::arm_of(t).and_then(Arm::from_name);
    let token = arm
        .and_then(|a| t.get(a.name()))
        .and_then(|m| m.get("progress_token"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    (rid, arm, token)
}

/// Reassembles what the tool process sent as results (sideband transfers, streams) for the model.
#[derive(Default)]
struct ToolSide {
    /// A RawHeader waiting for its payload: (call rid, field, compression).
    raw: Option<(String, String, String)>,
    /// Open streams: rid → (field, bytes so far).
    streams: BTreeMap<String, (String, Vec<u8>)>,
}

fn result_env(rid: &str, field: &str, text: String) -> pb::Envelope {
    let mut r = pb::CallToolResponse::default();
    if field == "structured_content_json" {
        r.structured_content_json = text;
    } else {
        r.result_json = text;
    }
    pb::Envelope { request_id: rid.to_owned(), msg: Some(pb::envelope::Msg::CallResult(r)), ..Default::default() }
}

fn tree_env(tree: &Value) -> Option<pb::Envelope> {
    let body = protomcp_proto::dynamic::encode(tree).ok()?;
    prost::Message::decode(&body[..]).ok()
}

impl ToolSide {
    /// What the tool process sent, as the Envelopes the model takes.
    fn sent(&mut self, tree: Option<&Value>, hex: Option<&str>) -> Vec<pb::Envelope> {
        if let Some(h) = hex {
            let bytes = protomcp_proto::dynamic::hex_decode(&h.replace(' ', "")).unwrap_or_default();
            if let Some((rid, field, compression)) = self.raw.take() {
                let data = if compression == "zstd" { zstd::decode_all(&bytes[..]).unwrap_or_default() } else { bytes };
                return vec![result_env(&rid, &field, String::from_utf8_lossy(&data).into_owned())];
            }
            let body = bytes.get(4..).unwrap_or(&[]);
            return prost::Message::decode(body).ok().into_iter().collect();
        }
        let Some(env) = tree.and_then(tree_env) else { return Vec::new() };
        match &env.msg {
            Some(pb::envelope::Msg::RawHeader(h)) => {
                if h.size == 0 {
                    return vec![result_env(&h.request_id, &h.field_name, String::new())];
                }
                self.raw = Some((h.request_id.clone(), h.field_name.clone(), h.compression.clone()));
                Vec::new()
            }
            Some(pb::envelope::Msg::StreamHeader(h)) => {
                self.streams.insert(env.request_id.clone(), (h.field_name.clone(), Vec::new()));
                Vec::new()
            }
            Some(pb::envelope::Msg::StreamChunk(c)) => {
                let Some((_, data)) = self.streams.get_mut(&env.request_id) else { return Vec::new() };
                data.extend_from_slice(&c.data);
                if !c.r#final {
                    return Vec::new();
                }
                let (field, data) = self.streams.remove(&env.request_id).expect("open");
                vec![result_env(&env.request_id, &field, String::from_utf8_lossy(&data).into_owned())]
            }
            _ => vec![env],
        }
    }
}

/// A CallToolRequest the bridge must not have sent whatever the host asked: its arguments are
/// not a JSON object (BR-CALL-03) or it names a tool the tool process never registered
/// (BR-CALL-04). The model would only see a call no host request asks for.
fn refused_call(env: &pb::Envelope, tools: &[String]) -> Option<Finding> {
    let Some(pb::envelope::Msg::CallTool(c)) = &env.msg else { return None };
    let object =
        c.arguments_json.is_empty() || serde_json::from_str::<Value>(&c.arguments_json).is_ok_and(|v| v.is_object());
    if !object {
        return Some(Finding {
            requirement: "BR-CALL-03",
            message: format!(
                "the bridge forwarded tools/call {} with arguments_json {} (not an object)",
                c.name, c.arguments_json
            ),
        });
    }
    if !tools.is_empty() && !tools.contains(&c.name) {
        return Some(Finding {
            requirement: "BR-CALL-04",
            message: format!(
                "the bridge forwarded tools/call of {:?}, a tool the tool process never registered",
                c.name
            ),
        });
    }
    None
}

/// The model's findings on a bridge scenario's transcript (one host session, `a`). Times are not
/// known here: the runner's steps judge the deadlines (BR-LIFECYCLE-03's `T_PROMPT` included), the
/// model judges what was answered, how, and how often.
pub fn check_bridge_transcript(items: &[Item]) -> Vec<Finding> {
    check_bridge_transcript_split(items).0
}

/// [`check_bridge_transcript`], and how many of the findings came before the end of the session
/// (the rest are what the end found still owed: requests unanswered, changes unannounced).
pub fn check_bridge_transcript_split(items: &[Item]) -> (Vec<Finding>, usize) {
    let (found, streaming) = bridge_findings(items);
    (found.into_iter().map(|(_, _, f)| f).collect(), streaming)
}

/// [`check_bridge_transcript_split`] with the place of each finding (the item that showed it,
/// the step then running; what the end found owed: the last item).
fn bridge_findings(items: &[Item]) -> (Vec<(usize, Option<usize>, Finding)>, usize) {
    let mut m = BridgeModel::new();
    let mut tool = ToolSide::default();
    let mut out = Vec::new();
    let mut seen = 0;
    let mut step = None;
    // The tools the tool process registered (every ToolListResponse it sent).
    let mut tools: Vec<String> = Vec::new();
    // The harness follows `nextCursor` itself and then shows the pages put together as one
    // response under the request's id: that line is the harness's, not the bridge's.
    let mut assembled = false;
    // A `host_http` step's exchange (its request is written as `<HTTP POST …>`): a request sent
    // by hand beside the session, which the step judges itself; its answer is not the session's.
    let mut by_hand = false;
    for (i, it) in items.iter().enumerate() {
        match it {
            Item::Step { index, .. } => {
                step = Some(*index);
                by_hand = false;
            }
            Item::Host { dir: Dir::ToTestee, message: None, raw: Some(line) } if line.starts_with("<HTTP ") => {
                by_hand = true;
            }
            Item::Host { dir: Dir::FromTestee, .. } if by_hand => {}
            Item::Host { dir: Dir::FromTestee, raw: Some(line), .. } if line.contains(crate::host::PAGES_JOINED) => {
                assembled = true;
            }
            Item::Host { dir: Dir::FromTestee, message: Some(_), .. } if assembled => assembled = false,
            Item::Host { dir: Dir::ToTestee, message, raw } => {
                let v = match (message, raw) {
                    (Some(v), _) => Some(v.clone()),
                    (None, Some(line)) => serde_json::from_str::<Value>(line).ok(),
                    _ => None,
                };
                // A batch's parts are not requests of their own (BR-MCP-21 answers the batch).
                if let Some(v) = v.filter(Value::is_object) {
                    m.host_sent("a", &v);
                }
            }
            Item::Host { dir: Dir::FromTestee, message: Some(v), .. } => m.host_received("a", 0, v),
            Item::Frame { dir: Dir::FromTestee, tree: Some(t), .. } => {
                // Results reassembled by the runner are the tool side's, never the bridge's.
                if t.get("via").is_none()
                    && let Some(env) = tree_env(t)
                {
                    match refused_call(&env, &tools) {
                        Some(f) => out.push((i, step, f)),
                        None => m.tool_received(&env),
                    }
                }
            }
            Item::Frame { dir: Dir::ToTestee, tree, hex, .. } => {
                for env in tool.sent(tree.as_ref(), hex.as_deref()) {
                    if let Some(pb::envelope::Msg::ToolList(l)) = &env.msg {
                        tools.extend(l.tools.iter().map(|t| t.name.clone()));
                    }
                    m.tool_sent(&env);
                }
            }
            Item::Shutdown { how } if how == "SHUT_RDWR" => m.tool_ended(0),
            Item::Eof => m.tool_ended(0),
            _ => {}
        }
        out.extend(m.findings()[seen..].iter().cloned().map(|f| (i, step, f)));
        seen = m.findings().len();
    }
    let streaming = out.len();
    // Every deadline has passed: what is still owed is owed for good.
    let last = items.len().saturating_sub(1);
    out.extend(m.finish(u64::MAX / 2).into_iter().skip(seen).map(|f| (last, step, f)));
    (out, streaming)
}

/// One judgment of the observers in a case: the findings of one requirement under one rule, or
/// a known-failures entry of a rule that found nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub verdict: Verdict,
    pub message: String,
    pub broken: Vec<String>,
    pub check: Check,
    /// The step running at the first finding (from 1).
    pub step: Option<usize>,
}

/// The observers' findings of a case of `level` judged against the scenario's known failures
/// (`known`, all of them: a finding no entry names in a known-failing scenario is a new failure):
/// one judgment per rule and requirement. `steps_passed`: every step passed, so an entry pinning
/// a rule that found nothing is stale (XPASS, unless intermittent); when a step failed the run
/// stopped early and such an entry is neither stale nor to correct.
pub fn judge_findings(steps_passed: bool, level: Level, found: &[Observed], known: &[KnownFailure]) -> Vec<Judged> {
    let mut groups: BTreeMap<(&str, &str), Vec<&Observed>> = BTreeMap::new();
    for f in found {
        groups.entry((f.rule.as_str(), f.requirement.as_str())).or_default().push(f);
    }
    let mut out = Vec::new();
    for ((rule, requirement), group) in &groups {
        let check = Check::Rule((*rule).to_owned());
        let why = group.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n");
        let broken = vec![(*requirement).to_owned()];
        let (verdict, message) = judge(&Outcome::Failed(why), level, &broken, Some(&check), known);
        out.push(Judged { verdict, message, broken, check, step: group[0].step });
    }
    if steps_passed {
        for k in known.iter().filter(|k| !k.intermittent) {
            let Some(Check::Rule(rule)) = &k.check else { continue };
            let hit = groups.keys().any(|(r, req)| r == rule && k.requirement.iter().any(|x| x == req));
            if !hit {
                out.push(Judged {
                    verdict: Verdict::Xpass,
                    message: format!(
                        "listed as a known failure ({}) but the observer found nothing: remove the stale entry{}",
                        k.text(),
                        if k.at.is_empty() { String::new() } else { format!(" ({})", k.at) }
                    ),
                    broken: Vec::new(),
                    check: Check::Rule(rule.clone()),
                    step: None,
                });
            }
        }
    }
    out
}
