//! The ordered commit: validates each transaction's result in block order
//! against the committed prefix, re-runs it there when a read went stale,
//! and applies it (receipt, gas, deferred coinbase fee). Whichever worker
//! holds the commit lock runs it.

use std::{
    collections::VecDeque,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use alloy_primitives::{B256, U256};
use revm::state::Bytecode;
use sluice_messages::{PreparedTx, Receipt};
use sluice_store::Account as StoredAccount;

use super::{
    engine::{Abort, Shared},
    footprint::{event, field, AccountValue, CoinbasePost, Outcome, TxOutcome, TxResult},
    mv::lock,
    worker::Worker,
};
use crate::stats::SequentialReason;

/// Contention score scale: the score is a moving average of "this
/// speculative result needed a re-run", in 1/1024ths.
const SCORE_ONE: u32 = 1024;
/// Above this share of recent speculative results needing a re-run,
/// speculation is mostly wasted work.
const CONTENTION_THRESHOLD: u32 = SCORE_ONE / 2;
/// Speculative results judged before the contention score is trusted.
const CONTENTION_MIN_SAMPLES: u32 = 12;
/// Contention found within this many transactions: restart the whole block
/// on the sequential executor (little is wasted, and it has no overhead for
/// in-order execution); later, run the rest in order here instead.
const RESTART_WITHIN: u32 = 64;
/// How far back a transaction's writes are compared with earlier ones to
/// recognise a dependency chain (each transaction writing what one of the
/// previous few wrote: no schedule can run those in parallel).
const CHAIN_REACH: usize = 4;
/// Write sets of the most recent commits kept for validation.
const RECENT: usize = 64;
/// Above this many read-against-write comparisons, validate through the
/// multi-version memory instead.
const OVERLAP_BUDGET: usize = 512;

/// The coinbase account as of the last commit. It is not versioned: every
/// transaction's fee changes it, so reads are served from here and checked
/// at commit against the exact prefix.
#[derive(Debug, Clone)]
pub(crate) struct CoinbaseState {
    /// At block start.
    pub(crate) base: Option<StoredAccount>,
    pub(crate) value: AccountValue,
    pub(crate) code: Option<Bytecode>,
}

impl CoinbaseState {
    pub(crate) fn new(base: Option<StoredAccount>) -> Self {
        CoinbaseState { base, value: AccountValue::from_stored(base.as_ref()), code: None }
    }

    /// Applies one applied transaction: its own effect on the coinbase (if it
    /// touched it), then its fee, as revm's `reward_beneficiary` and the
    /// sequential overlay would (the fee add is dropped on overflow and
    /// touches the account; a touched empty account is deleted).
    pub(crate) fn apply(&mut self, post: Option<CoinbasePost>, fee: U256) -> Result<(), Abort> {
        let (mut value, code) = match post {
            Some(post) if post.created || post.destroyed => return Err(Abort::Unsupported),
            Some(post) => {
                let info = post.info;
                let value = AccountValue {
                    balance: info.balance,
                    nonce: info.nonce,
                    code_hash: info.code_hash,
                    exists: self.value.exists,
                };
                (value, info.code)
            }
            None => (self.value, None),
        };
        value.balance = value.balance.checked_add(fee).unwrap_or(value.balance);
        if value.is_empty() {
            // EIP-161 deletion: an existing coinbase would lose its storage,
            // which the multi-version memory does not model.
            if self.value.exists {
                return Err(Abort::Unsupported);
            }
            return Ok(());
        }
        if value.code_hash != self.value.code_hash {
            self.code = code;
        }
        self.value = AccountValue { exists: true, ..value };
        Ok(())
    }
}

/// The committed prefix of the block.
#[derive(Debug)]
pub(crate) struct CommitState {
    /// The next transaction to commit.
    pub(crate) next: u32,
    pub(crate) gas_used: u64,
    pub(crate) receipts: Vec<Receipt>,
    pub(crate) skipped: Vec<(B256, String)>,
    pub(crate) coinbase: CoinbaseState,
    /// The last [`RECENT`] commits (their final writes), the newest last;
    /// `None` for a transaction that wrote nothing.
    recent: VecDeque<Option<Outcome>>,
    pub(crate) conflicts: u32,
    pub(crate) reruns: u32,
    pub(crate) max_depth: u32,
    pub(crate) fast: u32,
    /// Moving share of speculative results that needed a re-run.
    score: u32,
    /// Speculative results judged so far.
    samples: u32,
    /// Among the first commits, how many wrote a location one of the
    /// previous [`CHAIN_REACH`] transactions wrote.
    chained: u32,
    /// Set when the rest of the block runs in order, with where it started.
    pub(crate) sequential: Option<(SequentialReason, u32)>,
    pub(crate) validate_time: Duration,
    /// When the last transaction was committed.
    pub(crate) done_at: Option<Instant>,
}

/// What [`commit_ready`] stopped at.
pub(crate) enum Progress {
    /// Every transaction is committed.
    Done,
    /// The next transaction is still being executed by another worker.
    Waiting,
}

impl CommitState {
    pub(crate) fn new(txs: usize, coinbase: CoinbaseState) -> Self {
        CommitState {
            next: 0,
            gas_used: 0,
            receipts: Vec::with_capacity(txs),
            skipped: Vec::new(),
            coinbase,
            recent: VecDeque::with_capacity(RECENT + 1),
            conflicts: 0,
            reruns: 0,
            max_depth: 0,
            fast: 0,
            score: 0,
            samples: 0,
            chained: 0,
            sequential: None,
            validate_time: Duration::ZERO,
            done_at: None,
        }
    }

    /// The outcomes still kept for validation, for reuse.
    pub(crate) fn drain_recent(&mut self) -> impl Iterator<Item = Outcome> + '_ {
        self.recent.drain(..).flatten()
    }

    fn fall_back(&mut self, shared: &Shared<'_>, reason: SequentialReason, from: u32) {
        if self.sequential.is_none() {
            self.sequential = Some((reason, from));
            shared.tail.store(true, Ordering::Release);
        }
    }
}

/// Commits, in order, every transaction whose result is ready (executing
/// the next one itself when no worker has claimed it). The caller holds the
/// commit lock; `worker` is the caller's own executor, used for re-runs.
pub(crate) fn commit_ready(
    shared: &Shared<'_>,
    worker: &mut Worker<'_>,
    st: &mut CommitState,
) -> Result<Progress, Abort> {
    let start = Instant::now();
    let result = commit_loop(shared, worker, st);
    // Speculative readers of the coinbase get this copy (checked at commit).
    lock(&shared.coinbase_hint).clone_from(&st.coinbase);
    st.validate_time += start.elapsed();
    result
}

fn commit_loop(
    shared: &Shared<'_>,
    worker: &mut Worker<'_>,
    st: &mut CommitState,
) -> Result<Progress, Abort> {
    loop {
        let c = st.next;
        if c == shared.len() {
            st.done_at.get_or_insert_with(Instant::now);
            return Ok(Progress::Done);
        }
        let outcome = if shared.claim(c) {
            // Nobody took it yet: run it here, on the exact prefix.
            let out = worker.execute(c, 0, Some(&st.coinbase))?;
            shared.publish(c, &out, worker);
            out
        } else if let Some(out) = shared.take(c) {
            out
        } else if st.sequential.is_some() {
            // Running in order: the worker still executing it will finish
            // shortly, and only the commit can go on.
            shared.wait_for(c)?
        } else {
            return Ok(Progress::Waiting);
        };
        commit_one(shared, worker, st, c, outcome)?;
    }
}

fn commit_one(
    shared: &Shared<'_>,
    worker: &mut Worker<'_>,
    st: &mut CommitState,
    c: u32,
    mut outcome: Outcome,
) -> Result<(), Abort> {
    if let PreparedTx::Ready(tx) = shared.tx(c) {
        let remaining = shared.rules.block_gas_limit.saturating_sub(st.gas_used);
        if tx.gas_limit() > remaining {
            // Not applicable here, whatever its execution did.
            shared.unpublish(c, &outcome);
            worker.recycle(outcome);
            let reason = format!("gas limit {} exceeds remaining block gas {remaining}", tx.gas_limit());
            st.skipped.push((tx.hash, reason));
            return finish(shared, worker, st, c, None);
        }
    }
    // Only results that raced with earlier transactions say anything about
    // contention: one that started on the exact prefix is valid anyway.
    let raced = outcome.started != c;
    if !still_valid(shared, st, &outcome, c)? {
        st.conflicts += 1;
        let incarnation = outcome.incarnation + 1;
        if incarnation >= shared.max_incarnations {
            st.fall_back(shared, SequentialReason::MaxIncarnations, c);
        }
        // Withdrawn first: the re-run may publish its writes as it goes.
        shared.unpublish(c, &outcome);
        let fresh = worker.execute(c, incarnation, Some(&st.coinbase))?;
        shared.publish(c, &fresh, worker);
        st.reruns += 1;
        st.max_depth = st.max_depth.max(incarnation);
        worker.recycle(std::mem::replace(&mut outcome, fresh));
        st.score += (SCORE_ONE - st.score) / 8;
        st.samples += 1;
    } else if raced {
        st.score -= st.score / 8;
        st.samples += 1;
    }
    // A block that starts as a dependency chain is handed to the sequential
    // executor, whatever the timing (with one core, nothing races, yet the
    // parallel bookkeeping is pure overhead).
    let window = RESTART_WITHIN.min(shared.len() / 4);
    if c < window {
        st.chained += u32::from(chains(st, &outcome));
        if c + 1 == window && st.chained * 4 > window * 3 {
            return Err(Abort::Contended);
        }
    }
    if st.score > CONTENTION_THRESHOLD && st.samples >= CONTENTION_MIN_SAMPLES && st.sequential.is_none() {
        if c < window {
            return Err(Abort::Contended);
        }
        st.fall_back(shared, SequentialReason::Contention, c + 1);
    }
    // Fields are taken out rather than the whole (large) outcome moved.
    st.fast += u32::from(outcome.fast);
    match std::mem::replace(&mut outcome.result, TxResult::Skipped(String::new())) {
        TxResult::Skipped(reason) => {
            assert!(
                outcome.account_writes.is_empty() && outcome.slot_writes.is_empty(),
                "a skipped transaction wrote state"
            );
            st.skipped.push((shared.tx(c).hash(), reason));
        }
        TxResult::Applied { mut receipt, fee } => {
            st.coinbase.apply(outcome.coinbase_post.take().map(|post| *post), fee)?;
            st.gas_used = st.gas_used.saturating_add(receipt.gas_used);
            receipt.index = u32::try_from(st.receipts.len()).unwrap_or(u32::MAX);
            receipt.cumulative_gas_used = st.gas_used;
            st.receipts.push(receipt);
        }
    }
    finish(shared, worker, st, c, Some(outcome))
}

fn finish(
    shared: &Shared<'_>,
    worker: &mut Worker<'_>,
    st: &mut CommitState,
    c: u32,
    outcome: Option<Outcome>,
) -> Result<(), Abort> {
    if st.recent.len() == RECENT {
        if let Some(old) = st.recent.pop_front().flatten() {
            worker.recycle(old);
        }
    }
    st.recent.push_back(outcome);
    st.next = c + 1;
    shared.committed.store(c + 1, Ordering::Release);
    Ok(())
}

/// Whether `outcome` writes a location one of the last [`CHAIN_REACH`]
/// committed transactions wrote.
fn chains(st: &CommitState, outcome: &TxOutcome) -> bool {
    let from = st.recent.len().saturating_sub(CHAIN_REACH);
    st.recent.range(from..).flatten().any(|w| {
        outcome.account_writes.iter().any(|a| {
            w.account_writes.iter().any(|b| a.address == b.address && a.mask & b.mask & field::ALL != 0)
        }) || outcome
            .slot_writes
            .iter()
            .any(|a| w.slot_writes.iter().any(|b| a.address == b.address && a.key == b.key))
    })
}

/// Whether every read of `outcome` (transaction `c`) still holds now that
/// every transaction before it is committed.
fn still_valid(shared: &Shared<'_>, st: &CommitState, outcome: &TxOutcome, c: u32) -> Result<bool, Abort> {
    if outcome.coinbase_read.as_deref().is_some_and(|read| *read != st.coinbase.value) {
        return Ok(false);
    }
    let started = outcome.started;
    if started == c {
        // Everything before it was committed when it started.
        return Ok(true);
    }
    if let Some(valid) = valid_by_recent_writes(st, outcome, c) {
        return Ok(valid);
    }
    for read in outcome.account_reads.iter() {
        if !shared.mv.account_read_holds(shared.reader, read, c)? {
            return Ok(false);
        }
    }
    for read in &outcome.slot_reads {
        if !shared.mv.slot_read_holds(shared.reader, read, c)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The cheap check, when it applies. Transactions before `started` were
/// committed before any read, so what it read from them (or from the block
/// start) is final, unless a transaction committed since (`started..c`)
/// wrote the location: then it is invalid. `None` when a read came from a
/// transaction committed since (its version may have been replaced), or the
/// window or the comparison would be too large.
fn valid_by_recent_writes(st: &CommitState, outcome: &TxOutcome, c: u32) -> Option<bool> {
    let window = (c - outcome.started) as usize;
    if window > st.recent.len() {
        return None;
    }
    let settled = |tx: Option<u32>| tx.is_none_or(|t| t < outcome.started);
    let accounts_settled = outcome.account_reads.iter().all(|r| r.versions.iter().all(|v| settled(v.tx())));
    if !accounts_settled || !outcome.slot_reads.iter().all(|r| settled(r.version.tx())) {
        return None;
    }
    let recent = st.recent.range(st.recent.len() - window..).flatten();
    let reads = outcome.account_reads.len() + outcome.slot_reads.len();
    let writes: usize = recent.clone().map(|w| w.account_writes.len() + w.slot_writes.len()).sum();
    if reads * writes > OVERLAP_BUDGET {
        return None;
    }
    for w in recent {
        for a in w.account_writes.iter() {
            let wipes = a.mask & event::WIPES != 0;
            let hit_account = outcome
                .account_reads
                .iter()
                .any(|r| r.address == a.address && r.mask & a.mask & field::ALL != 0);
            let hit_slot = wipes && outcome.slot_reads.iter().any(|r| r.address == a.address);
            if hit_account || hit_slot {
                return Some(false);
            }
        }
        for s in &w.slot_writes {
            if outcome.slot_reads.iter().any(|r| r.address == s.address && r.key == s.key) {
                return Some(false);
            }
        }
    }
    Some(true)
}
