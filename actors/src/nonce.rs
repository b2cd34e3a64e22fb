//! Nonce reservation: the serialized section of admission.
//!
//! Owns every sender's next nonce ([`NonceBook`]). A transaction is admitted
//! only if its nonce is the sender's next one (gapless), its sender can pay
//! its maximum cost, and the mempool has room; it then goes to its sender's
//! shard. Everything expensive (decoding, sender recovery, reading the
//! committed account) happens before a message reaches this actor, so the
//! serialized part is a few hash-map operations.
//!
//! The committed account is read by admission outside this actor. If a
//! block committed since that read (this actor has seen a newer height), the
//! read may be stale and is redone here before reserving.

use std::{sync::Arc, time::Instant};

use actix::prelude::*;
use sluice_store::{StateReader, Store};
use sluice_txpool::{check_funds, NonceBook, PoolCounters, PreparedTxCache, TxError};

use crate::{
    mailbox::{MailboxReceiver, MailboxSender, SendError},
    metrics::{self as m, ActorMetrics},
    pending::PendingTxs,
    protocol::{CommittedAccount, NonceMsg, ProducerMsg, ShardMsg},
};

/// The nonce reservation actor.
pub struct NonceActor {
    book: NonceBook,
    store: Arc<Store>,
    counters: Arc<PoolCounters>,
    pending: Arc<PendingTxs>,
    cache: Arc<PreparedTxCache>,
    shards: Vec<MailboxSender<ShardMsg>>,
    producer: MailboxSender<ProducerMsg>,
    max_txs_per_sender: u32,
    max_block_txs: u64,
    /// Highest committed height reported by store commit.
    seen_height: u64,
    rx: Option<MailboxReceiver<NonceMsg>>,
    metrics: ActorMetrics,
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
}

impl NonceActor {
    /// Builds the actor around its mailbox.
    pub fn new(deps: NonceDeps, rx: MailboxReceiver<NonceMsg>) -> Self {
        let seen_height = deps.store.head();
        NonceActor {
            book: NonceBook::new(),
            store: deps.store,
            counters: deps.counters,
            pending: deps.pending,
            cache: deps.cache,
            shards: deps.shards,
            producer: deps.producer,
            max_txs_per_sender: deps.max_txs_per_sender,
            max_block_txs: deps.max_block_txs,
            seen_height,
            rx: Some(rx),
            metrics: ActorMetrics::new("nonce"),
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
                CommittedAccount { height, nonce: acct.nonce, balance: acct.balance }
            }
            // The in-memory store cannot fail a read; a durable one that does
            // leaves the admission read in place, which is at worst stale.
            Err(_) => committed,
        }
    }

    /// Checks and reserves; on success the transaction is counted in the
    /// pool and must be forwarded.
    fn admit(
        &mut self,
        tx: &sluice_messages::RecoveredTx,
        committed: CommittedAccount,
    ) -> Result<(), TxError> {
        if self.pending.contains(&tx.hash) {
            return Err(TxError::AlreadyKnown);
        }
        let committed = self.fresh_account(committed, &tx.sender);
        check_funds(tx, committed.balance)?;
        self.book.reserve(tx.sender, tx.nonce(), committed.nonce, self.max_txs_per_sender)?;
        if let Err(e) = self.counters.try_acquire(tx.raw.len()) {
            self.book.unreserve(&tx.sender, tx.nonce());
            return Err(e);
        }
        self.pending.insert(tx.clone());
        self.cache.insert(tx);
        Ok(())
    }
}

impl Actor for NonceActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }
}

impl StreamHandler<NonceMsg> for NonceActor {
    fn handle(&mut self, msg: NonceMsg, ctx: &mut Context<Self>) {
        let start = Instant::now();
        match msg {
            NonceMsg::Admit { tx, committed, received, reply } => {
                if let Err(e) = self.admit(&tx, committed) {
                    let _ = reply.send(Err(e));
                    self.metrics.handled(start);
                    return;
                }
                metrics::histogram!(m::NONCE_RESERVE_SECONDS).record(received.elapsed().as_secs_f64());
                if self.counters.len() >= self.max_block_txs {
                    // A lost wake-up only delays the block to the next tick.
                    let _ = self.producer.offer(ProducerMsg::Wake);
                }
                let shard = self.shards[Self::shard_of(&tx.sender, self.shards.len())].clone();
                match shard.offer(ShardMsg::Insert { tx }) {
                    Ok(()) => {
                        let _ = reply.send(Ok(()));
                    }
                    Err(SendError::Full(msg)) => {
                        // Backpressure: stop taking admissions until the
                        // shard has room.
                        ctx.wait(
                            async move {
                                let res = shard
                                    .send(msg)
                                    .await
                                    .map_err(|_| TxError::Unavailable("mempool shard stopped"));
                                let _ = reply.send(res);
                            }
                            .into_actor(self),
                        );
                    }
                    Err(SendError::Closed(_)) => {
                        let _ = reply.send(Err(TxError::Unavailable("mempool shard stopped")));
                    }
                }
            }
            NonceMsg::Executed { height, senders } => {
                for s in senders {
                    self.book.executed(&s.address, s.count, s.nonce);
                }
                self.seen_height = self.seen_height.max(height);
                metrics::gauge!(m::NONCE_SENDERS).set(self.book.len() as f64);
            }
            NonceMsg::PendingNonce { address, reply } => {
                let _ = reply.send(self.book.next_nonce(&address));
            }
        }
        self.metrics.handled(start);
    }
}
