//! A mempool shard: a FIFO of admitted transactions for the senders that
//! map to it, so each sender's transactions keep their order.
//!
//! Capacity is taken by the nonce actor before a transaction is forwarded
//! here and released when the producer takes it (and taken again when a
//! restore brings a failed proposal's transactions back), so the shard never
//! refuses an insert and the pool as a whole never exceeds its limits.
//!
//! A panic while handling a message is contained and the message retried:
//! the queue itself is the shard's state, and every operation on it happens
//! after the fault point, so it is intact. An injected `drop` of an insert
//! (or of a restore) loses the transactions for real; the loss is reported (log with its hash,
//! `sluice_txs_dropped_total`) and its reservation and capacity are given
//! back.

use std::{sync::Arc, time::Instant};

use actix::prelude::*;
use alloy_primitives::{map::B256Set, B256};
use sluice_messages::RecoveredTx;
use sluice_txpool::{MempoolShard, PoolCounters, Pooled, Taken};

use sluice_txpool::PendingTxs;

use crate::{
    faults::{self, Action, Site},
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    protocol::{NonceMsg, ShardMsg},
    stall::{self, Stall},
    supervise::{contain, AttemptError, Inject, Supervisor, Verdict},
};

/// One mempool shard actor.
pub struct ShardActor {
    index: usize,
    pool: MempoolShard,
    counters: Arc<PoolCounters>,
    rx: Option<MailboxReceiver<ShardMsg>>,
    metrics: ActorMetrics,
    depth: metrics::Gauge,
    sup: Supervisor,
    /// Where a lost transaction is forgotten and its reservation returned.
    lost: Option<(Arc<PendingTxs>, MailboxSender<NonceMsg>)>,
    /// An injected stall: no message is handled before it ends.
    stall: Stall,
}

impl ShardActor {
    /// Shard number `index` around its mailbox.
    pub fn new(index: usize, counters: Arc<PoolCounters>, rx: MailboxReceiver<ShardMsg>) -> Self {
        ShardActor {
            index,
            pool: MempoolShard::new(),
            counters,
            rx: Some(rx),
            metrics: ActorMetrics::new("mempool_shard"),
            depth: metrics::gauge!(m::MEMPOOL_SHARD_TXS, "shard" => index.to_string()),
            sup: Supervisor::new(Site::MempoolShard),
            lost: None,
            stall: Stall::default(),
        }
    }

    /// Lets the shard report a lost transaction: removed from the in-flight
    /// index, its nonce reservation returned to the nonce actor.
    pub fn with_loss_reporting(mut self, pending: Arc<PendingTxs>, nonce: MailboxSender<NonceMsg>) -> Self {
        self.lost = Some((pending, nonce));
        self
    }

    /// Gives up on an admitted transaction, saying why.
    fn lose(&mut self, tx: RecoveredTx, reason: &'static str) {
        self.counters.release(1, tx.raw.len());
        // Reported once: a halt's sweep of the in-flight index may have
        // reported it already.
        let first = self.lost.as_ref().is_none_or(|(pending, _)| pending.remove_sender(&tx.hash).is_some());
        if first {
            tracing::error!(shard = self.index, tx = %tx.hash, sender = %tx.sender, nonce = tx.nonce(), reason, "admitted transaction dropped");
            metrics::counter!(m::TXS_DROPPED, "reason" => reason).increment(1);
        }
        if let Some((_, nonce)) = &self.lost {
            // Never wait on the nonce actor (it waits on us); a missed
            // notice only leaves the sender's book to resync at execution.
            let _ = nonce.offer(NonceMsg::Dropped { address: tx.sender, nonce: tx.nonce() });
        }
    }

    /// Gives up on admitted transactions that never reached the queue.
    fn lose_all(&mut self, txs: Vec<Pooled>, reason: &'static str) {
        for Pooled { tx, .. } in txs {
            self.lose(tx, reason);
        }
    }

    /// Handles one message; a fault is struck first, so a panic or error
    /// leaves the message (and the queue) untouched for the retry.
    fn process(&mut self, slot: &mut Option<ShardMsg>, inject: Inject) -> Result<(), AttemptError> {
        inject.strike(Site::MempoolShard)?;
        match slot.take() {
            Some(ShardMsg::Insert { txs }) => {
                for Pooled { tx, seq } in txs {
                    if let Err(e) = self.pool.push(tx, seq) {
                        // Unreachable while capacity is taken before
                        // forwarding; logged rather than lost silently.
                        tracing::error!(shard = self.index, error = %e, "mempool shard refused an admitted transaction");
                    }
                }
            }
            Some(ShardMsg::Take { max_txs, gas_budget, max_bytes, exclude, reply }) => {
                self.take((max_txs, gas_budget, max_bytes), &exclude, reply);
            }
            Some(ShardMsg::Restore { txs }) => self.restore(txs),
            Some(ShardMsg::Replace { txs }) => self.replace(txs),
            Some(ShardMsg::Forget { hashes }) => self.forget(&hashes),
            Some(ShardMsg::Evict { txs }) => self.evict(&txs),
            None => {}
        }
        Ok(())
    }

    /// Handles `msg` under supervision: contained panics and errors are
    /// retried (each retry meets the failpoint again) until the supervisor
    /// halts the node, then the message is given up on and reported.
    fn supervised(&mut self, msg: ShardMsg, mut inject: Inject) {
        let mut slot = Some(msg);
        loop {
            let verdict = match contain(|| self.process(&mut slot, inject)) {
                Ok(Ok(())) => return,
                Ok(Err(e)) => self.sup.failed(&e.to_string()),
                Err(panic) => self.sup.panicked(&panic),
            };
            if verdict == Verdict::Halted {
                break;
            }
            inject = match faults::point(Site::MempoolShard).fire_shard(self.index) {
                Some(Action::Panic) => Inject::Panic,
                Some(Action::Error) => Inject::Error,
                _ => Inject::Nothing,
            };
        }
        match slot.take() {
            Some(ShardMsg::Insert { txs }) => self.lose_all(txs, m::DROP_HALTED),
            // Answered: nothing taken.
            Some(ShardMsg::Take { reply, .. }) => drop(reply.send(Vec::new())),
            Some(ShardMsg::Restore { txs }) => self.lose_restored(txs, m::DROP_HALTED),
            Some(ShardMsg::Replace { txs }) => self.lose_replacements(txs, m::DROP_HALTED),
            // Left queued: a later block finds them stale, as before.
            Some(ShardMsg::Forget { .. }) | None => {}
            // Left queued with nothing counting them: taken again.
            Some(ShardMsg::Evict { txs }) => {
                txs.iter().for_each(|(_, bytes)| self.counters.force_acquire(1, *bytes))
            }
        }
    }

    /// Puts transactions taken earlier back at the front, in order, and
    /// takes their capacity again: a take released it, so the count stays
    /// exact.
    fn restore(&mut self, txs: Vec<Pooled>) {
        let (n, bytes) = (txs.len(), txs.iter().map(|p| p.tx.raw.len()).sum());
        self.pool.restore_front(txs);
        self.counters.force_acquire(n, bytes);
    }

    /// Gives up on transactions that were coming back: their capacity is
    /// taken first, because losing one releases it.
    fn lose_restored(&mut self, txs: Vec<Pooled>, reason: &'static str) {
        for Pooled { tx, .. } in txs {
            self.counters.force_acquire(1, tx.raw.len());
            self.lose(tx, reason);
        }
    }

    /// Takes from the front for a block (`budget`: at most so many
    /// transactions, gas and raw bytes), passing over what the chain
    /// already holds (`exclude`).
    fn take(
        &mut self,
        (max_txs, gas_budget, max_bytes): (usize, u64, usize),
        exclude: &B256Set,
        reply: tokio::sync::oneshot::Sender<Vec<Pooled>>,
    ) {
        // What the chain being extended holds is passed over but kept
        // (`Taken::in_ancestry`): store commit forgets it.
        let Taken { txs, .. } = self.pool.take(max_txs, gas_budget, max_bytes, exclude);
        let bytes = txs.iter().map(|p| p.tx.raw.len()).sum();
        self.counters.release(txs.len(), bytes);
        if let Err(txs) = reply.send(txs) {
            // The producer went away mid-request (shutdown): put the
            // transactions back in front, in order.
            tracing::warn!(shard = self.index, n = txs.len(), "block producer dropped a take; restoring");
            self.restore(txs);
        }
    }

    /// Swaps each replacement in for the queued transaction it names,
    /// in place; the replaced one leaves the in-flight index (it can never
    /// be included now) and the pool's byte count follows the new size. A
    /// replacement whose original was taken for a block already is dropped
    /// and reported: the original spends the nonce.
    fn replace(&mut self, txs: Vec<(B256, RecoveredTx)>) {
        for (old, new) in txs {
            let new_len = new.raw.len();
            match self.pool.replace(&old, new) {
                Ok(replaced) => {
                    // May pass the byte limit by the size difference for a
                    // moment: the replacement was admitted already.
                    self.counters.release(0, replaced.raw.len());
                    self.counters.force_acquire(0, new_len);
                    if let Some((pending, _)) = &self.lost {
                        pending.remove(&replaced.hash);
                    }
                    metrics::counter!(m::MEMPOOL_PRUNED, "reason" => "replaced").increment(1);
                }
                Err(new) => self.lose_replacement(*new, m::DROP_REPLACED_TOO_LATE),
            }
        }
    }

    /// Gives up on replacements that never reached the queue.
    fn lose_replacements(&mut self, txs: Vec<(B256, RecoveredTx)>, reason: &'static str) {
        for (_, new) in txs {
            self.lose_replacement(new, reason);
        }
    }

    /// Gives up on a replacement, saying why. It holds no capacity and no
    /// nonce of its own (the original it meant to replace keeps both), so
    /// only the in-flight index forgets it.
    fn lose_replacement(&mut self, tx: RecoveredTx, reason: &'static str) {
        let first = self.lost.as_ref().is_none_or(|(pending, _)| {
            let known = pending.contains(&tx.hash);
            pending.remove(&tx.hash);
            known
        });
        if first {
            tracing::warn!(shard = self.index, tx = %tx.hash, sender = %tx.sender, nonce = tx.nonce(), reason, "replacement transaction dropped");
            metrics::counter!(m::TXS_DROPPED, "reason" => reason).increment(1);
        }
    }

    /// Drops transactions a committed block included, giving back their
    /// capacity.
    fn forget(&mut self, hashes: &[B256]) {
        let (mut n, mut bytes) = (0, 0);
        for hash in hashes {
            if let Some(size) = self.pool.forget(hash) {
                n += 1;
                bytes += size;
            }
        }
        if n > 0 {
            self.counters.release(n, bytes);
            metrics::counter!(m::MEMPOOL_PRUNED, "reason" => "included").increment(n as u64);
        }
    }
}

impl ShardActor {
    /// Drops transactions the nonce actor evicted from the full pool (it
    /// already gave back their count); one already taken for a block gave
    /// its count back when taken, so it is counted again here.
    fn evict(&mut self, txs: &[(B256, usize)]) {
        let mut evicted = 0u64;
        for (hash, bytes) in txs {
            match self.pool.forget(hash) {
                Some(_) => evicted += 1,
                None => self.counters.force_acquire(1, *bytes),
            }
        }
        metrics::counter!(m::MEMPOOL_PRUNED, "reason" => "evicted").increment(evicted);
    }
}

impl Actor for ShardActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }
}

impl StreamHandler<ShardMsg> for ShardActor {
    fn handle(&mut self, msg: ShardMsg, ctx: &mut Context<Self>) {
        if let Some(until) = self.stall.deadline() {
            return stall::redeliver_at(until, self, ctx, msg);
        }
        let start = Instant::now();
        match faults::point(Site::MempoolShard).fire_shard(self.index) {
            None => self.supervised(msg, Inject::Nothing),
            Some(Action::Panic) => self.supervised(msg, Inject::Panic),
            Some(Action::Error) => self.supervised(msg, Inject::Error),
            Some(Action::Delay(d)) => {
                let wait = tokio::time::sleep(d);
                ctx.wait(wait.into_actor(self).map(move |_, act, _| {
                    act.supervised(msg, Inject::Nothing);
                    act.depth.set(act.pool.len() as f64);
                }));
            }
            Some(Action::Stall(d)) => {
                self.supervised(msg, Inject::Nothing);
                self.stall.start(d);
            }
            Some(Action::Drop) => match msg {
                ShardMsg::Insert { txs } => self.lose_all(txs, m::DROP_FAULT),
                // A lost take is answered with nothing taken: the
                // transactions stay for the next block.
                ShardMsg::Take { reply, .. } => drop(reply.send(Vec::new())),
                ShardMsg::Restore { txs } => self.lose_restored(txs, m::DROP_FAULT),
                ShardMsg::Replace { txs } => self.lose_replacements(txs, m::DROP_FAULT),
                // Left queued: a later block finds them stale, as before.
                ShardMsg::Forget { .. } => {}
                // Left queued with nothing counting them: taken again.
                ShardMsg::Evict { txs } => {
                    txs.iter().for_each(|(_, bytes)| self.counters.force_acquire(1, *bytes))
                }
            },
        }
        self.depth.set(self.pool.len() as f64);
        self.metrics.handled(start);
    }
}
