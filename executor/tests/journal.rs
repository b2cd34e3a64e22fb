//! The one-journal in-order executor against the sequential oracle: equal
//! on every block, settling where a single journal could not reproduce a
//! deletion.
//!
//! `OCC_SEEDS=n` / `OCC_SEED=n` as in `occ.rs`.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, Bytes, TxKind, U256};
use common::{erc20, gen, *};
use sluice_executor::{execute_block_one_journal, testing::MemState, BlockOutcome};
use sluice_messages::PreparedBlock;

/// Runs `block` both ways and checks the outcomes are equal; how many
/// times the journal settled.
fn check(label: &str, state: &MemState, block: &PreparedBlock) -> u32 {
    let expected = run(state, block);
    let got = execute_block_one_journal(state, &cfg(), block).expect("block executes");
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
    got.stats.settles
}

#[test]
fn random_blocks_match_sequential() {
    let seeds = seeds();
    // Blocks that settled: mixed, mixed without creations, plain transfers.
    let mut settled = [0usize; 3];
    for seed in &seeds {
        let len = 16 + (seed * 37 % 150) as usize;
        let label = format!("seed {seed} (replay: OCC_SEED={seed})");
        let scenarios = [
            gen::scenario(*seed, len),
            gen::scenario_without_creations(*seed, len),
            gen::transfer_scenario(*seed, 8 + (seed * 53 % 200) as usize),
        ];
        for (kind, s) in scenarios.iter().enumerate() {
            let settles = check(&format!("{label} kind {kind}"), &s.state, &s.block);
            settled[kind] += usize::from(settles > 0);
        }
    }
    eprintln!("settled of {} each: {settled:?}", seeds.len());
    if seeds.len() >= 30 {
        // Most mixed blocks create, destroy or delegate: they settle, so
        // both ways of reading the change set are compared. Without
        // creations, only an existing empty coinbase (a tenth of the
        // seeds) makes a block settle.
        assert!(settled[0] * 2 >= seeds.len(), "{settled:?}");
        assert!(settled[1] * 10 <= seeds.len() * 2, "{settled:?}");
        assert!(settled[1] < seeds.len(), "{settled:?}");
    }
}

#[test]
fn a_journal_settles_after_a_creation_and_goes_on() {
    let mut state = funded_state();
    let counter = Address::repeat_byte(0xc0);
    state.set_code(counter, counter_runtime());
    let init = init_code(&[], &counter_runtime());
    let bump = |s: u8, nonce: u64| eip1559(&signer(s), nonce, TxKind::Call(counter), 0, Bytes::new(), 60_000);
    let create = eip1559(&signer(2), 0, TxKind::Create, 0, init, 200_000);
    // A counter bumped before and after a creation: one settle, exact.
    let b = block(1, GAS_LIMIT, vec![bump(1, 0), create, bump(1, 1), bump(3, 0)]);
    assert_eq!(check("creation between bumps", &state, &b), 1);
    assert_eq!(after(&state, &run(&state, &b)).get_storage(&counter, &U256::ZERO), U256::from(3));
    // Without the creation it never settles, and is equal.
    let b = block(1, GAS_LIMIT, vec![bump(1, 0), bump(3, 0)]);
    assert_eq!(check("counter", &state, &b), 0);
}

/// Contracts created and destroyed by contracts, which only the watched
/// instructions reveal: a CREATE2 whose init code counts in its own storage,
/// logs the count and self-destructs, run twice at the same address (the
/// second must start from empty storage again), and CREATEs of a counter,
/// between calls that keep the journal busy.
#[test]
fn contracts_created_and_destroyed_by_contracts_settle_the_journal() {
    // memory[0..] = calldata; slot 0 = CREATE2(0, 0, calldatasize, salt 0)
    const CREATE2_FACTORY: &[u8] = &[
        0x36, 0x60, 0x00, 0x60, 0x00, 0x37, 0x60, 0x00, 0x36, 0x60, 0x00, 0x60, 0x00, 0xf5, 0x60, 0x00, 0x55,
        0x00,
    ];
    // The same with CREATE(0, 0, calldatasize).
    const CREATE_FACTORY: &[u8] =
        &[0x36, 0x60, 0x00, 0x60, 0x00, 0x37, 0x36, 0x60, 0x00, 0x60, 0x00, 0xf0, 0x60, 0x00, 0x55, 0x00];
    // v = SLOAD(0) + 1; SSTORE(0, v); LOG0(v); SELFDESTRUCT(CALLER).
    const RECOUNT: &[u8] = &[
        0x60, 0x01, 0x60, 0x00, 0x54, 0x01, 0x80, 0x60, 0x00, 0x55, 0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00,
        0xa0, 0x33, 0xff,
    ];
    let mut state = funded_state();
    let (factory2, factory) = (Address::repeat_byte(0xf5), Address::repeat_byte(0xf0));
    state.set_code(factory2, Bytes::from_static(CREATE2_FACTORY));
    state.set_code(factory, Bytes::from_static(CREATE_FACTORY));
    let counter = Address::repeat_byte(0xc0);
    state.set_code(counter, counter_runtime());
    let bump = |nonce| eip1559(&signer(1), nonce, TxKind::Call(counter), 0, Bytes::new(), 60_000);
    let call = |s: u8, nonce, to, init: Bytes| eip1559(&signer(s), nonce, TxKind::Call(to), 0, init, 300_000);
    let recount = Bytes::from_static(RECOUNT);
    let deploy = init_code(&[], &counter_runtime());
    let txs = vec![
        bump(0),
        call(2, 0, factory2, recount.clone()),
        bump(1),
        call(2, 1, factory2, recount),
        call(3, 0, factory, deploy.clone()),
        bump(2),
        call(3, 1, factory, deploy),
        bump(3),
    ];
    let b = block(1, GAS_LIMIT, txs);
    assert_eq!(check("contracts creating contracts", &state, &b), 4);
    let out = run(&state, &b);
    assert!(out.receipts.iter().all(|r| r.success), "{:?}", out.receipts);
    let logged: Vec<_> = [1, 3].map(|i| out.receipts[i].logs[0].data.clone()).into();
    assert_eq!(logged[0], logged[1], "the re-created contract starts from empty storage");
    assert_eq!(after(&state, &out).get_storage(&counter, &U256::ZERO), U256::from(4));
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
    assert_eq!(check("keccak edges", &state, &b), 0, "the block has no creations: it never settles");
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
        check(&format!("token block, round {round}"), &state, &tokens);
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
    assert_eq!(check("token block", &state, &tokens), 0);
    assert_eq!(check("BALANCE of the kept account", &state, &probe), 0);
    // A block that never uses the token, after one that did.
    let plain = block(1, GAS_LIMIT, vec![transfer(&holders[0], 0, Address::repeat_byte(0x77), 1)]);
    assert_eq!(check("token block", &state, &tokens), 0);
    assert_eq!(check("plain transfer after a token block", &state, &plain), 0);
    let got = execute_block_one_journal(&state, &cfg(), &plain).expect("executes");
    assert!(got.changes.accounts.iter().all(|a| a.address != token), "{:?}", got.changes);
    // The token gone from the state of the next block.
    assert_eq!(check("token block", &state, &tokens), 0);
    let mut without = MemState::new();
    without.set_account(holders[0].address(), U256::from(ETH), 0);
    assert_eq!(check("plain transfer, token gone", &without, &plain), 0);
}
