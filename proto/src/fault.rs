//! The fault catalogue: realistic bugs the reference peers can switch on one at a time, each
//! breaking one named requirement, for mutation adequacy (`protomcp-conform adequacy`, issue 29).
//!
//! One table, [`Fault::ALL`] (name, role, requirement, one-line description), defined by the
//! `faults!` invocation below and nowhere else: `protomcp-conform adequacy --list` prints it and
//! docs/adequacy.md explains it. A fault is guarded where the behaviour is decided (the testee's
//! handlers, the sans-IO cores) by `fault::on(Fault::X)`; a test of the workspace
//! (`every_fault_is_guarded_somewhere`) checks that each one is used outside this file.
//!
//! At most one fault is active per process, set once by the peer's command line
//! (`testee --fault NAME`) before it serves. With none set, [`on`] is one relaxed load of a
//! static and a comparison: the default code path is otherwise unchanged.

use std::sync::atomic::{AtomicU16, Ordering};

/// Which peer a fault lives in (the role of the scenarios that must catch it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The reference testee (`protomcp-conform testee --fault NAME`), caught by TP-* scenarios.
    ToolProcess,
    /// The reference bridge (`protomcp-conform bridge --fault NAME`), caught by BR-* scenarios.
    Bridge,
}

impl Role {
    /// `tool-process` or `bridge`, as in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Role::ToolProcess => "tool-process",
            Role::Bridge => "bridge",
        }
    }

    /// The role a name (`tool-process`, `bridge`) stands for.
    pub fn named(name: &str) -> Option<Role> {
        match name {
            "tool-process" => Some(Role::ToolProcess),
            "bridge" => Some(Role::Bridge),
            _ => None,
        }
    }
}

macro_rules! faults {
    ($($variant:ident = ($name:literal, $role:ident, $req:literal, $desc:literal),)*) => {
        /// One fault of the catalogue (see the module documentation).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Fault {
            $($variant,)*
        }

        impl Fault {
            /// Every fault, in catalogue order.
            pub const ALL: &'static [Fault] = &[$(Fault::$variant,)*];

            /// The fault's name (`tp.call.reply-twice`): `--fault NAME`.
            pub fn name(self) -> &'static str {
                match self { $(Fault::$variant => $name,)* }
            }

            /// The peer it lives in.
            pub fn role(self) -> Role {
                match self { $(Fault::$variant => Role::$role,)* }
            }

            /// The requirement it breaks (a spec ID).
            pub fn requirement(self) -> &'static str {
                match self { $(Fault::$variant => $req,)* }
            }

            /// What the bug is, in one line.
            pub fn description(self) -> &'static str {
                match self { $(Fault::$variant => $desc,)* }
            }

            /// The identifier in the code (`TpCallReplyTwice`), for the test that finds each
            /// fault's guard.
            pub fn ident(self) -> &'static str {
                match self { $(Fault::$variant => stringify!($variant),)* }
            }
        }
    };
}

faults! {
    // §3 framing
    TpFrameLittleEndian = ("tp.frame.little-endian", ToolProcess, "TP-FRAME-01", "writes the length prefix little-endian"),
    TpFrameLengthPlusOne = ("tp.frame.length-plus-one", ToolProcess, "TP-FRAME-01", "the length prefix counts one byte more than the body"),
    TpFrameMaxOffByOne = ("tp.frame.max-off-by-one", ToolProcess, "TP-FRAME-03", "refuses a frame of exactly MAX_FRAME bytes (>= instead of >)"),
    TpFrameNoWriteLimit = ("tp.frame.no-write-limit", ToolProcess, "TP-FRAME-04", "writes frames of any size: big_err is not shortened and the writer has no limit"),
    TpFrameEmptyCloses = ("tp.frame.empty-closes", ToolProcess, "TP-FRAME-05", "a zero-length frame ends the connection"),
    TpFrameUnknownArmCloses = ("tp.frame.unknown-arm-closes", ToolProcess, "TP-FRAME-06", "an Envelope with an unknown or unset arm ends the connection"),
    TpFrameNamespaceSet = ("tp.frame.namespace-set", ToolProcess, "TP-FRAME-08", "fills namespace with the SDK's name in everything it sends"),
    TpFrameOversizeWaits = ("tp.frame.oversize-waits", ToolProcess, "TP-FRAME-11", "after an oversize length prefix, waits for the body instead of closing"),
    TpFrameMalformedDeaf = ("tp.frame.malformed-deaf", ToolProcess, "TP-FRAME-14", "after an undecodable body, stays connected but answers nothing more"),
    TpFrameTruncatedHangs = ("tp.frame.truncated-hangs", ToolProcess, "TP-FRAME-15", "end-of-file inside a frame does not end the process"),
    // §4 connection
    TpConnUnsetExitsZero = ("tp.conn.unset-exits-zero", ToolProcess, "TP-CONN-02", "PROTOMCP_SOCKET unset or empty: exits with status 0"),
    TpConnRetryForever = ("tp.conn.retry-forever", ToolProcess, "TP-CONN-04", "retries a failed connect every 100 ms for ever"),
    TpConnReconnect = ("tp.conn.reconnect", ToolProcess, "TP-CONN-06", "connects again once the connection ended"),
    TpConnStdinEofExits = ("tp.conn.stdin-eof-exits", ToolProcess, "TP-CONN-07", "exits when stdin reaches end-of-file"),
    TpConnLinger = ("tp.conn.linger", ToolProcess, "TP-CONN-08", "stays alive 5 s after the bridge closed the connection"),
    TpConnIdleTimeout = ("tp.conn.idle-timeout", ToolProcess, "TP-CONN-11", "closes the connection after 5 s without a message"),
    // §5 handshake
    TpHandshakeGreeting = ("tp.handshake.greeting", ToolProcess, "TP-HANDSHAKE-01", "logs `ready` before the first ListToolsRequest"),
    TpHandshakeListRidDropped = ("tp.handshake.list-rid-dropped", ToolProcess, "TP-HANDSHAKE-02", "the first ToolListResponse has an empty rid"),
    TpHandshakeHiddenUnlisted = ("tp.handshake.hidden-unlisted", ToolProcess, "TP-HANDSHAKE-03", "hidden tools are left out of the ToolListResponse"),
    TpHandshakeSchemaNoType = ("tp.handshake.schema-no-type", ToolProcess, "TP-HANDSHAKE-04", "an input schema without parameters lacks \"type\":\"object\""),
    TpHandshakeOutputSchemaBare = ("tp.handshake.output-schema-bare", ToolProcess, "TP-HANDSHAKE-05", "the output schema is sent as its properties only"),
    TpHandshakeNoAckWait = ("tp.handshake.no-ack-wait", ToolProcess, "TP-HANDSHAKE-09", "sends every middleware registration without waiting for acknowledgements"),
    TpHandshakeNoMarker = ("tp.handshake.no-marker", ToolProcess, "TP-HANDSHAKE-10", "never sends the handshake-complete marker"),
    TpHandshakeDisableFirst = ("tp.handshake.disable-first", ToolProcess, "TP-HANDSHAKE-12", "sends the hidden-tool DisableToolsRequest before the marker"),
    TpHandshakeRelistNoRid = ("tp.handshake.relist-no-rid", ToolProcess, "TP-HANDSHAKE-14", "a later ListToolsRequest is answered with an empty rid"),
    TpHandshakeEarlyRequestExits = ("tp.handshake.early-request-exits", ToolProcess, "TP-HANDSHAKE-16", "a request before the first ListToolsRequest makes it exit"),
    TpHandshakeSlowStart = ("tp.handshake.slow-start", ToolProcess, "TP-HANDSHAKE-17", "loads its registrations for 11 s before answering the first ListToolsRequest"),
    // §6 calls
    TpCallReplyTwice = ("tp.call.reply-twice", ToolProcess, "TP-CALL-01", "sends every CallToolResponse twice"),
    TpCallResultNotArray = ("tp.call.result-not-array", ToolProcess, "TP-CALL-02", "result_json is the content object itself, not an array"),
    TpCallTextDoubleEncoded = ("tp.call.text-double-encoded", ToolProcess, "TP-CALL-03", "a plain text is JSON-encoded twice (quotes inside the text)"),
    TpCallUnknownNoName = ("tp.call.unknown-no-name", ToolProcess, "TP-CALL-04", "the unknown-tool error does not name the tool"),
    TpCallFailureMessageLost = ("tp.call.failure-message-lost", ToolProcess, "TP-CALL-07", "a handler failure becomes `internal error` without its message"),
    TpCallEmptyArgsRejected = ("tp.call.empty-args-rejected", ToolProcess, "TP-CALL-08", "empty arguments_json is parsed as JSON and refused"),
    TpCallInvalidJsonRuns = ("tp.call.invalid-json-runs", ToolProcess, "TP-CALL-09", "invalid arguments_json is taken as {} and the handler runs"),
    TpCallHostileNameExits = ("tp.call.hostile-name-exits", ToolProcess, "TP-CALL-11", "a tool name with a control character makes it exit"),
    TpCallRetryableDropped = ("tp.call.retryable-dropped", ToolProcess, "TP-CALL-13", "ToolError.retryable is not copied from the handler's error"),
    TpCallErrorOnSuccess = ("tp.call.error-on-success", ToolProcess, "TP-CALL-14", "a successful result carries an empty ToolError"),
    TpCallToggleSwapped = ("tp.call.toggle-swapped", ToolProcess, "TP-CALL-15", "enable_tools and disable_tools are swapped"),
    TpCallStructuredQuoted = ("tp.call.structured-quoted", ToolProcess, "TP-CALL-16", "structured_content_json is a JSON string holding the object"),
    TpCallHiddenNotCallable = ("tp.call.hidden-not-callable", ToolProcess, "TP-CALL-19", "a hidden tool is not found when called"),
    TpCallEchoSlow = ("tp.call.echo-slow", ToolProcess, "TP-CALL-20", "echo answers after 1.5 s"),
    // §7 concurrency
    TpConcurLatestRid = ("tp.concur.latest-rid", ToolProcess, "TP-CONCUR-01", "a call result carries the rid of the latest call received, not its own"),
    TpConcurPipelineDrop = ("tp.concur.pipeline-drop", ToolProcess, "TP-CONCUR-02", "more than 32 calls in flight: the rest are dropped silently"),
    TpConcurRidTruncated = ("tp.concur.rid-truncated", ToolProcess, "TP-CONCUR-05", "rids are cut to 255 bytes in replies"),
    TpConcurDuplicateRidExits = ("tp.concur.duplicate-rid-exits", ToolProcess, "TP-CONCUR-06", "a call reusing a rid in flight makes it exit"),
    TpConcurReverseRidReused = ("tp.concur.reverse-rid-reused", ToolProcess, "TP-CONCUR-07", "every reverse request gets the same rid"),
    // §8 cancellation
    TpCancelEnvelopeRid = ("tp.cancel.envelope-rid", ToolProcess, "TP-CANCEL-01", "takes the call to cancel from the Envelope rid, not the body"),
    TpCancelUnknownAnswered = ("tp.cancel.unknown-answered", ToolProcess, "TP-CANCEL-02", "a CancelRequest naming no call is answered with an error result"),
    TpCancelNoResult = ("tp.cancel.no-result", ToolProcess, "TP-CANCEL-03", "a cancelled call gets no result"),
    TpCancelAll = ("tp.cancel.all", ToolProcess, "TP-CANCEL-06", "a CancelRequest cancels every call in flight"),
    // §9 progress
    TpProgressRidSet = ("tp.progress.rid-set", ToolProcess, "TP-PROGRESS-01", "ProgressNotification carries the call's rid"),
    TpProgressWithoutToken = ("tp.progress.without-token", ToolProcess, "TP-PROGRESS-02", "progress is sent even when the call has no progress_token"),
    TpProgressAfterResult = ("tp.progress.after-result", ToolProcess, "TP-PROGRESS-03", "the last progress notification is sent after the result"),
    TpProgressSwapped = ("tp.progress.swapped", ToolProcess, "TP-PROGRESS-04", "progress and total are swapped"),
    // §10 tool-list control
    TpToollistOtherRidAccepted = ("tp.toollist.other-rid-accepted", ToolProcess, "TP-TOOLLIST-02", "an ActiveToolsResponse with another rid answers the only waiter"),
    TpToollistOtherTypeAccepted = ("tp.toollist.other-type-accepted", ToolProcess, "TP-TOOLLIST-03", "a reply of another type with the waiter's rid is taken as the answer"),
    TpToollistEmptyRidAccepted = ("tp.toollist.empty-rid-accepted", ToolProcess, "TP-TOOLLIST-05", "an ActiveToolsResponse with empty rid answers the only waiter"),
    // §11 sideband
    TpSidebandSizeShort = ("tp.sideband.size-short", ToolProcess, "TP-SIDEBAND-01", "RawHeader.size is one less than the payload"),
    TpSidebandRidDropped = ("tp.sideband.rid-dropped", ToolProcess, "TP-SIDEBAND-02", "RawHeader.request_id is left empty"),
    TpSidebandAlsoResponse = ("tp.sideband.also-response", ToolProcess, "TP-SIDEBAND-02", "a CallToolResponse follows the sideband transfer"),
    TpSidebandFieldName = ("tp.sideband.field-name", ToolProcess, "TP-SIDEBAND-04", "field_name is `result` instead of `result_json`"),
    TpSidebandErrorAllowed = ("tp.sideband.error-allowed", ToolProcess, "TP-SIDEBAND-05", "error results may use the sideband too"),
    TpSidebandZstdSizeWrong = ("tp.sideband.zstd-size-wrong", ToolProcess, "TP-SIDEBAND-06", "uncompressed_size of a zstd payload is its compressed size"),
    TpSidebandPlainSizeSet = ("tp.sideband.plain-size-set", ToolProcess, "TP-SIDEBAND-07", "uncompressed_size is set for an uncompressed payload"),
    TpSidebandFrameLimitIgnored = ("tp.sideband.frame-limit-ignored", ToolProcess, "TP-SIDEBAND-10", "only the threshold decides the sideband; a result above MAX_FRAME is dropped"),
    TpSidebandErrorNotShortened = ("tp.sideband.error-not-shortened", ToolProcess, "TP-SIDEBAND-11", "an error result above MAX_FRAME is not shortened (and so never sent)"),
    TpSidebandBadThresholdExits = ("tp.sideband.bad-threshold-exits", ToolProcess, "TP-SIDEBAND-12", "a malformed threshold variable makes it exit"),
    // §12 streams
    TpStreamNoFinal = ("tp.stream.no-final", ToolProcess, "TP-STREAM-02", "no chunk of a stream is marked final"),
    TpStreamLastChunkLost = ("tp.stream.last-chunk-lost", ToolProcess, "TP-STREAM-03", "the last partial chunk's data is dropped"),
    TpStreamTotalSizeWrong = ("tp.stream.total-size-wrong", ToolProcess, "TP-STREAM-04", "total_size is one more than the byte total"),
    // §13 middleware
    TpMiddlewareDuplicateName = ("tp.middleware.duplicate-name", ToolProcess, "TP-MIDDLEWARE-01", "the second middleware is registered under the first one's name"),
    TpMiddlewarePassDropsResult = ("tp.middleware.pass-drops-result", ToolProcess, "TP-MIDDLEWARE-02", "the pass-through response leaves result_json empty"),
    TpMiddlewareUnknownRejects = ("tp.middleware.unknown-rejects", ToolProcess, "TP-MIDDLEWARE-03", "an intercept naming an unregistered middleware is rejected"),
    TpMiddlewareFailurePasses = ("tp.middleware.failure-passes", ToolProcess, "TP-MIDDLEWARE-04", "a failing middleware handler passes through instead of rejecting"),
    TpMiddlewareIsErrorDropped = ("tp.middleware.is-error-dropped", ToolProcess, "TP-MIDDLEWARE-05", "is_error does not reach the middleware handler (always false)"),
    // §14 resources
    TpResourceListDropsLast = ("tp.resource.list-drops-last", ToolProcess, "TP-RESOURCE-01", "the resource list leaves out the last resource"),
    TpResourceTemplatesEmpty = ("tp.resource.templates-empty", ToolProcess, "TP-RESOURCE-02", "the template list is empty"),
    TpResourceTemplateColon = ("tp.resource.template-colon", ToolProcess, "TP-RESOURCE-03", "uri_template uses `:id` instead of RFC 6570 `{id}`"),
    TpResourceStaticNewline = ("tp.resource.static-newline", ToolProcess, "TP-RESOURCE-05", "a static resource's text gains a trailing newline (read as a file)"),
    TpResourceStaticShadowed = ("tp.resource.static-shadowed", ToolProcess, "TP-RESOURCE-07", "templates are matched before static URIs"),
    TpResourceTemplateSlash = ("tp.resource.template-slash", ToolProcess, "TP-RESOURCE-06", "a placeholder matches an empty string or one containing `/`"),
    TpResourceBlobAlsoText = ("tp.resource.blob-also-text", ToolProcess, "TP-RESOURCE-08", "binary content sets both blob and text"),
    TpResourceFailExits = ("tp.resource.fail-exits", ToolProcess, "TP-RESOURCE-11", "a failing resource handler makes it exit"),
    // §15 prompts and completions
    TpPromptRequiredDropped = ("tp.prompt.required-dropped", ToolProcess, "TP-PROMPT-01", "prompt arguments are listed without `required`"),
    TpPromptArgumentQuoted = ("tp.prompt.argument-quoted", ToolProcess, "TP-PROMPT-02", "an argument reaches the handler JSON-encoded"),
    TpPromptRoleSystem = ("tp.prompt.role-system", ToolProcess, "TP-PROMPT-03", "prompt messages have role `system`"),
    TpPromptFailExits = ("tp.prompt.fail-exits", ToolProcess, "TP-PROMPT-05", "a failing prompt handler makes it exit"),
    TpCompleteUnregisteredUnanswered = ("tp.complete.unregistered-unanswered", ToolProcess, "TP-COMPLETE-01", "a completion with no handler is not answered"),
    TpCompleteValueCut = ("tp.complete.value-cut", ToolProcess, "TP-COMPLETE-02", "argument_value loses its first character"),
    TpCompleteResourceRefIgnored = ("tp.complete.resource-ref-ignored", ToolProcess, "TP-COMPLETE-03", "ref/resource references are not looked up"),
    TpCompleteHasMore = ("tp.complete.has-more", ToolProcess, "TP-COMPLETE-04", "has_more is true although every value was returned"),
    TpCompleteFailExits = ("tp.complete.fail-exits", ToolProcess, "TP-COMPLETE-05", "a failing completion handler makes it exit"),
    // §16 sampling, roots, logging
    TpSamplingMessagesObject = ("tp.sampling.messages-object", ToolProcess, "TP-SAMPLING-01", "messages_json is one message object, not an array"),
    TpSamplingErrorIgnored = ("tp.sampling.error-ignored", ToolProcess, "TP-SAMPLING-03", "SamplingResponse.error is ignored and the empty content used"),
    TpSamplingUnbounded = ("tp.sampling.unbounded", ToolProcess, "TP-SAMPLING-04", "the wait for a SamplingResponse has no timeout"),
    TpSamplingStrayAccepted = ("tp.sampling.stray-accepted", ToolProcess, "TP-SAMPLING-05", "a SamplingResponse with an unknown rid answers the only waiter"),
    TpRootsUnbounded = ("tp.roots.unbounded", ToolProcess, "TP-ROOTS-01", "the wait for a ListRootsResponse has no timeout"),
    TpRootsStrayAccepted = ("tp.roots.stray-accepted", ToolProcess, "TP-ROOTS-02", "a ListRootsResponse with an unknown rid answers the only waiter"),
    TpLogRidSet = ("tp.log.rid-set", ToolProcess, "TP-LOG-01", "a LogMessage carries the call's rid"),
    TpLogLevelUpper = ("tp.log.level-upper", ToolProcess, "TP-LOG-02", "levels are upper case (`INFO`)"),
    TpLogDataRaw = ("tp.log.data-raw", ToolProcess, "TP-LOG-03", "data_json is the message text, not JSON"),
    // §17–§19 tasks, reload, robustness
    TpTaskStatusExits = ("tp.task.status-exits", ToolProcess, "TP-TASK-01", "a TaskStatusRequest makes it exit"),
    TpReloadNoRid = ("tp.reload.no-rid", ToolProcess, "TP-RELOAD-01", "the ReloadResponse has an empty rid"),
    TpReloadNoBurst = ("tp.reload.no-burst", ToolProcess, "TP-RELOAD-02", "no burst follows a successful reload"),
    TpSecurityUnexpectedArmExits = ("tp.security.unexpected-arm-exits", ToolProcess, "TP-SECURITY-01", "a message only a tool process sends makes it exit (unreachable!)"),

    // Bridge role: the reference bridge (`protomcp-conform bridge --fault NAME`), guarded in the
    // sans-IO cores (proto/src/bridge_core, proto/src/host_core) and, where the shell decides,
    // in bridge/src. Sections by area of the requirement.
    // bridge: tool-process side (§3–§19)
    BrCallUnknownToolAsResult = ("br.call.unknown-tool-as-result", Bridge, "BR-CALL-04", "a tools/call of an unknown tool gets an isError result instead of error -32602"),
    // bridge: MCP side (§20–§26)
    BrMcpUnansweredAfterRestart = ("br.mcp.unanswered-after-restart", Bridge, "BR-MCP-19", "a tools/call that arrives after the tool process was restarted is never answered (the new connection's call table lost)"),
    // [P] pending: the Revision 2 requirements of issue 30 that had no scenario
    BrStatelessListenDroppedAtShutdown = ("br.stateless.listen-dropped-at-shutdown", Bridge, "BR-STATELESS-33", "at an orderly shutdown open listen subscriptions are dropped: no complete result, no notifications/cancelled"),
    BrHttpNoKeepAlive = ("br.http.no-keep-alive", Bridge, "BR-HTTP-36", "a listen subscription's SSE stream gets no keep-alive comment, however long it is quiet"),
    BrCallSchemaErrorAsJsonrpc = ("br.call.schema-error-as-jsonrpc", Bridge, "BR-CALL-19", "the bridge checks tools/call arguments against the tool's inputSchema and answers a violation with error -32602 in every session"),
    BrSecurityRefFetched = ("br.security.ref-fetched", Bridge, "BR-SECURITY-09", "the bridge checks tools/call arguments against the tool's inputSchema and fetches a $ref with an http:// URI to do so"),
}

/// No fault: [`ACTIVE`] holds this.
const NONE: u16 = u16::MAX;
static ACTIVE: AtomicU16 = AtomicU16::new(NONE);

/// Switches `fault` on for the rest of the process (the peer's `--fault`).
pub fn activate(fault: Fault) {
    ACTIVE.store(fault as u16, Ordering::Relaxed);
}

/// The fault switched on, if any.
pub fn active() -> Option<Fault> {
    let n = ACTIVE.load(Ordering::Relaxed);
    Fault::ALL.get(usize::from(n)).copied()
}

/// Whether no fault is switched on (the default): one check before several faults' checks.
#[inline]
pub fn none() -> bool {
    ACTIVE.load(Ordering::Relaxed) == NONE
}

/// Whether `fault` is the one switched on.
#[inline]
pub fn on(fault: Fault) -> bool {
    ACTIVE.load(Ordering::Relaxed) == fault as u16 || test_only::on(fault)
}

/// Unit tests of this crate switch a fault on for their own thread only (the sans-IO cores run
/// on the test's thread), so tests running beside them see none. Absent outside `cfg(test)`.
#[cfg(test)]
pub(crate) mod test_only {
    use super::{Fault, NONE};
    use std::cell::Cell;

    thread_local!(static THREAD: Cell<u16> = const { Cell::new(NONE) });

    pub(crate) fn on(fault: Fault) -> bool {
        THREAD.with(|t| t.get() == fault as u16)
    }

    /// Switches `fault` on (or, with `None`, off) for this thread.
    pub(crate) fn set(fault: Option<Fault>) {
        THREAD.with(|t| t.set(fault.map_or(NONE, |f| f as u16)));
    }
}

#[cfg(not(test))]
mod test_only {
    #[inline(always)]
    pub(super) fn on(_: super::Fault) -> bool {
        false
    }
}

/// A name that is no fault of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault `{0}` (`protomcp-conform adequacy --list` lists them)")]
pub struct UnknownFault(pub String);

impl std::str::FromStr for Fault {
    type Err = UnknownFault;
    fn from_str(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL.iter().copied().find(|f| f.name() == s).ok_or_else(|| UnknownFault(s.to_owned()))
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_a_unique_well_formed_name_and_a_requirement_of_its_role() {
        let mut seen = std::collections::BTreeSet::new();
        for f in Fault::ALL {
            assert!(seen.insert(f.name()), "{} twice", f.name());
            let prefix = match f.role() {
                Role::ToolProcess => ("tp.", "TP-"),
                Role::Bridge => ("br.", "BR-"),
            };
            assert!(f.name().starts_with(prefix.0), "{}", f.name());
            assert!(f.requirement().starts_with(prefix.1), "{}: {}", f.name(), f.requirement());
            assert!(f.name().bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b)));
            assert_eq!(f.name().parse::<Fault>(), Ok(*f));
            assert!(!f.description().is_empty());
        }
        assert_eq!("tp.nothing".parse::<Fault>(), Err(UnknownFault("tp.nothing".into())));
    }
}
