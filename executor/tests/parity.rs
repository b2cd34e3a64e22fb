//! Parity-style traces (`sluice_executor::parity`): the shapes of a block
//! with a transfer, a contract creation and a call that makes an internal
//! CALL and then reverts; the four entry points agree; the output bound.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use alloy_primitives::{map::HashSet, Address, Bytes, TxKind, B256, U256};
use alloy_rpc_types_trace::parity::{
    Action, CallType, Delta, LocalizedTransactionTrace, TraceOutput, TraceType,
};
use common::*;
use sluice_executor::{
    parity::{replay_block, replay_transaction, trace_block, trace_transaction},
    testing::MemState,
    trace::TracePosition,
    trace_limits::TraceLimits,
    Deadline, ExecError,
};
use sluice_messages::{BlockHeader, PreparedBlock, PreparedTx, RecoveredTx};

/// The contract that calls `target` with nothing, then reverts.
const CALLER: Address = Address::repeat_byte(0xca);

/// Runtime: CALL(gas, target, 0, 0, 0, 0, 0); POP; REVERT(0, 0).
fn caller_runtime(target: Address) -> Bytes {
    let mut code = vec![0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x73];
    code.extend_from_slice(target.as_slice());
    code.extend_from_slice(&[0x5a, 0xf1, 0x50, 0x60, 0x00, 0x60, 0x00, 0xfd]);
    code.into()
}

/// Runtime: CALL(gas, 0xee.., 0, 0, 0, 0, 0) in an endless loop: a frame
/// every few hundred gas.
fn call_spinner_runtime() -> Bytes {
    let mut code = vec![0x5b, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x73];
    code.extend_from_slice(Address::repeat_byte(0xee).as_slice());
    code.extend_from_slice(&[0x5a, 0xf1, 0x50, 0x60, 0x00, 0x56]);
    code.into()
}

fn limits(max_bytes: usize) -> TraceLimits {
    TraceLimits { deadline: Deadline::after(Duration::from_secs(60)), max_bytes, memory_limit_bytes: 1 << 30 }
}

struct Fixture {
    state: MemState,
    header: BlockHeader,
    hash: B256,
    txs: Vec<RecoveredTx>,
    counter: Address,
}

/// A block of a transfer (bob to carol), the counter's creation (alice)
/// and a call (alice) to [`CALLER`], which calls the counter and reverts.
fn fixture() -> Fixture {
    let mut state = funded_state();
    let (alice, bob) = (signer(1), signer(2));
    let counter = alice.address().create(0);
    state.set_code(CALLER, caller_runtime(counter));
    let block = block(
        1,
        GAS_LIMIT,
        vec![
            transfer(&bob, 0, Address::repeat_byte(0xc0), ETH),
            eip1559(&alice, 0, TxKind::Create, 0, init_code(&[], &counter_runtime()), 200_000),
            eip1559(&alice, 1, TxKind::Call(CALLER), 0, Bytes::new(), 200_000),
        ],
    );
    let out = run(&state, &block);
    assert!(out.skipped.is_empty() && out.receipts.len() == 3, "{:?}", out.skipped);
    Fixture { header: block.block.header.clone(), hash: block.block.hash, txs: ready(&block), state, counter }
}

fn ready(block: &PreparedBlock) -> Vec<RecoveredTx> {
    block
        .txs
        .iter()
        .filter_map(|t| match t {
            PreparedTx::Ready(t) => Some(RecoveredTx::clone(t)),
            PreparedTx::Invalid { .. } => None,
        })
        .collect()
}

fn of_tx(traces: &[LocalizedTransactionTrace], position: u64) -> Vec<LocalizedTransactionTrace> {
    traces.iter().filter(|t| t.transaction_position == Some(position)).cloned().collect()
}

#[test]
fn a_block_traces_as_parity_shapes_it() {
    let f = fixture();
    let traces = trace_block(&f.state, &cfg(), &f.header, f.hash, &f.txs, &limits(1 << 20)).unwrap();
    assert_eq!(traces.len(), 4, "{traces:#?}");
    for t in &traces {
        assert_eq!(t.block_hash, Some(f.hash));
        assert_eq!(t.block_number, Some(1));
        let i = t.transaction_position.unwrap() as usize;
        assert_eq!(t.transaction_hash, Some(f.txs[i].hash));
    }

    // The transfer: one call frame, no gas past the intrinsic.
    let transfer = &of_tx(&traces, 0)[0].trace;
    let Action::Call(call) = &transfer.action else { panic!("{transfer:?}") };
    assert_eq!(
        (call.from, call.to, call.value),
        (signer(2).address(), Address::repeat_byte(0xc0), U256::from(ETH))
    );
    assert_eq!(call.call_type, CallType::Call);
    assert_eq!(call.gas, 0, "21,000 gas, all intrinsic");
    let Some(TraceOutput::Call(out)) = &transfer.result else { panic!("{transfer:?}") };
    assert_eq!((out.gas_used, out.output.len()), (0, 0));
    assert_eq!(
        (transfer.subtraces, transfer.trace_address.clone(), transfer.error.clone()),
        (0, vec![], None)
    );

    // The creation: the new address and its runtime code.
    let create = &of_tx(&traces, 1)[0].trace;
    let Action::Create(action) = &create.action else { panic!("{create:?}") };
    assert_eq!(action.from, signer(1).address());
    assert_eq!(action.init, init_code(&[], &counter_runtime()));
    let Some(TraceOutput::Create(out)) = &create.result else { panic!("{create:?}") };
    assert_eq!((out.address, out.code.clone()), (f.counter, counter_runtime()));
    assert!(out.gas_used > 0);
    assert_eq!((create.subtraces, create.trace_address.clone()), (0, vec![]));

    // The call: the root reverted, its internal CALL to the counter kept
    // its own result at traceAddress [0].
    let call = of_tx(&traces, 2);
    assert_eq!(call.len(), 2);
    let (root, inner) = (&call[0].trace, &call[1].trace);
    let Action::Call(action) = &root.action else { panic!("{root:?}") };
    assert_eq!((action.from, action.to), (signer(1).address(), CALLER));
    assert_eq!(root.error.as_deref(), Some("Reverted"));
    // As reth: a revert keeps its result (gas used, revert data).
    let Some(TraceOutput::Call(out)) = &root.result else { panic!("{root:?}") };
    assert!(out.gas_used > 0 && out.output.is_empty(), "{out:?}");
    assert_eq!((root.subtraces, root.trace_address.clone()), (1, vec![]));
    let Action::Call(action) = &inner.action else { panic!("{inner:?}") };
    assert_eq!((action.from, action.to, action.call_type), (CALLER, f.counter, CallType::Call));
    assert_eq!(inner.error, None);
    let Some(TraceOutput::Call(out)) = &inner.result else { panic!("{inner:?}") };
    assert_eq!(out.output, word(1), "the counter returns its new value");
    assert_eq!((inner.subtraces, inner.trace_address.clone()), (0, vec![0]));
}

#[test]
fn a_transaction_traces_as_in_its_block() {
    let f = fixture();
    let block = trace_block(&f.state, &cfg(), &f.header, f.hash, &f.txs, &limits(1 << 20)).unwrap();
    for (i, tx) in f.txs.iter().enumerate() {
        let at = TracePosition { block_hash: f.hash, index: i };
        let one =
            trace_transaction(&f.state, &cfg(), &f.header, &f.txs[..i], (tx, at), &limits(1 << 20)).unwrap();
        assert_eq!(one, of_tx(&block, i as u64), "transaction {i}");
    }
}

#[test]
fn replays_carry_the_same_traces_and_the_state_diff() {
    let f = fixture();
    let types: HashSet<TraceType> = [TraceType::Trace, TraceType::StateDiff].into_iter().collect();
    let block = trace_block(&f.state, &cfg(), &f.header, f.hash, &f.txs, &limits(1 << 20)).unwrap();
    let replays = replay_block(&f.state, &cfg(), &f.header, &f.txs, &types, &limits(1 << 20)).unwrap();
    assert_eq!(replays.len(), 3);
    for (i, r) in replays.iter().enumerate() {
        assert_eq!(r.transaction_hash, f.txs[i].hash);
        let traces: Vec<_> = of_tx(&block, i as u64).into_iter().map(|t| t.trace).collect();
        assert_eq!(r.full_trace.trace, traces, "transaction {i}");
        assert!(r.full_trace.vm_trace.is_none());
        let one =
            replay_transaction(&f.state, &cfg(), &f.header, &f.txs[..i], &f.txs[i], &types, &limits(1 << 20))
                .unwrap();
        assert_eq!(one, r.full_trace, "transaction {i}");
    }
    // The transfer: carol appears, bob pays value and fees.
    let diff = replays[0].full_trace.state_diff.as_ref().unwrap();
    let carol = &diff.0[&Address::repeat_byte(0xc0)];
    assert_eq!(carol.balance, Delta::Added(U256::from(ETH)));
    let Delta::Changed(bob) = &diff.0[&signer(2).address()].balance else { panic!("{diff:?}") };
    assert!(bob.from - bob.to > U256::from(ETH));
    // The creation: the counter is added with its code.
    let diff = replays[1].full_trace.state_diff.as_ref().unwrap();
    assert_eq!(diff.0[&f.counter].code, Delta::Added(counter_runtime()));
    // The reverted call: no output, the counter untouched.
    let r = &replays[2].full_trace;
    assert!(r.output.is_empty());
    assert!(!r.state_diff.as_ref().unwrap().0.contains_key(&f.counter));
}

#[test]
fn a_vm_trace_shows_the_inner_call() {
    let f = fixture();
    let types: HashSet<TraceType> = [TraceType::VmTrace].into_iter().collect();
    let r = replay_transaction(&f.state, &cfg(), &f.header, &f.txs[..2], &f.txs[2], &types, &limits(1 << 20))
        .unwrap();
    let vm = r.vm_trace.unwrap();
    assert_eq!(vm.code, caller_runtime(f.counter));
    let call = vm.ops.iter().find(|op| op.op.as_deref() == Some("CALL")).unwrap();
    assert_eq!(call.sub.as_ref().map(|s| s.code.clone()), Some(counter_runtime()));
    assert_eq!(vm.ops.last().and_then(|op| op.op.clone()).as_deref(), Some("REVERT"));
}

#[test]
fn a_trace_past_max_bytes_is_refused() {
    let f = fixture();
    let e = trace_block(&f.state, &cfg(), &f.header, f.hash, &f.txs, &limits(1_000)).unwrap_err();
    let ExecError::TraceStopped(said) = e else { panic!("{e:?}") };
    assert!(said.starts_with("trace output exceeds rpc.trace_max_bytes (1000 bytes);"), "{said}");
}

#[test]
fn endless_calls_stop_at_the_limit_while_running() {
    let mut state = funded_state();
    let spinner = Address::repeat_byte(0x5f);
    state.set_code(spinner, call_spinner_runtime());
    let block =
        block(1, GAS_LIMIT, vec![eip1559(&signer(1), 0, TxKind::Call(spinner), 0, Bytes::new(), 3_000_000)]);
    let txs = ready(&block);
    let header = &block.block.header;
    for types in [vec![TraceType::Trace], vec![TraceType::VmTrace]] {
        let types: HashSet<TraceType> = types.into_iter().collect();
        // Without a limit the trace holds every frame: about 400 bytes each.
        let whole =
            replay_transaction(&state, &cfg(), header, &[], &txs[0], &types, &limits(usize::MAX)).unwrap();
        let frames = whole.trace.len().max(whole.vm_trace.map_or(0, |v| v.ops.len()));
        assert!(frames > 5_000, "{frames}");
        let e =
            replay_transaction(&state, &cfg(), header, &[], &txs[0], &types, &limits(100_000)).unwrap_err();
        let ExecError::TraceStopped(said) = e else { panic!("{e:?}") };
        assert!(said.contains("rpc.trace_max_bytes (100000 bytes)"), "{said}");
    }
}
