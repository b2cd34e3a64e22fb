//! Which transactions a full pool gives up for a better-paying one.
//!
//! geth evicts the cheapest transactions of a full pool when a newcomer
//! pays more, and refuses the newcomer as `transaction underpriced` when it
//! pays less. Here a sender's in-flight nonces are gapless and blocks take
//! them in order, so only a sender's *last* in-flight transaction (its
//! tail) can leave without stranding the ones after it: [`Tails`] indexes
//! each sender's tail by [`Price`], and a full pool gives up the cheapest
//! tails (one per sender per newcomer) that the newcomer outbids.
//!
//! The index is updated where the nonce book is (a reservation sets the
//! sender's tail, a replacement at the tail reprices it) and is allowed to
//! go stale elsewhere: the caller checks a candidate against the in-flight
//! index and the book before evicting it ([`Tails::candidates`] takes that
//! check), and drops a sender's entry when the book forgets the sender, so
//! it never holds more senders than the book does.

use std::collections::BTreeSet;

use alloy_consensus::{Transaction, TxEnvelope};
use alloy_primitives::{map::AddressMap, Address, B256};

/// What a transaction pays, in the order a full pool compares it: the tip
/// it offers (capped by its fee cap, as geth's price heap compares before
/// the base fee is known), then its fee cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Price {
    /// `min(max_priority_fee_per_gas, max_fee_per_gas)`; legacy: the gas price.
    pub tip: u128,
    /// `max_fee_per_gas`; legacy: the gas price.
    pub fee_cap: u128,
}

impl Price {
    /// The price of `tx`.
    pub fn of(tx: &TxEnvelope) -> Self {
        let fee_cap = tx.max_fee_per_gas();
        Price { tip: tx.priority_fee_or_price().min(fee_cap), fee_cap }
    }
}

/// A sender's last in-flight transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// Its sender.
    pub sender: Address,
    /// Its nonce: the sender's next nonce minus one while it is in flight.
    pub nonce: u64,
    /// Its hash.
    pub hash: B256,
    /// What it pays.
    pub price: Price,
    /// Its raw size, the pool bytes it gives back when evicted.
    pub bytes: usize,
}

/// Each sender's tail, cheapest first.
#[derive(Debug, Default)]
pub struct Tails {
    by_sender: AddressMap<Tail>,
    /// `(price, sender)`: the sender breaks ties, so each entry is unique.
    order: BTreeSet<(Price, Address)>,
}

/// Why [`Tails::candidates`] found no room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRoom {
    /// The cheapest tail that would have to go pays more than the
    /// newcomer: geth's `transaction underpriced`.
    Underpriced,
    /// The tails that would have to go pay exactly what the newcomer does,
    /// or there are not enough of them: `txpool is full` (try later).
    Full,
}

impl Tails {
    /// Makes `tail` its sender's tail (a reservation or a replacement of
    /// the tail).
    pub fn set(&mut self, tail: Tail) {
        if let Some(old) = self.by_sender.insert(tail.sender, tail) {
            self.order.remove(&(old.price, old.sender));
        }
        self.order.insert((tail.price, tail.sender));
    }

    /// Forgets `sender`'s tail (nothing of it in flight any more).
    pub fn remove(&mut self, sender: &Address) -> Option<Tail> {
        let old = self.by_sender.remove(sender)?;
        self.order.remove(&(old.price, old.sender));
        Some(old)
    }

    /// `sender`'s tail, if indexed.
    pub fn get(&self, sender: &Address) -> Option<&Tail> {
        self.by_sender.get(sender)
    }

    /// What the cheapest indexed tail pays (stale entries included: a
    /// lower bound on what a newcomer must outbid).
    pub fn floor(&self) -> Option<Price> {
        self.order.first().map(|(price, _)| *price)
    }

    /// Forgets every tail (the book is being rebuilt).
    pub fn clear(&mut self) {
        self.by_sender.clear();
        self.order.clear();
    }

    /// Senders indexed.
    pub fn len(&self) -> usize {
        self.by_sender.len()
    }

    /// Whether no sender is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_sender.is_empty()
    }

    /// The cheapest tails, one per sender other than `newcomer`'s, that
    /// make room for it: each paying strictly less than `price`, until
    /// `freed(count, bytes)` says enough was freed. Visits at most
    /// `max_visits` entries, and skips (and forgets) those `live` says are
    /// no longer a sender's in-flight tail. Nothing is evicted here: the
    /// caller evicts what is returned.
    pub fn candidates(
        &mut self,
        newcomer: &Address,
        price: Price,
        max_visits: usize,
        live: impl Fn(&Tail) -> bool,
        freed: impl Fn(usize, usize) -> bool,
    ) -> Result<Vec<Tail>, NoRoom> {
        let (mut picked, mut stale, mut bytes) = (Vec::new(), Vec::new(), 0usize);
        let mut verdict = Err(NoRoom::Full);
        for (tail_price, sender) in self.order.iter().take(max_visits) {
            if sender == newcomer {
                continue;
            }
            let Some(tail) = self.by_sender.get(sender) else { continue };
            if !live(tail) {
                stale.push(*sender);
                continue;
            }
            if *tail_price >= price {
                if picked.is_empty() && *tail_price > price {
                    verdict = Err(NoRoom::Underpriced);
                }
                break;
            }
            bytes += tail.bytes;
            picked.push(*tail);
            if freed(picked.len(), bytes) {
                verdict = Ok(());
                break;
            }
        }
        for sender in stale {
            self.remove(&sender);
        }
        verdict.map(|()| picked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(sender: u8, tip: u128, bytes: usize) -> Tail {
        Tail {
            sender: Address::repeat_byte(sender),
            nonce: 0,
            hash: B256::repeat_byte(sender),
            price: Price { tip, fee_cap: tip },
            bytes,
        }
    }

    fn price(tip: u128) -> Price {
        Price { tip, fee_cap: tip }
    }

    const ANYONE: Address = Address::ZERO;

    #[test]
    fn the_cheapest_tail_goes_first_and_one_is_enough_for_one_slot() {
        let mut t = Tails::default();
        [tail(1, 5, 100), tail(2, 3, 100), tail(3, 9, 100)].into_iter().for_each(|x| t.set(x));
        let got = t.candidates(&ANYONE, price(6), 16, |_| true, |n, _| n >= 1).unwrap();
        assert_eq!(got, vec![tail(2, 3, 100)]);
        // Nothing is removed until the caller evicts.
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_newcomer_paying_less_is_underpriced_and_paying_the_same_finds_the_pool_full() {
        let mut t = Tails::default();
        t.set(tail(1, 5, 100));
        assert_eq!(t.candidates(&ANYONE, price(4), 16, |_| true, |n, _| n >= 1), Err(NoRoom::Underpriced));
        assert_eq!(t.candidates(&ANYONE, price(5), 16, |_| true, |n, _| n >= 1), Err(NoRoom::Full));
        // The fee cap breaks a tie in tips.
        let better = Price { tip: 5, fee_cap: 6 };
        assert_eq!(t.candidates(&ANYONE, better, 16, |_| true, |n, _| n >= 1).map(|v| v.len()), Ok(1));
    }

    #[test]
    fn bytes_may_need_several_tails_and_all_must_be_outbid() {
        let mut t = Tails::default();
        [tail(1, 1, 100), tail(2, 2, 100), tail(3, 8, 100)].into_iter().for_each(|x| t.set(x));
        let got = t.candidates(&ANYONE, price(5), 16, |_| true, |_, b| b >= 200).unwrap();
        assert_eq!(
            got.iter().map(|x| x.sender).collect::<Vec<_>>(),
            vec![Address::repeat_byte(1), Address::repeat_byte(2)]
        );
        // The third would have to go too, and pays more: no room, nothing evicted.
        assert_eq!(t.candidates(&ANYONE, price(5), 16, |_| true, |_, b| b >= 300), Err(NoRoom::Full));
    }

    #[test]
    fn the_newcomers_own_tail_and_stale_tails_are_passed_over() {
        let mut t = Tails::default();
        [tail(1, 1, 100), tail(2, 2, 100), tail(3, 3, 100)].into_iter().for_each(|x| t.set(x));
        let own = Address::repeat_byte(1);
        let stale = Address::repeat_byte(2);
        let got = t.candidates(&own, price(9), 16, |x| x.sender != stale, |n, _| n >= 1).unwrap();
        assert_eq!(got, vec![tail(3, 3, 100)]);
        // The stale one is forgotten on the way.
        assert!(t.get(&stale).is_none() && t.len() == 2);
    }

    #[test]
    fn visits_are_bounded() {
        let mut t = Tails::default();
        (1..=10).for_each(|s| t.set(tail(s, s as u128, 100)));
        assert_eq!(t.candidates(&ANYONE, price(99), 3, |_| true, |n, _| n >= 5), Err(NoRoom::Full));
    }

    #[test]
    fn setting_a_sender_again_moves_its_entry() {
        let mut t = Tails::default();
        t.set(tail(1, 1, 100));
        t.set(Tail { nonce: 1, ..tail(1, 7, 50) });
        assert_eq!(t.len(), 1);
        assert_eq!(t.candidates(&ANYONE, price(5), 16, |_| true, |n, _| n >= 1), Err(NoRoom::Underpriced));
        assert_eq!(t.remove(&Address::repeat_byte(1)).map(|x| x.nonce), Some(1));
        assert!(t.is_empty() && t.order.is_empty());
    }

    #[test]
    fn legacy_and_dynamic_fee_prices() {
        use alloy_consensus::{Signed, TxEip1559, TxLegacy};
        use alloy_primitives::Signature;
        let sig = Signature::test_signature();
        let legacy = TxEnvelope::Legacy(Signed::new_unchecked(
            TxLegacy { gas_price: 7, ..Default::default() },
            sig,
            B256::ZERO,
        ));
        assert_eq!(Price::of(&legacy), Price { tip: 7, fee_cap: 7 });
        let dynamic = TxEnvelope::Eip1559(Signed::new_unchecked(
            TxEip1559 { max_fee_per_gas: 10, max_priority_fee_per_gas: 3, ..Default::default() },
            sig,
            B256::ZERO,
        ));
        assert_eq!(Price::of(&dynamic), Price { tip: 3, fee_cap: 10 });
    }
}
