//! Per-block execution statistics, returned with every [`crate::BlockOutcome`]
//! so the caller can export them (this crate does not depend on `metrics`).

use std::time::Duration;

/// Which path produced a block's outcome (see the crate docs for how it is
/// chosen). Every path's outcome equals the sequential executor's; this
/// says only how it was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecPath {
    /// In order on the sequential executor (the oracle): the
    /// [`crate::SequentialExecutor`]'s blocks.
    Sequential {
        /// Why the block ran in order.
        because: InOrder,
    },
    /// In order on one revm journal for the whole block
    /// ([`crate::journal`]), because of `because`; also where every
    /// parallel attempt that gives up ends.
    Journal {
        /// Why the block ran in order.
        because: InOrder,
    },
    /// A block of plain transfers, scheduled by footprint on the workers
    /// (`parallel/scheduled`). `speculate` is the time spent executing the
    /// groups and building each worker's share of the output, `validate`
    /// the time spent planning them, `merge` joining the shares.
    Scheduled,
    /// A block of contract calls on lanes (`parallel/lanes`): chunks of
    /// transactions in order on each worker's own journal, corrected once
    /// the chunks before them are final. `reruns` counts the transactions
    /// executed again, `speculate` is the wall time and `validate` the time
    /// spent correcting chunks, summed over workers.
    Lanes,
}

impl Default for ExecPath {
    fn default() -> Self {
        ExecPath::Sequential { because: InOrder::Configured }
    }
}

impl ExecPath {
    /// A short stable name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecPath::Sequential { .. } => "sequential",
            ExecPath::Journal { .. } => "journal",
            ExecPath::Scheduled => "scheduled",
            ExecPath::Lanes => "lanes",
        }
    }

    /// Why the block ran in order; `None` when it ran in parallel.
    pub fn in_order(self) -> Option<InOrder> {
        match self {
            ExecPath::Sequential { because } | ExecPath::Journal { because } => Some(because),
            ExecPath::Scheduled | ExecPath::Lanes => None,
        }
    }
}

/// Why a block ran in order on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InOrder {
    /// The executor is the sequential one, or a parallel one with a single
    /// worker (speculation cannot gain anything on one thread; blocks of
    /// plain transfers still run scheduled).
    Configured,
    /// The block has fewer transactions than the parallel threshold.
    SmallBlock,
    /// Admission was recovering senders since the previous block of
    /// contract calls: its threads hold the cores lanes would hand chunks
    /// between (`parallel/rule.rs`).
    Busy,
    /// Lanes gave up on a recent block of contract calls, and the blocks
    /// after it run in order for a while (`parallel/rule.rs`).
    GaveUpRecently,
    /// The parallel attempt gave up on something it does not model (lanes:
    /// a creation, a self-destruct, EIP-7702, an account empty at block
    /// start touched, a transaction over the block's gas left; scheduled
    /// transfers: code at either end, a nonce or funds the plan did not
    /// expect, a coinbase EIP-161 would delete).
    Unsupported,
    /// The block is contended: on lanes, most transactions of the first
    /// chunks had to run again, so speculation was wasted work.
    Contention,
}

impl InOrder {
    /// A short stable name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            InOrder::Configured => "configured",
            InOrder::SmallBlock => "small_block",
            InOrder::Busy => "busy",
            InOrder::GaveUpRecently => "gave_up_recently",
            InOrder::Unsupported => "unsupported",
            InOrder::Contention => "contention",
        }
    }
}

/// What happened while executing one block. For the in-order paths only
/// `path` and `workers` are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExecStats {
    /// Which path produced the outcome, and why when it ran in order.
    pub path: ExecPath,
    /// Worker threads of the parallel executor (0 for the sequential one).
    pub workers: u32,
    /// Lanes: transactions executed again because a chunk before theirs
    /// changed what they read.
    pub reruns: u32,
    /// See [`ExecPath::Scheduled`] and [`ExecPath::Lanes`].
    pub speculate: Duration,
    /// See [`ExecPath::Scheduled`] and [`ExecPath::Lanes`].
    pub validate: Duration,
    /// See [`ExecPath::Scheduled`].
    pub merge: Duration,
    /// The one journal: how many times it settled within the block (see
    /// [`crate::journal`]).
    pub settles: u32,
}
