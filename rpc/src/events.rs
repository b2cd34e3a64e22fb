//! Chain events for subscribers: the height of the last committed block,
//! published by store commit, the node's shutdown, and the transactions
//! entering the mempool. Here, with the RPC layer that reads them: the
//! pipeline publishing them (`sluice-actors`) already depends on this
//! crate, and the store, which they describe, needs no channels.
//!
//! Only the height is published, on a `tokio::sync::watch` channel: it holds
//! one value, so publishing never waits and never buffers, however slow a
//! subscriber is. A subscriber reads the blocks it has not delivered yet from
//! the store, in order, and decides itself when it is too far behind
//! (`rpc.ws_max_lag_blocks`): nothing between the committer and a WebSocket
//! grows with a slow consumer.

use std::{collections::VecDeque, sync::Arc};

use parking_lot::Mutex;
use sluice_messages::RecoveredTx;
use tokio::sync::watch;

/// The publishing side, cheap to clone: the committer and the RPC server
/// each hold one.
#[derive(Clone)]
pub struct ChainEvents {
    head: Arc<watch::Sender<u64>>,
    closing: Arc<watch::Sender<bool>>,
    pending: Arc<PendingFeed>,
}

/// Transactions as they enter the mempool, the last `capacity` of them,
/// each with a sequence number: what `eth_newPendingTransactionFilter` and
/// the `newPendingTransactions` subscription read, at their own pace, with
/// a cursor. The publisher never waits; a reader that falls more than the
/// ring behind has lost what it missed (a filter answers what is left, a
/// subscription is dropped as lagging).
pub struct PendingFeed {
    ring: Mutex<VecDeque<(u64, RecoveredTx)>>,
    capacity: usize,
    /// The next sequence number, published for waiting subscribers.
    next: watch::Sender<u64>,
}

impl PendingFeed {
    fn new(capacity: usize) -> Self {
        PendingFeed {
            ring: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            next: watch::channel(0).0,
        }
    }

    /// The sequence number the next transaction will get.
    pub fn next_seq(&self) -> u64 {
        *self.next.borrow()
    }

    /// Up to `max` transactions from sequence number `from` on, and the
    /// cursor after them; `lost` is true when some before them were
    /// already overwritten.
    pub fn since(&self, from: u64, max: usize) -> (Vec<RecoveredTx>, u64, bool) {
        let ring = self.ring.lock();
        let oldest = ring.front().map_or(self.next_seq(), |(seq, _)| *seq);
        let start = from.max(oldest);
        let skip = usize::try_from(start - oldest).unwrap_or(usize::MAX);
        let txs: Vec<RecoveredTx> = ring.iter().skip(skip).take(max).map(|(_, tx)| tx.clone()).collect();
        let cursor = start + txs.len() as u64;
        (txs, cursor, from < oldest)
    }

    /// Wakes when transactions are added.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.next.subscribe()
    }
}

impl ChainEvents {
    /// Events starting at the committed height `head`, keeping the last
    /// `pending_txs` transactions that entered the mempool.
    pub fn new(head: u64, pending_txs: usize) -> Self {
        ChainEvents {
            head: Arc::new(watch::channel(head).0),
            closing: Arc::new(watch::channel(false).0),
            pending: Arc::new(PendingFeed::new(pending_txs)),
        }
    }

    /// A transaction entered the mempool (admitted, or promoted from the
    /// future-nonce queue).
    pub fn admitted(&self, tx: &RecoveredTx) {
        let mut ring = self.pending.ring.lock();
        let seq = self.pending.next_seq();
        if ring.len() == self.pending.capacity {
            ring.pop_front();
        }
        ring.push_back((seq, tx.clone()));
        drop(ring);
        self.pending.next.send_replace(seq + 1);
    }

    /// The feed of transactions entering the mempool.
    pub fn pending(&self) -> &PendingFeed {
        &self.pending
    }

    /// Block `height` is committed and readable from the store.
    pub fn committed(&self, height: u64) {
        self.head.send_replace(height);
    }

    /// The node is shutting down: subscribers close their connections.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// The committed height, updated as blocks commit.
    pub fn heads(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// Becomes `true` when the node shuts down.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishing_keeps_only_the_latest_height() {
        let events = ChainEvents::new(0, 4);
        let mut heads = events.heads();
        for h in 1..=1000 {
            events.committed(h);
        }
        assert!(heads.has_changed().unwrap_or(false));
        assert_eq!(*heads.borrow_and_update(), 1000);
        events.close();
        assert!(*events.closing().borrow());
    }

    #[test]
    fn the_pending_feed_keeps_the_last_ones_and_says_what_was_lost() {
        use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
        let tx = |n: u8| {
            let t = TxEip1559 { nonce: u64::from(n), ..Default::default() };
            let sig = alloy_primitives::Signature::new(
                alloy_primitives::U256::from(1),
                alloy_primitives::U256::from(1),
                false,
            );
            RecoveredTx {
                hash: alloy_primitives::B256::repeat_byte(n),
                raw: Default::default(),
                tx: TxEnvelope::Eip1559(t.into_signed(sig)),
                sender: Default::default(),
            }
        };
        let events = ChainEvents::new(0, 4);
        let feed = events.pending();
        let start = feed.next_seq();
        for n in 0..3 {
            events.admitted(&tx(n));
        }
        let (txs, cursor, lost) = feed.since(start, 2);
        assert_eq!((txs.len(), cursor, lost), (2, 2, false));
        for n in 3..8 {
            events.admitted(&tx(n));
        }
        // Only the last 4 (seq 4..8) remain: the reader at 2 lost two.
        let (txs, cursor, lost) = feed.since(cursor, 10);
        assert_eq!(txs.iter().map(|t| t.hash[0]).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        assert_eq!((cursor, lost), (8, true));
        assert!(feed.since(cursor, 10).0.is_empty());
    }
}
