//! Commit cost as the state grows: one synced commit per block of 3,400
//! transfers from existing accounts to fresh recipients, on states of
//! 10k, 2M and 10M accounts, side by side in one run.
//!
//! `cargo bench -p sluice-store --bench commit` (`-- --sizes 10000,2000000
//! --blocks 200 --txs 3400 --sync-every 1 --workers 1` to change them;
//! `--workers 2,1` runs each size with both worker counts, side by side;
//! `--address-index 0,1` each without and with `store.address_index`;
//! `--prune 0,1` each in archive mode and in full mode, keeping
//! `--retention 256` blocks and `--history 128` blocks of state: run more
//! blocks than the retention to time commits that prune).
//!
//! Before each timed commit the block's senders and recipients are read
//! through the store (untimed), as the executor reads them before the
//! committer writes: the commit then finds them in the state cache, as it
//! does in the node. Reported per size: commit p50 / p99 / max, the mean of
//! the first and last tenth of the run, bytes the process wrote per
//! transfer (the journal, table files, compactions) and disk used per
//! transfer once the store is closed (memtables flushed).

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::{
    synthetic_address, AccountChange, BlockHeader, ChangeSet, ExecutedBlock, Log, Receipt, SealedBlock,
};
use sluice_store::{DurableOptions, Genesis, StateReader, Store, StoredBlock, SyncPolicy, Synthetic};

/// The node binary's allocator, so that the numbers are the node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BALANCE: u128 = 1_000_000_000_000_000_000_000;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or(default.into())
}

fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("write_bytes:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| {
                let path = e.path();
                if path.is_dir() {
                    dir_bytes(&path)
                } else {
                    e.metadata().map_or(0, |m| m.len())
                }
            })
            .sum()
    })
}

/// A fresh recipient, never an existing account.
fn fresh(n: u64, i: u64, txs: u64) -> Address {
    let mut a = [0xfeu8; 20];
    a[12..].copy_from_slice(&(n * txs + i).to_be_bytes());
    Address::from(a)
}

/// Block `n`: synthetic accounts in turn pay fresh recipients.
fn transfer_block(parent: &StoredBlock, n: u64, txs: u64, accounts: u64) -> ExecutedBlock {
    let header = BlockHeader {
        number: n,
        parent_hash: parent.block.hash,
        timestamp: n,
        coinbase: Address::ZERO,
        gas_limit: 150_000_000,
        base_fee: 1_000_000_000,
        tx_root: B256::repeat_byte(n as u8),
        state_ref: None,
    };
    let mut changes = Vec::with_capacity(2 * txs as usize);
    let mut receipts = Vec::with_capacity(txs as usize);
    let mut raws = Vec::with_capacity(txs as usize);
    for i in 0..txs {
        let k = (n - 1) * txs + i;
        let from = synthetic_address(k % accounts);
        let to = fresh(n, i, txs);
        let nonce = k / accounts + 1;
        changes.push(AccountChange {
            address: from,
            deleted: false,
            balance: U256::from(BALANCE - u128::from(nonce) * 21_000_000_000_001),
            nonce,
            code: None,
            storage_cleared: false,
            storage: vec![],
        });
        changes.push(AccountChange {
            address: to,
            deleted: false,
            balance: U256::from(1),
            nonce: 0,
            code: None,
            storage_cleared: false,
            storage: vec![],
        });
        raws.push(Bytes::from(vec![0x02; 110]));
        receipts.push(Receipt {
            tx_hash: sluice_messages::keccak256(&[n.to_be_bytes(), i.to_be_bytes()].concat()),
            tx_type: 2,
            index: i as u32,
            from,
            to: Some(to),
            contract_address: None,
            success: true,
            gas_used: 21_000,
            cumulative_gas_used: 21_000 * (i + 1),
            effective_gas_price: 1_000_000_001,
            logs: Vec::<Log>::new(),
            output: Bytes::new(),
        });
    }
    changes.sort_by_key(|a| a.address);
    ExecutedBlock {
        block: Arc::new(SealedBlock { hash: header.hash(), header, txs: raws }),
        raw_index: (0..txs as u32).collect(),
        receipts,
        skipped: vec![],
        gas_used: 21_000 * txs,
        changes: Arc::new(ChangeSet { accounts: changes }),
        app_hash: B256::ZERO,
    }
}

fn genesis(accounts: u64) -> Genesis {
    Genesis {
        chain_id: 31337,
        timestamp: 0,
        gas_limit: 150_000_000,
        base_fee: 1_000_000_000,
        coinbase: Address::ZERO,
        alloc: BTreeMap::new(),
        synthetic: Synthetic { count: accounts, balance: U256::from(BALANCE) },
    }
}

/// The node's defaults (config/default.toml), syncing every `sync_every`
/// blocks, with `workers` background threads in the database.
fn opts(
    dir: &std::path::Path,
    sync_every: u32,
    workers: usize,
    address_index: bool,
    prune: Prune,
) -> DurableOptions {
    DurableOptions {
        dir: dir.to_path_buf(),
        spec: "prague".into(),
        sync: if sync_every <= 1 { SyncPolicy::EveryBlock } else { SyncPolicy::EveryNBlocks(sync_every) },
        cache_blocks: 128,
        db_limits: sluice_store::DbLimits {
            cache_bytes: 256 << 20,
            write_buffer_bytes: 128 << 20,
            worker_threads: workers,
        },
        state_cache: sluice_store::CacheBytes::default(),
        history_blocks: prune.history,
        block_retention_blocks: prune.blocks,
        address_index,
        fail_commit_at: 0,
        fail_read_at: 0,
        diverge_at: 0,
        network: String::new(),
    }
}

/// The windows a run keeps (0: all, archive mode).
#[derive(Clone, Copy)]
struct Prune {
    blocks: u64,
    history: u64,
}

fn ms(d: &std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let blocks: u64 = arg("--blocks", "200").parse().expect("--blocks N");
    let txs: u64 = arg("--txs", "3400").parse().expect("--txs N");
    let sync_every: u32 = arg("--sync-every", "1").parse().expect("--sync-every N");
    let sizes: Vec<u64> = arg("--sizes", "10000,2000000,10000000")
        .split(',')
        .map(|s| s.parse().expect("--sizes N,N,..."))
        .collect();
    let workers: Vec<usize> =
        arg("--workers", "1").split(',').map(|s| s.parse().expect("--workers N,N,...")).collect();
    let indexes: Vec<bool> = arg("--address-index", "0")
        .split(',')
        .map(|s| s.parse::<u8>().expect("--address-index 0,1") == 1)
        .collect();
    let retention: u64 = arg("--retention", "256").parse().expect("--retention N");
    let history: u64 = arg("--history", "128").parse().expect("--history N");
    let prunes: Vec<Prune> = arg("--prune", "0")
        .split(',')
        .map(|s| match s.parse::<u8>().expect("--prune 0,1") {
            0 => Prune { blocks: 0, history: 0 },
            _ => Prune { blocks: retention, history },
        })
        .collect();
    let base = std::env::temp_dir().join(format!("sluice-commit-bench-{}", std::process::id()));
    println!(
        "one commit per block of {txs} transfers to fresh recipients, synced every {sync_every} blocks, {blocks} blocks per size"
    );
    println!();
    println!("| accounts at start | db workers | address index | kept | p50 ms | p99 ms | max ms | first / last tenth ms | last / first | written per transfer | disk per transfer |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let runs = sizes.iter().flat_map(|&a| workers.iter().map(move |&w| (a, w)));
    let runs = runs.flat_map(|(a, w)| indexes.iter().map(move |&i| (a, w, i)));
    for (accounts, workers, index, prune) in
        runs.flat_map(|(a, w, i)| prunes.iter().map(move |&p| (a, w, i, p)))
    {
        let dir = base.join(accounts.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        let store =
            Store::open(&genesis(accounts), &opts(&dir, sync_every, workers, index, prune)).expect("open");
        let disk_before = dir_bytes(&dir);
        let written_before = write_bytes();
        let mut times = Vec::with_capacity(blocks as usize);
        for n in 1..=blocks {
            let block = transfer_block(&store.head_block(), n, txs, accounts);
            // What the executor reads before the commit (untimed).
            for c in &block.changes.accounts {
                let _ = store.account(&c.address);
            }
            let t = Instant::now();
            store.commit(&block).expect("commit");
            times.push(t.elapsed());
        }
        let written = write_bytes() - written_before;
        store.close().expect("close");
        drop(store);
        let disk = dir_bytes(&dir).saturating_sub(disk_before);
        let tenth = (blocks as usize / 10).max(1);
        let mean = |s: &[std::time::Duration]| s.iter().map(ms).sum::<f64>() / s.len() as f64;
        let (first, last) = (mean(&times[..tenth]), mean(&times[times.len() - tenth..]));
        let mut sorted = times.clone();
        sorted.sort();
        let pct = |p: f64| ms(&sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]);
        let transfers = (blocks * txs) as f64;
        println!(
            "| {accounts} | {workers} | {} | {} | {:.1} | {:.1} | {:.1} | {first:.1} / {last:.1} | {:.2}x | {:.0} B | {:.0} B |",
            if index { "on" } else { "off" },
            if prune.blocks == 0 { "all".to_string() } else { format!("{} blocks, {} of state", prune.blocks, prune.history) },
            pct(0.50),
            pct(0.99),
            pct(1.0),
            last / first,
            written as f64 / transfers,
            disk as f64 / transfers,
        );
        let tenths: Vec<String> = times.chunks(tenth).map(|c| format!("{:.0}", mean(c))).collect();
        eprintln!(
            "{accounts} accounts, {workers} db workers, address index {index}, kept {}: mean ms per tenth of the run: {}",
            prune.blocks,
            tenths.join(" ")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&base);
}
