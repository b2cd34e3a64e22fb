//! Blocks of plain transfers, scheduled by their footprints.
//!
//! A plain transfer (see `transfer.rs`) reads and writes exactly two
//! accounts, its sender and its recipient, and owes the coinbase a fee that
//! does not depend on state. When every transaction of a block is one, the
//! footprints are known before anything runs: transactions connected by a
//! shared account form a group that must run in block order, and different
//! groups touch disjoint accounts, so they can run on different workers in
//! any interleaving. Each worker runs whole groups in block order over its
//! own list of the accounts it touches: no multi-version memory, no
//! validation, no re-runs, and the outcome equals sequential execution by
//! construction.
//!
//! The workers go through one run together, in phases ended by a gate:
//! 1. plan chunks of transactions as they claim them (`plan.rs`);
//! 2. each finds, for its share of the accounts, the transactions that
//!    touch the same account one after the other;
//! 3. worker 0 joins those into groups and pays the fees;
//! 4. each claims chunks of the block and runs the groups that start in
//!    them (`execute.rs`): claiming small chunks, rather than a fixed
//!    share, lets a worker that woke late or shares its core do less;
//! 5. each sorts a share of the touched accounts by address (`output.rs`);
//! 6. worker 0 builds the changes while worker 1 builds the receipts.
//!
//! A block qualifies in two steps. Before any state is read, every
//! transaction must plan as a plain transfer (`transfer::plan`) and fit
//! the block's remaining gas assuming every earlier one applied (each uses
//! exactly 21,000). While running, the accounts must allow each transfer
//! (`Plan::apply`: no code at either end, the expected nonce, funds for
//! the maximum cost). If the first step fails, nothing was executed and
//! the block may run on lanes; if the second does, the work is lost and
//! the block runs on the one journal: the first step makes that
//! rare (the node's admission already checked nonces and funds).

mod execute;
mod output;
mod plan;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    },
    time::{Duration, Instant},
};

use alloy_primitives::{map::AddressMap, Address, U256};
use sluice_messages::{AccountChange, ChangeSet, PreparedBlock, PreparedTx, Receipt};
use sluice_state::{Account as StoredAccount, StateReader};

use execute::{execute, Accounts, Touched};
use output::{changes, partition, receipts, sort_share, Key};
use plan::{Planning, Schedule};

use super::{
    threads::{lock, Gate, Workers},
    transfer::{AccountValue, Rules, TRANSFER_GAS},
    Attempt,
};
use crate::{
    db::DbError,
    stats::{ExecPath, ExecStats, InOrder},
    BlockOutcome, ExecConfig,
};

/// The coinbase's change after every fee, paid as the sequential executor
/// pays them (one at a time, in block order: revm's `reward_beneficiary`
/// drops an add that would overflow, and touches the account, so a touched
/// empty account is deleted); `None` where that would delete an existing
/// account (its storage would be wiped: the one journal runs such a block).
fn coinbase_change(
    address: Address,
    base: Option<StoredAccount>,
    schedule: &Schedule<'_>,
) -> Option<Option<AccountChange>> {
    let start = AccountValue::from_stored(base.as_ref());
    let mut now = start;
    let mut pay = |fee: U256| {
        now.balance = now.balance.checked_add(fee).unwrap_or(now.balance);
        if now.is_empty() {
            // EIP-161: an empty coinbase that did not exist stays absent;
            // one that existed would be deleted.
            return !now.exists;
        }
        now.exists = true;
        true
    };
    // One add of the total is the same as one add per transaction, unless
    // an add could overflow (it would be dropped), or the coinbase exists
    // and is empty (a zero fee first would delete it).
    let total = schedule
        .fees
        .filter(|t| !(start.exists && start.is_empty()) && start.balance.checked_add(*t).is_some());
    let paid = match total {
        Some(total) => pay(total),
        None => schedule.plans().all(|plan| pay(plan.fee)),
    };
    if !paid {
        return None;
    }
    if !now.exists || now == start {
        return Some(None);
    }
    // Fees change only the balance: nonce and code stay as they were.
    Some(Some(AccountChange {
        address,
        deleted: false,
        balance: now.balance,
        nonce: now.nonce,
        code: None,
        storage_cleared: false,
        storage: Vec::new(),
    }))
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// A value alone on its cache lines (two, as the adjacent-line prefetcher
/// pulls pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// Allocations kept from one block to the next: each worker's accounts (a
/// few MiB for a full block; fresh memory would be faulted in on every
/// block) and the map it uses while planning.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    accounts: Vec<Padded<RwLock<Accounts>>>,
    /// Each worker's last transaction per account, while planning.
    last: Vec<Padded<Mutex<AddressMap<u32>>>>,
}

/// Executes `block` this way on `threads`, or says why not.
pub(crate) fn run(
    reader: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    threads: &Workers,
    scratch: &Mutex<Scratch>,
) -> Result<Attempt, DbError> {
    let rules = Rules::new(cfg, &block.block.header);
    // A block of contract calls fails on its first transaction: find out
    // before waking the threads and sizing their plans for the block.
    match block.txs.first() {
        None => {}
        Some(PreparedTx::Ready(tx)) if super::transfer::plan(&rules, tx).is_some() => {}
        Some(_) => return Ok(Attempt::NotMine),
    }
    let mut guard = lock(scratch);
    let Scratch { accounts, last } = &mut *guard;
    accounts.resize_with(threads.len(), Padded::default);
    last.resize_with(threads.len(), Padded::default);
    let outcome = run_with(reader, &rules, block, threads, accounts, last);
    accounts.iter_mut().for_each(|a| a.0.get_mut().unwrap_or_else(PoisonError::into_inner).clear());
    outcome
}

/// One worker's part of the output.
#[derive(Default)]
struct Share {
    receipts: Option<Vec<Receipt>>,
    changes: Option<Vec<AccountChange>>,
    /// Worker 0's time to plan the block, and to run it.
    planned: Duration,
    executed: Duration,
}

/// The first phase in which a worker failed, `NONE` while none has.
struct Failed(AtomicUsize);

const NONE: usize = usize::MAX;

/// The phase that runs the groups: failing before it, nothing was executed.
const EXECUTE: usize = 4;

impl Failed {
    /// Whether some worker failed already (a hint to stop early; the
    /// phase's end decides).
    fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed) != NONE
    }
}

/// Ends a phase: waits for every worker at the gate; `false` when any of
/// them failed, in this phase or before. (A failure in a later phase, by a
/// worker that passed the gate first, does not count: every worker must
/// come to the same answer at the same gate, or some would wait at the
/// next one for workers that left.)
fn pass(gate: &Gate, phase: usize, ok: bool, failed: &Failed) -> bool {
    if !ok {
        failed.0.fetch_min(phase, Ordering::AcqRel);
    }
    gate.wait(phase) && failed.0.load(Ordering::Acquire) > phase
}

/// The schedule and what depends on it alone.
struct Ready<'p> {
    schedule: Schedule<'p>,
    coinbase: Option<AccountChange>,
}

/// Worker 0's step between planning and running: the groups, and the
/// coinbase's change (fees depend on the plans alone).
fn prepare<'p>(
    reader: &dyn StateReader,
    rules: &Rules,
    planning: &'p Planning,
) -> Result<Option<Ready<'p>>, DbError> {
    let Some(schedule) = planning.schedule() else {
        return Ok(None);
    };
    let Some(coinbase) = coinbase_change(rules.coinbase, reader.account(&rules.coinbase)?, &schedule) else {
        return Ok(None);
    };
    Ok(Some(Ready { schedule, coinbase }))
}

fn run_with(
    reader: &dyn StateReader,
    rules: &Rules,
    block: &PreparedBlock,
    threads: &Workers,
    accounts: &[Padded<RwLock<Accounts>>],
    last: &[Padded<Mutex<AddressMap<u32>>>],
) -> Result<Attempt, DbError> {
    let start = Instant::now();
    let workers = threads.len();
    let n = block.txs.len();
    let planning = Planning::new(n, workers);
    let ready: OnceLock<Ready<'_>> = OnceLock::new();
    let handed: Vec<OnceLock<Vec<Vec<Key>>>> = (0..workers).map(|_| OnceLock::new()).collect();
    let orders: Vec<OnceLock<Vec<Key>>> = (0..workers).map(|_| OnceLock::new()).collect();
    let abandon = Failed(AtomicUsize::new(NONE));
    // Phases, each ended by a gate: plan chunks; find edges; join them into
    // groups (worker 0); run groups; sort a share of the touched accounts;
    // build the receipts (worker 1) and the changes (worker 0).
    let shares = threads.together(|w, gate| -> Result<Option<Share>, DbError> {
        let mut share = Share::default();
        if !pass(gate, 1, planning.plan(rules, block), &abandon) {
            return Ok(None);
        }
        let ok = planning.edges(w, workers, &mut lock(&last[w].0));
        if !pass(gate, 2, ok, &abandon) {
            return Ok(None);
        }
        let mut failed = None;
        if w == 0 {
            match prepare(reader, rules, &planning) {
                Ok(Some(r)) => {
                    let _ = ready.set(r);
                }
                Ok(None) => {}
                Err(e) => failed = Some(e),
            }
            share.planned = start.elapsed();
        }
        if !pass(gate, 3, w != 0 || ready.get().is_some(), &abandon) {
            return failed.map_or(Ok(None), Err);
        }
        let Some(Ready { schedule, coinbase }) = ready.get() else {
            return Ok(None);
        };
        let ran = {
            let mut mine = write(&accounts[w].0);
            mine.reserve(2 * n / workers);
            let ran = execute(reader, block, schedule, &abandon, &mut mine);
            if matches!(ran, Ok(true)) {
                // While this worker's list is in its cache.
                let _ = handed[w].set(partition(&mine.list, w as u32, workers));
            }
            ran
        };
        if !pass(gate, EXECUTE, matches!(ran, Ok(true)), &abandon) {
            return ran.map(|_| None);
        }
        if w == 0 {
            share.executed = start.elapsed();
        }
        let guards: Vec<_> = accounts.iter().map(|a| read(&a.0)).collect();
        let lists: Vec<&[(Address, Touched)]> = guards.iter().map(|g| g.list.as_slice()).collect();
        let _ = orders[w].set(sort_share(&handed, &lists, w, workers));
        if !pass(gate, 5, true, &abandon) {
            return Ok(None);
        }
        if w == 0 {
            share.changes = Some(changes(&lists, &orders, coinbase.as_ref()));
        }
        if w == 1 % workers {
            share.receipts = Some(receipts(rules, block, schedule));
        }
        Ok(Some(share))
    });
    let Some(shares) = shares else {
        return Ok(Attempt::NotMine);
    };
    // A worker's database error wins over the others' giving up, which it
    // caused.
    let shares: Vec<Option<Share>> = shares.into_iter().collect::<Result<_, _>>()?;
    let Some(shares) = shares.into_iter().collect::<Option<Vec<Share>>>() else {
        return Ok(match abandon.0.load(Ordering::Acquire) < EXECUTE {
            true => Attempt::NotMine,
            false => Attempt::Declined(InOrder::Unsupported),
        });
    };
    let (mut receipts, mut changes, mut planned, mut executed) = (None, None, Duration::ZERO, Duration::ZERO);
    for share in shares {
        receipts = receipts.or(share.receipts);
        changes = changes.or(share.changes);
        planned = planned.max(share.planned);
        executed = executed.max(share.executed);
    }
    let (Some(receipts), Some(accounts)) = (receipts, changes) else {
        // (A bug: no worker built them.) Nothing is lost but time.
        return Ok(Attempt::Declined(InOrder::Unsupported));
    };
    let stats = ExecStats {
        path: ExecPath::Scheduled,
        workers: u32::try_from(workers).unwrap_or(u32::MAX),
        speculate: executed.saturating_sub(planned),
        validate: planned,
        merge: start.elapsed().saturating_sub(executed),
        ..ExecStats::default()
    };
    let gas_used = TRANSFER_GAS * receipts.len() as u64;
    Ok(Attempt::Done(BlockOutcome {
        receipts,
        skipped: Vec::new(),
        gas_used,
        changes: ChangeSet { accounts },
        stats,
    }))
}
