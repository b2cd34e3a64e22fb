//! Shared test fixtures: keys, headers, signed transactions and small
//! hand-assembled contracts.
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod erc20;
pub mod gen;

use std::sync::Arc;

use alloy_consensus::{TxEip1559, TxEip7702, TxLegacy, TypedTransaction};
use alloy_eips::eip2718::Encodable2718;
use alloy_eips::eip7702::Authorization;
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use sluice_executor::{testing::MemState, BlockOutcome, ExecConfig};
use sluice_messages::{keccak256, BlockHeader, PreparedBlock, PreparedTx, RecoveredTx, SealedBlock};
use sluice_txpool::Signer;

pub const CHAIN_ID: u64 = 1337;
pub const BASE_FEE: u64 = 1_000_000_000;
pub const GAS_LIMIT: u64 = 30_000_000;
pub const ETH: u128 = 1_000_000_000_000_000_000;

pub fn cfg() -> ExecConfig {
    ExecConfig::new(CHAIN_ID)
}

/// Bounds for a test's calls: far beyond what any of them needs.
#[allow(dead_code)]
pub fn lim() -> sluice_executor::CallLimits {
    sluice_executor::CallLimits::new(std::time::Duration::from_secs(600), 1 << 30)
}

pub fn coinbase() -> Address {
    Address::repeat_byte(0xcb)
}

pub fn signer(i: u8) -> Signer {
    Signer::from_bytes(&B256::repeat_byte(i)).expect("valid key")
}

pub fn header(number: u64, gas_limit: u64) -> BlockHeader {
    BlockHeader {
        number,
        parent_hash: B256::repeat_byte(0x11),
        timestamp: 1_700_000_000 + number,
        coinbase: coinbase(),
        gas_limit,
        base_fee: BASE_FEE,
        tx_root: B256::ZERO,
        state_ref: None,
    }
}

/// A state where signers 1..=4 hold 100 ETH each.
pub fn funded_state() -> MemState {
    let mut state = MemState::new();
    for i in 1..=4 {
        state.set_account(signer(i).address(), U256::from(100 * ETH), 0);
    }
    state
}

pub fn recovered(signer: &Signer, tx: TypedTransaction) -> RecoveredTx {
    let envelope = signer.sign_tx(tx);
    let raw = Bytes::from(envelope.encoded_2718());
    RecoveredTx { hash: keccak256(&raw), raw, tx: envelope, sender: signer.address() }
}

/// An EIP-7702 transaction with a 1 wei tip: `sponsor` (at `nonce`) calls
/// `to` with `authority`'s authorization (at `authority_nonce`) to delegate
/// its code to `target`.
pub fn delegation(
    (sponsor, nonce): (&Signer, u64),
    (authority, authority_nonce): (&Signer, u64),
    target: Address,
    to: Address,
) -> PreparedTx {
    let auth = Authorization { chain_id: U256::from(CHAIN_ID), address: target, nonce: authority_nonce };
    let signed = auth.clone().into_signed(authority.sign_hash(&auth.signature_hash()));
    let tx = TxEip7702 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 200_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1,
        to,
        value: U256::ZERO,
        access_list: Default::default(),
        authorization_list: vec![signed],
        input: Bytes::new(),
    };
    PreparedTx::ready(recovered(sponsor, TypedTransaction::Eip7702(tx)))
}

/// An EIP-1559 transaction with a 2 gwei tip and a 10 gwei cap.
pub fn eip1559(signer: &Signer, nonce: u64, to: TxKind, value: u128, input: Bytes, gas: u64) -> PreparedTx {
    let tx = TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 2_000_000_000,
        to,
        value: U256::from(value),
        access_list: Default::default(),
        input,
    };
    PreparedTx::ready(recovered(signer, TypedTransaction::Eip1559(tx)))
}

pub fn transfer(signer: &Signer, nonce: u64, to: Address, value: u128) -> PreparedTx {
    eip1559(signer, nonce, TxKind::Call(to), value, Bytes::new(), 21_000)
}

/// A legacy EIP-155 transaction.
pub fn legacy(signer: &Signer, nonce: u64, to: Address, value: u128, gas_price: u128) -> PreparedTx {
    let tx = TxLegacy {
        chain_id: Some(CHAIN_ID),
        nonce,
        gas_price,
        gas_limit: 21_000,
        to: TxKind::Call(to),
        value: U256::from(value),
        input: Bytes::new(),
    };
    PreparedTx::ready(recovered(signer, TypedTransaction::Legacy(tx)))
}

pub fn block(number: u64, gas_limit: u64, txs: Vec<PreparedTx>) -> PreparedBlock {
    let header = header(number, gas_limit);
    let raw = txs
        .iter()
        .map(|t| match t {
            PreparedTx::Ready(t) => t.raw.clone(),
            PreparedTx::Invalid { .. } => Bytes::from_static(b"\x02garbage"),
        })
        .collect();
    PreparedBlock { block: Arc::new(SealedBlock { hash: header.hash(), header, txs: raw }), txs }
}

pub fn run(state: &MemState, block: &PreparedBlock) -> BlockOutcome {
    sluice_executor::execute_block(state, &cfg(), block).expect("block executes")
}

pub fn balance(state: &MemState, a: Address) -> U256 {
    state.get_account(&a).map_or(U256::ZERO, |a| a.balance)
}

pub fn nonce(state: &MemState, a: Address) -> u64 {
    state.get_account(&a).map_or(0, |a| a.nonce)
}

/// Applies an outcome's change set to a copy of `state`.
pub fn after(state: &MemState, outcome: &BlockOutcome) -> MemState {
    let mut next = state.clone();
    next.apply(&outcome.changes);
    next
}

// ---- hand-assembled contracts ----

/// The counter of `sluice_load::contracts`: slot0 += 1, logs and returns
/// the new value (calldata starting with 0xff reverts).
pub fn counter_runtime() -> Bytes {
    Bytes::from(sluice_load::contracts::counter_runtime())
}

/// Runtime: LOG1(data = 32-byte word 0x2a, topic = 0xaa), STOP.
pub fn logger_runtime() -> Bytes {
    Bytes::from_static(&[
        0x60, 0x2a, 0x60, 0x00, 0x52, // MSTORE(0, 0x2a)
        0x60, 0xaa, 0x60, 0x20, 0x60, 0x00, 0xa1, // LOG1(0, 32, 0xaa)
        0x00,
    ])
}

/// Runtime: REVERT with the 32-byte word 0xdead.
pub fn reverter_runtime() -> Bytes {
    Bytes::from_static(&[
        0x61, 0xde, 0xad, 0x60, 0x00, 0x52, // MSTORE(0, 0xdead)
        0x60, 0x20, 0x60, 0x00, 0xfd, // REVERT(0, 32)
    ])
}

/// Runtime: loops forever (burns all gas).
pub fn spinner_runtime() -> Bytes {
    Bytes::from_static(&[0x5b, 0x60, 0x00, 0x56])
}

/// Init code: runs `prelude`, then deploys `runtime`.
pub fn init_code(prelude: &[u8], runtime: &[u8]) -> Bytes {
    let len = u8::try_from(runtime.len()).expect("small runtime");
    let offset = u8::try_from(prelude.len() + 12).expect("small prelude");
    let mut code = prelude.to_vec();
    // CODECOPY(0, offset, len); RETURN(0, len)
    code.extend_from_slice(&[0x60, len, 0x60, offset, 0x60, 0x00, 0x39, 0x60, len, 0x60, 0x00, 0xf3]);
    code.extend_from_slice(runtime);
    code.into()
}

pub fn word(v: u64) -> Bytes {
    Bytes::from(U256::from(v).to_be_bytes::<32>().to_vec())
}

/// `OCC_SEED=n`: that seed alone; else `OCC_SEEDS` seeds (default 300).
pub fn seeds() -> Vec<u64> {
    match std::env::var("OCC_SEED") {
        Ok(seed) => vec![seed.parse().expect("OCC_SEED is a number")],
        Err(_) => {
            let n = std::env::var("OCC_SEEDS").map_or(300, |n| n.parse().expect("OCC_SEEDS is a number"));
            (0..n).collect()
        }
    }
}

/// Panics with the seed and the first difference unless `got` equals
/// `expected` in everything but the stats.
pub fn check_same(label: &str, state: &MemState, expected: &BlockOutcome, got: &BlockOutcome) {
    let first = |a: usize, b: usize, eq: &dyn Fn(usize) -> bool| (0..a.max(b)).find(|i| !eq(*i));
    if let Some(i) = first(expected.receipts.len(), got.receipts.len(), &|i| {
        expected.receipts.get(i) == got.receipts.get(i)
    }) {
        panic!(
            "{label}: receipt {i} differs\n expected {:?}\n      got {:?}",
            expected.receipts.get(i),
            got.receipts.get(i)
        );
    }
    assert_eq!(expected.skipped, got.skipped, "{label}: skipped transactions differ");
    assert_eq!(expected.gas_used, got.gas_used, "{label}: gas used differs");
    let (e, g) = (&expected.changes.accounts, &got.changes.accounts);
    if let Some(i) = first(e.len(), g.len(), &|i| e.get(i) == g.get(i)) {
        panic!("{label}: change {i} differs\n expected {:?}\n      got {:?}", e.get(i), g.get(i));
    }
    assert!(after(state, expected) == after(state, got), "{label}: end states differ");
}

pub fn signer_n(i: u64) -> sluice_txpool::Signer {
    let mut key = [0u8; 32];
    key[0] = 0x77;
    key[24..].copy_from_slice(&i.to_be_bytes());
    sluice_txpool::Signer::from_bytes(&B256::from(key)).expect("key")
}

/// `n` transactions from `n` funded senders, each incrementing the
/// counter at `0xc0..c0`: a dependency chain.
pub fn counter_block(n: u64) -> (MemState, PreparedBlock) {
    let mut state = MemState::new();
    let counter = Address::repeat_byte(0xc0);
    state.set_code(counter, counter_runtime());
    let mut txs = Vec::new();
    for i in 0..n {
        let s = signer_n(i);
        state.set_account(s.address(), U256::from(ETH), 0);
        txs.push(eip1559(&s, 0, TxKind::Call(counter), 0, Bytes::new(), 60_000));
    }
    (state, block(1, GAS_LIMIT, txs))
}
