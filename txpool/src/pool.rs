//! The mempool: global limits shared by every shard, and FIFO shards.
//!
//! Shards keep arrival order, which with gapless nonces is also each
//! sender's nonce order, so block production only ever takes from the front
//! (and [`crate::order`] merges what the shards offer into a block).

use std::{
    collections::VecDeque,
    sync::atomic::{AtomicU64, Ordering},
};

use alloy_primitives::{
    map::{B256Map, B256Set},
    B256,
};
use sluice_messages::RecoveredTx;

use crate::{error::TxError, evict::Price, order::Pooled};

/// Global pool occupancy, shared (in an `Arc`) by every admission worker and
/// shard: the pool's bound must hold across all of them, not per shard.
#[derive(Debug)]
pub struct PoolCounters {
    max_txs: u64,
    max_bytes: u64,
    txs: AtomicU64,
    bytes: AtomicU64,
    /// What the cheapest evictable transaction pays, as the nonce actor
    /// last published it (`None`: nothing to evict).
    floor: parking_lot::Mutex<Option<Price>>,
}

/// Adds `add` to `counter` only if the result stays `<= max`.
fn add_within(counter: &AtomicU64, add: u64, max: u64) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
            cur.checked_add(add).filter(|&new| new <= max)
        })
        .is_ok()
}

/// Subtracts `sub` from `counter`, stopping at zero.
fn sub_saturating(counter: &AtomicU64, sub: u64) {
    let old = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| Some(cur.saturating_sub(sub)));
    debug_assert!(old.is_ok_and(|old| old >= sub), "released more than acquired");
}

impl PoolCounters {
    /// Limits: at most `max_txs` transactions and `max_bytes` raw bytes.
    pub fn new(max_txs: u64, max_bytes: u64) -> Self {
        PoolCounters {
            max_txs,
            max_bytes,
            txs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            floor: parking_lot::Mutex::new(None),
        }
    }

    /// Takes room for one transaction of `bytes` raw bytes, or answers
    /// `txpool is full`.
    ///
    /// Never oversubscribes under concurrency: each counter is raised by a
    /// compare-and-swap that refuses to pass its limit, and the count taken
    /// first is given back if the bytes do not fit. (A racing caller may then
    /// see the pool full for an instant; it is never over-full.)
    pub fn try_acquire(&self, bytes: usize) -> Result<(), TxError> {
        let bytes = bytes as u64;
        if !add_within(&self.txs, 1, self.max_txs) {
            return Err(TxError::TxPoolFull);
        }
        if !add_within(&self.bytes, bytes, self.max_bytes) {
            sub_saturating(&self.txs, 1);
            return Err(TxError::TxPoolFull);
        }
        Ok(())
    }

    /// Takes room back for transactions returned to a shard after being
    /// taken; may exceed the limits briefly, since they were already counted
    /// before.
    pub fn force_acquire(&self, n_txs: usize, bytes: usize) {
        self.txs.fetch_add(n_txs as u64, Ordering::AcqRel);
        self.bytes.fetch_add(bytes as u64, Ordering::AcqRel);
    }

    /// Gives back room for `n_txs` transactions totalling `bytes` (taken for
    /// a block, or refused after acquiring).
    pub fn release(&self, n_txs: usize, bytes: usize) {
        sub_saturating(&self.txs, n_txs as u64);
        sub_saturating(&self.bytes, bytes as u64);
    }

    /// Whether a transaction of `bytes` raw bytes would find no room now
    /// (a racy read).
    pub fn would_overflow(&self, bytes: usize) -> bool {
        self.len() >= self.max_txs || self.bytes().saturating_add(bytes as u64) > self.max_bytes
    }

    /// Publishes what the cheapest evictable transaction pays (a lower
    /// bound: the publisher's index may hold stale, cheaper entries).
    pub fn set_floor(&self, floor: Option<Price>) {
        *self.floor.lock() = floor;
    }

    /// A full pool's early answer, before a sender is recovered: a
    /// transaction paying no more than the published floor could evict
    /// nothing (geth's `transaction underpriced` below it, `txpool is
    /// full` at it). Above it, only the nonce actor can tell.
    pub fn check_floor(&self, price: Price) -> Result<(), TxError> {
        match *self.floor.lock() {
            None => Err(TxError::TxPoolFull),
            Some(floor) if price < floor => Err(TxError::Underpriced),
            Some(floor) if price == floor => Err(TxError::TxPoolFull),
            Some(_) => Ok(()),
        }
    }

    /// Transactions currently counted.
    pub fn len(&self) -> u64 {
        self.txs.load(Ordering::Acquire)
    }

    /// Whether nothing is counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Raw bytes currently counted.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// The transaction-count limit.
    pub fn max_txs(&self) -> u64 {
        self.max_txs
    }

    /// The byte limit.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}

/// One FIFO shard of the mempool.
///
/// `find` is O(1): every pushed transaction gets a sequence number, the
/// index maps hash -> sequence, and the position is `seq - head_seq`.
///
/// A transaction can also leave from the middle ([`MempoolShard::forget`]:
/// another validator's block included it). It leaves the index at once and
/// stays in the queue as a dead entry (one the index no longer points at)
/// until it reaches the front or the queue is compacted; dead entries count
/// in neither `len` nor `bytes`.
#[derive(Debug, Default)]
pub struct MempoolShard {
    queue: VecDeque<Pooled>,
    index: B256Map<u64>,
    /// Sequence number of the transaction at the front.
    head_seq: u64,
    bytes: usize,
}

/// What [`MempoolShard::take`] took from the front.
#[derive(Debug, Default)]
pub struct Taken {
    /// For the block, in queue order.
    pub txs: Vec<Pooled>,
    /// How many were passed over because a block the new one builds on
    /// already holds them (the caller's `exclude`). They stay queued until
    /// a commit forgets them: that block may yet lose its height, and a
    /// pool that had dropped them would offer the same senders' later
    /// nonces alone, which execution skips as gapped and every pool then
    /// forgets (they were lost).
    pub in_ancestry: usize,
}

/// Dead entries are compacted away once there are more of them than this
/// and than live ones: memory stays within about twice the live queue.
const COMPACT_MIN_DEAD: usize = 1024;

impl MempoolShard {
    /// An empty shard.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a transaction admitted as number `admitted` (see [`Pooled`]);
    /// `already known` if its hash is queued here. Room must have been
    /// acquired from [`PoolCounters`] first.
    pub fn push(&mut self, tx: RecoveredTx, admitted: u64) -> Result<(), TxError> {
        let seq = self.head_seq + self.queue.len() as u64;
        if self.index.contains_key(&tx.hash) {
            return Err(TxError::AlreadyKnown);
        }
        self.index.insert(tx.hash, seq);
        self.bytes += tx.raw.len();
        self.queue.push_back(Pooled { seq: admitted, tx });
        Ok(())
    }

    /// Takes transactions from the front while each fits in what is left of
    /// `gas_budget` (by gas limit) and `max_bytes` (by raw size), up to
    /// `max_txs`. Those whose hash is in `exclude` (in a block the new one
    /// builds on) are passed over and stay queued, in front, in order.
    ///
    /// Stops at the first that does not fit rather than skipping ahead: a
    /// later transaction may be the same sender's next nonce, and taking it
    /// first would make both fail. Admission keeps each gas limit within the
    /// block gas limit, so the front always fits an empty block.
    pub fn take(&mut self, max_txs: usize, gas_budget: u64, max_bytes: usize, exclude: &B256Set) -> Taken {
        let (mut gas_left, mut bytes_left) = (gas_budget, max_bytes);
        let mut out = Taken::default();
        let mut kept = Vec::new();
        while let Some(front) = self.queue.front() {
            let tx = &front.tx;
            let live = self.index.get(&tx.hash) == Some(&self.head_seq);
            let excluded = live && exclude.contains(&tx.hash);
            if live && !excluded {
                let (gas, size) = (tx.gas_limit(), tx.raw.len());
                if out.txs.len() >= max_txs || gas > gas_left || size > bytes_left {
                    break;
                }
                gas_left -= gas;
                bytes_left -= size;
            }
            let Some(p) = self.queue.pop_front() else { break };
            self.head_seq += 1;
            if !live {
                continue;
            }
            self.index.remove(&p.tx.hash);
            self.bytes -= p.tx.raw.len();
            if excluded {
                kept.push(p);
            } else {
                out.txs.push(p);
            }
        }
        out.in_ancestry = kept.len();
        self.restore_front(kept);
        out
    }

    /// Puts `new` in the place of the queued transaction `old` (a
    /// same-nonce replacement that paid geth's bump), keeping its place
    /// and admission number, so the sender's order and the block order
    /// stay as they were; answers the replaced transaction. If `old` is
    /// not queued here (a block took it already) `new` is handed back:
    /// the nonce is being spent by `old`, and `new` can never apply (boxed:
    /// the error stays small).
    pub fn replace(&mut self, old: &B256, new: RecoveredTx) -> Result<RecoveredTx, Box<RecoveredTx>> {
        let Some(&seq) = self.index.get(old) else { return Err(Box::new(new)) };
        if self.index.contains_key(&new.hash) {
            return Err(Box::new(new));
        }
        let Some(slot) = usize::try_from(seq - self.head_seq).ok().and_then(|at| self.queue.get_mut(at))
        else {
            return Err(Box::new(new));
        };
        self.index.remove(old);
        self.index.insert(new.hash, seq);
        self.bytes = self.bytes - slot.tx.raw.len() + new.raw.len();
        Ok(std::mem::replace(&mut slot.tx, new))
    }

    /// Removes a queued transaction wherever it is (a block this node did
    /// not build included it); answers its raw size, or `None` if it is
    /// not queued here.
    pub fn forget(&mut self, hash: &B256) -> Option<usize> {
        let seq = *self.index.get(hash)?;
        let size = self.queue.get(usize::try_from(seq - self.head_seq).ok()?)?.tx.raw.len();
        self.index.remove(hash);
        self.bytes -= size;
        let dead = self.queue.len() - self.index.len();
        if dead > COMPACT_MIN_DEAD && dead > self.index.len() {
            self.compact();
        }
        Some(size)
    }

    /// Drops every dead entry and renumbers the live ones from `head_seq`.
    fn compact(&mut self) {
        let head = self.head_seq;
        let index = &mut self.index;
        let mut next = head;
        let mut position = head;
        self.queue.retain(|p| {
            let seq = position;
            position += 1;
            match index.get_mut(&p.tx.hash) {
                Some(at) if *at == seq => {
                    *at = next;
                    next += 1;
                    true
                }
                _ => false,
            }
        });
    }

    /// Puts transactions taken by [`MempoolShard::take`] back at the front,
    /// in their order (a taker that could not use them, so nothing is lost).
    pub fn restore_front(&mut self, txs: Vec<Pooled>) {
        for p in txs.into_iter().rev() {
            self.head_seq = self.head_seq.saturating_sub(1);
            self.index.insert(p.tx.hash, self.head_seq);
            self.bytes += p.tx.raw.len();
            self.queue.push_front(p);
        }
    }

    /// The queued transaction with this hash.
    pub fn find(&self, hash: &B256) -> Option<&RecoveredTx> {
        let seq = *self.index.get(hash)?;
        self.queue.get(usize::try_from(seq - self.head_seq).ok()?).map(|p| &p.tx)
    }

    /// Number of queued transactions.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the shard is empty.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Raw bytes of the queued transactions.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{recover::recover_raw, sign::Signer};
    use alloy_consensus::TxEip1559;
    use alloy_primitives::{Address, TxKind};
    use std::sync::{atomic::AtomicBool, Arc};

    fn tx(nonce: u64, gas_limit: u64, input_len: usize) -> RecoveredTx {
        let signer = Signer::from_bytes(&B256::repeat_byte(7)).unwrap();
        let raw = signer.sign_raw(
            TxEip1559 {
                chain_id: 1,
                nonce,
                gas_limit,
                max_fee_per_gas: 1,
                to: TxKind::Call(Address::ZERO),
                input: vec![1u8; input_len].into(),
                ..Default::default()
            }
            .into(),
        );
        recover_raw(raw).unwrap()
    }

    #[test]
    fn counters_refuse_past_either_limit_and_release() {
        let c = PoolCounters::new(2, 100);
        c.try_acquire(60).unwrap();
        assert_eq!(c.try_acquire(41), Err(TxError::TxPoolFull));
        assert_eq!((c.len(), c.bytes()), (1, 60), "a refused byte acquire gives the count back");
        c.try_acquire(40).unwrap();
        assert_eq!(c.try_acquire(0), Err(TxError::TxPoolFull));
        c.release(2, 100);
        assert!(c.is_empty());
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn counters_never_exceed_limits_under_four_threads() {
        let c = Arc::new(PoolCounters::new(50, 5_000));
        let over = Arc::new(AtomicBool::new(false));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (c, over) = (c.clone(), over.clone());
                s.spawn(move || {
                    for i in 0..20_000u64 {
                        let size = 50 + ((i * 7 + t * 13) % 100) as usize;
                        if c.try_acquire(size).is_ok() {
                            if c.len() > 50 || c.bytes() > 5_000 {
                                over.store(true, Ordering::Relaxed);
                            }
                            if i % 3 != 0 {
                                c.release(1, size);
                            }
                        }
                    }
                });
            }
        });
        assert!(!over.load(Ordering::Relaxed));
        assert!(c.len() <= 50 && c.bytes() <= 5_000);
        assert!(!c.is_empty(), "the test must actually reach the limits");
    }

    #[test]
    fn take_respects_gas_budget_and_never_skips_ahead() {
        let mut shard = MempoolShard::new();
        for (n, gas) in [(0, 30_000), (1, 50_000), (2, 21_000), (3, 21_000)] {
            shard.push(tx(n, gas, 0), n).unwrap();
        }
        // 30k fits, 50k does not fit the remaining 40k: stop, although the
        // 21k behind it would fit.
        let taken = shard.take(10, 70_000, usize::MAX, &B256Set::default()).txs;
        assert_eq!(taken.iter().map(|p| p.tx.nonce()).collect::<Vec<_>>(), vec![0]);
        let taken = shard.take(2, u64::MAX, usize::MAX, &B256Set::default()).txs;
        assert_eq!(taken.iter().map(|p| (p.tx.nonce(), p.seq)).collect::<Vec<_>>(), vec![(1, 1), (2, 2)]);
        assert_eq!(shard.len(), 1);
    }

    #[test]
    fn take_respects_byte_budget_and_tracks_bytes() {
        let mut shard = MempoolShard::new();
        let (a, b) = (tx(0, 100_000, 10), tx(1, 100_000, 500));
        let (a_len, b_len) = (a.raw.len(), b.raw.len());
        shard.push(a, 0).unwrap();
        shard.push(b, 1).unwrap();
        assert_eq!(shard.bytes(), a_len + b_len);
        assert_eq!(shard.take(10, u64::MAX, a_len + b_len - 1, &B256Set::default()).txs.len(), 1);
        assert_eq!(shard.bytes(), b_len);
        assert_eq!(shard.take(10, u64::MAX, b_len, &B256Set::default()).txs.len(), 1);
        assert!(shard.is_empty() && shard.bytes() == 0);
    }

    #[test]
    fn find_and_duplicates_follow_the_queue() {
        let mut shard = MempoolShard::new();
        let txs: Vec<_> = (0..4).map(|n| tx(n, 21_000, 0)).collect();
        for (n, t) in txs.iter().enumerate() {
            shard.push(t.clone(), n as u64).unwrap();
        }
        assert_eq!(shard.push(txs[2].clone(), 9), Err(TxError::AlreadyKnown));
        assert_eq!(shard.find(&txs[3].hash).map(|t| t.nonce()), Some(3));
        shard.take(2, u64::MAX, usize::MAX, &B256Set::default());
        assert!(shard.find(&txs[0].hash).is_none());
        assert_eq!(shard.find(&txs[2].hash).map(|t| t.nonce()), Some(2));
        // A taken transaction may come back (e.g. re-sent after a skip).
        shard.push(txs[0].clone(), 10).unwrap();
        assert_eq!(shard.find(&txs[0].hash).map(|t| t.nonce()), Some(0));
        assert_eq!(shard.len(), 3);
    }

    #[test]
    fn a_forgotten_transaction_leaves_from_the_middle_and_is_never_taken() {
        let mut shard = MempoolShard::new();
        let txs: Vec<_> = (0..4).map(|n| tx(n, 21_000, 0)).collect();
        for (n, t) in txs.iter().enumerate() {
            shard.push(t.clone(), n as u64).unwrap();
        }
        let size = txs[1].raw.len();
        assert_eq!(shard.forget(&txs[1].hash), Some(size));
        assert_eq!(shard.forget(&txs[1].hash), None, "once");
        assert_eq!((shard.len(), shard.bytes()), (3, 3 * size));
        assert!(shard.find(&txs[1].hash).is_none());
        assert_eq!(shard.find(&txs[2].hash).map(|t| t.nonce()), Some(2));
        // The dead entry costs no room in the block.
        let taken = shard.take(3, 3 * 21_000, usize::MAX, &B256Set::default()).txs;
        assert_eq!(taken.iter().map(|p| p.tx.nonce()).collect::<Vec<_>>(), vec![0, 2, 3]);
        assert!(shard.is_empty() && shard.bytes() == 0);
    }

    #[test]
    fn take_passes_over_what_the_chain_already_holds_and_keeps_it() {
        let mut shard = MempoolShard::new();
        let txs: Vec<_> = (0..3).map(|n| tx(n, 21_000, 0)).collect();
        for (n, t) in txs.iter().enumerate() {
            shard.push(t.clone(), n as u64).unwrap();
        }
        let exclude: B256Set = [txs[0].hash, txs[1].hash].into_iter().collect();
        let taken = shard.take(1, u64::MAX, usize::MAX, &exclude);
        let nonces = |v: &[Pooled]| v.iter().map(|p| p.tx.nonce()).collect::<Vec<_>>();
        assert_eq!((nonces(&taken.txs), taken.in_ancestry), (vec![2], 2));
        // Still queued, in order: if the block holding them loses its
        // height, the next proposal takes them before any later nonce.
        assert_eq!(shard.len(), 2);
        let again = shard.take(3, u64::MAX, usize::MAX, &B256Set::default());
        assert_eq!(nonces(&again.txs), vec![0, 1]);
        assert!(shard.is_empty() && shard.bytes() == 0);
    }

    #[test]
    fn dead_entries_are_compacted_and_the_index_stays_right() {
        let mut shard = MempoolShard::new();
        let txs: Vec<_> = (0..3_000).map(|n| tx(n, 21_000, 0)).collect();
        for (n, t) in txs.iter().enumerate() {
            shard.push(t.clone(), n as u64).unwrap();
        }
        shard.take(10, u64::MAX, usize::MAX, &B256Set::default());
        // Forget every transaction but each tenth: compaction runs on the way.
        for (i, t) in txs.iter().enumerate().skip(10) {
            if i % 10 != 0 {
                shard.forget(&t.hash).unwrap();
            }
        }
        assert!(shard.queue.len() < 2 * shard.len() + COMPACT_MIN_DEAD, "compacted");
        assert_eq!(shard.len(), 299);
        for (i, t) in txs.iter().enumerate().skip(10) {
            assert_eq!(shard.find(&t.hash).is_some(), i % 10 == 0, "tx {i}");
        }
        let taken = shard.take(usize::MAX, u64::MAX, usize::MAX, &B256Set::default()).txs;
        let want: Vec<_> = txs.iter().skip(10).step_by(10).map(|t| t.hash).collect();
        assert_eq!(taken.iter().map(|p| p.tx.hash).collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_replacement_keeps_its_place_and_a_taken_one_is_not_replaced() {
        let mut shard = MempoolShard::new();
        let txs: Vec<_> = (0..3).map(|n| tx(n, 21_000, 0)).collect();
        for (n, t) in txs.iter().enumerate() {
            shard.push(t.clone(), n as u64).unwrap();
        }
        let new = tx(1, 30_000, 40);
        let old = shard.replace(&txs[1].hash, new.clone()).unwrap();
        assert_eq!(old.hash, txs[1].hash);
        assert!(shard.find(&txs[1].hash).is_none());
        assert_eq!(shard.bytes(), txs[0].raw.len() + new.raw.len() + txs[2].raw.len());
        let taken = shard.take(1, u64::MAX, usize::MAX, &B256Set::default()).txs;
        assert_eq!(taken[0].tx.hash, txs[0].hash);
        // Taken already: nothing to replace, the newcomer comes back.
        assert_eq!(
            shard.replace(&txs[0].hash, tx(0, 40_000, 0)).map(|t| t.hash).unwrap_err().gas_limit(),
            40_000
        );
        let rest = shard.take(5, u64::MAX, usize::MAX, &B256Set::default()).txs;
        assert_eq!(
            rest.iter().map(|p| (p.tx.hash, p.seq)).collect::<Vec<_>>(),
            vec![(new.hash, 1), (txs[2].hash, 2)]
        );
        assert!(shard.is_empty() && shard.bytes() == 0);
    }
}
