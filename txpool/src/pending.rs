//! Transactions admitted but not yet committed, by hash: what
//! `eth_getTransactionByHash` finds before a receipt exists, and how
//! admission recognises `already known`. Removed when their block commits.
//!
//! Bounded by construction: an entry exists only for a transaction that
//! holds mempool capacity or sits in one of the bounded block mailboxes.

use std::collections::HashMap;

use alloy_primitives::B256;
use parking_lot::Mutex;
use sluice_messages::RecoveredTx;

const SHARDS: usize = 16;

/// Sharded map of in-flight transactions.
#[derive(Default)]
pub struct PendingTxs {
    shards: [Mutex<HashMap<B256, RecoveredTx>>; SHARDS],
}

impl PendingTxs {
    fn shard(&self, hash: &B256) -> &Mutex<HashMap<B256, RecoveredTx>> {
        &self.shards[hash[0] as usize % SHARDS]
    }

    /// True when the transaction is in flight.
    pub fn contains(&self, hash: &B256) -> bool {
        self.shard(hash).lock().contains_key(hash)
    }

    /// The in-flight transaction with this hash.
    pub fn get(&self, hash: &B256) -> Option<RecoveredTx> {
        self.shard(hash).lock().get(hash).cloned()
    }

    /// The sender of the in-flight transaction with this hash.
    pub fn sender_of(&self, hash: &B256) -> Option<alloy_primitives::Address> {
        self.shard(hash).lock().get(hash).map(|tx| tx.sender)
    }

    /// Records an admitted transaction.
    pub fn insert(&self, tx: RecoveredTx) {
        self.shard(&tx.hash).lock().insert(tx.hash, tx);
    }

    /// Forgets a committed or dropped transaction.
    pub fn remove(&self, hash: &B256) {
        self.shard(hash).lock().remove(hash);
    }

    /// Forgets a committed transaction and answers its sender; `None`
    /// when this node never admitted it (a block another validator
    /// proposed) or already forgot it.
    pub fn remove_sender(&self, hash: &B256) -> Option<alloy_primitives::Address> {
        self.shard(hash).lock().remove(hash).map(|tx| tx.sender)
    }

    /// Takes every in-flight transaction out (the node halted: none of
    /// them can be committed any more).
    pub fn drain(&self) -> Vec<RecoveredTx> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.lock().drain().map(|(_, tx)| tx));
        }
        out
    }

    /// A copy of every in-flight transaction (`txpool_content`).
    pub fn snapshot(&self) -> Vec<RecoveredTx> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.lock().values().cloned());
        }
        out
    }

    /// Each in-flight transaction's sender, nonce and maximum cost (to
    /// rebuild the nonce book, with its in-flight spend, after a panic).
    pub fn senders_nonces_and_costs(&self) -> Vec<(alloy_primitives::Address, u64, alloy_primitives::U256)> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.lock().values().map(|tx| (tx.sender, tx.nonce(), crate::max_cost(&tx.tx))));
        }
        out
    }

    /// Number of in-flight transactions.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
