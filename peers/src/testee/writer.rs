//! The one task that writes to the socket. Everything the testee sends goes through its channel
//! as a whole item (an Envelope, or pre-encoded bytes such as a RawHeader frame together with its
//! payload), so the bytes of two frames never interleave (TP-FRAME-02, TP-SIDEBAND-01).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use protomcp_proto::frame::{EncodeError, MAX_FRAME, PREFIX_LEN, encode_frame_into};
use protomcp_proto::pb::Envelope;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;

use super::diag;
use crate::io::Outgoing;

/// Items the channel holds before senders wait: the bound on what is queued for the socket.
pub(super) const CAPACITY: usize = 256;
/// Small items are gathered into one write up to this many bytes.
const GATHER: usize = 256 * 1024;

/// The sending side, cloned into every task that emits frames.
#[derive(Debug, Clone)]
pub(crate) struct Out {
    tx: mpsc::Sender<Outgoing>,
}

impl Out {
    pub(super) fn new(tx: mpsc::Sender<Outgoing>) -> Self {
        Out { tx }
    }

    /// Queues one Envelope; false when the writer is gone (the connection is over).
    pub async fn send(&self, envelope: Envelope) -> bool {
        if protomcp_proto::fault::on(protomcp_proto::fault::Fault::TpFrameSplitWrites) {
            let mut buf = BytesMut::new();
            if let Err(err) = encode_checked(&envelope, &mut buf) {
                diag!("not sending a {:?}: {err}", envelope.msg.as_ref().map(protomcp_proto::Arm::of));
                return true;
            }
            return self.in_two(buf.freeze(), PREFIX_LEN).await;
        }
        self.tx.send(Outgoing::Envelope(envelope)).await.is_ok()
    }

    /// Queues bytes that go to the socket exactly as given, in one piece.
    pub async fn raw(&self, bytes: Bytes) -> bool {
        if protomcp_proto::fault::on(protomcp_proto::fault::Fault::TpFrameSplitWrites) && bytes.len() > PREFIX_LEN {
            // The first frame (a RawHeader frame, say), then what follows it (its payload).
            let first = PREFIX_LEN + u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            let at = first.min(bytes.len());
            return self.in_two(bytes, at).await;
        }
        self.tx.send(Outgoing::Raw(bytes)).await.is_ok()
    }

    /// `tp.frame.split-writes`: the bytes go out as two writes, `bytes[..at]` and the rest, with
    /// the writer let go in between (as an SDK that writes the prefix and the body under two
    /// takes of its lock), so a frame of another handler can get between them.
    async fn in_two(&self, mut bytes: Bytes, at: usize) -> bool {
        let head = bytes.split_to(at);
        if self.tx.send(Outgoing::Raw(head)).await.is_err() {
            return false;
        }
        tokio::task::yield_now().await;
        bytes.is_empty() || self.tx.send(Outgoing::Raw(bytes)).await.is_ok()
    }

    /// Queues Envelopes that must reach the wire back to back, with no other frame between them
    /// (the handshake-complete marker and the hidden-tool DisableToolsRequest, TP-HANDSHAKE-12).
    pub async fn batch(&self, envelopes: &[Envelope]) -> bool {
        let mut buf = BytesMut::new();
        for e in envelopes {
            if let Err(err) = encode_checked(e, &mut buf) {
                diag!("not sending a {:?}: {err}", e.msg.as_ref().map(protomcp_proto::Arm::of));
            }
        }
        self.raw(buf.freeze()).await
    }
}

/// Frames `envelope` into `dst` within `MAX_FRAME` (TP-FRAME-04), with `namespace` cleared
/// (TP-FRAME-08: the testee never sends one).
fn encode_checked(envelope: &Envelope, dst: &mut BytesMut) -> Result<(), EncodeError> {
    use protomcp_proto::fault::{Fault, on};
    if on(Fault::TpFrameNamespaceSet) {
        let e = Envelope { namespace: "protomcp".into(), ..envelope.clone() };
        return encode_frame_into(&e, MAX_FRAME, dst);
    }
    let limit = if on(Fault::TpFrameNoWriteLimit) { u32::MAX } else { MAX_FRAME };
    if envelope.namespace.is_empty() {
        encode_frame_into(envelope, limit, dst)
    } else {
        let mut e = envelope.clone();
        e.namespace.clear();
        encode_frame_into(&e, MAX_FRAME, dst)
    }
}

/// Writes what arrives on `rx` until every sender is gone (`Ok`) or the socket fails (`Err`).
/// With `drip`, every byte is written on its own, one per second (`--misbehave drip`).
pub(super) async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Outgoing>,
    drip: bool,
) -> std::io::Result<()> {
    let mut buf = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Outgoing::Envelope(e) => {
                    if let Err(err) = encode_checked(&e, &mut buf) {
                        // Only reachable when a reply cannot be made to fit at all (a request
                        // whose rid alone fills a frame); the limit is never broken.
                        diag!("not sending a {:?}: {err}", e.msg.as_ref().map(protomcp_proto::Arm::of));
                    }
                }
                Outgoing::Raw(bytes) if bytes.len() >= GATHER => {
                    write(&mut wr, &buf, drip).await?;
                    buf.clear();
                    write(&mut wr, &bytes, drip).await?;
                }
                Outgoing::Raw(bytes) => buf.extend_from_slice(&bytes),
            }
            if buf.len() < GATHER {
                next = rx.try_recv().ok();
            }
        }
        write(&mut wr, &buf, drip).await?;
        if buf.capacity() > 4 * GATHER {
            buf = BytesMut::new();
        } else {
            buf.clear();
        }
    }
    Ok(())
}

async fn write(wr: &mut OwnedWriteHalf, bytes: &[u8], drip: bool) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    if !drip {
        return wr.write_all(bytes).await;
    }
    for byte in bytes {
        wr.write_all(std::slice::from_ref(byte)).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}
