//! The scenario file as serde reads it: structure and key names only (unknown keys rejected),
//! with the place of everything the loader checks afterwards.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_saphyr::Spanned;

use super::yaml::Node;

/// Milliseconds, written as an integer or as one of the spec's named times (`T_PROMPT`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ms(pub u64);

impl<'de> Deserialize<'de> for Ms {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Ms;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("milliseconds (an integer) or one of T_PROMPT, T_START, T_LISTCHANGE, HANDSHAKE_QUIET")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Ms, E> {
                Ok(Ms(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Ms, E> {
                u64::try_from(v).map(Ms).map_err(|_| E::custom("a time cannot be negative"))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ms, E> {
                super::model::NAMED_TIMES
                    .iter()
                    .find(|(n, _)| *n == v)
                    .map(|(_, d)| Ms(d.as_millis() as u64))
                    .ok_or_else(|| E::custom(format!("`{v}` is not a time: write milliseconds or one of T_PROMPT, T_START, T_LISTCHANGE, HANDSHAKE_QUIET")))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub id: Spanned<String>,
    pub title: Spanned<String>,
    pub requirements: Spanned<Vec<Spanned<String>>>,
    pub level: Spanned<String>,
    /// Required for protomcp scenarios; proto-mcp scenarios have none (the server is the role).
    #[serde(default)]
    pub role: Option<Spanned<String>>,
    /// `protomcp` (the default) or `proto-mcp`.
    #[serde(default)]
    pub profile: Option<Spanned<String>>,
    #[serde(default)]
    pub needs: Option<Spanned<Vec<Spanned<String>>>>,
    /// Skipped when the target has any of these features.
    #[serde(default)]
    pub unless: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub timeout_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub testee: Option<Spanned<RawTestee>>,
    #[serde(default)]
    pub host_requests: Option<Spanned<String>>,
    #[serde(default)]
    pub stale_socket: Option<Spanned<bool>>,
    #[serde(default)]
    pub shared_tmp: Option<Spanned<bool>>,
    #[serde(default)]
    pub transports: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub exclusive: Option<Spanned<bool>>,
    #[serde(default)]
    pub duration_ms: Option<Spanned<Ms>>,
    pub steps: Spanned<Vec<Spanned<RawStepEntry>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTestee {
    #[serde(default)]
    pub middleware: Option<Spanned<bool>>,
    #[serde(default)]
    pub env: Option<Node>,
    #[serde(default)]
    pub misbehave: Option<Spanned<String>>,
    #[serde(default)]
    pub socket: Option<Spanned<String>>,
    #[serde(default)]
    pub clean_env: Option<Spanned<bool>>,
    #[serde(default)]
    pub hidden: Option<Spanned<bool>>,
}

/// One item of `steps`: the step (a mapping with one key, the keyword) and, beside the keyword, the
/// requirements it checks (`checks: [ID, …]`; left out: the scenario's).
#[derive(Debug)]
pub(super) struct RawStepEntry {
    pub checks: Option<Spanned<Vec<Spanned<String>>>>,
    /// `deviation: true`: a failure of this step is a SHOULD deviation, recorded while the
    /// scenario goes on (proto-mcp).
    pub deviation: Option<Spanned<bool>>,
    pub step: RawStep,
}

impl<'de> Deserialize<'de> for RawStepEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawStepEntry;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a step: a mapping with one keyword (send, expect, …) and optionally `checks`")
            }

            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<RawStepEntry, A::Error> {
                let mut checks = None;
                let mut deviation = None;
                let mut step: Option<RawStep> = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "checks" {
                        if checks.is_some() {
                            return Err(de::Error::custom("`checks` is given twice"));
                        }
                        checks = Some(map.next_value()?);
                        continue;
                    }
                    if key == "deviation" {
                        if deviation.is_some() {
                            return Err(de::Error::custom("`deviation` is given twice"));
                        }
                        deviation = Some(map.next_value()?);
                        continue;
                    }
                    if step.is_some() {
                        return Err(de::Error::custom(format!(
                            "a step has one keyword; `{key}` is a second one (start a new step with `- {key}:`)"
                        )));
                    }
                    // The keyword and its value, read as the externally tagged enum they are.
                    let one = OneEntry { key: Some(key), map: &mut map };
                    step = Some(RawStep::deserialize(de::value::MapAccessDeserializer::new(one))?);
                }
                let step = step.ok_or_else(|| de::Error::custom("a step needs a keyword (send, expect, …)"))?;
                Ok(RawStepEntry { checks, deviation, step })
            }
        }
        d.deserialize_map(V)
    }
}

/// A map access that yields one key already read, then its value from the map it came from.
struct OneEntry<'m, A> {
    key: Option<String>,
    map: &'m mut A,
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for OneEntry<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.key.take() {
            Some(k) => seed.deserialize(de::IntoDeserializer::<A::Error>::into_deserializer(k)).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<T: de::DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum RawStep {
    Handshake(RawHandshake),
    Send(Node),
    SendRaw(RawSendRaw),
    SendFrame(RawSendFrame),
    Expect(RawExpect),
    ExpectAnyOrder(RawExpectAnyOrder),
    ExpectNothing(RawExpectNothing),
    ExpectClose(RawWithin),
    ExpectExit(RawExpectExit),
    ExpectAlive(RawWithin),
    ExpectNoConnect(RawFor),
    Sleep(RawSleep),
    Close(RawClose),
    Signal(RawSignal),
    HostSend(RawHostSend),
    HostExpect(RawHostExpect),
    HostExpectNothing(RawHostExpectNothing),
    HostClose(RawHostClose),
    HostHttp(RawHostHttp),
    ToolHandshake(RawToolHandshake),
    ReloadBegins(RawReloadBegins),
    Touch(RawTouch),
    Check(RawCheck),
    ExpectSocket(RawExpectSocket),
    ExpectSocketPrivate(RawEmpty),
    ToolConnectAgain(RawWithin),
    ExpectToolExit(RawWithin),
    HostExpectComment(RawHostExpectComment),
    TcpListen(RawTcpListen),
    ExpectNoTcpConnect(RawExpectNoTcpConnect),
    MemoryMark(RawEmpty),
    ExpectMemory(RawExpectMemory),
    Soak(RawSoak),
    // proto-mcp (the loader refuses them in protomcp scenarios).
    Initialize(RawInitialize),
    SendJson(Node),
    SendText(RawSendText),
    SendBatch(RawSendBatch),
    ExpectAnswer(RawExpectAnswer),
    ExpectError(RawExpectError),
    ExpectNext(RawExpectNext),
    ExpectJson(RawExpectJson),
    Probe(Node),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostSend {
    #[serde(default)]
    pub host: Option<Spanned<String>>,
    #[serde(default)]
    pub message: Option<Node>,
    #[serde(default)]
    pub line: Option<Spanned<String>>,
    /// Over HTTP: headers of the POST, beside or instead of the driver's.
    #[serde(default)]
    pub headers: Option<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostExpect {
    #[serde(default)]
    pub host: Option<Spanned<String>>,
    pub message: Node,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub ignore: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub stream: Option<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostExpectComment {
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub stream: Option<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTcpListen {
    pub capture: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectNoTcpConnect {
    pub listener: Spanned<String>,
    #[serde(default)]
    pub for_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOrHost {
    pub message: Node,
    #[serde(default)]
    pub ignore: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostExpectNothing {
    #[serde(default)]
    pub host: Option<Spanned<String>>,
    pub for_ms: Spanned<Ms>,
    #[serde(default)]
    pub ignore: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEmpty {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostClose {
    #[serde(default)]
    pub host: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostHttp {
    #[serde(default)]
    pub method: Option<Spanned<String>>,
    #[serde(default)]
    pub path: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: Option<Node>,
    #[serde(default)]
    pub body: Option<Spanned<String>>,
    #[serde(default)]
    pub session: Option<Spanned<String>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    pub expect: RawHttpExpect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttpExpect {
    #[serde(default)]
    pub status: Option<Node>,
    #[serde(default)]
    pub headers: Option<Node>,
    #[serde(default)]
    pub body: Option<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolHandshake {
    #[serde(default)]
    pub tools: Option<Node>,
    #[serde(default)]
    pub resources: Option<Node>,
    #[serde(default)]
    pub resource_templates: Option<Node>,
    #[serde(default)]
    pub prompts: Option<Node>,
    #[serde(default)]
    pub middleware: Option<Node>,
    #[serde(default)]
    pub hidden: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub marker: Option<Spanned<bool>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub hold_pulls_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReloadBegins {
    #[serde(default)]
    pub form: Option<Spanned<String>>,
    #[serde(default)]
    pub refuse: Option<Spanned<String>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHandshake {
    #[serde(default)]
    pub rid: Option<Spanned<String>>,
    #[serde(default)]
    pub hidden: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub middleware: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub tool_list: Option<Node>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSendRaw {
    pub hex: Spanned<String>,
    /// The bytes written this many times (default 1).
    #[serde(default)]
    pub repeat: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectMemory {
    pub peak_growth_below_mib: Spanned<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSendFrame {
    #[serde(default)]
    pub length: Option<Spanned<u32>>,
    #[serde(default)]
    pub body_hex: Option<Spanned<String>>,
    #[serde(default)]
    pub body: Option<Node>,
}

/// `check: {capture: NAME, pattern: P}`: an earlier capture matches a pattern (no I/O).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    pub capture: Spanned<String>,
    pub pattern: Node,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub envelope: Node,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub ignore: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub or_close: bool,
    /// Bridge scenarios: instead of the frame, the host may get a message matching this.
    #[serde(default)]
    pub or_host: Option<RawOrHost>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectAnyOrder {
    pub envelopes: Spanned<Vec<Node>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub ignore: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectNothing {
    pub for_ms: Spanned<Ms>,
    #[serde(default)]
    pub ignore: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWithin {
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSoak {
    pub repeat: Spanned<u64>,
    pub mix: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    pub sample_every: Option<Spanned<u64>>,
    #[serde(default)]
    pub warmup: Option<Spanned<u64>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFor {
    pub for_ms: Spanned<Ms>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectExit {
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
    #[serde(default)]
    pub code: Option<Node>,
    #[serde(default)]
    pub stderr: Option<Node>,
    /// proto-mcp: the step passes at once when the target has this feature (or `2gib`).
    #[serde(default)]
    pub unless: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTouch {
    pub path: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectSocket {
    pub exists: Spanned<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSleep {
    pub ms: Spanned<Ms>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClose {
    #[serde(default)]
    pub mode: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSignal {
    pub name: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInitialize {
    #[serde(default)]
    pub id: Option<Spanned<u64>>,
    #[serde(default)]
    pub protocol_version: Option<Spanned<String>>,
    #[serde(default)]
    pub supports_bsr_refs: Option<Spanned<bool>>,
    /// `false`: the request carries no capabilities.
    #[serde(default)]
    pub capabilities: Option<Spanned<bool>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSendText {
    pub text: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSendBatch {
    pub items: Spanned<Vec<Spanned<RawPmItem>>>,
    #[serde(default)]
    pub pace_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum RawPmItem {
    Message(Node),
    Hex(Spanned<String>),
    Text(Spanned<String>),
    Json(Node),
    Initialize(RawItemInitialize),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawItemInitialize {
    #[serde(default)]
    pub id: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectAnswer {
    pub id: Spanned<u64>,
    pub arm: Node,
    #[serde(default)]
    pub message: Option<Node>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectError {
    pub id: Spanned<u64>,
    #[serde(default)]
    pub codes: Vec<i32>,
    #[serde(default)]
    pub should_codes: Vec<i32>,
    #[serde(default)]
    pub should: Option<Spanned<String>>,
    #[serde(default)]
    pub server_defined_ok: bool,
    #[serde(default)]
    pub if_resources_not_advertised: Vec<i32>,
    #[serde(default)]
    pub success_ok: bool,
    #[serde(default)]
    pub call_error: Option<Spanned<String>>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectNext {
    pub id: Spanned<u64>,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectJson {
    pub id: Node,
    #[serde(default)]
    pub result: bool,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub any: bool,
    #[serde(default)]
    pub within_ms: Option<Spanned<Ms>>,
}
