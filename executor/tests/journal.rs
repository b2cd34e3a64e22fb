//! The one-journal in-order executor against the sequential oracle: equal
//! on every block it accepts, and it declines exactly the blocks whose
//! deletions a single journal cannot reproduce.
//!
//! `OCC_SEEDS=n` / `OCC_SEED=n` as in `occ.rs`.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, Bytes, TxKind, U256};
use common::{erc20, gen, *};
use sluice_executor::{execute_block_one_journal, testing::MemState, BlockOutcome};
use sluice_messages::PreparedBlock;

/// Runs `block` both ways; `true` if the one-journal executor accepted it
/// (and then its outcome equals the oracle's).
fn check(label: &str, state: &MemState, block: &PreparedBlock) -> bool {
    let expected = run(state, block);
    let Some(got) = execute_block_one_journal(state, &cfg(), block).expect("block executes") else {
        return false;
    };
    let same = |a: &BlockOutcome, b: &BlockOutcome| {
        a.receipts == b.receipts
            && a.skipped == b.skipped
            && a.gas_used == b.gas_used
            && a.changes == b.changes
    };
    if !same(&expected, &got) {
        let (e, g) = (&expected.changes.accounts, &got.changes.accounts);
        let i = (0..e.len().max(g.len())).find(|i| e.get(*i) != g.get(*i));
        panic!(
            "{label}: differs from the oracle (receipts equal: {}, skipped equal: {})\n change {i:?}\n \
             expected {:?}\n      got {:?}",
            expected.receipts == got.receipts,
            expected.skipped == got.skipped,
            i.and_then(|i| e.get(i)),
            i.and_then(|i| g.get(i)),
        );
    }
    assert!(after(state, &expected) == after(state, &got), "{label}: end states differ");
    true
}

#[test]
fn random_blocks_match_sequential_or_are_declined() {
    let seeds = seeds();
    // Accepted blocks: mixed, mixed without creations, plain transfers.
    let mut accepted = [0usize; 3];
    for seed in &seeds {
        let len = 16 + (seed * 37 % 150) as usize;
        let label = format!("seed {seed} (replay: OCC_SEED={seed})");
        let scenarios = [
            gen::scenario(*seed, len),
            gen::scenario_without_creations(*seed, len),
            gen::transfer_scenario(*seed, 8 + (seed * 53 % 200) as usize),
        ];
        for (kind, s) in scenarios.iter().enumerate() {
            accepted[kind] += usize::from(check(&format!("{label} kind {kind}"), &s.state, &s.block));
        }
    }
    eprintln!("accepted of {} each: {accepted:?}", seeds.len());
    if seeds.len() >= 30 {
        // Without creations, only an existing empty coinbase (a tenth of
        // the seeds) makes a block declined.
        assert!(accepted[1] * 10 >= seeds.len() * 8, "{accepted:?}");
        assert!(accepted[2] > 0, "{accepted:?}");
    }
}

#[test]
fn a_block_that_creates_a_contract_is_declined() {
    let mut state = funded_state();
    let counter = Address::repeat_byte(0xc0);
    state.set_code(counter, counter_runtime());
    let init = init_code(&[], &counter_runtime());
    let txs = vec![
        eip1559(&signer(1), 0, TxKind::Call(counter), 0, Bytes::new(), 60_000),
        eip1559(&signer(2), 0, TxKind::Create, 0, init, 200_000),
    ];
    let b = block(1, GAS_LIMIT, txs.clone());
    assert!(execute_block_one_journal(&state, &cfg(), &b).expect("executes").is_none());
    // Without the creation it is accepted, and equal.
    let b = block(1, GAS_LIMIT, txs[..1].to_vec());
    assert!(check("counter", &state, &b));
    assert_eq!(after(&state, &run(&state, &b)).get_storage(&counter, &U256::ZERO), U256::from(1));
}

/// The one-journal executor's KECCAK256 remembers 64-byte preimages
/// (`sluice_executor::keccak`); the oracle's is plain revm. Same hashes,
/// gas, memory expansion and failures: a preimage inside memory (twice,
/// and again in a later transaction), straddling its end, far past it, at
/// an offset that does not fit in 64 bits, and too far for the gas left.
#[test]
fn memoized_keccak_equals_revm_at_the_edges() {
    // MSTORE(0, word 1); MSTORE(32, word 2); SSTORE(word 3,
    // KECCAK256(offset = word 0, len = 64)); STOP.
    let runtime = Bytes::from_static(&[
        0x60, 0x20, 0x35, 0x60, 0x00, 0x52, // MSTORE(0, CALLDATALOAD(32))
        0x60, 0x40, 0x35, 0x60, 0x20, 0x52, // MSTORE(32, CALLDATALOAD(64))
        0x60, 0x40, 0x60, 0x00, 0x35, 0x20, // KECCAK256(CALLDATALOAD(0), 64)
        0x60, 0x60, 0x35, 0x55, // SSTORE(CALLDATALOAD(96), hash)
        0x00,
    ]);
    let hasher = Address::repeat_byte(0x4b);
    let mut state = funded_state();
    state.set_code(hasher, runtime);
    let call = |offset: U256, a: u64, b: u64, slot: u64| {
        let mut data = offset.to_be_bytes::<32>().to_vec();
        for v in [a, b, slot] {
            data.extend_from_slice(&U256::from(v).to_be_bytes::<32>());
        }
        Bytes::from(data)
    };
    let s = signer(1);
    let cases = [
        (U256::ZERO, 7, 8, 0, 100_000),
        (U256::ZERO, 7, 8, 1, 100_000),
        (U256::from(16), 7, 8, 2, 100_000),
        (U256::from(4_000), 7, 8, 3, 100_000),
        (U256::from(u64::MAX) + U256::from(1), 7, 8, 4, 100_000),
        (U256::ZERO, 9, 10, 5, 100_000),
        // Out of gas expanding memory for the hash (64 KiB: ~14k gas).
        (U256::from(0x10000), 11, 12, 6, 23_000),
        (U256::ZERO, 7, 8, 7, 100_000),
    ];
    let txs = cases
        .iter()
        .enumerate()
        .map(|(nonce, (offset, a, b, slot, gas))| {
            eip1559(&s, nonce as u64, TxKind::Call(hasher), 0, call(*offset, *a, *b, *slot), *gas)
        })
        .collect();
    let b = block(1, 30_000_000, txs);
    assert!(check("keccak edges", &state, &b), "the block has no creations: it must be accepted");
    let outcome = run(&state, &b);
    let ok: Vec<bool> = outcome.receipts.iter().map(|r| r.success).collect();
    assert_eq!(ok, [true, true, true, true, false, true, false, true], "the cases cover success and failure");
}

/// Each thread keeps the storage tables of the accounts with the most
/// slots from one block to the next, and loads those accounts (cold)
/// before the next block's first transaction. Nothing may show: not in
/// gas (the first use in a transaction is still cold), not in the change
/// set (an account loaded early and never used is not in it), and an
/// account gone from the next block's state is not loaded.
#[test]
fn storage_tables_kept_between_blocks_change_nothing() {
    const HOLDERS: u64 = 100;
    let token = Address::repeat_byte(0xe2);
    let holders: Vec<_> = (0..HOLDERS).map(signer_n).collect();
    let mut state = MemState::new();
    state.set_code(token, erc20::runtime());
    for h in &holders {
        state.set_account(h.address(), U256::from(ETH), 0);
        state.set_storage(token, erc20::balance_slot(h.address()), U256::from(1_000));
    }
    // Every holder sends once: the token's table holds 100 slots.
    let transfers: Vec<_> = (0..HOLDERS as usize)
        .map(|i| {
            let to = holders[(i * 7 + 3) % HOLDERS as usize].address();
            eip1559(&holders[i], 0, TxKind::Call(token), 0, erc20::transfer_call(to, 5), 60_000)
        })
        .collect();
    let tokens = block(1, GAS_LIMIT, transfers);
    // On this thread: the first run fills the table, the next ones start
    // with the token loaded.
    for round in 0..3 {
        assert!(check(&format!("token block, round {round}"), &state, &tokens));
    }
    // BALANCE(token) from another contract, first thing in the block: cold
    // (2,600 gas), as without the table kept.
    let prober = Address::repeat_byte(0x9b);
    let mut code = vec![0x73];
    code.extend_from_slice(token.as_slice());
    code.extend_from_slice(&[0x31, 0x50, 0x00]); // BALANCE, POP, STOP
    state.set_code(prober, Bytes::from(code));
    let probe = eip1559(&holders[1], 0, TxKind::Call(prober), 0, Bytes::new(), 60_000);
    let probe = block(1, GAS_LIMIT, vec![probe]);
    assert!(check("token block", &state, &tokens));
    assert!(check("BALANCE of the kept account", &state, &probe));
    // A block that never uses the token, after one that did.
    let plain = block(1, GAS_LIMIT, vec![transfer(&holders[0], 0, Address::repeat_byte(0x77), 1)]);
    assert!(check("token block", &state, &tokens));
    assert!(check("plain transfer after a token block", &state, &plain));
    let got = execute_block_one_journal(&state, &cfg(), &plain).expect("executes").expect("accepted");
    assert!(got.changes.accounts.iter().all(|a| a.address != token), "{:?}", got.changes);
    // The token gone from the state of the next block.
    assert!(check("token block", &state, &tokens));
    let mut without = MemState::new();
    without.set_account(holders[0].address(), U256::from(ETH), 0);
    assert!(check("plain transfer, token gone", &without, &plain));
}
