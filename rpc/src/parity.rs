//! The parity-style `trace_` methods, as OpenEthereum defined them and
//! erigon and reth serve them (`sluice_executor::parity`):
//! `trace_transaction`, `trace_block`, `trace_replayTransaction`,
//! `trace_replayBlockTransactions` and `trace_filter`. A mined transaction is re-executed on
//! the state before its block, as `debug_trace*` does ([`crate::trace`]),
//! so blocks outside `store.history_blocks` answer "missing trie node".
//!
//! As reth: an unknown transaction or block answers `null`. Unlike erigon
//! and reth, `trace_block` has no block reward traces: sluice pays no block
//! reward.
//!
//! `trace_filter` keeps no index of traces: as reth, it re-traces every
//! block of its range (`fromBlock`, default 0, to `toBlock`, default the
//! head; at most `rpc.trace_filter_max_blocks` blocks) as `trace_block`
//! does, keeps the traces alloy's `TraceFilter` matcher matches
//! (`fromAddress`, `toAddress`, `mode`), then skips `after` and takes
//! `count`. The whole range shares one deadline and one
//! `rpc.trace_max_bytes`.

use alloy_primitives::{map::HashSet, B256};
use alloy_rpc_types_trace::{filter::TraceFilter, parity::TraceType};
use serde_json::{json, Value};
use sluice_executor::{
    parity::{replay_block, replay_transaction, trace_block, trace_transaction, TraceFilterRun},
    trace::TracePosition,
    Deadline,
};
use sluice_messages::RecoveredTx;
use sluice_store::StoredBlock;

use super::{
    error::{RpcError, INVALID_PARAMS, SERVER_ERROR},
    params::Params,
    selector::find_block,
    trace::applied,
    RpcState,
};

/// The methods served here.
pub const METHODS: &[&str] = &[
    "trace_transaction",
    "trace_block",
    "trace_replayTransaction",
    "trace_replayBlockTransactions",
    "trace_filter",
];

/// Answers one of [`METHODS`] on this thread (a call worker) by
/// `deadline`.
pub fn call(s: &RpcState, method: &str, p: &Params<'_>, deadline: &Deadline) -> Result<Value, RpcError> {
    let limits = crate::trace::limits(s, deadline);
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
        "trace_filter" => {
            let filter: TraceFilter =
                serde_json::from_value(p.req(0)?.clone()).map_err(|e| RpcError::invalid_arg(0, e))?;
            let head = s.store.head();
            let (from, to) = filter_range(&filter, head, s.limits.trace_filter_max_blocks)?;
            let mut run = TraceFilterRun::new(&filter, &limits);
            // Blocks past the head do not exist yet: nothing to trace.
            for number in from..=to.min(head) {
                let Some(block) = s.store.try_block(number)? else { continue };
                let (txs, header) = (applied(&block)?, &block.block.header);
                let state = s.store.state_at(number.saturating_sub(1))?;
                run.block(&state, &s.exec, header, block.block.hash, &txs)?;
            }
            Ok(json!(run.finish()?))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// `trace_filter`'s range: `fromBlock` (default 0) to `toBlock` (default
/// `head`), both included, refused as reth refuses it when `fromBlock` is
/// past `toBlock`, and when it holds more than `max_blocks` blocks.
fn filter_range(filter: &TraceFilter, head: u64, max_blocks: u64) -> Result<(u64, u64), RpcError> {
    let from = filter.from_block.unwrap_or(0);
    let to = filter.to_block.unwrap_or(head);
    if from > to {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "invalid parameters: fromBlock cannot be greater than toBlock",
        ));
    }
    if to - from >= max_blocks {
        return Err(RpcError::new(
            SERVER_ERROR,
            format!(
                "block range too large; currently limited to {max_blocks} blocks (rpc.trace_filter_max_blocks; asked for {})",
                (to - from).saturating_add(1)
            ),
        ));
    }
    Ok((from, to))
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

#[cfg(test)]
mod tests {
    use alloy_rpc_types_trace::filter::TraceFilter;

    use super::filter_range;

    fn range(from: Option<u64>, to: Option<u64>) -> TraceFilter {
        TraceFilter { from_block: from, to_block: to, ..TraceFilter::default() }
    }

    #[test]
    fn the_range_defaults_to_genesis_and_the_head_and_is_bounded() {
        assert_eq!(filter_range(&range(None, None), 7, 100).unwrap(), (0, 7));
        assert_eq!(filter_range(&range(Some(3), None), 7, 100).unwrap(), (3, 7));
        assert_eq!(filter_range(&range(Some(3), Some(3)), 7, 1).unwrap(), (3, 3));
        // Exactly max_blocks blocks, both ends counted, pass; one more does not.
        assert_eq!(filter_range(&range(Some(10), Some(109)), 7, 100).unwrap(), (10, 109));
        let e = filter_range(&range(Some(10), Some(110)), 7, 100).unwrap_err();
        assert_eq!(e.code, -32000);
        assert!(e.message.contains("rpc.trace_filter_max_blocks"), "{}", e.message);
        assert!(e.message.contains("limited to 100 blocks"), "{}", e.message);
        // Past the head too: the default range from genesis on a long chain.
        assert!(filter_range(&range(None, None), 100, 100).is_err());
        let e = filter_range(&range(Some(5), Some(4)), 7, 100).unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("fromBlock cannot be greater than toBlock"), "{}", e.message);
        // u64 ends do not overflow.
        assert!(filter_range(&range(Some(0), Some(u64::MAX)), 7, 100).is_err());
    }
}
