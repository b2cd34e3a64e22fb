//! Block execution from fuzz bytes: a block of signed transfers, contract
//! calls, creations, self-destructs and hostile transactions (funds short,
//! nonce gaps, gas below intrinsic, fees below the base fee, another chain,
//! raw junk), prepared as a validator prepares a finalized block, then run
//! by the sequential executor and by the parallel one with 2 and 3
//! workers. Receipts, skips, gas and change sets must be equal, and
//! neither may panic: a deterministic panic on a finalized block would
//! halt every validator. The bounded `cargo test` version of this is
//! `executor/tests/occ.rs`'s `random_hostile_blocks_match_sequential`.
#![no_main]

use std::sync::Arc;

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use libfuzzer_sys::fuzz_target;
use sluice_executor::{testing::MemState, ExecConfig, ParallelExecutor};
use sluice_messages::{BlockHeader, PreparedBlock, SealedBlock};
use sluice_txpool::{prepare_block, PreparedTxCache, Signer};

const CHAIN_ID: u64 = 31337;
const BASE_FEE: u64 = 1_000_000_000;
const GAS_LIMIT: u64 = 3_000_000;
const ETH: u128 = 1_000_000_000_000_000_000;
const SENDERS: u8 = 6;
/// Bytes per transaction: kind, sender, nonce, gas, value, fee.
const OP: usize = 6;

/// slot0 += 1.
const COUNTER: &[u8] = &[0x60, 0x00, 0x54, 0x60, 0x01, 0x01, 0x60, 0x00, 0x55, 0x00];
/// REVERT(0, 32).
const REVERTER: &[u8] = &[0x60, 0x20, 0x60, 0x00, 0xfd];
/// An endless loop: burns all gas.
const SPINNER: &[u8] = &[0x5b, 0x60, 0x00, 0x56];
/// Init code: SSTORE(0, 1), then SELFDESTRUCT to the caller (EIP-6780: in
/// the creating transaction, so the account goes).
const SUICIDE_INIT: &[u8] = &[0x60, 0x01, 0x60, 0x00, 0x55, 0x33, 0xff];
/// Init code deploying COUNTER.
const COUNTER_INIT: &[u8] = &[
    0x60, 0x0a, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, 0x0a, 0x60, 0x00, 0xf3, // CODECOPY; RETURN
    0x60, 0x00, 0x54, 0x60, 0x01, 0x01, 0x60, 0x00, 0x55, 0x00,
];

fn contract(i: u8) -> Address {
    Address::repeat_byte(0xc0 + i)
}

fn signer(i: u8) -> Signer {
    let mut key = [0u8; 32];
    key[0] = 0x5e;
    key[31] = i + 1;
    // A fixed, valid secp256k1 key for every i.
    Signer::from_bytes(&B256::from(key)).unwrap_or_else(|| unreachable!("valid key"))
}

fn state(senders: &[Signer]) -> MemState {
    let mut state = MemState::new();
    // The last sender holds nothing: everything it sends lacks funds.
    for s in &senders[..senders.len() - 1] {
        state.set_account(s.address(), U256::from(10 * ETH), 0);
    }
    state.set_code(contract(0), Bytes::from_static(COUNTER));
    state.set_code(contract(1), Bytes::from_static(REVERTER));
    state.set_code(contract(2), Bytes::from_static(SPINNER));
    state.set_account(Address::repeat_byte(0xe0), U256::ZERO, 0);
    state
}

fn raw_of(op: &[u8], senders: &[Signer], nonces: &mut [u64]) -> Bytes {
    let [kind, who, nonce_sel, gas_sel, value_sel, fee_sel] = [op[0], op[1], op[2], op[3], op[4], op[5]];
    let s = usize::from(who % SENDERS);
    let nonce = match nonce_sel % 16 {
        0 => nonces[s].wrapping_sub(1),
        1 => nonces[s] + 1 + u64::from(nonce_sel >> 4),
        2 => u64::MAX,
        _ => {
            nonces[s] += 1;
            nonces[s] - 1
        }
    };
    let gas = match gas_sel % 8 {
        0 => 20_999,
        1 => 21_000,
        2 => 60_000,
        3 => 200_000,
        4 => GAS_LIMIT + 1,
        _ => 21_000 + u64::from(gas_sel) * 1_000,
    };
    let value = match value_sel % 6 {
        0 => U256::ZERO,
        1 => U256::from(20 * ETH),
        2 => U256::MAX,
        _ => U256::from(value_sel),
    };
    let (max_fee, tip) = match fee_sel % 6 {
        0 => (u128::from(BASE_FEE) - 1, 0),
        1 => (2 * u128::from(BASE_FEE), 3 * u128::from(BASE_FEE)),
        2 => (u128::from(u64::MAX), 1),
        _ => (2 * u128::from(BASE_FEE), u128::from(fee_sel)),
    };
    let (to, input) = match kind % 12 {
        0..=3 => (TxKind::Call(Address::repeat_byte(0xa0 + (kind >> 4))), Bytes::new()),
        4 => (TxKind::Call(contract(0)), Bytes::new()),
        5 => (TxKind::Call(contract(1)), Bytes::new()),
        6 => (TxKind::Call(contract(2)), Bytes::new()),
        7 => (TxKind::Create, Bytes::from_static(COUNTER_INIT)),
        8 => (TxKind::Create, Bytes::from_static(SUICIDE_INIT)),
        9 => (TxKind::Call(Address::repeat_byte(0xe0)), Bytes::new()),
        // The raw op itself: junk bytes the block carries as they are.
        10 => return Bytes::copy_from_slice(op),
        _ => (TxKind::Call(Address::with_last_byte(4)), Bytes::copy_from_slice(op)),
    };
    let chain_id = if kind >= 0xf0 { CHAIN_ID + 1 } else { CHAIN_ID };
    let tx = TxEip1559 {
        chain_id,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: tip,
        to,
        value,
        access_list: Default::default(),
        input,
    };
    senders[s].sign_raw(TypedTransaction::Eip1559(tx))
}

fuzz_target!(|data: &[u8]| {
    let senders: Vec<Signer> = (0..SENDERS).map(signer).collect();
    let mut nonces = vec![0u64; senders.len()];
    let mut raws: Vec<Bytes> =
        data.chunks_exact(OP).take(64).map(|op| raw_of(op, &senders, &mut nonces)).collect();
    // Now and then a transaction twice.
    if data.len() % 7 == 0 {
        if let Some(first) = raws.first().cloned() {
            raws.push(first);
        }
    }
    let header = BlockHeader {
        number: 1,
        parent_hash: B256::repeat_byte(0x11),
        timestamp: 1_700_000_001,
        coinbase: Address::repeat_byte(0xcb),
        gas_limit: GAS_LIMIT,
        base_fee: BASE_FEE,
        tx_root: B256::ZERO,
        state_ref: None,
    };
    let txs = prepare_block(&raws, &PreparedTxCache::new(16), CHAIN_ID, 1);
    let block = PreparedBlock { block: Arc::new(SealedBlock { hash: header.hash(), header, txs: raws }), txs };
    let state = state(&senders);
    let cfg = ExecConfig::new(CHAIN_ID);
    let expected = sluice_executor::execute_block(&state, &cfg, &block);
    for workers in [2, 3] {
        let got = ParallelExecutor::new(cfg, workers, 0).execute_block(&state, &block);
        match (&expected, &got) {
            (Ok(e), Ok(g)) => {
                assert_eq!(e.receipts, g.receipts, "{workers} workers: receipts differ");
                assert_eq!(e.skipped, g.skipped, "{workers} workers: skips differ");
                assert_eq!(e.gas_used, g.gas_used, "{workers} workers: gas used differs");
                assert_eq!(e.changes, g.changes, "{workers} workers: change sets differ");
            }
            (Err(e), Err(g)) => assert_eq!(e.to_string(), g.to_string(), "{workers} workers: errors differ"),
            _ => panic!("{workers} workers: one executor failed the block, the other did not"),
        }
    }
});
