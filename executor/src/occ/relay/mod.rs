//! Lanes: the block in chunks, each worker running its chunks in order on
//! its own journal, handing the next chunk's worker one write set per
//! chunk.
//!
//! The multi-version engine hands results between cores per transaction,
//! and on this project's 2-core machines that costs about as much as a
//! cheap contract call (~1 us): two workers lost to one journal on ERC-20
//! transfers. Here the unit of hand-off is a chunk of [`CHUNK_TXS`]
//! transactions (with two workers, a chunk's end is fixed as the block
//! runs: `bounds.rs`). Chunk `k` belongs to worker `k mod n`, which keeps a
//! revm journal across its chunks as its replica of the block state:
//!
//! 1. **Speculate**: run chunk `k` in order on the replica. The replica
//!    lacks the `n - 1` chunks before `k` (other workers are running them),
//!    so results are provisional. Each run notes the keys (account, slot)
//!    it read and the values it changed (`entry.rs`: revm's own journal
//!    entries, noted as they are built).
//! 2. **Wait** for the chunks before `k` to be final, in order; each comes
//!    as the final values of what it changed.
//! 3. **Finalize**: the keys those chunks changed are dirty, and so is the
//!    coinbase (fees are credited here, in order, so only this step sees
//!    it exact). A run that read no dirty key read exactly what it would
//!    have read after those chunks: it stands. From the first run that read
//!    a dirty key, the chunk's writes are undone, the other chunks' values
//!    written, and each later run either redone (nothing it read is dirty)
//!    or executed again on the now exact state (and what either execution
//!    changed becomes dirty). Receipts take their index and cumulative
//!    gas here, and fees go to the coinbase.
//! 4. **Hand on** the chunk's final values and the gas used; then, while
//!    the next chunk is being corrected, build the chunk's receipts.
//!
//! The last chunk's worker then holds the block's end state, and the change
//! set is read off its journal as the one-journal executor does. Lanes
//! decline (and the block runs in order) what a persistent journal cannot
//! reproduce: creations, self-destructs, code changes, EIP-7702, touched
//! accounts empty at block start; and a transaction over the block's gas
//! left.

mod bounds;
mod entry;
mod lane;

use std::{
    panic::{self, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, OnceLock,
    },
    time::{Duration, Instant},
};

use alloy_primitives::{B256, U256};
use bounds::Bounds;
use entry::{Dirty, Key};
use lane::{gas_limit, Lane, Res, Run, Stop, Val};
use sluice_messages::{ChangeSet, PreparedBlock, PreparedTx, Receipt};
use sluice_store::StateReader;

use super::{
    mv::lock,
    threads::{wait_until, Workers},
};
use crate::{
    journal::sets_code,
    sequential::receipt,
    stats::{ExecMode, ExecStats, SequentialReason},
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
    /// them (applied in order, each key ends with its final value).
    writes: Vec<(Key, Val)>,
    /// Built after the chunk is handed on, off the path from one chunk's
    /// correction to the next.
    receipts: OnceLock<Vec<Receipt>>,
    skipped: Vec<(B256, String)>,
    /// The block's applied transactions and gas used, up to this chunk.
    applied: u32,
    gas_used: u64,
    /// Runs executed again in this chunk, and in the block up to it.
    reruns: u32,
    block_reruns: u32,
}

/// An applied transaction whose receipt is still to build: its offset in
/// the chunk, its index among the block's receipts, the block's gas used
/// up to it, and its result.
type Applied = (usize, u32, u64, revm::context_interface::result::ExecutionResult);

/// What the workers share.
struct Shared<'a> {
    cfg: &'a ExecConfig,
    block: &'a PreparedBlock,
    chunks: Box<[OnceLock<Final>]>,
    bounds: Bounds,
    /// A worker declined the block or failed: everyone stops.
    stop: AtomicBool,
    /// Why, if declined.
    declined: Mutex<Option<SequentialReason>>,
    error: Mutex<Option<ExecError>>,
    /// The change set, from the last chunk's worker.
    changes: Mutex<Option<ChangeSet>>,
    /// Time spent finalizing, summed over workers, in nanoseconds.
    finalize_ns: std::sync::atomic::AtomicU64,
}

/// Executes `block` on lanes, or says why lanes declined it: `Unsupported`
/// (something they do not model), `Contention` (most transactions had to
/// run again: in order is faster). Either way the block runs another way,
/// with the same result.
pub(crate) fn run(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    workers: &Workers,
) -> Result<Result<BlockOutcome, SequentialReason>, ExecError> {
    if sets_code(block) {
        return Ok(Err(SequentialReason::Unsupported));
    }
    let start = Instant::now();
    let n = workers.len();
    let bounds = Bounds::new(block.txs.len(), n);
    let shared = Shared {
        cfg,
        block,
        chunks: (0..bounds.len()).map(|_| OnceLock::new()).collect(),
        bounds,
        stop: AtomicBool::new(false),
        declined: Mutex::new(None),
        error: Mutex::new(None),
        changes: Mutex::new(None),
        finalize_ns: Default::default(),
    };
    let done = workers.each(|w| {
        let result = panic::catch_unwind(AssertUnwindSafe(|| lane_main(&shared, state, w, n)));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(Stop::Decline)) => shared.decline(SequentialReason::Unsupported),
            Ok(Err(Stop::Contended)) => shared.decline(SequentialReason::Contention),
            Ok(Err(Stop::Failed(e))) => {
                *lock(&shared.error) = Some(e);
                shared.stop.store(true, Ordering::Release);
            }
            Err(payload) => {
                // The others may be waiting for this worker's chunk.
                shared.stop.store(true, Ordering::Release);
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
        return Ok(Err(SequentialReason::Unsupported));
    };
    let speculate = start.elapsed();
    let mut receipts = Vec::with_capacity(block.txs.len());
    let mut skipped = Vec::new();
    let (mut gas_used, mut reruns) = (0, 0);
    // The chunks that were used; the slots after them stay empty.
    for chunk in shared.chunks.into_vec() {
        let Some(chunk) = chunk.into_inner() else { break };
        // Every lane builds its chunks' receipts before it returns.
        let Some(built) = chunk.receipts.into_inner() else { return Ok(Err(SequentialReason::Unsupported)) };
        receipts.extend(built);
        skipped.extend(chunk.skipped);
        gas_used = chunk.gas_used;
        reruns += chunk.reruns;
    }
    // Every transaction has a receipt or was skipped, or (a bug) the
    // chunks did not cover the block: it runs another way.
    if receipts.len() + skipped.len() != block.txs.len() {
        return Ok(Err(SequentialReason::Unsupported));
    }
    let stats = ExecStats {
        mode: ExecMode::Parallel,
        workers: n as u32,
        conflicts: reruns,
        reruns,
        max_rerun_depth: u32::from(reruns > 0),
        lanes: true,
        speculate,
        validate: Duration::from_nanos(shared.finalize_ns.into_inner()),
        ..ExecStats::default()
    };
    Ok(Ok(BlockOutcome { receipts, skipped, gas_used, changes, stats }))
}

impl Shared<'_> {
    /// Stops every worker; the block runs another way, for `reason`.
    fn decline(&self, reason: SequentialReason) {
        lock(&self.declined).get_or_insert(reason);
        self.stop.store(true, Ordering::Release);
    }
}

/// Transactions finalized before a block may be found contended (counted
/// in transactions, not chunks: with two workers chunk lengths depend on
/// timing, and whether a block runs on lanes should not).
const CONTENTION_TXS: usize = 4 * CHUNK_TXS;

/// One worker: its chunks, in order.
fn lane_main(shared: &Shared<'_>, state: &dyn StateReader, w: usize, n: usize) -> Result<(), Stop> {
    let txs = &shared.block.txs;
    let bounds = &shared.bounds;
    let header = &shared.block.block.header;
    let mut lane = Lane::new(state, shared.cfg, shared.block);
    let mut runs = Vec::with_capacity(CHUNK_TXS);
    let mut last = false;
    let mut k = w;
    while k < bounds.len() {
        let start = match k {
            0 => 0,
            _ => match bounds.wait_end(k - 1, &shared.stop) {
                Some(start) => start,
                None => return Ok(()),
            },
        };
        if start >= txs.len() {
            // No chunk `k`: the worker of chunk `k + 1` learns it here.
            bounds.close(k, start);
            break;
        }
        lane.clear_logs();
        runs.clear();
        let mut x = start;
        while bounds.holds(k, start, x, txs.len()) {
            runs.push(lane.execute(&txs[x])?);
            x += 1;
            if shared.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
        let range = start..x;
        let mut before = Vec::with_capacity(n);
        for j in k.saturating_sub(n - 1)..k {
            match wait(shared, j) {
                Some(chunk) => before.push(chunk),
                None => return Ok(()),
            }
        }
        let started = Instant::now();
        let (chunk, applied) = finalize(&mut lane, shared, &txs[range.clone()], &mut runs, &before)?;
        shared.finalize_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // A dependency chain (a counter every transaction increments):
        // every chunk re-runs from its first transaction on, twice the
        // work of running in order.
        if range.end >= CONTENTION_TXS && chunk.block_reruns as usize * 2 > range.end {
            return Err(Stop::Contended);
        }
        let _ = shared.chunks[k].set(chunk);
        bounds.ask_end(k + 1);
        let receipts = applied
            .into_iter()
            .filter_map(|(i, index, cumulative, result)| match &txs[range.start + i] {
                PreparedTx::Ready(tx) => Some(receipt(tx, header.base_fee, index, cumulative, result)),
                PreparedTx::Invalid { .. } => None,
            })
            .collect();
        if let Some(chunk) = shared.chunks[k].get() {
            let _ = chunk.receipts.set(receipts);
        }
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
    lane.keep_tables();
    Ok(())
}

/// Chunk `j` once final, or `None` if the block was given up.
fn wait<'s>(shared: &'s Shared<'_>, j: usize) -> Option<&'s Final> {
    wait_until(&shared.stop, 2_000, || shared.chunks[j].get())
}

/// Step 3 of the module documentation: makes `runs` (the chunk `txs`,
/// speculated on `lane`) exact given the final chunks `before` it, and
/// the lane's state the state after the chunk.
fn finalize(
    lane: &mut Lane<'_>,
    shared: &Shared<'_>,
    txs: &[PreparedTx],
    runs: &mut [Run],
    before: &[&Final],
) -> Result<(Final, Vec<Applied>), Stop> {
    let header = &shared.block.block.header;
    let mut dirty = Dirty::new();
    for (key, _) in before.iter().flat_map(|c| c.writes.iter()) {
        dirty.insert(key.digest());
    }
    dirty.insert(Key::Account(lane.coinbase()).digest());
    let first = runs.iter().position(|run| lane.read_any(run, &dirty));
    if let Some(first) = first {
        for run in runs[first..].iter().rev() {
            lane.undo(run)?;
        }
    }
    for chunk in before {
        lane.set_all(&chunk.writes)?;
    }
    let (mut applied, mut gas_used) = before.last().map_or((0, 0), |c| (c.applied, c.gas_used));
    let mut out = Final {
        writes: Vec::new(),
        receipts: OnceLock::new(),
        skipped: Vec::new(),
        applied,
        gas_used,
        reruns: 0,
        block_reruns: 0,
    };
    // The chunk's final values: what each run changed, in order (a key
    // changed twice appears twice; applied in order, the last value wins),
    // then the coinbase after the last fee.
    // Sized for what the runs wrote as speculated, and the coinbase: a
    // chunk's values are ~50 entries of ~100 bytes, copied again each time
    // the vector grew.
    let mut changed: Vec<(Key, Val)> = Vec::with_capacity(lane.writes_len() + 1);
    let mut receipts = Vec::with_capacity(runs.len());
    // Fees owed the coinbase and not credited yet. Only a run executed
    // again here can read its balance (the coinbase is dirty: every run
    // that read it is executed again), so they are credited before such a
    // run and at the end, not one lookup per transaction.
    let mut fees: Option<U256> = None;
    for (i, prepared) in txs.iter().enumerate() {
        if first.is_some_and(|first| i >= first) {
            if lane.read_any(&runs[i], &dirty) {
                lane.written(&runs[i]).for_each(|(k, _)| dirty.insert(k.digest()));
                // It may read the coinbase: every earlier fee first.
                if let Some(fee) = fees.take() {
                    lane.credit(fee)?;
                }
                runs[i] = lane.execute(prepared)?;
                lane.written(&runs[i]).for_each(|(k, _)| dirty.insert(k.digest()));
                out.reruns += 1;
            } else {
                lane.redo(&runs[i])?;
            }
        }
        if gas_limit(prepared).is_some_and(|limit| limit > header.gas_limit.saturating_sub(gas_used)) {
            // Skipped in order for want of block gas: rare, not modelled.
            return Err(Stop::Decline);
        }
        changed.extend(lane.written(&runs[i]));
        let res = std::mem::replace(&mut runs[i].res, Res::Static(String::new()));
        match (prepared, res) {
            (PreparedTx::Ready(_), Res::Applied { result, fee }) => {
                gas_used = gas_used.saturating_add(result.tx_gas_used());
                receipts.push((i, applied, gas_used, result));
                applied += 1;
                fees = Some(fees.unwrap_or_default().saturating_add(fee));
            }
            (_, Res::Refused(reason) | Res::Static(reason)) => out.skipped.push((prepared.hash(), reason)),
            (PreparedTx::Invalid { .. }, Res::Applied { .. }) => return Err(Stop::Decline),
        }
    }
    if let Some(fee) = fees.take() {
        lane.credit(fee)?;
    }
    let coinbase = Key::Account(lane.coinbase());
    changed.push((coinbase, lane.value(coinbase)));
    out.writes = changed;
    out.applied = applied;
    out.gas_used = gas_used;
    out.block_reruns = before.last().map_or(0, |c| c.block_reruns) + out.reruns;
    Ok((out, receipts))
}
