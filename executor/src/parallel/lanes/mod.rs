//! Lanes: the block in chunks, each worker running its chunks in order on
//! its own journal, handing the next chunk's worker one write set per
//! chunk.
//!
//! Handing results between cores per transaction (as a multi-version
//! engine does) costs about as much as a cheap contract call (~1 us
//! measured): two such workers lost to one journal on ERC-20 transfers. Here the unit of hand-off is a chunk of [`CHUNK_TXS`]
//! transactions. Chunk `k` belongs to worker `k mod n`, which keeps a
//! revm journal across its chunks as its replica of the block state:
//!
//! 1. **Speculate**: run chunk `k` in order on the replica. The replica
//!    lacks the `n - 1` chunks before `k` (other workers are running them),
//!    so results are provisional. Each run notes the keys (account, slot)
//!    it read and the values it changed (`entry.rs`: revm's own journal
//!    entries, noted as they are built).
//! 2. **Correct**, as soon as the chunks before `k` are final (each comes
//!    as the final values of what it changed), at the next transaction
//!    boundary or at the chunk's end, whichever is first
//!    (`correct.rs`): the keys those chunks changed are dirty, and so is
//!    the coinbase (fees are credited here, in order, so only this step
//!    sees it exact). A run that read no dirty key read exactly what it
//!    would have read after those chunks: it stands. From the first run
//!    that read a dirty key, the chunk's writes are undone, the other
//!    chunks' values written, and each later run either redone (nothing it
//!    read is dirty) or executed again on the now exact state (and what
//!    either execution changed becomes dirty). Receipts take their index
//!    and cumulative gas here.
//! 3. **Run exact**: the rest of the chunk runs on exact state, each
//!    transaction final as it runs.
//! 4. **Hand on** the chunk's final values and the gas used, fees credited
//!    to the coinbase; then, while the next chunk is being corrected,
//!    build the chunk's receipts, and append those of every chunk built
//!    so far, in order, to the block's.
//!
//! The last chunk's worker then holds the block's end state, and the change
//! set is read off its journal as the one-journal executor does. Lanes
//! decline (and the block runs in order on the one journal, which settles
//! where it must) what their kept journals cannot reproduce: creations,
//! self-destructs, code changes, EIP-7702, touched accounts empty at block
//! start; and a transaction over the block's gas left.

mod correct;
mod entry;
mod lane;

use std::{
    panic::{self, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, OnceLock, PoisonError, TryLockError,
    },
    time::{Duration, Instant},
};

use alloy_primitives::B256;
use correct::{Filters, Making};
use entry::Key;
use lane::{Lane, Run, Stop, Val};
use sluice_messages::{ChangeSet, PreparedBlock, PreparedTx, Receipt, SkipReason};
use sluice_state::StateReader;

use super::threads::{lock, Wake, Workers};
use crate::{
    sequential::receipt,
    stats::{ExecPath, ExecStats, InOrder},
    BlockOutcome, ExecConfig, ExecError,
};

/// Transactions per chunk: the hand-off between workers is paid once per
/// chunk, and a run is redone when the `n - 1` chunks before it changed
/// what it read, which grows with the chunk.
pub(crate) const CHUNK_TXS: usize = 16;

/// A chunk, once final.
#[derive(Debug)]
struct Final {
    /// The value of every key the chunk changed, in the order it changed
    /// them (applied in order, each key ends with its final value). Read
    /// by the next `n - 1` chunks' corrections; once those are final, the
    /// worker of chunk `k + n` takes the vector to fill again, while it is
    /// still in that worker's cache (a fresh one per chunk was ~60% of
    /// the time to take a run's values, each store a cache miss).
    writes: Mutex<Vec<(Key, Val)>>,
    /// Built after the chunk is handed on, off the path from one chunk's
    /// correction to the next; taken by [`Shared::gather`].
    receipts: Mutex<Option<Vec<Receipt>>>,
    skipped: Vec<(B256, SkipReason)>,
    /// The block's applied transactions and gas used, up to this chunk.
    applied: u32,
    gas_used: u64,
    /// Runs executed again in this chunk.
    reruns: u32,
    /// Transactions that read what the chunks before theirs changed, in
    /// the block up to this chunk: those executed again, and those run
    /// once those chunks were final, which would have been.
    block_conflicts: u32,
}

/// An applied transaction whose receipt is still to build: its offset in
/// the chunk, its index among the block's receipts, the block's gas used
/// up to it, and its result.
type Applied = (usize, u32, u64, revm::context_interface::result::ExecutionResult);

/// What the workers share.
struct Shared<'a> {
    cfg: &'a ExecConfig,
    block: &'a PreparedBlock,
    /// Chunk `k` holds transactions `k * CHUNK_TXS` up to the next
    /// chunk's first.
    chunks: Box<[OnceLock<Final>]>,
    /// A worker declined the block or failed: everyone stops.
    stop: AtomicBool,
    /// Where a worker parks until the chunk it needs is final (or `stop`).
    wake: Wake,
    /// Why, if declined.
    declined: Mutex<Option<InOrder>>,
    error: Mutex<Option<ExecError>>,
    /// The change set, from the last chunk's worker.
    changes: Mutex<Option<ChangeSet>>,
    /// Time spent correcting chunks, summed over workers, in nanoseconds.
    correct_ns: std::sync::atomic::AtomicU64,
    /// The block's receipts, gathered in order as chunks build theirs.
    gathered: Mutex<Gathered>,
}

/// The receipts of the chunks before `next`, in block order.
#[derive(Default)]
struct Gathered {
    next: usize,
    receipts: Vec<Receipt>,
}

/// Executes `block` on lanes, or says why lanes declined it (the inner
/// error): `Unsupported` (something they do not model), `Contention` (most
/// transactions had to run again: in order is faster). A declined block
/// runs in order, with the same result.
pub(crate) fn run(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    workers: &Workers,
) -> Result<Result<BlockOutcome, InOrder>, ExecError> {
    let start = Instant::now();
    let n = workers.len();
    let shared = Shared {
        cfg,
        block,
        chunks: (0..block.txs.len().div_ceil(CHUNK_TXS)).map(|_| OnceLock::new()).collect(),
        stop: AtomicBool::new(false),
        wake: Wake::default(),
        declined: Mutex::new(None),
        error: Mutex::new(None),
        changes: Mutex::new(None),
        correct_ns: Default::default(),
        gathered: Mutex::new(Gathered::default()),
    };
    let done = workers.together(|w, _| {
        let result = panic::catch_unwind(AssertUnwindSafe(|| lane_main(&shared, state, w, n)));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(Stop::Decline)) => shared.decline(InOrder::Unsupported),
            Ok(Err(Stop::Contended)) => shared.decline(InOrder::Contention),
            Ok(Err(Stop::Failed(e))) => {
                *lock(&shared.error) = Some(e);
                shared.halt();
            }
            Err(payload) => {
                // The others may be waiting for this worker's chunk.
                shared.halt();
                panic::resume_unwind(payload)
            }
        }
    });
    if let Some(e) = lock(&shared.error).take() {
        return Err(e);
    }
    if let Some(reason) = *lock(&shared.declined) {
        return Ok(Err(reason));
    }
    // No worker threads could be started, or (a bug) no change set.
    let (Some(()), Some(changes)) = (done.map(|_| ()), lock(&shared.changes).take()) else {
        return Ok(Err(InOrder::Unsupported));
    };
    let speculate = start.elapsed();
    // Every lane builds its chunks' receipts before it returns; the last
    // ones may not be gathered yet.
    shared.gather(true);
    let Gathered { next, receipts } = shared.gathered.into_inner().unwrap_or_else(PoisonError::into_inner);
    let mut skipped = Vec::new();
    let (mut gas_used, mut reruns) = (0, 0);
    // The chunks that were used; the slots after them stay empty.
    for (k, chunk) in shared.chunks.into_vec().into_iter().enumerate() {
        let Some(chunk) = chunk.into_inner() else { break };
        if k >= next {
            // (A bug: a chunk without receipts.) The block runs another way.
            return Ok(Err(InOrder::Unsupported));
        }
        skipped.extend(chunk.skipped);
        gas_used = chunk.gas_used;
        reruns += chunk.reruns;
    }
    // Every transaction has a receipt or was skipped, or (a bug) the
    // chunks did not cover the block: it runs another way.
    if receipts.len() + skipped.len() != block.txs.len() {
        return Ok(Err(InOrder::Unsupported));
    }
    let stats = ExecStats {
        path: ExecPath::Lanes,
        workers: n as u32,
        reruns,
        speculate,
        validate: Duration::from_nanos(shared.correct_ns.into_inner()),
        ..ExecStats::default()
    };
    Ok(Ok(BlockOutcome { receipts, skipped, gas_used, changes, stats }))
}

impl Shared<'_> {
    /// Appends the receipts of the chunks built since the last call, in
    /// order, up to the first chunk not built yet; if another worker is at
    /// it, returns at once, unless `wait`.
    ///
    /// The workers gather as the block runs: copied by the caller once the
    /// block was done, the receipts (~1 MiB for 5,000 transactions) took
    /// ~200 us, ~2.5% of an ERC-20 block, with both workers idle.
    fn gather(&self, wait: bool) {
        let mut gathered = match self.gathered.try_lock() {
            Ok(gathered) => gathered,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) if wait => lock(&self.gathered),
            Err(TryLockError::WouldBlock) => return,
        };
        while let Some(chunk) = self.chunks.get(gathered.next).and_then(OnceLock::get) {
            let Some(built) = lock(&chunk.receipts).take() else { break };
            if gathered.receipts.capacity() == 0 {
                gathered.receipts.reserve_exact(self.block.txs.len());
            }
            gathered.receipts.extend(built);
            gathered.next += 1;
        }
    }

    /// Stops every worker; the block runs another way, for `reason`.
    fn decline(&self, reason: InOrder) {
        lock(&self.declined).get_or_insert(reason);
        self.halt();
    }

    /// Stops every worker, waking those waiting for a chunk.
    fn halt(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake.all();
    }
}

/// Transactions made final before a block may be found contended.
const CONTENTION_TXS: usize = 4 * CHUNK_TXS;

/// One worker: its chunks, in order.
fn lane_main(shared: &Shared<'_>, state: &dyn StateReader, w: usize, n: usize) -> Result<(), Stop> {
    let txs = &shared.block.txs;
    let header = &shared.block.block.header;
    let mut lane = Lane::new(state, shared.cfg, shared.block)?;
    let mut runs = Vec::with_capacity(CHUNK_TXS);
    let mut filters = None;
    let mut last = false;
    let mut k = w;
    while k < shared.chunks.len() {
        let start = k * CHUNK_TXS;
        let end = (start + CHUNK_TXS).min(txs.len());
        lane.clear_logs();
        runs.clear();
        // The chunk before is final once `making` is set: from then on,
        // runs are final as they run.
        let mut making = None;
        for x in start..end {
            if making.is_none() && (k == 0 || shared.chunks[k - 1].get().is_some()) {
                let chunk = (&txs[start..x], &mut runs[..], filters.take());
                making = Some(correct_now(&mut lane, shared, (k, n), chunk)?);
            }
            crate::prefetch::ahead(txs, x);
            match &mut making {
                Some(making) => making.exact(&mut lane, shared, x - start, &txs[x])?,
                None => runs.push(lane.execute(&txs[x])?),
            }
            if shared.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
        let range = start..end;
        let making = match making {
            Some(making) => making,
            None => {
                // The chunks before were not final by this one's end.
                for j in k.saturating_sub(n - 1)..k {
                    if wait(shared, j).is_none() {
                        return Ok(());
                    }
                }
                correct_now(&mut lane, shared, (k, n), (&txs[range.clone()], &mut runs, filters.take()))?
            }
        };
        let started = Instant::now();
        let (chunk, applied, kept) = making.close(&mut lane)?;
        filters = Some(kept);
        shared.correct_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // A dependency chain (a counter every transaction increments):
        // every transaction reads what the chunk before changed, so each
        // one speculated runs again, and running in order is faster.
        // (Counting conflicts rather than re-runs, whether a chain is found
        // does not depend on how much of it the workers' timing let run
        // after the chunk before was final.)
        if range.end >= CONTENTION_TXS && chunk.block_conflicts as usize * 2 > range.end {
            return Err(Stop::Contended);
        }
        let _ = shared.chunks[k].set(chunk);
        // The worker of chunk k + 1 may be parked waiting for it.
        shared.wake.all();
        let receipts = applied
            .into_iter()
            .filter_map(|(i, index, cumulative, result)| match &txs[range.start + i] {
                PreparedTx::Ready(tx) => Some(receipt(tx, header.base_fee, index, cumulative, result)),
                PreparedTx::Invalid { .. } => None,
            })
            .collect();
        if let Some(chunk) = shared.chunks[k].get() {
            *lock(&chunk.receipts) = Some(receipts);
        }
        shared.gather(false);
        last = range.end == txs.len();
        k += n;
    }
    if lane.touched_empty() {
        return Err(Stop::Decline);
    }
    // The last chunk's worker holds the block's end state.
    if last {
        match lane.change_set() {
            Ok(Some(changes)) => *lock(&shared.changes) = Some(changes),
            Ok(None) => return Err(Stop::Decline),
            Err(e) => return Err(Stop::Failed(e)),
        }
    }
    Ok(())
}

/// Chunk `j` once final, or `None` if the block was given up.
fn wait<'s>(shared: &'s Shared<'_>, j: usize) -> Option<&'s Final> {
    shared.wake.until(&shared.stop, || shared.chunks[j].get())
}

/// Corrects chunk `k`'s runs so far (`runs`, of `txs`) against the chunks
/// before it, which are final (see `correct.rs`), with the worker's kept
/// `filters` if any; `n` workers.
fn correct_now(
    lane: &mut Lane<'_>,
    shared: &Shared<'_>,
    (k, n): (usize, usize),
    (txs, runs, filters): (&[PreparedTx], &mut [Run], Option<Filters>),
) -> Result<Making, Stop> {
    let started = Instant::now();
    let mut before = Vec::with_capacity(n);
    for j in k.saturating_sub(n - 1)..k {
        // Chunks become final in order: the last before `k` being final,
        // so are the others (else, a bug: the block runs another way).
        before.push(shared.chunks[j].get().ok_or(Stop::Decline)?);
    }
    // This worker's chunk before this one: every chunk that reads its
    // values is final.
    let mut recycled = match k.checked_sub(n).and_then(|j| shared.chunks[j].get()) {
        Some(mine) => std::mem::take(&mut *lock(&mine.writes)),
        None => Vec::new(),
    };
    recycled.clear();
    let filters = filters.unwrap_or_else(Filters::new);
    let making = correct::correct(lane, shared, txs, runs, &before, (recycled, filters));
    shared.correct_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    making
}
