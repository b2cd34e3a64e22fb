//! The nonce book: each sender's next reservable nonce and how many of its
//! transactions are in flight (admitted, not yet executed).
//!
//! sluice admits gapless nonces only: a transaction is admitted when its
//! nonce is exactly the sender's next one. That keeps the mempool a plain
//! FIFO (no queued/pending split as in geth) and makes every admitted
//! transaction executable in arrival order.
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
//!
//! The book is not thread-safe on purpose: it is owned by the one admission
//! section that serializes reservations, and reading the committed nonce
//! (a store lookup) is done by the caller before calling [`NonceBook::reserve`].

use alloy_primitives::{map::AddressMap, Address};

use crate::error::TxError;

/// One tracked sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The nonce the sender's next transaction must carry.
    next: u64,
    /// Admitted and not yet executed; always >= 1 while tracked.
    in_flight: u32,
}

/// Per-sender nonce reservations.
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

    /// Reserves `tx_nonce` for `sender`.
    ///
    /// The nonce must equal the sender's next one: the tracked value, or
    /// `committed_nonce` for an untracked sender (a committed nonce above the
    /// tracked one, from a transaction that reached the chain some other
    /// way, wins). Lower is `nonce too low`, higher is `nonce too high`; a
    /// right nonce at the per-sender limit is the sender-limit error.
    pub fn reserve(
        &mut self,
        sender: Address,
        tx_nonce: u64,
        committed_nonce: u64,
        max_in_flight_per_sender: u32,
    ) -> Result<(), TxError> {
        let (next, in_flight) = match self.senders.get(&sender) {
            Some(e) => (e.next.max(committed_nonce), e.in_flight),
            None => (committed_nonce, 0),
        };
        if tx_nonce < next {
            return Err(TxError::NonceTooLow { next, tx: tx_nonce });
        }
        if tx_nonce > next {
            return Err(TxError::NonceTooHigh { next, tx: tx_nonce });
        }
        if in_flight >= max_in_flight_per_sender {
            return Err(TxError::SenderLimit { in_flight, limit: max_in_flight_per_sender });
        }
        let next = tx_nonce.checked_add(1).ok_or(TxError::NonceMax)?;
        self.senders.insert(sender, Entry { next, in_flight: in_flight + 1 });
        Ok(())
    }

    /// Rolls back the reservation of `nonce` if it is the sender's most
    /// recent one (the pool refused the transaction after the reservation).
    /// Returns whether anything was rolled back.
    pub fn unreserve(&mut self, sender: &Address, nonce: u64) -> bool {
        let Some(entry) = self.senders.get_mut(sender) else {
            return false;
        };
        if nonce.checked_add(1) != Some(entry.next) {
            return false;
        }
        entry.next = nonce;
        entry.in_flight -= 1;
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
    /// When nothing is left in flight the entry is dropped. Otherwise the
    /// committed nonce tells whether the chain took what was expected
    /// (`next - in_flight`): if it is lower, a transaction was skipped and
    /// every remaining in-flight one has a nonce gap and will be skipped too,
    /// so the sender may resubmit from `committed_nonce` at once; if it is
    /// higher, nonces arrived by another path and `next` moves up.
    pub fn executed(&mut self, sender: &Address, count: u32, committed_nonce: u64) {
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

    #[test]
    fn untracked_sender_starts_at_the_committed_nonce_and_stays_gapless() {
        let mut book = NonceBook::new();
        assert_eq!(book.next_nonce(&A), None);
        assert_eq!(book.reserve(A, 4, 5, LIMIT), Err(TxError::NonceTooLow { next: 5, tx: 4 }));
        assert_eq!(book.reserve(A, 6, 5, LIMIT), Err(TxError::NonceTooHigh { next: 5, tx: 6 }));
        assert!(book.is_empty());
        book.reserve(A, 5, 5, LIMIT).unwrap();
        // The tracked value now rules, whatever the (stale) committed nonce.
        book.reserve(A, 6, 5, LIMIT).unwrap();
        assert_eq!(book.next_nonce(&A), Some(7));
        assert_eq!(book.in_flight(&A), 2);
        assert_eq!(
            book.reserve(A, 6, 5, LIMIT).unwrap_err().to_string(),
            "nonce too low: next nonce 7, tx nonce 6"
        );
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn per_sender_limit_counts_in_flight() {
        let mut book = NonceBook::new();
        for n in 0..3 {
            book.reserve(A, n, 0, 3).unwrap();
        }
        let e = book.reserve(A, 3, 0, 3).unwrap_err();
        assert_eq!(e, TxError::SenderLimit { in_flight: 3, limit: 3 });
        assert_eq!(e.outcome(), "sender_limit");
        // Executing frees slots.
        book.executed(&A, 1, 1);
        book.reserve(A, 3, 1, 3).unwrap();
    }

    #[test]
    fn unreserve_rolls_back_only_the_latest() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, 0, LIMIT).unwrap();
        book.reserve(A, 1, 0, LIMIT).unwrap();
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
        book.reserve(A, 0, 0, LIMIT).unwrap();
        book.reserve(A, 1, 0, LIMIT).unwrap();
        book.executed(&A, 1, 1);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(2), 1));
        // Tx 1 was skipped at execution: the chain stayed at 1.
        book.executed(&A, 1, 1);
        assert_eq!(book.next_nonce(&A), None);
        book.reserve(A, 1, 1, LIMIT).unwrap();
    }

    #[test]
    fn executed_resyncs_after_a_skip_with_txs_still_in_flight() {
        let mut book = NonceBook::new();
        for n in 5..8 {
            book.reserve(A, n, 5, LIMIT).unwrap();
        }
        // Block N carried tx 5 and skipped it: 6 and 7 are doomed.
        book.executed(&A, 1, 5);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(5), 2));
        book.reserve(A, 5, 5, LIMIT).unwrap();
        // Block N+1 carries the doomed 6 and 7 (skipped), still at 5.
        book.executed(&A, 2, 5);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(6), 1));
        book.executed(&A, 1, 6);
        assert!(book.is_empty());
    }

    #[test]
    fn nonces_committed_by_another_validator_move_the_book_up() {
        let mut book = NonceBook::new();
        book.reserve(A, 5, 5, LIMIT).unwrap();
        book.reserve(A, 6, 5, LIMIT).unwrap();
        // Another validator's block carries A's own 5..=8 (other transactions
        // than ours): none of ours, so nothing leaves flight, but the book
        // moves past what the chain took.
        book.executed(&A, 0, 9);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(9), 2));
        book.reserve(A, 9, 9, LIMIT).unwrap();
        // Our doomed 5 and 6 are skipped in a later block; 9 applies.
        book.executed(&A, 2, 9);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(10), 1));
        book.executed(&A, 1, 10);
        assert!(book.is_empty());
    }

    #[test]
    fn another_validator_taking_only_our_first_nonce_keeps_the_rest_valid() {
        let mut book = NonceBook::new();
        book.reserve(A, 5, 5, LIMIT).unwrap();
        book.reserve(A, 6, 5, LIMIT).unwrap();
        // A conflicting 5 from elsewhere: ours is doomed, our 6 still fits.
        book.executed(&A, 0, 6);
        assert_eq!((book.next_nonce(&A), book.in_flight(&A)), (Some(7), 2));
        book.executed(&A, 2, 7);
        assert!(book.is_empty());
    }

    #[test]
    fn a_committed_nonce_ahead_of_the_book_wins() {
        let mut book = NonceBook::new();
        book.reserve(A, 0, 0, LIMIT).unwrap();
        book.reserve(A, 1, 0, LIMIT).unwrap();
        assert_eq!(book.reserve(A, 2, 9, LIMIT), Err(TxError::NonceTooLow { next: 9, tx: 2 }));
        book.executed(&A, 1, 9);
        assert_eq!(book.next_nonce(&A), Some(9));
        book.executed(&A, 5, 9);
        assert!(book.is_empty());
    }
}
