//! Milliseconds per 5,000-transaction block: plain revm (`transact_commit`
//! over a `CacheDB`), the sluice sequential executor (the oracle), the
//! one-journal in-order executor, and the parallel executor with 1 worker
//! and with 2: on lanes alone (`parallel/lanes`), and as the node runs it
//! while admission is idle (lanes, in order for a while after lanes gave
//! up, see `parallel/rule.rs`), on four workloads; and the machine's ceiling for two workers
//! (how much more EVM work two independent revm runs at once get done than
//! one). Every transaction is asserted to succeed, and every outcome to
//! equal the oracle's. Each cell times the second of two blocks it runs
//! back to back (its own steady state, as in a node). Times are medians
//! over rounds; a ratio is the median
//! of the ratios within each round (taken milliseconds apart, where the
//! machine's speed drifts from one second to the next).
//!
//! `cargo bench -p sluice-executor --bench occ` (`OCC_BENCH_RUNS=n` for
//! more or fewer timed runs per cell; `OCC_BENCH_ONLY=erc20` for one
//! workload; `OCC_BENCH_COLD=1` to time each cell's only block, right
//! after the previous cell's, as the bench did before session 11).
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

/// The node binary's allocator, so that the numbers are the node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use alloy_consensus::Transaction as _;
use alloy_eips::Typed2718;
use alloy_primitives::{keccak256, Address, Bytes, TxKind, B256, U256};
use common::{erc20, *};
use revm::{
    context::{BlockEnv, CfgEnv, Context, TxEnv},
    context_interface::block::BlobExcessGasAndPrice,
    database::{CacheDB, EmptyDB},
    primitives::{eip4844, hardfork::SpecId},
    state::{AccountInfo, Bytecode},
    ExecuteCommitEvm, MainBuilder, MainContext,
};
use sluice_executor::{execute_block, execute_block_one_journal, testing::MemState, ParallelExecutor};
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_txpool::Signer;

const TXS: usize = 5_000;

/// A workload: its name and how to build its state and transactions.
type Workload = (&'static str, fn() -> (World, Vec<PreparedTx>));

fn key(tag: u8, i: u64) -> Signer {
    let mut k = [0u8; 32];
    k[0] = tag;
    k[24..].copy_from_slice(&i.to_be_bytes());
    Signer::from_bytes(&B256::from(k)).unwrap()
}

/// A recipient that does not exist yet, spread like real addresses.
fn fresh(i: u64) -> Address {
    Address::from_slice(&keccak256(i.to_be_bytes())[12..])
}

/// The block-start state, both as sluice's reader and as revm's `CacheDB`.
struct World {
    mem: MemState,
    cache: CacheDB<EmptyDB>,
}

impl World {
    fn new() -> Self {
        World { mem: MemState::new(), cache: CacheDB::new(EmptyDB::default()) }
    }
    fn fund(&mut self, a: Address) {
        self.mem.set_account(a, U256::from(100 * ETH), 0);
        let info = AccountInfo { balance: U256::from(100 * ETH), ..Default::default() };
        self.cache.insert_account_info(a, info);
    }
    fn code(&mut self, a: Address, code: Bytes) {
        self.mem.set_code(a, code.clone());
        let code = Bytecode::new_raw(code);
        let info =
            AccountInfo { nonce: 1, code_hash: code.hash_slow(), code: Some(code), ..Default::default() };
        self.cache.insert_account_info(a, info);
    }
    fn slot(&mut self, a: Address, slot: U256, value: U256) {
        self.mem.set_storage(a, slot, value);
        self.cache.insert_account_storage(a, slot, value).unwrap();
    }
}

fn distinct_transfers() -> (World, Vec<PreparedTx>) {
    let mut w = World::new();
    let txs = (0..TXS as u64)
        .map(|i| {
            let s = key(1, i);
            w.fund(s.address());
            transfer(&s, 0, fresh(i), 1_000)
        })
        .collect();
    (w, txs)
}

fn paired_conflicts() -> (World, Vec<PreparedTx>) {
    let mut w = World::new();
    let mut rng = gen::Rng::new(10);
    // 10% of the transactions share their recipient with one other one,
    // placed at random in the block.
    let mut recipients: Vec<Address> = (0..TXS as u64).map(|i| fresh(1_000_000 + i)).collect();
    for p in 0..TXS / 20 {
        let (a, b) = (rng.below(TXS as u64) as usize, rng.below(TXS as u64) as usize);
        let shared = fresh(2_000_000 + p as u64);
        recipients[a] = shared;
        recipients[b] = shared;
    }
    let txs = (0..TXS as u64)
        .map(|i| {
            let s = key(2, i);
            w.fund(s.address());
            transfer(&s, 0, recipients[i as usize], 1_000)
        })
        .collect();
    (w, txs)
}

fn erc20_holders() -> (World, Vec<PreparedTx>) {
    const HOLDERS: u64 = 1_000;
    let mut w = World::new();
    let token = Address::repeat_byte(0xe2);
    w.code(token, erc20::runtime());
    let holders: Vec<Signer> = (0..HOLDERS).map(|i| key(3, i)).collect();
    for h in &holders {
        w.fund(h.address());
        w.slot(token, erc20::balance_slot(h.address()), U256::from(1_000_000));
    }
    let mut nonces = vec![0u64; holders.len()];
    let mut rng = gen::Rng::new(20);
    let txs = (0..TXS)
        .map(|_| {
            let from = rng.below(HOLDERS) as usize;
            let to = holders[rng.below(HOLDERS) as usize].address();
            let amount = 1 + rng.below(100);
            let call = erc20::transfer_call(to, amount);
            let tx = eip1559(&holders[from], nonces[from], TxKind::Call(token), 0, call, 60_000);
            nonces[from] += 1;
            tx
        })
        .collect();
    (w, txs)
}

fn contended_counter() -> (World, Vec<PreparedTx>) {
    let mut w = World::new();
    let counter = Address::repeat_byte(0xc0);
    w.code(counter, counter_runtime());
    let txs = (0..TXS as u64)
        .map(|i| {
            let s = key(4, i);
            w.fund(s.address());
            eip1559(&s, 0, TxKind::Call(counter), 0, Bytes::new(), 50_000)
        })
        .collect();
    (w, txs)
}

/// revm's environments, as sluice builds them (see `executor/src/env.rs`).
fn revm_envs(b: &PreparedBlock) -> (BlockEnv, CfgEnv) {
    let h = &b.block.header;
    let block = BlockEnv {
        number: U256::from(h.number),
        beneficiary: h.coinbase,
        timestamp: U256::from(h.timestamp),
        gas_limit: h.gas_limit,
        basefee: h.base_fee,
        difficulty: U256::ZERO,
        prevrandao: Some(h.parent_hash),
        blob_excess_gas_and_price: Some(BlobExcessGasAndPrice::new(
            0,
            eip4844::BLOB_BASE_FEE_UPDATE_FRACTION_PRAGUE,
        )),
        ..Default::default()
    };
    let mut cfg = CfgEnv::new_with_spec(SpecId::PRAGUE);
    cfg.chain_id = CHAIN_ID;
    (block, cfg)
}

fn tx_env(tx: &PreparedTx) -> TxEnv {
    let PreparedTx::Ready(tx) = tx else { panic!("invalid tx in a benchmark block") };
    let t = &tx.tx;
    TxEnv {
        tx_type: t.ty(),
        caller: tx.sender,
        gas_limit: t.gas_limit(),
        gas_price: t.max_fee_per_gas(),
        kind: t.kind(),
        value: t.value(),
        data: t.input().clone(),
        nonce: t.nonce(),
        chain_id: t.chain_id(),
        access_list: t.access_list().cloned().unwrap_or_default(),
        gas_priority_fee: t.max_priority_fee_per_gas(),
        ..Default::default()
    }
}

/// One timed run of plain revm over a fresh copy of the state.
fn revm_run(w: &World, b: &PreparedBlock) -> Duration {
    let (block, cfg) = revm_envs(b);
    let mut evm = Context::mainnet().with_db(w.cache.clone()).with_block(block).with_cfg(cfg).build_mainnet();
    let start = Instant::now();
    for tx in &b.txs {
        let result = evm.transact_commit(tx_env(tx)).unwrap();
        assert!(result.is_success(), "revm: a transaction failed: {result:?}");
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn bench(name: &str, (w, txs): (World, Vec<PreparedTx>), runs: usize) {
    let b = block(1, u64::MAX / 4, txs);
    let oracle = execute_block(&w.mem, &cfg(), &b).unwrap();
    assert!(oracle.skipped.is_empty() && oracle.receipts.iter().all(|r| r.success), "{name}: a tx failed");
    let parallel1 = ParallelExecutor::new(cfg(), 1, 64);
    let lanes2 = ParallelExecutor::new(cfg(), 2, 64);
    // As the node runs it while admission is idle (replay, a follower, a
    // burst's tail): lanes, in order for a while after lanes gave up.
    let node2 = ParallelExecutor::new(cfg(), 2, 64).with_load(None);
    let mut times: [Vec<Duration>; 6] = Default::default();
    let mut modes = Vec::new();
    let mut ceiling = Vec::new();
    // Round-robin so that noise from other processes hits every column.
    // Each cell runs its block twice in a row and the second is timed
    // (unless OCC_BENCH_COLD is set): a node runs block after block on one
    // executor, and a cell timed right after another executor's block is
    // measured partly on that one's leftovers. Timed that way, of lanes and
    // node default whichever came second was 4-7% faster, and the one
    // journal, right after the oracle, ~25% slower than after itself.
    let warm = std::env::var("OCC_BENCH_COLD").is_err();
    for run in 0..runs + 2 {
        let t0 = if warm { [revm_run(&w, &b), revm_run(&w, &b)][1] } else { revm_run(&w, &b) };
        if warm {
            drop(execute_block(&w.mem, &cfg(), &b).unwrap());
        }
        let start = Instant::now();
        let seq = execute_block(&w.mem, &cfg(), &b).unwrap();
        let t1 = start.elapsed();
        if warm {
            drop(execute_block_one_journal(&w.mem, &cfg(), &b).unwrap());
        }
        let start = Instant::now();
        let journal = execute_block_one_journal(&w.mem, &cfg(), &b).unwrap();
        let t2 = start.elapsed();
        if run == 0 {
            let same = journal.receipts == seq.receipts
                && journal.skipped == seq.skipped
                && journal.changes == seq.changes;
            assert!(same, "{name}: one journal differs from sequential");
        }
        let mut occ_times = [Duration::ZERO; 3];
        for (i, exec) in [&parallel1, &lanes2, &node2].into_iter().enumerate() {
            if warm {
                let first = exec.execute_block(&w.mem, &b).unwrap();
                assert!(first.receipts.iter().all(|r| r.success), "{name}: a transaction failed");
            }
            let start = Instant::now();
            let out = exec.execute_block(&w.mem, &b).unwrap();
            occ_times[i] = start.elapsed();
            // Check the first two blocks and the last.
            if run < 2 || run == runs + 1 {
                assert!(
                    out.receipts == seq.receipts && out.changes == seq.changes && out.skipped.is_empty(),
                    "{name}: OCC differs from sequential"
                );
            }
            if run == runs + 1 {
                let label = ["1w", "2w lanes", "2w node"][i];
                modes.push(format!("{label}: {:?}", out.stats));
            }
        }
        if run >= 2 {
            for (col, t) in [t0, t1, t2, occ_times[0], occ_times[1], occ_times[2]].into_iter().enumerate() {
                times[col].push(t);
            }
            if run % 3 == 2 {
                ceiling.push(evm_parallelism(&w, &b));
            }
        }
    }
    // Ratios are medians of each round's ratio: the two times of a round
    // were taken within milliseconds of each other, and this machine's
    // speed drifts by a third from one second to the next.
    let ratios = |col: usize| {
        let mut r: Vec<f64> =
            times[0].iter().zip(&times[col]).map(|(a, b)| a.as_secs_f64() / b.as_secs_f64()).collect();
        r.sort_by(f64::total_cmp);
        r
    };
    let ratio = |col: usize| {
        let r = ratios(col);
        r[r.len() / 2]
    };
    let (by_node, by_lanes, by_o1) = (ratio(5), ratio(4), ratio(3));
    // How much one round's ratio moves: the spread behind the medians.
    let quartiles = |col: usize| {
        let r = ratios(col);
        format!("{:.2}-{:.2}x", r[r.len() / 4], r[r.len() * 3 / 4])
    };
    eprintln!(
        "    {name}: revm / OCC2 node, rounds' middle half {}; revm / OCC2 lanes {}",
        quartiles(5),
        quartiles(4)
    );
    let [revm, seq, journal, o1, lanes, node] = times.map(median);
    ceiling.sort_by(f64::total_cmp);
    println!(
        "| {name} | {revm:.2} | {seq:.2} | {journal:.2} | {o1:.2} | {lanes:.2} | {node:.2} | {by_node:.2}x \
         | {by_lanes:.2}x | {by_o1:.2}x | {:.2}x |",
        ceiling[ceiling.len() / 2]
    );
    for m in modes {
        eprintln!("    {name} {m}");
    }
}

/// How much more EVM work two threads get done than one, right now: the
/// block run by plain revm once on one thread, then twice at once on two
/// (nothing shared but the read-only block). No executor can beat this
/// with two workers.
fn evm_parallelism(w: &World, b: &PreparedBlock) -> f64 {
    let one: Duration = (0..3).map(|_| revm_run(w, b)).sum::<Duration>() / 3;
    let both = (0..3)
        .map(|_| {
            // Each thread copies the state first; the clock runs from when
            // both are ready until both are done.
            let ready = std::sync::Barrier::new(2);
            let start = std::sync::OnceLock::new();
            std::thread::scope(|s| {
                let run = || revm_run_after(w, b, &ready, &start);
                let h = s.spawn(run);
                run();
                h.join().unwrap();
            });
            start.get().unwrap().elapsed()
        })
        .sum::<Duration>()
        / 3;
    2.0 * one.as_secs_f64() / both.as_secs_f64()
}

/// [`revm_run`], starting once both threads have their copy of the state.
fn revm_run_after(
    w: &World,
    b: &PreparedBlock,
    ready: &std::sync::Barrier,
    start: &std::sync::OnceLock<Instant>,
) {
    let (block, cfg) = revm_envs(b);
    let mut evm = Context::mainnet().with_db(w.cache.clone()).with_block(block).with_cfg(cfg).build_mainnet();
    ready.wait();
    start.get_or_init(Instant::now);
    for tx in &b.txs {
        assert!(evm.transact_commit(tx_env(tx)).unwrap().is_success());
    }
}

/// `OCC_BENCH_PROFILE=<workload>:<workers>`: only the parallel executor
/// (lanes, not adaptive), in a loop, for a profiler; `<workers>` may also be `seq` (the oracle),
/// `journal`, `revm`, `ceiling` (print the two-worker ceiling), or `pair`:
/// the one journal and the 2-worker parallel executor alternating block by block,
/// medians and their ratio. On a noisy machine whole-process timings swing
/// by a third within a minute; a ratio taken block by block holds.
fn profile(spec: &str, workloads: &[Workload]) {
    let (name, workers) = spec.split_once(':').unwrap();
    let (_, make) = workloads.iter().find(|(n, _)| n.contains(name)).unwrap();
    let (w, txs) = make();
    let b = block(1, u64::MAX / 4, txs);
    let runs = 200;
    if workers == "journal" {
        let start = Instant::now();
        for _ in 0..runs {
            assert!(execute_block_one_journal(&w.mem, &cfg(), &b).unwrap().skipped.is_empty());
        }
        println!("{spec}: {:.2} ms per block", start.elapsed().as_secs_f64() * 1e3 / f64::from(runs));
        return;
    }
    if workers == "pair" {
        let exec = ParallelExecutor::new(cfg(), 2, 64);
        let (mut journal, mut parallel) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let start = Instant::now();
            let out = execute_block_one_journal(&w.mem, &cfg(), &b).unwrap();
            journal.push(start.elapsed());
            assert!(out.skipped.is_empty() && out.receipts.iter().all(|r| r.success));
            let start = Instant::now();
            let out = exec.execute_block(&w.mem, &b).unwrap();
            parallel.push(start.elapsed());
            assert!(out.skipped.is_empty() && out.receipts.iter().all(|r| r.success));
        }
        let (j, o) = (median(journal), median(parallel));
        println!(
            "{spec}: one journal {j:.2} ms, OCC 2 workers {o:.2} ms per block; journal / OCC {:.3}",
            j / o
        );
        return;
    }
    if workers == "revm" {
        let total: Duration = (0..runs).map(|_| revm_run(&w, &b)).sum();
        println!("{spec}: {:.2} ms per block", total.as_secs_f64() * 1e3 / f64::from(runs));
        return;
    }
    if workers == "ceiling" {
        for _ in 0..5 {
            println!("{spec}: two independent revm runs at once are {:.2}x one", evm_parallelism(&w, &b));
        }
        return;
    }
    if workers == "seq" {
        let start = Instant::now();
        for _ in 0..runs {
            assert!(execute_block(&w.mem, &cfg(), &b).unwrap().skipped.is_empty());
        }
        println!("{spec}: {:.2} ms per block", start.elapsed().as_secs_f64() * 1e3 / f64::from(runs));
        return;
    }
    let exec = ParallelExecutor::new(cfg(), workers.parse().unwrap(), 64);
    let start = Instant::now();
    let (mut spec_t, mut val_t, mut merge_t) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..runs {
        let out = exec.execute_block(&w.mem, &b).unwrap();
        assert!(out.skipped.is_empty());
        spec_t += out.stats.speculate;
        val_t += out.stats.validate;
        merge_t += out.stats.merge;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3 / f64::from(runs);
    println!(
        "{spec}: {:.2} ms per block (speculate {:.2}, of which commit {:.2}; merge {:.2})",
        ms(start.elapsed()),
        ms(spec_t),
        ms(val_t),
        ms(merge_t)
    );
}

fn main() {
    let runs: usize = std::env::var("OCC_BENCH_RUNS").map_or(15, |n| n.parse().unwrap());
    let only = std::env::var("OCC_BENCH_ONLY").ok();
    let workloads: [Workload; 4] = [
        ("distinct transfers", distinct_transfers),
        ("erc20 1000 holders", erc20_holders),
        ("10% paired conflicts", paired_conflicts),
        ("contended counter", contended_counter),
    ];
    if let Ok(spec) = std::env::var("OCC_BENCH_PROFILE") {
        return profile(&spec, &workloads);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{TXS}-tx blocks, {runs} rounds (every cell once per round), {cores} cores; ms per block: median; \
         ratios: median of the rounds' ratios"
    );
    println!();
    println!(
        "| workload | revm transact_commit | sluice sequential (oracle) | sluice one journal | OCC 1 worker \
         | OCC 2 lanes | OCC 2 node default | revm / OCC2 node | revm / OCC2 lanes \
         | revm / OCC1 | revm x2 ceiling |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, make) in workloads {
        if only.as_deref().is_none_or(|o| name.contains(o)) {
            bench(name, make(), runs);
        }
    }
}
