//! Nonce reservation: the serialized section of admission.
//!
//! Owns every sender's next nonce ([`NonceBook`]). A transaction is admitted
//! only if its nonce is the sender's next one (gapless), its sender can pay
//! its maximum cost on top of those of its in-flight transactions (geth's
//! overdraft rule), and the mempool has room; it then goes to its sender's
//! shard. One whose nonce is higher is held ([`FutureQueue`], bounded like
//! geth's queue) and admitted the same way once the gap fills: after the
//! reservation before it, or a block that moved the sender's nonce. One
//! whose nonce is still in flight replaces that transaction in its shard
//! if it pays geth's price bump (`mempool.price_bump_percent`), and a
//! delegated (EIP-7702) sender gets one transaction in flight, as geth. Everything expensive (decoding, sender recovery, reading the
//! committed account) happens before a message reaches this actor, so the
//! serialized part is a few hash-map operations.
//!
//! The committed account is read by admission outside this actor. If a
//! block committed since that read (this actor has seen a newer height), the
//! read may be stale and is redone here before reserving: the book has
//! already dropped that block's in-flight costs, which a stale balance would
//! not reflect yet. A read newer than what the book knows is fine: the book
//! leaves out the costs below the read's nonce (see `sluice_txpool::nonce`).
//!
//! A panic while handling a message is contained: the book is rebuilt from
//! the committed nonces plus the in-flight transactions ([`PendingTxs`]),
//! and an `Admit` that panicked is answered with an error (never retried: a
//! transaction that makes reservation panic must not be able to loop it).

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use sluice_txpool::{
    check_funds, check_replacement, max_cost, Committed, FutureLimits, FutureQueue, NoRoom, NonceBook,
    PoolCounters, Pooled, PreparedTxCache, Price, Tail, Tails, TxError,
};

use sluice_store::{ChainEvents, StateReader, Store};
use sluice_txpool::PendingTxs;

use crate::{
    faults::{self, Action, Site},
    mailbox::{MailboxReceiver, MailboxSender, SendError},
    metrics::{self as m, ActorMetrics},
    protocol::{AdmitTx, CommittedAccount, NonceMsg, ProducerMsg, ShardMsg},
    supervise::{contain, Supervisor},
};

/// How often held transactions are checked against their lifetime and a
/// halt.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// How many senders' tails a full pool looks at to make room for one
/// newcomer: bounds the serialized work an admission can cause (a large
/// newcomer in a pool full of small transactions may need many).
const MAX_EVICTION_VISITS: usize = 256;

/// The nonce reservation actor.
pub struct NonceActor {
    book: NonceBook,
    /// Each sender's last in-flight transaction by price: what a full pool
    /// evicts for a better-paying newcomer.
    tails: Tails,
    store: Arc<Store>,
    counters: Arc<PoolCounters>,
    pending: Arc<PendingTxs>,
    cache: Arc<PreparedTxCache>,
    shards: Vec<MailboxSender<ShardMsg>>,
    producer: MailboxSender<ProducerMsg>,
    max_txs_per_sender: u32,
    max_block_txs: u64,
    /// Held for a nonce gap, and its bounds.
    future: FutureQueue,
    events: ChainEvents,
    future_limits: FutureLimits,
    /// Highest committed height reported by store commit.
    seen_height: u64,
    rx: Option<MailboxReceiver<NonceMsg>>,
    metrics: ActorMetrics,
    sup: Supervisor,
    /// After a rebuild: progress of blocks at or below this height is
    /// already in the rebuilt book (their transactions had left the
    /// in-flight index), so it is not applied twice.
    rebuilt_through: u64,
    /// An injected stall: no message is handled before this.
    stall_until: Option<Instant>,
    /// The next admission number: transactions are numbered as they enter
    /// the shards, so a block can keep arrival order across senders.
    next_seq: u64,
    /// Validator mode: where this node's clients' transactions queue for
    /// the other validators.
    peers: Option<flume::Sender<alloy_primitives::Bytes>>,
}

/// Everything the nonce actor is built from.
pub struct NonceDeps {
    /// Committed state, for re-reading stale accounts.
    pub store: Arc<Store>,
    /// Mempool capacity.
    pub counters: Arc<PoolCounters>,
    /// In-flight transactions by hash.
    pub pending: Arc<PendingTxs>,
    /// Prepared-transaction cache, filled on admission.
    pub cache: Arc<PreparedTxCache>,
    /// Mempool shards' mailboxes.
    pub shards: Vec<MailboxSender<ShardMsg>>,
    /// The producer's mailbox, to wake it when a block is full.
    pub producer: MailboxSender<ProducerMsg>,
    /// Per-sender in-flight limit.
    pub max_txs_per_sender: u32,
    /// Transactions that make a full block.
    pub max_block_txs: u64,
    /// Bounds of the transactions held for a nonce gap.
    pub future: FutureLimits,
    /// Where transactions entering the mempool are published (pending
    /// filters and subscriptions).
    pub events: ChainEvents,
    /// Validator mode: the bounded queue of transactions this node's own
    /// clients sent, for the other validators.
    pub peers: Option<flume::Sender<alloy_primitives::Bytes>>,
}

impl NonceActor {
    /// Builds the actor around its mailbox.
    pub fn new(deps: NonceDeps, rx: MailboxReceiver<NonceMsg>) -> Self {
        let seen_height = deps.store.head();
        NonceActor {
            book: NonceBook::new(),
            tails: Tails::default(),
            store: deps.store,
            counters: deps.counters,
            pending: deps.pending,
            cache: deps.cache,
            shards: deps.shards,
            producer: deps.producer,
            max_txs_per_sender: deps.max_txs_per_sender,
            max_block_txs: deps.max_block_txs,
            future: FutureQueue::new(),
            events: deps.events,
            future_limits: deps.future,
            seen_height,
            rx: Some(rx),
            metrics: ActorMetrics::new("nonce"),
            sup: Supervisor::new(Site::Nonce),
            rebuilt_through: 0,
            stall_until: None,
            next_seq: sluice_txpool::RESTORED_SEQ_LIMIT,
            peers: deps.peers,
        }
    }

    /// Rebuilds the book after a contained panic: each sender's in-flight
    /// transactions (the in-flight index) on top of its committed nonce,
    /// with their maximum costs, so the overdraft rule still holds.
    fn rebuild(&mut self) {
        let in_flight = self.pending.senders_nonces_and_costs();
        // Read after the snapshot: a block committed before this read either
        // had its transactions removed from the snapshot (its progress must
        // be ignored) or is about to (ignoring it over-counts in-flight
        // transactions, which only ever errs towards refusing, never towards
        // a duplicate nonce). A later block's progress applies as usual.
        let head = self.store.head();
        let mut by_sender: HashMap<alloy_primitives::Address, (u64, Vec<_>)> = HashMap::new();
        for (sender, nonce, cost) in in_flight {
            let e = by_sender.entry(sender).or_insert((0, Vec::new()));
            e.0 = e.0.max(nonce.saturating_add(1));
            e.1.push((nonce, cost));
        }
        let mut book = NonceBook::new();
        for (sender, (after_max, costs)) in by_sender {
            let committed = self.store.account(&sender).ok().flatten().map_or(0, |a| a.nonce);
            // Costs below the committed nonce are already in the balance:
            // the book leaves them out of each check until their block's
            // progress removes them.
            book.restore(sender, committed.max(after_max), costs);
        }
        tracing::warn!(
            senders = book.len(),
            height = head,
            "nonce book rebuilt from the store and the in-flight index"
        );
        self.book = book;
        self.retail_all();
        self.rebuilt_through = head;
        self.seen_height = self.seen_height.max(head);
    }

    /// Re-indexes every sender's tail from the book and the in-flight
    /// index (after a rebuild).
    fn retail_all(&mut self) {
        self.tails.clear();
        let mut last: HashMap<alloy_primitives::Address, sluice_messages::RecoveredTx> = HashMap::new();
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
    fn retail(&mut self, sender: &alloy_primitives::Address) {
        let last = self.book.next_nonce(sender).and_then(|n| n.checked_sub(1));
        match last.and_then(|n| self.pending.by_nonce(sender, n)) {
            Some(tx) => self.tails.set(tail_of(&tx)),
            None => drop(self.tails.remove(sender)),
        }
    }

    /// The shard that holds all of `sender`'s transactions.
    pub fn shard_of(sender: &alloy_primitives::Address, shards: usize) -> usize {
        // Addresses are keccak output: any byte is uniform.
        sender[19] as usize % shards
    }

    fn fresh_account(
        &self,
        committed: CommittedAccount,
        sender: &alloy_primitives::Address,
    ) -> CommittedAccount {
        if committed.height >= self.seen_height {
            return committed;
        }
        let height = self.store.head();
        match self.store.account(sender) {
            Ok(acct) => {
                let acct = acct.unwrap_or_default();
                let delegated = self.delegated(&acct.code_hash).unwrap_or(committed.delegated);
                CommittedAccount { height, nonce: acct.nonce, balance: acct.balance, delegated }
            }
            // The in-memory store cannot fail a read; a durable one that does
            // leaves the admission read in place, which is at worst stale.
            Err(_) => committed,
        }
    }

    /// Whether the code with this hash is an EIP-7702 delegation; `None`
    /// when the code cannot be read. No read for a sender without code.
    fn delegated(&self, code_hash: &alloy_primitives::B256) -> Option<bool> {
        if *code_hash == sluice_store::EMPTY_CODE_HASH {
            return Some(false);
        }
        self.store.code(code_hash).ok().map(|code| crate::admission::is_delegation(&code))
    }

    /// geth's rule for a delegated sender (its code can drain the balance
    /// whenever another transaction calls it, so what admission counted
    /// in flight proves nothing): its next nonce only when nothing of it is
    /// in flight, or a replacement of what is. A lower nonce is left to the
    /// replacement rule.
    fn check_delegated(
        &self,
        tx: &sluice_messages::RecoveredTx,
        committed_nonce: u64,
    ) -> Result<(), TxError> {
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

    /// Checks and reserves; on `Reserved` the transaction is counted in the
    /// pool and must be forwarded; `Held` waits for its nonce gap.
    fn admit(
        &mut self,
        tx: &sluice_messages::RecoveredTx,
        committed: CommittedAccount,
        hold_gaps: bool,
        out: &mut Outbox,
    ) -> Result<Admitted, TxError> {
        if self.pending.contains(&tx.hash) || self.future.contains(&tx.sender, tx.nonce(), &tx.hash) {
            return Err(TxError::AlreadyKnown);
        }
        let committed = self.fresh_account(committed, &tx.sender);
        // The transaction alone first, for geth's plainer message; then the
        // book adds what the sender's in-flight transactions may spend.
        check_funds(tx, committed.balance)?;
        if committed.delegated {
            self.check_delegated(tx, committed.nonce)?;
        }
        let account = Committed { nonce: committed.nonce, balance: committed.balance };
        match self.book.reserve(tx.sender, tx.nonce(), max_cost(&tx.tx), account, self.max_txs_per_sender) {
            Err(TxError::NonceTooHigh { .. }) if hold_gaps && self.future_limits.per_sender > 0 => {
                let evicted = self.future.hold(tx.clone(), &self.future_limits, Instant::now())?;
                report_future(
                    evicted.as_slice(),
                    m::DROP_FUTURE_EVICTED,
                    "evicted from the full held queue: its sender held the most",
                );
                metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.future.len() as f64);
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
        self.events.admitted(tx);
        Ok(Admitted::Reserved)
    }

    /// A transaction whose nonce is below the sender's next one: a wallet's
    /// "speed up" or "cancel" of an in-flight transaction, as geth takes
    /// it. With geth's price bump over the in-flight one (still counted by
    /// the book, so not yet executed) it replaces it in its shard, else
    /// `replacement transaction underpriced`; with no in-flight
    /// transaction at that nonce, `too_low` stands.
    fn replace(
        &mut self,
        tx: &sluice_messages::RecoveredTx,
        account: Committed,
        too_low: TxError,
    ) -> Result<Admitted, TxError> {
        if tx.nonce() < account.nonce {
            return Err(too_low);
        }
        let Some(old) = self.pending.by_nonce(&tx.sender, tx.nonce()) else { return Err(too_low) };
        check_replacement(&old.tx, &tx.tx, self.future_limits.price_bump)?;
        self.book.replace(tx.sender, tx.nonce(), max_cost(&tx.tx), account)?;
        if self.tails.get(&tx.sender).is_some_and(|t| t.nonce == tx.nonce()) {
            self.tails.set(tail_of(tx));
        }
        self.pending.insert(tx.clone());
        self.cache.insert(tx);
        self.events.admitted(tx);
        Ok(Admitted::Replaced { old: old.hash })
    }

    /// A full pool: evicts the cheapest tails of other senders that `tx`
    /// outbids until it fits, and takes its room; else geth's
    /// `transaction underpriced` (it pays less than the cheapest) or `txpool
    /// is full` (it pays the same, or nothing evictable is left).
    ///
    /// Evicted transactions leave the in-flight index, the book and the
    /// pool's count here, at once, so the newcomer's room is exact; their
    /// shards drop them when the batch is flushed (see
    /// [`ShardMsg::Evict`]).
    fn make_room(&mut self, tx: &sluice_messages::RecoveredTx, out: &mut Outbox) -> Result<(), TxError> {
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
            .candidates(&tx.sender, Price::of(&tx.tx), MAX_EVICTION_VISITS, live, freed)
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
        tracing::warn!(tx = %tx.hash, sender = %tx.sender, nonce = tx.nonce(), "evicted from the full pool by a better-paying transaction");
        metrics::counter!(m::TXS_DROPPED, "reason" => m::DROP_EVICTED).increment(1);
        let shard = Self::shard_of(&tx.sender, self.shards.len());
        out.evict[shard].push(tx);
    }

    /// Admits what was held for `sender` now that its gap may have filled
    /// (its next nonce is the book's, or the committed one), in nonce
    /// order; drops and reports what can no longer apply.
    fn promote(&mut self, sender: &alloy_primitives::Address, out: &mut Outbox) {
        if self.future.is_empty() {
            return;
        }
        loop {
            let next = match self.book.next_nonce(sender) {
                Some(next) => next,
                None => self.store.account(sender).ok().flatten().map_or(0, |a| a.nonce),
            };
            let stale = self.future.stale(sender, next);
            report_future(&stale, m::DROP_FUTURE_REFUSED, "its nonce was taken by another transaction");
            let Some(tx) = self.future.promote(sender, next) else { break };
            let height = self.store.head();
            let account = self.store.account(sender).ok().flatten().unwrap_or_default();
            let delegated = self.delegated(&account.code_hash).unwrap_or(true);
            let committed =
                CommittedAccount { height, nonce: account.nonce, balance: account.balance, delegated };
            match self.admit(&tx, committed, true, out) {
                Ok(Admitted::Reserved) => self.stage(tx, None, out),
                // Unreachable: a promoted nonce is the next one, never below.
                Ok(Admitted::Held | Admitted::Replaced { .. }) => break,
                Err(e) => {
                    report_future(std::slice::from_ref(&tx), m::DROP_FUTURE_REFUSED, &e.to_string());
                    break;
                }
            }
        }
        metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.future.len() as f64);
    }

    /// On a halted node no gap can fill: every held transaction is dropped
    /// and reported as the in-flight ones are (`reason="halted"`); else
    /// the lifetime is applied.
    fn sweep(&mut self) {
        if self.future.is_empty() {
            return;
        }
        match self.store.halted() {
            Some(reason) => {
                let gone = self.future.drain();
                report_future(&gone, m::DROP_HALTED, &format!("the node halted: {reason}"));
                metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(0.0);
            }
            None => self.expire(),
        }
    }

    /// Drops and reports what waited for its gap past the lifetime.
    fn expire(&mut self) {
        if self.future.is_empty() {
            return;
        }
        let expired = self.future.expire(&self.future_limits, Instant::now());
        report_future(
            &expired,
            m::DROP_FUTURE_EXPIRED,
            "held for a nonce gap past mempool.future_tx_lifetime_ms",
        );
        metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.future.len() as f64);
    }
}

/// Where a batch's answers go: one per transaction, in order.
type Reply = tokio::sync::oneshot::Sender<Vec<Result<(), TxError>>>;

/// Reserved transactions on their way to the shards, per shard, in order,
/// with the batch places of those an admission waits for.
#[derive(Default)]
struct Outbox {
    txs: Vec<Vec<Pooled>>,
    slots: Vec<Vec<usize>>,
    /// Staged transactions promoted from the held queue (no client waits).
    promoted: Vec<alloy_primitives::B256>,
    /// Same-nonce replacements per shard: the replaced hash and the new
    /// transaction, sent after the shard's inserts.
    replace: Vec<Vec<(alloy_primitives::B256, sluice_messages::RecoveredTx)>>,
    /// In-flight tails a full pool gave up, per shard, sent after the
    /// shard's inserts and replacements (one of them may be among those).
    evict: Vec<Vec<sluice_messages::RecoveredTx>>,
}

impl Outbox {
    fn new(shards: usize) -> Self {
        Outbox {
            txs: vec![Vec::new(); shards],
            slots: vec![Vec::new(); shards],
            promoted: Vec::new(),
            replace: vec![Vec::new(); shards],
            evict: vec![Vec::new(); shards],
        }
    }
}

/// How an admission ended.
enum Admitted {
    /// Reserved: forward it to its shard.
    Reserved,
    /// Held for a nonce gap.
    Held,
    /// Replaces the in-flight transaction `old` in its shard.
    Replaced {
        /// The replaced transaction's hash.
        old: alloy_primitives::B256,
    },
}

/// `sender`'s tail entry for `tx`, its newest in-flight transaction.
fn tail_of(tx: &sluice_messages::RecoveredTx) -> Tail {
    Tail {
        sender: tx.sender,
        nonce: tx.nonce(),
        hash: tx.hash,
        price: Price::of(&tx.tx),
        bytes: tx.raw.len(),
    }
}

/// Logs and counts held transactions dropped (never silently).
fn report_future(txs: &[sluice_messages::RecoveredTx], reason: &'static str, why: &str) {
    for tx in txs {
        tracing::warn!(tx = %tx.hash, sender = %tx.sender, nonce = tx.nonce(), why, "held transaction dropped");
    }
    metrics::counter!(m::TXS_DROPPED, "reason" => reason).increment(txs.len() as u64);
}

impl Actor for NonceActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
        // Held transactions age out even when no block comes (an idle chain
        // with empty blocks off, a halted node), and a halt drops them all.
        ctx.run_interval(SWEEP_EVERY, |act, _| act.sweep());
    }
}

impl NonceActor {
    /// Handles an admission batch, in order: each transaction is refused,
    /// held for its gap, or reserved and staged for its shard (with what
    /// its reservation let through of the sender's held ones); then the
    /// staged transactions go to their shards, one message per shard, and
    /// `reply` is answered. `out` and `reply` belong to the caller, so a
    /// panic leaves them to it (`panic`: an injected one fires after the
    /// first reservation is staged).
    fn handle_admit(
        &mut self,
        txs: Vec<AdmitTx>,
        received: Instant,
        reply: &mut Option<Reply>,
        out: &mut Outbox,
        panic: bool,
        ctx: &mut Context<Self>,
    ) {
        let mut answers = Vec::with_capacity(txs.len());
        let reserve_seconds = metrics::histogram!(m::NONCE_RESERVE_SECONDS);
        for (slot, AdmitTx { tx, committed, hold_gaps, from_peer }) in txs.into_iter().enumerate() {
            let admitted = self.admit(&tx, committed, hold_gaps, out);
            if admitted.is_ok() && !from_peer {
                self.send_to_peers(&tx);
            }
            match admitted {
                Err(e) => answers.push(Err(e)),
                Ok(Admitted::Held) => answers.push(Ok(())),
                Ok(Admitted::Replaced { old }) => {
                    answers.push(Ok(()));
                    let shard = Self::shard_of(&tx.sender, self.shards.len());
                    out.replace[shard].push((old, tx));
                }
                Ok(Admitted::Reserved) => {
                    answers.push(Ok(()));
                    reserve_seconds.record(received.elapsed().as_secs_f64());
                    let sender = tx.sender;
                    self.stage(tx, Some(slot), out);
                    if panic {
                        // Injected where a real panic costs most: with a
                        // reservation made and staged, not yet sent.
                        panic!("injected panic at failpoint nonce");
                    }
                    self.promote(&sender, out);
                }
            }
        }
        if panic {
            panic!("injected panic at failpoint nonce");
        }
        self.flush(std::mem::take(out), answers, reply.take(), ctx);
    }

    /// After a panic: what was reserved and staged but never reached a
    /// shard leaves the in-flight index and the pool's count (the book is
    /// rebuilt from that index next), so nothing stays "already known" or
    /// holds a nonce without being on its way to a block. A client waiting
    /// on one was answered with an error (it may send it again); one
    /// promoted from the held queue had no one waiting, so it is reported
    /// as dropped.
    fn unstage(&mut self, out: Outbox) {
        // A replacement holds no capacity: only the index forgets it (its
        // client was answered with an error).
        for (_, tx) in out.replace.into_iter().flatten() {
            self.pending.remove(&tx.hash);
        }
        // An eviction never sent leaves its transaction queued: it is in
        // flight again, counted again (the book is rebuilt from the index
        // next).
        for tx in out.evict.into_iter().flatten() {
            self.counters.force_acquire(1, tx.raw.len());
            self.pending.insert(tx);
        }
        let mut promoted = Vec::new();
        for tx in out.txs.into_iter().flatten().map(|p| p.tx) {
            self.pending.remove(&tx.hash);
            self.counters.release(1, tx.raw.len());
            if out.promoted.contains(&tx.hash) {
                promoted.push(tx);
            } else {
                tracing::warn!(tx = %tx.hash, "admission answered with an error: nonce reservation restarted");
            }
        }
        report_future(
            &promoted,
            m::DROP_RESTARTED,
            "nonce reservation restarted before it reached the mempool",
        );
    }

    /// Validator mode: queues a transaction this node's own client sent
    /// for the other validators (held ones too: they hold it for the same
    /// gap). A full queue leaves it here only, counted.
    fn send_to_peers(&self, tx: &sluice_messages::RecoveredTx) {
        let Some(peers) = &self.peers else { return };
        if peers.try_send(tx.raw.clone()).is_err() {
            metrics::counter!(m::GOSSIP_UNSENT).increment(1);
        }
    }

    /// Numbers a reserved transaction and stages it for its shard; `slot`
    /// is its place in the batch being answered (`None`: a promoted one
    /// nobody waits for).
    fn stage(&mut self, tx: sluice_messages::RecoveredTx, slot: Option<usize>, out: &mut Outbox) {
        let shard = Self::shard_of(&tx.sender, self.shards.len());
        let seq = self.next_seq;
        self.next_seq += 1;
        if slot.is_none() {
            out.promoted.push(tx.hash);
        }
        out.txs[shard].push(Pooled { tx, seq });
        out.slots[shard].extend(slot);
    }

    /// Hands what was staged to the shards, one message each, waiting for
    /// room in a full one (and taking no other message meanwhile: the next
    /// batch must not overtake this one); then answers `reply`, an
    /// admission whose shard had stopped answered with an error.
    fn flush(
        &mut self,
        out: Outbox,
        mut answers: Vec<Result<(), TxError>>,
        reply: Option<Reply>,
        ctx: &mut Context<Self>,
    ) {
        let staged = out.txs.iter().any(|txs| !txs.is_empty());
        // Evictions never make a block fuller: only inserts wake the
        // producer.
        let pending = Arc::clone(&self.pending);
        // A closed shard (shutting down) never takes a replacement: only the
        // in-flight index held it.
        let lost = move |msg: ShardMsg| {
            if let ShardMsg::Replace { txs } = msg {
                txs.iter().for_each(|(_, tx)| pending.remove(&tx.hash));
            }
        };
        if staged && self.counters.len() >= self.max_block_txs {
            // A lost wake-up only delays the block to the next tick.
            let _ = self.producer.offer(ProducerMsg::Wake);
        }
        let stopped = || Err(TxError::Unavailable("mempool shard stopped"));
        let mut full = Vec::new();
        for ((((shard, txs), slots), replace), evict) in
            self.shards.iter().zip(out.txs).zip(out.slots).zip(out.replace).zip(out.evict)
        {
            let mut msgs = Vec::with_capacity(3);
            if !txs.is_empty() {
                msgs.push((ShardMsg::Insert { txs }, slots));
            }
            if !replace.is_empty() {
                msgs.push((ShardMsg::Replace { txs: replace }, Vec::new()));
            }
            if !evict.is_empty() {
                let txs = evict.iter().map(|tx| (tx.hash, tx.raw.len())).collect();
                msgs.push((ShardMsg::Evict { txs }, Vec::new()));
            }
            // Once one waits for room, the shard's later message waits
            // behind it: a replacement must not overtake its original.
            let mut waiting = false;
            for (msg, slots) in msgs {
                if waiting {
                    full.push((shard.clone(), msg, slots));
                    continue;
                }
                match shard.offer(msg) {
                    Ok(()) => {}
                    Err(SendError::Full(msg)) => {
                        waiting = true;
                        full.push((shard.clone(), msg, slots));
                    }
                    Err(SendError::Closed(msg)) => {
                        slots.iter().for_each(|&s| answers[s] = stopped());
                        lost(msg);
                    }
                }
            }
        }
        let answer = move |answers| {
            if let Some(reply) = reply {
                let _ = reply.send(answers);
            }
        };
        if full.is_empty() {
            return answer(answers);
        }
        // Backpressure: stop taking admissions until the shards have room.
        ctx.wait(
            async move {
                for (shard, msg, slots) in full {
                    if let Err(e) = shard.send(msg).await {
                        slots.iter().for_each(|&s| answers[s] = stopped());
                        lost(e.into_inner());
                    }
                }
                answer(answers);
            }
            .into_actor(self),
        );
    }

    /// Handles one message inside panic containment.
    fn process(&mut self, msg: NonceMsg, panic: bool, ctx: &mut Context<Self>) {
        let start = Instant::now();
        // The reply of an admission is kept outside the contained section,
        // so a panic still answers it.
        let mut admit_reply = None;
        // What is staged for the shards is kept outside too: a panic before
        // it is sent must not leave it reserved (see `unstage`).
        let mut out = Outbox::new(self.shards.len());
        let outcome = contain(|| match msg {
            NonceMsg::Admit { txs, received, reply } => {
                let n = txs.len();
                let (_, reply) = admit_reply.insert((n, Some(reply)));
                self.handle_admit(txs, received, reply, &mut out, panic, ctx);
            }
            NonceMsg::Executed { height, senders } => {
                if height > self.rebuilt_through {
                    for s in &senders {
                        self.book.executed(&s.address, s.count, s.nonce);
                    }
                }
                for s in &senders {
                    if self.book.next_nonce(&s.address).is_none() {
                        self.tails.remove(&s.address);
                    }
                }
                // A block may have filled a held transaction's gap (or
                // taken its nonce).
                for s in &senders {
                    self.promote(&s.address, &mut out);
                }
                self.flush(std::mem::take(&mut out), Vec::new(), None, ctx);
                self.expire();
                self.seen_height = self.seen_height.max(height);
                metrics::gauge!(m::NONCE_SENDERS).set(self.book.len() as f64);
            }
            NonceMsg::Dropped { address, nonce } => {
                // The latest reservation rolls back exactly; an older one
                // dooms the sender's later transactions, and the book
                // resyncs when they are skipped. Either way its cost goes.
                self.book.dropped(&address, nonce);
                self.retail(&address);
            }
            NonceMsg::Status { reply } => {
                let _ = reply.send((self.counters.len(), self.future.len() as u64));
            }
            NonceMsg::Queued { reply } => {
                let _ = reply.send(self.future.iter().cloned().collect());
            }
            NonceMsg::PendingNonce { address, reply } => {
                let _ = reply.send(self.book.next_nonce(&address));
            }
        });
        if let Err(panic) = outcome {
            if let Some((n, Some(reply))) = admit_reply {
                let restarted = || Err(TxError::Unavailable("internal error: nonce reservation restarted"));
                let _ = reply.send((0..n).map(|_| restarted()).collect());
            }
            self.unstage(out);
            self.sup.panicked(&panic);
            if let Err(p) = contain(|| self.rebuild()) {
                tracing::error!(panic = p, "rebuilding the nonce book panicked");
            }
        }
        // Admission's early refusal in a full pool reads it.
        self.counters.set_floor(self.tails.floor());
        self.metrics.handled(start);
    }
}

impl StreamHandler<NonceMsg> for NonceActor {
    fn handle(&mut self, msg: NonceMsg, ctx: &mut Context<Self>) {
        if let Some(until) = self.stall_until.take() {
            if until > Instant::now() {
                let wait = tokio::time::sleep_until(until.into());
                ctx.wait(wait.into_actor(self).map(move |_, act, ctx| act.handle(msg, ctx)));
                return;
            }
        }
        // Only admissions carry faults: progress and queries are how the
        // book stays right.
        let fault = match &msg {
            NonceMsg::Admit { .. } => faults::point(Site::Nonce).fire(),
            _ => None,
        };
        match (fault, msg) {
            (Some(Action::Delay(d)), msg) => {
                let wait = tokio::time::sleep(d);
                ctx.wait(wait.into_actor(self).map(move |_, act, ctx| act.process(msg, false, ctx)));
            }
            (Some(Action::Drop | Action::Error), NonceMsg::Admit { txs, reply, .. }) => {
                let why = if fault == Some(Action::Drop) {
                    "request dropped (injected fault at nonce)"
                } else {
                    "injected error at failpoint nonce"
                };
                let _ = reply.send(txs.iter().map(|_| Err(TxError::Unavailable(why))).collect());
            }
            (Some(Action::Stall(d)), msg) => {
                self.process(msg, false, ctx);
                self.stall_until = Some(Instant::now() + d);
            }
            (fault, msg) => self.process(msg, fault == Some(Action::Panic), ctx),
        }
    }
}
