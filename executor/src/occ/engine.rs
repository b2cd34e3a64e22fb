//! The parallel run of one block: shared state, the worker loop, and the
//! assembly of the outcome.

use std::{
    panic::{self, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Mutex, TryLockError,
    },
    time::{Duration, Instant},
};

use revm::context::{BlockEnv, CfgEnv};
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_store::StateReader;

use super::{
    commit::{commit_ready, CoinbaseState, CommitState, Progress},
    footprint::{Outcome, TxOutcome},
    merge::{self, AccountFinal, MergePart},
    mv::{lock, MvMemory},
    threads::Workers,
    transfer::Rules,
    worker::Worker,
};
use crate::{
    db::DbError,
    env::{block_env, cfg_env},
    stats::{ExecMode, ExecStats, SequentialReason},
    BlockOutcome, ExecConfig, ExecError,
};

/// Why the parallel run stopped before the end.
#[derive(Debug)]
pub(crate) enum Abort {
    /// Reading state failed.
    Store(DbError),
    /// The block needs something the engine does not model: rerun it
    /// sequentially.
    Unsupported,
    /// The block is contended from its start: rerun it sequentially.
    Contended,
    /// Another worker aborted.
    Stopped,
}

/// Outcomes kept from one block to the next, at most.
const MAX_SPARE_OUTCOMES: usize = 4096;

/// What one block leaves to the next: allocations worth keeping.
#[derive(Debug)]
pub(crate) struct Spare {
    /// The multi-version memory, empty.
    pub(crate) mv: MvMemory,
    /// Outcomes to fill.
    pub(crate) outcomes: Vec<Outcome>,
}

impl From<DbError> for Abort {
    fn from(e: DbError) -> Self {
        Abort::Store(e)
    }
}

/// Everything the workers of one block share.
pub(crate) struct Shared<'a> {
    pub(crate) reader: &'a dyn StateReader,
    block: &'a PreparedBlock,
    pub(crate) block_env: BlockEnv,
    pub(crate) cfg_env: CfgEnv,
    /// What plain transfers are checked against; also the block's coinbase,
    /// base fee and gas limit.
    pub(crate) rules: Rules,
    pub(crate) max_incarnations: u32,
    pub(crate) mv: MvMemory,
    /// The coinbase as of some recent commit, for speculative reads.
    pub(crate) coinbase_hint: Mutex<CoinbaseState>,
    /// Each transaction's latest result, until the commit takes it.
    slots: Box<[Slot]>,
    /// The next transaction no worker has claimed.
    next: AtomicU32,
    /// How many transactions are committed.
    pub(crate) committed: AtomicU32,
    /// The rest of the block runs in order: stop claiming transactions.
    pub(crate) tail: AtomicBool,
    stop: AtomicBool,
    abort: Mutex<Option<Abort>>,
    /// Outcomes to reuse, shared out to workers when they start.
    pool: Mutex<Vec<Outcome>>,
    commit: Mutex<CommitState>,
}

impl std::fmt::Debug for Shared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("txs", &self.block.txs.len()).finish_non_exhaustive()
    }
}

impl<'a> Shared<'a> {
    fn new(
        reader: &'a dyn StateReader,
        cfg: &ExecConfig,
        block: &'a PreparedBlock,
        max_incarnations: u32,
        spare: Spare,
    ) -> Result<Self, DbError> {
        let header = &block.block.header;
        let cfg_env = cfg_env(cfg);
        let n = block.txs.len();
        let coinbase = CoinbaseState::new(reader.account(&header.coinbase)?);
        Ok(Shared {
            reader,
            block,
            block_env: block_env(header, cfg.spec),
            rules: Rules::new(cfg, header),
            cfg_env,
            max_incarnations: max_incarnations.max(1),
            mv: spare.mv,
            pool: Mutex::new(spare.outcomes),
            coinbase_hint: Mutex::new(coinbase.clone()),
            slots: (0..n).map(|_| Slot::default()).collect(),
            next: AtomicU32::new(0),
            committed: AtomicU32::new(0),
            tail: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            abort: Mutex::new(None),
            commit: Mutex::new(CommitState::new(n, coinbase)),
        })
    }

    /// The number of transactions.
    pub(crate) fn len(&self) -> u32 {
        u32::try_from(self.block.txs.len()).unwrap_or(u32::MAX)
    }

    pub(crate) fn tx(&self, index: u32) -> &'a PreparedTx {
        &self.block.txs[index as usize]
    }

    /// Claims transaction `index` if it is the next unclaimed one.
    pub(crate) fn claim(&self, index: u32) -> bool {
        self.next.compare_exchange(index, index + 1, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Makes `out`'s writes visible (unless its execution already did).
    pub(crate) fn publish(&self, index: u32, out: &TxOutcome, worker: &mut Worker<'_>) {
        if !out.published {
            let flagged = &mut worker.flagged;
            self.mv.publish(index, out.incarnation, out.account_writes.iter(), &out.slot_writes, flagged);
        }
    }

    pub(crate) fn unpublish(&self, index: u32, out: &TxOutcome) {
        self.mv.unpublish(index, out.account_writes.iter(), &out.slot_writes);
    }

    /// Hands transaction `index`'s result to the commit.
    fn store(&self, index: u32, out: Outcome) {
        let slot = &self.slots[index as usize];
        *lock(&slot.outcome) = Some(out);
        slot.ready.store(true, Ordering::Release);
    }

    /// Takes transaction `index`'s result, if it is stored.
    pub(crate) fn take(&self, index: u32) -> Option<Outcome> {
        let slot = &self.slots[index as usize];
        if !slot.ready.swap(false, Ordering::Acquire) {
            return None;
        }
        let out = lock(&slot.outcome).take();
        assert!(out.is_some(), "a result was flagged ready but not stored");
        out
    }

    /// Waits for the worker executing transaction `index` to store it.
    pub(crate) fn wait_for(&self, index: u32) -> Result<Outcome, Abort> {
        let mut spins = 0u32;
        loop {
            if let Some(out) = self.take(index) {
                return Ok(out);
            }
            if self.stop.load(Ordering::Acquire) {
                return Err(Abort::Stopped);
            }
            backoff(&mut spins);
        }
    }

    fn fail(&self, abort: Abort) {
        let mut slot = lock(&self.abort);
        if slot.is_none() || matches!(*slot, Some(Abort::Stopped)) {
            *slot = Some(abort);
        }
        self.stop.store(true, Ordering::Release);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Runs the commit if no other worker is running it.
    fn try_commit(&self, worker: &mut Worker<'_>) -> Result<Option<Progress>, Abort> {
        let mut st = match self.commit.try_lock() {
            Ok(st) => st,
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        commit_ready(self, worker, &mut st).map(Some)
    }
}

/// One transaction's hand-over from its worker to the commit.
#[derive(Debug, Default)]
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    /// Set after `outcome` is stored, so waiters need not take the lock.
    ready: AtomicBool,
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Transactions a worker claims at once: up to 8, while leaving every
/// worker dozens of chunks (more in flight means more stale reads).
fn claim_chunk(txs: u32, workers: usize) -> u32 {
    let workers = u32::try_from(workers).unwrap_or(u32::MAX).max(1);
    (txs / workers.saturating_mul(32)).clamp(1, 8)
}

/// One worker thread: speculate ahead and commit in order until every
/// transaction is committed, then build a share of the change set.
fn work(shared: &Shared<'_>, id: usize, workers: usize) -> Result<MergePart, Abort> {
    let spare = {
        let mut pool = lock(&shared.pool);
        let keep = pool.len().saturating_sub(pool.len().div_ceil(workers));
        pool.split_off(keep)
    };
    let mut worker = Worker::new(shared, spare);
    let n = shared.len();
    let chunk = claim_chunk(n, workers);
    loop {
        if shared.stopped() {
            return Err(Abort::Stopped);
        }
        shared.try_commit(&mut worker)?;
        if shared.tail.load(Ordering::Acquire) {
            break;
        }
        // A few consecutive transactions at a time: each sees its
        // predecessors' writes, and the worker that executed them usually
        // commits them too, while they are still in its cache.
        let first = shared.next.fetch_add(chunk, Ordering::AcqRel);
        if first >= n {
            break;
        }
        for index in first..(first + chunk).min(n) {
            let out = worker.execute(index, 0, None)?;
            shared.publish(index, &out, &mut worker);
            shared.store(index, out);
        }
    }
    let mut spins = 0;
    while shared.committed.load(Ordering::Acquire) < n {
        if shared.stopped() {
            return Err(Abort::Stopped);
        }
        match shared.try_commit(&mut worker)? {
            Some(Progress::Done) => break,
            // Whoever runs the commit in order keeps it to the end.
            None if shared.tail.load(Ordering::Acquire) => break,
            _ => backoff(&mut spins),
        }
    }
    lock(&shared.pool).extend(worker.into_spare());
    // The last commit happens-before this: every write is final.
    while shared.committed.load(Ordering::Acquire) < n {
        if shared.stopped() {
            return Err(Abort::Stopped);
        }
        backoff(&mut spins);
    }
    let coinbase = AccountFinal::coinbase(shared.rules.coinbase, &lock(&shared.commit).coinbase);
    Ok(merge::merge_part(shared.reader, &shared.mv, coinbase, id, workers)?)
}

/// A worker thread's body: a panic stops the others (which would otherwise
/// wait for its transaction forever) before it propagates.
fn guarded(shared: &Shared<'_>, id: usize, workers: usize) -> Option<MergePart> {
    match panic::catch_unwind(AssertUnwindSafe(|| work(shared, id, workers))) {
        Ok(Ok(part)) => Some(part),
        Ok(Err(abort)) => {
            shared.fail(abort);
            None
        }
        Err(payload) => {
            shared.fail(Abort::Stopped);
            panic::resume_unwind(payload)
        }
    }
}

/// Executes `block` with `workers` threads (the caller's included) using
/// the previous block's `spare` allocations (`spare.mv` empty), returned for
/// the next block when all went well. `Ok((Err(reason), _))`: the block must be executed
/// sequentially instead.
pub(crate) fn run(
    reader: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    threads: &Workers,
    max_incarnations: u32,
    spare: Spare,
) -> Result<(Result<BlockOutcome, SequentialReason>, Option<Spare>), ExecError> {
    let start = Instant::now();
    let shared = Shared::new(reader, cfg, block, max_incarnations, spare)?;
    let workers = threads.len();
    let Some(parts) = threads.each(|id| guarded(&shared, id, workers)) else {
        return Ok((Err(SequentialReason::Configured), None));
    };
    match lock(&shared.abort).take() {
        Some(Abort::Store(e)) => return Err(e.into()),
        Some(Abort::Unsupported) => return Ok((Err(SequentialReason::Unsupported), None)),
        Some(Abort::Contended) => return Ok((Err(SequentialReason::Contention), None)),
        Some(Abort::Stopped) | None => {}
    }
    let parts: Vec<MergePart> = parts.into_iter().flatten().collect();
    assert!(parts.len() == workers, "a worker stopped without a reason");
    let mv = shared.mv;
    let mut outcomes = shared.pool.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut st = shared.commit.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    outcomes.extend(st.drain_recent());
    let speculate = st.done_at.map_or(Duration::ZERO, |t| t.duration_since(start));
    let changes = merge::assemble(parts);
    let stats = ExecStats {
        mode: match st.sequential {
            Some((reason, _)) => ExecMode::Sequential { reason },
            None => ExecMode::Parallel,
        },
        sequential_from: st.sequential.map(|(_, from)| from),
        workers: u32::try_from(workers).unwrap_or(u32::MAX),
        conflicts: st.conflicts,
        reruns: st.reruns,
        max_rerun_depth: st.max_depth,
        scheduled: false,
        lanes: false,
        fast_transfers: st.fast,
        speculate,
        validate: st.validate_time,
        merge: start.elapsed().saturating_sub(speculate),
    };
    let outcome =
        BlockOutcome { receipts: st.receipts, skipped: st.skipped, gas_used: st.gas_used, changes, stats };
    outcomes.truncate(MAX_SPARE_OUTCOMES);
    Ok((Ok(outcome), Some(Spare { mv, outcomes })))
}

/// Marks an outcome of the sequential executor run in place of the parallel
/// one.
pub(crate) fn sequential_stats(outcome: &mut BlockOutcome, reason: SequentialReason, workers: usize) {
    outcome.stats = ExecStats {
        mode: ExecMode::Sequential { reason },
        workers: u32::try_from(workers).unwrap_or(u32::MAX),
        ..ExecStats::default()
    };
}
