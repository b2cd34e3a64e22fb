//! The ordered commit: validates each transaction's result in block order
//! against the committed prefix, re-runs it there when a read went stale,
//! and applies it (receipt, gas, deferred coinbase fee). Whichever worker
//! holds the commit lock runs it.

use std::time::{Duration, Instant};

use alloy_primitives::{B256, U256};
use revm::state::Bytecode;
use sluice_messages::{PreparedTx, Receipt};
use sluice_store::Account as StoredAccount;

use super::{
    engine::{Abort, Shared},
    footprint::{AccountValue, CoinbasePost, TxOutcome, TxResult},
    mv::lock,
    worker::Worker,
};
use crate::stats::SequentialReason;

/// Contention score scale: the score is a moving average of "this commit
/// needed a re-run", in 1/1024ths.
const SCORE_ONE: u32 = 1024;
/// Above this share of recent commits needing a re-run, speculation is
/// mostly wasted: the rest of the block runs in order.
const CONTENTION_THRESHOLD: u32 = SCORE_ONE / 2;
/// Commits before the contention score is trusted.
const CONTENTION_MIN_COMMITS: u32 = 24;

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
    fn apply(&mut self, post: Option<CoinbasePost>, fee: U256) -> Result<(), Abort> {
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
#[derive(Debug, Default)]
pub(crate) struct CommitState {
    /// The next transaction to commit.
    pub(crate) next: u32,
    pub(crate) gas_used: u64,
    pub(crate) receipts: Vec<Receipt>,
    pub(crate) skipped: Vec<(B256, String)>,
    pub(crate) conflicts: u32,
    pub(crate) reruns: u32,
    pub(crate) max_depth: u32,
    pub(crate) fast: u32,
    /// Moving share of commits that needed a re-run.
    pub(crate) score: u32,
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
    fn fall_back(&mut self, shared: &Shared<'_>, reason: SequentialReason, from: u32) {
        if self.sequential.is_none() {
            self.sequential = Some((reason, from));
            shared.tail.store(true, std::sync::atomic::Ordering::Release);
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
    st.validate_time += start.elapsed();
    result
}

fn commit_loop(shared: &Shared<'_>, worker: &mut Worker<'_>, st: &mut CommitState) -> Result<Progress, Abort> {
    loop {
        let c = st.next;
        if c == shared.len() {
            st.done_at.get_or_insert_with(Instant::now);
            return Ok(Progress::Done);
        }
        let outcome = match lock(&shared.slots[c as usize]).take() {
            Some(outcome) => outcome,
            // Nobody took it yet: run it here, on the exact prefix.
            None if shared.claim(c) => {
                let out = worker.execute(c, 0)?;
                shared.publish(c, &out);
                out
            }
            None if st.sequential.is_some() => {
                // Running in order: the worker still executing it will
                // finish shortly, and only the commit can go on.
                shared.wait_for(c)?
            }
            None => return Ok(Progress::Waiting),
        };
        commit_one(shared, worker, st, c, outcome)?;
    }
}

fn commit_one(
    shared: &Shared<'_>,
    worker: &mut Worker<'_>,
    st: &mut CommitState,
    c: u32,
    mut outcome: TxOutcome,
) -> Result<(), Abort> {
    let tx = match shared.tx(c) {
        PreparedTx::Ready(tx) => Some(tx),
        PreparedTx::Invalid { .. } => None,
    };
    if let Some(tx) = tx {
        let remaining = shared.block_gas_limit.saturating_sub(st.gas_used);
        if tx.gas_limit() > remaining {
            // Not applicable here, whatever its execution did.
            shared.unpublish(c, &outcome);
            let reason = format!("gas limit {} exceeds remaining block gas {remaining}", tx.gas_limit());
            st.skipped.push((tx.hash, reason));
            return finish(shared, st, c);
        }
    }
    let rerun = !outcome.exact && !still_valid(shared, &outcome, c)?;
    if rerun {
        st.conflicts += 1;
        let incarnation = outcome.incarnation + 1;
        if incarnation >= shared.max_incarnations {
            st.fall_back(shared, SequentialReason::MaxIncarnations, c);
        }
        let fresh = worker.execute(c, incarnation)?;
        shared.unpublish(c, &outcome);
        shared.publish(c, &fresh);
        st.reruns += 1;
        st.max_depth = st.max_depth.max(incarnation);
        outcome = fresh;
        st.score += (SCORE_ONE - st.score) / 8;
    } else {
        st.score -= st.score / 8;
    }
    if st.score > CONTENTION_THRESHOLD && c >= CONTENTION_MIN_COMMITS {
        st.fall_back(shared, SequentialReason::Contention, c + 1);
    }
    st.fast += u32::from(outcome.fast);
    match outcome.result {
        TxResult::Skipped(reason) => {
            assert!(
                outcome.account_writes.is_empty() && outcome.slot_writes.is_empty(),
                "a skipped transaction wrote state"
            );
            st.skipped.push((shared.tx(c).hash(), reason));
        }
        TxResult::Applied { mut receipt, fee } => {
            lock(&shared.coinbase_state).apply(outcome.coinbase_post, fee)?;
            st.gas_used = st.gas_used.saturating_add(receipt.gas_used);
            receipt.index = u32::try_from(st.receipts.len()).unwrap_or(u32::MAX);
            receipt.cumulative_gas_used = st.gas_used;
            st.receipts.push(receipt);
        }
    }
    finish(shared, st, c)
}

fn finish(shared: &Shared<'_>, st: &mut CommitState, c: u32) -> Result<(), Abort> {
    st.next = c + 1;
    shared.committed.store(c + 1, std::sync::atomic::Ordering::Release);
    Ok(())
}

/// Whether every read of `outcome` (transaction `c`) still holds now that
/// every transaction before it is committed.
fn still_valid(shared: &Shared<'_>, outcome: &TxOutcome, c: u32) -> Result<bool, Abort> {
    if let Some(read) = outcome.coinbase_read {
        if read != lock(&shared.coinbase_state).value {
            return Ok(false);
        }
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
