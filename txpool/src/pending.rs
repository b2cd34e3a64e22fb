//! Transactions admitted but not yet committed, by hash: what
//! `eth_getTransactionByHash` finds before a receipt exists, and how
//! admission recognises `already known`. Removed when their block commits.
//!
//! Bounded by construction: an entry exists only for a transaction that
//! holds mempool capacity or sits in one of the bounded block mailboxes.

use std::collections::HashMap;

use alloy_primitives::{Address, B256};
use parking_lot::Mutex;
use sluice_messages::RecoveredTx;

const SHARDS: usize = 16;

/// Sharded map of in-flight transactions.
#[derive(Default)]
pub struct PendingTxs {
    shards: [Mutex<HashMap<B256, RecoveredTx>>; SHARDS],
    /// The newest in-flight hash per sender and nonce, sharded by sender:
    /// how a same-nonce replacement finds the transaction it replaces
    /// without scanning the pool.
    nonces: [Mutex<HashMap<(Address, u64), B256>>; SHARDS],
}

impl PendingTxs {
    fn shard(&self, hash: &B256) -> &Mutex<HashMap<B256, RecoveredTx>> {
        &self.shards[hash[0] as usize % SHARDS]
    }

    fn nonce_shard(&self, sender: &Address) -> &Mutex<HashMap<(Address, u64), B256>> {
        &self.nonces[sender[19] as usize % SHARDS]
    }

    /// Drops `tx`'s (sender, nonce) entry if it still names `tx`.
    fn unindex(&self, tx: &RecoveredTx) {
        let mut nonces = self.nonce_shard(&tx.sender).lock();
        let key = (tx.sender, tx.nonce());
        if nonces.get(&key) == Some(&tx.hash) {
            nonces.remove(&key);
        }
    }

    /// The newest in-flight transaction of `sender` with `nonce`.
    pub fn by_nonce(&self, sender: &Address, nonce: u64) -> Option<RecoveredTx> {
        let hash = *self.nonce_shard(sender).lock().get(&(*sender, nonce))?;
        self.get(&hash)
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
        self.nonce_shard(&tx.sender).lock().insert((tx.sender, tx.nonce()), tx.hash);
        self.shard(&tx.hash).lock().insert(tx.hash, tx);
    }

    /// Forgets a committed or dropped transaction.
    pub fn remove(&self, hash: &B256) {
        let removed = self.shard(hash).lock().remove(hash);
        if let Some(tx) = removed {
            self.unindex(&tx);
        }
    }

    /// Forgets a committed transaction and answers its sender; `None`
    /// when this node never admitted it (a block another validator
    /// proposed) or already forgot it.
    pub fn remove_sender(&self, hash: &B256) -> Option<alloy_primitives::Address> {
        let tx = self.shard(hash).lock().remove(hash)?;
        self.unindex(&tx);
        Some(tx.sender)
    }

    /// Takes every in-flight transaction out (the node halted: none of
    /// them can be committed any more).
    pub fn drain(&self) -> Vec<RecoveredTx> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.lock().drain().map(|(_, tx)| tx));
        }
        for nonces in &self.nonces {
            nonces.lock().clear();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{recover::recover_raw, sign::Signer};
    use alloy_consensus::TxEip1559;
    use alloy_primitives::TxKind;

    fn tx(nonce: u64, fee: u128) -> RecoveredTx {
        let signer = Signer::from_bytes(&B256::repeat_byte(7)).unwrap();
        let raw = signer.sign_raw(
            TxEip1559 {
                chain_id: 1,
                nonce,
                gas_limit: 21_000,
                max_fee_per_gas: fee,
                to: TxKind::Call(Address::ZERO),
                ..Default::default()
            }
            .into(),
        );
        recover_raw(raw).unwrap()
    }

    #[test]
    fn by_nonce_names_the_newest_and_forgets_with_it() {
        let pending = PendingTxs::default();
        let (old, new) = (tx(4, 10), tx(4, 11));
        pending.insert(old.clone());
        assert_eq!(pending.by_nonce(&old.sender, 4).map(|t| t.hash), Some(old.hash));
        pending.insert(new.clone());
        // The replaced one leaving keeps the replacement findable.
        pending.remove(&old.hash);
        assert_eq!(pending.by_nonce(&old.sender, 4).map(|t| t.hash), Some(new.hash));
        assert_eq!(pending.remove_sender(&new.hash), Some(new.sender));
        assert!(pending.by_nonce(&old.sender, 4).is_none());
        pending.insert(old.clone());
        assert_eq!(pending.drain().len(), 1);
        assert!(pending.by_nonce(&old.sender, 4).is_none() && pending.is_empty());
    }
}
