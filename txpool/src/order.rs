//! Block order across the mempool shards: geth's price-and-time rule.
//!
//! Each shard keeps its senders' transactions in arrival order (so each
//! sender's nonce order). A block is built from what every shard offers:
//! among the senders' next transactions, the highest effective tip goes
//! first, and among equal tips the earliest admitted (geth's
//! `TransactionsByPriceAndNonce` in `miner/ordering.go`: a heap of each
//! account's head, by tip then first-seen time). A transaction that does
//! not fit what is left of the block skips its sender for this block (its
//! later nonces cannot go before it), and the others go on, as geth's
//! `commitTransactions` pops the account.

use std::{cmp::Ordering, collections::BinaryHeap};

use alloy_consensus::Transaction;
use alloy_primitives::{map::AddressMap, Address};
use sluice_messages::{
    block_size::{tx_rlp_len, BLOCK_RLP_OVERHEAD},
    RecoveredTx,
};

/// A transaction in a shard with its admission sequence number.
#[derive(Debug, Clone)]
pub struct Pooled {
    /// Admission order across every shard (lower came first). The nonce
    /// actor numbers transactions as it hands them to the shards; a lost
    /// proposal's transactions come back numbered by their block position,
    /// below every admitted number (see [`RESTORED_SEQ_LIMIT`]).
    pub seq: u64,
    /// The transaction.
    pub tx: RecoveredTx,
}

/// Admission sequence numbers start here; a proposal's transactions put
/// back after it lost its height are numbered by their position in it,
/// below this, so they go first again, in their block order.
pub const RESTORED_SEQ_LIMIT: u64 = 1 << 32;

/// What one block may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockBudget {
    /// Transactions.
    pub max_txs: usize,
    /// Sum of gas limits.
    pub gas: u64,
    /// Sum of raw sizes.
    pub bytes: usize,
    /// The block's RLP size as EIP-7934 counts it
    /// ([`block_rlp_size`](sluice_messages::block_size::block_rlp_size)):
    /// its cap on Osaka, `usize::MAX` before.
    pub rlp_bytes: usize,
}

/// A block's transactions, and per shard what it offered and the block did
/// not take, in the shard's order (to go back to its front).
#[derive(Debug, Default)]
pub struct Selection {
    /// The block's transactions, in block order.
    pub block: Vec<RecoveredTx>,
    /// Per shard (same index as offered), what goes back.
    pub leftovers: Vec<Vec<Pooled>>,
}

/// One sender's next transaction, ordered for a max-heap: higher tip
/// first, then lower sequence number.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    tip: u128,
    seq: u64,
    sender: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        self.tip.cmp(&other.tip).then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The tip a transaction pays per gas above `base_fee` (0 if it pays
/// none: admission keeps fee caps at or above the base fee).
pub fn effective_tip(tx: &RecoveredTx, base_fee: u64) -> u128 {
    tx.tx.effective_tip_per_gas(base_fee).unwrap_or(0)
}

/// Orders what the shards offered (`offered[k]`: shard `k`'s transactions in
/// its order) into one block within `budget`, by effective tip over
/// `base_fee`, then admission order, keeping each sender's order.
pub fn select(offered: Vec<Vec<Pooled>>, budget: BlockBudget, base_fee: u64) -> Selection {
    // Every offered transaction, flat, with its shard; each sender's
    // positions in order (a sender lives in one shard, in nonce order).
    let total: usize = offered.iter().map(Vec::len).sum();
    let mut flat: Vec<(usize, Option<Pooled>)> = Vec::with_capacity(total);
    let mut index: AddressMap<usize> = AddressMap::default();
    let mut senders: Vec<(Address, Vec<usize>, usize)> = Vec::new();
    let shards = offered.len();
    for (k, txs) in offered.into_iter().enumerate() {
        for p in txs {
            let slot = *index.entry(p.tx.sender).or_insert_with(|| {
                senders.push((p.tx.sender, Vec::new(), 0));
                senders.len() - 1
            });
            senders[slot].1.push(flat.len());
            flat.push((k, Some(p)));
        }
    }
    let head = |flat: &[(usize, Option<Pooled>)], sender: usize, at: usize| {
        flat[at].1.as_ref().map(|p| Head { tip: effective_tip(&p.tx, base_fee), seq: p.seq, sender })
    };
    let mut heap: BinaryHeap<Head> =
        senders.iter().enumerate().filter_map(|(s, (_, pos, _))| head(&flat, s, pos[0])).collect();
    let (mut gas, mut bytes) = (budget.gas, budget.bytes);
    let mut rlp = budget.rlp_bytes.saturating_sub(BLOCK_RLP_OVERHEAD);
    let mut block = Vec::with_capacity(budget.max_txs.min(total));
    while block.len() < budget.max_txs {
        let Some(Head { sender, .. }) = heap.pop() else { break };
        let (_, positions, next) = &mut senders[sender];
        let at = positions[*next];
        let Some(p) = flat[at].1.as_ref() else { continue };
        let (g, b, r) = (p.tx.gas_limit(), p.tx.raw.len(), tx_rlp_len(&p.tx.raw));
        if g > gas || b > bytes || r > rlp {
            // Its later nonces cannot go first: the sender waits for the
            // next block, the others go on.
            continue;
        }
        gas -= g;
        bytes -= b;
        rlp -= r;
        *next += 1;
        if let Some(p) = flat[at].1.take() {
            block.push(p.tx);
        }
        if let Some(&following) = positions.get(*next) {
            if let Some(h) = head(&flat, sender, following) {
                heap.push(h);
            }
        }
    }
    let mut leftovers: Vec<Vec<Pooled>> = (0..shards).map(|_| Vec::new()).collect();
    for (k, p) in flat {
        if let Some(p) = p {
            leftovers[k].push(p);
        }
    }
    Selection { block, leftovers }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{recover::recover_raw, sign::Signer};
    use alloy_consensus::{TxEip1559, TxLegacy};
    use alloy_primitives::{TxKind, B256};

    const BASE: u64 = 1_000;

    fn signer(i: u8) -> Signer {
        Signer::from_bytes(&B256::repeat_byte(i + 1)).unwrap()
    }

    fn tx(from: u8, nonce: u64, tip: u128, gas: u64) -> RecoveredTx {
        let raw = signer(from).sign_raw(
            TxEip1559 {
                chain_id: 1,
                nonce,
                gas_limit: gas,
                max_fee_per_gas: u128::from(BASE) + tip,
                max_priority_fee_per_gas: tip,
                to: TxKind::Call(Address::ZERO),
                ..Default::default()
            }
            .into(),
        );
        recover_raw(raw).unwrap()
    }

    fn pooled(seq: u64, tx: RecoveredTx) -> Pooled {
        Pooled { seq, tx }
    }

    fn order(s: &Selection) -> Vec<(Address, u64)> {
        s.block.iter().map(|t| (t.sender, t.nonce())).collect()
    }

    fn open() -> BlockBudget {
        BlockBudget { max_txs: 100, gas: u64::MAX, bytes: usize::MAX, rlp_bytes: usize::MAX }
    }

    #[test]
    fn equal_tips_follow_admission_order_across_shards() {
        // A deploy from sender 0 (shard 0) admitted before calls from
        // senders 1 and 2 (shards 1 and 0): the block keeps that order,
        // whichever shard each is in.
        let (a, b, c) = (signer(0).address(), signer(1).address(), signer(2).address());
        let offered = vec![
            vec![pooled(10, tx(0, 0, 1, 100_000)), pooled(12, tx(2, 0, 1, 50_000))],
            vec![pooled(11, tx(1, 0, 1, 50_000)), pooled(13, tx(1, 1, 1, 50_000))],
        ];
        let s = select(offered, open(), BASE);
        assert_eq!(order(&s), vec![(a, 0), (b, 0), (c, 0), (b, 1)]);
        assert!(s.leftovers.iter().all(Vec::is_empty));
    }

    #[test]
    fn a_higher_tip_goes_first_but_never_before_its_own_earlier_nonce() {
        let (a, b) = (signer(0).address(), signer(1).address());
        let offered = vec![
            vec![pooled(1, tx(0, 0, 1, 21_000)), pooled(4, tx(0, 1, 50, 21_000))],
            vec![pooled(2, tx(1, 0, 10, 21_000)), pooled(3, tx(1, 1, 1, 21_000))],
        ];
        let s = select(offered, open(), BASE);
        // b's tip-10 head first; then a's nonce 0 (tip 1, seq 1) against
        // b's nonce 1 (tip 1, seq 3): a first; then a's nonce 1 (tip 50).
        assert_eq!(order(&s), vec![(b, 0), (a, 0), (a, 1), (b, 1)]);
    }

    #[test]
    fn legacy_and_dynamic_fees_compare_by_effective_tip() {
        let legacy = recover_raw(
            signer(3).sign_raw(
                TxLegacy {
                    chain_id: Some(1),
                    nonce: 0,
                    gas_price: u128::from(BASE) + 5,
                    gas_limit: 21_000,
                    to: TxKind::Call(Address::ZERO),
                    ..Default::default()
                }
                .into(),
            ),
        )
        .unwrap();
        let offered = vec![vec![pooled(1, tx(0, 0, 4, 21_000)), pooled(2, legacy)]];
        let s = select(offered, open(), BASE);
        assert_eq!(s.block[0].sender, signer(3).address(), "legacy tip 5 beats 4");
    }

    #[test]
    fn a_transaction_that_does_not_fit_skips_its_sender_only() {
        let (a, b) = (signer(0).address(), signer(1).address());
        let offered = vec![
            vec![pooled(1, tx(0, 0, 1, 60_000)), pooled(3, tx(0, 1, 1, 21_000))],
            vec![pooled(2, tx(1, 0, 1, 21_000)), pooled(4, tx(1, 1, 1, 21_000))],
        ];
        let budget = BlockBudget { max_txs: 100, gas: 50_000, bytes: usize::MAX, rlp_bytes: usize::MAX };
        let s = select(offered, budget, BASE);
        assert_eq!(order(&s), vec![(b, 0), (b, 1)]);
        // Sender a's two go back to its shard's front, in order.
        let back: Vec<(Address, u64)> = s.leftovers[0].iter().map(|p| (p.tx.sender, p.tx.nonce())).collect();
        assert_eq!(back, vec![(a, 0), (a, 1)]);
        assert!(s.leftovers[1].is_empty());
    }

    #[test]
    fn the_count_and_byte_budgets_hold_and_the_rest_goes_back_in_shard_order() {
        let offered = vec![
            (0..5).map(|n| pooled(2 * n, tx(0, n, 1, 21_000))).collect(),
            (0..5).map(|n| pooled(2 * n + 1, tx(1, n, 1, 21_000))).collect::<Vec<_>>(),
        ];
        let s = select(
            offered.clone(),
            BlockBudget { max_txs: 3, gas: u64::MAX, bytes: usize::MAX, rlp_bytes: usize::MAX },
            BASE,
        );
        assert_eq!(s.block.len(), 3);
        let seqs: Vec<Vec<u64>> = s.leftovers.iter().map(|l| l.iter().map(|p| p.seq).collect()).collect();
        assert_eq!(seqs, vec![vec![4, 6, 8], vec![3, 5, 7, 9]], "seqs 0, 1, 2 taken");
        let size = offered[0][0].tx.raw.len();
        let s = select(
            offered,
            BlockBudget { max_txs: 100, gas: u64::MAX, bytes: 2 * size + 1, rlp_bytes: usize::MAX },
            BASE,
        );
        assert_eq!(s.block.len(), 2, "two raw transactions fit the bytes");
        assert_eq!(s.leftovers.iter().map(Vec::len).sum::<usize>(), 8);
    }

    #[test]
    fn the_rlp_budget_counts_the_overhead_and_each_transactions_body_encoding() {
        let offered = vec![(0..5).map(|n| pooled(n, tx(0, n, 1, 21_000))).collect::<Vec<_>>()];
        let one = tx_rlp_len(&offered[0][0].tx.raw);
        // Room for two in-body encodings past the overhead, one byte short
        // of a third: the raw byte count alone would have taken three.
        let rlp_bytes = BLOCK_RLP_OVERHEAD + 3 * one - 1;
        let budget = BlockBudget { max_txs: 100, gas: u64::MAX, bytes: 3 * (one - 1), rlp_bytes };
        let s = select(offered, budget, BASE);
        assert_eq!(s.block.len(), 2);
        let raws: Vec<&[u8]> = s.block.iter().map(|t| t.raw.as_ref()).collect();
        assert!(sluice_messages::block_size::block_rlp_size(raws) <= rlp_bytes);
    }
}
