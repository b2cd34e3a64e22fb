//! geth's `debug_trace*` tracers, with revm-inspectors' `DebugInspector`
//! (the inspectors reth and Foundry use): the struct logger and its
//! options, `callTracer`, `prestateTracer` (with `diffMode`),
//! `4byteTracer`, `noopTracer` and the others it knows.
//!
//! A mined transaction is traced by replaying its block up to it on the
//! state before the block (the caller reads that through the store's
//! history), then running it under the inspector; a call, on the state at
//! the block it names. Both run on the plain mainnet handler, as anvil and
//! reth trace, so a trace shows what the sequential executor computed.

use std::cell::RefCell;

use alloy_primitives::{Address, B256, U256};
use alloy_rpc_types_trace::geth::{
    GethDebugBuiltInTracerType, GethDebugTracerType, GethDebugTracingOptions, GethTrace,
};
use revm::{
    context::{BlockEnv, CfgEnv, Context, TxEnv},
    context_interface::result::EVMError,
    state::{AccountInfo, Bytecode},
    Database, DatabaseRef, ExecuteEvm, InspectEvm, MainBuilder, MainContext,
};
use revm_inspectors::tracing::{DebugInspector, TransactionContext};
use sluice_messages::{BlockHeader, RecoveredTx};
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    call::{call_envs, CallRequest},
    db::DbError,
    env::{block_env, cfg_env, tx_env},
    trace_geth::{self, PrestateOptions, TxLookups},
    trace_limits::{Budget, StepRecords, TraceLimits},
    ExecConfig, ExecError,
};

/// Where a traced transaction sits (for tracers that report it).
#[derive(Debug, Clone, Copy, Default)]
pub struct TracePosition {
    /// Its block's hash.
    pub block_hash: B256,
    /// Its index among the block's applied transactions.
    pub index: usize,
}

/// Traces `tx`, the transaction at `at` of the block with `header`, after
/// replaying `before` (the block's applied transactions ahead of it, in
/// order) on `state` (the state before the block).
pub fn trace_transaction(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    before: &[RecoveredTx],
    (tx, at): (&RecoveredTx, TracePosition),
    opts: GethDebugTracingOptions,
    limits: &TraceLimits,
) -> Result<GethTrace, ExecError> {
    let mut budget = Budget::new(limits, per_step(&opts));
    let mut db = BlockState::with_capacity(state, 2 * before.len() + 2);
    replay(&mut db, cfg, header, before, &mut budget)?;
    let env = tx_env(tx).map_err(|e| ExecError::InvalidCall(e.into()))?;
    let ctx = TransactionContext {
        block_hash: Some(at.block_hash),
        tx_index: Some(at.index),
        tx_hash: Some(tx.hash),
    };
    traced(&mut db, block_env(header, cfg.spec), cfg_env(cfg), env, Some(ctx), opts, &mut budget)
}

/// Traces each of a block's applied transactions `txs` in order, on
/// `state` (the state before the block): one trace per transaction.
pub fn trace_block(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    block_hash: B256,
    txs: &[RecoveredTx],
    opts: &GethDebugTracingOptions,
    limits: &TraceLimits,
) -> Result<Vec<(B256, GethTrace)>, ExecError> {
    let mut budget = Budget::new(limits, per_step(opts));
    let mut db = BlockState::with_capacity(state, 2 * txs.len() + 2);
    let mut out = Vec::with_capacity(txs.len());
    for (index, tx) in txs.iter().enumerate() {
        let env = tx_env(tx).map_err(|e| ExecError::InvalidCall(e.into()))?;
        let ctx = TransactionContext {
            block_hash: Some(block_hash),
            tx_index: Some(index),
            tx_hash: Some(tx.hash),
        };
        let block = block_env(header, cfg.spec);
        let trace = traced(&mut db, block, cfg_env(cfg), env, Some(ctx), opts.clone(), &mut budget)?;
        out.push((tx.hash, trace));
        replay(&mut db, cfg, header, std::slice::from_ref(tx), &mut budget)?;
    }
    Ok(out)
}

/// Traces `req` as `eth_call` runs it, on `state` at the block with
/// `header`.
pub fn trace_call(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    req: &CallRequest,
    opts: GethDebugTracingOptions,
    limits: &TraceLimits,
) -> Result<GethTrace, ExecError> {
    let (env, mut tx) = call_envs(cfg, req, limits.memory_limit_bytes)?;
    tx.gas_limit = req.gas.unwrap_or(header.gas_limit);
    let mut budget = Budget::new(limits, per_step(&opts));
    let mut db = BlockState::with_capacity(state, 4);
    traced(&mut db, block_env(header, cfg.spec), env, tx, None, opts, &mut budget)
}

/// What each step adds to the output: for the struct logger (no `tracer`),
/// what it records; for the others, nothing.
fn per_step(opts: &GethDebugTracingOptions) -> Option<StepRecords> {
    opts.tracer.is_none().then(|| StepRecords::of(&opts.config))
}

/// Applies `txs` to `db` in order, as the sequential executor does, within
/// `budget`'s deadline.
pub(crate) fn replay(
    db: &mut BlockState<'_>,
    cfg: &ExecConfig,
    header: &BlockHeader,
    txs: &[RecoveredTx],
    budget: &mut Budget,
) -> Result<(), ExecError> {
    let mut evm = Context::mainnet()
        .with_db(&mut *db)
        .with_block(block_env(header, cfg.spec))
        .with_cfg(cfg_env(cfg))
        .build_mainnet();
    for tx in txs {
        if budget.expired() {
            return Err(stopped(budget));
        }
        let env = tx_env(tx).map_err(|e| ExecError::InvalidCall(e.into()))?;
        match evm.transact(env) {
            Ok(out) => evm.ctx.journaled_state.database.commit_tx(out.state)?,
            Err(EVMError::Database(e)) => return Err(e.into()),
            // Applied in the block, so never refused here; if it were, the
            // sequential executor would have skipped it too.
            Err(_) => {}
        }
    }
    Ok(())
}

/// Runs `tx` under the tracer `opts` asks for, within `budget`, leaving
/// `db` unchanged.
fn traced(
    db: &mut BlockState<'_>,
    block: BlockEnv,
    cfg: CfgEnv,
    tx: TxEnv,
    ctx: Option<TransactionContext>,
    opts: GethDebugTracingOptions,
    budget: &mut Budget,
) -> Result<GethTrace, ExecError> {
    if budget.expired() {
        return Err(stopped(budget));
    }
    // What revm-inspectors does not read of a prestateTracer's options.
    let prestate = match &opts.tracer {
        Some(GethDebugTracerType::BuiltInTracer(GethDebugBuiltInTracerType::PreStateTracer)) => {
            Some(PrestateOptions::from_config(&opts.tracer_config.0)?)
        }
        _ => None,
    };
    let mut inspector = DebugInspector::new(opts).map_err(|e| ExecError::InvalidCall(e.to_string()))?;
    let res = {
        let mut evm = Context::mainnet()
            .with_db(&mut *db)
            .with_block(block.clone())
            .with_cfg(cfg)
            .build_mainnet_with_inspector((&mut inspector, &mut *budget));
        let res = evm.inspect_tx(tx.clone());
        // A stopped trace unwinds as out of gas: its cause is the
        // budget's, whatever revm made of it.
        if budget.stopped.is_some() {
            return Err(stopped(budget));
        }
        match res {
            Ok(res) => res,
            Err(EVMError::Database(e)) => return Err(e.into()),
            Err(e) => return Err(ExecError::InvalidCall(e.to_string())),
        }
    };
    let mut reader = RefDb::new(db);
    let mut trace = inspector
        .get_result(ctx, &tx, &block, &res, &mut reader)
        .map_err(|e| ExecError::InvalidCall(format!("tracing failed: {e}")))?;
    match &mut trace {
        GethTrace::Default(frame) => trace_geth::geth_struct_log_errors(frame),
        GethTrace::PreStateTracer(frame) => {
            let lookups =
                TxLookups { from: tx.caller, to: tx.kind.to().copied(), coinbase: block.beneficiary };
            trace_geth::geth_prestate(frame, &res.state, lookups, prestate.unwrap_or_default(), &reader)?;
        }
        _ => {}
    }
    Ok(trace)
}

/// The error of a trace `budget` stopped.
pub(crate) fn stopped(budget: &Budget) -> ExecError {
    ExecError::TraceStopped(budget.stopped.map(|s| s.message()).unwrap_or_default())
}

/// The block's working state read through `&self`, for the prestate tracer
/// and parity's state diff.
pub(crate) struct RefDb<'a, 'b>(RefCell<&'a mut BlockState<'b>>);

impl<'a, 'b> RefDb<'a, 'b> {
    /// `db`, read through `&self`.
    pub(crate) fn new(db: &'a mut BlockState<'b>) -> Self {
        RefDb(RefCell::new(db))
    }
}

impl DatabaseRef for RefDb<'_, '_> {
    type Error = DbError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        self.0.borrow_mut().basic(address)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.0.borrow_mut().code_by_hash(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, DbError> {
        self.0.borrow_mut().storage(address, index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, DbError> {
        self.0.borrow_mut().block_hash(number)
    }
}
