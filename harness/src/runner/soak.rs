//! The `soak` step against a tool process (issue 16): rounds of a call mix, the target's process
//! group sampled from `/proc` between them, and the samples after the warm-up read by
//! [`crate::io::resources::leaks`]. Every answer is still checked (one result per call, echo's
//! text, the size of a sideband-sized result, a reload's burst), so a soak is also a long
//! correctness run; a resource that grows with the rounds becomes the scenario's LEAK.
//!
//! The rounds do not reach the transcript (a soak of 10,000 rounds would be a flood, and which
//! of two allowed answers a cancelled call gets is a race): each is checked and dropped. When a
//! round fails, its frames are added to the transcript after the step's marker.

use std::collections::{BTreeMap, BTreeSet};

use protomcp_proto::dynamic::arm_of;
use protomcp_proto::envelopes::Arm;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::exec::{Exec, StepError};
use crate::io::resources::{self, Sample};
use crate::scenario::{SOAK_SIDEBAND_SIZE, Soak, SoakCall};
use crate::transcript::{Transcript, compact};

/// The message of a LEAK: each resource that grew, with its rate and figures.
pub(crate) fn leak_message(k: &Soak, found: &[resources::Growth]) -> String {
    let (unit, per) = k.unit();
    let mut m = format!(
        "resources grew with the calls over {} rounds (samples every {} rounds, read from round {}):",
        k.repeat, k.sample_every, k.warmup
    );
    for g in found {
        m.push_str("\n  ");
        m.push_str(&g.describe(&unit, per));
    }
    m
}

/// What a round waits for.
enum Pending {
    Echo(String),
    Sideband,
    Reload,
}

impl Exec<'_> {
    /// Runs a `soak` step (see the module docs).
    pub(crate) async fn soak(&mut self, k: &Soak) -> Result<(), StepError> {
        let sampler = self.sampler.clone();
        let mut samples: Vec<Sample> = Vec::new();
        let take = |rounds: u64, samples: &mut Vec<Sample>| {
            if let Some(f) = sampler.as_ref().and_then(resources::Sampler::sample) {
                samples.push(Sample { rounds, figures: f });
            }
        };
        take(0, &mut samples);
        let kept = std::mem::take(&mut self.transcript);
        let mut result = Ok(());
        let mut cancelled = BTreeSet::new();
        for round in 1..=k.repeat {
            self.transcript = Transcript::default();
            if let Err(e) = self.soak_round(k, round, &mut cancelled).await {
                result = Err(e.in_round(round, k.repeat));
                break;
            }
            if round.is_multiple_of(k.sample_every) || round == k.repeat {
                take(round, &mut samples);
            }
        }
        let round = std::mem::replace(&mut self.transcript, kept);
        if result.is_err() {
            for item in round.to_vec() {
                self.transcript.push(item);
            }
        }
        let found = resources::leaks(&samples, k.warmup);
        if result.is_ok() && !found.is_empty() && self.leak.is_none() {
            self.leak = Some((self.current, leak_message(k, &found)));
        }
        self.samples.extend(samples);
        result
    }

    /// One round; `cancelled` are the cancelled calls (of this round and earlier ones) whose
    /// result has not come: one may come at any time, a second never.
    async fn soak_round(&mut self, k: &Soak, round: u64, cancelled: &mut BTreeSet<String>) -> Result<(), StepError> {
        let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
        for (i, call) in k.mix.iter().enumerate() {
            let rid = format!("soak-{round}-{i}");
            match call {
                SoakCall::Echo => {
                    let text = format!("soak {round}.{i}");
                    let args = json!({ "text": text }).to_string();
                    self.send_value(json!({"request_id": rid, "call_tool": {"name": "echo", "arguments_json": args}}))
                        .await?;
                    pending.insert(rid, Pending::Echo(text));
                }
                SoakCall::Sideband => {
                    let args = json!({ "n": SOAK_SIDEBAND_SIZE }).to_string();
                    self.send_value(json!({"request_id": rid, "call_tool": {"name": "big", "arguments_json": args}}))
                        .await?;
                    pending.insert(rid, Pending::Sideband);
                }
                SoakCall::Cancel => {
                    let args = json!({"steps": 1}).to_string();
                    self.send_value(json!({"request_id": rid, "call_tool": {"name": "slow", "arguments_json": args}}))
                        .await?;
                    self.send_value(json!({"request_id": "", "cancel": {"request_id": rid}})).await?;
                    cancelled.insert(rid);
                }
                SoakCall::Reload => {
                    self.send_value(json!({"request_id": rid, "reload": {}})).await?;
                    pending.insert(rid, Pending::Reload);
                }
            }
        }
        if k.mix.contains(&SoakCall::Cancel) {
            // The fence: a call that must still be answered after the cancellations
            // (TP-CANCEL-06); the cancelled calls' own results may come before or after it.
            let rid = format!("soak-{round}-fence");
            let text = format!("soak {round} fence");
            let args = json!({ "text": text }).to_string();
            self.send_value(json!({"request_id": rid, "call_tool": {"name": "echo", "arguments_json": args}})).await?;
            pending.insert(rid, Pending::Echo(text));
        }
        let within = self.t(k.within);
        let deadline = Instant::now() + within;
        let ignore = [Arm::Progress, Arm::Log];
        while !pending.is_empty() {
            let v = self.next_required(deadline, within, &ignore).await.map_err(|e| match e {
                StepError::Fail(m) => StepError::Fail(format!(
                    "{m}; still waiting for {}",
                    pending.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
                e => e,
            })?;
            let rid = v.get("request_id").and_then(Value::as_str).unwrap_or("").to_owned();
            if cancelled.remove(&rid) {
                if v.get("call_result").is_none() {
                    return Err(StepError::Fail(format!(
                        "the cancelled call {rid} got {} instead of a call_result (TP-CANCEL-03)",
                        compact(&v)
                    )));
                }
                continue;
            }
            let Some(what) = pending.remove(&rid) else {
                return Err(StepError::Fail(format!(
                    "a frame under a rid no call of the round has in flight (a second result?): {}",
                    compact(&v)
                )));
            };
            match what {
                Pending::Echo(text) => {
                    let got = result_texts(&v);
                    if is_error(&v) || !got.contains(&text) {
                        return Err(StepError::Fail(format!("echo {text:?} got {}", compact(&v))));
                    }
                }
                Pending::Sideband => {
                    let got = result_texts(&v);
                    let want = SOAK_SIDEBAND_SIZE as usize;
                    if is_error(&v) || !got.iter().any(|t| t.len() == want && t.bytes().all(|b| b == b'x')) {
                        let lens: Vec<usize> = got.iter().map(String::len).collect();
                        return Err(StepError::Fail(format!(
                            "big {{n: {want}}} under {rid} got no text of {want} `x` (text lengths {lens:?}, error {})",
                            is_error(&v)
                        )));
                    }
                }
                Pending::Reload => self.soak_burst(&v, &rid, deadline, within).await?,
            }
        }
        Ok(())
    }

    /// After a ReloadRequest: its ReloadResponse `v`, then the burst (TP-RELOAD-01/02).
    async fn soak_burst(
        &mut self,
        v: &Value,
        rid: &str,
        deadline: Instant,
        within: std::time::Duration,
    ) -> Result<(), StepError> {
        if arm_of(v) != Some("reload_response") || v["reload_response"]["success"] != json!(true) {
            return Err(StepError::Fail(format!(
                "the ReloadRequest {rid} got {} instead of reload_response {{success: true}} (TP-RELOAD-01)",
                compact(v)
            )));
        }
        let ignore = [Arm::Progress, Arm::Log];
        let first = self.next_required(deadline, within, &ignore).await?;
        if arm_of(&first) != Some("tool_list") {
            return Err(StepError::Fail(format!(
                "after the reload_response the burst begins with tool_list (TP-RELOAD-02), got {}",
                compact(&first)
            )));
        }
        loop {
            let v = self.next_required(deadline, within, &ignore).await?;
            match arm_of(&v) {
                Some("register_middleware") => {
                    self.send_value(json!({"request_id": "", "register_middleware_response": {"success": true}}))
                        .await?
                }
                Some("reload_response") if v.get("request_id").and_then(Value::as_str).unwrap_or("").is_empty() => {
                    break;
                }
                _ => {
                    return Err(StepError::Fail(format!(
                        "expected the burst's registrations or its marker (TP-RELOAD-02), got {}",
                        compact(&v)
                    )));
                }
            }
        }
        if self.features.iter().any(|f| f == "hidden") {
            let v = self.next_required(deadline, within, &ignore).await?;
            if arm_of(&v) != Some("disable_tools") {
                return Err(StepError::Fail(format!(
                    "expected the burst's disable_tools for the hidden tools (TP-RELOAD-02), got {}",
                    compact(&v)
                )));
            }
        }
        Ok(())
    }
}

fn is_error(v: &Value) -> bool {
    v["call_result"]["is_error"] == json!(true)
}

/// The texts of the text elements of a result (`result_json` as text or as a parsed value).
fn result_texts(v: &Value) -> Vec<String> {
    let r = &v["call_result"]["result_json"];
    let parsed = match r {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        other => other.clone(),
    };
    parsed
        .as_array()
        .map(|a| a.iter().filter_map(|e| e.get("text").and_then(Value::as_str).map(str::to_owned)).collect())
        .unwrap_or_default()
}
