//! The nonce book: each sender's next reservable nonce, how many of its
//! transactions are in flight (admitted, not yet executed), and what those
//! may still spend.
//!
//! sluice admits gapless nonces only: a transaction is admitted when its
//! nonce is exactly the sender's next one. That keeps the mempool a plain
//! FIFO (no queued/pending split as in geth) and makes every admitted
//! transaction executable in arrival order.
//!
//! It also refuses overdrafts, as geth does (`ValidateTransactionWithState`):
//! the committed balance must cover the maximum costs of the sender's
//! in-flight transactions plus the new one. Without it a sender funded for
//! one transfer gets a second and a third admitted, which execution then
//! skips unpaid after they took block space for free.
//!
//! Invariants, for every tracked sender:
//! - `in_flight >= 1`: an entry with nothing in flight is dropped, so the
//!   next admission re-reads the committed nonce from the store. This is how
//!   a sender recovers after one of its transactions was skipped at
//!   execution: the book never remembers nonces the chain did not take.
//! - `next` is one past the highest reserved nonce, and when every admitted
//!   transaction executes normally `next == committed + in_flight`.
//! - `in_flight <= max_in_flight_per_sender` at the moment of each
//!   reservation.
//! - `costs` holds the newest `costs.len() <= in_flight` in-flight
//!   transactions, in reservation order (the order a block takes them in,
//!   their shard being a FIFO), with strictly increasing nonces; the older
//!   ones were doomed by a skip and will never be charged. `spent` is their
//!   sum.
//!
//! # When a cost stops counting
//!
//! The committed balance already reflects every applied transaction, and
//! the book learns of a block only after it is committed, so a balance read
//! in between reflects transactions the book still counts. The committed
//! nonce read with the same balance tells which: a cost whose nonce is below
//! it was either charged (applied) or will never be (that nonce went to
//! another transaction), so it is left out of the check. A cost whose nonce
//! is not below it has not been charged yet. That makes the check exact
//! whenever the balance read is at least as new as what the book knows (the
//! actor re-reads a stale one), and the cost itself leaves the book when the
//! book learns its block executed ([`NonceBook::executed`]).
//!
//! The book is not thread-safe on purpose: it is owned by the one admission
//! section that serializes reservations, and reading the committed account
//! (a store lookup) is done by the caller before calling [`NonceBook::reserve`].

use std::collections::VecDeque;

use alloy_primitives::{map::AddressMap, Address, U256};

use crate::error::TxError;

/// One tracked sender.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The nonce the sender's next transaction must carry.
    next: u64,
    /// Admitted and not yet executed; always >= 1 while tracked.
    in_flight: u32,
    /// Nonce and maximum cost of the newest in-flight transactions, oldest
    /// first; the `in_flight - costs.len()` older ones are doomed (see the
    /// module docs) and carry none.
    costs: VecDeque<(u64, U256)>,
    /// Sum of `costs` (saturating; never reached: each admitted sum is at
    /// most a balance).
    spent: U256,
}

impl Entry {
    /// The in-flight spend a balance read together with `committed_nonce`
    /// does not reflect yet: the costs whose nonce is not below it. Costs
    /// ascend by nonce, so those below form a prefix.
    fn queued_cost(&self, committed_nonce: u64) -> U256 {
        let charged = self
            .costs
            .iter()
            .take_while(|(nonce, _)| *nonce < committed_nonce)
            .fold(U256::ZERO, |sum, (_, cost)| sum.saturating_add(*cost));
        self.spent.saturating_sub(charged)
    }

    /// Removes the oldest cost (a transaction left flight).
    fn pop_oldest(&mut self) {
        if let Some((_, cost)) = self.costs.pop_front() {
            self.spent = self.spent.saturating_sub(cost);
        }
    }

    /// Forgets every cost: the remaining in-flight transactions are doomed.
    fn doom_all(&mut self) {
        self.costs.clear();
        self.spent = U256::ZERO;
    }
}

/// A sender's committed account as read (together) before reserving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The account nonce: the first nonce the chain has not taken.
    pub nonce: u64,
    /// The balance, which already reflects every transaction below `nonce`.
    pub balance: U256,
}

/// Per-sender nonce reservations and in-flight spend.
#[derive(Debug, Default)]
pub struct NonceBook {
    senders: AddressMap<Entry>,
}

impl NonceBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// The sender's next reservable nonce, or `None` if the sender has
    /// nothing in flight (then the committed nonce is the next one).
    pub fn next_nonce(&self, sender: &Address) -> Option<u64> {
        self.senders.get(sender).map(|e| e.next)
    }

    /// Transactions of `sender` admitted and not yet executed.
    pub fn in_flight(&self, sender: &Address) -> u32 {
        self.senders.get(sender).map_or(0, |e| e.in_flight)
    }

    /// The maximum costs of `sender`'s in-flight transactions that a
    /// balance read with `committed_nonce` does not reflect yet: what an
    /// admission must find room for above the new transaction's cost.
    pub fn queued_cost(&self, sender: &Address, committed_nonce: u64) -> U256 {
        self.senders.get(sender).map_or(U256::ZERO, |e| e.queued_cost(committed_nonce))
    }

    /// Reserves `tx_nonce` for `sender`, recording `cost` (the transaction's
    /// maximum cost, `gas_limit * max_fee + value`) as in-flight spend.
    ///
    /// The nonce must equal the sender's next one: the tracked value, or
    /// `committed.nonce` for an untracked sender (a committed nonce above the
    /// tracked one, from a transaction that reached the chain some other
    /// way, wins); lower is `nonce too low`. Then `committed.balance` must
    /// cover the queued cost (see [`NonceBook::queued_cost`]) plus `cost`,
    /// else geth's overdraft error; the caller has already checked `cost`
    /// alone against the balance, for geth's plainer message. Then a higher
    /// nonce is `nonce too high` (the caller may hold it for its gap), and
    /// last a sender at the per-sender limit gets the sender-limit error.
    pub fn reserve(
        &mut self,
        sender: Address,
        tx_nonce: u64,
        cost: U256,
        committed: Committed,
        max_in_flight_per_sender: u32,
    ) -> Result<(), TxError> {
        let (next, in_flight) = match self.senders.get(&sender) {
            Some(e) => (e.next.max(committed.nonce), e.in_flight),
            None => (committed.nonce, 0),
        };
        if tx_nonce < next {
            return Err(TxError::NonceTooLow { next, tx: tx_nonce });
        }
        // Before the gap, as geth orders it: a transaction the in-flight
        // spend already leaves no room for is refused, not held (it is
        // checked again, against the spend then, if it is held and later
        // promoted).
        let queued = self.queued_cost(&sender, committed.nonce);
        let need = queued.saturating_add(cost);
        if committed.balance < need {
            return Err(TxError::Overdraft { balance: committed.balance, queued, cost });
        }
        if tx_nonce > next {
            return Err(TxError::NonceTooHigh { next, tx: tx_nonce });
        }
        if in_flight >= max_in_flight_per_sender {
            return Err(TxError::SenderLimit { in_flight, limit: max_in_flight_per_sender });
        }
        let next = tx_nonce.checked_add(1).ok_or(TxError::NonceMax)?;
        let entry = self.senders.entry(sender).or_insert_with(|| Entry {
            next,
            in_flight: 0,
            costs: VecDeque::new(),
            spent: U256::ZERO,
        });
        entry.next = next;
        entry.in_flight += 1;
        entry.costs.push_back((tx_nonce, cost));
        entry.spent = entry.spent.saturating_add(cost);
        Ok(())
    }

    /// Admits a same-nonce replacement of the sender's in-flight
    /// transaction with `nonce` (its fees already checked against geth's
    /// bump), whose maximum cost is `cost`.
    ///
    /// Only a transaction whose cost the book still counts can be
    /// replaced: one not doomed by a skip and not below `committed.nonce`
    /// (the chain took that nonce); anything else is `nonce too low`, as
    /// before. The balance must cover the queued cost with the old cost
    /// swapped for the new one, else geth's overdraft error.
    ///
    /// The book then counts the larger of the two costs until the nonce
    /// executes: the replacement happens in the mempool shard, which may
    /// find the old transaction already taken for a block (the old one then
    /// spends the nonce), and counting the larger errs towards refusing
    /// without a message back. A "speed up" costs more and is counted
    /// exactly; a "cancel" frees the old value once its block executes.
    pub fn replace(
        &mut self,
        sender: Address,
        nonce: u64,
        cost: U256,
        committed: Committed,
    ) -> Result<(), TxError> {
        let next = self.senders.get(&sender).map_or(committed.nonce, |e| e.next.max(committed.nonce));
        let too_low = TxError::NonceTooLow { next, tx: nonce };
        if nonce < committed.nonce {
            return Err(too_low);
        }
        let queued = self.queued_cost(&sender, committed.nonce);
        let Some(entry) = self.senders.get_mut(&sender) else { return Err(too_low) };
        let Some(at) = entry.costs.iter().position(|(n, _)| *n == nonce) else { return Err(too_low) };
        let old = entry.costs[at].1;
        let others = queued.saturating_sub(old);
        if committed.balance < others.saturating_add(cost) {
            return Err(TxError::Overdraft { balance: committed.balance, queued: others, cost });
        }
        let counted = old.max(cost);
        entry.costs[at].1 = counted;
        entry.spent = entry.spent.saturating_sub(old).saturating_add(counted);
        Ok(())
    }

    /// Puts back a sender's in-flight transactions after the book was lost
    /// (a contained panic): `next` as reserving them would have left it,
    /// and each one's nonce and maximum cost. Costs are kept in nonce
    /// order, the order they reach blocks in when no skip intervened;
    /// nothing is checked, they were admitted already. An empty list
    /// tracks nothing.
    pub fn restore(&mut self, sender: Address, next: u64, mut in_flight: Vec<(u64, U256)>) {
        if in_flight.is_empty() {
            return;
        }
        in_flight.sort_unstable_by_key(|(nonce, _)| *nonce);
        let spent = in_flight.iter().fold(U256::ZERO, |sum, (_, cost)| sum.saturating_add(*cost));
        let count = u32::try_from(in_flight.len()).unwrap_or(u32::MAX);
        self.senders.insert(sender, Entry { next, in_flight: count, costs: in_flight.into(), spent });
    }

    /// Rolls back the reservation of `nonce` if it is the sender's most
    /// recent one (the pool refused the transaction after the reservation),
    /// its cost with it. Returns whether anything was rolled back.
    pub fn unreserve(&mut self, sender: &Address, nonce: u64) -> bool {
        let Some(entry) = self.senders.get_mut(sender) else {
            return false;
        };
        if nonce.checked_add(1) != Some(entry.next) {
            return false;
        }
        entry.next = nonce;
        entry.in_flight -= 1;
        // The latest reservation always carries its cost (doomed ones are
        // older than any reservation made since), unless it was restored
        // by nonce order: then only a cost of that very nonce goes.
        if entry.costs.back().is_some_and(|(n, _)| *n == nonce) {
            if let Some((_, cost)) = entry.costs.pop_back() {
                entry.spent = entry.spent.saturating_sub(cost);
            }
        }
        if entry.in_flight == 0 {
            self.senders.remove(sender);
        }
        true
    }

    /// Records that a block carrying `count` transactions of `sender` was
    /// executed (applied or skipped), leaving the sender's nonce at
    /// `committed_nonce`. `count` is only those this book reserved: a
    /// block another validator proposed may carry others (even none of
    /// ours), which change the nonce but were never in flight here.
    ///
    /// The `count` oldest in-flight transactions leave flight with their
    /// costs: from now on the committed balance (which the caller reads at
    /// this block or later) reflects what they spent.
    ///
    /// When nothing is left in flight the entry is dropped. Otherwise the
    /// committed nonce tells whether the chain took what was expected
    /// (`next - in_flight`): if it is lower, a transaction was skipped and
    /// every remaining in-flight one has a nonce gap and will be skipped too,
    /// so the sender may resubmit from `committed_nonce` at once, and their
    /// costs no longer count (they will never be charged); if it is higher,
    /// nonces arrived by another path and `next` moves up.
    pub fn executed(&mut self, sender: &Address, count: u32, committed_nonce: u64) {
        let Some(entry) = self.senders.get_mut(sender) else {
            return;
        };
        // The doomed (costless) ones are the oldest: they leave first.
        let doomed = entry.in_flight.saturating_sub(u32::try_from(entry.costs.len()).unwrap_or(u32::MAX));
        for _ in doomed..count.max(doomed) {
            entry.pop_oldest();
        }
        self.left_flight(sender, count, committed_nonce);
    }

    /// Records that the in-flight transaction of `sender` with `nonce` was
    /// lost before reaching a block (a mempool shard gave up on it): the
    /// latest reservation rolls back exactly; an older one's cost goes
    /// (it will never be charged) and it leaves flight as if executed
    /// without moving the nonce, which dooms the later ones (the book
    /// resyncs when they are skipped; their costs count until then, which
    /// only errs towards refusing).
    pub fn dropped(&mut self, sender: &Address, nonce: u64) {
        if self.unreserve(sender, nonce) {
            return;
        }
        let Some(entry) = self.senders.get_mut(sender) else {
            return;
        };
        if let Some(at) = entry.costs.iter().position(|(n, _)| *n == nonce) {
            if let Some((_, cost)) = entry.costs.remove(at) {
                entry.spent = entry.spent.saturating_sub(cost);
            }
        }
        self.left_flight(sender, 1, nonce);
    }

    /// `count` of the sender's in-flight transactions left flight (their
    /// costs already removed), the chain's nonce now `committed_nonce`:
    /// see [`NonceBook::executed`].
    fn left_flight(&mut self, sender: &Address, count: u32, committed_nonce: u64) {
        let Some(entry) = self.senders.get_mut(sender) else {
            return;
        };
        entry.in_flight = entry.in_flight.saturating_sub(count);
        if entry.in_flight == 0 {
            self.senders.remove(sender);
            return;
        }
        let expected = entry.next.saturating_sub(u64::from(entry.in_flight));
        if committed_nonce < expected {
            entry.next = committed_nonce;
            entry.doom_all();
        } else {
            entry.next = entry.next.max(committed_nonce);
        }
    }

    /// Number of tracked senders (those with something in flight).
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// Whether no sender is tracked.
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Address = Address::repeat_byte(0xaa);
    const LIMIT: u32 = 16;
    /// A cost that never matters against [`rich`]'s balance.
    const ONE: U256 = U256::from_limbs([1, 0, 0, 0]);

    /// A committed account at `nonce` that can pay anything: for tests
    /// about nonces only.
    fn rich(nonce: u64) -> Committed {
        Committed { nonce, balance: U256::MAX }
    }

    #[test]
    fn untracked_sender_starts_at_the_committed_nonce_and_stays_gapless() {
        let mut book = NonceBook::new();
        assert_eq!(book.next_nonce(&A), None);
        assert_eq!(book.reserve(A, 4, ONE, rich(5), LIMIT), Err(TxError::NonceTooLow { next: 5, tx: 4 }));
        assert_eq!(book.reserve(A, 6, ONE, rich(5), LIMIT), Err(TxError::NonceTooHigh { next: 5, tx: 6 }));
        assert!(book.is_empty());
        book.reserve(A, 5, ONE, rich(5), LIMIT).unwrap();
        // The tracked value now rules, whatever the (stale) committed nonce.
        book.reserve(A, 6, ONE, rich(5), LIMIT).unwrap();
        assert_eq!(book.next_nonce(&A), Some(7));
        assert_eq!(book.in_flight(&A), 2);
        assert_eq!(
            book.reserve(A, 6, ONE, rich(5), LIMIT).unwrap_err().to_string(),
            "nonce too low: next nonce 7, tx nonce 6"
        );
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn per_sender_limit_counts_in_flight() {
        let mut book = NonceBook::new();
        for n in 0..3 {
            book.reserve(A, n, ONE, rich(0), 3).unwrap();
        }
        let e = book.reserve(A, 3, ONE, rich(0), 3).unwrap_err();
        assert_eq!(e, TxError::SenderLimit { in_flight: 3, limit: 3 });
        assert_eq!(e.outcome(), "sender_limit");
        // Executing frees slots.
        book.executed(&A, 1, 1);
        book.reserve(A, 3, ONE, rich(1), 3).unwrap();
    }

    #[test]
    fn unreserve_rolls_back_only_the_latest() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, ONE, rich(0), LIMIT).unwrap();
        book.reserve(A, 1, ONE, rich(0), LIMIT).unwrap();
        assert!(!book.unreserve(&A, 0), "not the most recent");
        assert!(book.unreserve(&A, 1));
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(1), 1));
        assert!(book.unreserve(&A, 0));
        assert_eq!(book.next_nonce(&A), None, "nothing in flight: dropped");
        assert!(!book.unreserve(&A, 0));
    }

    #[test]
    fn executed_drops_the_entry_when_nothing_is_in_flight() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, ONE, rich(0), LIMIT).unwrap();
        book.reserve(A, 1, ONE, rich(0), LIMIT).unwrap();
        book.executed(&A, 1, 1);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(2), 1));
        // Tx 1 was skipped at execution: the chain stayed at 1.
        book.executed(&A, 1, 1);
        assert_eq!(book.next_nonce(&A), None);
        book.reserve(A, 1, ONE, rich(1), LIMIT).unwrap();
    }

    #[test]
    fn executed_resyncs_after_a_skip_with_txs_still_in_flight() {
        let mut book = NonceBook::new();
        for n in 5..8 {
            book.reserve(A, n, ONE, rich(5), LIMIT).unwrap();
        }
        // Block N carried tx 5 and skipped it: 6 and 7 are doomed.
        book.executed(&A, 1, 5);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(5), 2));
        book.reserve(A, 5, ONE, rich(5), LIMIT).unwrap();
        // Block N+1 carries the doomed 6 and 7 (skipped), still at 5.
        book.executed(&A, 2, 5);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(6), 1));
        book.executed(&A, 1, 6);
        assert!(book.is_empty());
    }

    #[test]
    fn nonces_committed_by_another_validator_move_the_book_up() {
        let mut book = NonceBook::new();
        book.reserve(A, 5, ONE, rich(5), LIMIT).unwrap();
        book.reserve(A, 6, ONE, rich(5), LIMIT).unwrap();
        // Another validator's block carries A's own 5..=8 (other transactions
        // than ours): none of ours, so nothing leaves flight, but the book
        // moves past what the chain took.
        book.executed(&A, 0, 9);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(9), 2));
        book.reserve(A, 9, ONE, rich(9), LIMIT).unwrap();
        // Our doomed 5 and 6 are skipped in a later block; 9 applies.
        book.executed(&A, 2, 9);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(10), 1));
        book.executed(&A, 1, 10);
        assert!(book.is_empty());
    }

    #[test]
    fn another_validator_taking_only_our_first_nonce_keeps_the_rest_valid() {
        let mut book = NonceBook::new();
        book.reserve(A, 5, ONE, rich(5), LIMIT).unwrap();
        book.reserve(A, 6, ONE, rich(5), LIMIT).unwrap();
        // A conflicting 5 from elsewhere: ours is doomed, our 6 still fits.
        book.executed(&A, 0, 6);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(7), 2));
        book.executed(&A, 2, 7);
        assert!(book.is_empty());
    }

    #[test]
    fn a_committed_nonce_ahead_of_the_book_wins() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, ONE, rich(0), LIMIT).unwrap();
        book.reserve(A, 1, ONE, rich(0), LIMIT).unwrap();
        assert_eq!(book.reserve(A, 2, ONE, rich(9), LIMIT), Err(TxError::NonceTooLow { next: 9, tx: 2 }));
        book.executed(&A, 1, 9);
        assert_eq!(book.next_nonce(&A), Some(9));
        book.executed(&A, 5, 9);
        assert!(book.is_empty());
    }

    /// A committed account at `nonce` holding `balance` wei.
    fn holding(nonce: u64, balance: u64) -> Committed {
        Committed { nonce, balance: U256::from(balance) }
    }

    fn cost(wei: u64) -> U256 {
        U256::from(wei)
    }

    #[test]
    fn reservations_within_the_balance_are_admitted_and_counted() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(40), holding(0, 100), LIMIT).unwrap();
        book.reserve(A, 1, cost(60), holding(0, 100), LIMIT).unwrap();
        assert_eq!(book.queued_cost(&A, 0), cost(100), "exactly the balance is fine");
        assert_eq!(book.in_flight(&A), 2);
    }

    #[test]
    fn an_overdraft_is_refused_with_geths_message_and_reserves_nothing() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(70), holding(0, 100), LIMIT).unwrap();
        let e = book.reserve(A, 1, cost(70), holding(0, 100), LIMIT).unwrap_err();
        assert_eq!(e, TxError::Overdraft { balance: cost(100), queued: cost(70), cost: cost(70) });
        assert_eq!(
            e.to_string(),
            "insufficient funds for gas * price + value: balance 100, queued cost 70, tx cost 70, overshot 40"
        );
        assert_eq!(e.outcome(), "insufficient_funds");
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(1), 1), "nothing reserved");
        // What still fits is admitted.
        book.reserve(A, 1, cost(30), holding(0, 100), LIMIT).unwrap();
    }

    #[test]
    fn the_overdraft_comes_after_nonce_too_low_and_before_a_gap() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(90), holding(0, 100), LIMIT).unwrap();
        assert_eq!(
            book.reserve(A, 0, cost(20), holding(0, 100), LIMIT),
            Err(TxError::NonceTooLow { next: 1, tx: 0 })
        );
        // As geth: no room left is refused even with a gap, not held.
        let e = book.reserve(A, 5, cost(20), holding(0, 100), LIMIT).unwrap_err();
        assert!(matches!(e, TxError::Overdraft { .. }), "{e}");
        // With room, a gap is the caller's to hold (checked again when
        // promoted).
        assert_eq!(
            book.reserve(A, 5, cost(10), holding(0, 100), LIMIT),
            Err(TxError::NonceTooHigh { next: 1, tx: 5 })
        );
    }

    #[test]
    fn executed_frees_the_spend_of_what_it_carried() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(50), holding(0, 100), LIMIT).unwrap();
        book.reserve(A, 1, cost(50), holding(0, 100), LIMIT).unwrap();
        // Tx 0 applied and spent 30 of its 50: the balance read after the
        // block is 70 and tx 1 still counts.
        book.executed(&A, 1, 1);
        assert_eq!(book.queued_cost(&A, 1), cost(50));
        book.reserve(A, 2, cost(20), holding(1, 70), LIMIT).unwrap();
        assert!(book.reserve(A, 3, cost(1), holding(1, 70), LIMIT).is_err());
        book.executed(&A, 2, 3);
        assert!(book.is_empty());
        assert_eq!(book.queued_cost(&A, 3), U256::ZERO);
    }

    #[test]
    fn a_balance_read_before_the_book_learns_of_the_block_is_not_counted_twice() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(60), holding(0, 100), LIMIT).unwrap();
        // Block 1 applied tx 0 (charging 60 at most: 45 here) and is
        // committed; admission reads nonce 1, balance 55 before the book
        // hears of it. Tx 0 is in the balance already, so it is left out.
        assert_eq!(book.queued_cost(&A, 1), U256::ZERO);
        book.reserve(A, 1, cost(55), holding(1, 55), LIMIT).unwrap();
        assert_eq!(
            book.reserve(A, 2, cost(1), holding(1, 55), LIMIT).unwrap_err().to_string(),
            "insufficient funds for gas * price + value: balance 55, queued cost 55, tx cost 1, overshot 1"
        );
        // Then the book hears of block 1: tx 0's cost leaves, tx 1's stays.
        book.executed(&A, 1, 1);
        assert_eq!(book.queued_cost(&A, 1), cost(55));
    }

    #[test]
    fn unreserve_frees_the_latest_spend() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(30), holding(0, 100), LIMIT).unwrap();
        book.reserve(A, 1, cost(70), holding(0, 100), LIMIT).unwrap();
        assert!(book.unreserve(&A, 1));
        assert_eq!(book.queued_cost(&A, 0), cost(30));
        book.reserve(A, 1, cost(70), holding(0, 100), LIMIT).unwrap();
    }

    #[test]
    fn a_skip_dooms_the_rest_and_their_spend_no_longer_counts() {
        let mut book = NonceBook::new();
        for n in 5..8 {
            book.reserve(A, n, cost(10), holding(5, 30), LIMIT).unwrap();
        }
        // Tx 5 skipped (the balance fell to 10 by another path): 6 and 7
        // will be skipped too and never charged.
        book.executed(&A, 1, 5);
        assert_eq!(book.queued_cost(&A, 5), U256::ZERO);
        book.reserve(A, 5, cost(10), holding(5, 10), LIMIT).unwrap();
        assert!(book.reserve(A, 6, cost(1), holding(5, 10), LIMIT).is_err());
        // The doomed 6 and 7 leave first, without taking 5's cost.
        book.executed(&A, 2, 5);
        assert_eq!((book.in_flight(&A), book.queued_cost(&A, 5)), (1, cost(10)));
        book.executed(&A, 1, 6);
        assert!(book.is_empty());
    }

    #[test]
    fn a_lost_older_transaction_takes_only_its_own_cost() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(50), holding(0, 100), LIMIT).unwrap();
        book.reserve(A, 1, cost(20), holding(0, 100), LIMIT).unwrap();
        book.reserve(A, 2, cost(30), holding(0, 100), LIMIT).unwrap();
        book.dropped(&A, 1);
        // Tx 0 will still be charged; 2 is doomed but counts until skipped.
        assert_eq!((book.in_flight(&A), book.queued_cost(&A, 0)), (2, cost(80)));
        book.executed(&A, 1, 1);
        assert_eq!((book.next_nonce(&A), book.queued_cost(&A, 1)), (Some(1), U256::ZERO));
        // The latest one rolls back exactly.
        book.reserve(A, 1, cost(40), holding(1, 50), LIMIT).unwrap();
        book.dropped(&A, 1);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(1), 1));
    }

    #[test]
    fn restore_puts_back_the_in_flight_spend() {
        let mut book = NonceBook::new();
        book.restore(A, 3, vec![(2, cost(30)), (1, cost(20))]);
        book.restore(Address::ZERO, 0, Vec::new());
        assert_eq!(book.len(), 1, "an empty list tracks nothing");
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(3), 2));
        assert_eq!(book.queued_cost(&A, 1), cost(50));
        // Tx 1 already in the balance read: only 2 counts.
        assert_eq!(book.queued_cost(&A, 2), cost(30));
        assert!(book.reserve(A, 3, cost(31), holding(2, 60), LIMIT).is_err());
        book.reserve(A, 3, cost(30), holding(2, 60), LIMIT).unwrap();
        book.executed(&A, 1, 2);
        assert_eq!(book.queued_cost(&A, 2), cost(60));
    }

    #[test]
    fn a_replacement_swaps_the_cost_of_a_counted_in_flight_nonce() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, cost(40), holding(0, 100), LIMIT).unwrap();
        book.reserve(A, 1, cost(50), holding(0, 100), LIMIT).unwrap();
        // 40 -> 50 fits (50 + 50 <= 100); 40 -> 51 does not.
        let e = book.replace(A, 0, cost(51), holding(0, 100)).unwrap_err();
        assert_eq!(e, TxError::Overdraft { balance: cost(100), queued: cost(50), cost: cost(51) });
        book.replace(A, 0, cost(50), holding(0, 100)).unwrap();
        assert_eq!(
            (book.queued_cost(&A, 0), book.in_flight(&A), book.next_nonce(&A)),
            (cost(100), 2, Some(2))
        );
        // A cheaper one ("cancel") keeps the larger cost counted.
        book.replace(A, 1, cost(10), holding(0, 100)).unwrap();
        assert_eq!(book.queued_cost(&A, 0), cost(100));
        // Not in flight, or already taken by the chain: nonce too low.
        assert_eq!(
            book.replace(A, 0, cost(1), holding(1, 100)),
            Err(TxError::NonceTooLow { next: 2, tx: 0 })
        );
        assert!(book.replace(Address::ZERO, 0, cost(1), holding(1, 100)).is_err());
        assert!(book.replace(A, 2, cost(1), holding(0, 100)).is_err());
        book.executed(&A, 2, 2);
        assert!(book.is_empty());
    }
}
