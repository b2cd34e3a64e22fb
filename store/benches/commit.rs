//! Durable commit cost per 5,000-transfer block (sync on and off), bytes on
//! disk per transaction, and restart time and RSS with many funded
//! accounts.
//!
//! `cargo bench -p sluice-store --bench commit` (`-- --blocks N`,
//! `-- --accounts N` to change the sizes).

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::{AccountChange, BlockHeader, ChangeSet, ExecutedBlock, Log, Receipt, SealedBlock};
use sluice_store::{DurableOptions, Genesis, GenesisAccount, Store, StoredBlock, SyncPolicy};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn addr(i: u64) -> Address {
    let mut a = [0u8; 20];
    a[12..].copy_from_slice(&i.to_be_bytes());
    Address::from(a)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A block of `txs` transfers: sender `i` (nonce+1, balance-) pays recipient
/// `i + txs` (balance+); a 110-byte raw tx and a receipt per transfer.
fn transfer_block(parent: &StoredBlock, n: u64, txs: u64) -> ExecutedBlock {
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
    let mut accounts = Vec::with_capacity(2 * txs as usize);
    let mut receipts = Vec::with_capacity(txs as usize);
    let mut raws = Vec::with_capacity(txs as usize);
    for i in 0..txs {
        accounts.push(AccountChange {
            address: addr(i + 1),
            deleted: false,
            balance: U256::from(1_000_000_000_000_000_000u128 - u128::from(n) * 21_000_000_000_000),
            nonce: n,
            code: None,
            storage_cleared: false,
            storage: vec![],
        });
        accounts.push(AccountChange {
            address: addr(1_000_000_000 + n * txs + i),
            deleted: false,
            balance: U256::from(1),
            nonce: 0,
            code: None,
            storage_cleared: false,
            storage: vec![],
        });
        let hash = sluice_messages::keccak256(&[n.to_be_bytes(), i.to_be_bytes()].concat());
        raws.push(Bytes::from(vec![0x02; 110]));
        receipts.push(Receipt {
            tx_hash: hash,
            tx_type: 2,
            index: i as u32,
            from: addr(i + 1),
            to: Some(addr(1_000_000_000 + n * txs + i)),
            contract_address: None,
            success: true,
            gas_used: 21_000,
            cumulative_gas_used: 21_000 * (i + 1),
            effective_gas_price: 1_000_000_001,
            logs: Vec::<Log>::new(),
            output: Bytes::new(),
        });
    }
    accounts.sort_by_key(|a| a.address);
    ExecutedBlock {
        block: Arc::new(SealedBlock { hash: header.hash(), header, txs: raws }),
        raw_index: (0..txs as u32).collect(),
        receipts,
        skipped: vec![],
        gas_used: 21_000 * txs,
        changes: Arc::new(ChangeSet { accounts }),
        app_hash: B256::ZERO,
    }
}

fn genesis(accounts: u64) -> Genesis {
    let alloc: BTreeMap<Address, GenesisAccount> = (1..=accounts)
        .map(|i| (addr(i), GenesisAccount { balance: U256::from(10u128.pow(21)), ..Default::default() }))
        .collect();
    Genesis {
        chain_id: 31337,
        timestamp: 0,
        gas_limit: 150_000_000,
        base_fee: 1_000_000_000,
        coinbase: Address::ZERO,
        alloc,
        synthetic: Default::default(),
    }
}

fn opts(dir: &std::path::Path, sync: SyncPolicy) -> DurableOptions {
    DurableOptions {
        dir: dir.to_path_buf(),
        spec: "prague".into(),
        sync,
        cache_blocks: 64,
        db_cache_bytes: 256 << 20,
        state_cache: sluice_store::CacheBytes::default(),
        history_blocks: 0,
        fail_commit_at: 0,
        diverge_at: 0,
        network: String::new(),
    }
}

fn main() {
    let blocks = arg("--blocks", 10);
    let txs = arg("--txs", 5000);
    let accounts = arg("--accounts", 1_000_000);
    let base = std::env::temp_dir().join(format!("sluice-commit-bench-{}", std::process::id()));
    println!("commit of {blocks} blocks of {txs} transfers each ({} account changes per block)", 2 * txs);
    println!();
    println!("| sync | ms/block (mean) | ms/block (best) | bytes on disk per tx |");
    println!("|---|---|---|---|");
    for (label, sync) in [
        ("every block (fsync)", SyncPolicy::EveryBlock),
        ("off (grouped, 1 sync per 1000)", SyncPolicy::EveryNBlocks(1000)),
    ] {
        let dir = base.join(label.split(' ').next().unwrap_or("x"));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&genesis(txs), &opts(&dir, sync)).expect("open");
        let before = store.db_bytes();
        let mut times = Vec::new();
        for n in 1..=blocks {
            let block = transfer_block(&store.head_block(), n, txs);
            let t = Instant::now();
            store.commit(&block).expect("commit");
            times.push(t.elapsed());
        }
        let mean = times.iter().sum::<std::time::Duration>().as_secs_f64() * 1e3 / blocks as f64;
        let best = times.iter().min().map_or(0.0, |d| d.as_secs_f64() * 1e3);
        let per_tx = (store.db_bytes().saturating_sub(before)) as f64 / (blocks * txs) as f64;
        println!("| {label} | {mean:.1} | {best:.1} | {per_tx:.0} |");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    println!();
    let dir = base.join("million");
    let _ = std::fs::remove_dir_all(&dir);
    let g = genesis(accounts);
    let t = Instant::now();
    drop(Store::open(&g, &opts(&dir, SyncPolicy::EveryBlock)).expect("create"));
    let create = t.elapsed();
    let rss_before = rss_mib();
    let t = Instant::now();
    let store = Store::open(&g, &opts(&dir, SyncPolicy::EveryBlock)).expect("reopen");
    let restart = t.elapsed();
    assert_eq!(store.account_count() as u64, accounts, "every account restored");
    println!("| {accounts} funded accounts | value |");
    println!("|---|---|");
    println!("| genesis written (one transaction) | {:.2} s |", create.as_secs_f64());
    println!("| restart (open + load state + verify) | {:.2} s |", restart.as_secs_f64());
    println!("| database size | {:.0} MiB |", store.db_bytes() as f64 / 1048576.0);
    println!(
        "| RSS after restart (process, includes the genesis map) | {:.0} MiB (before open: {:.0} MiB) |",
        rss_mib(),
        rss_before
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&base);
}
