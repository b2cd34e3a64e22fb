//! Nonce reservation: the serialized section of admission.
//!
//! The rules live in [`Reservations`] (the `sluice-txpool` crate): a
//! transaction is admitted only if its nonce is the sender's next one
//! (gapless), its sender can pay its maximum cost on top of those of its
//! in-flight transactions (geth's overdraft rule), and the mempool has
//! room; it then goes to its sender's shard. One whose nonce is higher is
//! held, bounded like geth's queue, and admitted once the gap fills; one
//! whose nonce is still in flight replaces that transaction if it pays
//! geth's price bump; a delegated (EIP-7702) sender gets one transaction
//! in flight. This actor drives that engine in message order and carries
//! out what it stages: messages to the shards (with backpressure), waking
//! the producer, publishing admitted transactions, gossip to the other
//! validators, logs and metrics of what was dropped. Everything expensive
//! (decoding, sender recovery, reading the committed account) happens
//! before a message reaches this actor, so the serialized part is a few
//! hash-map operations.
//!
//! A panic while handling a message is contained: the book is rebuilt from
//! the committed nonces plus the in-flight transactions ([`PendingTxs`]),
//! and an `Admit` that panicked is answered with an error (never retried: a
//! transaction that makes reservation panic must not be able to loop it).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use alloy_primitives::{Address, Bytes, B256};
use sluice_rpc::events::ChainEvents;
use sluice_store::{Account, StateReader, Store, StoreError};
use sluice_txpool::{
    Admitted, CommittedState, DropWhy, FutureLimits, Outbox, PendingTxs, PoolCounters, PreparedTxCache,
    ReservationLimits, Reservations, TxError,
};

use crate::{
    faults::{self, Action, Site},
    mailbox::{MailboxReceiver, MailboxSender, SendError},
    metrics::{self as m, ActorMetrics},
    protocol::{AdmitTx, NonceMsg, ProducerMsg, ShardMsg},
    stall::{self, Stall},
    supervise::{contain, Supervisor},
};

/// How often held transactions are checked against their lifetime and a
/// halt.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// The nonce reservation actor.
pub struct NonceActor {
    /// The book, tails, held queue and numbering.
    engine: Reservations,
    store: Arc<Store>,
    counters: Arc<PoolCounters>,
    pending: Arc<PendingTxs>,
    shards: Vec<MailboxSender<ShardMsg>>,
    producer: MailboxSender<ProducerMsg>,
    max_block_txs: u64,
    events: ChainEvents,
    rx: Option<MailboxReceiver<NonceMsg>>,
    metrics: ActorMetrics,
    sup: Supervisor,
    /// An injected stall: no message is handled before it ends.
    stall: Stall,
    /// Validator mode: where this node's clients' transactions queue for
    /// the other validators.
    peers: Option<flume::Sender<Bytes>>,
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
    pub peers: Option<flume::Sender<Bytes>>,
}

/// The committed store as reservations read it.
struct Committed<'a>(&'a Store);

impl CommittedState for Committed<'_> {
    fn head(&self) -> u64 {
        self.0.head()
    }
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        StateReader::account(self.0, address)
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        StateReader::code(self.0, hash)
    }
}

impl NonceActor {
    /// Builds the actor around its mailbox.
    pub fn new(deps: NonceDeps, rx: MailboxReceiver<NonceMsg>) -> Self {
        let limits = ReservationLimits {
            shards: deps.shards.len(),
            max_txs_per_sender: deps.max_txs_per_sender,
            future: deps.future,
        };
        let engine = Reservations::new(
            Arc::clone(&deps.pending),
            Arc::clone(&deps.counters),
            deps.cache,
            limits,
            deps.store.head(),
        );
        NonceActor {
            engine,
            store: deps.store,
            counters: deps.counters,
            pending: deps.pending,
            shards: deps.shards,
            producer: deps.producer,
            max_block_txs: deps.max_block_txs,
            events: deps.events,
            rx: Some(rx),
            metrics: ActorMetrics::new("nonce"),
            sup: Supervisor::new(Site::Nonce),
            stall: Stall::default(),
            peers: deps.peers,
        }
    }

    /// The shard that holds all of `sender`'s transactions.
    pub fn shard_of(sender: &Address, shards: usize) -> usize {
        Reservations::shard_of(sender, shards)
    }

    /// Rebuilds the book after a contained panic.
    fn rebuild(&mut self) {
        let (senders, height) = self.engine.rebuild(&Committed(&self.store));
        tracing::warn!(senders, height, "nonce book rebuilt from the store and the in-flight index");
    }

    /// Publishes what the engine promoted into the mempool and reports
    /// what it dropped.
    fn report(&self, out: &mut Outbox) {
        for tx in out.admitted.drain(..) {
            self.events.admitted(&tx);
        }
        for dropped in out.dropped.drain(..) {
            match dropped.why {
                DropWhy::HeldQueueFull => report_future(
                    &dropped.txs,
                    m::DROP_FUTURE_EVICTED,
                    "evicted from the full held queue: its sender held the most",
                ),
                DropWhy::NonceTaken => report_future(
                    &dropped.txs,
                    m::DROP_FUTURE_REFUSED,
                    "its nonce was taken by another transaction",
                ),
                DropWhy::Refused(why) => report_future(&dropped.txs, m::DROP_FUTURE_REFUSED, &why),
                DropWhy::Evicted => {
                    for tx in &dropped.txs {
                        tracing::warn!(tx = %tx.hash, sender = %tx.sender, nonce = tx.nonce(), "evicted from the full pool by a better-paying transaction");
                        metrics::counter!(m::TXS_DROPPED, "reason" => m::DROP_EVICTED).increment(1);
                    }
                }
            }
        }
    }

    /// Admits what was held for `sender` if its gap filled.
    fn promote(&mut self, sender: &Address, out: &mut Outbox) {
        if self.engine.held() == 0 {
            return;
        }
        self.engine.promote(&Committed(&self.store), sender, out);
        self.report(out);
        metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.engine.held() as f64);
    }

    /// On a halted node no gap can fill: every held transaction is dropped
    /// and reported as the in-flight ones are (`reason="halted"`); else
    /// the lifetime is applied.
    fn sweep(&mut self) {
        if self.engine.held() == 0 {
            return;
        }
        match self.store.halted() {
            Some(reason) => {
                let gone = self.engine.drain_held();
                report_future(&gone, m::DROP_HALTED, &format!("the node halted: {reason}"));
                metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(0.0);
            }
            None => self.expire(),
        }
    }

    /// Drops and reports what waited for its gap past the lifetime.
    fn expire(&mut self) {
        if self.engine.held() == 0 {
            return;
        }
        let expired = self.engine.expire(Instant::now());
        report_future(
            &expired,
            m::DROP_FUTURE_EXPIRED,
            "held for a nonce gap past mempool.future_tx_lifetime_ms",
        );
        metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.engine.held() as f64);
    }
}

/// Where a batch's answers go: one per transaction, in order.
type Reply = tokio::sync::oneshot::Sender<Vec<Result<(), TxError>>>;

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
            let admitted = self.engine.admit(&Committed(&self.store), &tx, committed, hold_gaps, out);
            self.report(out);
            if matches!(admitted, Ok(Admitted::Reserved | Admitted::Replaced { .. })) {
                self.events.admitted(&tx);
            }
            if admitted.is_ok() && !from_peer {
                self.send_to_peers(&tx);
            }
            match admitted {
                Err(e) => answers.push(Err(e)),
                Ok(Admitted::Held) => {
                    answers.push(Ok(()));
                    metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.engine.held() as f64);
                }
                Ok(Admitted::Replaced { old }) => {
                    answers.push(Ok(()));
                    self.engine.stage_replacement(old, tx, out);
                }
                Ok(Admitted::Reserved) => {
                    answers.push(Ok(()));
                    reserve_seconds.record(received.elapsed().as_secs_f64());
                    let sender = tx.sender;
                    self.engine.stage(tx, Some(slot), out);
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
    /// shard is taken back (see [`Reservations::unstage`]). A client
    /// waiting on one was answered with an error (it may send it again);
    /// one promoted from the held queue had no one waiting, so it is
    /// reported as dropped.
    fn unstage(&mut self, mut out: Outbox) {
        // What the engine staged to publish and report before the panic
        // happened all the same.
        self.report(&mut out);
        let unstaged = self.engine.unstage(out);
        for hash in &unstaged.answered {
            tracing::warn!(tx = %hash, "admission answered with an error: nonce reservation restarted");
        }
        report_future(
            &unstaged.promoted,
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
        let mut out = self.engine.outbox();
        let outcome = contain(|| match msg {
            NonceMsg::Admit { txs, received, reply } => {
                let n = txs.len();
                let (_, reply) = admit_reply.insert((n, Some(reply)));
                self.handle_admit(txs, received, reply, &mut out, panic, ctx);
            }
            NonceMsg::Executed { height, senders } => {
                let senders: Vec<_> = senders.iter().map(|s| (s.address, s.count, s.nonce)).collect();
                let held = self.engine.held();
                self.engine.executed(&Committed(&self.store), height, &senders, &mut out);
                self.report(&mut out);
                if !senders.is_empty() && held > 0 {
                    metrics::gauge!(m::MEMPOOL_FUTURE_TXS).set(self.engine.held() as f64);
                }
                self.flush(std::mem::take(&mut out), Vec::new(), None, ctx);
                self.expire();
                metrics::gauge!(m::NONCE_SENDERS).set(self.engine.senders() as f64);
            }
            NonceMsg::Dropped { address, nonce } => self.engine.dropped(&address, nonce),
            NonceMsg::Status { reply } => {
                let _ = reply.send((self.counters.len(), self.engine.held() as u64));
            }
            NonceMsg::Queued { reply } => {
                let _ = reply.send(self.engine.held_txs().cloned().collect());
            }
            NonceMsg::PendingNonce { address, reply } => {
                let _ = reply.send(self.engine.next_nonce(&address));
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
        self.counters.set_floor(self.engine.floor());
        self.metrics.handled(start);
    }
}

impl StreamHandler<NonceMsg> for NonceActor {
    fn handle(&mut self, msg: NonceMsg, ctx: &mut Context<Self>) {
        if let Some(until) = self.stall.deadline() {
            return stall::redeliver_at(until, self, ctx, msg);
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
                self.stall.start(d);
            }
            (fault, msg) => self.process(msg, fault == Some(Action::Panic), ctx),
        }
    }
}
