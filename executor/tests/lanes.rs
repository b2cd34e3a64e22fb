//! Lanes (`parallel/lanes`: chunks of transactions in order on
//! each worker's own journal, corrected once the chunks before them are
//! final) against the sequential oracle.
//!
//! `OCC_SEEDS=n` / `OCC_SEED=n` as in `occ.rs`.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, TxKind, U256};
use common::{erc20, gen, *};
use sluice_executor::{testing::MemState, ExecPath, InOrder, ParallelExecutor};
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_txpool::Signer;

/// Held by each test here: whether a block is found contended, and how
/// many of its transactions run again, depend on how the workers'
/// threads are scheduled. With the tests of this file running at once,
/// there are more worker threads than cores, and a worker descheduled
/// mid-chunk turns a block's timing (not its results) upside down.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lanes(workers: usize) -> ParallelExecutor {
    ParallelExecutor::new(cfg(), workers, 0)
}

/// Blocks that ran on lanes, and transactions they ran again.
#[derive(Debug, Default)]
struct Coverage {
    blocks: usize,
    on_lanes: usize,
    reruns: u64,
}

fn check(
    label: &str,
    state: &MemState,
    block: &PreparedBlock,
    execs: &[ParallelExecutor],
    cov: &mut Coverage,
) {
    let expected = run(state, block);
    for exec in execs {
        let got = exec.execute_block(state, block).expect("block executes");
        check_same(&format!("{label}, {} workers", exec.workers()), state, &expected, &got);
        cov.blocks += 1;
        let on_lanes = got.stats.path == ExecPath::Lanes;
        cov.on_lanes += usize::from(on_lanes);
        cov.reruns += u64::from(got.stats.reruns) * u64::from(on_lanes);
    }
}

#[test]
fn random_blocks_on_lanes_match_sequential() {
    let _serial = one_at_a_time();
    // Fresh executors for each block: the blocks are unrelated, and an
    // executor runs blocks in order for a while after lanes gave up on one
    // (`parallel/rule.rs`), which would hide lanes from most blocks.
    let fresh = || -> Vec<ParallelExecutor> { [2, 3, 8].into_iter().map(lanes).collect() };
    let (mut mixed, mut plain) = (Coverage::default(), Coverage::default());
    for seed in seeds() {
        let len = 16 + (seed * 37 % 150) as usize;
        let label = format!("seed {seed} (replay: OCC_SEED={seed})");
        let s = gen::scenario(seed, len);
        check(&format!("{label} mixed"), &s.state, &s.block, &fresh(), &mut mixed);
        let s = gen::scenario_without_creations(seed, len);
        check(&format!("{label} no creations"), &s.state, &s.block, &fresh(), &mut plain);
    }
    eprintln!("mixed {mixed:?}\nwithout creations {plain:?}");
    if plain.blocks >= 90 {
        // Lanes decline creations and self-destructs (the one journal runs
        // those blocks), and blocks where most transactions
        // had to run again (in order is faster): the generator's blocks
        // are small and conflict by design, so with 3 and 8 workers
        // (2 and 7 chunks stale) many are found contended. Still a good
        // share of them runs on lanes, with conflicts corrected.
        assert!(plain.on_lanes * 5 > plain.blocks, "{plain:?}");
        assert!(plain.reruns > 0, "{plain:?}");
    }
}

/// A token at `TOKEN` held by `holders` funded accounts, and `n` random
/// transfers among them; the holders' next nonces.
fn erc20_block(holders: u64, n: usize) -> (MemState, Vec<Signer>, Vec<PreparedTx>, Vec<u64>) {
    let mut state = MemState::new();
    state.set_code(TOKEN, erc20::runtime());
    let signers: Vec<_> = (0..holders).map(signer_n).collect();
    for h in &signers {
        state.set_account(h.address(), U256::from(ETH), 0);
        state.set_storage(TOKEN, erc20::balance_slot(h.address()), U256::from(1_000_000));
    }
    let mut rng = gen::Rng::new(7);
    let mut nonces = vec![0u64; holders as usize];
    let txs = (0..n)
        .map(|_| {
            let from = rng.below(holders) as usize;
            let to = signers[rng.below(holders) as usize].address();
            let tx = eip1559(
                &signers[from],
                nonces[from],
                TxKind::Call(TOKEN),
                0,
                erc20::transfer_call(to, 1 + rng.below(50)),
                60_000,
            );
            nonces[from] += 1;
            tx
        })
        .collect();
    (state, signers, txs, nonces)
}

const TOKEN: Address = Address::repeat_byte(0xe2);

#[test]
fn erc20_transfers_among_holders_conflict_and_match_sequential() {
    let _serial = one_at_a_time();
    // 300 holders, 600 transfers: chunks often read what the chunks
    // before them changed, short of contention.
    let (state, _, txs, _) = erc20_block(300, 600);
    let b = block(1, GAS_LIMIT, txs);
    let expected = run(&state, &b);
    assert!(expected.receipts.iter().all(|r| r.success));
    for workers in [2, 3] {
        // How many transactions run before the chunk before theirs is final
        // (and may run again) depends on the workers' timing: on a loaded
        // machine, a block may run without a conflict to correct, or be
        // found contended. Every run must be exact; some must have
        // corrected conflicts on lanes. (With another process spinning on
        // one of two cores, 10 tries were not always enough.)
        let exec = lanes(workers);
        let mut stats = Vec::new();
        for _ in 0..40 {
            let got = exec.execute_block(&state, &b).expect("executes");
            check_same("erc20 few holders", &state, &expected, &got);
            stats.push(got.stats);
            if got.stats.path == ExecPath::Lanes && got.stats.reruns > 0 {
                break;
            }
        }
        assert!(stats.iter().any(|s| s.path == ExecPath::Lanes && s.reruns > 0), "{stats:?}");
    }
}

#[test]
fn a_dependency_chain_on_lanes_runs_in_order() {
    let _serial = one_at_a_time();
    let (state, b) = counter_block(150);
    let expected = run(&state, &b);
    for workers in [2, 3] {
        let got = lanes(workers).execute_block(&state, &b).expect("executes");
        check_same("counter on lanes", &state, &expected, &got);
        assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::Contention });
    }
}

#[test]
fn an_eip7702_transaction_late_in_a_block_takes_it_off_lanes() {
    let _serial = one_at_a_time();
    // A journal kept across transactions cannot reproduce an EIP-7702
    // transaction's refunds. Lanes find one when they reach it (no pass
    // over the block first) and give the block up: it runs another way,
    // with the same result. Without it, the same block runs on lanes.
    let (state, holders, mut txs, nonces) = erc20_block(1_000, 300);
    let plain = block(1, GAS_LIMIT, txs.clone());
    let authority = signer_n(5_000);
    txs.push(delegation((&holders[0], nonces[0]), (&authority, 0), TOKEN, Address::repeat_byte(0x99)));
    let late = block(1, GAS_LIMIT, txs);
    let expected = run(&state, &late);
    assert!(
        expected.skipped.is_empty() && expected.receipts.iter().all(|r| r.success),
        "{:?}",
        expected.skipped
    );
    let exec = lanes(2);
    let got = exec.execute_block(&state, &late).expect("executes");
    check_same("late EIP-7702", &state, &expected, &got);
    assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::Unsupported });
    // With few conflicts among 1,000 holders, the block without it runs on
    // lanes (tried a few times: a worker descheduled long enough can make
    // it look contended).
    let on_lanes = (0..10).any(|_| {
        let got = exec.execute_block(&state, &plain).expect("executes");
        check_same("without EIP-7702", &state, &run(&state, &plain), &got);
        got.stats.path == ExecPath::Lanes
    });
    assert!(on_lanes);
}
