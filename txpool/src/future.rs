//! Transactions held for a nonce gap: geth's "queued" transactions.
//!
//! A transaction whose nonce is above its sender's next one cannot be
//! reserved yet (reservation into the mempool stays gapless, see
//! [`crate::NonceBook`]). Deploy tools send a script's transactions with
//! several in flight, so one can overtake another on the way; geth, reth
//! and anvil hold such a transaction and promote it when the gap fills.
//! So does this queue, bounded as geth bounds its queue: per sender
//! (`mempool.max_future_txs_per_sender`, geth 64), in all
//! (`mempool.max_future_txs`, geth 1,024), and in time
//! (`mempool.future_tx_lifetime_ms`, geth 3 h), after which a held
//! transaction is dropped and reported.
//!
//! When the queue is full it keeps a fair share per sender, as geth evicts
//! rather than refuses: a newcomer pushes out the lowest-tip held
//! transaction (the highest nonce among equal tips, so the fewest others
//! lose their way forward) of the sender holding the most, if that sender
//! holds more than the newcomer's sender would after the insertion;
//! otherwise the newcomer gets `txpool is full`. Without it a few cheap
//! accounts with nonce gaps fill the queue for everyone.
//!
//! Plain data, no clock of its own: the caller passes `now`.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use alloy_consensus::Transaction;
use alloy_primitives::{map::AddressMap, Address, B256};
use sluice_messages::RecoveredTx;

use crate::{error::TxError, validate::check_replacement};

/// The queue's bounds.
#[derive(Debug, Clone, Copy)]
pub struct FutureLimits {
    /// Held transactions per sender.
    pub per_sender: usize,
    /// Held transactions in all.
    pub total: usize,
    /// How long one may wait for its gap to fill.
    pub lifetime: Duration,
    /// The fee bump, in percent, a same-nonce transaction needs over the
    /// held one to replace it (geth's `PriceBump`, 10).
    pub price_bump: u64,
}

/// One held transaction and when it arrived.
#[derive(Debug, Clone)]
struct Held {
    tx: RecoveredTx,
    since: Instant,
}

/// Future-nonce transactions by sender and nonce.
#[derive(Debug, Default)]
pub struct FutureQueue {
    senders: AddressMap<BTreeMap<u64, Held>>,
    len: usize,
}

impl FutureQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds `tx` (its nonce is above its sender's next one), answering
    /// the transaction it evicted, if any, for the caller to report. A
    /// transaction with the same sender and nonce replaces the held one
    /// only with geth's fee bump (see [`check_replacement`]), else
    /// `replacement transaction underpriced`; a sender at its limit gets the
    /// sender-limit error; a full queue evicts from the sender holding the
    /// most (see the module docs) or refuses with `txpool is full`.
    pub fn hold(
        &mut self,
        tx: RecoveredTx,
        limits: &FutureLimits,
        now: Instant,
    ) -> Result<Option<RecoveredTx>, TxError> {
        let nonce = tx.nonce();
        let held = self.senders.get(&tx.sender).map_or(0, BTreeMap::len);
        let old = self.senders.get(&tx.sender).and_then(|m| m.get(&nonce));
        if let Some(old) = old {
            check_replacement(&old.tx.tx, &tx.tx, limits.price_bump)?;
        } else {
            if held >= limits.per_sender {
                let limit = u32::try_from(limits.per_sender).unwrap_or(u32::MAX);
                return Err(TxError::SenderLimit { in_flight: limit, limit });
            }
            if self.len >= limits.total {
                let evicted = self.evict_for(held.saturating_add(1)).ok_or(TxError::TxPoolFull)?;
                self.senders.entry(tx.sender).or_default().insert(nonce, Held { tx, since: now });
                return Ok(Some(evicted));
            }
            self.len += 1;
        }
        self.senders.entry(tx.sender).or_default().insert(nonce, Held { tx, since: now });
        Ok(None)
    }

    /// Takes out the lowest-tip held transaction (the highest nonce among
    /// equal tips) of the sender holding the most, if it holds more than
    /// `share`; `None` leaves the queue as it was.
    fn evict_for(&mut self, share: usize) -> Option<RecoveredTx> {
        let (victim, held) = self.senders.iter().max_by_key(|(_, held)| held.len())?;
        if held.len() <= share {
            return None;
        }
        let victim = *victim;
        let nonce = held
            .iter()
            .min_by_key(|(nonce, h)| (h.tx.tx.priority_fee_or_price(), std::cmp::Reverse(**nonce)))
            .map(|(nonce, _)| *nonce)?;
        let held = self.senders.get_mut(&victim)?;
        let gone = held.remove(&nonce)?.tx;
        if held.is_empty() {
            self.senders.remove(&victim);
        }
        Some(gone)
    }

    /// Takes the held transaction of `sender` with nonce `next`, if any:
    /// its gap filled.
    pub fn promote(&mut self, sender: &Address, next: u64) -> Option<RecoveredTx> {
        let held = self.senders.get_mut(sender)?;
        let tx = held.remove(&next)?.tx;
        if held.is_empty() {
            self.senders.remove(sender);
        }
        self.len -= 1;
        Some(tx)
    }

    /// Drops the held transactions of `sender` below `next` (their nonce
    /// was taken by another transaction) and answers them.
    pub fn stale(&mut self, sender: &Address, next: u64) -> Vec<RecoveredTx> {
        let Some(held) = self.senders.get_mut(sender) else { return Vec::new() };
        let keep = held.split_off(&next);
        let gone: Vec<RecoveredTx> = std::mem::replace(held, keep).into_values().map(|h| h.tx).collect();
        if held.is_empty() {
            self.senders.remove(sender);
        }
        self.len -= gone.len();
        gone
    }

    /// Drops and answers every transaction held longer than the lifetime.
    pub fn expire(&mut self, limits: &FutureLimits, now: Instant) -> Vec<RecoveredTx> {
        let mut gone = Vec::new();
        self.senders.retain(|_, held| {
            held.retain(|_, h| {
                let keep = now.saturating_duration_since(h.since) < limits.lifetime;
                if !keep {
                    gone.push(h.tx.clone());
                }
                keep
            });
            !held.is_empty()
        });
        self.len -= gone.len();
        gone
    }

    /// Drops and answers everything held (the node halted: no gap will
    /// fill).
    pub fn drain(&mut self) -> Vec<RecoveredTx> {
        let gone: Vec<RecoveredTx> = std::mem::take(&mut self.senders)
            .into_values()
            .flat_map(BTreeMap::into_values)
            .map(|h| h.tx)
            .collect();
        self.len = 0;
        gone
    }

    /// Whether a transaction with this hash is held.
    pub fn contains(&self, sender: &Address, nonce: u64, hash: &B256) -> bool {
        self.senders.get(sender).and_then(|m| m.get(&nonce)).is_some_and(|h| h.tx.hash == *hash)
    }

    /// The held transaction with this hash, if any (a scan: lookups by
    /// hash are rare, the queue is small).
    pub fn get(&self, hash: &B256) -> Option<&RecoveredTx> {
        self.senders.values().flat_map(BTreeMap::values).map(|h| &h.tx).find(|tx| tx.hash == *hash)
    }

    /// Every held transaction, by sender then nonce.
    pub fn iter(&self) -> impl Iterator<Item = &RecoveredTx> {
        self.senders.values().flat_map(BTreeMap::values).map(|h| &h.tx)
    }

    /// Transactions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(sender: u8, nonce: u64) -> RecoveredTx {
        priced(sender, nonce, 100, 10)
    }

    /// A transaction paying fee cap `fee` and tip `tip`.
    fn priced(sender: u8, nonce: u64, fee: u128, tip: u128) -> RecoveredTx {
        crate::test_txs::priced(Address::repeat_byte(sender), nonce, fee, tip, 0)
    }

    const LIMITS: FutureLimits =
        FutureLimits { per_sender: 3, total: 5, lifetime: Duration::from_secs(10), price_bump: 10 };

    #[test]
    fn held_in_nonce_order_and_promoted_when_the_gap_fills() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        for n in [3, 1, 2] {
            q.hold(tx(1, n), &LIMITS, now).unwrap();
        }
        assert_eq!(q.len(), 3);
        assert!(q.promote(&Address::repeat_byte(1), 0).is_none(), "the gap at 0 is still open");
        let promoted: Vec<u64> =
            (1..=3).map(|n| q.promote(&Address::repeat_byte(1), n).map(|t| t.nonce()).unwrap()).collect();
        assert_eq!(promoted, vec![1, 2, 3]);
        assert!(q.is_empty());
    }

    #[test]
    fn bounded_per_sender_and_in_all_and_a_resend_replaces() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        for n in 1..=3 {
            q.hold(tx(1, n), &LIMITS, now).unwrap();
        }
        assert!(matches!(q.hold(tx(1, 4), &LIMITS, now), Err(TxError::SenderLimit { .. })));
        // The same nonce again, 10% dearer, replaces, within the limit.
        q.hold(priced(1, 2, 110, 11), &LIMITS, now).unwrap();
        assert_eq!(q.len(), 3);
        q.hold(tx(2, 1), &LIMITS, now).unwrap();
        q.hold(tx(2, 2), &LIMITS, now).unwrap();
        // Full: sender 1 holds more than sender 3 would, and gives one up.
        let gone = q.hold(tx(3, 1), &LIMITS, now).unwrap();
        assert_eq!(gone.map(|t| t.sender), Some(Address::repeat_byte(1)));
        assert_eq!(q.len(), 5);
    }

    #[test]
    fn expired_and_stale_ones_are_answered_to_be_reported() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        q.hold(tx(1, 5), &LIMITS, now).unwrap();
        q.hold(tx(1, 7), &LIMITS, now + Duration::from_secs(8)).unwrap();
        q.hold(tx(2, 3), &LIMITS, now).unwrap();
        let expired = q.expire(&LIMITS, now + Duration::from_secs(10));
        assert_eq!(expired.len(), 2, "held 10 s: nonce 5 of 1 and 3 of 2");
        assert_eq!(q.len(), 1);
        // Nonce 7 was taken by another transaction: it can never apply.
        let stale = q.stale(&Address::repeat_byte(1), 8);
        assert_eq!(stale.iter().map(RecoveredTx::nonce).collect::<Vec<_>>(), vec![7]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_replacement_needs_geths_bump_on_both_fee_cap_and_tip() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        let a = Address::repeat_byte(1);
        q.hold(priced(1, 4, 100, 10), &LIMITS, now).unwrap();
        // The same fees, or a bump on one field only, or 9%: underpriced.
        for (fee, tip) in [(100, 10), (200, 10), (110, 10), (109, 11), (100, 20)] {
            let e = q.hold(priced(1, 4, fee, tip), &LIMITS, now).unwrap_err();
            assert_eq!(e.to_string(), "replacement transaction underpriced", "fee {fee} tip {tip}");
            assert_eq!((e.rpc_code(), e.outcome()), (-32000, "underpriced"));
        }
        assert_eq!(q.iter().map(|t| t.tx.max_fee_per_gas()).collect::<Vec<_>>(), vec![100]);
        // Exactly old * 110 / 100 on both: replaces.
        q.hold(priced(1, 4, 110, 11), &LIMITS, now).unwrap();
        assert_eq!(q.len(), 1);
        assert_eq!(q.promote(&a, 4).map(|t| t.tx.max_priority_fee_per_gas()), Some(Some(11)));
    }

    #[test]
    fn the_bump_is_integer_math_and_a_zero_tip_must_still_rise() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        q.hold(priced(1, 4, 15, 0), &LIMITS, now).unwrap();
        // 15 * 110 / 100 = 16 (16.5 rounded down, as geth's big.Int).
        assert!(q.hold(priced(1, 4, 16, 0), &LIMITS, now).is_err(), "a tip of 0 must rise too");
        q.hold(priced(1, 4, 16, 1), &LIMITS, now).unwrap();
        // A bump of 0 still asks for strictly higher fees (geth compares
        // before applying the bump).
        let zero = FutureLimits { price_bump: 0, ..LIMITS };
        assert!(q.hold(priced(1, 4, 16, 1), &zero, now).is_err());
        q.hold(priced(1, 4, 17, 2), &zero, now).unwrap();
    }

    #[test]
    fn a_full_queue_evicts_the_cheapest_of_the_sender_holding_the_most() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        let limits = FutureLimits { per_sender: 4, total: 5, ..LIMITS };
        // Sender 1 holds 4 (tips 10, 5, 5, 9), sender 2 holds 1.
        for (n, tip) in [(1, 10), (2, 5), (3, 5), (4, 9)] {
            assert!(q.hold(priced(1, n, 100, tip), &limits, now).unwrap().is_none());
        }
        q.hold(tx(2, 1), &limits, now).unwrap();
        // Sender 3 would hold 1: sender 1's tip-5 nonce 3 (the higher of
        // the two) goes, reported by the caller.
        let gone = q.hold(tx(3, 1), &limits, now).unwrap().unwrap();
        assert_eq!((gone.sender, gone.nonce()), (Address::repeat_byte(1), 3));
        assert_eq!(q.len(), 5);
        // Then nonce 2 (tip 5), then one of the tip-9/10 ones: sender 1
        // keeps shrinking while it holds more than the newcomer would.
        let gone = q.hold(tx(3, 2), &limits, now).unwrap().unwrap();
        assert_eq!(gone.nonce(), 2);
        // Now 1 holds 2, 2 holds 1, 3 holds 2: sender 3's third would make
        // it 3 > 2, so it is refused and nothing moves.
        assert_eq!(q.hold(tx(3, 3), &limits, now).unwrap_err(), TxError::TxPoolFull);
        // Sender 2's second would make 2, and 1 holds 2: not more, refused.
        assert_eq!(q.hold(tx(2, 2), &limits, now).unwrap_err(), TxError::TxPoolFull);
        assert_eq!(q.len(), 5);
        let kept: Vec<(u8, u64)> = q.iter().map(|t| (t.sender.0[0], t.nonce())).collect();
        assert_eq!(kept.len(), 5);
        assert!(kept.contains(&(1, 1)) && kept.contains(&(1, 4)), "{kept:?}");
    }

    #[test]
    fn sixteen_cheap_senders_no_longer_lock_out_an_honest_one() {
        let (mut q, now) = (FutureQueue::new(), Instant::now());
        let limits = FutureLimits { per_sender: 64, total: 1024, ..LIMITS };
        for sender in 1..=16u8 {
            for n in 1..=64 {
                q.hold(priced(sender, n, 100, 1), &limits, now).unwrap();
            }
        }
        assert_eq!(q.len(), 1024);
        // A deploy script's ten out-of-order nonces all find room.
        for n in 1..=10 {
            let gone = q.hold(priced(100, n, 100, 1), &limits, now).unwrap();
            assert!(gone.is_some_and(|t| t.sender != Address::repeat_byte(100)));
        }
        assert_eq!(q.len(), 1024);
    }
}
