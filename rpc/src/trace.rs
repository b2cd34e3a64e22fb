//! `debug_traceTransaction`, `debug_traceCall`, `debug_traceBlockByNumber`
//! and `debug_traceBlockByHash`, with geth's tracers and options
//! (`sluice_executor::trace`). A mined transaction is traced on the state
//! before its block, read through the store's history, so blocks outside
//! `store.history_blocks` answer "missing trie node".

use std::time::Duration;

use alloy_rpc_types_trace::geth::{GethDebugTracingCallOptions, GethDebugTracingOptions};
use serde_json::{json, Value};
use sluice_executor::{
    overrides::{override_header, OverriddenState},
    trace::{trace_block, trace_call, trace_transaction, TracePosition},
    trace_limits::{trace_timeout, TraceLimits},
    Deadline,
};
use sluice_messages::RecoveredTx;
use sluice_store::StoredBlock;

use super::{
    error::{RpcError, SERVER_ERROR},
    params::Params,
    selector::state_at,
    RpcState,
};

/// The methods served here.
pub const METHODS: &[&str] =
    &["debug_traceTransaction", "debug_traceCall", "debug_traceBlockByNumber", "debug_traceBlockByHash"];

/// What a re-execution for a caller may take: until `deadline`, at most
/// `rpc.trace_max_bytes` of output and `rpc.evm_memory_limit_bytes` of EVM
/// memory (the geth tracers, the parity traces and Otterscan's alike).
pub(crate) fn limits(s: &RpcState, deadline: &Deadline) -> TraceLimits {
    TraceLimits {
        deadline: deadline.clone(),
        max_bytes: s.limits.trace_max_bytes,
        memory_limit_bytes: s.limits.evm_memory_limit_bytes,
    }
}

/// Answers one of [`METHODS`] on this thread (a call worker) by
/// `deadline`.
pub fn call(s: &RpcState, method: &str, p: &Params<'_>, deadline: &Deadline) -> Result<Value, RpcError> {
    let limits = limits(s, deadline);
    match method {
        "debug_traceTransaction" => {
            let hash = p.hash(0)?;
            let opts = options(p, 1)?;
            let (block, i) = s
                .store
                .try_transaction(&hash)?
                .ok_or_else(|| RpcError::new(SERVER_ERROR, format!("transaction {hash} not found")))?;
            let txs = applied(&block)?;
            // An index past its block (damage) is an error, never a panic.
            let (before, tx) = match (txs.get(..i), txs.get(i)) {
                (Some(before), Some(tx)) => (before, tx),
                _ => return Err(RpcError::new(SERVER_ERROR, format!("transaction {hash} not found"))),
            };
            let state = s.store.state_at(block.block.header.number.saturating_sub(1))?;
            let at = TracePosition { block_hash: block.block.hash, index: i };
            let trace =
                trace_transaction(&state, &s.exec, &block.block.header, before, (tx, at), opts, &limits)?;
            Ok(json!(trace))
        }
        "debug_traceCall" => {
            // Capped as eth_call is (geth applies --rpc.gascap here too).
            let req = crate::calls::capped(p.call(0)?, s);
            let view = state_at(s, p.block(1)?)?;
            // The tracer's options, and geth's state and block overrides.
            let call_opts: GethDebugTracingCallOptions = p.typed(2)?.unwrap_or_default();
            let opts = call_opts.tracing_options;
            let state = OverriddenState::new(view.reader(s), &call_opts.state_overrides.unwrap_or_default())?;
            let header =
                override_header(&view.block(s).block.header, &call_opts.block_overrides.unwrap_or_default())?;
            Ok(json!(trace_call(&state, &s.exec, &header, &req, opts, &limits)?))
        }
        "debug_traceBlockByNumber" | "debug_traceBlockByHash" => {
            let view = state_at(s, p.block(0)?)?;
            let block = view.block(s);
            let opts = options(p, 1)?;
            let txs = applied(&block)?;
            let state = s.store.state_at(block.block.header.number.saturating_sub(1))?;
            let header = &block.block.header;
            let traces = trace_block(&state, &s.exec, header, block.block.hash, &txs, &opts, &limits)?;
            Ok(Value::Array(
                traces.into_iter().map(|(hash, result)| json!({"txHash": hash, "result": result})).collect(),
            ))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// The tracing options at `i` (absent: the struct logger's defaults).
fn options(p: &Params<'_>, i: usize) -> Result<GethDebugTracingOptions, RpcError> {
    match p.opt(i) {
        None => Ok(GethDebugTracingOptions::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| RpcError::invalid_arg(i, e)),
    }
}

/// The call's timeout: `rpc.trace_timeout_ms` unless its `timeout`
/// option asks otherwise (up to `rpc.trace_max_timeout_ms`).
pub(crate) fn timeout(s: &RpcState, method: &str, p: &Params<'_>) -> Result<Duration, RpcError> {
    let option = if method == "debug_traceCall" {
        p.typed::<GethDebugTracingCallOptions>(2)?.unwrap_or_default().tracing_options.timeout
    } else {
        options(p, 1)?.timeout
    };
    trace_timeout(
        option.as_deref(),
        Duration::from_millis(s.limits.trace_timeout_ms),
        Duration::from_millis(s.limits.trace_max_timeout_ms),
    )
    // geth answers a bad option with -32000 and its parser's text.
    .map_err(|e| RpcError::new(SERVER_ERROR, e.to_string()))
}

/// A committed block's applied transactions, in order.
pub(crate) fn applied(block: &StoredBlock) -> Result<Vec<RecoveredTx>, RpcError> {
    (0..block.receipts.len())
        .map(|i| {
            let r = &block.receipts[i];
            let raw = block
                .raw_tx(i)
                .ok_or_else(|| RpcError::new(SERVER_ERROR, "stored block without its transaction"))?;
            let tx = sluice_txpool::decode_envelope(raw, r.tx_hash)
                .map_err(|e| RpcError::new(SERVER_ERROR, e.to_string()))?;
            Ok(RecoveredTx { hash: r.tx_hash, raw: raw.clone(), tx, sender: r.from })
        })
        .collect()
}
