//! Nonce reservations: the serialized section of admission, as plain Rust.
//!
//! [`Reservations`] owns every sender's next nonce ([`NonceBook`]), each
//! sender's last in-flight transaction by price ([`Tails`]), the
//! transactions held for a nonce gap ([`FutureQueue`]) and the admission
//! numbering. The nonce actor drives it: its methods stage what must
//! happen in an [`Outbox`] (transactions for shards, replacements,
//! evictions, transactions to publish, held ones dropped) or return it,
//! and the actor delivers, logs and counts. Keeping the engine free of
//! mailboxes is what lets its rules be tested without a runtime.
//!
//! The rules, as geth's: a transaction is reserved only if its nonce is
//! the sender's next one (gapless), its sender can pay its maximum cost on
//! top of those of its in-flight transactions (the overdraft rule), and
//! the pool has room, or a full pool gives it room by evicting cheaper
//! senders' tails. A higher nonce is held and admitted once the gap fills;
//! a nonce still in flight replaces that transaction with the price bump;
//! a delegated (EIP-7702) sender gets one transaction in flight.

use std::{collections::HashMap, sync::Arc, time::Instant};

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::RecoveredTx;
use sluice_state::{Account, StoreError, EMPTY_CODE_HASH};

use crate::{
    check_funds, max_cost, Committed, FutureLimits, FutureQueue, NonceBook, PendingTxs, PoolCounters, Pooled,
    PreparedTxCache, Price, Tail, Tails, TxError, RESTORED_SEQ_LIMIT,
};

/// How many senders' tails a full pool looks at to make room for one
/// newcomer: bounds the serialized work an admission can cause (a large
/// newcomer in a pool full of small transactions may need many).
pub const MAX_EVICTION_VISITS: usize = 256;

/// The committed state reservations read: an account again when the one
/// admission read may be stale, a sender's nonce when a held transaction
/// may be promoted, every in-flight sender's nonce on a rebuild. A trait,
/// so this crate needs no store and its tests no disk.
pub trait CommittedState {
    /// The highest committed height.
    fn head(&self) -> u64;
    /// The committed account at `address`, `None` if it does not exist.
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError>;
    /// Committed code by its hash, to tell a delegation.
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError>;
}

/// Whether `code` is an EIP-7702 delegation designator: `0xef0100` and a
/// 20-byte address.
pub fn is_delegation(code: &[u8]) -> bool {
    code.len() == 23 && code.starts_with(&[0xef, 0x01, 0x00])
}

/// A sender's committed account as admission read it, before reservation.
#[derive(Debug, Clone, Copy)]
pub struct CommittedAccount {
    /// Committed height the values were read at.
    pub height: u64,
    /// Committed nonce.
    pub nonce: u64,
    /// Committed balance.
    pub balance: U256,
    /// The committed code is an EIP-7702 delegation designator: the sender
    /// gets one transaction in flight at a time (geth's rule).
    pub delegated: bool,
}

/// The bounds reservations apply.
#[derive(Debug, Clone, Copy)]
pub struct ReservationLimits {
    /// How many mempool shards reserved transactions are split over.
    pub shards: usize,
    /// Per-sender in-flight limit.
    pub max_txs_per_sender: u32,
    /// Bounds of the held queue, and the replacement price bump.
    pub future: FutureLimits,
}

/// How an admission ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Reserved and counted in the pool: stage it for its shard.
    Reserved,
    /// Held for a nonce gap.
    Held,
    /// Replaces the in-flight transaction `old` in its shard.
    Replaced {
        /// The replaced transaction's hash.
        old: B256,
    },
}

/// Why transactions left without reaching a block, for the caller to log
/// and count (never silently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropWhy {
    /// Held ones pushed out of the full held queue: their sender held the
    /// most.
    HeldQueueFull,
    /// Held ones whose nonce another transaction took.
    NonceTaken,
    /// A held one refused on promotion, with the refusal's message.
    Refused(String),
    /// In-flight tails evicted from a full pool by a better-paying one.
    Evicted,
}

/// Transactions dropped together, and why.
#[derive(Debug, Clone)]
pub struct Dropped {
    /// The transactions (possibly none: the caller still counts zero).
    pub txs: Vec<RecoveredTx>,
    /// Why.
    pub why: DropWhy,
}

/// What reservations staged for the caller to carry out: per shard, in
/// order, the reserved transactions (with the batch places of those an
/// admission waits for), replacements and evictions; plus what the held
/// queue let into the pool (to publish) and what was dropped (to report).
#[derive(Debug, Default)]
pub struct Outbox {
    /// Reserved transactions per shard, numbered.
    pub txs: Vec<Vec<Pooled>>,
    /// Per shard, the batch places of its staged transactions a client
    /// waits for.
    pub slots: Vec<Vec<usize>>,
    /// Staged transactions promoted from the held queue (no client waits).
    pub promoted: Vec<B256>,
    /// Same-nonce replacements per shard: the replaced hash and the new
    /// transaction, sent after the shard's inserts.
    pub replace: Vec<Vec<(B256, RecoveredTx)>>,
    /// In-flight tails a full pool gave up, per shard, sent after the
    /// shard's inserts and replacements (one of them may be among those).
    pub evict: Vec<Vec<RecoveredTx>>,
    /// Transactions promoted from the held queue into the mempool, in
    /// order, to publish to pending-transaction subscribers (the caller
    /// publishes those it admitted itself: it holds them already).
    pub admitted: Vec<RecoveredTx>,
    /// Transactions dropped meanwhile.
    pub dropped: Vec<Dropped>,
}

impl Outbox {
    /// An empty outbox for `shards` shards.
    pub fn new(shards: usize) -> Self {
        Outbox {
            txs: vec![Vec::new(); shards],
            slots: vec![Vec::new(); shards],
            promoted: Vec::new(),
            replace: vec![Vec::new(); shards],
            evict: vec![Vec::new(); shards],
            admitted: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// What [`Reservations::unstage`] took back.
#[derive(Debug, Default)]
pub struct Unstaged {
    /// Promoted from the held queue: no one waits for them, so they are
    /// reported as dropped.
    pub promoted: Vec<RecoveredTx>,
    /// Their clients were answered with an error (they may resend).
    pub answered: Vec<B256>,
}

/// The reservation engine: the book, tails, held queue and numbering, with
/// shared handles on the in-flight index, the pool's count and the
/// prepared-transaction cache (filled on reservation).
pub struct Reservations {
    book: NonceBook,
    tails: Tails,
    future: FutureQueue,
    pending: Arc<PendingTxs>,
    counters: Arc<PoolCounters>,
    cache: Arc<PreparedTxCache>,
    limits: ReservationLimits,
    /// Highest committed height seen through block progress.
    seen_height: u64,
    /// After a rebuild: progress of blocks at or below this height is
    /// already in the rebuilt book (their transactions had left the
    /// in-flight index), so it is not applied twice.
    rebuilt_through: u64,
    /// The next admission number: transactions are numbered as they enter
    /// the shards, so a block can keep arrival order across senders.
    next_seq: u64,
}

impl Reservations {
    /// An empty engine; `seen_height` is the committed height at start.
    pub fn new(
        pending: Arc<PendingTxs>,
        counters: Arc<PoolCounters>,
        cache: Arc<PreparedTxCache>,
        limits: ReservationLimits,
        seen_height: u64,
    ) -> Self {
        Reservations {
            book: NonceBook::new(),
            tails: Tails::default(),
            future: FutureQueue::new(),
            pending,
            counters,
            cache,
            limits,
            seen_height,
            rebuilt_through: 0,
            next_seq: RESTORED_SEQ_LIMIT,
        }
    }

    /// The shard that holds all of `sender`'s transactions.
    pub fn shard_of(sender: &Address, shards: usize) -> usize {
        // Addresses are keccak output: any byte is uniform.
        sender[19] as usize % shards
    }

    /// An empty outbox for this engine's shards.
    pub fn outbox(&self) -> Outbox {
        Outbox::new(self.limits.shards)
    }

    /// `sender`'s next nonce, if it has a reservation.
    pub fn next_nonce(&self, sender: &Address) -> Option<u64> {
        self.book.next_nonce(sender)
    }

    /// Senders with reservations.
    pub fn senders(&self) -> usize {
        self.book.len()
    }

    /// How many transactions are held for a nonce gap.
    pub fn held(&self) -> usize {
        self.future.len()
    }

    /// The transactions held for a nonce gap.
    pub fn held_txs(&self) -> impl Iterator<Item = &RecoveredTx> {
        self.future.iter()
    }

    /// The cheapest tail's price: admission's early refusal in a full pool
    /// reads it.
    pub fn floor(&self) -> Option<Price> {
        self.tails.floor()
    }

    /// Checks and reserves `tx`; on [`Admitted::Reserved`] it is counted in
    /// the pool and in flight and must be staged ([`Self::stage`]), on
    /// [`Admitted::Replaced`] staged as a replacement; either way it has
    /// entered the mempool, for the caller to publish. [`Admitted::Held`]
    /// waits for its nonce gap. `committed` is admission's read, redone if
    /// a block committed since.
    pub fn admit(
        &mut self,
        state: &impl CommittedState,
        tx: &RecoveredTx,
        committed: CommittedAccount,
        hold_gaps: bool,
        out: &mut Outbox,
    ) -> Result<Admitted, TxError> {
        if self.pending.contains(&tx.hash) || self.future.contains(&tx.sender, tx.nonce(), &tx.hash) {
            return Err(TxError::AlreadyKnown);
        }
        let committed = self.fresh_account(state, committed, &tx.sender);
        // The transaction alone first, for geth's plainer message; then the
        // book adds what the sender's in-flight transactions may spend.
        check_funds(tx, committed.balance)?;
        if committed.delegated {
            self.check_delegated(tx, committed.nonce)?;
        }
        let account = Committed { nonce: committed.nonce, balance: committed.balance };
        let reserved = self.book.reserve(
            tx.sender,
            tx.nonce(),
            max_cost(&tx.tx),
            account,
            self.limits.max_txs_per_sender,
        );
        match reserved {
            Err(TxError::NonceTooHigh { .. }) if hold_gaps && self.limits.future.per_sender > 0 => {
                let evicted = self.future.hold(tx.clone(), &self.limits.future, Instant::now())?;
                out.dropped.push(Dropped { txs: evicted.into_iter().collect(), why: DropWhy::HeldQueueFull });
                return Ok(Admitted::Held);
            }
            Err(too_low @ TxError::NonceTooLow { .. }) => return self.replace(tx, account, too_low),
            reserved => reserved?,
        }
        if self.counters.try_acquire(tx.raw.len()).is_err() {
            if let Err(e) = self.make_room(tx, out) {
                self.book.unreserve(&tx.sender, tx.nonce());
                return Err(e);
            }
        }
        self.tails.set(tail_of(tx));
        self.pending.insert(tx.clone());
        self.cache.insert(tx);
        Ok(Admitted::Reserved)
    }

    /// Numbers a reserved transaction and stages it for its shard; `slot`
    /// is its place in the batch being answered (`None`: a promoted one
    /// nobody waits for).
    pub fn stage(&mut self, tx: RecoveredTx, slot: Option<usize>, out: &mut Outbox) {
        let shard = Self::shard_of(&tx.sender, self.limits.shards);
        let seq = self.next_seq;
        self.next_seq += 1;
        if slot.is_none() {
            out.promoted.push(tx.hash);
        }
        out.txs[shard].push(Pooled { tx, seq });
        out.slots[shard].extend(slot);
    }

    /// Stages a replacement ([`Admitted::Replaced`]) for its shard.
    pub fn stage_replacement(&self, old: B256, tx: RecoveredTx, out: &mut Outbox) {
        let shard = Self::shard_of(&tx.sender, self.limits.shards);
        out.replace[shard].push((old, tx));
    }

    /// Admits what was held for `sender` now that its gap may have filled
    /// (its next nonce is the book's, or the committed one), in nonce
    /// order; drops what can no longer apply.
    pub fn promote(&mut self, state: &impl CommittedState, sender: &Address, out: &mut Outbox) {
        if self.future.is_empty() {
            return;
        }
        loop {
            let next = match self.book.next_nonce(sender) {
                Some(next) => next,
                None => state.account(sender).ok().flatten().map_or(0, |a| a.nonce),
            };
            let stale = self.future.stale(sender, next);
            out.dropped.push(Dropped { txs: stale, why: DropWhy::NonceTaken });
            let Some(tx) = self.future.promote(sender, next) else { break };
            let height = state.head();
            let account = state.account(sender).ok().flatten().unwrap_or_default();
            let delegated = delegated(state, &account.code_hash).unwrap_or(true);
            let committed =
                CommittedAccount { height, nonce: account.nonce, balance: account.balance, delegated };
            match self.admit(state, &tx, committed, true, out) {
                Ok(Admitted::Reserved) => {
                    out.admitted.push(tx.clone());
                    self.stage(tx, None, out);
                }
                // Unreachable: a promoted nonce is the next one, never below.
                Ok(Admitted::Held | Admitted::Replaced { .. }) => break,
                Err(e) => {
                    out.dropped.push(Dropped { txs: vec![tx], why: DropWhy::Refused(e.to_string()) });
                    break;
                }
            }
        }
    }

    /// A block at `height` executed: each `(sender, count, nonce)` had
    /// `count` of its in-flight transactions included and has `nonce`
    /// next. Frees their costs (unless a rebuild already left them out)
    /// and promotes what the block let through.
    pub fn executed(
        &mut self,
        state: &impl CommittedState,
        height: u64,
        senders: &[(Address, u32, u64)],
        out: &mut Outbox,
    ) {
        if height > self.rebuilt_through {
            for (sender, count, nonce) in senders {
                self.book.executed(sender, *count, *nonce);
            }
        }
        for (sender, _, _) in senders {
            if self.book.next_nonce(sender).is_none() {
                self.tails.remove(sender);
            }
        }
        // A block may have filled a held transaction's gap (or taken its
        // nonce).
        for (sender, _, _) in senders {
            self.promote(state, sender, out);
        }
        self.seen_height = self.seen_height.max(height);
    }

    /// A reserved transaction of `sender` at `nonce` was dropped before a
    /// block: the latest reservation rolls back exactly; an older one
    /// dooms the sender's later transactions, and the book resyncs when
    /// they are skipped. Either way its cost goes.
    pub fn dropped(&mut self, sender: &Address, nonce: u64) {
        self.book.dropped(sender, nonce);
        self.retail(sender);
    }

    /// Drops what waited for its gap past the lifetime, returning it.
    pub fn expire(&mut self, now: Instant) -> Vec<RecoveredTx> {
        self.future.expire(&self.limits.future, now)
    }

    /// Drops everything held (no gap can fill on a halted node), returning
    /// it.
    pub fn drain_held(&mut self) -> Vec<RecoveredTx> {
        self.future.drain()
    }

    /// Takes back what a panic left staged but never sent: it leaves the
    /// in-flight index and the pool's count (the book is rebuilt from that
    /// index next), so nothing stays "already known" or holds a nonce
    /// without being on its way to a block.
    pub fn unstage(&mut self, out: Outbox) -> Unstaged {
        // A replacement holds no capacity: only the index forgets it (its
        // client was answered with an error).
        for (_, tx) in out.replace.into_iter().flatten() {
            self.pending.remove(&tx.hash);
        }
        // An eviction never sent leaves its transaction queued: it is in
        // flight again, counted again.
        for tx in out.evict.into_iter().flatten() {
            self.counters.force_acquire(1, tx.raw.len());
            self.pending.insert(tx);
        }
        let mut unstaged = Unstaged::default();
        for tx in out.txs.into_iter().flatten().map(|p| p.tx) {
            self.pending.remove(&tx.hash);
            self.counters.release(1, tx.raw.len());
            if out.promoted.contains(&tx.hash) {
                unstaged.promoted.push(tx);
            } else {
                unstaged.answered.push(tx.hash);
            }
        }
        unstaged
    }

    /// Rebuilds the book (after a contained panic): each sender's
    /// in-flight transactions (the in-flight index) on top of its
    /// committed nonce, with their maximum costs, so the overdraft rule
    /// still holds. Returns the senders rebuilt and the height read.
    pub fn rebuild(&mut self, state: &impl CommittedState) -> (usize, u64) {
        let in_flight = self.pending.senders_nonces_and_costs();
        // Read after the snapshot: a block committed before this read either
        // had its transactions removed from the snapshot (its progress must
        // be ignored) or is about to (ignoring it over-counts in-flight
        // transactions, which only ever errs towards refusing, never towards
        // a duplicate nonce). A later block's progress applies as usual.
        let head = state.head();
        let mut by_sender: HashMap<Address, (u64, Vec<_>)> = HashMap::new();
        for (sender, nonce, cost) in in_flight {
            let e = by_sender.entry(sender).or_insert((0, Vec::new()));
            e.0 = e.0.max(nonce.saturating_add(1));
            e.1.push((nonce, cost));
        }
        let mut book = NonceBook::new();
        for (sender, (after_max, costs)) in by_sender {
            let committed = state.account(&sender).ok().flatten().map_or(0, |a| a.nonce);
            // Costs below the committed nonce are already in the balance:
            // the book leaves them out of each check until their block's
            // progress removes them.
            book.restore(sender, committed.max(after_max), costs);
        }
        let senders = book.len();
        self.book = book;
        self.retail_all();
        self.rebuilt_through = head;
        self.seen_height = self.seen_height.max(head);
        (senders, head)
    }
}

/// `sender`'s tail entry for `tx`, its newest in-flight transaction.
fn tail_of(tx: &RecoveredTx) -> Tail {
    Tail {
        sender: tx.sender,
        nonce: tx.nonce(),
        hash: tx.hash,
        price: Price::of(&tx.tx),
        bytes: tx.raw.len(),
    }
}

/// Whether the code with this hash is an EIP-7702 delegation; `None` when
/// the code cannot be read. No read for a sender without code.
fn delegated(state: &impl CommittedState, code_hash: &B256) -> Option<bool> {
    if *code_hash == EMPTY_CODE_HASH {
        return Some(false);
    }
    state.code(code_hash).ok().map(|code| is_delegation(&code))
}

#[path = "reservations_rules.rs"]
mod rules;

#[cfg(test)]
#[path = "reservations_tests.rs"]
mod tests;
