//! The ordered optimistic-concurrency executor (Block-STM style).
//!
//! A block's transactions run speculatively on a pool of workers and are
//! committed strictly in block order; the outcome (receipts, skips, gas,
//! change set) equals [`crate::sequential`]'s exactly. The sequential
//! executor is the oracle: where this engine cannot be sure, it runs in
//! order or hands the block to the sequential executor, never guesses.
//!
//! Three parallel paths, tried in this order:
//! - blocks of plain value transfers run scheduled by their footprints,
//!   without the EVM (`scheduled/`);
//! - with [`OccExecutor::with_lanes`] (the node's default), blocks of
//!   contract calls run on **lanes** (`relay/`): chunks of 16 transactions,
//!   each worker running its chunks in order on its own revm journal and
//!   correcting them once the chunks before are final, one hand-off per
//!   chunk. On two cores this is the fastest path for cheap contract calls
//!   (ERC-20 transfers), where handing results between cores per
//!   transaction costs as much as executing them;
//! - everything else (creations, self-destructs, or lanes off) runs on the
//!   **multi-version engine** described below.
//!
//! # Design of the multi-version engine
//!
//! - **Multi-version memory** (`mv.rs`): per location (an account's balance,
//!   nonce, code, existence; each storage slot) the value each transaction
//!   wrote, tagged with its version (transaction, incarnation). Transaction
//!   `k` reads the latest write of a transaction before `k`, else the
//!   block-start state, and records which version it saw.
//! - **Workers** (scoped threads, the caller's included) claim transactions
//!   in block order, a few consecutive ones at a time, and execute them
//!   against that memory (`worker.rs`), publishing their writes at once so
//!   later transactions see them. One EVM per worker, reused; plain value
//!   transfers skip the interpreter entirely (`transfer.rs`) and update
//!   their two accounts under their two shard locks.
//! - **Ordered commit** (`commit.rs`): after each execution a worker tries
//!   the commit lock; its holder commits transactions in order while their
//!   results are ready. A result is valid when every read still sees the
//!   same version (or, after a predecessor re-ran, the same value) now that
//!   everything before it is committed, i.e. final. An invalid result is
//!   re-run right there against the committed prefix (incarnation + 1),
//!   which is exact by construction. Cheap cases first: a transaction that
//!   started when all its predecessors were committed needs no validation;
//!   one whose reads all came from transactions committed before it started
//!   only needs its reads compared with the writes of those committed since
//!   (kept by the commit), without touching the shared memory.
//! - **Fees as deltas**: the EVM does not pay the coinbase (the handler
//!   defers the reward); the commit adds each transaction's fee to the
//!   coinbase in order. The coinbase account is never versioned: a
//!   transaction that reads it (BALANCE, a transfer to it...) is served the
//!   committed state and checked against the exact prefix at commit, so it
//!   sees every earlier fee.
//! - **No intermediate state**: nothing is materialized per transaction. When
//!   every transaction is committed, only committed versions remain in the
//!   memory; the workers turn it into the change set in parallel, each for a
//!   range of addresses so that the parts just concatenate (`merge.rs`),
//!   replaying the sequential overlay's rules per account.
//! - **Low allocation**: outcomes are recycled (per worker, and from block
//!   to block with the multi-version memory), because with glibc an
//!   allocation freed on another thread contends for that thread's arena
//!   lock; the memory is cleared on one thread when the next block starts.
//! - **Skips** are the sequential executor's: an invalid or blob transaction
//!   is skipped without reading anything; revm's refusals (nonce, funds...)
//!   are results like any other, validated by their reads; "gas limit above
//!   the block gas left" is decided at commit, and the transaction's
//!   speculative writes are withdrawn.
//!
//! # A transaction's life
//!
//! ```text
//!             claim (in block order)
//!   Pending ─────────────────────────▶ Executing(inc) ──publish writes──▶ Executed(inc)
//!      │                                    ▲                                 │
//!      │ commit reaches it unclaimed:       │ reads stale:                    │ commit reaches it
//!      │ run on the exact prefix            │ re-run on the exact prefix      ▼
//!      └────────────────────────────────────┼──────────────────────────── Validating
//!                                           └── (inc + 1) ◀── invalid ──────┤
//!                                                                           │ valid / exact
//!                                                                           ▼
//!                                                Committed: receipt, gas, coinbase fee
//! ```
//!
//! # Falling back
//!
//! - Blocks below `min_parallel_txs`, and with one worker every block but
//!   those of plain transfers, run in order: on one revm journal
//!   ([`crate::journal`]) when it accepts the block, else on the sequential
//!   executor.
//! - When a transaction fails validation after `max_incarnations`
//!   executions, or when most recent speculative results needed a re-run
//!   (speculation is wasted on a contended block), workers stop speculating
//!   and the commit runs the rest of the block in order (still exact, on the
//!   committed prefix); the stats say so and from where.
//! - A block that is contended from its start (among its first 64 commits,
//!   three in four write a location one of the previous four wrote: a
//!   dependency chain, which no schedule runs in parallel) is handed to the
//!   sequential executor: it does in-order execution without the
//!   multi-version bookkeeping, and little work is thrown away.
//! - With [`OccExecutor::with_adaptive`], a block of contract calls runs in
//!   order when that has recently been faster per gas than speculating
//!   (`adaptive.rs`): on two cores, cheap calls such as ERC-20 transfers
//!   run faster on one journal than on two speculating workers.
//! - Creating, destroying or deleting (EIP-161) an existing coinbase account
//!   would need its storage wiped, which is not modelled: the whole block is
//!   re-run sequentially.

mod adaptive;
mod cell;
mod commit;
mod db;
mod engine;
mod fee;
mod footprint;
mod merge;
mod mv;
mod relay;
mod scheduled;
mod small;
mod threads;
mod transfer;
mod worker;

use std::{sync::Mutex, time::Instant};

use adaptive::{Chooser, Mode};
use engine::Spare;
use mv::{lock, MvMemory};
use sluice_messages::PreparedBlock;
use sluice_store::StateReader;
use threads::Workers;

use crate::{
    journal::execute_block_one_journal,
    sequential::execute_block,
    stats::{ExecMode, SequentialReason},
    BlockExecutor, BlockOutcome, ExecConfig, ExecError,
};

/// The parallel executor behind [`BlockExecutor`].
#[derive(Debug)]
pub struct OccExecutor {
    cfg: ExecConfig,
    workers: Workers,
    min_parallel_txs: usize,
    max_incarnations: u32,
    /// Allocations of the last block (its multi-version memory, cleared,
    /// and spare outcomes): reusing them saves allocation and page faults
    /// on every block.
    spare: Mutex<Option<Spare>>,
    /// Likewise for blocks of plain transfers.
    scratch: Mutex<scheduled::Scratch>,
    /// Whether blocks of contract calls speculate or run in order (off
    /// unless [`OccExecutor::with_adaptive`]).
    chooser: Mutex<Chooser>,
    /// Whether blocks of contract calls run on lanes first.
    lanes: bool,
}

impl Clone for OccExecutor {
    fn clone(&self) -> Self {
        Self::new(self.cfg, self.workers.len(), self.min_parallel_txs, self.max_incarnations)
            .with_adaptive(lock(&self.chooser).explore_every_blocks())
            .with_lanes(self.lanes)
    }
}

impl OccExecutor {
    /// Blocks with fewer transactions run sequentially by default: below
    /// this, starting threads costs more than it saves.
    pub const DEFAULT_MIN_PARALLEL_TXS: usize = 64;
    /// Executions of one transaction before the rest of its block runs in
    /// order, by default.
    pub const DEFAULT_MAX_INCARNATIONS: u32 = 10;

    /// An executor with `workers` threads (the calling thread included; at
    /// least 1) that runs blocks of fewer than `min_parallel_txs`
    /// transactions sequentially, and falls back to in-order execution when
    /// a transaction needs more than `max_incarnations` executions (at least
    /// 1).
    pub fn new(cfg: ExecConfig, workers: usize, min_parallel_txs: usize, max_incarnations: u32) -> Self {
        OccExecutor {
            cfg,
            workers: Workers::new(workers),
            min_parallel_txs,
            max_incarnations: max_incarnations.max(1),
            spare: Mutex::new(None),
            scratch: Mutex::default(),
            chooser: Mutex::new(Chooser::new(0)),
            lanes: false,
        }
    }

    /// Runs blocks of contract calls on lanes (`occ/relay`: chunks of
    /// transactions in order on each worker's own journal, one hand-off
    /// per chunk) before the multi-version engine, which then runs only
    /// what lanes decline: creations, self-destructs and the like. Lanes
    /// execute a transaction at most twice, so with `max_incarnations`
    /// below 2 they are not used.
    pub fn with_lanes(mut self, lanes: bool) -> Self {
        self.lanes = lanes;
        self
    }

    /// Lets the executor choose, per block of contract calls, between
    /// speculating on its workers and running in order on one journal:
    /// whichever was faster per gas in recent explorations (each compared
    /// with the blocks around it), the other every `explore_every_blocks`
    /// blocks, or up to 4x less often while tries agree (0: always
    /// speculate, the default).
    /// Both are exact; see `occ/adaptive.rs` for why this is measured.
    pub fn with_adaptive(mut self, explore_every_blocks: u32) -> Self {
        self.chooser = Mutex::new(Chooser::new(explore_every_blocks));
        self
    }

    /// An executor with one worker per available core and the default
    /// thresholds.
    pub fn with_defaults(cfg: ExecConfig) -> Self {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(cfg, workers, Self::DEFAULT_MIN_PARALLEL_TXS, Self::DEFAULT_MAX_INCARNATIONS)
    }

    /// Its configuration.
    pub fn config(&self) -> &ExecConfig {
        &self.cfg
    }

    /// Its number of worker threads.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Executes `block` on top of `state` (the state after its parent).
    pub fn execute_block(
        &self,
        state: &dyn StateReader,
        block: &PreparedBlock,
    ) -> Result<BlockOutcome, ExecError> {
        let reason = if block.txs.len() < self.min_parallel_txs {
            SequentialReason::SmallBlock
        } else if let Some(outcome) = scheduled::run(state, &self.cfg, block, &self.workers, &self.scratch)? {
            return Ok(outcome);
        } else if self.workers.len() == 1 {
            // Speculation on one thread is pure bookkeeping: in order on
            // one journal is faster (ERC-20 transfers: ~13 vs ~20 ms per
            // 5,000).
            SequentialReason::Configured
        } else {
            let mode = lock(&self.chooser).choose();
            let start = Instant::now();
            let outcome = match mode {
                Mode::Parallel => self.speculate(state, block)?,
                Mode::InOrder => {
                    let mut outcome = self.in_order(state, block)?;
                    engine::sequential_stats(&mut outcome, SequentialReason::Adaptive, self.workers.len());
                    outcome
                }
            };
            let given_up =
                mode == Mode::Parallel && matches!(outcome.stats.mode, ExecMode::Sequential { .. });
            if given_up {
                lock(&self.chooser).record_given_up(outcome.gas_used, start.elapsed());
            } else {
                lock(&self.chooser).record(mode, outcome.gas_used, start.elapsed());
            }
            return Ok(outcome);
        };
        let mut outcome = self.in_order(state, block)?;
        engine::sequential_stats(&mut outcome, reason, self.workers.len());
        Ok(outcome)
    }

    /// The block on lanes if enabled, else (or if lanes decline it) on the
    /// multi-version engine; in order if that gives up on it.
    fn speculate(&self, state: &dyn StateReader, block: &PreparedBlock) -> Result<BlockOutcome, ExecError> {
        if self.lanes && self.max_incarnations >= 2 {
            match relay::run(state, &self.cfg, block, &self.workers)? {
                Ok(outcome) => return Ok(outcome),
                Err(SequentialReason::Contention) => {
                    let mut outcome = self.in_order(state, block)?;
                    engine::sequential_stats(&mut outcome, SequentialReason::Contention, self.workers.len());
                    return Ok(outcome);
                }
                // Creations, self-destructs...: the multi-version engine
                // models them.
                Err(_) => {}
            }
        }
        let spare = match lock(&self.spare).take() {
            Some(mut spare) => {
                spare.mv.reset();
                spare
            }
            None => Spare { mv: MvMemory::new(2 * block.txs.len() + 1), outcomes: Vec::new() },
        };
        let reason = match engine::run(state, &self.cfg, block, &self.workers, self.max_incarnations, spare)?
        {
            (Ok(outcome), spare) => {
                *lock(&self.spare) = spare;
                return Ok(outcome);
            }
            (Err(reason), _) => reason,
        };
        let mut outcome = self.in_order(state, block)?;
        engine::sequential_stats(&mut outcome, reason, self.workers.len());
        Ok(outcome)
    }

    /// The block in order: on one journal, which is equal to the
    /// sequential executor and faster but declines blocks that create or
    /// destroy accounts, else on the sequential executor.
    fn in_order(&self, state: &dyn StateReader, block: &PreparedBlock) -> Result<BlockOutcome, ExecError> {
        match execute_block_one_journal(state, &self.cfg, block)? {
            Some(outcome) => Ok(outcome),
            None => execute_block(state, &self.cfg, block),
        }
    }
}

impl BlockExecutor for OccExecutor {
    fn execute(&mut self, state: &dyn StateReader, block: &PreparedBlock) -> Result<BlockOutcome, ExecError> {
        self.execute_block(state, block)
    }
}
