//! Store commit: the only writer of state.
//!
//! Runs alone on its own OS thread. Commits executed blocks in order,
//! chaining the app hash; then publishes the committed height (the
//! executor drops the block from its overlay, RPC serves it), forgets the
//! block's transactions from the in-flight index, tells the nonce actor
//! which senders progressed, and fires the block's [`Delivery`], if any
//! (also when a retry finds the block already committed; never for a block
//! that was not).
//!
//! [`Delivery`]: crate::protocol::Delivery
//!
//! A failed commit is latched by the store: this actor then refuses every
//! later block, the execution stage stops executing, reads keep working, and the
//! error is in the logs and in `sluice_store_halted`.
//!
//! Faults are handled by [`run_blocking`]. An injected error strikes before
//! the write (a transient write failure: retried); an injected panic strikes
//! after the block is durable and before it is published, the worst point.
//! The retry then finds the block already in the store and redoes only the
//! publication, so it is exact. (A panic inside `Store::commit` between the
//! database write and the in-memory apply is exact to retry too: the write
//! is one atomic batch of absolute values, and the vault check accepts
//! the same app hash again.)

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use actix::prelude::*;
use alloy_primitives::{Address, B256};
use tokio::sync::oneshot;

use sluice_rpc::events::ChainEvents;
use sluice_store::{Halt, Store};
use sluice_txpool::PendingTxs;

use crate::{
    faults::{self, Site},
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    nonce::NonceActor,
    protocol::{CommitMsg, NonceMsg, SenderProgress, ShardMsg},
    supervise::{report_abandoned, report_lost, run_blocking, AttemptError, Inject, Stage, Supervisor},
};

/// The store commit actor.
pub struct Committer {
    store: Arc<Store>,
    committed: Arc<AtomicU64>,
    pending: Arc<PendingTxs>,
    nonce: MailboxSender<NonceMsg>,
    rx: Option<MailboxReceiver<CommitMsg>>,
    done: Option<oneshot::Sender<()>>,
    metrics: ActorMetrics,
    /// Where committed heights are published for subscribers (WebSocket).
    events: Option<ChainEvents>,
    /// Validator mode: the mempool shards, told to drop what a committed
    /// block included (see [`Committer::with_pool`]).
    pool: Option<Vec<MailboxSender<ShardMsg>>>,
    sup: Supervisor,
}

impl Committer {
    /// A committer writing to `store`. `done` is answered when the actor
    /// stops, after its mailbox is drained: the end of a clean shutdown.
    pub fn new(
        store: Arc<Store>,
        committed: Arc<AtomicU64>,
        pending: Arc<PendingTxs>,
        nonce: MailboxSender<NonceMsg>,
        rx: MailboxReceiver<CommitMsg>,
        done: oneshot::Sender<()>,
    ) -> Self {
        Committer {
            store,
            committed,
            pending,
            nonce,
            rx: Some(rx),
            done: Some(done),
            metrics: ActorMetrics::new("committer"),
            events: None,
            pool: None,
            sup: Supervisor::new(Site::Committer),
        }
    }

    /// Validator mode: every committed block's transactions that this node
    /// admitted leave its mempool, wherever they are queued. Another
    /// validator may have proposed them (the same transaction was sent to
    /// both), and proposing them again would only make skipped entries.
    pub fn with_pool(mut self, shards: Vec<MailboxSender<ShardMsg>>) -> Self {
        self.pool = Some(shards);
        self
    }

    /// Publishes each committed height to `events` (subscriptions).
    pub fn with_events(mut self, events: ChainEvents) -> Self {
        self.events = Some(events);
        self
    }
}

impl Actor for Committer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

impl Committer {
    /// True when block `number` with this hash is already in the store (a
    /// retry after a panic that struck past the write).
    fn already_committed(&self, number: u64, hash: &alloy_primitives::B256) -> bool {
        self.store.head() >= number && self.store.block(number).is_some_and(|b| b.block.hash == *hash)
    }

    /// Makes a durable block visible: committed height, in-flight index,
    /// subscribers, and the nonce actor.
    fn publish(&mut self, msg: &CommitMsg, start: Instant) {
        let number = msg.block.block.header.number;
        // Before the height is visible: a proposal built on it takes from
        // the shards after this, so never finds these transactions.
        self.forget_in_pool(msg);
        self.committed.store(number, Ordering::Release);
        let senders = self.forget_admitted(msg);
        metrics::histogram!(m::COMMIT_SECONDS).record(start.elapsed().as_secs_f64());
        metrics::gauge!(m::COMMITTED_HEIGHT).set(number as f64);
        metrics::counter!(m::TXS_INCLUDED).increment(msg.block.receipts.len() as u64);
        tracing::debug!(number, txs = msg.block.receipts.len(), "committed");
        if let Some(events) = &self.events {
            events.committed(number);
        }
        let progress = NonceMsg::Executed { height: number, senders };
        if self.nonce.send_blocking(progress).is_err() {
            tracing::warn!(number, "nonce actor stopped; progress not delivered");
        }
        if let Some(delivery) = &msg.delivery {
            delivery.fire();
        }
    }

    /// Tells each mempool shard which of the block's transactions it may
    /// still hold (validator mode only). Waits for room: shards never wait
    /// on the committer.
    fn forget_in_pool(&self, msg: &CommitMsg) {
        let Some(shards) = &self.pool else { return };
        if shards.is_empty() {
            return;
        }
        let b = &msg.block;
        let mut split: Vec<Vec<B256>> = vec![Vec::new(); shards.len()];
        let hashes = b.receipts.iter().map(|r| r.tx_hash).chain(b.skipped.iter().map(|(h, _)| *h));
        for hash in hashes {
            if let Some(sender) = self.pending.sender_of(&hash) {
                split[NonceActor::shard_of(&sender, shards.len())].push(hash);
            }
        }
        for (shard, hashes) in shards.iter().zip(split) {
            if !hashes.is_empty() && shard.send_blocking(ShardMsg::Forget { hashes }).is_err() {
                tracing::warn!("mempool shard stopped; committed transactions not pruned");
            }
        }
    }

    /// Removes the block's transactions from the in-flight index and
    /// answers each sender's progress counting only the transactions this
    /// node admitted: those are the ones the nonce book holds in flight
    /// (a block from another validator may carry others), and a second
    /// publication of one block counts nothing again.
    fn forget_admitted(&self, msg: &CommitMsg) -> Vec<SenderProgress> {
        let b = &msg.block;
        let mut ours: HashMap<Address, u32> = HashMap::with_capacity(msg.senders.len());
        let hashes = b.receipts.iter().map(|r| &r.tx_hash).chain(b.skipped.iter().map(|(h, _)| h));
        for hash in hashes {
            if let Some(sender) = self.pending.remove_sender(hash) {
                *ours.entry(sender).or_default() += 1;
            }
        }
        // Senders with none of ours stay: their committed nonce still moves
        // the book past nonces that arrived by another validator.
        msg.senders
            .iter()
            .map(|s| SenderProgress { count: ours.get(&s.address).copied().unwrap_or(0), ..*s })
            .collect()
    }
}

impl Stage for Committer {
    type Msg = CommitMsg;

    fn attempt(&mut self, msg: &CommitMsg, inject: Inject) -> Result<(), AttemptError> {
        let start = Instant::now();
        let number = msg.block.block.header.number;
        if !self.already_committed(number, &msg.block.block.hash) {
            if inject == Inject::Error {
                inject.strike(Site::Committer)?;
            }
            match self.store.commit(&msg.block) {
                Ok(info) => {
                    if info.synced {
                        metrics::histogram!(m::STORE_SYNC_SECONDS).record(info.write.as_secs_f64());
                    }
                    metrics::gauge!(m::STORE_APP_HASH_HEIGHT).set(number as f64);
                    tracing::debug!(number, app_hash = %info.app_hash, "block durable");
                }
                Err(e) => {
                    tracing::error!(number, error = %e, "commit failed; the node stops producing and executing");
                    self.store.halt(Halt::CommitFailed { height: number, cause: e.to_string() });
                    metrics::gauge!(m::STORE_HALTED).set(1.0);
                    report_lost(&self.pending, &format!("commit of block {number} failed: {e}"));
                    return Ok(());
                }
            }
        }
        if inject == Inject::Panic {
            inject.strike(Site::Committer)?;
        }
        self.publish(msg, start);
        Ok(())
    }

    fn rebuild(&mut self) {
        // The committed height is the store's head; republish it.
        let head = self.store.head();
        self.committed.store(head, Ordering::Release);
        tracing::warn!(height = head, "store commit restarted at the store's head");
    }

    fn abandon(&mut self, msg: &CommitMsg) {
        if self.already_committed(msg.block.block.header.number, &msg.block.block.hash) {
            // Durable and served: only its publication was left to do.
            self.publish(msg, Instant::now());
            return;
        }
        let b = &msg.block;
        report_abandoned("committer", b.block.header.number, b.receipts.len() + b.skipped.len());
        report_lost(&self.pending, "the store halted");
    }

    fn supervisor(&mut self) -> &mut Supervisor {
        &mut self.sup
    }
}

impl StreamHandler<CommitMsg> for Committer {
    fn handle(&mut self, msg: CommitMsg, _ctx: &mut Context<Self>) {
        let start = Instant::now();
        run_blocking(self, faults::point(Site::Committer), &msg);
        self.metrics.handled(start);
    }
}
