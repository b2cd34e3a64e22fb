//! The one-journal in-order executor against the sequential oracle: equal
//! on every block it accepts, and it declines exactly the blocks whose
//! deletions a single journal cannot reproduce.
//!
//! `OCC_SEEDS=n` / `OCC_SEED=n` as in `occ.rs`.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, Bytes, TxKind, U256};
use common::{gen, *};
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
