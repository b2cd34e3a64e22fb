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
use alloy_rpc_types_trace::parity::{
    LocalizedTransactionTrace, TraceResults, TraceResultsWithTransactionHash, TraceType,
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
    env::{block_env, cfg_env, tx_env},
    overlay::BlockState,
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
    let mut db = BlockState::with_capacity(state, 2 * txs.len() + 2);
    let mut out = Vec::new();
    for (index, tx) in txs.iter().enumerate() {
        let config = TracingInspectorConfig::default_parity();
        let (inspector, res) = inspected(&mut db, header, cfg, tx, config, &mut budget)?;
        let at = TracePosition { block_hash, index };
        out.extend(
            inspector.into_parity_builder().into_localized_transaction_traces_iter(info(header, tx, at)),
        );
        db.commit_tx(res.state)?;
    }
    within(out, &budget)
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
