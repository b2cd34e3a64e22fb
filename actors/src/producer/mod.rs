//! The block producer: seals blocks from the mempool shards.
//!
//! When to seal is decided by [`SealPolicy`] (`policy.rs`, plain Rust);
//! this actor feeds it ticks, wake-ups, requests and the time, and carries
//! its decisions out. Two modes ([`ProducerMode`]):
//!
//! - **Timer** (a single node, the default). A block is sealed when the
//!   mempool holds a full block (the nonce actor sends `Wake`), or when
//!   `block_time_ms` passes with at least one transaction waiting. When no
//!   block has been sealed for `idle_block_interval_ms` (0: never), a block
//!   is sealed anyway, empty unless transactions arrived meanwhile: clients
//!   that learn of inclusion by polling for a *later* block (ethers v6's
//!   `tx.wait()`) would otherwise wait forever on an idle chain. The idle
//!   seal takes the same path as any other (failpoint, the one-seal guard,
//!   the wait for room in preparation's mailbox), so it can neither overtake
//!   backpressure nor build a second block on one parent. Sealing waits for
//!   room in the preparation mailbox: when preparation is behind, the
//!   producer stops, the mempool fills, and admission answers
//!   `txpool is full`.
//! - **OnRequest** (a validator, `on_request.rs`). No timers, and nothing
//!   goes to preparation from here: consensus asks for a block
//!   (`ProducerMsg::Build`) and gets it back with its transactions, and
//!   hands back those of a proposal that lost its height (`Restore`).
//!
//! Each block takes at most `max_block_txs` transactions, `block_gas_limit`
//! of gas (counted by gas limit) and `max_block_bytes` of raw transactions,
//! in geth's order: effective tip, then admission order across senders,
//! each sender's nonces in order (`build::take_block`).
//!
//! Faults strike when a timer-mode seal begins (on a tick, the idle timer
//! or a wake-up, never a back-to-back seal or the shutdown flush). A
//! contained panic restarts the producer in place: its state is the parent
//! it builds on, which nothing changed, so the transactions simply wait in
//! the mempool for the next seal.

mod build;
mod on_request;
pub mod policy;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use alloy_primitives::Address;
use sluice_txpool::PoolCounters;
use tokio::sync::oneshot;

pub use self::policy::{Decision, Fill, ProducerMode, SealPolicy, Trigger};
use crate::{
    faults::{self, Action, Site},
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    protocol::{PrepareMsg, ProducerMsg, ShardMsg},
    supervise::{contain, Contained, Inject, Supervisor},
};
pub use sluice_messages::Parent;

/// Block limits and constants the producer stamps into headers.
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// Longest wait before sealing a non-empty block (timer mode), or
    /// before answering a build request with what the mempool holds.
    pub block_time: Duration,
    /// Most transactions per block.
    pub max_block_txs: usize,
    /// Gas per block.
    pub block_gas_limit: u64,
    /// Most raw bytes per block.
    pub max_block_bytes: usize,
    /// EIP-7934's cap on a block's RLP size on Osaka
    /// ([`MAX_RLP_BLOCK_SIZE`](sluice_messages::block_size::MAX_RLP_BLOCK_SIZE)),
    /// `usize::MAX` before: validators refuse a proposal past it.
    pub max_block_rlp_bytes: usize,
    /// A block, empty if need be, when none was sealed for this long;
    /// `None`: the chain moves only with transactions. Timer mode only.
    pub idle_block_interval: Option<Duration>,
    /// Fee recipient.
    pub coinbase: Address,
    /// Constant base fee.
    pub base_fee: u64,
    /// Who decides when a block is sealed.
    pub mode: ProducerMode,
    /// On-request mode: how long a build request that finds the mempool
    /// empty waits for a first transaction before an empty block (see
    /// [`SealPolicy::with_empty_wait`]); zero: `block_time`.
    pub empty_wait: Duration,
}

/// The block producer actor.
pub struct Producer {
    settings: ProducerSettings,
    shards: Vec<MailboxSender<ShardMsg>>,
    prepare: MailboxSender<PrepareMsg>,
    counters: Arc<PoolCounters>,
    /// The block the next timer-mode seal builds on (moves only once a
    /// block is handed to preparation).
    parent: Parent,
    last_sealed: Option<Instant>,
    policy: SealPolicy,
    /// The waiting build request (on-request mode).
    request: Option<on_request::Request>,
    /// A poll for the waiting build request is scheduled.
    poll_armed: bool,
    /// Answered when the shutdown flush is over.
    flush_reply: Option<oneshot::Sender<()>>,
    rx: Option<MailboxReceiver<ProducerMsg>>,
    metrics: ActorMetrics,
    sup: Supervisor,
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
        let policy = SealPolicy::new(
            settings.mode,
            settings.block_time,
            settings.max_block_txs,
            settings.idle_block_interval,
            Instant::now(),
        )
        .with_empty_wait(settings.empty_wait);
        Producer {
            settings,
            shards,
            prepare,
            counters,
            parent,
            last_sealed: None,
            policy,
            request: None,
            poll_armed: false,
            flush_reply: None,
            rx: Some(rx),
            metrics: ActorMetrics::new("producer"),
            sup: Supervisor::new(Site::Producer),
        }
    }

    /// Carries out what the policy decided.
    fn act(&mut self, ctx: &mut Context<Self>, decision: Decision) {
        match decision {
            Decision::Nothing | Decision::Decline => {}
            Decision::Seal { fill, trigger } if trigger.strikes_faults() => self.seal_supervised(ctx, fill),
            Decision::Seal { fill, .. } => self.seal(ctx, fill),
            Decision::Build => self.build(ctx),
            Decision::FinishFlush { left } => self.finish_flush(ctx, left),
        }
    }

    /// Arms the idle timer for when the policy next wants to look.
    fn schedule_idle(&mut self, ctx: &mut Context<Self>) {
        if let Some(wait) = self.policy.next_idle_check(Instant::now()) {
            ctx.run_later(wait, |act, ctx| act.idle_tick(ctx));
        }
    }

    /// The idle timer fired: seal if the policy says so, then re-arm.
    fn idle_tick(&mut self, ctx: &mut Context<Self>) {
        let decision = self.policy.idle_check(Instant::now());
        self.act(ctx, decision);
        self.schedule_idle(ctx);
    }

    /// A seal a trigger began, with the failpoint applied and panics
    /// contained.
    fn seal_supervised(&mut self, ctx: &mut Context<Self>, fill: Fill) {
        let inject = match faults::point(Site::Producer).fire() {
            None => Inject::Nothing,
            Some(Action::Panic) => Inject::Panic,
            Some(Action::Error) => {
                // Nothing was taken: the next tick seals.
                self.sup.failed("injected error at failpoint producer");
                return self.lost(ctx);
            }
            // The trigger is lost; the next tick seals.
            Some(Action::Drop) => return self.lost(ctx),
            Some(Action::Delay(d)) => {
                // The policy still counts this seal in flight: nothing
                // else begins meanwhile.
                let wait = tokio::time::sleep(d);
                ctx.wait(
                    wait.into_actor(self)
                        .map(move |_, act, ctx| act.seal_contained(ctx, Inject::Nothing, fill)),
                );
                return;
            }
            Some(Action::Stall(d)) => {
                self.policy.stall(Instant::now() + d);
                Inject::Nothing
            }
        };
        self.seal_contained(ctx, inject, fill);
    }

    /// A seal that never ran.
    fn lost(&mut self, ctx: &mut Context<Self>) {
        let decision = self.policy.seal_lost(self.counters.len());
        self.act(ctx, decision);
    }

    fn seal_contained(&mut self, ctx: &mut Context<Self>, inject: Inject, fill: Fill) {
        let outcome = contain(|| {
            let _ = inject.strike(Site::Producer);
            self.seal(ctx, fill);
        });
        if let Err(panic) = outcome {
            // The parent is unchanged (it moves only once a block is handed
            // to preparation), so restarting in place is exact. `seal`
            // queues its future last, so a panic means none is in flight.
            self.sup.panicked(&panic);
            self.lost(ctx);
        }
    }

    /// Seals one block (empty only with [`Fill::EmptyAllowed`]) and hands
    /// it to preparation, then tells the policy. The actor takes no other
    /// message until the block is in the preparation mailbox.
    fn seal(&mut self, ctx: &mut Context<Self>, fill: Fill) {
        let start = Instant::now();
        let shards = self.shards.clone();
        let settings = self.settings.clone();
        let prepare = self.prepare.clone();
        let parent = self.parent;
        // Contained: this future runs outside any handler body, and a panic
        // in it would take the light arbiter (nonce, shards) down with it.
        let fut = Contained::new(async move {
            let txs = build::take_block(&shards, &settings, &Arc::default()).await;
            if txs.is_empty() && fill == Fill::TxsOnly {
                return None;
            }
            let timestamp = build::wall_clock_timestamp(&parent);
            let block = Arc::new(build::build_block(&parent, &settings, &txs, timestamp, None));
            let sealed = PrepareMsg { block: Arc::clone(&block), sealed_at: Instant::now(), delivery: None };
            if prepare.send(sealed).await.is_err() {
                tracing::error!(
                    number = block.header.number,
                    "block preparation stopped; block not delivered"
                );
                return None;
            }
            Some(block)
        });
        ctx.wait(fut.into_actor(self).map(move |sealed, act, ctx| {
            let sealed = sealed.unwrap_or_else(|panic| {
                // Transactions taken before the panic cannot be named here;
                // the failure counts towards escalation.
                tracing::error!(panic, "sealing a block panicked; transactions it took may be lost");
                act.sup.panicked(&panic);
                None
            });
            let now = Instant::now();
            let progressed = sealed.is_some();
            if let Some(block) = sealed {
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
            let decision = act.policy.seal_finished(now, progressed, act.counters.len());
            act.act(ctx, decision);
        }));
    }

    /// The flush is over: answer it and stop, which closes preparation's
    /// mailbox (for this sender) and lets the pipeline drain in order.
    fn finish_flush(&mut self, ctx: &mut Context<Self>, left: u64) {
        if left > 0 {
            match self.settings.mode {
                ProducerMode::Timer => {
                    tracing::error!(waiting = left, "mempool not empty but nothing could be sealed")
                }
                ProducerMode::OnRequest => tracing::warn!(
                    waiting = left,
                    "validator stopping with transactions in the mempool; only a leader may seal them"
                ),
            }
        }
        if let Some(reply) = self.flush_reply.take() {
            let _ = reply.send(());
        }
        ctx.stop();
    }
}

impl Actor for Producer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
        if self.settings.mode == ProducerMode::Timer {
            ctx.run_interval(self.settings.block_time, |act, ctx| {
                let decision = act.policy.tick(Instant::now(), act.counters.len());
                act.act(ctx, decision);
            });
            self.schedule_idle(ctx);
        }
    }
}

impl StreamHandler<ProducerMsg> for Producer {
    fn handle(&mut self, msg: ProducerMsg, ctx: &mut Context<Self>) {
        match msg {
            ProducerMsg::Wake => {
                let decision = self.policy.wake(Instant::now(), self.counters.len());
                self.act(ctx, decision);
            }
            ProducerMsg::Flush { reply } => {
                tracing::debug!(waiting = self.counters.len(), "flushing the mempool");
                self.flush_reply = Some(reply);
                // A waiting request is dropped: a stopping validator builds
                // nothing new.
                self.request = None;
                let decision = self.policy.flush(self.counters.len());
                self.act(ctx, decision);
            }
            ProducerMsg::Build { parent, timestamp, state_ref, exclude, reply } => {
                let request = on_request::Request { parent, timestamp, state_ref, exclude, reply };
                self.build_requested(ctx, request);
            }
            ProducerMsg::Restore { txs } => self.restore(ctx, txs),
        }
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        // The nonce actor holds a sender for wake-ups; the producer stops
        // only through `Flush`, so the mempool is never abandoned.
    }
}
