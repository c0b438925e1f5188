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
    TpFrameSplitWrites = ("tp.frame.split-writes", ToolProcess, "TP-FRAME-02", "a frame's length prefix and its body (and a RawHeader frame and its payload) are queued as two writes, so a concurrent handler's frame can come between"),
    TpFrameUnknownFieldDrops = ("tp.frame.unknown-field-drops", ToolProcess, "TP-FRAME-07", "a strict decoder: an Envelope holding a field it does not know, at any depth, is dropped"),
    TpFrameArmResets = ("tp.frame.arm-resets", ToolProcess, "TP-FRAME-09", "the oneof arm starts a fresh Envelope: fields before it on the wire (a request_id written first) are lost"),
    // §4 connection
    TpConnUnsetExitsZero = ("tp.conn.unset-exits-zero", ToolProcess, "TP-CONN-02", "PROTOMCP_SOCKET unset or empty: exits with status 0"),
    TpConnRetryForever = ("tp.conn.retry-forever", ToolProcess, "TP-CONN-04", "retries a failed connect every 100 ms for ever"),
    TpConnReconnect = ("tp.conn.reconnect", ToolProcess, "TP-CONN-06", "connects again once the connection ended"),
    TpConnStdinEofExits = ("tp.conn.stdin-eof-exits", ToolProcess, "TP-CONN-07", "exits when stdin reaches end-of-file"),
    TpConnLinger = ("tp.conn.linger", ToolProcess, "TP-CONN-08", "stays alive 5 s after the bridge closed the connection"),
    TpConnIdleTimeout = ("tp.conn.idle-timeout", ToolProcess, "TP-CONN-11", "closes the connection after 5 s without a message"),
    TpConnListens = ("tp.conn.listens", ToolProcess, "TP-CONN-01", "removes the file at PROTOMCP_SOCKET, listens there and waits for the bridge to connect"),
    TpConnEofHandlerHangs = ("tp.conn.eof-handler-hangs", ToolProcess, "TP-CONN-10", "end-of-file while a handler runs: waits for the handler, then for a writer that never ends"),
    // §5 handshake
    TpHandshakeGreeting = ("tp.handshake.greeting", ToolProcess, "TP-HANDSHAKE-01", "logs `ready` before the first ListToolsRequest"),
    TpHandshakeListRidDropped = ("tp.handshake.list-rid-dropped", ToolProcess, "TP-HANDSHAKE-02", "the first ToolListResponse has an empty rid"),
    TpHandshakeHiddenUnlisted = ("tp.handshake.hidden-unlisted", ToolProcess, "TP-HANDSHAKE-03", "hidden tools are left out of the ToolListResponse"),
    TpHandshakeSchemaNoType = ("tp.handshake.schema-no-type", ToolProcess, "TP-HANDSHAKE-04", "an input schema without parameters lacks \"type\":\"object\""),
    TpHandshakeOutputSchemaBare = ("tp.handshake.output-schema-bare", ToolProcess, "TP-HANDSHAKE-05", "the output schema is sent as its properties only"),
    TpHandshakeNoAckWait = ("tp.handshake.no-ack-wait", ToolProcess, "TP-HANDSHAKE-09", "sends every middleware registration without waiting for acknowledgements"),
    TpHandshakeNoMarker = ("tp.handshake.no-marker", ToolProcess, "TP-HANDSHAKE-10", "never sends the handshake-complete marker"),
    TpHandshakeDisableFirst = ("tp.handshake.disable-first", ToolProcess, "TP-HANDSHAKE-12", "sends the hidden-tool DisableToolsRequest before the marker"),
    TpHandshakeEmptyDisable = ("tp.handshake.empty-disable", ToolProcess, "TP-HANDSHAKE-13", "sends a DisableToolsRequest after the marker also when no tool is hidden (an empty one)"),
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
    TpToollistNotificationWaits = ("tp.toollist.notification-waits", ToolProcess, "TP-TOOLLIST-01", "after the hidden-tool DisableToolsRequest (a notification) holds every request until an ActiveToolsResponse comes, or 5 s passed"),
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
    TpStreamAlsoResponse = ("tp.stream.also-response", ToolProcess, "TP-STREAM-05", "an empty CallToolResponse follows the final chunk of a stream (the default reply of a handler that streamed)"),
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
    TpSamplingInlineHandler = ("tp.sampling.inline-handler", ToolProcess, "TP-SAMPLING-02", "the sampling tool's handler runs on the reader task, so its SamplingResponse is read only after the wait gave up"),
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
    TpTaskCallAsTask = ("tp.task.call-as-task", ToolProcess, "TP-TASK-02", "a call of the long-running tool slow is answered with a CreateTaskResponse in place of its result"),
    TpReloadNoRid = ("tp.reload.no-rid", ToolProcess, "TP-RELOAD-01", "the ReloadResponse has an empty rid"),
    TpReloadNoBurst = ("tp.reload.no-burst", ToolProcess, "TP-RELOAD-02", "no burst follows a successful reload"),
    TpLifecycleErrorBudget = ("tp.lifecycle.error-budget", ToolProcess, "TP-LIFECYCLE-01", "after five error results the next call makes it exit (an error budget meant for a supervisor)"),
    TpSecurityUnexpectedArmExits = ("tp.security.unexpected-arm-exits", ToolProcess, "TP-SECURITY-01", "a message only a tool process sends makes it exit (unreachable!)"),
    TpSecurityStrayReplyDeaf = ("tp.security.stray-reply-deaf", ToolProcess, "TP-SECURITY-02", "after a reply only a tool process sends (a CallToolResponse from the bridge, say), stays connected but answers nothing more"),

    // Bridge role: the reference bridge (`protomcp-conform bridge --fault NAME`), guarded in the
    // sans-IO cores (proto/src/bridge_core, proto/src/host_core) and, where the shell decides,
    // in bridge/src. Sections by area of the requirement.
    // bridge: tool-process side (§3–§19)
    // [F1] frame, conn, handshake, toollist, sideband, stream, lifecycle, reload
    BrFrameLittleEndian = ("br.frame.little-endian", Bridge, "BR-FRAME-01", "frames to the tool process carry their length prefix little-endian"),
    BrFrameMaxExclusive = ("br.frame.max-exclusive", Bridge, "BR-FRAME-02", "a frame whose body is exactly MAX_FRAME bytes is refused as oversize (`>=` for `>`)"),
    BrFrameOversizeDeaf = ("br.frame.oversize-deaf", Bridge, "BR-FRAME-03", "after a length prefix above MAX_FRAME the bridge silently stops reading and keeps the connection"),
    BrFrameOversizeArgsSent = ("br.frame.oversize-args-sent", Bridge, "BR-FRAME-04", "tools/call arguments too large for one frame are not refused up front: the write fails and takes the connection down"),
    BrFrameEmptyCloses = ("br.frame.empty-closes", Bridge, "BR-FRAME-05", "a zero-length frame is taken for the end of the connection"),
    BrFrameNamespaceSet = ("br.frame.namespace-set", Bridge, "BR-FRAME-06", "requests to the tool process carry namespace `protomcp`"),
    BrFrameUndecodableCloses = ("br.frame.undecodable-closes", Bridge, "BR-FRAME-07", "a frame whose body does not decode ends the connection instead of being discarded"),
    BrFrameUndecodableDeaf = ("br.frame.undecodable-deaf", Bridge, "BR-FRAME-08", "after an undecodable body the bridge stops reading, leaving the pending requests to their CALL_TIMEOUT"),
    BrConnEnvCleared = ("br.conn.env-cleared", Bridge, "BR-CONN-01", "the tool process starts with an empty environment plus PROTOMCP_SOCKET"),
    BrConnSocketRelative = ("br.conn.socket-relative", Bridge, "BR-CONN-02", "PROTOMCP_SOCKET is the socket path relative to the working directory"),
    BrConnStaleSocketKept = ("br.conn.stale-socket-kept", Bridge, "BR-CONN-04", "a leftover file at the socket path is not removed, so listening fails"),
    BrConnListenerKept = ("br.conn.listener-kept", Bridge, "BR-CONN-05", "the listener stays open after the one connection was accepted: later attempts wait in its queue"),
    BrConnStdoutInherited = ("br.conn.stdout-inherited", Bridge, "BR-CONN-06", "the tool process's stdout is the bridge's stdout (the MCP output on stdio)"),
    BrConnStderrDropped = ("br.conn.stderr-dropped", Bridge, "BR-CONN-07", "the tool process's stderr goes to /dev/null"),
    BrConnEarlyExitUnnoticed = ("br.conn.early-exit-unnoticed", Bridge, "BR-CONN-09", "a tool process that exits before connecting is noticed only when the wait for its connection times out"),
    BrConnAcceptUnbounded = ("br.conn.accept-unbounded", Bridge, "BR-CONN-10", "the wait for the tool process's connection has no deadline"),
    BrHandshakeEmptyRid = ("br.handshake.empty-rid", Bridge, "BR-HANDSHAKE-01", "the ListToolsRequest goes out with an empty rid"),
    BrHandshakeWrongReplyEmpty = ("br.handshake.wrong-reply-as-empty", Bridge, "BR-HANDSHAKE-02", "a reply of another type under the discovery rid counts as an empty tool list"),
    BrHandshakeDiscoveryUnbounded = ("br.handshake.discovery-unbounded", Bridge, "BR-HANDSHAKE-03", "the wait for the ToolListResponse has no deadline"),
    BrHandshakeLateMiddlewareUnanswered = ("br.handshake.late-middleware-unanswered", Bridge, "BR-HANDSHAKE-04", "a RegisterMiddlewareRequest after the handshake is not acknowledged"),
    BrHandshakePullsEarly = ("br.handshake.pulls-early", Bridge, "BR-HANDSHAKE-05", "the list pulls go out right after the ToolListResponse, while the burst still runs"),
    BrHandshakeMarkerIgnored = ("br.handshake.marker-ignored", Bridge, "BR-HANDSHAKE-06", "the handshake-complete marker does not end the burst; only HANDSHAKE_QUIET does"),
    BrHandshakeQuietNotRestarted = ("br.handshake.quiet-not-restarted", Bridge, "BR-HANDSHAKE-07", "a registration does not restart the HANDSHAKE_QUIET timer"),
    BrHandshakeControlLost = ("br.handshake.control-lost", Bridge, "BR-HANDSHAKE-08", "tool-list control during the list pulls is applied to the set being replaced, and lost at install"),
    BrHandshakeServedBeforePulls = ("br.handshake.served-before-pulls", Bridge, "BR-HANDSHAKE-09", "MCP service starts at the end of the burst, before the list pulls are answered"),
    BrHandshakePullTimeoutsAdd = ("br.handshake.pull-timeouts-add", Bridge, "BR-HANDSHAKE-10", "the list pulls' deadlines are counted one after another (up to three CALL_TIMEOUTs)"),
    BrHandshakeEmptySchemaBare = ("br.handshake.empty-schema-bare", Bridge, "BR-HANDSHAKE-11", "an empty input_schema_json is presented as `{}`"),
    BrHandshakeSchemaUnchecked = ("br.handshake.schema-unchecked", Bridge, "BR-HANDSHAKE-12", "a tool whose input schema is not an object schema is listed"),
    BrHandshakeDuplicatesListed = ("br.handshake.duplicates-listed", Bridge, "BR-HANDSHAKE-13", "a name that occurs twice in the ToolListResponse is listed twice"),
    BrHandshakeUnsolicitedApplied = ("br.handshake.unsolicited-applied", Bridge, "BR-HANDSHAKE-14", "a ToolListResponse with empty rid outside a reload replaces the tool list"),
    BrToollistRegisterMerges = ("br.toollist.register-merges", Bridge, "BR-TOOLLIST-01", "a new tool list is merged into the registered tools instead of replacing them"),
    BrToollistBlockSwapped = ("br.toollist.block-swapped", Bridge, "BR-TOOLLIST-02", "in blocklist mode enable adds to the blocked set and disable removes from it"),
    BrToollistAllowAsBlock = ("br.toollist.allow-as-block", Bridge, "BR-TOOLLIST-03", "set_allowed switches to blocklist mode (the arms mixed up)"),
    BrToollistEmptySwitchNotOpen = ("br.toollist.empty-switch-not-open", Bridge, "BR-TOOLLIST-04", "set_allowed with an empty list switches to an empty allowlist instead of open mode"),
    BrToollistConflictApplied = ("br.toollist.conflict-applied", Bridge, "BR-TOOLLIST-05", "a batch with both allow and block is applied (allow, then block) instead of rejected"),
    BrToollistBatchDisableFirst = ("br.toollist.batch-disable-first", Bridge, "BR-TOOLLIST-06", "a batch applies disable before enable"),
    BrToollistUnregisteredActive = ("br.toollist.unregistered-active", Bridge, "BR-TOOLLIST-07", "allowed names that are not registered appear in the active set"),
    BrToollistReplyBeforeUpdate = ("br.toollist.reply-before-update", Bridge, "BR-TOOLLIST-08", "the ActiveToolsResponse carries the active set from before the update"),
    BrToollistGetResets = ("br.toollist.get-resets", Bridge, "BR-TOOLLIST-09", "GetActiveToolsRequest resets the mode to open"),
    BrToollistCallDisabled = ("br.toollist.call-disabled", Bridge, "BR-TOOLLIST-11", "tools/call accepts a registered tool that is not in the active set"),
    BrToollistNoListChanged = ("br.toollist.no-list-changed", Bridge, "BR-TOOLLIST-12", "a control message that changes the active set sends no list_changed"),
    BrToollistListChangedAlways = ("br.toollist.list-changed-always", Bridge, "BR-TOOLLIST-13", "every control message sends list_changed, also when nothing changed"),
    BrToollistSessionCache = ("br.toollist.session-cache", Bridge, "BR-TOOLLIST-14", "each session keeps its own copy of the tools/list answer, dropped only when one of its own calls ends"),
    BrToollistUnsorted = ("br.toollist.unsorted", Bridge, "BR-TOOLLIST-16", "tools/list keeps the registration order"),
    BrSidebandReadsOneMore = ("br.sideband.reads-one-more", Bridge, "BR-SIDEBAND-01", "the bridge reads one byte more than RawHeader.size as the payload"),
    BrSidebandEnvelopeRid = ("br.sideband.envelope-rid", Bridge, "BR-SIDEBAND-02", "a payload is matched by the RawHeader frame's Envelope rid when it has one"),
    BrSidebandFieldIgnored = ("br.sideband.field-ignored", Bridge, "BR-SIDEBAND-03", "a structured_content_json payload becomes result_json"),
    BrSidebandPlainSizeChecked = ("br.sideband.plain-size-checked", Bridge, "BR-SIDEBAND-04", "an uncompressed payload whose uncompressed_size is not its length fails as a size mismatch"),
    BrSidebandUnknownFieldAccepted = ("br.sideband.unknown-field-accepted", Bridge, "BR-SIDEBAND-05", "a payload with an unknown field_name becomes result_json"),
    BrSidebandLimitMaxFrame = ("br.sideband.limit-max-frame", Bridge, "BR-SIDEBAND-06", "the sideband size limit is MAX_FRAME instead of LARGE_LIMIT"),
    BrSidebandOversizeUnanswered = ("br.sideband.oversize-unanswered", Bridge, "BR-SIDEBAND-07", "a payload above LARGE_LIMIT is skipped without failing its call"),
    BrSidebandBombUnbounded = ("br.sideband.bomb-unbounded", Bridge, "BR-SIDEBAND-08", "a zstd payload without a declared size is decompressed without a bound"),
    BrSidebandStrayAnswers = ("br.sideband.stray-answers", Bridge, "BR-SIDEBAND-09", "a payload for no pending call answers the only call in flight"),
    BrSidebandArgsRaw = ("br.sideband.args-raw", Bridge, "BR-SIDEBAND-10", "tools/call arguments above RAW_THRESHOLD go to the tool process as a RawHeader and a raw payload"),
    BrStreamFinalDataDropped = ("br.stream.final-data-dropped", Bridge, "BR-STREAM-01", "the data of the chunk with final=true is dropped"),
    BrStreamFirstOpen = ("br.stream.first-open", Bridge, "BR-STREAM-02", "a chunk is appended to the first open stream, whatever its rid"),
    BrStreamOrphanOpens = ("br.stream.orphan-opens", Bridge, "BR-STREAM-03", "a chunk without a StreamHeader opens a result_json stream"),
    BrStreamReserveTotal = ("br.stream.reserve-total", Bridge, "BR-STREAM-04", "the stream buffer is reserved for total_size up front"),
    BrStreamTotalIgnored = ("br.stream.total-ignored", Bridge, "BR-STREAM-05", "a non-zero total_size is not compared with the assembled length"),
    BrStreamUnknownFieldAsResult = ("br.stream.unknown-field-as-result", Bridge, "BR-STREAM-06", "a StreamHeader with an unknown field_name assembles into result_json"),
    BrStreamChunksExtendDeadline = ("br.stream.chunks-extend-deadline", Bridge, "BR-STREAM-07", "each chunk restarts its call's CALL_TIMEOUT, so a stream that never finishes keeps its call"),
    BrStreamArgsStreamed = ("br.stream.args-streamed", Bridge, "BR-STREAM-08", "tools/call arguments above RAW_THRESHOLD go to the tool process as a StreamHeader and StreamChunks"),
    BrLifecycleServeBeforeHandshake = ("br.lifecycle.serve-before-handshake", Bridge, "BR-LIFECYCLE-01", "MCP service starts once the tool process connected, before the handshake and pulls"),
    BrLifecycleFailedStartExitZero = ("br.lifecycle.failed-start-exit-zero", Bridge, "BR-LIFECYCLE-02", "a failed start ends the bridge with status 0"),
    BrLifecyclePendingNotFailed = ("br.lifecycle.pending-not-failed", Bridge, "BR-LIFECYCLE-03", "when the connection ends, pending calls are left to their CALL_TIMEOUT"),
    BrLifecycleExitOnFailure = ("br.lifecycle.exit-on-failure", Bridge, "BR-LIFECYCLE-04", "the bridge exits when its tool process fails while serving"),
    BrLifecycleNoRestart = ("br.lifecycle.no-restart", Bridge, "BR-LIFECYCLE-05", "a tool process that failed is not restarted"),
    BrLifecycleDownUnanswered = ("br.lifecycle.down-unanswered", Bridge, "BR-LIFECYCLE-06", "a tools/call while no tool process is connected is never answered"),
    BrLifecycleGiveUpKeepsTools = ("br.lifecycle.give-up-keeps-tools", Bridge, "BR-LIFECYCLE-07", "when restarting stops, the last tool list stays listed"),
    BrLifecycleClosedLivesOn = ("br.lifecycle.closed-lives-on", Bridge, "BR-LIFECYCLE-08", "a tool process that closed its connection but keeps running is left running"),
    BrLifecycleEofExitNonzero = ("br.lifecycle.eof-exit-nonzero", Bridge, "BR-LIFECYCLE-09", "end-of-file on stdin ends the bridge with status 1"),
    BrLifecycleSigtermIgnored = ("br.lifecycle.sigterm-ignored", Bridge, "BR-LIFECYCLE-10", "SIGTERM is ignored; only SIGINT ends the bridge"),
    BrLifecycleSocketLeft = ("br.lifecycle.socket-left", Bridge, "BR-LIFECYCLE-11", "the socket file is never removed"),
    BrLifecycleReadDefaultTimeout = ("br.lifecycle.read-default-timeout", Bridge, "BR-LIFECYCLE-12", "a resources/read waits the default 5 minutes instead of --call-timeout"),
    BrLifecycleListenEndedAtFailure = ("br.lifecycle.listen-ended-at-failure", Bridge, "BR-LIFECYCLE-13", "a failure of the tool process ends the open listen subscriptions as at shutdown (each answered with its result)"),
    // [F2] call, concur, cancel, progress, log, middleware, task, security
    BrCallSentTwice = ("br.call.sent-twice", Bridge, "BR-CALL-01", "each CallToolRequest is written twice under the same rid (a retry on a write that had succeeded)"),
    BrCallAbsentArgsNull = ("br.call.absent-args-null", Bridge, "BR-CALL-02", "absent or null arguments are forwarded as arguments_json `null` instead of `{}`"),
    BrCallNonObjectArgsForwarded = ("br.call.non-object-args-forwarded", Bridge, "BR-CALL-03", "arguments that are not a JSON object are forwarded as `{}` instead of error -32602"),
    BrCallUnknownToolAsResult = ("br.call.unknown-tool-as-result", Bridge, "BR-CALL-04", "a tools/call of an unknown tool gets an isError result instead of error -32602"),
    BrCallIsErrorDropped = ("br.call.is-error-dropped", Bridge, "BR-CALL-06", "is_error is not copied: every CallToolResult says `isError: false`"),
    BrCallBlockAnnotationsDropped = ("br.call.block-annotations-dropped", Bridge, "BR-CALL-07", "content blocks are rebuilt from their known fields: `annotations` and `_meta` are lost"),
    BrCallUntypedDropped = ("br.call.untyped-dropped", Bridge, "BR-CALL-08", "array elements that are not typed content objects are dropped instead of becoming text blocks"),
    BrCallEmptyAsText = ("br.call.empty-as-text", Bridge, "BR-CALL-09", "an empty result_json becomes one empty text block instead of an empty content array"),
    BrCallImageMimeDropped = ("br.call.image-mime-dropped", Bridge, "BR-CALL-10", "image and audio blocks lose their mimeType"),
    BrCallStructuredAny = ("br.call.structured-any", Bridge, "BR-CALL-11", "a structured_content_json that is JSON but no object is emitted as structuredContent in a legacy session"),
    BrCallToolErrorEmptyKept = ("br.call.tool-error-empty-kept", Bridge, "BR-CALL-13", "the `protomcp/toolError` object keeps the ToolError's empty strings"),
    BrCallDisableThenEnable = ("br.call.disable-then-enable", Bridge, "BR-CALL-14", "a result's disable_tools is applied before its enable_tools, so a name in both lists ends enabled"),
    BrCallTimeoutNeverArmed = ("br.call.timeout-never-armed", Bridge, "BR-CALL-15", "a tools/call at the tool process has no deadline: without a result it waits for ever"),
    BrCallWrongTypeIgnored = ("br.call.wrong-type-ignored", Bridge, "BR-CALL-16", "a reply of a type no operation expects under a call's rid is ignored, leaving the call waiting"),
    BrCallStrayAnswersOldest = ("br.call.stray-answers-oldest", Bridge, "BR-CALL-17", "a CallToolResponse under an unknown rid answers the oldest call still waiting"),
    BrCallSidebandFieldIgnored = ("br.call.sideband-field-ignored", Bridge, "BR-CALL-18", "a sideband payload for structured_content_json is taken as result_json"),
    BrConcurRidByPending = ("br.concur.rid-by-pending", Bridge, "BR-CONCUR-01", "a request's rid is numbered by the count of requests outstanding, so it can equal one still outstanding"),
    BrConcurRidsResetOnRestart = ("br.concur.rids-reset-on-restart", Bridge, "BR-CONCUR-02", "the rid counter starts again at 0 for each new tool process"),
    BrConcurCallsSerialized = ("br.concur.calls-serialized", Bridge, "BR-CONCUR-03", "a tools/call waits at the bridge until the call before it has its result"),
    BrConcurFifoMatch = ("br.concur.fifo-match", Bridge, "BR-CONCUR-04", "a call result goes to the oldest call waiting, whatever its rid"),
    BrConcurReaderWaitsForHost = ("br.concur.reader-waits-for-host", Bridge, "BR-CONCUR-06", "the reader stops reading from the tool process while a sampling or roots request waits for the host"),
    BrConcurAnswerToNewestWaiter = ("br.concur.answer-to-newest-waiter", Bridge, "BR-CONCUR-07", "an answer is handed to the newest host request still waiting (waiters kept as a stack), not to the one that caused it"),
    BrConcurReverseAsReply = ("br.concur.reverse-as-reply", Bridge, "BR-CONCUR-05", "a SamplingRequest or ListRootsRequest whose rid equals an outstanding rid is taken as that request's reply"),
    BrConcurSamplingAnsweredTwice = ("br.concur.sampling-answered-twice", Bridge, "BR-CONCUR-08", "the host's sampling answer is written to the tool process twice"),
    BrCancelEnvelopeRid = ("br.cancel.envelope-rid", Bridge, "BR-CANCEL-01", "the CancelRequest carries the call's rid as its Envelope rid too"),
    BrCancelAnswered = ("br.cancel.answered", Bridge, "BR-CANCEL-02", "a cancelled request is answered with an error response"),
    BrCancelLateResultDelivered = ("br.cancel.late-result-delivered", Bridge, "BR-CANCEL-03", "a cancelled call is cancelled at the tool process but still waited for, and its late result is sent to the host"),
    BrCancelUnknownForwarded = ("br.cancel.unknown-forwarded", Bridge, "BR-CANCEL-04", "notifications/cancelled naming an unknown or finished request is passed on as a CancelRequest with an empty request_id"),
    BrCancelNotOnTimeout = ("br.cancel.not-on-timeout", Bridge, "BR-CANCEL-05", "a call that timed out is answered but not cancelled at the tool process"),
    BrCancelNotOnSessionEnd = ("br.cancel.not-on-session-end", Bridge, "BR-CANCEL-06", "when a session ends, its calls in flight are abandoned without a CancelRequest"),
    BrCancelModernNotCancelled = ("br.cancel.modern-not-cancelled", Bridge, "BR-CANCEL-07", "cancelling a modern call's attached request forgets the call without a CancelRequest"),
    BrCancelHttpCloseIgnored = ("br.cancel.http-close-ignored", Bridge, "BR-CANCEL-08", "closing a modern POST's response stream does not end its request: the call goes on"),
    BrProgressTokenWithoutMeta = ("br.progress.token-without-meta", Bridge, "BR-PROGRESS-01", "every CallToolRequest carries a progress_token, also when the host sent no progressToken"),
    BrProgressTokenStringified = ("br.progress.token-stringified", Bridge, "BR-PROGRESS-02", "an integer progressToken is sent back to the host as a string"),
    BrProgressAfterResult = ("br.progress.after-result", Bridge, "BR-PROGRESS-03", "the progress route outlives the call: progress after the result is still forwarded"),
    BrProgressAllSessions = ("br.progress.all-sessions", Bridge, "BR-PROGRESS-04", "progress of a call is sent to every session, not only the calling one"),
    BrProgressStaleForwarded = ("br.progress.stale-forwarded", Bridge, "BR-PROGRESS-05", "progress values that do not increase are forwarded"),
    BrProgressParkedForwarded = ("br.progress.parked-forwarded", Bridge, "BR-PROGRESS-06", "progress that arrives while a modern call is parked is sent to the session all the same"),
    BrLogEmptyLogger = ("br.log.empty-logger", Bridge, "BR-LOG-01", "an empty logger is sent as `logger: \"\"` instead of being omitted"),
    BrLogDataUnparsed = ("br.log.data-unparsed", Bridge, "BR-LOG-02", "data is always the raw data_json text, never the parsed JSON"),
    BrLogWarnUnmapped = ("br.log.warn-unmapped", Bridge, "BR-LOG-03", "the level `warn` is not mapped to `warning` (it becomes `info`)"),
    BrLogInvalidLevelAccepted = ("br.log.invalid-level-accepted", Bridge, "BR-LOG-04", "logging/setLevel with an unknown level is answered `{}` (threshold debug) instead of -32602"),
    BrLogThresholdOffByOne = ("br.log.threshold-off-by-one", Bridge, "BR-LOG-05", "after setLevel L, messages one level below L still pass"),
    BrLogOnListen = ("br.log.on-listen", Bridge, "BR-LOG-07", "a log entry that reaches no legacy session is sent on the open listen subscriptions"),
    BrLogModernLevelIgnored = ("br.log.modern-level-ignored", Bridge, "BR-LOG-08", "a modern call's logLevel is not compared: every entry reaches its attached request"),
    BrLogNotToStderr = ("br.log.not-to-stderr", Bridge, "BR-LOG-09", "a log entry that reaches neither a legacy session nor a modern request is dropped silently"),
    BrMiddlewareBeforeDescending = ("br.middleware.before-descending", Bridge, "BR-MIDDLEWARE-01", "`before` intercepts run in descending priority"),
    BrMiddlewareArgsIgnored = ("br.middleware.args-ignored", Bridge, "BR-MIDDLEWARE-02", "the arguments_json of a `before` response does not replace the arguments"),
    BrMiddlewareRejectIgnored = ("br.middleware.reject-ignored", Bridge, "BR-MIDDLEWARE-03", "reject=true in a `before` response is ignored: the chain goes on and the tool is called"),
    BrMiddlewareAfterAscending = ("br.middleware.after-ascending", Bridge, "BR-MIDDLEWARE-04", "`after` intercepts run in ascending priority, like the `before` ones"),
    BrMiddlewareBadReplySkipped = ("br.middleware.bad-reply-skipped", Bridge, "BR-MIDDLEWARE-05", "a wrongly typed or missing intercept reply skips that middleware instead of failing the call"),
    BrMiddlewareKeptAfterRestart = ("br.middleware.kept-after-restart", Bridge, "BR-MIDDLEWARE-07", "the middleware of the previous tool process is kept for the new one"),
    BrMiddlewareAuditWithoutRegistration = ("br.middleware.audit-without-registration", Bridge, "BR-MIDDLEWARE-08", "without registered middleware each call still goes through the intercepts of a middleware with an empty name"),
    BrTaskCreateFailsCall = ("br.task.create-fails-call", Bridge, "BR-TASK-01", "a CreateTaskResponse under a call's rid is taken as its (wrongly typed) reply and fails the call"),
    BrTaskPollsStatus = ("br.task.polls-status", Bridge, "BR-TASK-02", "a CreateTaskResponse under a call's rid makes the bridge send a TaskStatusRequest for the task"),
    BrTaskCapabilityEchoed = ("br.task.capability-echoed", Bridge, "BR-TASK-03", "a client that declares tasks gets a tasks capability back in initialize"),
    BrTaskSupportAdvertised = ("br.task.support-advertised", Bridge, "BR-TASK-04", "a tool with task_support is listed with `execution: {taskSupport: optional}`"),
    BrTaskAugmentedRefused = ("br.task.augmented-refused", Bridge, "BR-TASK-05", "a tools/call with `params.task` is refused with -32602 instead of run as an ordinary call"),
    BrTaskModernInvalidParams = ("br.task.modern-invalid-params", Bridge, "BR-TASK-06", "a modern tasks/* request is answered -32602 instead of -32601"),
    BrSecuritySocketOpen = ("br.security.socket-open", Bridge, "BR-SECURITY-01", "the socket's directory is created 0755 and the socket left 0777 less the umask"),
    BrSecurityInflateThenCheck = ("br.security.inflate-then-check", Bridge, "BR-SECURITY-03", "a zstd payload without a declared size is decompressed completely and only then compared with LARGE_LIMIT"),
    BrSecurityDescriptionCutByBytes = ("br.security.description-cut-by-bytes", Bridge, "BR-SECURITY-04", "a tool description is cut at byte 1024 for a log line, which panics inside a multi-byte character"),
    BrSecurityNulNamePanics = ("br.security.nul-name-panics", Bridge, "BR-SECURITY-05", "a tools/call whose name holds a NUL character panics the bridge (the name made a C string)"),
    BrSecuritySecretLogged = ("br.security.secret-logged", Bridge, "BR-SECURITY-06", "a refused bearer token is logged on stderr together with the expected one"),
    BrSecurityAuthCaseInsensitive = ("br.security.auth-case-insensitive", Bridge, "BR-SECURITY-07", "bearer tokens are compared ignoring ASCII case"),
    BrSecuritySamplingFannedOut = ("br.security.sampling-fanned-out", Bridge, "BR-SECURITY-08", "a sampling request is also sent to every other session that declared sampling"),
    BrReloadListRequestInBurst = ("br.reload.list-request-in-burst", Bridge, "BR-RELOAD-02", "after a successful ReloadResponse the bridge sends ListToolsRequest as in a fresh handshake, before the burst's marker"),
    BrReloadFailureClearsTools = ("br.reload.failure-clears-tools", Bridge, "BR-RELOAD-03", "a refused reload leaves the bridge serving an empty tool list (the old one was dropped when the reload began)"),
    BrReloadToolsKept = ("br.reload.tools-kept", Bridge, "BR-RELOAD-04", "a reload or restart keeps the tool set that was served; only resources and prompts follow"),
    BrReloadNoListChanged = ("br.reload.no-list-changed", Bridge, "BR-RELOAD-05", "a reload or restart installs the new lists without any list_changed"),
    BrReloadInFlightLeft = ("br.reload.in-flight-left", Bridge, "BR-RELOAD-06", "calls in flight when a restart ends the tool process wait for CALL_TIMEOUT instead of failing at once"),
    BrReloadNotFolded = ("br.reload.not-folded", Bridge, "BR-RELOAD-07", "each change seen while a reload runs gets a further reload of its own instead of all being folded into one"),
    BrReloadNoRetryAfterFailure = ("br.reload.no-retry-after-failure", Bridge, "BR-RELOAD-08", "after a reload whose start failed, later triggers are ignored"),
    BrReloadSlowDebounce = ("br.reload.slow-debounce", Bridge, "BR-RELOAD-09", "watch mode waits 2 s of quiet after a change before it reloads"),
    // bridge: MCP side (§20–§26)
    // [F3] mcp, resource, prompt, complete, sampling, roots
    BrMcpDiagOnStdout = ("br.mcp.diag-on-stdout", Bridge, "BR-MCP-01", "diagnostic lines go to stdout (the MCP channel over stdio) instead of stderr"),
    BrMcpVersionAlwaysNewest = ("br.mcp.version-always-newest", Bridge, "BR-MCP-02", "initialize answers with the newest version even when the host's is supported"),
    BrMcpNo20250326 = ("br.mcp.no-2025-03-26", Bridge, "BR-MCP-03", "2025-03-26 is missing from the supported versions"),
    BrMcpNo20241105 = ("br.mcp.no-2024-11-05", Bridge, "BR-MCP-04", "2024-11-05 is missing from the supported versions"),
    BrMcpNoCompletionsCap = ("br.mcp.no-completions-cap", Bridge, "BR-MCP-05", "the initialize result leaves out the `completions` capability"),
    BrMcpNoPromptsCap = ("br.mcp.no-prompts-cap", Bridge, "BR-MCP-06", "the initialize result leaves out `prompts` although the tool process registered prompts"),
    BrMcpListsOnlyWhenRegistered = ("br.mcp.lists-only-when-registered", Bridge, "BR-MCP-07", "initialize advertises `resources` and `prompts` only when the tool process registered some"),
    BrMcpPingBeforeInitRefused = ("br.mcp.ping-before-init-refused", Bridge, "BR-MCP-08", "ping before initialize is refused like any other request"),
    BrMcpForwardedBeforeInit = ("br.mcp.forwarded-before-init", Bridge, "BR-MCP-09", "requests before initialize are served as if the session were initialized"),
    BrMcpEmptyServerVersion = ("br.mcp.empty-server-version", Bridge, "BR-MCP-10", "serverInfo.version is empty in the initialize result"),
    BrMcpFalseHints = ("br.mcp.false-hints", Bridge, "BR-MCP-11", "tool annotations state `false` for every hint flag that is unset"),
    BrMcpForeignCursorFirstPage = ("br.mcp.foreign-cursor-first-page", Bridge, "BR-MCP-13", "a cursor the bridge did not issue is read as the first page"),
    BrMcpInitializeSendsFrame = ("br.mcp.initialize-sends-frame", Bridge, "BR-MCP-14", "a session that initializes makes the bridge ask the tool process for its active tools"),
    BrMcpUnknownNotificationAnswered = ("br.mcp.unknown-notification-answered", Bridge, "BR-MCP-15", "an unknown notification is answered with error -32601"),
    BrMcpUnknownMethodInternal = ("br.mcp.unknown-method-internal", Bridge, "BR-MCP-15", "an unknown method is answered with -32603 instead of -32601"),
    BrMcpParseErrorIdZero = ("br.mcp.parse-error-id-zero", Bridge, "BR-MCP-16", "a line that is not JSON is answered with -32700 and id 0 instead of null"),
    BrMcpInvalidMessageDropped = ("br.mcp.invalid-message-dropped", Bridge, "BR-MCP-17", "a JSON object whose `jsonrpc` is not \"2.0\" is dropped instead of answered with -32600"),
    BrMcpInternalCodeZero = ("br.mcp.internal-code-zero", Bridge, "BR-MCP-18", "failures without a more specific code are answered with code 0"),
    BrMcpUnansweredAfterRestart = ("br.mcp.unanswered-after-restart", Bridge, "BR-MCP-19", "a tools/call that arrives after the tool process was restarted is never answered (the new connection's call table lost)"),
    BrMcpCallAnsweredTwice = ("br.mcp.call-answered-twice", Bridge, "BR-MCP-19", "the response to a tools/call is sent twice"),
    BrMcpDuplicateEndsSession = ("br.mcp.duplicate-ends-session", Bridge, "BR-MCP-20", "a request reusing the id of one in flight is refused with -32600, and the session ends with it"),
    BrMcpBatchUnanswered = ("br.mcp.batch-unanswered", Bridge, "BR-MCP-21", "a JSON-RPC batch is dropped without a -32600 answer"),
    BrMcpLateAnswerPassedOn = ("br.mcp.late-answer-passed-on", Bridge, "BR-MCP-22", "the host's answer to a sampling request the bridge gave up on is still passed to the tool process"),
    BrMcpNo20251125 = ("br.mcp.no-2025-11-25", Bridge, "BR-MCP-23", "initialize with 2025-11-25 is answered with 2025-06-18"),
    BrMcpNegotiates20260728 = ("br.mcp.negotiates-2026-07-28", Bridge, "BR-MCP-24", "initialize with 2026-07-28 is answered with 2026-07-28"),
    BrResourceEmptyNameKept = ("br.resource.empty-name-kept", Bridge, "BR-RESOURCE-01", "a resource with an empty name is listed with name \"\" instead of its URI"),
    BrResourceSizeZeroKept = ("br.resource.size-zero-kept", Bridge, "BR-RESOURCE-01", "a resource of size 0 is listed with `size: 0`"),
    BrResourceTemplateNameEmpty = ("br.resource.template-name-empty", Bridge, "BR-RESOURCE-02", "a template with an empty name is listed without a name"),
    BrResourceUriNormalized = ("br.resource.uri-normalized", Bridge, "BR-RESOURCE-03", "resources/read forwards the URI normalized: a URI without a path gets `/`"),
    BrResourceEmptyUriKept = ("br.resource.empty-uri-kept", Bridge, "BR-RESOURCE-04", "a content with an empty uri keeps it instead of the requested URI"),
    BrResourceBlobAsText = ("br.resource.blob-as-text", Bridge, "BR-RESOURCE-04", "a binary content is sent as text (lossy UTF-8) instead of base64 blob"),
    BrResourceEmptyContentsOk = ("br.resource.empty-contents-ok", Bridge, "BR-RESOURCE-05", "zero contents are answered with an empty `contents` list instead of -32002"),
    BrResourceInvalidUriListed = ("br.resource.invalid-uri-listed", Bridge, "BR-RESOURCE-07", "resources with an invalid URI stay in resources/list"),
    BrResourceSubscribeUnknown = ("br.resource.subscribe-unknown", Bridge, "BR-RESOURCE-08", "resources/subscribe is answered with -32601 although `subscribe` is advertised"),
    BrResourceUpdatedToAll = ("br.resource.updated-to-all", Bridge, "BR-RESOURCE-09", "notifications/resources/updated goes out also for URIs the session did not subscribe to"),
    BrResourceChangedAsReply = ("br.resource.changed-as-reply", Bridge, "BR-RESOURCE-10", "a ResourceChangedNotification is also taken as the reply of the oldest request in flight"),
    BrResourceModernNotFound = ("br.resource.modern-not-found", Bridge, "BR-RESOURCE-11", "a modern resources/read with zero contents gets -32002 instead of -32602"),
    BrResourceListenPrefix = ("br.resource.listen-prefix", Bridge, "BR-RESOURCE-12", "a listen subscription gets updates of every URI its URIs are a prefix of"),
    BrPromptRequiredDropped = ("br.prompt.required-dropped", Bridge, "BR-PROMPT-01", "prompts/list leaves out `required` of prompt arguments"),
    BrPromptUnknownForwarded = ("br.prompt.unknown-forwarded", Bridge, "BR-PROMPT-02", "prompts/get of an unknown prompt is sent to the tool process"),
    BrPromptMissingArgForwarded = ("br.prompt.missing-arg-forwarded", Bridge, "BR-PROMPT-03", "prompts/get without a required argument is sent to the tool process"),
    BrPromptArgsNull = ("br.prompt.args-null", Bridge, "BR-PROMPT-04", "absent prompt arguments are sent as `null` instead of `{}`"),
    BrPromptContentAlwaysText = ("br.prompt.content-always-text", Bridge, "BR-PROMPT-05", "every content_json becomes a text block, also a content object"),
    BrPromptDescriptionDropped = ("br.prompt.description-dropped", Bridge, "BR-PROMPT-05", "the prompt's description is not copied into the result"),
    BrPromptSystemPassed = ("br.prompt.system-passed", Bridge, "BR-PROMPT-06", "a message of role `system` is passed on"),
    BrCompleteResourceByName = ("br.complete.resource-by-name", Bridge, "BR-COMPLETE-01", "ref/resource is forwarded with ref.name (empty) instead of ref.uri"),
    BrCompleteOtherRefForwarded = ("br.complete.other-ref-forwarded", Bridge, "BR-COMPLETE-02", "an unknown reference type is sent to the tool process"),
    BrCompleteCutWithoutHasMore = ("br.complete.cut-without-has-more", Bridge, "BR-COMPLETE-03", "more than 100 values are cut to 100 without hasMore"),
    BrCompleteValuesUncapped = ("br.complete.values-uncapped", Bridge, "BR-COMPLETE-03", "more than 100 completion values are all passed on"),
    BrCompleteTotalKept = ("br.complete.total-kept", Bridge, "BR-COMPLETE-04", "total is passed on when it is smaller than the number of values"),
    BrSamplingEmptyRidAnswered = ("br.sampling.empty-rid-answered", Bridge, "BR-SAMPLING-01", "a SamplingRequest with empty rid is answered with an error"),
    BrSamplingSystemPromptDropped = ("br.sampling.system-prompt-dropped", Bridge, "BR-SAMPLING-02", "sampling/createMessage leaves out systemPrompt"),
    BrSamplingModelPreferencesDropped = ("br.sampling.model-preferences-dropped", Bridge, "BR-SAMPLING-02", "sampling/createMessage leaves out modelPreferences"),
    BrSamplingCapabilityUnchecked = ("br.sampling.capability-unchecked", Bridge, "BR-SAMPLING-02", "sampling/createMessage goes to a session that did not declare `sampling`"),
    BrSamplingPicksFirst = ("br.sampling.picks-first", Bridge, "BR-SAMPLING-03", "with several sessions calling, sampling goes to one of them"),
    BrSamplingModelDropped = ("br.sampling.model-dropped", Bridge, "BR-SAMPLING-04", "the SamplingResponse leaves out the host's model"),
    BrSamplingHostErrorEmpty = ("br.sampling.host-error-empty", Bridge, "BR-SAMPLING-05", "a host error becomes an empty SamplingResponse with no error"),
    BrSamplingStringContentKept = ("br.sampling.string-content-kept", Bridge, "BR-SAMPLING-06", "a plain string content is passed to the host as a string"),
    BrSamplingUnbounded = ("br.sampling.unbounded", Bridge, "BR-SAMPLING-07", "the wait for the host's sampling answer has no timeout"),
    BrSamplingZeroMaxTokens = ("br.sampling.zero-max-tokens", Bridge, "BR-SAMPLING-08", "max_tokens 0 is sent as maxTokens 0"),
    BrSamplingCapableOnly = ("br.sampling.capable-only", Bridge, "BR-SAMPLING-09", "the candidates are only the legacy sessions that declared `sampling`: pending calls and sessions without it are not counted"),
    BrSamplingPendingUnanswered = ("br.sampling.pending-unanswered", Bridge, "BR-SAMPLING-10", "a pending call's SamplingRequest without the capability is never answered"),
    BrSamplingArrayKept = ("br.sampling.array-kept", Bridge, "BR-SAMPLING-11", "a content array of one element is passed on as the array"),
    BrRootsEmptyRidAnswered = ("br.roots.empty-rid-answered", Bridge, "BR-ROOTS-01", "a ListRootsRequest with empty rid is answered"),
    BrRootsNameDropped = ("br.roots.name-dropped", Bridge, "BR-ROOTS-02", "root names are not copied into the ListRootsResponse"),
    BrRootsCapabilityUnchecked = ("br.roots.capability-unchecked", Bridge, "BR-ROOTS-03", "roots/list goes to a session that did not declare `roots`"),
    BrRootsListChangedAnswered = ("br.roots.list-changed-answered", Bridge, "BR-ROOTS-04", "notifications/roots/list_changed is answered with error -32601"),
    BrRootsModernNameMissing = ("br.roots.modern-name-missing", Bridge, "BR-ROOTS-05", "a modern roots answer's names are not copied"),
    // [F4] http, stateless
    BrHttpPathRoot = ("br.http.path-root", Bridge, "BR-HTTP-01", "the endpoint is served at `/` and `/mcp` gets 404"),
    BrHttpHostSubstring = ("br.http.host-substring", Bridge, "BR-HTTP-04", "a Host header that merely contains a loopback name is accepted"),
    BrHttpOriginNullAllowed = ("br.http.origin-null-allowed", Bridge, "BR-HTTP-05", "`Origin: null` is treated as no Origin and let through"),
    BrHttpOriginRequired = ("br.http.origin-required", Bridge, "BR-HTTP-05", "a request without an Origin header is refused with 403"),
    BrHttpSseIgnoresAccept = ("br.http.sse-ignores-accept", Bridge, "BR-HTTP-06", "a POST's requests are answered as text/event-stream even when Accept allows only application/json"),
    BrHttpNotification200 = ("br.http.notification-200", Bridge, "BR-HTTP-07", "a POST of notifications only is answered 200 instead of 202"),
    BrHttpCharsetRefused = ("br.http.charset-refused", Bridge, "BR-HTTP-08", "`Content-Type: application/json; charset=utf-8` is refused with 415 (exact match)"),
    BrHttpAcceptParamsRefused = ("br.http.accept-params-refused", Bridge, "BR-HTTP-09", "Accept values with parameters or q-values do not match and get 406"),
    BrHttpSessionId64Bits = ("br.http.session-id-64-bits", Bridge, "BR-HTTP-10", "the Mcp-Session-Id carries only 64 random bits (16 hex digits)"),
    BrHttpMissingSession404 = ("br.http.missing-session-404", Bridge, "BR-HTTP-11", "a POST without Mcp-Session-Id (not an initialize) gets 404 instead of 400"),
    BrHttpUnknownSession400 = ("br.http.unknown-session-400", Bridge, "BR-HTTP-11", "a POST with an unknown Mcp-Session-Id gets 400 instead of 404"),
    BrHttpDeleteKeepsSession = ("br.http.delete-keeps-session", Bridge, "BR-HTTP-12", "DELETE answers 200 but the session lives on"),
    BrHttpGetStreamStarved = ("br.http.get-stream-starved", Bridge, "BR-HTTP-13", "session messages are kept for a GET stream to come even while one is open"),
    BrHttpCauseOnGet = ("br.http.cause-on-get", Bridge, "BR-HTTP-14", "a call's progress goes on the session's GET stream, not on the POST's"),
    BrHttpVersionHeaderIgnored = ("br.http.version-header-ignored", Bridge, "BR-HTTP-15", "an unsupported MCP-Protocol-Version header is not checked"),
    BrHttpNoAllow = ("br.http.no-allow", Bridge, "BR-HTTP-16", "405 is sent without an Allow header"),
    BrHttpIdsBridgeWide = ("br.http.ids-bridge-wide", Bridge, "BR-HTTP-17", "a request id in flight in any session is refused as a duplicate in every other"),
    BrHttpVersionBridgeWide = ("br.http.version-bridge-wide", Bridge, "BR-HTTP-18", "MCP-Protocol-Version is held against the version the latest initialize negotiated, bridge-wide"),
    BrHttpListChangedOneSession = ("br.http.list-changed-one-session", Bridge, "BR-HTTP-19", "list_changed reaches only one of the sessions"),
    BrHttpNoChallenge = ("br.http.no-challenge", Bridge, "BR-HTTP-20", "a 401 for a missing bearer token has no WWW-Authenticate header"),
    BrHttpApiKeyPostOnly = ("br.http.apikey-post-only", Bridge, "BR-HTTP-21", "the API key is checked on POST only"),
    BrHttpFirstCredentialOnly = ("br.http.first-credential-only", Bridge, "BR-HTTP-22", "with several --auth options only the first is checked"),
    BrHttpSessionReplacesAuth = ("br.http.session-replaces-auth", Bridge, "BR-HTTP-23", "a request with a valid Mcp-Session-Id skips the credential check"),
    BrHttpEmptySecretAccepted = ("br.http.empty-secret-accepted", Bridge, "BR-HTTP-24", "an --auth variable that is set but empty is accepted (only unset refused)"),
    BrHttpModernSessionChecked = ("br.http.modern-session-checked", Bridge, "BR-HTTP-27", "a modern POST with an unknown Mcp-Session-Id gets 404"),
    BrHttpModernEchoesSession = ("br.http.modern-echoes-session", Bridge, "BR-HTTP-27", "the request's Mcp-Session-Id is echoed on the response to a modern request"),
    BrHttpMethodHeaderUnchecked = ("br.http.method-header-unchecked", Bridge, "BR-HTTP-28", "the Mcp-Method header of a modern POST is not compared with the body"),
    BrHttpNotFound400 = ("br.http.not-found-400", Bridge, "BR-HTTP-29", "-32601 for a modern request is sent with status 400 instead of 404"),
    BrHttpParamValueUnchecked = ("br.http.param-value-unchecked", Bridge, "BR-HTTP-30", "an Mcp-Param-* header is checked for presence only, not its value"),
    BrHttpBadAnnotationKept = ("br.http.bad-annotation-kept", Bridge, "BR-HTTP-31", "a tool with an invalid x-mcp-header annotation stays in tools/list"),
    BrHttpModernStreamCut = ("br.http.modern-stream-cut", Bridge, "BR-HTTP-32", "a modern request's event stream ends after its first notification, before the response"),
    BrHttpLegacyStreamCut = ("br.http.legacy-stream-cut", Bridge, "BR-HTTP-33", "a 2025-11-25 POST's event stream ends after its first notification, without an event id"),
    BrHttpSessionlessNotification400 = ("br.http.sessionless-notification-400", Bridge, "BR-HTTP-34", "a notification POSTed without Mcp-Session-Id gets 400"),
    BrHttpModernSharedSession = ("br.http.modern-shared-session", Bridge, "BR-HTTP-35", "every modern POST goes through one shared session, so equal ids of concurrent POSTs collide"),
    BrStatelessLegacyOnceInitialized = ("br.stateless.legacy-once-initialized", Bridge, "BR-STATELESS-01", "once a legacy session is initialized on the stream, modern requests are served as legacy ones"),
    BrStatelessDiscoverNeedsMeta = ("br.stateless.discover-needs-meta", Bridge, "BR-STATELESS-02", "server/discover without _meta is classified legacy"),
    BrStatelessLevelIntoSession = ("br.stateless.level-into-session", Bridge, "BR-STATELESS-03", "a modern request's logLevel becomes the legacy session's threshold"),
    BrStatelessCapsOptional = ("br.stateless.caps-optional", Bridge, "BR-STATELESS-04", "a modern request without clientCapabilities is served as if they were {}"),
    BrStatelessSupportedModernOnly = ("br.stateless.supported-modern-only", Bridge, "BR-STATELESS-05", "-32022's data.supported lists only 2026-07-28"),
    BrStatelessBadLevelIgnored = ("br.stateless.bad-level-ignored", Bridge, "BR-STATELESS-06", "an unknown logLevel is ignored instead of -32602"),
    BrStatelessPingServed = ("br.stateless.ping-served", Bridge, "BR-STATELESS-07", "a modern ping is answered {} instead of -32601"),
    BrStatelessDiscoverNoLogging = ("br.stateless.discover-no-logging", Bridge, "BR-STATELESS-08", "server/discover's capabilities lack logging"),
    BrStatelessInputRequiredAsComplete = ("br.stateless.input-required-as-complete", Bridge, "BR-STATELESS-09", "an InputRequiredResult is sent with resultType complete"),
    BrStatelessServerInfoSkipped = ("br.stateless.server-info-skipped", Bridge, "BR-STATELESS-10", "a result that has _meta of its own gets no serverInfo"),
    BrStatelessReadNoCacheHints = ("br.stateless.read-no-cache-hints", Bridge, "BR-STATELESS-11", "resources/read results carry no ttlMs and cacheScope"),
    BrStatelessToolsTtl = ("br.stateless.tools-ttl", Bridge, "BR-STATELESS-12", "a modern tools/list carries ttlMs 60000"),
    BrStatelessListTtl = ("br.stateless.list-ttl", Bridge, "BR-STATELESS-13", "prompts, resources, templates and reads carry ttlMs 60000 without configuration"),
    BrStatelessReadPublic = ("br.stateless.read-public", Bridge, "BR-STATELESS-14", "resources/read results have cacheScope public"),
    BrStatelessUntaggedListChanged = ("br.stateless.untagged-list-changed", Bridge, "BR-STATELESS-15", "a stream without an initialized session gets untagged list_changed"),
    BrStatelessMissingCapability32021 = ("br.stateless.missing-capability-32021", Bridge, "BR-STATELESS-16", "an input request the attached request has no capability for is answered -32021 to the host"),
    BrStatelessInputNotAsked = ("br.stateless.input-not-asked", Bridge, "BR-STATELESS-17", "an input request of a modern call is held but no InputRequiredResult is sent"),
    BrStatelessKeyPerRound = ("br.stateless.key-per-round", Bridge, "BR-STATELESS-18", "an input request asked for again gets a new key"),
    BrStatelessInputBareParams = ("br.stateless.input-bare-params", Bridge, "BR-STATELESS-19", "a sampling input request is listed as its params alone, without method"),
    BrStatelessStateSpace = ("br.stateless.state-space", Bridge, "BR-STATELESS-20", "requestState holds a space between its parts"),
    BrStatelessStateReusable = ("br.stateless.state-reusable", Bridge, "BR-STATELESS-22", "a consumed requestState is accepted again"),
    BrStatelessStateOtherArgs = ("br.stateless.state-other-args", Bridge, "BR-STATELESS-22", "a requestState is accepted for other arguments"),
    BrStatelessAnswersNotSent = ("br.stateless.answers-not-sent", Bridge, "BR-STATELESS-23", "an accepted retry's answers never reach the tool process"),
    BrStatelessUnansweredWaits = ("br.stateless.unanswered-waits", Bridge, "BR-STATELESS-24", "a retry that leaves keys unanswered waits instead of a new InputRequiredResult"),
    BrStatelessAnswerUnchecked = ("br.stateless.answer-unchecked", Bridge, "BR-STATELESS-25", "a malformed inputResponses member is accepted"),
    BrStatelessAbandonedNotCancelled = ("br.stateless.abandoned-not-cancelled", Bridge, "BR-STATELESS-26", "a call abandoned after T_MRTR is forgotten without CancelRequest"),
    BrStatelessParkedInputsKept = ("br.stateless.parked-inputs-kept", Bridge, "BR-STATELESS-27", "a parked call's result leaves its input requests unanswered"),
    BrStatelessParkedCounts = ("br.stateless.parked-counts", Bridge, "BR-STATELESS-28", "time parked counts against CALL_TIMEOUT: a retry keeps the first request's deadline"),
    BrStatelessRetrySameSession = ("br.stateless.retry-same-session", Bridge, "BR-STATELESS-29", "a retry is refused unless it comes in the session of the first request"),
    BrStatelessListenNoFilter = ("br.stateless.listen-no-filter", Bridge, "BR-STATELESS-30", "subscriptions/listen without params.notifications is accepted"),
    BrStatelessListenFirstOnly = ("br.stateless.listen-first-only", Bridge, "BR-STATELESS-31", "a list change reaches only the first listen subscription"),
    BrStatelessCancelledListenTold = ("br.stateless.cancelled-listen-told", Bridge, "BR-STATELESS-32", "a cancelled listen subscription still gets list changes"),
    BrStatelessStructuredObjectOnly = ("br.stateless.structured-object-only", Bridge, "BR-STATELESS-34", "a modern result's structuredContent is dropped unless an object"),
    BrStatelessModernOnlyHidden = ("br.stateless.modern-only-hidden", Bridge, "BR-STATELESS-35", "a tool whose output schema is not of type object is left out of modern tools/list"),
    // [E] explore
    BrMrtrRefusedRetryForwards = ("br.mrtr.refused-retry-forwards", Bridge, "BR-STATELESS-22", "a retry with other arguments is refused (-32602) only after its inputResponses went to the tool process"),
    BrMrtrNeverExpires = ("br.mrtr.never-expires", Bridge, "BR-STATELESS-26", "a parked call nobody retries is never cancelled (T_MRTR never fires)"),
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
