//! Parity-style traces (OpenEthereum's `trace_*`, as erigon and reth serve
//! them), built by revm-inspectors' [`TracingInspector`] and its
//! [`ParityTraceBuilder`](revm_inspectors::tracing::parity): `trace`
//! (every call frame as an action and its result), `stateDiff` and
//! `vmTrace`.
//!
//! A mined transaction is re-executed as the geth tracers do
//! ([`crate::trace`]): its block's applied transactions ahead of it on the
//! state before the block, then it under the inspector, on the plain
//! mainnet handler. A block's transactions are each executed once, under
//! the inspector, and applied in turn.
//!
//! Bounded as the geth tracers are ([`TraceLimits`]): one deadline for the
//! whole call, the output counted per frame (and per step for `vmTrace`)
//! while the EVM runs, and the built answer measured against
//! `max_bytes` before it is returned, so a trace past the limit is stopped
//! with its error rather than built. Block reward traces, which erigon and
//! reth append to `trace_block`, do not exist here: sluice pays no block
//! reward.

use std::io;

use alloy_primitives::{map::HashSet, B256};
use alloy_rpc_types_eth::TransactionInfo;
use alloy_rpc_types_trace::{
    filter::{TraceFilter, TraceFilterMatcher},
    parity::{LocalizedTransactionTrace, TraceResults, TraceResultsWithTransactionHash, TraceType},
};
use revm::{
    context::{BlockEnv, CfgEnv, Context, TxEnv},
    context_interface::result::{EVMError, ResultAndState},
    InspectEvm, MainBuilder, MainContext,
};
use revm_inspectors::tracing::{parity::populate_state_diff, TracingInspector, TracingInspectorConfig};
use serde::Serialize;
use sluice_messages::{BlockHeader, RecoveredTx};
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    env::{block_env, cfg_env, tx_env},
    trace::{replay, stopped, RefDb, TracePosition},
    trace_limits::{Budget, ParityRecords, Stopped, TraceLimits},
    ExecConfig, ExecError,
};

/// `trace_transaction`: the call frames of `tx`, the transaction at `at`
/// of the block with `header`, after replaying `before` (the block's
/// applied transactions ahead of it) on `state` (the state before the
/// block).
pub fn trace_transaction(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    before: &[RecoveredTx],
    (tx, at): (&RecoveredTx, TracePosition),
    limits: &TraceLimits,
) -> Result<Vec<LocalizedTransactionTrace>, ExecError> {
    let mut budget = Budget::parity(limits, FRAMES);
    let mut db = BlockState::with_capacity(state, 2 * before.len() + 2);
    replay(&mut db, cfg, header, before, &mut budget)?;
    let config = TracingInspectorConfig::default_parity();
    let (inspector, _) = inspected(&mut db, header, cfg, tx, config, &mut budget)?;
    let traces = inspector.into_parity_builder().into_localized_transaction_traces(info(header, tx, at));
    within(traces, &budget)
}

/// `trace_block`: the call frames of each of the block's applied
/// transactions `txs`, in order, on `state` (the state before the block).
/// No block reward trace: sluice pays none.
pub fn trace_block(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    block_hash: B256,
    txs: &[RecoveredTx],
    limits: &TraceLimits,
) -> Result<Vec<LocalizedTransactionTrace>, ExecError> {
    let mut budget = Budget::parity(limits, FRAMES);
    let mut out = Vec::new();
    block_traces(state, cfg, (header, block_hash), txs, &mut budget, &mut out, None)?;
    within(out, &budget)
}

/// Appends to `out` the call frames of each of the block's applied
/// transactions `txs` (as [`trace_block`]), within `budget`; with
/// `matcher`, only those it matches, and the budget then counts only
/// what is kept (the frames dropped were counted while they ran).
fn block_traces(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    (header, block_hash): (&BlockHeader, B256),
    txs: &[RecoveredTx],
    budget: &mut Budget,
    out: &mut Vec<LocalizedTransactionTrace>,
    matcher: Option<&TraceFilterMatcher>,
) -> Result<(), ExecError> {
    let mut db = BlockState::with_capacity(state, 2 * txs.len() + 2);
    for (index, tx) in txs.iter().enumerate() {
        let before = budget.bytes();
        let config = TracingInspectorConfig::default_parity();
        let (inspector, res) = inspected(&mut db, header, cfg, tx, config, budget)?;
        let at = TracePosition { block_hash, index };
        let traces =
            inspector.into_parity_builder().into_localized_transaction_traces_iter(info(header, tx, at));
        match matcher {
            None => out.extend(traces),
            Some(matcher) => {
                let kept: Vec<_> = traces.filter(|t| matcher.matches(&t.trace)).collect();
                budget.recount(before.saturating_add(json_size(&kept)));
                out.extend(kept);
                if budget.stopped.is_some() {
                    return Err(stopped(budget));
                }
            }
        }
        db.commit_tx(res.state)?;
    }
    Ok(())
}

/// `trace_filter` over a range of blocks: each block re-traced as
/// [`trace_block`] does, its traces kept if `filter`'s matcher
/// (`fromAddress`, `toAddress`, `mode`) matches them, then paged by
/// `after` and `count` ([`page`]). One deadline and one `max_bytes` for
/// the whole range: what is kept counts against `max_bytes`, and a block's
/// frames count while they run.
pub struct TraceFilterRun {
    budget: Budget,
    matcher: TraceFilterMatcher,
    after: Option<u64>,
    count: Option<u64>,
    out: Vec<LocalizedTransactionTrace>,
}

impl TraceFilterRun {
    /// A run of `filter` within `limits` (its range is the caller's).
    pub fn new(filter: &TraceFilter, limits: &TraceLimits) -> TraceFilterRun {
        TraceFilterRun {
            budget: Budget::parity(limits, FRAMES),
            matcher: filter.matcher(),
            after: filter.after,
            count: filter.count,
            out: Vec::new(),
        }
    }

    /// Traces the next block of the range (its applied transactions
    /// `txs` on `state`, the state before it) and keeps what matches.
    pub fn block(
        &mut self,
        state: &dyn StateReader,
        cfg: &ExecConfig,
        header: &BlockHeader,
        block_hash: B256,
        txs: &[RecoveredTx],
    ) -> Result<(), ExecError> {
        if self.budget.expired() {
            return Err(stopped(&self.budget));
        }
        let Self { budget, matcher, out, .. } = self;
        block_traces(state, cfg, (header, block_hash), txs, budget, out, Some(matcher))
    }

    /// The traces kept, paged by `after` and `count`.
    pub fn finish(self) -> Result<Vec<LocalizedTransactionTrace>, ExecError> {
        within(page(self.out, self.after, self.count), &self.budget)
    }
}

/// `trace_filter`'s paging: the first `after` traces skipped, then at most
/// `count` of the rest. `after` past the end leaves none (erigon; reth
/// ignores such an `after` and answers every trace).
pub fn page<T>(traces: Vec<T>, after: Option<u64>, count: Option<u64>) -> Vec<T> {
    let after = after.map_or(0, |a| usize::try_from(a).unwrap_or(usize::MAX));
    let count = count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    traces.into_iter().skip(after).take(count).collect()
}

/// The bytes of `value`'s JSON, counted without writing it out.
fn json_size<T: Serialize>(value: &T) -> usize {
    let mut size = Counted { bytes: 0, max: usize::MAX };
    let _ = serde_json::to_writer(&mut size, value);
    size.bytes
}

/// `trace_replayTransaction`: `tx` re-executed after `before` (as in
/// [`trace_transaction`]), with the outputs `types` asks for.
pub fn replay_transaction(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    before: &[RecoveredTx],
    tx: &RecoveredTx,
    types: &HashSet<TraceType>,
    limits: &TraceLimits,
) -> Result<TraceResults, ExecError> {
    let mut budget = Budget::parity(limits, records(types));
    let mut db = BlockState::with_capacity(state, 2 * before.len() + 2);
    replay(&mut db, cfg, header, before, &mut budget)?;
    let (results, _) = replayed(&mut db, header, cfg, tx, types, &mut budget)?;
    within(results, &budget)
}

/// `trace_replayBlockTransactions`: each of the block's applied
/// transactions `txs` re-executed in order on `state` (the state before
/// the block), with the outputs `types` asks for.
pub fn replay_block(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    txs: &[RecoveredTx],
    types: &HashSet<TraceType>,
    limits: &TraceLimits,
) -> Result<Vec<TraceResultsWithTransactionHash>, ExecError> {
    let mut budget = Budget::parity(limits, records(types));
    let mut db = BlockState::with_capacity(state, 2 * txs.len() + 2);
    let mut out = Vec::with_capacity(txs.len());
    for tx in txs {
        let (full_trace, res) = replayed(&mut db, header, cfg, tx, types, &mut budget)?;
        out.push(TraceResultsWithTransactionHash { full_trace, transaction_hash: tx.hash });
        db.commit_tx(res.state)?;
    }
    within(out, &budget)
}

/// What `trace_transaction` and `trace_block` record: the frames.
pub(crate) const FRAMES: ParityRecords = ParityRecords { frames: true, steps: false };

/// What a replay asking for `types` records.
fn records(types: &HashSet<TraceType>) -> ParityRecords {
    ParityRecords { frames: types.contains(&TraceType::Trace), steps: types.contains(&TraceType::VmTrace) }
}

/// Where `tx` sits, as a localized trace reports it.
fn info(header: &BlockHeader, tx: &RecoveredTx, at: TracePosition) -> TransactionInfo {
    TransactionInfo {
        hash: Some(tx.hash),
        index: Some(at.index as u64),
        block_hash: Some(at.block_hash),
        block_number: Some(header.number),
        base_fee: Some(header.base_fee),
        block_timestamp: Some(header.timestamp),
    }
}

/// Runs `tx` on `db` under an inspector configured for `types` and builds
/// its [`TraceResults`] (the state diff against `db`, which is left
/// unchanged); the execution's state is returned for the caller to apply.
fn replayed(
    db: &mut BlockState<'_>,
    header: &BlockHeader,
    cfg: &ExecConfig,
    tx: &RecoveredTx,
    types: &HashSet<TraceType>,
    budget: &mut Budget,
) -> Result<(TraceResults, ResultAndState), ExecError> {
    let config = TracingInspectorConfig::from_parity_config(types);
    let (inspector, res) = inspected(db, header, cfg, tx, config, budget)?;
    let mut results = inspector.into_parity_builder().into_trace_results(&res.result, types);
    if let Some(diff) = results.state_diff.as_mut() {
        populate_state_diff(diff, &RefDb::new(db), res.state.iter())?;
    }
    Ok((results, res))
}

/// Runs `tx` on `db` (unchanged) under a [`TracingInspector`] with
/// `config`, within `budget`.
pub(crate) fn inspected(
    db: &mut BlockState<'_>,
    header: &BlockHeader,
    cfg: &ExecConfig,
    tx: &RecoveredTx,
    config: TracingInspectorConfig,
    budget: &mut Budget,
) -> Result<(TracingInspector, ResultAndState), ExecError> {
    if budget.expired() {
        return Err(stopped(budget));
    }
    let env: TxEnv = tx_env(tx).map_err(|e| ExecError::InvalidCall(e.into()))?;
    let block: BlockEnv = block_env(header, cfg.spec);
    let cfg_env: CfgEnv = cfg_env(cfg);
    let mut inspector = TracingInspector::new(config);
    let res = {
        let mut evm = Context::mainnet()
            .with_db(&mut *db)
            .with_block(block)
            .with_cfg(cfg_env)
            .build_mainnet_with_inspector((&mut inspector, &mut *budget));
        evm.inspect_tx(env)
    };
    // A stopped trace unwinds as out of gas: its cause is the budget's.
    if budget.stopped.is_some() {
        return Err(stopped(budget));
    }
    match res {
        Ok(res) => Ok((inspector, res)),
        Err(EVMError::Database(e)) => Err(e.into()),
        Err(e) => Err(ExecError::InvalidCall(e.to_string())),
    }
}

/// `answer` if its JSON fits in `budget`'s `max_bytes` (measured without
/// writing it out), else the size error.
pub(crate) fn within<T: Serialize>(answer: T, budget: &Budget) -> Result<T, ExecError> {
    let mut size = Counted { bytes: 0, max: budget.max_bytes() };
    match serde_json::to_writer(&mut size, &answer) {
        Ok(()) => Ok(answer),
        // The counter refuses the write that passes the limit.
        Err(_) => Err(ExecError::TraceStopped(
            Stopped::TooLarge { max: budget.max_bytes(), parity: true }.message(),
        )),
    }
}

/// A writer that keeps nothing: it counts, and fails past `max`.
struct Counted {
    bytes: usize,
    max: usize,
}

impl io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes = self.bytes.saturating_add(buf.len());
        if self.bytes > self.max {
            return Err(io::Error::other("past the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn after_skips_and_count_takes() {
        let all: Vec<u32> = (0..10).collect();
        assert_eq!(page(all.clone(), None, None), all);
        assert_eq!(page(all.clone(), Some(3), None), (3..10).collect::<Vec<_>>());
        assert_eq!(page(all.clone(), None, Some(2)), vec![0, 1]);
        assert_eq!(page(all.clone(), Some(3), Some(2)), vec![3, 4]);
        assert_eq!(page(all.clone(), Some(8), Some(5)), vec![8, 9]);
        assert_eq!(page(all.clone(), Some(10), None), Vec::<u32>::new());
        assert_eq!(page(all.clone(), Some(u64::MAX), Some(u64::MAX)), Vec::<u32>::new());
        assert_eq!(page(all, Some(0), Some(0)), Vec::<u32>::new());
    }
}
