//! Block execution on revm 43.
//!
//! Plain functions, no actors: the execution stage drives a [`BlockExecutor`], the
//! RPC layer calls [`call()`] and [`estimate_gas`].
//!
//! # Invariants
//!
//! - Every executor's outcome (receipts, skips, gas used, change set) equals
//!   the sequential executor's ([`execute_block`], the oracle) on every
//!   block; only [`ExecStats`] says which path ran. Where a parallel path
//!   cannot be sure, it declines and the one journal runs the block, never
//!   a guess.
//! - A block is executed on the state after its parent (the caller executes
//!   blocks in order); nothing here writes state, an outcome is a change
//!   set for the store to apply.
//!
//! # Which path a block takes
//!
//! [`ParallelExecutor::execute_block`], as the node configures it. The path is
//! chosen before anything executes; a block gets one attempt on it, and an
//! attempt that gives up hands the block to the one journal, which is exact
//! on every block (it settles around what a kept journal cannot reproduce,
//! see [`journal`]). So no block is executed more than twice, and the
//! sequential executor is the oracle of the tests, not a path.
//!
//! ```text
//!  block, on its parent's state
//!    |
//!    |-- fewer than min_parallel_txs ----------------+
//!    |-- all plain transfers --> parallel/scheduled/ |
//!    |                             | done            |
//!    |                             | gave up: code, nonce or funds
//!    |                             |   unexpected ---+
//!    |-- one worker ---------------------------------+
//!    |-- admission busy, or lanes gave up lately ----+
//!    |     (parallel/rule.rs)                        |
//!    |                                               |
//!    v                                               v
//!  lanes (parallel/lanes/)             one journal (journal/), exact,
//!    | done                              settling where it must
//!    | gave up: creation, self-destruct,             ^
//!    |   EIP-7702, touched empty, gas left;          |
//!    |   or contention in the first chunks ----------+
//! ```
//!
//! Scheduled transfers and lanes run on every worker; everything else on
//! the calling thread. Within lanes a transaction executes at most twice
//! (speculated, then corrected).
//!
//! Layout:
//! - [`sequential`]: the in-order executor and the exact definition of a
//!   block's results (skips, receipts, change set).
//! - [`journal`]: in-order execution on one revm journal for the whole
//!   block, settling where a kept journal cannot reproduce a deletion; the
//!   path of every block that does not run in parallel.
//! - [`parallel`]: the parallel executor (scheduled transfers, lanes, the
//!   rule between lanes and in order), whose results equal the sequential executor's.
//! - [`keccak`]: a KECCAK256 instruction that remembers recent 64-byte
//!   preimages (mapping slots), installed by every executor but the oracle.
//! - [`stats`]: per-block execution statistics returned with each outcome.
//! - [`mod@call`]: `eth_call` and `eth_estimateGas` with geth's semantics.
//! - [`simulate`]: `eth_simulateV1` (geth's simulated blocks).
//! - [`access_list`]: `eth_createAccessList` (revm-inspectors).
//! - [`overrides`]: geth's state and block overrides for calls and traces.
//! - [`precompiles`]: each spec's precompiles with EIP-7910's names
//!   (`eth_config`).
//! - [`deadline`]: a caller's EVM run bounded in time (cancellable) and
//!   memory.
//! - [`db`]: revm's read interface over a [`StateReader`].
//! - [`testing`]: an in-memory [`StateReader`] for tests in any crate.
//! - [`trace`]: geth's `debug_trace*` tracers (revm-inspectors).
//! - [`parity`]: parity-style `trace_*` traces (revm-inspectors).
//! - [`ots`]: Otterscan's traces, internal operations, revert data and
//!   contract creations, from the same inspector's call arena.
//! - [`trace_limits`]: a trace call's deadline and output bound.
//! - `env` (private): translation of headers, config and transactions into
//!   revm environments. `block_state` (private): the block's working state.
//!   `prefetch` (private): the in-order loops' prefetch of the next
//!   transactions. `skip` (private): revm's refusals as skip reasons.

pub mod access_list;
mod block_state;
pub mod call;
pub mod db;
pub mod deadline;
mod env;
mod error;
pub mod journal;
pub mod keccak;
pub mod ots;
pub mod overrides;
pub mod parallel;
pub mod parity;
pub mod precompiles;
mod prefetch;
pub mod sequential;
pub mod simulate;
mod skip;
pub mod stats;
pub mod testing;
pub mod trace;
mod trace_geth;
pub mod trace_limits;

use alloy_primitives::B256;
use sluice_messages::{ChangeSet, PreparedBlock, Receipt, SkipReason};
use sluice_state::StateReader;

pub use access_list::{create_access_list, AccessListOutcome};
pub use call::{call, estimate_gas, CallOutcome, CallRequest};
pub use deadline::{CallLimits, Deadline};
pub use env::{ExecConfig, Spec};
pub use error::{revert_message, revert_reason, ExecError};
pub use journal::execute_block_one_journal;
pub use parallel::{Load, ParallelExecutor};
pub use sequential::execute_block;
pub use stats::{ExecPath, ExecStats, InOrder};

/// Everything a block's execution produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockOutcome {
    /// Receipts of the applied transactions, in block order.
    pub receipts: Vec<Receipt>,
    /// Transactions that could not be applied at their position, with why,
    /// in block order.
    pub skipped: Vec<(B256, SkipReason)>,
    /// Total gas used by the applied transactions.
    pub gas_used: u64,
    /// The block's state changes, in canonical order.
    pub changes: ChangeSet,
    /// How the block was executed (not part of its result: two executors
    /// produce equal receipts, skips and changes, not equal stats).
    pub stats: ExecStats,
}

/// Something that executes blocks. The execution stage holds one; the sequential
/// executor is the reference, a parallel one must produce equal outcomes.
pub trait BlockExecutor: Send {
    /// Executes `block` on top of `state` (the state after its parent).
    fn execute(&mut self, state: &dyn StateReader, block: &PreparedBlock) -> Result<BlockOutcome, ExecError>;
}

/// The in-order executor ([`execute_block`]) behind [`BlockExecutor`].
#[derive(Debug, Clone)]
pub struct SequentialExecutor {
    cfg: ExecConfig,
}

impl SequentialExecutor {
    /// An executor following `cfg`.
    pub fn new(cfg: ExecConfig) -> Self {
        SequentialExecutor { cfg }
    }

    /// Its configuration.
    pub fn config(&self) -> &ExecConfig {
        &self.cfg
    }
}

impl BlockExecutor for SequentialExecutor {
    fn execute(&mut self, state: &dyn StateReader, block: &PreparedBlock) -> Result<BlockOutcome, ExecError> {
        execute_block(state, &self.cfg, block)
    }
}
