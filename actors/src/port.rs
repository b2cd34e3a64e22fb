//! The narrow handle consensus drives the pipeline through, without seeing
//! actix: build a block on request, put back a failed proposal's
//! transactions, deliver a decided block to preparation, and watch the
//! committed height.
//!
//! Everything in it is a flume sender, a tokio oneshot or a watch
//! receiver, all of which work from any runtime on any thread, so the
//! consensus engine may run its own tokio runtime beside the actix system.
//!
//! ```text
//!  consensus ──build──▶ producer (on request) ──Built──▶ consensus
//!  consensus ──deliver(block, on_commit)──▶ preparation ─▶ … ─▶ store commit ─▶ on_commit()
//!                                                                      └──▶ committed()
//! ```

use std::{sync::Arc, time::Instant};

use alloy_primitives::{map::B256Set, Bytes};
use parking_lot::Mutex;
use sluice_messages::{Built, Parent, PipelineClosed, RecoveredTx, SealedBlock, StateRef};
use sluice_store::Store;
use tokio::sync::{oneshot, watch};

use crate::{
    admission::Admission,
    mailbox::MailboxSender,
    metrics as m,
    protocol::{Delivery, PrepareMsg, ProducerMsg},
};

/// A validator's handle on the pipeline. Cheap to clone; the pipeline
/// drains at shutdown only once every clone is gone (or closed).
#[derive(Clone)]
pub struct ValidatorPort {
    producer: MailboxSender<ProducerMsg>,
    prepare: MailboxSender<PrepareMsg>,
    heads: watch::Receiver<u64>,
    store: Arc<Store>,
    peers: Peers,
    /// A transaction taken from `peers.outbound` that did not fit the last
    /// batch: the first of the next.
    carry: Arc<Mutex<Option<Bytes>>>,
}

/// What the port exchanges with the other validators: the queue of this
/// node's clients' transactions to send them, and the admission that
/// theirs go through.
#[derive(Clone)]
pub(crate) struct Peers {
    /// `None` outside validator mode.
    pub(crate) outbound: Option<flume::Receiver<Bytes>>,
    pub(crate) admission: Arc<Admission>,
    /// Where `eth_syncing` learns how far consensus has finalized.
    pub(crate) sync: Arc<sluice_rpc::sync::SyncStatus>,
    /// The finalized-block feed RPC serves.
    pub(crate) finalized: Arc<sluice_rpc::finalized::FinalizedFeed>,
}

impl std::fmt::Debug for ValidatorPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidatorPort")
            .field("producer", &self.producer)
            .field("prepare", &self.prepare)
            .field("committed", &*self.heads.borrow())
            .finish_non_exhaustive()
    }
}

impl ValidatorPort {
    /// A port over the producer's and preparation's mailboxes.
    pub(crate) fn new(
        producer: MailboxSender<ProducerMsg>,
        prepare: MailboxSender<PrepareMsg>,
        heads: watch::Receiver<u64>,
        store: Arc<Store>,
        peers: Peers,
    ) -> Self {
        ValidatorPort { producer, prepare, heads, store, peers, carry: Arc::default() }
    }

    /// Waits for transactions this node's own clients sent that the other
    /// validators have not been sent yet, and takes up to `max_txs` of
    /// them whose raw sizes plus 4 bytes each sum to at most `max_bytes`
    /// (always at least one). Empty once the node stopped.
    pub async fn outbound(&self, max_txs: usize, max_bytes: usize) -> Vec<Bytes> {
        let Some(queue) = &self.peers.outbound else { return Vec::new() };
        let carried = self.carry.lock().take();
        let first = match carried {
            Some(tx) => tx,
            None => match queue.recv_async().await {
                Ok(tx) => tx,
                Err(_) => return Vec::new(),
            },
        };
        let mut bytes = first.len() + 4;
        let mut batch = vec![first];
        while batch.len() < max_txs {
            let Ok(tx) = queue.try_recv() else { break };
            if bytes + tx.len() + 4 > max_bytes {
                *self.carry.lock() = Some(tx);
                break;
            }
            bytes += tx.len() + 4;
            batch.push(tx);
        }
        batch
    }

    /// Consensus has seen blocks finalized up to `height`.
    pub fn finalized(&self, height: u64) {
        self.peers.sync.finalized(height);
    }

    /// Publishes a finalized block with its certificate on the feed RPC
    /// serves (`consensus_subscribe`, `consensus_getFinalized`).
    pub fn publish_finalized(&self, item: sluice_messages::FinalizedItem) {
        self.peers.finalized.publish(item);
    }

    /// Admits transactions another validator sent, in order, as this
    /// node's RPC would; never sends them on (see
    /// [`crate::admission::admit_from_peer`]).
    pub async fn admit_from_peer(&self, txs: Vec<Bytes>) {
        crate::admission::admit_from_peer(&self.peers.admission, txs).await;
    }

    /// Builds a block on `parent` once the mempool holds a full block or
    /// `block_time` has passed (empty if nothing waits), leaving out (but
    /// keeping queued, as those blocks may yet lose their height) the
    /// transactions in `exclude`: those of the blocks `parent` ends that
    /// are not committed here yet. `None`
    /// when the producer stopped, or dropped the request for a newer one.
    pub async fn build(
        &self,
        parent: Parent,
        timestamp: u64,
        state_ref: Option<StateRef>,
        exclude: Arc<B256Set>,
    ) -> Option<Built> {
        let (reply, answer) = oneshot::channel();
        let msg = ProducerMsg::Build { parent, timestamp, state_ref, exclude, reply };
        self.producer.send(msg).await.ok()?;
        answer.await.ok()
    }

    /// Hands back the transactions of a proposal that lost its height, in
    /// block order, to the front of the mempool, waiting for room in the
    /// producer's mailbox (it drains in microseconds; wake-ups can fill it
    /// for a moment under load). They must be back before the next build,
    /// or a later nonce of a sender could be proposed before an earlier
    /// one. A stopped producer loses them (logged with the count,
    /// `sluice_txs_dropped_total{reason="restore_refused"}`).
    pub async fn restore(&self, txs: Vec<RecoveredTx>) {
        if txs.is_empty() {
            return;
        }
        let n = txs.len();
        if self.producer.send(ProducerMsg::Restore { txs }).await.is_err() {
            tracing::error!(
                n,
                "producer stopped: transactions of a failed proposal not restored to the mempool"
            );
            metrics::counter!(m::TXS_DROPPED, "reason" => m::DROP_RESTORE_REFUSED).increment(n as u64);
        }
    }

    /// Sends a decided block into preparation, waiting for room
    /// (backpressure). `on_commit` runs once the store has committed and
    /// published it; never if the node halts first.
    pub async fn deliver(
        &self,
        block: Arc<SealedBlock>,
        on_commit: Box<dyn FnOnce() + Send>,
    ) -> Result<(), PipelineClosed> {
        let msg = PrepareMsg { block, sealed_at: Instant::now(), delivery: Some(Delivery::new(on_commit)) };
        self.prepare.send(msg).await.map_err(|_| PipelineClosed)
    }

    /// The committed height, updated as blocks commit.
    pub fn committed(&self) -> watch::Receiver<u64> {
        self.heads.clone()
    }

    /// The store: app hashes, the head, whether it halted.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Lets go of the mailboxes, so that (once every clone has too) the
    /// pipeline can drain at shutdown.
    pub fn close(self) {
        drop(self);
    }
}
