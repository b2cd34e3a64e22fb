//! Planning a block of plain transfers: each transaction's plan, the groups
//! of transactions connected by a shared account, and which worker runs
//! each group.
//!
//! The work is split so that the serial part is small: each worker plans a
//! range of transactions, then, for the accounts in its share (by address),
//! records which transaction touched each one last before the next; only
//! joining those pairs into groups (array operations, no hashing) runs on
//! one thread.

use std::sync::{Mutex, OnceLock};

use alloy_primitives::{map::AddressMap, Address, U256};
use sluice_messages::{PreparedBlock, PreparedTx};

use super::Padded;
use crate::occ::{
    mv::lock,
    threads::Workers,
    transfer::{self, Plan, Rules, TRANSFER_GAS},
};

/// Which worker runs each transaction, and how.
pub(super) struct Schedule {
    /// Each worker's range of plans (see [`range`]).
    chunks: Vec<Vec<Plan>>,
    /// Where each chunk starts.
    starts: Vec<usize>,
    /// The worker of each transaction.
    pub(super) owner: Vec<u32>,
    /// Transactions per worker.
    pub(super) load: Vec<usize>,
    /// The sum of the fees owed to the coinbase, `None` if it overflows.
    pub(super) fees: Option<U256>,
}

impl Schedule {
    /// Transaction `i`'s plan.
    pub(super) fn plan(&self, i: usize) -> &Plan {
        let w = self.starts.partition_point(|s| *s <= i).saturating_sub(1);
        &self.chunks[w][i - self.starts[w]]
    }

    /// Every plan, in block order.
    pub(super) fn plans(&self) -> impl Iterator<Item = &Plan> {
        self.chunks.iter().flatten()
    }
}

/// Worker `w`'s range of the block's `n` transactions, for work that is
/// split by position.
pub(super) fn range(n: usize, w: usize, workers: usize) -> std::ops::Range<usize> {
    n * w / workers..n * (w + 1) / workers
}

/// The worker whose share of the accounts `a` is in.
fn shard(a: &Address, workers: usize) -> usize {
    usize::from(a[19]) % workers
}

/// What one worker found in its range of transactions.
struct Part {
    plans: Vec<Plan>,
    fees: Option<U256>,
    /// Each transaction's sender and recipient, compact: every worker
    /// reads all of them next.
    pairs: Vec<[Address; 2]>,
}

/// Worker `w`'s planning; `None` when a transaction in its range is not a
/// plain transfer or might not fit the block.
fn plan_part(rules: &Rules, block: &PreparedBlock, w: usize, workers: usize) -> Option<Part> {
    let mine = range(block.txs.len(), w, workers);
    let mut part = Part {
        plans: Vec::with_capacity(mine.len()),
        fees: Some(U256::ZERO),
        pairs: Vec::with_capacity(mine.len()),
    };
    for i in mine {
        let PreparedTx::Ready(tx) = &block.txs[i] else {
            return None;
        };
        let plan = transfer::plan(rules, tx)?;
        // Every earlier transaction applied (else the attempt is abandoned):
        // exactly this much block gas is left, as the sequential executor
        // sees it.
        let used = u64::try_from(i).ok()?.checked_mul(TRANSFER_GAS)?;
        if tx.gas_limit() > rules.block_gas_limit.checked_sub(used)? {
            return None;
        }
        part.fees = part.fees.and_then(|f| f.checked_add(plan.fee));
        part.pairs.push([tx.sender, plan.to]);
        part.plans.push(plan);
    }
    Some(part)
}

/// `(earlier, later)`: consecutive transactions touching one of the
/// accounts in worker `w`'s share, which must run in order on one worker.
fn edges(parts: &[&Part], w: usize, workers: usize, last: &mut AddressMap<u32>) -> Vec<(u32, u32)> {
    let pairs = parts.iter().flat_map(|p| p.pairs.iter());
    last.clear();
    let n: usize = parts.iter().map(|p| p.pairs.len()).sum();
    last.reserve(2 * n / workers + 1);
    let mut edges = Vec::new();
    for (i, pair) in (0u32..).zip(pairs) {
        for account in pair {
            if shard(account, workers) == w {
                if let Some(prev) = last.insert(*account, i) {
                    edges.push((prev, i));
                }
            }
        }
    }
    edges
}

/// The root of `i`'s group (path halving).
fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        let up = parent[parent[i as usize] as usize];
        parent[i as usize] = up;
        i = up;
    }
    i
}

/// Plans every transaction and splits the block into groups, or `None`
/// when some transaction is not a plain transfer (or might not fit the
/// block, or the threads could not be started). `last` holds one empty
/// map per worker, for reuse.
pub(super) fn schedule(
    rules: &Rules,
    block: &PreparedBlock,
    threads: &Workers,
    last: &[Padded<Mutex<AddressMap<u32>>>],
) -> Option<Schedule> {
    let workers = threads.len();
    let n = block.txs.len();
    // A block of contract calls fails on its first transaction: find out
    // before waking the threads and sizing their plans for the block.
    match block.txs.first() {
        None => {}
        Some(PreparedTx::Ready(tx)) if transfer::plan(rules, tx).is_some() => {}
        Some(_) => return None,
    }
    let parts: Vec<OnceLock<Option<Part>>> = (0..workers).map(|_| OnceLock::new()).collect();
    let edges = threads.together(|w, gate| {
        let _ = parts[w].set(plan_part(rules, block, w, workers));
        if !gate.wait(1) {
            return None;
        }
        let all: Vec<&Part> =
            parts.iter().map(|p| p.get().and_then(Option::as_ref)).collect::<Option<_>>()?;
        Some(edges(&all, w, workers, &mut lock(&last[w].0)))
    })?;
    let edges: Vec<Vec<(u32, u32)>> = edges.into_iter().collect::<Option<_>>()?;
    let parts: Vec<Part> = parts.into_iter().map(|p| p.into_inner().flatten()).collect::<Option<_>>()?;
    // A union-find over transactions whose root is the group's first.
    let mut parent: Vec<u32> = (0..u32::try_from(n).ok()?).collect();
    for (a, b) in edges.iter().flatten().copied() {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        parent[ra.max(rb) as usize] = ra.min(rb);
    }
    // Groups in order of their first transaction fill the workers one after
    // another, so that each worker runs mostly consecutive transactions.
    let roots: Vec<u32> = (0..n as u32).map(|i| find(&mut parent, i)).collect();
    let mut size = vec![0u32; n];
    for r in &roots {
        size[*r as usize] += 1;
    }
    let target = n.div_ceil(workers);
    let mut owner = vec![0u32; n];
    let mut load = vec![0usize; workers];
    let mut w = 0;
    for (i, r) in roots.iter().enumerate() {
        if *r as usize == i {
            if load[w] >= target && w + 1 < workers {
                w += 1;
            }
            owner[i] = w as u32;
            load[w] += size[i] as usize;
        } else {
            owner[i] = owner[*r as usize];
        }
    }
    let fees = parts.iter().try_fold(U256::ZERO, |acc, p| acc.checked_add(p.fees?));
    let starts = (0..workers).map(|w| range(n, w, workers).start).collect();
    let chunks = parts.into_iter().map(|p| p.plans).collect();
    Some(Schedule { chunks, starts, owner, load, fees })
}
