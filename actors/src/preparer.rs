//! Block preparation: turns a sealed block into a prepared one (decoded
//! transactions with their senders), ahead of execution.
//!
//! Runs alone on its own OS thread (an arbiter of its own), because hashing
//! and sender recovery are CPU work that must not stall other actors'
//! event loops. Senders recovered at admission come from the
//! prepared-transaction cache; misses are recovered here over
//! `prepare_workers` threads. The execution stage's mailbox holds
//! `prepare_ahead_blocks` blocks: that is how far preparation runs ahead.
//!
//! Faults are handled by [`run_blocking`]: preparation has no chain state
//! (the cache is only an accelerator), so a contained panic just retries the
//! same sealed block.

use std::{sync::Arc, time::Instant};

use actix::prelude::*;
use alloy_consensus::Transaction;
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_store::{StateReader, Store};
use sluice_txpool::{prepare_block_timed, PreparedTxCache};

use crate::{
    faults::{self, Site},
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    protocol::{ExecuteMsg, PrepareMsg},
    supervise::{report_abandoned, run_blocking, AttemptError, Inject, Stage, Supervisor},
};

/// The preparation actor.
pub struct Preparer {
    cache: Arc<PreparedTxCache>,
    /// Read to warm its state cache ahead of execution.
    store: Arc<Store>,
    chain_id: u64,
    workers: usize,
    executor: MailboxSender<ExecuteMsg>,
    rx: Option<MailboxReceiver<PrepareMsg>>,
    metrics: ActorMetrics,
    reported: (u64, u64, u64),
    sup: Supervisor,
}

impl Preparer {
    /// A preparer feeding `executor`.
    pub fn new(
        cache: Arc<PreparedTxCache>,
        store: Arc<Store>,
        chain_id: u64,
        workers: usize,
        executor: MailboxSender<ExecuteMsg>,
        rx: MailboxReceiver<PrepareMsg>,
    ) -> Self {
        Preparer {
            cache,
            store,
            chain_id,
            workers,
            executor,
            rx: Some(rx),
            metrics: ActorMetrics::new("preparer"),
            reported: (0, 0, 0),
            sup: Supervisor::new(Site::Preparer),
        }
    }

    /// Turns the cache's cumulative counters into metric increments.
    fn report_cache(&mut self) {
        let now = (self.cache.hits(), self.cache.misses(), self.cache.evictions());
        metrics::counter!(m::CACHE_HITS).increment(now.0 - self.reported.0);
        metrics::counter!(m::CACHE_MISSES).increment(now.1 - self.reported.1);
        metrics::counter!(m::CACHE_EVICTIONS).increment(now.2 - self.reported.2);
        metrics::gauge!(m::CACHE_SIZE).set(self.cache.len() as f64);
        self.reported = now;
    }
}

impl Actor for Preparer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }
}

impl Stage for Preparer {
    type Msg = PrepareMsg;

    fn attempt(&mut self, msg: &PrepareMsg, inject: Inject) -> Result<(), AttemptError> {
        inject.strike(Site::Preparer)?;
        let start = Instant::now();
        let (txs, phases) = prepare_block_timed(&msg.block.txs, &self.cache, self.chain_id, self.workers);
        let number = msg.block.header.number;
        warm(&self.store, &txs);
        metrics::histogram!(m::PREPARE_SECONDS).record(start.elapsed().as_secs_f64());
        metrics::histogram!(m::PREPARE_PHASE_SECONDS, "phase" => "hash").record(phases.hash.as_secs_f64());
        metrics::histogram!(m::PREPARE_PHASE_SECONDS, "phase" => "lookup")
            .record(phases.lookup.as_secs_f64());
        metrics::histogram!(m::PREPARE_PHASE_SECONDS, "phase" => "recover")
            .record(phases.recover.as_secs_f64());
        // How far preparation runs ahead of execution, in blocks waiting.
        metrics::gauge!(m::PREPARED_AHEAD).set(self.executor.depth() as f64);
        metrics::gauge!(m::PREPARED_HEIGHT).set(number as f64);
        self.report_cache();
        // This thread is ours alone: blocking here is the backpressure that
        // stops the producer when execution is behind.
        let prepared = PreparedBlock { block: Arc::clone(&msg.block), txs };
        let execute = ExecuteMsg { block: prepared, delivery: msg.delivery.clone() };
        if self.executor.send_blocking(execute).is_err() {
            tracing::error!(number, "executor stopped; prepared block not delivered");
        }
        Ok(())
    }

    fn rebuild(&mut self) {
        // No chain state here; restart the cache counters' baseline so a
        // half-reported interval is not counted twice.
        self.reported = (self.cache.hits(), self.cache.misses(), self.cache.evictions());
    }

    fn abandon(&mut self, msg: &PrepareMsg) {
        report_abandoned("preparer", msg.block.header.number, msg.block.txs.len());
    }

    fn supervisor(&mut self) -> &mut Supervisor {
        &mut self.sup
    }
}

impl StreamHandler<PrepareMsg> for Preparer {
    fn handle(&mut self, msg: PrepareMsg, _ctx: &mut Context<Self>) {
        let start = Instant::now();
        run_blocking(self, faults::point(Site::Preparer), &msg);
        self.metrics.handled(start);
    }
}

/// Reads each transaction's sender and recipient through the store's state
/// cache, so that execution (the ordered, critical path) finds them in
/// memory: with more accounts than the cache holds, most recipients of a
/// block are misses, and this thread, a block or two ahead, takes their
/// database reads instead of the executor. Values read here are never
/// used: the executor reads again (through its overlay), and errors are
/// its to report.
fn warm(store: &Store, txs: &[PreparedTx]) {
    for tx in txs {
        if let PreparedTx::Ready(tx) = tx {
            let _ = store.account(&tx.sender);
            if let Some(to) = tx.tx.to() {
                let _ = store.account(&to);
            }
        }
    }
}
