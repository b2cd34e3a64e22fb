//! The parallel executor: plain transfers scheduled by footprint, contract
//! calls on lanes, and in order where neither pays.
//!
//! Every path's outcome (receipts, skips, gas, change set) equals
//! [`crate::sequential`]'s exactly. The one journal ([`crate::journal`]) is
//! the only fallback: where a parallel path cannot be sure, it gives up and
//! the journal runs the block, never a guess. The crate docs draw how a
//! block's path is chosen.
//!
//! - **Scheduled transfers** (`scheduled/`): a block of plain value
//!   transfers has its footprints (two accounts each) known before
//!   anything runs, so groups of transactions that share an account run
//!   in order on one worker and groups run in parallel, without the EVM,
//!   validation or re-runs.
//! - **Lanes** (`lanes/`): a block of contract calls in chunks of 16
//!   transactions, each worker running its chunks in order on its own
//!   revm journal and correcting them once the chunks before are final,
//!   one hand-off per chunk. A transaction executes at most twice. Lanes
//!   give up on what their kept journals cannot reproduce (creations,
//!   self-destructs, EIP-7702, accounts empty at block start touched) and
//!   on contention (most of the first chunks' transactions re-ran).
//! - **In order** on one journal ([`crate::journal`]) for blocks below
//!   `min_parallel_txs`, with one worker, whatever the paths above give
//!   up on, and where the rule (`rule.rs`) says lanes would lose: while
//!   admission recovers senders on the other cores, and for a while after
//!   lanes gave up on a block.
//!
//! Why lanes and not a multi-version (Block-STM) engine: measured side by
//! side, lanes beat it on every contract workload of the bench, and on
//! what lanes decline it ran no faster than in order (git keeps it:
//! `executor/src/occ/engine.rs`, before the commit that removed it).

mod fee;
mod lanes;
mod rule;
mod scheduled;
mod threads;
mod transfer;

use std::sync::{Arc, Mutex};

pub use rule::Load;
use rule::{Mode, Rule};
use sluice_messages::PreparedBlock;
use sluice_state::StateReader;
use threads::{lock, Workers};

use crate::{
    journal::execute_block_one_journal,
    stats::{ExecPath, InOrder},
    BlockExecutor, BlockOutcome, ExecConfig, ExecError,
};

/// How the scheduled path's attempt at a block ended. (Lanes take every
/// block they are given: theirs ends as a `Result`, the error saying why
/// they gave up.)
pub(crate) enum Attempt {
    /// The block's outcome.
    Done(BlockOutcome),
    /// The path does not apply to the block (not all plain transfers, or
    /// its threads could not be started): nothing was executed, another
    /// path may run it.
    NotMine,
    /// The path gave up, for this reason: the block runs in order on the
    /// one journal.
    Declined(InOrder),
}

/// The parallel executor behind [`BlockExecutor`].
#[derive(Debug)]
pub struct ParallelExecutor {
    cfg: ExecConfig,
    workers: Workers,
    min_parallel_txs: usize,
    /// Allocations kept from block to block for plain transfers: reusing
    /// them saves allocation and page faults on every block.
    scratch: Mutex<scheduled::Scratch>,
    /// Whether blocks of contract calls run on lanes or in order.
    rule: Mutex<Rule>,
}

impl Clone for ParallelExecutor {
    fn clone(&self) -> Self {
        Self::new(self.cfg, self.workers.len(), self.min_parallel_txs).with_load(lock(&self.rule).load())
    }
}

impl ParallelExecutor {
    /// Blocks with fewer transactions run in order by default: below this,
    /// waking threads costs more than it saves.
    pub const DEFAULT_MIN_PARALLEL_TXS: usize = 64;

    /// An executor with `workers` threads (the calling thread included; at
    /// least 1) that runs blocks of fewer than `min_parallel_txs`
    /// transactions in order.
    pub fn new(cfg: ExecConfig, workers: usize, min_parallel_txs: usize) -> Self {
        ParallelExecutor {
            cfg,
            workers: Workers::new(workers),
            min_parallel_txs,
            scratch: Mutex::default(),
            rule: Mutex::new(Rule::new(None)),
        }
    }

    /// Lets blocks of contract calls run in order while `load` (admission's
    /// recovery) moves between blocks: its threads then hold the cores
    /// lanes would hand chunks between. Without it (the default) they run
    /// on lanes unless lanes recently gave up. Both are exact; see
    /// `parallel/rule.rs`.
    pub fn with_load(mut self, load: Option<Arc<dyn Load>>) -> Self {
        self.rule = Mutex::new(Rule::new(load));
        self
    }

    /// An executor with one worker per available core and the default
    /// threshold.
    pub fn with_defaults(cfg: ExecConfig) -> Self {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(cfg, workers, Self::DEFAULT_MIN_PARALLEL_TXS)
    }

    /// Its configuration.
    pub fn config(&self) -> &ExecConfig {
        &self.cfg
    }

    /// Its number of worker threads.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Executes `block` on top of `state` (the state after its parent):
    /// one attempt on the path chosen for it, then, if that gives up, the
    /// one journal. No block is executed more than twice.
    pub fn execute_block(
        &self,
        state: &dyn StateReader,
        block: &PreparedBlock,
    ) -> Result<BlockOutcome, ExecError> {
        if block.txs.len() < self.min_parallel_txs {
            return self.in_order(state, block, InOrder::SmallBlock);
        }
        match scheduled::run(state, &self.cfg, block, &self.workers, &self.scratch)? {
            Attempt::Done(outcome) => Ok(outcome),
            Attempt::Declined(because) => self.in_order(state, block, because),
            // Lanes on one thread would be one journal plus bookkeeping.
            Attempt::NotMine if self.workers.len() == 1 => self.in_order(state, block, InOrder::Configured),
            Attempt::NotMine => self.contract_calls(state, block),
        }
    }

    /// A block of contract calls with 2+ workers: on lanes or in order on
    /// the one journal, as the rule says, told how lanes did.
    fn contract_calls(
        &self,
        state: &dyn StateReader,
        block: &PreparedBlock,
    ) -> Result<BlockOutcome, ExecError> {
        if let Mode::InOrder(because) = lock(&self.rule).choose() {
            return self.in_order(state, block, because);
        }
        match lanes::run(state, &self.cfg, block, &self.workers)? {
            Ok(outcome) => {
                lock(&self.rule).finished();
                Ok(outcome)
            }
            Err(because) => {
                lock(&self.rule).gave_up();
                self.in_order(state, block, because)
            }
        }
    }

    /// The block in order on one journal.
    fn in_order(
        &self,
        state: &dyn StateReader,
        block: &PreparedBlock,
        because: InOrder,
    ) -> Result<BlockOutcome, ExecError> {
        let mut outcome = execute_block_one_journal(state, &self.cfg, block)?;
        outcome.stats.path = ExecPath::Journal { because };
        outcome.stats.workers = self.workers.len() as u32;
        Ok(outcome)
    }
}

impl BlockExecutor for ParallelExecutor {
    fn execute(&mut self, state: &dyn StateReader, block: &PreparedBlock) -> Result<BlockOutcome, ExecError> {
        self.execute_block(state, block)
    }
}
