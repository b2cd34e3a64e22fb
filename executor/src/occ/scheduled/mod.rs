//! Blocks of plain transfers, scheduled by their footprints.
//!
//! A plain transfer (see `transfer.rs`) reads and writes exactly two
//! accounts, its sender and its recipient, and owes the coinbase a fee that
//! does not depend on state. When every transaction of a block is one, the
//! footprints are known before anything runs: transactions connected by a
//! shared account form a group that must run in block order, and different
//! groups touch disjoint accounts, so they can run on different workers in
//! any interleaving. Each worker runs its groups in block order over a
//! private map of the accounts it touches: no multi-version memory, no
//! validation, no re-runs, and the outcome equals sequential execution by
//! construction.
//!
//! A block qualifies in two steps. Before any state is read, every
//! transaction must plan as a plain transfer ([`transfer::plan`]) and fit
//! the block's remaining gas assuming every earlier one applied (each uses
//! exactly 21,000). While running, the accounts must allow each transfer
//! ([`Plan::apply`]: no code at either end, the expected nonce, funds for
//! the maximum cost). If anything fails, the attempt is abandoned and the
//! block goes to the general engine: the first step makes that rare once
//! work has begun (the node's admission already checked nonces and funds).

mod plan;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    },
    time::Instant,
};

use alloy_primitives::{
    map::{AddressMap, Entry},
    Address, U256,
};
use revm::primitives::KECCAK_EMPTY;
use sluice_messages::{AccountChange, ChangeSet, PreparedBlock, PreparedTx, Receipt};
use sluice_store::{Account as StoredAccount, StateReader};

use plan::{range, schedule, Schedule};

use super::{
    commit::CoinbaseState,
    footprint::AccountValue,
    merge::AccountFinal,
    mv::lock,
    threads::Workers,
    transfer::{Rules, TRANSFER_GAS},
};
use crate::{
    db::DbError,
    stats::{ExecMode, ExecStats},
    BlockOutcome, ExecConfig,
};

/// An account a worker touched, as it is now. Only balance and nonce: an
/// account with code never qualifies, and every touched account ends the
/// block changed and existing (a sender's nonce went up, a recipient's
/// balance grew by a non-zero value), so nothing else is needed for its
/// change. Small entries keep a worker's map in its core's cache.
#[derive(Debug, Clone, Copy)]
struct Touched {
    balance: U256,
    nonce: u64,
}

impl Touched {
    /// As [`Plan::apply`] takes it (without code, by construction).
    fn value(self) -> AccountValue {
        AccountValue { balance: self.balance, nonce: self.nonce, code_hash: KECCAK_EMPTY, exists: true }
    }
}

/// The account as the worker's transactions left it, read from the state
/// on first touch; `None` if it has code.
fn touched<'m>(
    accounts: &'m mut AddressMap<Touched>,
    reader: &dyn StateReader,
    address: Address,
) -> Result<Option<&'m mut Touched>, DbError> {
    Ok(match accounts.entry(address) {
        Entry::Occupied(e) => Some(e.into_mut()),
        Entry::Vacant(e) => {
            let base = AccountValue::from_stored(reader.account(&address)?.as_ref());
            if base.code_hash != KECCAK_EMPTY {
                return Ok(None);
            }
            Some(e.insert(Touched { balance: base.balance, nonce: base.nonce }))
        }
    })
}

/// Runs worker `w`'s transactions, recording the accounts they touched in
/// `accounts` (empty); `false` when one of them turned out not to be a plain transfer (or
/// another worker found one).
fn execute(
    reader: &dyn StateReader,
    block: &PreparedBlock,
    schedule: &Schedule,
    w: u32,
    abandon: &AtomicBool,
    accounts: &mut AddressMap<Touched>,
) -> Result<bool, DbError> {
    accounts.reserve(2 * schedule.load[w as usize]);
    for (i, ptx) in block.txs.iter().enumerate() {
        if schedule.owner[i] != w {
            continue;
        }
        let PreparedTx::Ready(tx) = ptx else {
            return Ok(false);
        };
        if abandon.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let plan = schedule.plan(i);
        let from = touched(accounts, reader, tx.sender)?.map(|t| *t);
        let applied = match (from, touched(accounts, reader, plan.to)?) {
            (Some(from), Some(to)) => plan.apply(&from.value(), &to.value()).map(|(from_after, to_after)| {
                *to = Touched { balance: to_after.balance, nonce: to_after.nonce };
                from_after
            }),
            _ => None,
        };
        let Some(from_after) = applied else {
            abandon.store(true, Ordering::Relaxed);
            return Ok(false);
        };
        if let Some(from) = touched(accounts, reader, tx.sender)? {
            *from = Touched { balance: from_after.balance, nonce: from_after.nonce };
        }
    }
    Ok(true)
}

/// Worker `w`'s share of the output, once every transaction ran: the
/// receipts of a range of transactions (they depend on the transactions
/// alone), and the changes of the accounts whose address starts with a byte
/// in its range, sorted, so that the shares only need concatenating.
fn output(
    rules: &Rules,
    block: &PreparedBlock,
    schedule: &Schedule,
    touched: &[&AddressMap<Touched>],
    coinbase: Option<&AccountChange>,
    w: usize,
) -> (Vec<Receipt>, Vec<AccountChange>) {
    let workers = schedule.load.len();
    let n = block.txs.len();
    let txs = range(n, w, workers);
    let mut receipts = Vec::with_capacity(txs.len());
    for i in txs {
        if let PreparedTx::Ready(tx) = &block.txs[i] {
            let mut receipt = schedule.plan(i).receipt(tx, rules.base_fee);
            receipt.index = i as u32;
            receipt.cumulative_gas_used = TRANSFER_GAS * (i as u64 + 1);
            receipts.push(receipt);
        }
    }
    // Sorted through a small index: moving the changes themselves around
    // in a sort costs more than building them.
    let bytes = 256 * w / workers..256 * (w + 1) / workers;
    let mine = |a: &Address| bytes.contains(&usize::from(a[0]));
    let mut order: Vec<_> = touched
        .iter()
        .flat_map(|m| m.iter())
        .filter(|(a, _)| mine(a))
        .map(|(a, t)| (prefix(a), a, t))
        .collect();
    // Addresses are hashes: the first eight bytes almost always decide.
    order.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| x.1.cmp(y.1)));
    let mut coinbase = coinbase.filter(|c| mine(&c.address));
    let mut changes = Vec::with_capacity(order.len() + 1);
    if w == 0 {
        // The other shares are appended to this one.
        let total: usize = touched.iter().map(|m| m.len()).sum();
        receipts.reserve(n - receipts.len());
        changes.reserve(total + 1 - changes.len());
    }
    for (_, address, t) in order {
        if let Some(c) = coinbase.take_if(|c| c.address < *address) {
            changes.push(c.clone());
        }
        // What the sequential overlay records for an account that plain
        // transfers changed (see `Touched`).
        changes.push(AccountChange {
            address: *address,
            deleted: false,
            balance: t.balance,
            nonce: t.nonce,
            code: None,
            storage_cleared: false,
            storage: Vec::new(),
        });
    }
    changes.extend(coinbase.cloned());
    (receipts, changes)
}

/// The coinbase after every fee, as the sequential executor pays them (one
/// at a time, in block order); `None` where the parallel engines do not
/// model the outcome.
fn pay_fees(base: Option<StoredAccount>, schedule: &Schedule) -> Option<CoinbaseState> {
    let mut coinbase = CoinbaseState::new(base);
    let start = AccountValue::from_stored(base.as_ref());
    // One add of the total is the same as one add per transaction, unless
    // an add could overflow (it would be dropped), or the coinbase exists
    // and is empty (a zero fee first would delete it).
    let total = schedule
        .fees
        .filter(|t| !(start.exists && start.is_empty()) && start.balance.checked_add(*t).is_some());
    match total {
        Some(total) => coinbase.apply(None, total).ok()?,
        None => {
            for plan in schedule.plans() {
                coinbase.apply(None, plan.fee).ok()?;
            }
        }
    }
    Some(coinbase)
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

/// An address's first eight bytes, as an integer in the same order.
fn prefix(a: &Address) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&a[..8]);
    u64::from_be_bytes(b)
}

/// Allocations kept from one block to the next: each worker's map of the
/// accounts it touched (a few MiB for a full block; fresh memory would be
/// faulted in on every block).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    maps: Vec<AddressMap<Touched>>,
    /// Each worker's last transaction per account, while planning.
    last: Vec<Padded<Mutex<AddressMap<u32>>>>,
}

/// Executes `block` this way on `threads`, or returns `None` when it does
/// not qualify (or the threads could not be started).
pub(crate) fn run(
    reader: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    threads: &Workers,
    scratch: &Mutex<Scratch>,
) -> Result<Option<BlockOutcome>, DbError> {
    let mut guard = lock(scratch);
    let Scratch { maps, last } = &mut *guard;
    maps.resize_with(threads.len(), AddressMap::default);
    last.resize_with(threads.len(), Padded::default);
    let outcome = run_with(reader, cfg, block, threads, maps, last);
    maps.iter_mut().for_each(AddressMap::clear);
    outcome
}

fn run_with(
    reader: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    threads: &Workers,
    maps: &mut Vec<AddressMap<Touched>>,
    last: &[Padded<Mutex<AddressMap<u32>>>],
) -> Result<Option<BlockOutcome>, DbError> {
    let start = Instant::now();
    let rules = Rules::new(cfg, &block.block.header);
    let Some(schedule) = schedule(&rules, block, threads, last) else {
        return Ok(None);
    };
    let planned = start.elapsed();
    // Fees depend on the plans alone.
    let Some(coinbase) = pay_fees(reader.account(&rules.coinbase)?, &schedule) else {
        return Ok(None);
    };
    let coinbase = AccountFinal::coinbase(rules.coinbase, &coinbase).change(reader, &[])?;
    let abandon = AtomicBool::new(false);
    let workers = schedule.load.len();
    // Each worker fills its own map, then reads all of them. (Each on its
    // own cache lines: a map's header changes on every insert.)
    let cells: Vec<Padded<RwLock<AddressMap<Touched>>>> =
        maps.drain(..).map(|m| Padded(RwLock::new(m))).collect();
    let parts = threads.together(|w, gate| {
        let ran = execute(reader, block, &schedule, w as u32, &abandon, &mut write(&cells[w].0));
        if !matches!(ran, Ok(true)) {
            abandon.store(true, Ordering::Release);
        }
        if !gate.wait(1) || abandon.load(Ordering::Acquire) {
            return ran.map(|_| None);
        }
        let guards: Vec<_> = cells.iter().map(|c| read(&c.0)).collect();
        let touched: Vec<&AddressMap<Touched>> = guards.iter().map(|g| &**g).collect();
        Ok(Some(output(&rules, block, &schedule, &touched, coinbase.as_ref(), w)))
    });
    maps.extend(cells.into_iter().map(|m| m.0.into_inner().unwrap_or_else(PoisonError::into_inner)));
    let Some(parts) = parts else {
        return Ok(None);
    };
    let mut shares = Vec::with_capacity(workers);
    for part in parts {
        match part? {
            Some(share) => shares.push(share),
            None => return Ok(None),
        }
    }
    let executed = start.elapsed();
    // Worker 0's share has room for the others.
    let mut shares = shares.into_iter();
    let (mut receipts, mut accounts) = shares.next().unwrap_or_default();
    for (mut r, mut c) in shares {
        receipts.append(&mut r);
        accounts.append(&mut c);
    }
    let stats = ExecStats {
        mode: ExecMode::Parallel,
        workers: u32::try_from(workers).unwrap_or(u32::MAX),
        fast_transfers: u32::try_from(receipts.len()).unwrap_or(u32::MAX),
        scheduled: true,
        speculate: executed.saturating_sub(planned),
        validate: planned,
        merge: start.elapsed().saturating_sub(executed),
        ..ExecStats::default()
    };
    let gas_used = TRANSFER_GAS * receipts.len() as u64;
    Ok(Some(BlockOutcome { receipts, skipped: Vec::new(), gas_used, changes: ChangeSet { accounts }, stats }))
}
