//! The parity-style `trace_` methods, as OpenEthereum defined them and
//! erigon and reth serve them (`sluice_executor::parity`):
//! `trace_transaction`, `trace_block`, `trace_replayTransaction` and
//! `trace_replayBlockTransactions`. A mined transaction is re-executed on
//! the state before its block, as `debug_trace*` does ([`crate::trace`]),
//! so blocks outside `store.history_blocks` answer "missing trie node".
//!
//! As reth: an unknown transaction or block answers `null`. Unlike erigon
//! and reth, `trace_block` has no block reward traces: sluice pays no block
//! reward. `trace_filter`, which needs an index of traces, is not served.

use alloy_primitives::{map::HashSet, B256};
use alloy_rpc_types_trace::parity::TraceType;
use serde_json::{json, Value};
use sluice_executor::{
    parity::{replay_block, replay_transaction, trace_block, trace_transaction},
    trace::TracePosition,
    trace_limits::TraceLimits,
    Deadline,
};
use sluice_messages::RecoveredTx;
use sluice_store::StoredBlock;

use super::{
    error::{RpcError, SERVER_ERROR},
    params::Params,
    selector::find_block,
    trace::applied,
    RpcState,
};

/// The methods served here.
pub const METHODS: &[&str] =
    &["trace_transaction", "trace_block", "trace_replayTransaction", "trace_replayBlockTransactions"];

/// Answers one of [`METHODS`] on this thread (a call worker) by
/// `deadline`.
pub fn call(s: &RpcState, method: &str, p: &Params<'_>, deadline: &Deadline) -> Result<Value, RpcError> {
    let limits = TraceLimits {
        deadline: deadline.clone(),
        max_bytes: s.limits.trace_max_bytes,
        memory_limit_bytes: s.limits.evm_memory_limit_bytes,
    };
    match method {
        "trace_transaction" => {
            let Some(mined) = mined(s, p.hash(0)?)? else { return Ok(Value::Null) };
            let (block, header) = (&mined.block, &mined.block.block.header);
            let state = s.store.state_at(header.number.saturating_sub(1))?;
            let at = TracePosition { block_hash: block.block.hash, index: mined.index };
            let (before, tx) = mined.split()?;
            Ok(json!(trace_transaction(&state, &s.exec, header, before, (tx, at), &limits)?))
        }
        "trace_replayTransaction" => {
            let types = trace_types(p, 1)?;
            let Some(mined) = mined(s, p.hash(0)?)? else { return Ok(Value::Null) };
            let header = &mined.block.block.header;
            let state = s.store.state_at(header.number.saturating_sub(1))?;
            let (before, tx) = mined.split()?;
            Ok(json!(replay_transaction(&state, &s.exec, header, before, tx, &types, &limits)?))
        }
        "trace_block" => {
            let Some(block) = find_block(s, p.block(0)?)? else { return Ok(Value::Null) };
            let (txs, header) = (applied(&block)?, &block.block.header);
            let state = s.store.state_at(header.number.saturating_sub(1))?;
            Ok(json!(trace_block(&state, &s.exec, header, block.block.hash, &txs, &limits)?))
        }
        "trace_replayBlockTransactions" => {
            let types = trace_types(p, 1)?;
            let Some(block) = find_block(s, p.block(0)?)? else { return Ok(Value::Null) };
            let (txs, header) = (applied(&block)?, &block.block.header);
            let state = s.store.state_at(header.number.saturating_sub(1))?;
            Ok(json!(replay_block(&state, &s.exec, header, &txs, &types, &limits)?))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// The trace types at `i` (`["trace", "vmTrace", "stateDiff"]`, any of
/// them), required as reth requires them.
fn trace_types(p: &Params<'_>, i: usize) -> Result<HashSet<TraceType>, RpcError> {
    serde_json::from_value(p.req(i)?.clone()).map_err(|e| RpcError::invalid_arg(i, e))
}

/// A mined transaction: its block and the block's applied transactions.
struct Mined {
    block: std::sync::Arc<StoredBlock>,
    txs: Vec<RecoveredTx>,
    index: usize,
}

impl Mined {
    /// The transactions ahead of it, and it.
    fn split(&self) -> Result<(&[RecoveredTx], &RecoveredTx), RpcError> {
        // An index past its block (damage) is an error, never a panic.
        match (self.txs.get(..self.index), self.txs.get(self.index)) {
            (Some(before), Some(tx)) => Ok((before, tx)),
            _ => Err(RpcError::new(SERVER_ERROR, "stored block without its transaction")),
        }
    }
}

/// The transaction `hash` and its block, if it is mined.
fn mined(s: &RpcState, hash: B256) -> Result<Option<Mined>, RpcError> {
    let Some((block, index)) = s.store.try_transaction(&hash)? else { return Ok(None) };
    let txs = applied(&block)?;
    Ok(Some(Mined { block, txs, index }))
}
