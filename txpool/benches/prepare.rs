//! Block preparation and admission, measured against the cost of plain
//! sender recovery in the same run (the machine is shared and noisy: the
//! ratios hold, absolute times do not).
//!
//! `cargo bench -p sluice-txpool --bench prepare` (add `-- --txs N` to
//! change the block size, `-- --rounds N` for more repetitions).
//!
//! Every prepared transaction is asserted `Ready` with the right sender,
//! and every admitted one is asserted accepted.

use std::time::{Duration, Instant};

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use sluice_messages::{PreparedTx, RecoveredTx};
use sluice_txpool::{
    admit_stateless, max_cost, prepare_block_timed, recover_raw, AdmissionRules, Committed, MempoolShard,
    NonceBook, PoolCounters, PreparedTxCache, Signer,
};

/// The node binary's allocator, so that the numbers are the node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHAIN_ID: u64 = 31337;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `n` signed transfers from `n` distinct senders.
fn block(n: usize) -> (Vec<Bytes>, Vec<Address>) {
    let mut raws = Vec::with_capacity(n);
    let mut senders = Vec::with_capacity(n);
    for i in 0..n {
        let mut key = [0u8; 32];
        key[24..].copy_from_slice(&(i as u64 + 1).to_be_bytes());
        let s = Signer::from_bytes(&B256::from(key)).expect("valid key");
        raws.push(s.sign_raw(TypedTransaction::Eip1559(TxEip1559 {
            chain_id: CHAIN_ID,
            nonce: 0,
            gas_limit: 21_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(Address::repeat_byte(0xee)),
            value: U256::from(1),
            input: Bytes::new(),
            access_list: Default::default(),
        })));
        senders.push(s.address());
    }
    (raws, senders)
}

/// Best of `rounds` runs of `f`.
fn best(rounds: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..rounds).map(|_| f()).min().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let n = arg("--txs", 5000);
    let rounds = arg("--rounds", 5);
    let (raws, senders) = block(n);
    let recovered: Vec<RecoveredTx> =
        raws.iter().map(|r| recover_raw(r.clone()).expect("recovers")).collect();

    // Baseline: plain single-thread recovery of every transaction.
    let single = best(rounds, || {
        let t = Instant::now();
        for r in &raws {
            let tx = recover_raw(r.clone()).expect("recovers");
            std::hint::black_box(tx);
        }
        t.elapsed()
    });
    println!(
        "machine: {} cores; block of {n} EIP-1559 transfers; best of {rounds}",
        std::thread::available_parallelism().map_or(0, |p| p.get())
    );
    println!(
        "single-thread recovery: {:.2} ms/block ({:.1} us/tx)",
        ms(single),
        single.as_secs_f64() * 1e6 / n as f64
    );
    println!();
    println!("| cache | workers | ms/block | hash ms | lookup ms | recover ms | vs single-thread recovery |");
    println!("|---|---|---|---|---|---|---|");
    for (label, cached) in [("all hits", n), ("half hits", n / 2), ("all misses", 0)] {
        for workers in [1, 2] {
            let mut phases = None;
            let d = best(rounds, || {
                let cache = PreparedTxCache::new(n.max(1) * 2);
                for tx in &recovered[..cached] {
                    cache.insert(tx);
                }
                let t = Instant::now();
                let (txs, timings) = prepare_block_timed(&raws, &cache, CHAIN_ID, workers);
                let d = t.elapsed();
                for (tx, sender) in txs.iter().zip(&senders) {
                    assert!(matches!(tx, PreparedTx::Ready(r) if r.sender == *sender), "every tx prepared");
                }
                assert_eq!(timings.hits, cached);
                phases = Some(timings);
                d
            });
            let p = phases.unwrap_or_default();
            println!(
                "| {label} | {workers} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2}x |",
                ms(d),
                ms(p.hash),
                ms(p.lookup),
                ms(p.recover),
                d.as_secs_f64() / single.as_secs_f64()
            );
        }
    }
    let ideal = single / 2;
    println!();
    println!(
        "target: all misses, 2 workers <= 1.15 x (single / 2) = {:.2} ms; all hits <= 1.5 ms",
        ms(ideal) * 1.15
    );

    // Admission alone, no network: stateless checks + recovery, then the
    // serialized part (nonce reservation, pool capacity, shard, cache).
    let rules = AdmissionRules::new(CHAIN_ID, 150_000_000, 1_000_000_000);
    let stateless_one = best(rounds, || {
        let t = Instant::now();
        for r in &raws {
            std::hint::black_box(admit_stateless(r.clone(), &rules).expect("admitted"));
        }
        t.elapsed()
    });
    let serial = best(rounds, || {
        let mut book = NonceBook::new();
        let counters = PoolCounters::new(n as u64, u64::MAX);
        let cache = PreparedTxCache::new(n);
        let mut shard = MempoolShard::new();
        let t = Instant::now();
        for (seq, tx) in recovered.iter().enumerate() {
            let committed = Committed { nonce: 0, balance: U256::MAX };
            book.reserve(tx.sender, 0, max_cost(&tx.tx), committed, 16).expect("reserved");
            counters.try_acquire(tx.raw.len()).expect("room");
            cache.insert(tx);
            shard.push(tx.clone(), seq as u64).expect("pushed");
        }
        t.elapsed()
    });
    let two_thread = best(rounds, || {
        let t = Instant::now();
        std::thread::scope(|s| {
            for part in raws.chunks(n.div_ceil(2).max(1)) {
                let rules = &rules;
                s.spawn(move || {
                    for r in part {
                        std::hint::black_box(admit_stateless(r.clone(), rules).expect("admitted"));
                    }
                });
            }
        });
        t.elapsed()
    });
    let tps = |d: Duration| n as f64 / d.as_secs_f64();
    println!();
    println!("admission without network, {n} transfers:");
    println!("| path | tx/s |");
    println!("|---|---|");
    println!("| recovery limit, 1 core (single-thread recovery) | {:.0} |", tps(single));
    println!("| recovery limit, 2 cores | {:.0} |", 2.0 * tps(single));
    println!("| stateless checks + recovery, 1 thread | {:.0} |", tps(stateless_one));
    println!("| stateless checks + recovery, 2 threads | {:.0} |", tps(two_thread));
    println!("| serialized part alone (nonce, pool, cache, shard) | {:.0} |", tps(serial));
    let pipeline = tps(two_thread).min(tps(serial));
    println!(
        "| admission path, 2 threads + serial section | {:.0} ({:.0}% of the 2-core recovery limit) |",
        pipeline,
        100.0 * pipeline / (2.0 * tps(single))
    );
}
