//! The envelopes that cross mailboxes: one enum per actor, each variant a
//! named-field message. Payloads are `sluice-messages` data; replies travel
//! on a oneshot channel carried by the request, so a caller that gave up
//! (a closed HTTP connection) costs the actor nothing.

// Transactions travel by value: boxing them would add an allocation per
// transaction on the hottest path, while a mailbox slot of ~500 bytes times
// a bounded capacity is a small, fixed cost.
#![allow(clippy::large_enum_variant)]

use std::{fmt, sync::Arc, time::Instant};

use alloy_primitives::{map::B256Set, Address, B256};
use parking_lot::Mutex;
use sluice_messages::{
    Built, ExecutedBlock, OnCommit, Parent, PreparedBlock, RecoveredTx, SealedBlock, StateRef,
};
use sluice_txpool::{Pooled, TxError};
use tokio::sync::oneshot;

/// A sender's committed account as admission read it, outside the nonce
/// actor's serialized section.
pub use sluice_txpool::CommittedAccount;

/// One transaction of a [`NonceMsg::Admit`].
#[derive(Debug)]
pub struct AdmitTx {
    /// The transaction, sender recovered.
    pub tx: RecoveredTx,
    /// The sender's committed account, read before sending.
    pub committed: CommittedAccount,
    /// A nonce above the sender's next one is held for its gap (else
    /// refused with "nonce too high").
    pub hold_gaps: bool,
    /// Another validator sent it: never sent on to the others.
    pub from_peer: bool,
}

/// Messages to the nonce reservation actor.
#[derive(Debug)]
pub enum NonceMsg {
    /// Admit statelessly valid transactions, in order: reserve each one's
    /// nonce, take pool capacity, forward it to its mempool shard. One
    /// message carries a whole JSON-RPC batch (or a peer's gossip batch),
    /// so a batch costs one hop and one reply, not one per transaction.
    Admit {
        /// The transactions, senders recovered, in the order sent.
        txs: Vec<AdmitTx>,
        /// When admission received them (for the reservation latency metric).
        received: Instant,
        /// One answer per transaction, in order: Ok once it is in its
        /// shard's mailbox (or held for its nonce gap).
        reply: oneshot::Sender<Vec<Result<(), TxError>>>,
    },
    /// A block was committed: these senders have fewer transactions in
    /// flight.
    Executed {
        /// The committed height.
        height: u64,
        /// Each sender of the block.
        senders: Vec<SenderProgress>,
    },
    /// An admitted transaction was lost before any block carried it (an
    /// injected `drop` in a mempool shard): it no longer holds its
    /// reservation.
    Dropped {
        /// Its sender.
        address: Address,
        /// Its nonce.
        nonce: u64,
    },
    /// How many transactions are waiting: in the mempool, and held for a
    /// nonce gap (`txpool_status`).
    Status {
        /// `(pending, queued)`.
        reply: oneshot::Sender<(u64, u64)>,
    },
    /// The transactions held for a nonce gap (`txpool_content`).
    Queued {
        /// Each held transaction.
        reply: oneshot::Sender<Vec<RecoveredTx>>,
    },
    /// The next nonce a sender can use (`eth_getTransactionCount pending`).
    PendingNonce {
        /// The sender.
        address: Address,
        /// `None` when the sender has nothing in flight (use the committed nonce).
        reply: oneshot::Sender<Option<u64>>,
    },
}

/// What one block did for one sender.
#[derive(Debug, Clone, Copy)]
pub struct SenderProgress {
    /// The sender.
    pub address: Address,
    /// Its transactions in the block, applied or skipped, that this node
    /// admitted (and so counts in flight): on a single node, all of them;
    /// a block proposed by another validator may carry others.
    pub count: u32,
    /// Its nonce after the block.
    pub nonce: u64,
}

/// Messages to a mempool shard.
#[derive(Debug)]
pub enum ShardMsg {
    /// Append admitted transactions, in order (capacity was already
    /// taken): what one admission batch brought to this shard.
    Insert {
        /// The transactions with their admission numbers across all shards
        /// (block order among equal tips: see `sluice_txpool::order`).
        txs: Vec<Pooled>,
    },
    /// Take transactions from the front for a block.
    Take {
        /// At most this many.
        max_txs: usize,
        /// Whose gas limits sum to at most this.
        gas_budget: u64,
        /// Whose raw sizes sum to at most this.
        max_bytes: usize,
        /// Hashes already in the blocks the new one builds on (not yet
        /// committed here): dropped from the pool on the way, never
        /// offered. Empty outside validator mode.
        exclude: Arc<B256Set>,
        /// The transactions with their admission numbers, in shard order.
        reply: oneshot::Sender<Vec<Pooled>>,
    },
    /// Put transactions taken earlier back at the front, in their order:
    /// what a block did not take of a shard's offer, a proposal that lost
    /// its height, or a block nobody asked for any more. They never left the
    /// in-flight index or the nonce book, so only the queue and pool
    /// capacity change.
    Restore {
        /// The transactions, in their order, all of this shard's senders.
        txs: Vec<Pooled>,
    },
    /// Same-nonce replacements that paid geth's price bump, in order: each
    /// new transaction takes the place (and admission number) of the
    /// queued one whose hash it names, which leaves the in-flight index.
    /// If that one was already taken for a block, the new one is dropped
    /// and reported instead (the old one spends the nonce). Sent after the
    /// same batch's `Insert`, so an original admitted just before is
    /// already queued.
    Replace {
        /// The replaced transaction's hash and its replacement.
        txs: Vec<(B256, RecoveredTx)>,
    },
    /// Drop these transactions wherever they are queued: a block committed
    /// here included them (another validator proposed it, or the same
    /// transaction was also sent there). Their in-flight entries and nonce
    /// reservations were settled by the commit itself.
    Forget {
        /// Hashes, all of this shard's senders.
        hashes: Vec<B256>,
    },
    /// Drop these transactions wherever they are queued: the nonce actor
    /// evicted them from the full pool for better-paying ones, and has
    /// already taken them out of the in-flight index, the nonce book and
    /// the pool's count. One no longer queued was taken for a block (which
    /// gave its count back too): its count is taken again, so the pool's
    /// total stays exact, and that block carries it. Sent after the same
    /// batch's `Insert` and `Replace`.
    Evict {
        /// Each transaction's hash and raw size, all of this shard's senders.
        txs: Vec<(B256, usize)>,
    },
}

/// Messages to the block producer.
#[derive(Debug)]
pub enum ProducerMsg {
    /// The mempool holds a full block: seal now rather than at the next tick.
    Wake,
    /// Shutdown: seal everything left in the mempool, then stop. A
    /// producer in on-request mode seals nothing (only a leader may) and
    /// stops once a build in flight is answered.
    Flush {
        /// Answered when the last block has been handed to preparation.
        reply: oneshot::Sender<()>,
    },
    /// On-request mode: build one block for a proposal, once the mempool
    /// holds a full block or `block_time` has passed since this arrived.
    /// A newer `Build` replaces one still waiting (whose reply is then
    /// dropped): consensus asks again only when it moved on.
    Build {
        /// The block to build on; it may differ from the producer's own
        /// notion, and always wins.
        parent: Parent,
        /// The header's timestamp, as consensus chose it.
        timestamp: u64,
        /// The app-hash claim the header carries.
        state_ref: Option<StateRef>,
        /// Transactions already in the blocks `parent` ends that this node
        /// has not committed yet: dropped from the mempool, never proposed.
        exclude: Arc<B256Set>,
        /// The block and the transactions taken for it.
        reply: oneshot::Sender<Built>,
    },
    /// Transactions of a proposal that lost its height, in block order: back
    /// to the front of their shards, so the next proposal carries them.
    Restore {
        /// The transactions.
        txs: Vec<RecoveredTx>,
    },
}

/// A callback fired once, when the block it travels with is committed by
/// the store and published (durable per the sync policy, served by RPC).
///
/// Stages handle messages by reference and may retry them, so the callback
/// fires through `&self`, at most once however many clones or retries see
/// it; clones share it because a stage passes it on from a message it only
/// borrows. A block that is never committed (halt, abandon) never fires it.
#[derive(Clone)]
pub struct Delivery {
    callback: Arc<Mutex<Option<OnCommit>>>,
}

impl Delivery {
    /// A delivery that runs `callback` on commit.
    pub fn new(callback: OnCommit) -> Self {
        Delivery { callback: Arc::new(Mutex::new(Some(callback))) }
    }

    /// Runs the callback if it has not run yet.
    pub fn fire(&self) {
        // Taken under the lock, run outside it: the callback may be slow or
        // touch another delivery.
        let callback = self.callback.lock().take();
        if let Some(callback) = callback {
            callback();
        }
    }

    /// Whether the callback has run.
    pub fn fired(&self) -> bool {
        self.callback.lock().is_none()
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery").field("fired", &self.fired()).finish()
    }
}

/// Messages to block preparation.
#[derive(Debug)]
pub struct PrepareMsg {
    /// The sealed block to prepare.
    pub block: Arc<SealedBlock>,
    /// When it was sealed.
    pub sealed_at: Instant,
    /// Fired once the block is committed (`None` on a single node).
    pub delivery: Option<Delivery>,
}

/// Messages to the execution stage.
#[derive(Debug)]
pub struct ExecuteMsg {
    /// The prepared block to execute next.
    pub block: PreparedBlock,
    /// Passed on unchanged from [`PrepareMsg`].
    pub delivery: Option<Delivery>,
}

/// Messages to store commit.
#[derive(Debug)]
pub struct CommitMsg {
    /// The executed block to make durable.
    pub block: ExecutedBlock,
    /// The block's senders, for the nonce actor.
    pub senders: Vec<SenderProgress>,
    /// Fired by store commit once the block is published.
    pub delivery: Option<Delivery>,
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn a_delivery_fires_once_across_clones_and_retries() {
        let fired = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&fired);
        let d = Delivery::new(Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        let clone = d.clone();
        assert!(!d.fired());
        clone.fire();
        d.fire();
        clone.fire();
        assert_eq!(fired.load(Ordering::Relaxed), 1);
        assert!(d.fired());
        assert_eq!(format!("{d:?}"), "Delivery { fired: true }");
    }
}
