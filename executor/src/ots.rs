//! What Otterscan's `ots_*` methods need from the EVM (as erigon and reth
//! serve them): a mined transaction's call frames
//! (`ots_traceTransaction`), its internal value transfers and creations
//! (`ots_getInternalOperations`), its revert data
//! (`ots_getTransactionError`), and which transaction of a block created
//! a contract (`ots_getContractCreator`).
//!
//! revm-inspectors has no Otterscan builder: the answers are built from
//! the [`TracingInspector`](revm_inspectors::tracing::TracingInspector)'s
//! call arena, run as the parity traces run ([`crate::parity`]): the
//! block's applied transactions ahead of the one asked replayed on the
//! state before the block, then it under the inspector, within the same
//! [`TraceLimits`] (one deadline, frames counted while the EVM runs, the
//! answer measured against `max_bytes` before it is returned).

use alloy_primitives::{Address, Bytes, B256};
use alloy_rpc_types_trace::otterscan::{InternalOperation, OperationType, TraceEntry};
use revm::{
    context::Context,
    context_interface::result::{EVMError, ExecutionResult, Output},
    InspectEvm, MainBuilder, MainContext,
};
use revm_inspectors::tracing::{
    types::{CallKind, CallTraceNode},
    TracingInspectorConfig,
};
use sluice_messages::{BlockHeader, RecoveredTx};
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    env::{block_env, cfg_env, tx_env},
    parity::{inspected, within, FRAMES},
    trace::{replay, stopped},
    trace_limits::{Budget, ParityRecords, TraceLimits},
    ExecConfig, ExecError,
};

/// Where a mined transaction is re-executed: the state before its block,
/// the block's header, and the block's applied transactions ahead of it.
#[derive(Clone, Copy)]
pub struct MinedAt<'a> {
    /// The state at the end of the block before.
    pub state: &'a dyn StateReader,
    /// The block's header.
    pub header: &'a BlockHeader,
    /// The block's applied transactions ahead of it, in order.
    pub before: &'a [RecoveredTx],
}

/// `ots_traceTransaction`: every call frame of `tx`, in the order entered,
/// as Otterscan lists them.
pub fn trace_transaction(
    at: MinedAt<'_>,
    cfg: &ExecConfig,
    tx: &RecoveredTx,
    limits: &TraceLimits,
) -> Result<Vec<TraceEntry>, ExecError> {
    let (nodes, _, budget) = inspect(at, cfg, tx, limits)?;
    within(entries(&nodes), &budget)
}

/// `ots_getInternalOperations`: the value transfers, self-destructs and
/// creations `tx` made below its top frame.
pub fn internal_operations(
    at: MinedAt<'_>,
    cfg: &ExecConfig,
    tx: &RecoveredTx,
    limits: &TraceLimits,
) -> Result<Vec<InternalOperation>, ExecError> {
    let (nodes, _, budget) = inspect(at, cfg, tx, limits)?;
    within(operations(&nodes), &budget)
}

/// `ots_getTransactionError`: the data `tx` reverted with (empty if it did
/// not revert). Run without the tracing inspector, as erigon runs it (no
/// frames are recorded, so none are counted): bounded by the deadline and
/// the answer's size.
pub fn transaction_error(
    at: MinedAt<'_>,
    cfg: &ExecConfig,
    tx: &RecoveredTx,
    limits: &TraceLimits,
) -> Result<Bytes, ExecError> {
    let mut budget = Budget::parity(limits, ParityRecords { frames: false, steps: false });
    let mut db = BlockState::with_capacity(at.state, 2 * at.before.len() + 2);
    replay(&mut db, cfg, at.header, at.before, &mut budget)?;
    if budget.expired() {
        return Err(stopped(&budget));
    }
    let env = tx_env(tx).map_err(|e| ExecError::InvalidCall(e.into()))?;
    let res = {
        let mut evm = Context::mainnet()
            .with_db(&mut db)
            .with_block(block_env(at.header, cfg.spec))
            .with_cfg(cfg_env(cfg))
            .build_mainnet_with_inspector(&mut budget);
        evm.inspect_tx(env)
    };
    // A stopped run unwinds as out of gas: its cause is the budget's.
    if budget.stopped.is_some() {
        return Err(stopped(&budget));
    }
    let result = match res {
        Ok(res) => res.result,
        Err(EVMError::Database(e)) => return Err(e.into()),
        Err(e) => return Err(ExecError::InvalidCall(e.to_string())),
    };
    within(revert_data(&result), &budget)
}

/// Which of a block's applied transactions `txs` (re-executed in order on
/// `state`, the state before the block with `header`) created `target`,
/// and the address that created it (the sender, or the contract whose
/// `CREATE`/`CREATE2` did): `None` if none did.
pub fn find_creation(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    header: &BlockHeader,
    txs: &[RecoveredTx],
    target: Address,
    limits: &TraceLimits,
) -> Result<Option<(B256, Address)>, ExecError> {
    let mut budget = Budget::parity(limits, FRAMES);
    let mut db = BlockState::with_capacity(state, 2 * txs.len() + 2);
    for tx in txs {
        let config = TracingInspectorConfig::default_parity();
        let (inspector, res) = inspected(&mut db, header, cfg, tx, config, &mut budget)?;
        if let Some(creator) = creator_of(inspector.traces().nodes(), target) {
            return Ok(Some((tx.hash, creator)));
        }
        db.commit_tx(res.state)?;
    }
    Ok(None)
}

/// Runs `tx` where it was mined under a tracing inspector: its frames, its
/// result, and the budget it ran within.
fn inspect(
    at: MinedAt<'_>,
    cfg: &ExecConfig,
    tx: &RecoveredTx,
    limits: &TraceLimits,
) -> Result<(Vec<CallTraceNode>, ExecutionResult, Budget), ExecError> {
    let mut budget = Budget::parity(limits, FRAMES);
    let mut db = BlockState::with_capacity(at.state, 2 * at.before.len() + 2);
    replay(&mut db, cfg, at.header, at.before, &mut budget)?;
    let config = TracingInspectorConfig::default_parity();
    let (inspector, res) = inspected(&mut db, at.header, cfg, tx, config, &mut budget)?;
    Ok((inspector.into_traces().into_nodes(), res.result, budget))
}

/// Otterscan's entry for each frame, in the order entered (the arena's),
/// with a `SELFDESTRUCT` entry one level below a frame that self-destructed,
/// after its own calls. As erigon: no value for a `STATICCALL` or a
/// `DELEGATECALL` (they move none).
pub fn entries(nodes: &[CallTraceNode]) -> Vec<TraceEntry> {
    let mut out = Vec::with_capacity(nodes.len());
    // Self-destructs still to be written: (after the last descendant of
    // the frame at this index, the entry).
    let mut pending: Vec<(usize, TraceEntry)> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        // A frame's descendants follow it: a pending self-destruct is
        // written once the frames it follows are all out.
        while pending.last().is_some_and(|(last, _)| *last < i) {
            if let Some((_, e)) = pending.pop() {
                out.push(e);
            }
        }
        let t = &node.trace;
        let value = match t.kind {
            CallKind::StaticCall | CallKind::DelegateCall => None,
            _ => Some(t.value),
        };
        out.push(TraceEntry {
            r#type: t.kind.to_str().to_string(),
            depth: t.depth as u32,
            from: t.caller,
            to: t.address,
            value,
            input: t.data.clone(),
            output: t.output.clone(),
        });
        if let Some(target) = t.selfdestruct_refund_target {
            let entry = TraceEntry {
                r#type: "SELFDESTRUCT".to_string(),
                depth: t.depth as u32 + 1,
                from: t.selfdestruct_address.unwrap_or(t.address),
                to: target,
                value: t.selfdestruct_transferred_value,
                input: Bytes::new(),
                output: Bytes::new(),
            };
            pending.push((last_descendant(nodes, i), entry));
        }
    }
    while let Some((_, e)) = pending.pop() {
        out.push(e);
    }
    out
}

/// The index of the last frame below the frame at `i` (`i` if none).
fn last_descendant(nodes: &[CallTraceNode], i: usize) -> usize {
    let mut at = i;
    while let Some(&child) = nodes.get(at).and_then(|n| n.children.last()) {
        at = child;
    }
    at
}

/// Otterscan's internal operations: each value-moving `CALL` below the top
/// frame (type 0), each self-destruct (1), each `CREATE` (2) and `CREATE2`
/// (3) below the top frame, in the order they ran. A reverted frame's
/// operations are listed too, as erigon lists them.
pub fn operations(nodes: &[CallTraceNode]) -> Vec<InternalOperation> {
    let mut out = Vec::new();
    for node in nodes {
        let t = &node.trace;
        let kind = match t.kind {
            _ if t.depth == 0 => None,
            CallKind::Call if !t.value.is_zero() => Some(OperationType::OpTransfer),
            CallKind::Create => Some(OperationType::OpCreate),
            CallKind::Create2 => Some(OperationType::OpCreate2),
            _ => None,
        };
        if let Some(r#type) = kind {
            out.push(InternalOperation { r#type, from: t.caller, to: t.address, value: t.value });
        }
        if let Some(to) = t.selfdestruct_refund_target {
            out.push(InternalOperation {
                r#type: OperationType::OpSelfDestruct,
                from: t.selfdestruct_address.unwrap_or(t.address),
                to,
                value: t.selfdestruct_transferred_value.unwrap_or_default(),
            });
        }
    }
    out
}

/// What a transaction reverted with: its output if it reverted, else
/// nothing (a success, or a halt, which returns no data).
pub fn revert_data(result: &ExecutionResult) -> Bytes {
    match result {
        ExecutionResult::Revert { output, .. } => output.clone(),
        ExecutionResult::Success { output: Output::Call(_) | Output::Create(..), .. }
        | ExecutionResult::Halt { .. } => Bytes::new(),
    }
}

/// Who created `target` among these frames: the caller of the successful
/// `CREATE` or `CREATE2` frame at that address.
pub fn creator_of(nodes: &[CallTraceNode], target: Address) -> Option<Address> {
    nodes
        .iter()
        .map(|n| &n.trace)
        .find(|t| t.kind.is_any_create() && t.address == target && t.success)
        .map(|t| t.caller)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use alloy_primitives::U256;
    use revm_inspectors::tracing::types::CallTrace;

    use super::*;

    fn node(i: usize, parent: Option<usize>, children: Vec<usize>, trace: CallTrace) -> CallTraceNode {
        CallTraceNode { parent, children, idx: i, trace, ..Default::default() }
    }

    fn frame(kind: CallKind, depth: usize, from: u8, to: u8, value: u64) -> CallTrace {
        CallTrace {
            kind,
            depth,
            caller: Address::repeat_byte(from),
            address: Address::repeat_byte(to),
            value: U256::from(value),
            success: true,
            data: Bytes::from(vec![from]),
            output: Bytes::from(vec![to]),
            ..Default::default()
        }
    }

    /// A root call from 1 to 2 (with value), which static-calls 3,
    /// creates 4 (which self-destructs to 9 and itself calls 5 with
    /// value), then delegate-calls 6.
    fn arena() -> Vec<CallTraceNode> {
        let mut created = frame(CallKind::Create, 1, 2, 4, 7);
        created.selfdestruct_address = Some(Address::repeat_byte(4));
        created.selfdestruct_refund_target = Some(Address::repeat_byte(9));
        created.selfdestruct_transferred_value = Some(U256::from(3));
        vec![
            node(0, None, vec![1, 2, 4], frame(CallKind::Call, 0, 1, 2, 100)),
            node(1, Some(0), vec![], frame(CallKind::StaticCall, 1, 2, 3, 0)),
            node(2, Some(0), vec![3], created),
            node(3, Some(2), vec![], frame(CallKind::Call, 2, 4, 5, 4)),
            node(4, Some(0), vec![], frame(CallKind::DelegateCall, 1, 2, 6, 100)),
        ]
    }

    #[test]
    fn entries_list_each_frame_in_order_with_its_self_destruct_after_its_calls() {
        let e = entries(&arena());
        let kinds: Vec<(&str, u32)> = e.iter().map(|e| (e.r#type.as_str(), e.depth)).collect();
        assert_eq!(
            kinds,
            [
                ("CALL", 0),
                ("STATICCALL", 1),
                ("CREATE", 1),
                ("CALL", 2),
                ("SELFDESTRUCT", 2),
                ("DELEGATECALL", 1)
            ]
        );
        assert_eq!(e[0].value, Some(U256::from(100)));
        assert_eq!((e[1].value, e[5].value), (None, None), "static and delegate calls move nothing");
        assert_eq!((e[0].input.clone(), e[0].output.clone()), (Bytes::from(vec![1]), Bytes::from(vec![2])));
        let sd = &e[4];
        assert_eq!(
            (sd.from, sd.to, sd.value),
            (Address::repeat_byte(4), Address::repeat_byte(9), Some(U256::from(3)))
        );
        // A self-destruct in the last frame is written at the end.
        let mut last = arena();
        last.truncate(4);
        last[0].children.truncate(2);
        let e = entries(&last);
        assert_eq!(e.last().map(|e| e.r#type.as_str()), Some("SELFDESTRUCT"));
        assert_eq!(e.len(), 5);
        assert!(entries(&[]).is_empty());
    }

    #[test]
    fn operations_are_the_internal_transfers_creations_and_self_destructs() {
        let ops = operations(&arena());
        let kinds: Vec<OperationType> = ops.iter().map(|o| o.r#type).collect();
        assert_eq!(
            kinds,
            [OperationType::OpCreate, OperationType::OpSelfDestruct, OperationType::OpTransfer],
            "the root's value is not internal; static and delegate calls move nothing"
        );
        assert_eq!(
            (ops[0].from, ops[0].to, ops[0].value),
            (Address::repeat_byte(2), Address::repeat_byte(4), U256::from(7))
        );
        assert_eq!(
            (ops[2].from, ops[2].to, ops[2].value),
            (Address::repeat_byte(4), Address::repeat_byte(5), U256::from(4))
        );
        let mut create2 = arena();
        create2[2].trace.kind = CallKind::Create2;
        assert_eq!(operations(&create2)[0].r#type, OperationType::OpCreate2);
        assert_eq!(serde_json::to_value(ops[0]).unwrap()["type"], 2);
        // A zero-value internal call is no operation.
        let mut free = arena();
        free[3].trace.value = U256::ZERO;
        assert_eq!(operations(&free).len(), 2);
    }

    #[test]
    fn the_creator_is_the_caller_of_the_successful_create() {
        let nodes = arena();
        assert_eq!(creator_of(&nodes, Address::repeat_byte(4)), Some(Address::repeat_byte(2)));
        assert_eq!(creator_of(&nodes, Address::repeat_byte(5)), None, "called, not created");
        let mut failed = arena();
        failed[2].trace.success = false;
        assert_eq!(creator_of(&failed, Address::repeat_byte(4)), None);
    }

    #[test]
    fn revert_data_is_a_revert_output_only() {
        use revm::context_interface::result::{HaltReason, SuccessReason};
        let data = Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef]);
        let reverted =
            ExecutionResult::Revert { gas: Default::default(), logs: vec![], output: data.clone() };
        assert_eq!(revert_data(&reverted), data);
        let ok = ExecutionResult::Success {
            reason: SuccessReason::Return,
            gas: Default::default(),
            logs: vec![],
            output: Output::Call(data),
        };
        assert_eq!(revert_data(&ok), Bytes::new());
        let halt = ExecutionResult::Halt {
            reason: HaltReason::OpcodeNotFound,
            gas: Default::default(),
            logs: vec![],
        };
        assert_eq!(revert_data(&halt), Bytes::new());
    }
}
