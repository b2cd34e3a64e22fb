//! The block producer: seals blocks from the mempool shards.
//!
//! A block is sealed when the mempool holds a full block (the nonce actor
//! sends `Wake`), or when `block_time_ms` passes with at least one
//! transaction waiting. Each block takes at most `max_block_txs`
//! transactions, `block_gas_limit` of gas (counted by gas limit) and
//! `max_block_bytes` of raw transactions; shards are visited from a
//! rotating start so none is starved.
//!
//! When no block has been sealed for `idle_block_interval_ms` (0: never),
//! a block is sealed anyway, empty unless transactions arrived meanwhile.
//! Clients that learn of inclusion by polling for a *later* block (ethers
//! v6's `tx.wait()`) would otherwise wait forever on an idle chain. The
//! idle seal takes the same path as any other (failpoint, `sealing` guard,
//! the wait for room in preparation's mailbox), so it can neither overtake
//! backpressure nor build a second block on one parent.
//!
//! Sealing waits for room in the preparation mailbox: when preparation is
//! behind, the producer stops, the mempool fills, and admission answers
//! `txpool is full`.
//!
//! Faults strike when a seal begins (on a tick, the idle timer or a
//! wake-up, never during the shutdown flush). A contained panic restarts the producer in place:
//! its state is the parent it builds on, which nothing changed, so the
//! transactions simply wait in the mempool for the next seal.

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use actix::prelude::*;
use alloy_primitives::{Address, B256};
use sluice_messages::{BlockHeader, RecoveredTx, SealedBlock};
use sluice_txpool::PoolCounters;
use tokio::sync::oneshot;

use crate::{
    faults::{self, Action, Site},
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    protocol::{PrepareMsg, ProducerMsg, ShardMsg},
    supervise::{contain, Contained, Inject, Supervisor},
};

/// Block limits and constants the producer stamps into headers.
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// Longest wait before sealing a non-empty block.
    pub block_time: Duration,
    /// Most transactions per block.
    pub max_block_txs: usize,
    /// Gas per block.
    pub block_gas_limit: u64,
    /// Most raw bytes per block.
    pub max_block_bytes: usize,
    /// A block, empty if need be, when none was sealed for this long;
    /// `None`: the chain moves only with transactions.
    pub idle_block_interval: Option<Duration>,
    /// Fee recipient.
    pub coinbase: Address,
    /// Constant base fee.
    pub base_fee: u64,
}

/// The parent of the next block.
#[derive(Debug, Clone, Copy)]
pub struct Parent {
    /// Height.
    pub number: u64,
    /// Hash.
    pub hash: B256,
    /// Timestamp.
    pub timestamp: u64,
}

/// Whether a seal may produce a block without transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Only a block with transactions (the block-time tick, wake-ups,
    /// shutdown's flush).
    TxsOnly,
    /// Empty if nothing waits: the chain has been idle too long.
    EmptyAllowed,
}

/// The block producer actor.
pub struct Producer {
    settings: ProducerSettings,
    shards: Vec<MailboxSender<ShardMsg>>,
    prepare: MailboxSender<PrepareMsg>,
    counters: Arc<PoolCounters>,
    parent: Parent,
    next_shard: usize,
    last_sealed: Option<Instant>,
    /// When the last block was handed to preparation (or the producer
    /// started): the idle timer counts from here.
    last_block_at: Instant,
    /// Shutdown began: no more idle blocks, only the mempool's flush.
    flushing: bool,
    rx: Option<MailboxReceiver<ProducerMsg>>,
    metrics: ActorMetrics,
    sup: Supervisor,
    /// An injected stall: nothing is sealed before this.
    stall_until: Option<Instant>,
    /// A seal is queued or running. actix's interval catches up on missed
    /// ticks inside one poll, calling the tick once per missed interval
    /// before any queued seal has run: without this, a producer held up by
    /// backpressure for two block times would queue two seals on the same
    /// parent and produce two blocks with one number.
    sealing: bool,
}

impl Producer {
    /// A producer that builds on `parent`.
    pub fn new(
        settings: ProducerSettings,
        shards: Vec<MailboxSender<ShardMsg>>,
        prepare: MailboxSender<PrepareMsg>,
        counters: Arc<PoolCounters>,
        parent: Parent,
        rx: MailboxReceiver<ProducerMsg>,
    ) -> Self {
        Producer {
            settings,
            shards,
            prepare,
            counters,
            parent,
            next_shard: 0,
            last_sealed: None,
            last_block_at: Instant::now(),
            flushing: false,
            rx: Some(rx),
            metrics: ActorMetrics::new("producer"),
            sup: Supervisor::new(Site::Producer),
            stall_until: None,
            sealing: false,
        }
    }

    /// Arms the idle timer for `idle_block_interval` after the last block.
    /// Overdue (a seal in flight, or one a fault dropped), it looks again a
    /// whole interval later rather than spin.
    fn schedule_idle(&mut self, ctx: &mut Context<Self>) {
        let Some(idle) = self.settings.idle_block_interval else { return };
        let due = self.last_block_at + idle;
        let now = Instant::now();
        let wait = if due > now { due - now } else { idle };
        ctx.run_later(wait, |act, ctx| act.idle_tick(ctx));
    }

    /// The idle timer fired: seal a block if none was sealed for a whole
    /// interval, then re-arm.
    fn idle_tick(&mut self, ctx: &mut Context<Self>) {
        if self.flushing {
            return;
        }
        let idle = self.settings.idle_block_interval.unwrap_or(Duration::MAX);
        if self.last_block_at.elapsed() >= idle {
            self.seal_supervised(ctx, Fill::EmptyAllowed);
        }
        self.schedule_idle(ctx);
    }

    /// A seal on a tick or a wake-up, with the failpoint applied and
    /// panics contained.
    fn seal_supervised(&mut self, ctx: &mut Context<Self>, fill: Fill) {
        if self.sealing {
            return;
        }
        if self.stall_until.is_some_and(|t| t > Instant::now()) {
            return;
        }
        self.stall_until = None;
        let inject = match faults::point(Site::Producer).fire() {
            None => Inject::Nothing,
            Some(Action::Panic) => Inject::Panic,
            Some(Action::Error) => {
                // Nothing was taken: the next tick seals.
                self.sup.failed("injected error at failpoint producer");
                return;
            }
            // The trigger is lost; the next tick seals.
            Some(Action::Drop) => return,
            Some(Action::Delay(d)) => {
                let wait = tokio::time::sleep(d);
                self.sealing = true;
                ctx.wait(wait.into_actor(self).map(move |_, act, ctx| {
                    act.sealing = false;
                    act.seal_contained(ctx, Inject::Nothing, fill)
                }));
                return;
            }
            Some(Action::Stall(d)) => {
                self.stall_until = Some(Instant::now() + d);
                Inject::Nothing
            }
        };
        self.seal_contained(ctx, inject, fill);
    }

    fn seal_contained(&mut self, ctx: &mut Context<Self>, inject: Inject, fill: Fill) {
        let outcome = contain(|| {
            let _ = inject.strike(Site::Producer);
            self.seal(ctx, fill);
        });
        if let Err(panic) = outcome {
            // The parent is unchanged (it moves only once a block is handed
            // to preparation), so restarting in place is exact.
            self.sup.panicked(&panic);
        }
    }

    /// Seals one block if anything is waiting (or, with
    /// [`Fill::EmptyAllowed`], even if nothing is); a backlog of full
    /// blocks is sealed back to back, not one per tick.
    fn seal(&mut self, ctx: &mut Context<Self>, fill: Fill) {
        if self.sealing {
            // The seal in flight continues the chain itself.
            return;
        }
        self.seal_then(ctx, fill, |act, ctx, _| {
            if act.counters.len() >= act.settings.max_block_txs as u64 {
                act.seal(ctx, Fill::TxsOnly);
            }
        });
    }

    /// Seals one block, then runs `then` (with whether a block was sealed).
    /// The actor takes no other message until the block is in the
    /// preparation mailbox. Continuations are chained through `then`, never
    /// queued side by side: actix runs `ctx.wait` futures last-in first-out.
    fn seal_then<F>(&mut self, ctx: &mut Context<Self>, fill: Fill, then: F)
    where
        F: FnOnce(&mut Self, &mut Context<Self>, bool) + 'static,
    {
        if self.sealing {
            // Retry once the seal in flight is done (only flush gets here).
            ctx.run_later(Duration::from_millis(5), move |act, ctx| act.seal_then(ctx, fill, then));
            return;
        }
        if fill == Fill::TxsOnly && self.counters.is_empty() {
            then(self, ctx, false);
            return;
        }
        let start = Instant::now();
        let shards = self.shards.clone();
        let first = self.next_shard;
        self.next_shard = (self.next_shard + 1) % shards.len().max(1);
        let settings = self.settings.clone();
        let prepare = self.prepare.clone();
        let parent = self.parent;
        // Contained: this future runs outside any handler body, and a panic
        // in it would take the light arbiter (nonce, shards) down with it.
        let fut = Contained::new(async move {
            let txs = take_block(&shards, first, &settings).await;
            if txs.is_empty() && fill == Fill::TxsOnly {
                return None;
            }
            let block = Arc::new(build_block(&parent, &settings, &txs));
            let sealed = PrepareMsg { block: Arc::clone(&block), sealed_at: Instant::now() };
            if prepare.send(sealed).await.is_err() {
                tracing::error!(
                    number = block.header.number,
                    "block preparation stopped; block not delivered"
                );
                return None;
            }
            Some(block)
        });
        // Set last, so a panic before the seal is queued cannot leave it set.
        self.sealing = true;
        ctx.wait(fut.into_actor(self).map(move |sealed, act, ctx| {
            act.sealing = false;
            let sealed = sealed.unwrap_or_else(|panic| {
                // Transactions taken before the panic cannot be named here;
                // the failure counts towards escalation.
                tracing::error!(panic, "sealing a block panicked; transactions it took may be lost");
                act.sup.panicked(&panic);
                None
            });
            let progressed = sealed.is_some();
            if let Some(block) = sealed {
                let now = Instant::now();
                act.last_block_at = now;
                if let Some(prev) = act.last_sealed.replace(now) {
                    metrics::histogram!(m::BLOCK_INTERVAL_SECONDS).record((now - prev).as_secs_f64());
                }
                metrics::histogram!(m::BLOCK_TXS).record(block.txs.len() as f64);
                metrics::gauge!(m::PRODUCED_HEIGHT).set(block.header.number as f64);
                act.parent = Parent {
                    number: block.header.number,
                    hash: block.hash,
                    timestamp: block.header.timestamp,
                };
            }
            act.metrics.handled(start);
            act.sealing = false;
            then(act, ctx, progressed);
        }));
    }

    /// Seals until the mempool is empty, then answers and stops, which
    /// closes preparation's mailbox and lets the pipeline drain in order.
    fn flush(&mut self, ctx: &mut Context<Self>, reply: oneshot::Sender<()>) {
        self.flushing = true;
        self.seal_then(ctx, Fill::TxsOnly, move |act, ctx, progressed| {
            if progressed && !act.counters.is_empty() {
                act.flush(ctx, reply);
                return;
            }
            if !act.counters.is_empty() {
                tracing::error!(
                    waiting = act.counters.len(),
                    "mempool not empty but nothing could be sealed"
                );
            }
            let _ = reply.send(());
            ctx.stop();
        });
    }
}

/// Takes up to one block of transactions from the shards.
async fn take_block(
    shards: &[MailboxSender<ShardMsg>],
    first: usize,
    s: &ProducerSettings,
) -> Vec<RecoveredTx> {
    let mut txs: Vec<RecoveredTx> = Vec::with_capacity(s.max_block_txs.min(8192));
    let (mut gas, mut bytes) = (s.block_gas_limit, s.max_block_bytes);
    for k in 0..shards.len() {
        let room = s.max_block_txs - txs.len();
        if room == 0 {
            break;
        }
        let shard = &shards[(first + k) % shards.len()];
        let (reply, rx) = oneshot::channel();
        let take = ShardMsg::Take { max_txs: room, gas_budget: gas, max_bytes: bytes, reply };
        if shard.send(take).await.is_err() {
            continue;
        }
        if let Ok(got) = rx.await {
            for tx in &got {
                gas -= tx.gas_limit();
                bytes -= tx.raw.len();
            }
            txs.extend(got);
        }
    }
    txs
}

/// Seals a header over the transactions.
fn build_block(parent: &Parent, s: &ProducerSettings, txs: &[RecoveredTx]) -> SealedBlock {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut hashes = Vec::with_capacity(txs.len() * 32);
    for tx in txs {
        hashes.extend_from_slice(tx.hash.as_slice());
    }
    let header = BlockHeader {
        number: parent.number + 1,
        parent_hash: parent.hash,
        // Never before the parent, even if the clock steps back.
        timestamp: now.max(parent.timestamp),
        coinbase: s.coinbase,
        gas_limit: s.block_gas_limit,
        base_fee: s.base_fee,
        tx_root: sluice_messages::keccak256(&hashes),
    };
    SealedBlock { hash: header.hash(), header, txs: txs.iter().map(|t| t.raw.clone()).collect() }
}

impl Actor for Producer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
        ctx.run_interval(self.settings.block_time, |act, ctx| act.seal_supervised(ctx, Fill::TxsOnly));
        self.schedule_idle(ctx);
    }
}

impl StreamHandler<ProducerMsg> for Producer {
    fn handle(&mut self, msg: ProducerMsg, ctx: &mut Context<Self>) {
        match msg {
            ProducerMsg::Wake => {
                if self.counters.len() >= self.settings.max_block_txs as u64 {
                    self.seal_supervised(ctx, Fill::TxsOnly);
                }
            }
            ProducerMsg::Flush { reply } => {
                tracing::debug!(waiting = self.counters.len(), "flushing the mempool");
                self.flush(ctx, reply)
            }
        }
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        // The nonce actor holds a sender for wake-ups; the producer stops
        // only through `Flush`, so the mempool is never abandoned.
    }
}
