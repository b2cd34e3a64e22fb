//! A validator's own proposals: the non-empty ones not yet resolved by
//! finalization.
//!
//! A validator proposes what its pool holds (its own clients'
//! transactions and those other validators sent it: see `gossip.rs`).
//! Those a proposal took from the mempool are no longer
//! there, so if another block is finalized at the proposal's height, they
//! must go back, in order, or they are lost. Proposals are kept a single
//! chain (the proposer builds empty blocks while an unresolved proposal is
//! not an ancestor of its parent), so a lost height loses it and every
//! later entry, and their transactions go back in height order.

use std::collections::BTreeMap;

use alloy_primitives::B256;
use sluice_messages::RecoveredTx;

/// Unresolved own proposals by height.
#[derive(Debug, Default)]
pub struct OwnProposals {
    entries: BTreeMap<u64, (B256, Vec<RecoveredTx>)>,
}

/// What finalizing a height did to the own proposals.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The finalized block was this validator's own proposal.
    pub committed: bool,
    /// Transactions to put back in the mempool, in order.
    pub restore: Vec<RecoveredTx>,
}

impl OwnProposals {
    /// Records a non-empty proposal.
    pub fn proposed(&mut self, height: u64, hash: B256, txs: Vec<RecoveredTx>) {
        if !txs.is_empty() {
            self.entries.insert(height, (hash, txs));
        }
    }

    /// Whether every unresolved proposal is in the chain that ends at
    /// `parent` (given as the hashes of `parent`'s ancestors by height),
    /// so a new proposal on `parent` cannot take a transaction twice.
    pub fn consistent_with(&self, parent_height: u64, ancestor: impl Fn(u64) -> Option<B256>) -> bool {
        self.entries
            .iter()
            .all(|(&h, (hash, _))| h <= parent_height && ancestor(h).is_some_and(|a| a == *hash))
    }

    /// The lowest unresolved height, if any.
    pub fn lowest(&self) -> Option<u64> {
        self.entries.keys().next().copied()
    }

    /// Block `hash` was finalized at `height`.
    pub fn finalized(&mut self, height: u64, hash: B256) -> Resolved {
        let mut out = Resolved::default();
        // Entries below a finalized height can only be there if heights
        // were skipped (they cannot be): treat them as lost too.
        let stale: Vec<u64> = self.entries.range(..height).map(|(h, _)| *h).collect();
        for h in stale {
            if let Some((_, txs)) = self.entries.remove(&h) {
                out.restore.extend(txs);
            }
        }
        match self.entries.get(&height) {
            Some((mine, _)) if *mine == hash => {
                self.entries.remove(&height);
                out.committed = true;
            }
            Some(_) => {
                // Lost: it and every later entry (its descendants).
                for (_, (_, txs)) in std::mem::take(&mut self.entries) {
                    out.restore.extend(txs);
                }
            }
            None => {}
        }
        out
    }

    /// Transactions held by unresolved proposals.
    pub fn txs(&self) -> usize {
        self.entries.values().map(|(_, t)| t.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use alloy_consensus::{Signed, TxEnvelope, TxLegacy};
    use alloy_primitives::{Address, Bytes, Signature};

    use super::*;

    fn tx(n: u8) -> RecoveredTx {
        let legacy = TxLegacy { nonce: u64::from(n), ..Default::default() };
        let hash = B256::repeat_byte(n);
        let tx = TxEnvelope::Legacy(Signed::new_unchecked(legacy, Signature::test_signature(), hash));
        RecoveredTx { hash, raw: Bytes::from(vec![n]), tx, sender: Address::repeat_byte(1) }
    }

    #[test]
    fn own_block_finalized_pops_it() {
        let mut own = OwnProposals::default();
        own.proposed(5, B256::repeat_byte(5), vec![tx(1)]);
        let r = own.finalized(5, B256::repeat_byte(5));
        assert!(r.committed);
        assert!(r.restore.is_empty());
        assert_eq!(own.txs(), 0);
    }

    #[test]
    fn lost_height_restores_it_and_its_descendants_in_order() {
        let mut own = OwnProposals::default();
        own.proposed(5, B256::repeat_byte(5), vec![tx(1), tx(2)]);
        own.proposed(6, B256::repeat_byte(6), vec![tx(3)]);
        let r = own.finalized(5, B256::repeat_byte(0xee));
        assert!(!r.committed);
        let nonces: Vec<u64> = r.restore.iter().map(|t| t.nonce()).collect();
        assert_eq!(nonces, vec![1, 2, 3]);
        assert_eq!(own.lowest(), None);
    }

    #[test]
    fn empty_proposals_are_not_tracked_and_others_heights_pass_by() {
        let mut own = OwnProposals::default();
        own.proposed(5, B256::repeat_byte(5), vec![]);
        assert_eq!(own.lowest(), None);
        own.proposed(7, B256::repeat_byte(7), vec![tx(1)]);
        let r = own.finalized(6, B256::repeat_byte(6));
        assert!(!r.committed && r.restore.is_empty());
        assert_eq!(own.lowest(), Some(7));
    }

    #[test]
    fn consistency_needs_every_entry_to_be_an_ancestor() {
        let mut own = OwnProposals::default();
        assert!(own.consistent_with(3, |_| None));
        own.proposed(4, B256::repeat_byte(4), vec![tx(1)]);
        assert!(!own.consistent_with(3, |_| None), "an entry above the parent is on another branch");
        assert!(own.consistent_with(4, |h| (h == 4).then(|| B256::repeat_byte(4))));
        assert!(!own.consistent_with(5, |h| (h == 4).then(|| B256::repeat_byte(9))));
    }
}
