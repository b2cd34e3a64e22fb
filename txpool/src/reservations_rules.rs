//! The rules behind [`Reservations::admit`]: a fresh account read, the
//! delegated sender's limit, replacement, and making room in a full pool;
//! and keeping each sender's tail in step with the book.

use std::collections::HashMap;

use alloy_primitives::Address;
use sluice_messages::RecoveredTx;

use super::{
    delegated, tail_of, Admitted, CommittedAccount, CommittedState, DropWhy, Dropped, Outbox, Reservations,
};
use crate::{check_replacement, max_cost, Committed, NoRoom, Price, Tail, TxError};

impl Reservations {
    /// Admission's read of `sender`, or a new one if a block committed
    /// since (this engine has seen a newer height): the book has already
    /// dropped that block's in-flight costs, which a stale balance would
    /// not reflect yet. A read newer than the book's is fine: the book
    /// leaves out the costs below the read's nonce.
    pub(super) fn fresh_account(
        &self,
        state: &impl CommittedState,
        committed: CommittedAccount,
        sender: &Address,
    ) -> CommittedAccount {
        if committed.height >= self.seen_height {
            return committed;
        }
        let height = state.head();
        match state.account(sender) {
            Ok(acct) => {
                let acct = acct.unwrap_or_default();
                let delegated = delegated(state, &acct.code_hash).unwrap_or(committed.delegated);
                CommittedAccount { height, nonce: acct.nonce, balance: acct.balance, delegated }
            }
            // The in-memory store cannot fail a read; a durable one that does
            // leaves the admission read in place, which is at worst stale.
            Err(_) => committed,
        }
    }

    /// geth's rule for a delegated sender (its code can drain the balance
    /// whenever another transaction calls it, so what admission counted
    /// in flight proves nothing): its next nonce only when nothing of it is
    /// in flight, or a replacement of what is. A lower nonce is left to the
    /// replacement rule.
    pub(super) fn check_delegated(&self, tx: &RecoveredTx, committed_nonce: u64) -> Result<(), TxError> {
        let next = self.book.next_nonce(&tx.sender).map_or(committed_nonce, |n| n.max(committed_nonce));
        if tx.nonce() < next {
            return Ok(());
        }
        if self.book.in_flight(&tx.sender) > 0 {
            return Err(TxError::InflightTxLimitReached);
        }
        if tx.nonce() > next {
            return Err(TxError::OutOfOrderTxFromDelegated);
        }
        Ok(())
    }

    /// A transaction whose nonce is below the sender's next one: a wallet's
    /// "speed up" or "cancel" of an in-flight transaction, as geth takes
    /// it. With geth's price bump over the in-flight one (still counted by
    /// the book, so not yet executed) it replaces it in its shard, else
    /// `replacement transaction underpriced`; with no in-flight
    /// transaction at that nonce, `too_low` stands.
    pub(super) fn replace(
        &mut self,
        tx: &RecoveredTx,
        account: Committed,
        too_low: TxError,
    ) -> Result<Admitted, TxError> {
        if tx.nonce() < account.nonce {
            return Err(too_low);
        }
        let Some(old) = self.pending.by_nonce(&tx.sender, tx.nonce()) else { return Err(too_low) };
        check_replacement(&old.tx, &tx.tx, self.limits.future.price_bump)?;
        self.book.replace(tx.sender, tx.nonce(), max_cost(&tx.tx), account)?;
        if self.tails.get(&tx.sender).is_some_and(|t| t.nonce == tx.nonce()) {
            self.tails.set(tail_of(tx));
        }
        self.pending.insert(tx.clone());
        self.cache.insert(tx);
        Ok(Admitted::Replaced { old: old.hash })
    }

    /// A full pool: evicts the cheapest tails of other senders that `tx`
    /// outbids until it fits, and takes its room; else geth's
    /// `transaction underpriced` (it pays less than the cheapest) or `txpool
    /// is full` (it pays the same, or nothing evictable is left).
    ///
    /// Evicted transactions leave the in-flight index, the book and the
    /// pool's count here, at once, so the newcomer's room is exact; their
    /// shards drop them when the outbox is delivered.
    pub(super) fn make_room(&mut self, tx: &RecoveredTx, out: &mut Outbox) -> Result<(), TxError> {
        let counters = &self.counters;
        let (count, bytes, need) = (counters.len(), counters.bytes(), tx.raw.len() as u64);
        let freed = |n: usize, b: usize| {
            count.saturating_sub(n as u64).saturating_add(1) <= counters.max_txs()
                && bytes.saturating_sub(b as u64).saturating_add(need) <= counters.max_bytes()
        };
        let (book, pending) = (&self.book, &self.pending);
        let live =
            |t: &Tail| book.next_nonce(&t.sender) == t.nonce.checked_add(1) && pending.contains(&t.hash);
        let victims = self
            .tails
            .candidates(&tx.sender, Price::of(&tx.tx), super::MAX_EVICTION_VISITS, live, freed)
            .map_err(|no| match no {
                NoRoom::Underpriced => TxError::Underpriced,
                NoRoom::Full => TxError::TxPoolFull,
            })?;
        for victim in victims {
            self.evict(victim, out);
        }
        if self.counters.try_acquire(tx.raw.len()).is_err() {
            // Only a restore racing in can take the room freed: the pool
            // may pass its bound by this one for a moment, as a restore's.
            self.counters.force_acquire(1, tx.raw.len());
        }
        Ok(())
    }

    /// Gives up an in-flight tail for a better-paying newcomer: the
    /// sender's reservation rolls back by one (it may send that nonce
    /// again), and the transaction is staged for eviction from its shard.
    fn evict(&mut self, victim: Tail, out: &mut Outbox) {
        let Some(tx) = self.pending.get(&victim.hash) else { return };
        self.book.unreserve(&victim.sender, victim.nonce);
        self.pending.remove(&victim.hash);
        self.counters.release(1, tx.raw.len());
        self.retail(&victim.sender);
        out.dropped.push(Dropped { txs: vec![tx.clone()], why: DropWhy::Evicted });
        let shard = Self::shard_of(&tx.sender, self.limits.shards);
        out.evict[shard].push(tx);
    }

    /// Re-indexes every sender's tail from the book and the in-flight
    /// index (after a rebuild).
    pub(super) fn retail_all(&mut self) {
        self.tails.clear();
        let mut last: HashMap<Address, RecoveredTx> = HashMap::new();
        for tx in self.pending.snapshot() {
            match last.get(&tx.sender) {
                Some(seen) if seen.nonce() >= tx.nonce() => {}
                _ => drop(last.insert(tx.sender, tx)),
            }
        }
        for (sender, tx) in last {
            if self.book.next_nonce(&sender) == tx.nonce().checked_add(1) {
                self.tails.set(tail_of(&tx));
            }
        }
    }

    /// Re-indexes `sender`'s tail: its in-flight transaction just below
    /// the book's next nonce, or none.
    pub(super) fn retail(&mut self, sender: &Address) {
        let last = self.book.next_nonce(sender).and_then(|n| n.checked_sub(1));
        match last.and_then(|n| self.pending.by_nonce(sender, n)) {
            Some(tx) => self.tails.set(tail_of(&tx)),
            None => drop(self.tails.remove(sender)),
        }
    }
}
