//! The parallel executor (scheduled transfers, lanes, in order) against
//! the sequential oracle, with 1, 2, 3 and 8 workers.
//!
//! `random_blocks_match_sequential` runs `OCC_SEEDS` seeds (default 300;
//! set e.g. `OCC_SEEDS=5000` for a long run, `OCC_SEED=n` to replay one).
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use common::{gen, *};
use sluice_executor::{testing::MemState, ExecPath, InOrder, ParallelExecutor};
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_state::{Account, StateReader, StoreError};

fn occ(workers: usize) -> ParallelExecutor {
    ParallelExecutor::new(cfg(), workers, 0)
}

/// What the random blocks exercised, to keep the generator honest.
#[derive(Debug, Default)]
struct Coverage {
    applied: usize,
    skipped: usize,
    failed: usize,
    reruns: u64,
    /// Blocks per path (and why, for the in-order ones).
    paths: std::collections::BTreeMap<String, usize>,
}

impl Coverage {
    fn on(&self, path: &str) -> usize {
        self.paths.iter().filter(|(p, _)| p.starts_with(path)).map(|(_, n)| n).sum()
    }
}

fn check_block(label: &str, state: &MemState, block: &PreparedBlock, cov: &mut Coverage) {
    let execs: Vec<ParallelExecutor> = [1, 2, 3, 8].into_iter().map(occ).collect();
    check_with(label, state, block, &execs, cov);
}

/// Checks `block` with each executor (reused across blocks by the caller,
/// so that their recycled memory is exercised too).
fn check_with(
    label: &str,
    state: &MemState,
    block: &PreparedBlock,
    execs: &[ParallelExecutor],
    cov: &mut Coverage,
) {
    let expected = run(state, block);
    cov.applied += expected.receipts.len();
    cov.failed += expected.receipts.iter().filter(|r| !r.success).count();
    cov.skipped += expected.skipped.len();
    for exec in execs {
        let workers = exec.workers();
        let got = exec.execute_block(state, block).expect("block executes");
        check_same(&format!("{label}, {workers} workers"), state, &expected, &got);
        cov.reruns += u64::from(got.stats.reruns);
        let path = got.stats.path;
        let key = match path.in_order() {
            Some(because) => format!("{} {}", path.as_str(), because.as_str()),
            None => path.as_str().to_owned(),
        };
        *cov.paths.entry(key).or_default() += 1;
    }
}

#[test]
fn random_blocks_match_sequential() {
    let seeds = seeds();
    let mut cov = Coverage::default();
    for seed in &seeds {
        // Fresh executors for each seed: the blocks are unrelated, and an
        // executor runs blocks in order for a while after lanes gave up on
        // one (`parallel/rule.rs`), which would hide lanes from most seeds.
        let execs: Vec<ParallelExecutor> = [1, 2, 3, 8].into_iter().map(occ).collect();
        let len = 16 + (seed * 37 % 150) as usize;
        let s = gen::scenario(*seed, len);
        let label = format!("seed {seed} (replay: OCC_SEED={seed})");
        check_with(&label, &s.state, &s.block, &execs, &mut cov);
    }
    eprintln!("{cov:?}");
    if seeds.len() >= 30 {
        // Every path the generator's blocks can take was taken.
        for path in ["lanes", "journal configured", "journal unsupported"] {
            assert!(cov.on(path) > 0, "{path}: {cov:?}");
        }
    }
}

/// The mixed blocks with about one transaction in five hostile, as a
/// Byzantine proposer could pack them past a validator's stateless checks
/// (funds short, nonce gaps and `u64::MAX`, out-of-gas loops, reverts,
/// failing creations, repeats) or as those checks refuse them (gas below
/// intrinsic, fee cap below the base fee, tip above it, another chain,
/// more gas than the block): the parallel executor must skip and fail
/// exactly what the sequential one does, and neither may panic. 200 seeds
/// by default (a few seconds); `OCC_SEEDS`/`OCC_SEED` as above. The
/// `block_exec` fuzz target drives the same differential from fuzz bytes.
#[test]
fn random_hostile_blocks_match_sequential() {
    let seeds: Vec<u64> = if std::env::var_os("OCC_SEED").is_some() || std::env::var_os("OCC_SEEDS").is_some()
    {
        seeds()
    } else {
        (0..200).collect()
    };
    let mut cov = Coverage::default();
    let execs: Vec<ParallelExecutor> = [2, 3].into_iter().map(occ).collect();
    for seed in &seeds {
        let len = 16 + (seed * 41 % 120) as usize;
        let s = gen::hostile_scenario(*seed, len);
        let label = format!("hostile seed {seed} (replay: OCC_SEED={seed})");
        check_with(&label, &s.state, &s.block, &execs, &mut cov);
    }
    eprintln!("{cov:?}");
    if seeds.len() >= 30 {
        // Hostile transactions were skipped and failed, not only applied.
        assert!(cov.skipped > seeds.len(), "{cov:?}");
        assert!(cov.failed > 0, "{cov:?}");
    }
}

/// Blocks of plain transfers, which the executor schedules by their
/// footprints when it can, against the same oracle.
#[test]
fn random_transfer_blocks_match_sequential() {
    let seeds = seeds();
    let mut cov = Coverage::default();
    let execs: Vec<ParallelExecutor> = [1, 2, 3, 8].into_iter().map(occ).collect();
    for seed in &seeds {
        let len = 8 + (seed * 53 % 200) as usize;
        let s = gen::transfer_scenario(*seed, len);
        let label = format!("transfer seed {seed} (replay: OCC_SEED={seed})");
        check_with(&label, &s.state, &s.block, &execs, &mut cov);
    }
    eprintln!("{cov:?}");
    if seeds.len() >= 30 {
        // Both ways were exercised: scheduled blocks, and blocks that turned
        // out not to qualify and went to lanes or in order.
        assert!(cov.on("scheduled") * 5 > seeds.len() * execs.len(), "{cov:?}");
        assert!(cov.on("lanes") + cov.on("journal") + cov.on("sequential") > cov.on("scheduled"), "{cov:?}");
        assert!(cov.skipped > 0, "{cov:?}");
    }
}

/// Addresses are usually hashes, but need not be: recipients that share
/// their first eight bytes (all zeros, all ones, or a vanity prefix), some
/// of them paid many times, in a block long enough to span several chunks
/// of planning and of running. The changes must still come out in address
/// order, whichever worker touched each account.
#[test]
fn transfers_to_addresses_alike_in_their_first_bytes_match_sequential() {
    let mut state = MemState::new();
    let alike = |first: u8, i: u64| {
        let mut a = [first; 20];
        a[8..16].copy_from_slice(&((i + 1) * 0x9e37_79b9).to_be_bytes());
        a[19] = i as u8;
        Address::from(a)
    };
    let mut txs = Vec::new();
    for i in 0..600u64 {
        let s = signer_n(i);
        state.set_account(s.address(), U256::from(ETH), 0);
        let to = match i % 5 {
            0 => alike(0x00, i),
            1 => alike(0xff, i),
            2 => alike(0x5a, i % 40),
            3 => alike(0x00, 7),
            _ => Address::with_last_byte(0x81).create(i),
        };
        txs.push(transfer(&s, 0, to, 1 + u128::from(i)));
    }
    let b = block(1, GAS_LIMIT, txs);
    let expected = run(&state, &b);
    for workers in [1, 2, 3, 8] {
        let got = occ(workers).execute_block(&state, &b).expect("executes");
        check_same(&format!("alike addresses, {workers} workers"), &state, &expected, &got);
        assert_eq!(got.stats.path, ExecPath::Scheduled);
    }
}

/// A transfer that plans as one but that the state refuses (its sender
/// cannot pay), late in a long block: found while the workers run their
/// groups, after every earlier phase passed. Every worker must give up at
/// the same point (none left waiting for the others), and the block runs
/// in order, with the refused transaction skipped as the oracle skips it.
#[test]
fn a_transfer_refused_while_running_sends_the_block_in_order() {
    let (mut state, b) = distinct_transfers(600);
    let PreparedTx::Ready(late) = &b.txs[550] else { panic!("a ready transaction") };
    state.set_account(late.sender, U256::from(1), 0);
    let expected = run(&state, &b);
    assert_eq!(expected.skipped.len(), 1);
    for workers in [1, 2, 3, 8] {
        let exec = occ(workers);
        for round in 0..5 {
            let got = exec.execute_block(&state, &b).expect("executes");
            check_same(&format!("refused late, {workers} workers, round {round}"), &state, &expected, &got);
            assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::Unsupported });
        }
    }
}

/// A state whose reads of one account fail, as a disk read can: the one
/// fault a test cannot cause with a real state.
struct FailingAt<'s> {
    state: &'s MemState,
    broken: Address,
}

impl StateReader for FailingAt<'_> {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        if *address == self.broken {
            return Err(StoreError::Io(std::io::Error::other("injected read failure")));
        }
        self.state.account(address)
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        self.state.code(hash)
    }
    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        self.state.storage(address, slot)
    }
    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        self.state.block_hash(number)
    }
}

/// A read that fails while the workers run a block of transfers is the
/// block's error, whichever worker met it and whatever the others did
/// meanwhile: not a panic, not a wait at a gate.
#[test]
fn a_read_failure_while_running_transfers_is_the_blocks_error() {
    let (state, b) = distinct_transfers(600);
    let PreparedTx::Ready(late) = &b.txs[550] else { panic!("a ready transaction") };
    let failing = FailingAt { state: &state, broken: late.sender };
    for workers in [1, 2, 3, 8] {
        let exec = occ(workers);
        for _ in 0..5 {
            let err = exec.execute_block(&failing, &b).expect_err("the read fails");
            assert!(err.to_string().contains("injected read failure"), "{err}");
        }
        // And the executor is fine afterwards.
        let got = exec.execute_block(&state, &b).expect("executes");
        check_same(&format!("after a failure, {workers} workers"), &state, &run(&state, &b), &got);
    }
}

fn distinct_transfers(n: u64) -> (MemState, PreparedBlock) {
    let mut state = MemState::new();
    let mut txs = Vec::new();
    for i in 0..n {
        let s = signer_n(i);
        state.set_account(s.address(), U256::from(ETH), 0);
        txs.push(transfer(&s, 0, Address::with_last_byte(0x80).create(i), 1 + u128::from(i)));
    }
    (state, block(1, GAS_LIMIT, txs))
}

#[test]
fn independent_transfers_run_in_parallel_without_the_interpreter() {
    let (state, b) = distinct_transfers(200);
    let expected = run(&state, &b);
    for workers in [1, 2, 4] {
        let got = occ(workers).execute_block(&state, &b).expect("executes");
        check_same("distinct transfers", &state, &expected, &got);
        assert_eq!(got.stats.path, ExecPath::Scheduled);
        assert_eq!(got.stats.workers, workers as u32);
    }
}

#[test]
fn a_fully_contended_block_falls_back_to_in_order_execution() {
    let (state, b) = counter_block(150);
    let counter = Address::repeat_byte(0xc0);
    let expected = run(&state, &b);
    assert_eq!(after(&state, &expected).get_storage(&counter, &U256::ZERO), U256::from(150));
    // Every transaction writes what the one before it wrote: recognised
    // in the first chunks on lanes, whatever the timing, and handed to the
    // sequential executor.
    for workers in [2, 3, 8] {
        let got = occ(workers).execute_block(&state, &b).expect("executes");
        check_same("contended", &state, &expected, &got);
        assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::Contention });
    }
    // One worker runs every block of more than plain transfers in order.
    let got = occ(1).execute_block(&state, &b).expect("executes");
    check_same("contended, 1 worker", &state, &expected, &got);
    assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::Configured });
}

#[test]
fn a_block_that_turns_contended_is_exact_either_way() {
    // Independent transfers first, then a long run of counter increments:
    // lanes either correct the chain chunk by chunk or find it contended
    // and give the block to the one journal, depending on the workers' timing.
    let mut state = MemState::new();
    let counter = Address::repeat_byte(0xc0);
    state.set_code(counter, counter_runtime());
    let mut txs = Vec::new();
    for i in 0..400 {
        let s = signer_n(i);
        state.set_account(s.address(), U256::from(ETH), 0);
        txs.push(if i < 100 {
            transfer(&s, 0, Address::with_last_byte(0x90).create(i), 5)
        } else {
            eip1559(&s, 0, TxKind::Call(counter), 0, Bytes::new(), 60_000)
        });
    }
    let b = block(1, GAS_LIMIT, txs);
    let expected = run(&state, &b);
    for workers in [2, 3, 8] {
        let got = occ(workers).execute_block(&state, &b).expect("executes");
        check_same("contended tail", &state, &expected, &got);
        assert!(
            matches!(got.stats.path, ExecPath::Lanes | ExecPath::Journal { because: InOrder::Contention }),
            "{:?}",
            got.stats
        );
    }
}

#[test]
fn small_blocks_and_unsupported_coinbase_changes_run_sequentially() {
    let (state, b) = distinct_transfers(10);
    let exec = ParallelExecutor::new(cfg(), 2, 64);
    let got = exec.execute_block(&state, &b).expect("executes");
    assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::SmallBlock });
    check_same("small", &state, &run(&state, &b), &got);

    // An existing, empty coinbase touched with a zero fee is deleted, with
    // its storage: neither scheduled transfers nor lanes model that.
    let mut state = funded_state();
    state.set_account(coinbase(), U256::ZERO, 0);
    let tx = alloy_consensus::TxEip1559 {
        chain_id: CHAIN_ID,
        nonce: 0,
        gas_limit: 21_000,
        max_fee_per_gas: BASE_FEE.into(),
        max_priority_fee_per_gas: 0,
        to: TxKind::Call(Address::repeat_byte(0x42)),
        value: U256::from(1),
        access_list: Default::default(),
        input: Default::default(),
    };
    let tx = sluice_messages::PreparedTx::ready(recovered(
        &signer(1),
        alloy_consensus::TypedTransaction::Eip1559(tx),
    ));
    let b = block(1, GAS_LIMIT, vec![tx]);
    let got = occ(2).execute_block(&state, &b).expect("executes");
    assert_eq!(got.stats.path, ExecPath::Journal { because: InOrder::Unsupported });
    check_same("coinbase deleted", &state, &run(&state, &b), &got);
}

#[test]
fn explicit_coinbase_reads_see_every_earlier_fee() {
    let mut state = funded_state();
    let reader = Address::repeat_byte(0xcc);
    state.set_code(reader, Bytes::from_static(&[0x41, 0x31, 0x60, 0x00, 0x55, 0x00]));
    let mut txs = Vec::new();
    let mut nonces = [0u64; 5];
    for i in 0..80u64 {
        let s = 1 + (i % 4) as u8;
        let n = &mut nonces[s as usize];
        let tx = match i % 5 {
            0 => eip1559(&signer(s), *n, TxKind::Call(reader), 0, Bytes::new(), 60_000),
            1 => transfer(&signer(s), *n, coinbase(), 1_000),
            _ => transfer(&signer(s), *n, Address::repeat_byte(0x10 + i as u8), 5),
        };
        *n += 1;
        txs.push(tx);
    }
    let b = block(1, GAS_LIMIT, txs);
    let expected = run(&state, &b);
    let seen = after(&state, &expected).get_storage(&reader, &U256::ZERO);
    assert!(seen > U256::ZERO);
    check_block("coinbase reads", &state, &b, &mut Coverage::default());
}

#[test]
fn the_token_moves_balances_and_logs() {
    let mut state = funded_state();
    let token = Address::repeat_byte(0xe2);
    state.set_code(token, erc20::runtime());
    let (alice, bob) = (signer(1), signer(2));
    state.set_storage(token, erc20::balance_slot(alice.address()), U256::from(100));
    let txs = vec![
        eip1559(&alice, 0, TxKind::Call(token), 0, erc20::transfer_call(bob.address(), 30), 80_000),
        eip1559(&bob, 0, TxKind::Call(token), 0, erc20::transfer_call(alice.address(), 31), 80_000),
    ];
    let out = run(&state, &block(1, GAS_LIMIT, txs));
    assert!(out.receipts[0].success && !out.receipts[1].success);
    let log = &out.receipts[0].logs[0];
    assert_eq!(log.topics[0], erc20::transfer_topic());
    assert_eq!(log.data, word(30));
    let end = after(&state, &out);
    assert_eq!(end.get_storage(&token, &erc20::balance_slot(alice.address())), U256::from(70));
    assert_eq!(end.get_storage(&token, &erc20::balance_slot(bob.address())), U256::from(30));
}

#[test]
fn storage_of_a_deleted_account_reads_zero_later_in_the_block() {
    // An empty account with storage at block start (only a genesis can make
    // one): a zero-value transfer deletes it (EIP-161) and wipes its
    // storage; it is then delegated to the counter and called, which must
    // read slot 0 as zero, not as the block-start 5.
    let mut state = funded_state();
    let counter = Address::repeat_byte(0xc0);
    state.set_code(counter, counter_runtime());
    let empty = signer(9);
    state.set_account(empty.address(), U256::ZERO, 0);
    state.set_storage(empty.address(), U256::ZERO, U256::from(5));
    let mut txs = vec![
        transfer(&signer(1), 0, empty.address(), 0),
        delegation((&signer(2), 0), (&empty, 0), counter, Address::repeat_byte(0x99)),
        eip1559(&signer(3), 0, TxKind::Call(empty.address()), 0, Bytes::new(), 100_000),
    ];
    // Unrelated work so that workers really run concurrently.
    for i in 0..40 {
        txs.push(transfer(&signer(4), i, Address::repeat_byte(0x50), 1));
    }
    let b = block(1, GAS_LIMIT, txs);
    let expected = run(&state, &b);
    assert!(expected.receipts.iter().all(|r| r.success), "{:?}", expected.skipped);
    assert_eq!(after(&state, &expected).get_storage(&empty.address(), &U256::ZERO), U256::from(1));
    check_block("wiped storage", &state, &b, &mut Coverage::default());
}

#[test]
fn empty_and_tiny_blocks_run_scheduled_too() {
    let state = funded_state();
    for n in [0u64, 1, 2, 5] {
        let txs = (0..n).map(|i| transfer(&signer(1), i, Address::repeat_byte(0x33), 1)).collect();
        let b = block(1, GAS_LIMIT, txs);
        let expected = run(&state, &b);
        for workers in [1, 2, 8] {
            let got = occ(workers).execute_block(&state, &b).expect("executes");
            check_same(&format!("{n} txs"), &state, &expected, &got);
            assert_eq!(got.stats.path, ExecPath::Scheduled);
        }
    }
}

/// Admission's work as the rule reads it: a count the test moves.
#[derive(Debug, Default)]
struct Admitting(std::sync::atomic::AtomicU64);

impl sluice_executor::Load for Admitting {
    fn work_done(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// With admission's load read, a block of contract calls runs in order
/// when admission worked since the previous one, on lanes otherwise: every
/// outcome equals the oracle's, whichever mode ran.
#[test]
fn the_load_rule_runs_both_modes_and_each_equals_sequential() {
    let load = std::sync::Arc::new(Admitting::default());
    let exec = ParallelExecutor::new(cfg(), 2, 0).with_load(Some(load.clone()));
    let (mut modes, mut worked) = (Vec::new(), false);
    for seed in 0..24u64 {
        // Admission works before every other block.
        if seed % 2 == 1 {
            load.0.fetch_add(10, std::sync::atomic::Ordering::Relaxed);
            worked = true;
        }
        let s = gen::scenario(seed, 96);
        let got = exec.execute_block(&s.state, &s.block).expect("executes");
        check_same(&format!("load rule seed {seed}"), &s.state, &run(&s.state, &s.block), &got);
        match got.stats.path {
            // All plain transfers: scheduled before any choice.
            ExecPath::Scheduled => continue,
            // Lanes gave up on the block before: it runs in order for that.
            path if path.in_order() == Some(InOrder::GaveUpRecently) => {}
            path => modes.push((std::mem::take(&mut worked), path.in_order() == Some(InOrder::Busy))),
        }
        worked = false;
    }
    assert!(modes.len() >= 6, "the generator makes blocks of contract calls: {modes:?}");
    assert!(modes.iter().any(|m| m.0) && modes.iter().any(|m| !m.0), "both cases: {modes:?}");
    // Every block after admission worked ran in order for it; no other did.
    assert!(modes.iter().all(|(busy, in_order)| busy == in_order), "{modes:?}");
}
