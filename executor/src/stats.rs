//! Per-block execution statistics, returned with every [`crate::BlockOutcome`]
//! so the caller can export them (this crate does not depend on `metrics`).

use std::time::Duration;

/// Why a block (or the rest of it) ran in order on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SequentialReason {
    /// The executor is the sequential one, or a parallel one with a single
    /// worker (speculation cannot gain anything on one thread): nothing was
    /// attempted in parallel, except a block of plain transfers, which
    /// runs scheduled by footprint (`ExecStats::scheduled`) with any
    /// number of workers.
    #[default]
    Configured,
    /// The block has fewer transactions than the parallel threshold.
    SmallBlock,
    /// A transaction failed validation after `max_incarnations` executions;
    /// the rest of the block ran in order.
    MaxIncarnations,
    /// The block is contended: most transactions depend on their
    /// predecessors, so speculation is wasted work. Found among the first
    /// commits (each writing what one of the few before it wrote, or most
    /// speculative results invalid; on lanes, most transactions of the
    /// first chunks had to run again), the whole block is re-run in order
    /// (`sequential_from` is `None`); found later by the multi-version
    /// engine, the rest of the block ran in order.
    Contention,
    /// The executor chooses per block between speculation and in-order
    /// execution, and in-order has recently been faster per gas
    /// ([`crate::occ::OccExecutor::with_adaptive`]).
    Adaptive,
    /// Something the parallel engine does not model (the coinbase account
    /// being created, destroyed or deleted); the whole block was re-run by
    /// the sequential executor.
    Unsupported,
}

impl SequentialReason {
    /// A short stable name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            SequentialReason::Configured => "configured",
            SequentialReason::SmallBlock => "small_block",
            SequentialReason::MaxIncarnations => "max_incarnations",
            SequentialReason::Contention => "contention",
            SequentialReason::Adaptive => "adaptive",
            SequentialReason::Unsupported => "unsupported",
        }
    }
}

/// How a block was executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMode {
    /// Every transaction was executed optimistically by the worker pool and
    /// committed in block order after validation (re-running it when needed).
    Parallel,
    /// The block, or its tail from [`ExecStats::sequential_from`] on, ran in
    /// order on one thread.
    Sequential {
        /// Why.
        reason: SequentialReason,
    },
}

impl Default for ExecMode {
    fn default() -> Self {
        ExecMode::Sequential { reason: SequentialReason::Configured }
    }
}

impl ExecMode {
    /// `"parallel"` or `"sequential"`, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecMode::Parallel => "parallel",
            ExecMode::Sequential { .. } => "sequential",
        }
    }
}

/// What happened while executing one block. All zero (and mode
/// `Sequential { Configured }`) for the sequential executor.
///
/// The phases of the parallel executor overlap: `speculate` is the wall time
/// from the start until the last transaction was committed, during which
/// workers execute ahead while whichever worker holds the commit validates
/// and commits in order; `validate` is the part of that time spent holding
/// the commit (validation, in-order re-execution, receipts), summed over
/// threads; `merge` is the wall time spent building the change set after the
/// last commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExecStats {
    /// Parallel, or sequential and why.
    pub mode: ExecMode,
    /// For a block that started in parallel and fell back: the index (in
    /// `block.txs`) of the first transaction that ran in order. `None` when
    /// the whole block ran one way.
    pub sequential_from: Option<u32>,
    /// Worker threads of the parallel executor (0 for the sequential one).
    pub workers: u32,
    /// Transactions whose speculative result failed validation.
    pub conflicts: u32,
    /// Executions beyond each transaction's first (re-runs after a failed
    /// validation).
    pub reruns: u32,
    /// The highest incarnation any transaction reached (0: none re-ran).
    pub max_rerun_depth: u32,
    /// Transactions executed as plain value transfers, without the EVM
    /// interpreter (counting re-runs).
    pub fast_transfers: u32,
    /// The block was all plain transfers and ran without the multi-version
    /// memory: split into groups of transactions that share accounts, each
    /// group in order on one worker (`occ/scheduled`). Then `validate` is
    /// the time spent planning the groups, `speculate` executing them and
    /// building each worker's share of the receipts and change set, and
    /// `merge` joining the shares.
    pub scheduled: bool,
    /// The block ran on lanes (`occ/relay`): chunks of transactions in
    /// order on each worker's own journal, corrected once the chunks before
    /// them were final. Then `conflicts` and `reruns` count the
    /// transactions executed again, `speculate` is the wall time and
    /// `validate` the time spent correcting chunks, summed over workers.
    pub lanes: bool,
    /// See the type's documentation.
    pub speculate: Duration,
    /// See the type's documentation.
    pub validate: Duration,
    /// See the type's documentation.
    pub merge: Duration,
}
