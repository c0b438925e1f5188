//! The host's requests that need the tool process, as async calls over the core: tools/call
//! (cancellable), resources/read, prompts/get and completion/complete. Each starts an operation
//! in the core and waits for its answer; an operation whose caller goes away (the host cancelled,
//! the session ended, the future was dropped) is cancelled in the core.

use protomcp_proto::bridge_core::ModernCall;
use protomcp_proto::fault::{self, Fault};

use super::{Arc, Bridge, Core, HostError, HostSession, Instant, OpId, SessionId, Value, oneshot};

/// Cancels the operation in the core unless it was answered.
struct InFlight<'a> {
    bridge: &'a Bridge,
    op: OpId,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.answered {
            let op = self.op;
            self.bridge.drive(|sh, _| {
                sh.waiters.remove(&op);
                sh.core.cancel(op);
            });
        }
    }
}

impl Bridge {
    /// Starts an operation with `start` and waits for its answer, or for `cancel`.
    async fn operate(
        &self,
        start: impl FnOnce(&mut Core, Instant) -> Result<OpId, HostError>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Value, HostError> {
        let (tx, rx) = oneshot::channel();
        let op = self.drive(|sh, now| {
            let op = start(&mut sh.core, now)?;
            sh.waiters.insert(op, tx);
            Ok::<_, HostError>(op)
        })?;
        let mut flight = InFlight { bridge: self, op, answered: false };
        tokio::pin!(cancel);
        let mut rx = rx;
        let ended = |_| Err(HostError::Internal("the bridge ended".into()));
        let r = tokio::select! {
            biased;
            r = &mut rx => r.unwrap_or_else(ended),
            _ = &mut cancel => {
                if !fault::on(Fault::BrCancelLateResultDelivered) {
                    return Err(HostError::Cancelled);
                }
                self.drive(|sh, _| sh.core.cancel(op));
                (&mut rx).await.unwrap_or_else(ended)
            }
        };
        flight.answered = true;
        r
    }

    /// Forwards one tools/call (§6, §9, §13). `progress` is the host's progressToken;
    /// `cancel` resolves when the host cancels the request.
    pub async fn call_tool(
        &self,
        session: &Arc<dyn HostSession>,
        name: &str,
        arguments: Option<Value>,
        progress: Option<Value>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Value, HostError> {
        let id = session.id();
        let r = self.operate(|c, now| c.start_call(now, id, name, arguments, progress), cancel).await;
        if r.is_ok() {
            // What the call caused (progress, list_changed) reaches the host before its result.
            session.flush().await;
        }
        r
    }

    /// Forwards one modern tools/call, or a retry of a parked one (spec §26.3/26.4).
    pub async fn call_modern(
        &self,
        session: &Arc<dyn HostSession>,
        call: ModernCall,
        cancel: impl Future<Output = ()>,
    ) -> Result<Value, HostError> {
        let id = session.id();
        let r = self.operate(|c, now| c.start_modern(now, id, call), cancel).await;
        if r.is_ok() {
            session.flush().await;
        }
        r
    }

    pub async fn read_resource(&self, session: SessionId, uri: &str) -> Result<Value, HostError> {
        self.operate(|c, now| c.start_read(now, session, uri), std::future::pending()).await
    }

    pub async fn get_prompt(
        &self,
        session: SessionId,
        name: &str,
        arguments: Option<Value>,
    ) -> Result<Value, HostError> {
        self.operate(|c, now| c.start_prompt(now, session, name, arguments), std::future::pending()).await
    }

    /// completion/complete (§16): `reference` is the MCP `ref` object.
    pub async fn complete(
        &self,
        session: SessionId,
        reference: &Value,
        arg_name: &str,
        arg_value: &str,
    ) -> Result<Value, HostError> {
        self.operate(|c, now| c.start_complete(now, session, reference, arg_name, arg_value), std::future::pending())
            .await
    }
}
