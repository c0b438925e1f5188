//! The `soak` step against a bridge (issue 16): each round sends the mix's calls as the host,
//! plays the tool process's side of each (the harness answers through the mock), checks what the
//! host gets, and samples the bridge's process group and its tool process between rounds; the
//! samples after the warm-up are read by [`crate::io::resources::leaks`], as for a tool process.
//!
//! Calls of a round go one after another. `echo`: the tool side answers with the text, the host
//! must get it. `sideband`: the tool side answers through the sideband (a RawHeader and the
//! payload, [`SOAK_SIDEBAND_SIZE`] `x`), the host must get the whole text. `cancel`: the host
//! cancels the call once it reached the tool side and sends a `ping`; once that is answered
//! (the bridge has read the cancellation) the tool side sends its late result (to be discarded,
//! BR-CANCEL-03). A CancelRequest may reach the tool side at any later read, or none: whether
//! one comes is BR-CANCEL-01, judged by bridge.cancel.forward, so that a bridge that sends none
//! (pmcp) can still be soaked. A response to the cancelled request is read and passed over
//! (BR-CANCEL-02 is bridge.cancel.no-response's); a `ping` after the round's cancellations must
//! be answered. `reload` (against a bridge that claims `watch`, SKIP otherwise): a file under
//! `{dir}/watched` changes, the reload is played in whichever form the bridge chose (the
//! scenario's first `tool_handshake` again), and a ping must be answered after it.
//!
//! As for tool processes, the rounds stay out of the transcript, except a round that fails.

use std::collections::BTreeSet;
use std::time::Duration;

use protomcp_proto::dynamic::arm_of;
use protomcp_proto::envelopes::Arm;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{Arrival, Run};
use crate::io::resources::Sampler;
use crate::io::resources::{self, Sample};
use crate::runner::exec::StepError;
use crate::runner::soak::leak_message;
use crate::scenario::{Action, ReloadBegins, ReloadForm, SOAK_SIDEBAND_SIZE, Soak, SoakCall, T_START};
use crate::transcript::{Dir, Item, Transcript, compact};

impl Run<'_> {
    pub(super) async fn soak(&mut self, k: &Soak) -> Result<(), StepError> {
        if k.mix.contains(&SoakCall::Reload) && !self.ex.features.iter().any(|f| f == "watch") {
            return Err(StepError::NotApplicable(
                "a soak of reloads against a bridge triggers them in watch mode, and the bridge does not claim `watch`"
                    .into(),
            ));
        }
        let sampler = self.ex.sampler.clone();
        let mut samples: Vec<Sample> = Vec::new();
        let take = |rounds: u64, samples: &mut Vec<Sample>| {
            if let Some(f) = sampler.as_ref().and_then(Sampler::sample) {
                samples.push(Sample { rounds, figures: f });
            }
        };
        take(0, &mut samples);
        let kept = std::mem::take(&mut self.ex.transcript);
        let mut result = Ok(());
        for round in 1..=k.repeat {
            self.ex.transcript = Transcript::default();
            if let Err(e) = self.soak_round(k, round).await {
                result = Err(e.in_round(round, k.repeat));
                break;
            }
            if round.is_multiple_of(k.sample_every) || round == k.repeat {
                take(round, &mut samples);
            }
        }
        let round = std::mem::replace(&mut self.ex.transcript, kept);
        if result.is_err() {
            for item in round.to_vec() {
                self.ex.transcript.push(item);
            }
        }
        let found = resources::leaks(&samples, k.warmup);
        if result.is_ok() && !found.is_empty() && self.ex.leak.is_none() {
            self.ex.leak = Some((self.ex.current, leak_message(k, &found)));
        }
        self.ex.samples.extend(samples);
        result
    }

    fn send_host(&mut self, v: Value) {
        self.ex.transcript.push(Item::Host { dir: Dir::ToTestee, message: Some(v.clone()), raw: None });
        self.host_send(v.to_string());
    }

    /// The next CallToolRequest on the tool side (list pulls are answered meanwhile): its rid.
    async fn tool_call(
        &mut self,
        name: &str,
        deadline: Instant,
        within: std::time::Duration,
    ) -> Result<String, StepError> {
        let v = self.ex.next_required(deadline, within, &[Arm::Cancel]).await?;
        if arm_of(&v) != Some("call_tool") || v["call_tool"]["name"] != json!(name) {
            return Err(StepError::Fail(format!(
                "expected the CallToolRequest for `{name}` on the tool side (BR-CALL-01), got {}",
                compact(&v)
            )));
        }
        Ok(v.get("request_id").and_then(Value::as_str).unwrap_or("").to_owned())
    }

    /// The bridge's response with `id` before `deadline`, looking every millisecond: a soak
    /// waits for thousands of them.
    async fn soak_response(&mut self, id: &Value, deadline: Instant) -> Result<Value, StepError> {
        self.answer_to(id, deadline, std::time::Duration::from_millis(1)).await
    }

    /// One reload in watch mode: a file under `{dir}/watched` changes, the bridge begins a
    /// reload in either form (BR-RELOAD-01), and the harness plays it with the scenario's first
    /// `tool_handshake` (the same lists: nothing changes); then a ping must be answered.
    async fn soak_reload(&mut self, round: u64, within: std::time::Duration) -> Result<(), StepError> {
        let Some(h) = self.ex.scenario.steps.iter().find_map(|s| match &s.action {
            Action::ToolHandshake(h) => Some(h.clone()),
            _ => None,
        }) else {
            return Err(StepError::Error("a soak of reloads needs a tool_handshake step before it".into()));
        };
        let rel = std::path::Path::new("watched").join("soak-trigger");
        self.ex.transcript.push(Item::Touch { path: rel.display().to_string() });
        let path = self.dir.join(&rel);
        super::touch(&path).map_err(|e| StepError::Error(format!("touch {}: {e}", path.display())))?;
        let begins = ReloadBegins { form: ReloadForm::Any, refuse: None, within: T_START };
        self.reload_begins(&begins).await?;
        self.ex.ensure_conn().await?;
        self.tool_handshake(&h).await?;
        let id = json!(format!("soak-{round}-reloaded"));
        self.send_host(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        self.soak_response(&id, Instant::now() + within).await?;
        Ok(())
    }

    async fn soak_round(&mut self, k: &Soak, round: u64) -> Result<(), StepError> {
        let within = self.ex.t(k.within);
        let deadline = Instant::now() + within;
        // Echo and sideband calls: all sent at once, answered on the tool side as they arrive,
        // then every response awaited.
        let sent = self.soak_send(k, round, within).await?;
        self.soak_serve(&sent, deadline, within).await?;
        self.soak_check(&sent, deadline).await?;
        let cancelled = self.soak_cancels(k, round, deadline, within).await?;
        if !cancelled.is_empty() {
            self.soak_fence(round, &cancelled, deadline).await?;
        }
        self.pass_over_others();
        Ok(())
    }

    /// The round's echo and sideband calls, sent at once (a reload in the mix runs here, in its
    /// place): each call's id, kind and text.
    async fn soak_send(
        &mut self,
        k: &Soak,
        round: u64,
        within: Duration,
    ) -> Result<Vec<(Value, SoakCall, String)>, StepError> {
        let mut sent: Vec<(Value, SoakCall, String)> = Vec::new();
        for (i, call) in k.mix.iter().enumerate() {
            let id = json!(format!("soak-{round}-{i}"));
            let text = format!("soak {round}.{i}");
            let params = match call {
                SoakCall::Echo => json!({"name": "echo", "arguments": {"text": text}}),
                SoakCall::Sideband => json!({"name": "big", "arguments": {"n": SOAK_SIDEBAND_SIZE}}),
                SoakCall::Cancel => continue,
                SoakCall::Reload => {
                    self.soak_reload(round, within).await?;
                    continue;
                }
            };
            self.send_host(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
            sent.push((id, *call, text));
        }
        Ok(sent)
    }

    /// Answers the round's CallToolRequests on the tool side as they arrive (an echo with its
    /// text, big through the sideband).
    async fn soak_serve(
        &mut self,
        sent: &[(Value, SoakCall, String)],
        deadline: Instant,
        within: Duration,
    ) -> Result<(), StepError> {
        let mut answered = 0;
        while answered < sent.len() {
            let v = self.ex.next_required(deadline, within, &[Arm::Cancel]).await?;
            let rid = v.get("request_id").and_then(Value::as_str).unwrap_or("").to_owned();
            let name = v["call_tool"]["name"].as_str().unwrap_or("");
            let args: Value = v["call_tool"]["arguments_json"]
                .as_str()
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or(Value::Null);
            match (arm_of(&v), name) {
                (Some("call_tool"), "echo")
                    if sent.iter().any(|(_, c, t)| *c == SoakCall::Echo && args["text"] == json!(t)) =>
                {
                    let result = json!([{"type": "text", "text": args["text"]}]).to_string();
                    self.ex.send_value(json!({"request_id": rid, "call_result": {"result_json": result}})).await?;
                }
                (Some("call_tool"), "big") if sent.iter().any(|(_, c, _)| *c == SoakCall::Sideband) => {
                    let n = SOAK_SIDEBAND_SIZE as usize;
                    let payload = json!([{"type": "text", "text": "x".repeat(n)}]).to_string().into_bytes();
                    self.ex
                        .send_value(json!({"request_id": "", "raw_header": {"request_id": rid,
                            "field_name": "result_json", "size": payload.len()}}))
                        .await?;
                    self.ex.write(&payload, None, Some(format!("sideband payload, {} bytes", payload.len()))).await?;
                }
                _ => {
                    return Err(StepError::Fail(format!(
                        "expected the CallToolRequests of the round's calls on the tool side (BR-CALL-01/02), got {}",
                        compact(&v)
                    )));
                }
            }
            answered += 1;
        }
        Ok(())
    }

    /// Every call's response reached the host with what the tool process sent.
    async fn soak_check(&mut self, sent: &[(Value, SoakCall, String)], deadline: Instant) -> Result<(), StepError> {
        for (id, call, text) in sent {
            let r = self.soak_response(id, deadline).await?;
            let got = r["result"]["content"][0]["text"].as_str().unwrap_or("");
            let ok = match call {
                SoakCall::Echo => got == text,
                _ => got.len() == SOAK_SIDEBAND_SIZE as usize && got.bytes().all(|b| b == b'x'),
            };
            if !ok || r.get("error").is_some() || r["result"]["isError"] == json!(true) {
                let what = match call {
                    SoakCall::Echo => format!("echo {text:?}"),
                    _ => format!("big (a text of {SOAK_SIDEBAND_SIZE} `x` sent through the sideband, BR-SIDEBAND-03)"),
                };
                let shown = if got.len() > 200 { format!("a text of {} bytes", got.len()) } else { compact(&r) };
                return Err(StepError::Fail(format!("tools/call {what}: the host got {shown} (BR-CALL-07)")));
            }
        }
        Ok(())
    }

    /// The round's cancelled calls, one after another, each once it reached the tool side (the
    /// tool process's late result follows the cancellation): their ids.
    async fn soak_cancels(
        &mut self,
        k: &Soak,
        round: u64,
        deadline: Instant,
        within: Duration,
    ) -> Result<BTreeSet<String>, StepError> {
        let mut cancelled: BTreeSet<String> = BTreeSet::new();
        for (i, call) in k.mix.iter().enumerate() {
            if *call != SoakCall::Cancel {
                continue;
            }
            let id = json!(format!("soak-{round}-{i}"));
            self.send_host(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "slow", "arguments": {"steps": 1}}}));
            let rid = self.tool_call("slow", deadline, within).await?;
            self.send_host(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
            let seen = json!(format!("soak-{round}-{i}-seen"));
            self.send_host(json!({"jsonrpc": "2.0", "id": seen, "method": "ping"}));
            self.soak_response(&seen, deadline).await?;
            // The tool process's late result, which the bridge throws away.
            let late = json!([{"type": "text", "text": "cancelled"}]).to_string();
            self.ex.send_value(json!({"request_id": rid, "call_result": {"result_json": late}})).await?;
            cancelled.insert(compact(&id));
        }
        Ok(cancelled)
    }

    /// After cancellations, a ping answered without error (BR-CANCEL-03); responses to the
    /// cancelled requests are read and passed over.
    async fn soak_fence(
        &mut self,
        round: u64,
        cancelled: &BTreeSet<String>,
        deadline: Instant,
    ) -> Result<(), StepError> {
        let fence = json!(format!("soak-{round}-fence"));
        self.send_host(json!({"jsonrpc": "2.0", "id": fence, "method": "ping"}));
        let r = self.soak_response(&fence, deadline).await?;
        if r.get("error").is_some() {
            return Err(StepError::Fail(format!(
                "the ping after the round's cancellations got {} (BR-CANCEL-03)",
                compact(&r)
            )));
        }
        // A response to a cancelled request is BR-CANCEL-02's business (its own scenario):
        // here it is only read, so that it does not pile up.
        let stray: Vec<u64> = self
            .inbox()
            .into_iter()
            .filter(|(n, e)| {
                !self.consumed.contains(n)
                    && matches!(e, Arrival::Message { value, .. }
                        if value.get("method").is_none() && value.get("id").is_some_and(|i| cancelled.contains(&compact(i))))
            })
            .map(|(n, _)| n)
            .collect();
        for n in stray {
            self.mark(n);
        }
        Ok(())
    }

    /// Notifications and requests of the bridge meanwhile are passed over.
    fn pass_over_others(&mut self) {
        // Notifications and requests of the bridge meanwhile (a list_changed that came after
        // the step before the soak, a ping the driver answered) are passed over: left unread
        // they would hold every later message in the driver, which would take them for a flood.
        let other: Vec<u64> = self
            .inbox()
            .into_iter()
            .filter(|(n, e)| {
                !self.consumed.contains(n)
                    && match e {
                        Arrival::Message { value, .. } => value.get("method").is_some(),
                        Arrival::Note { .. } | Arrival::Comment { .. } => true,
                    }
            })
            .map(|(n, _)| n)
            .collect();
        for n in other {
            self.mark(n);
        }
    }
}
