//! Planning a block of plain transfers: each transaction's plan, and the
//! groups of transactions connected by a shared account.
//!
//! The work is split so that the serial part is small: the workers plan
//! chunks of transactions as they claim them, then each, for the accounts
//! in its share (by address), records which transaction touched each one
//! last before the next; only joining those pairs into groups (array
//! operations, no hashing) runs on one thread.

use std::{
    ops::Range,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        OnceLock,
    },
};

use alloy_primitives::{map::AddressMap, Address, U256};
use sluice_messages::{PreparedBlock, PreparedTx};

use crate::parallel::transfer::{self, Plan, Rules, TRANSFER_GAS};

/// Transactions per chunk of planning. Claimed one at a time, chunks let a
/// worker that woke late, or runs on a busier core, do less of the work.
const PLAN_CHUNK: usize = 128;

/// Transactions per chunk of execution (see [`Schedule::claim`]).
const RUN_CHUNK: usize = 64;

/// No transaction: the end of a group.
const END: u32 = u32::MAX;

/// What planning found in one chunk of transactions.
struct Part {
    plans: Vec<Plan>,
    fees: Option<U256>,
    /// Each transaction's sender and recipient, compact: every worker
    /// reads all of them next.
    pairs: Vec<[Address; 2]>,
}

/// The plans of `txs`; `None` when one of them is not a plain transfer or
/// might not fit the block.
fn plan_part(rules: &Rules, block: &PreparedBlock, txs: Range<usize>) -> Option<Part> {
    let mut part = Part {
        plans: Vec::with_capacity(txs.len()),
        fees: Some(U256::ZERO),
        pairs: Vec::with_capacity(txs.len()),
    };
    for i in txs {
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

/// The worker whose share of the accounts `a` is in.
fn shard(a: &Address, workers: usize) -> usize {
    usize::from(a[19]) % workers
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

/// A block's planning, filled in by the workers together: first
/// [`Planning::plan`] on every worker, then [`Planning::edges`] on every
/// worker, then [`Planning::schedule`] on one.
pub(super) struct Planning {
    n: usize,
    parts: Vec<OnceLock<Option<Part>>>,
    claimed: AtomicUsize,
    /// A chunk failed to plan: the block does not qualify, and the other
    /// workers stop claiming (a block of mostly contract calls whose first
    /// transaction is a transfer is found out after a chunk or two, not
    /// after planning the whole block).
    failed: AtomicBool,
    /// Each worker's `(earlier, later)` pairs of consecutive transactions
    /// touching one of the accounts in its share.
    edges: Vec<OnceLock<Vec<(u32, u32)>>>,
}

impl Planning {
    /// Planning for a block of `n` transactions on `workers` workers.
    pub(super) fn new(n: usize, workers: usize) -> Self {
        Planning {
            n,
            parts: (0..n.div_ceil(PLAN_CHUNK)).map(|_| OnceLock::new()).collect(),
            claimed: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            edges: (0..workers).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Plans chunks until none is left; `false` when a transaction is not
    /// a plain transfer (or might not fit the block).
    pub(super) fn plan(&self, rules: &Rules, block: &PreparedBlock) -> bool {
        loop {
            if self.failed.load(Ordering::Relaxed) {
                return false;
            }
            let c = self.claimed.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = self.parts.get(c) else {
                return true;
            };
            let txs = c * PLAN_CHUNK..((c + 1) * PLAN_CHUNK).min(self.n);
            let part = plan_part(rules, block, txs);
            let planned = part.is_some();
            let _ = slot.set(part);
            if !planned {
                self.failed.store(true, Ordering::Relaxed);
                return false;
            }
        }
    }

    /// Every chunk's plans, once every worker's [`Planning::plan`] is done;
    /// `None` if one failed.
    fn parts(&self) -> Option<Vec<&Part>> {
        self.parts.iter().map(|p| p.get().and_then(Option::as_ref)).collect()
    }

    /// Worker `w`'s pairs of consecutive transactions touching the same
    /// account (of its share), which must run in order on one worker;
    /// `false` if planning failed. `last` is scratch space.
    pub(super) fn edges(&self, w: usize, workers: usize, last: &mut AddressMap<u32>) -> bool {
        let Some(parts) = self.parts() else {
            return false;
        };
        last.clear();
        last.reserve(2 * self.n / workers + 1);
        let mut edges = Vec::new();
        let pairs = parts.iter().flat_map(|p| p.pairs.iter());
        for (i, pair) in (0u32..).zip(pairs) {
            for account in pair {
                if shard(account, workers) == w {
                    if let Some(prev) = last.insert(*account, i) {
                        edges.push((prev, i));
                    }
                }
            }
        }
        self.edges.get(w).is_some_and(|slot| slot.set(edges).is_ok())
    }

    /// Joins every worker's edges into groups, once every worker's
    /// [`Planning::edges`] is done; `None` if something failed.
    pub(super) fn schedule(&self) -> Option<Schedule<'_>> {
        let parts = self.parts()?;
        // Keys into the workers' lists of accounts (two per transaction) are
        // 32-bit.
        let n = u32::try_from(self.n).ok().filter(|n| *n <= u32::MAX / 4)?;
        // A union-find over transactions whose root is the group's first.
        let mut parent: Vec<u32> = (0..n).collect();
        for edges in &self.edges {
            for (a, b) in edges.get()?.iter().copied() {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                parent[ra.max(rb) as usize] = ra.min(rb);
            }
        }
        // Link each group's transactions in block order: `tail` holds the
        // last one seen of each group, by root.
        let mut next = vec![END; self.n];
        let mut tail = vec![END; self.n];
        for i in 0..n {
            let root = find(&mut parent, i) as usize;
            if let Some(prev) = tail.get(root).copied().filter(|t| *t != END) {
                next[prev as usize] = i;
            }
            tail[root] = i;
        }
        // `tail[i] == END` now exactly when `i` is not a group's first.
        let fees = parts.iter().try_fold(U256::ZERO, |acc, p| acc.checked_add(p.fees?));
        Some(Schedule { parts, next, first: tail, fees, claimed: AtomicUsize::new(0) })
    }
}

/// The block's plans and groups, from which the workers claim work.
pub(super) struct Schedule<'p> {
    parts: Vec<&'p Part>,
    /// The next transaction of each one's group, or [`END`].
    next: Vec<u32>,
    /// [`END`] for transactions that are not their group's first.
    first: Vec<u32>,
    /// The sum of the fees owed to the coinbase, `None` if it overflows.
    pub(super) fees: Option<U256>,
    claimed: AtomicUsize,
}

impl Schedule<'_> {
    /// Transaction `i`'s plan.
    pub(super) fn plan(&self, i: usize) -> &Plan {
        &self.parts[i / PLAN_CHUNK].plans[i % PLAN_CHUNK]
    }

    /// Every plan, in block order.
    pub(super) fn plans(&self) -> impl Iterator<Item = &Plan> {
        self.parts.iter().flat_map(|p| p.plans.iter())
    }

    /// The next unclaimed chunk of transactions: the claimer runs the
    /// groups whose first transaction is in it, each whole and in order
    /// ([`Schedule::group`]). Different groups touch different accounts,
    /// so which worker runs which does not change the outcome; claiming
    /// small chunks keeps both workers busy to the end.
    pub(super) fn claim(&self) -> Option<Range<usize>> {
        let n = self.next.len();
        let start = self.claimed.fetch_add(RUN_CHUNK, Ordering::Relaxed);
        (start < n).then(|| start..(start + RUN_CHUNK).min(n))
    }

    /// Whether transaction `i` is a group of its own.
    pub(super) fn alone(&self, i: usize) -> bool {
        self.first.get(i).is_some_and(|f| *f != END) && self.next.get(i).is_some_and(|n| *n == END)
    }

    /// The transactions of the group that starts at `i`, in block order;
    /// empty if `i` is not a group's first.
    pub(super) fn group(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self.first.get(i).is_some_and(|f| *f != END);
        let mut at = if first { i as u32 } else { END };
        std::iter::from_fn(move || {
            let i = (at != END).then_some(at as usize)?;
            at = self.next[i];
            Some(i)
        })
    }
}
