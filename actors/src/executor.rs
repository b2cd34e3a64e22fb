//! The execution stage: executes prepared blocks strictly in order.
//!
//! Runs alone on its own OS thread. It reads state through an overlay of
//! blocks it has executed but store commit has not yet written, so block
//! N+1 executes while block N is being committed; the commit mailbox holds
//! `commit_mailbox_blocks`, which bounds the overlay too. Execution goes
//! through the [`BlockExecutor`] interface: the node hands it an
//! [`sluice_executor::ParallelExecutor`] (built in `node/spawn.rs`), whose outcome
//! equals the sequential executor's.
//!
//! Faults are handled by [`run_blocking`]. A retry of the same block is
//! exact: the overlay gains the block's layer only after execution
//! succeeded. After a contained panic the overlay is rebuilt from the store
//! once store commit has caught up with every block already handed to it,
//! so the retried block runs on exactly its parent's state.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use actix::prelude::*;
use alloy_primitives::Address;
use sluice_executor::BlockExecutor;
use sluice_messages::{ExecutedBlock, PreparedBlock, PreparedTx};
use sluice_store::{Halt, Layer, Overlay, StateReader, Store};

use crate::{
    faults::{self, Site},
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    protocol::{CommitMsg, ExecuteMsg, SenderProgress},
    supervise::{report_abandoned, run_blocking, AttemptError, Inject, Stage, Supervisor},
};

/// The execution stage's actor.
pub struct Executor {
    engine: Box<dyn BlockExecutor + Send>,
    overlay: Overlay<Arc<Store>>,
    committed: Arc<AtomicU64>,
    commit: MailboxSender<CommitMsg>,
    rx: Option<MailboxReceiver<ExecuteMsg>>,
    metrics: ActorMetrics,
    sup: Supervisor,
    /// Height of the last block handed to store commit.
    last_sent: u64,
}

impl Executor {
    /// An execution stage over `store`, publishing to `commit`. `committed` is the
    /// height store commit has made durable; layers at or below it are
    /// dropped from the overlay.
    pub fn new(
        engine: Box<dyn BlockExecutor + Send>,
        store: Arc<Store>,
        committed: Arc<AtomicU64>,
        commit: MailboxSender<CommitMsg>,
        rx: MailboxReceiver<ExecuteMsg>,
    ) -> Self {
        let last_sent = store.head();
        Executor {
            engine,
            overlay: Overlay::new(store),
            committed,
            commit,
            rx: Some(rx),
            metrics: ActorMetrics::new("executor"),
            sup: Supervisor::new(Site::Executor),
            last_sent,
        }
    }

    fn execute(&mut self, block: &PreparedBlock) -> Option<CommitMsg> {
        self.overlay.committed(self.committed.load(Ordering::Acquire));
        let number = block.block.header.number;
        let start = Instant::now();
        let outcome = match self.engine.execute(&self.overlay, block) {
            Ok(o) => o,
            Err(e) => {
                // Only a state read can fail; executing on state we could
                // not read would diverge, so the node halts instead.
                tracing::error!(number, error = %e, "block execution failed; halting the store");
                self.overlay.base().halt(Halt::ExecutionFailed { height: number, cause: e.to_string() });
                metrics::gauge!(m::STORE_HALTED).set(1.0);
                return None;
            }
        };
        metrics::histogram!(m::EXECUTE_SECONDS).record(start.elapsed().as_secs_f64());
        record_exec_stats(&outcome.stats);
        metrics::histogram!(m::BLOCK_GAS_USED).record(outcome.gas_used as f64);
        metrics::gauge!(m::EXECUTED_HEIGHT).set(number as f64);
        if !outcome.skipped.is_empty() {
            metrics::counter!(m::TXS_SKIPPED).increment(outcome.skipped.len() as u64);
            for (hash, reason) in &outcome.skipped {
                // Recorded as a string, as before skips were data: a
                // `Display` field would print unquoted, changing the log line.
                let reason = reason.to_string();
                tracing::warn!(number, tx = %hash, reason, "transaction not applicable at its position; dropped");
            }
        }
        let raw_index = raw_positions(block, &outcome.receipts);
        let changes = Arc::new(outcome.changes);
        self.overlay.push(Layer::new(number, block.block.hash, Arc::clone(&changes)));
        let senders = self.sender_progress(block);
        Some(CommitMsg {
            block: ExecutedBlock {
                block: Arc::clone(&block.block),
                receipts: outcome.receipts,
                raw_index,
                skipped: outcome.skipped,
                gas_used: outcome.gas_used,
                changes,
                app_hash: Default::default(),
            },
            senders,
            delivery: None,
        })
    }

    /// Each sender of the block with its transaction count and its nonce
    /// after the block (read through the overlay, which now holds it).
    /// Store commit narrows the count to the transactions this node
    /// admitted.
    fn sender_progress(&self, block: &PreparedBlock) -> Vec<SenderProgress> {
        let mut counts: HashMap<Address, u32> = HashMap::new();
        for tx in &block.txs {
            if let PreparedTx::Ready(tx) = tx {
                *counts.entry(tx.sender).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .map(|(address, count)| {
                let nonce =
                    self.overlay.account(&address).ok().flatten().map(|a| a.nonce).unwrap_or_default();
                SenderProgress { address, count, nonce }
            })
            .collect()
    }
}

/// Exports what the executor reports about one block.
fn record_exec_stats(s: &sluice_executor::ExecStats) {
    let path = s.path.as_str();
    metrics::counter!(m::OCC_SETTLES).increment(u64::from(s.settles));
    if let Some(because) = s.path.in_order() {
        metrics::counter!(m::OCC_BLOCKS, "path" => path, "reason" => because.as_str()).increment(1);
    } else {
        metrics::counter!(m::OCC_BLOCKS, "path" => path).increment(1);
        metrics::counter!(m::OCC_RERUNS).increment(u64::from(s.reruns));
        metrics::histogram!(m::OCC_PHASE_SECONDS, "phase" => "speculate").record(s.speculate.as_secs_f64());
        metrics::histogram!(m::OCC_PHASE_SECONDS, "phase" => "validate").record(s.validate.as_secs_f64());
        metrics::histogram!(m::OCC_PHASE_SECONDS, "phase" => "merge").record(s.merge.as_secs_f64());
    }
}

/// For each receipt, the index of its transaction in the block (receipts
/// follow block order; skipped transactions have none).
fn raw_positions(block: &PreparedBlock, receipts: &[sluice_messages::Receipt]) -> Vec<u32> {
    let mut out = Vec::with_capacity(receipts.len());
    let mut next = 0;
    for r in receipts {
        while next < block.txs.len() {
            next += 1;
            if block.txs[next - 1].hash() == r.tx_hash {
                out.push((next - 1) as u32);
                break;
            }
        }
    }
    out
}

impl Actor for Executor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }
}

impl Stage for Executor {
    type Msg = ExecuteMsg;

    fn attempt(&mut self, msg: &ExecuteMsg, inject: Inject) -> Result<(), AttemptError> {
        inject.strike(Site::Executor)?;
        if self.overlay.base().halted().is_some() {
            return Ok(());
        }
        if let Some(mut commit) = self.execute(&msg.block) {
            commit.delivery = msg.delivery.clone();
            let number = commit.block.block.header.number;
            if self.commit.send_blocking(commit).is_err() {
                tracing::error!(number, "store commit stopped; executed block not delivered");
            }
            self.last_sent = number;
        }
        Ok(())
    }

    fn rebuild(&mut self) {
        // Blocks handed to store commit are on their way to the store; wait
        // for them rather than keep layers a panic may have left half-made.
        let store = Arc::clone(self.overlay.base());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.committed.load(Ordering::Acquire) < self.last_sent
            && store.halted().is_none()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        tracing::warn!(height = store.head(), "executor overlay rebuilt from the store");
        self.overlay = Overlay::new(store);
    }

    fn abandon(&mut self, msg: &ExecuteMsg) {
        report_abandoned("executor", msg.block.block.header.number, msg.block.txs.len());
    }

    fn supervisor(&mut self) -> &mut Supervisor {
        &mut self.sup
    }
}

impl StreamHandler<ExecuteMsg> for Executor {
    fn handle(&mut self, msg: ExecuteMsg, _ctx: &mut Context<Self>) {
        let start = Instant::now();
        if self.overlay.base().halted().is_some() {
            // Never build on state that could not be persisted; what the
            // block carried is reported, not silently lost.
            self.abandon(&msg);
            self.metrics.handled(start);
            return;
        }
        run_blocking(self, faults::point(Site::Executor), &msg);
        self.metrics.handled(start);
    }
}
