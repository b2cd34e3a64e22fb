//! Randomized histories: every (account, slot, block) read through
//! `Store::state_at` equals the value recorded when that block was
//! committed, before and after a restart.

use std::{collections::BTreeMap, sync::Arc};

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::{AccountChange, BlockHeader, ChangeSet, CodeChange, ExecutedBlock, SealedBlock};

use crate::{
    chain::{DurableOptions, Store},
    Genesis, GenesisAccount, StateReader, StoreError, SyncPolicy, EMPTY_CODE_HASH,
};

/// What the model keeps per account: balance, nonce, code hash, storage.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    balance: U256,
    nonce: u64,
    code_hash: B256,
    storage: BTreeMap<U256, U256>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const ADDRESSES: u8 = 10;
const SLOTS: u64 = 5;

fn addr(i: u8) -> Address {
    Address::repeat_byte(i + 1)
}

/// A random change set over the model's accounts, applied to the model as
/// the store applies it (see `MemState::apply`).
fn random_changes(rng: &mut Rng, model: &mut BTreeMap<Address, Model>, n: u64) -> ChangeSet {
    let mut accounts = Vec::new();
    for i in 0..ADDRESSES {
        if rng.below(3) != 0 {
            continue;
        }
        let address = addr(i);
        let exists = model.contains_key(&address);
        let kind = rng.below(10);
        if exists && kind == 0 {
            // Deleted (EIP-161 or a self-destruct): storage goes with it.
            model.remove(&address);
            accounts.push(AccountChange {
                address,
                deleted: true,
                balance: U256::ZERO,
                nonce: 0,
                code: None,
                storage_cleared: false,
                storage: vec![],
            });
            continue;
        }
        // Created afresh (creation, or re-creation after a self-destruct).
        let fresh = kind == 1 || !exists;
        let code = (fresh && rng.below(2) == 0).then(|| {
            let code = Bytes::from(vec![0x60, n as u8, i]);
            CodeChange { hash: sluice_messages::keccak256(&code), code }
        });
        let mut storage: BTreeMap<U256, U256> = BTreeMap::new();
        for slot in 0..SLOTS {
            if rng.below(3) == 0 {
                // Zero sometimes: a slot cleared.
                let value = if rng.below(4) == 0 { U256::ZERO } else { U256::from(rng.below(1000) + 1) };
                storage.insert(U256::from(slot), value);
            }
        }
        let balance = U256::from(rng.below(1_000_000) + 1);
        let nonce = rng.below(50);
        let entry = model.entry(address).or_insert_with(|| Model {
            balance: U256::ZERO,
            nonce: 0,
            code_hash: EMPTY_CODE_HASH,
            storage: BTreeMap::new(),
        });
        if fresh {
            entry.storage.clear();
            entry.code_hash = code.as_ref().map_or(EMPTY_CODE_HASH, |c| c.hash);
        }
        entry.balance = balance;
        entry.nonce = nonce;
        for (k, v) in &storage {
            if v.is_zero() {
                entry.storage.remove(k);
            } else {
                entry.storage.insert(*k, *v);
            }
        }
        accounts.push(AccountChange {
            address,
            deleted: false,
            balance,
            nonce,
            code,
            storage_cleared: fresh,
            storage: storage.into_iter().collect(),
        });
    }
    ChangeSet { accounts }
}

fn executed(parent: &B256, n: u64, changes: ChangeSet) -> ExecutedBlock {
    let header = BlockHeader {
        number: n,
        parent_hash: *parent,
        timestamp: n,
        coinbase: Address::ZERO,
        gas_limit: 30_000_000,
        base_fee: 7,
        tx_root: B256::repeat_byte(n as u8),
        state_ref: None,
    };
    ExecutedBlock {
        block: Arc::new(SealedBlock { hash: header.hash(), header, txs: vec![] }),
        receipts: vec![],
        raw_index: vec![],
        skipped: vec![],
        gas_used: 0,
        changes: Arc::new(changes),
        app_hash: B256::ZERO,
    }
}

/// Commits blocks `blocks` of random changes, keeping the model's state
/// after each in `snapshots`.
fn commit_random(
    store: &Store,
    blocks: std::ops::RangeInclusive<u64>,
    rng: &mut Rng,
    model: &mut BTreeMap<Address, Model>,
    snapshots: &mut Vec<BTreeMap<Address, Model>>,
) {
    for n in blocks {
        let changes = random_changes(rng, model, n);
        store.commit(&executed(&store.head_block().block.hash, n, changes)).expect("commits");
        check_current(store, model, &format!("after block {n}"));
        snapshots.push(model.clone());
    }
}

/// Current state as the executor reads it (through the state cache, a
/// miss read from the database) equals the model.
fn check_current(store: &Store, model: &BTreeMap<Address, Model>, label: &str) {
    for i in 0..ADDRESSES {
        let address = addr(i);
        let want = model.get(&address);
        let got = store.account(&address).expect("reads");
        assert_eq!(
            got.map(|a| (a.balance, a.nonce, a.code_hash)),
            want.map(|m| (m.balance, m.nonce, m.code_hash)),
            "{label}: current account {address}"
        );
        if let Some(m) = want {
            if m.code_hash != EMPTY_CODE_HASH {
                assert_eq!(
                    sluice_messages::keccak256(&store.code(&m.code_hash).expect("reads")),
                    m.code_hash
                );
            }
        }
        for slot in 0..SLOTS {
            let slot = U256::from(slot);
            let want = want.and_then(|m| m.storage.get(&slot)).copied().unwrap_or_default();
            assert_eq!(
                store.storage(&address, &slot).expect("reads"),
                want,
                "{label}: current slot {slot} of {address}"
            );
        }
    }
}

fn check(store: &Store, snapshots: &[BTreeMap<Address, Model>], label: &str) {
    let all: Vec<_> = snapshots.iter().cloned().enumerate().map(|(n, s)| (n as u64, s)).collect();
    check_blocks(store, &all, label);
}

fn check_blocks(store: &Store, snapshots: &[(u64, BTreeMap<Address, Model>)], label: &str) {
    for (n, snapshot) in snapshots {
        let state = store.state_at(*n).expect("retained");
        for i in 0..ADDRESSES {
            let address = addr(i);
            let want = snapshot.get(&address);
            let got = state.account(&address).expect("reads");
            assert_eq!(
                got.map(|a| (a.balance, a.nonce, a.code_hash)),
                want.map(|m| (m.balance, m.nonce, m.code_hash)),
                "{label}: account {address} at block {n}"
            );
            for slot in 0..SLOTS {
                let slot = U256::from(slot);
                let want = want.and_then(|m| m.storage.get(&slot)).copied().unwrap_or_default();
                let got = state.storage(&address, &slot).expect("reads");
                assert_eq!(got, want, "{label}: slot {slot} of {address} at block {n}");
            }
        }
    }
}

/// Four funded accounts with five slots each, as genesis and as the model.
fn start() -> (Genesis, BTreeMap<Address, Model>) {
    let mut alloc = BTreeMap::new();
    let mut model = BTreeMap::new();
    for i in 0..4 {
        let storage: BTreeMap<U256, U256> =
            (0..SLOTS).map(|s| (U256::from(s), U256::from(100 + s))).collect();
        let account = GenesisAccount { balance: U256::from(5_000u64), nonce: 1, code: Bytes::new(), storage };
        model.insert(
            addr(i),
            Model {
                balance: account.balance,
                nonce: 1,
                code_hash: EMPTY_CODE_HASH,
                storage: account.storage.clone(),
            },
        );
        alloc.insert(addr(i), account);
    }
    (
        Genesis {
            chain_id: 7,
            timestamp: 0,
            gas_limit: 30_000_000,
            base_fee: 7,
            coinbase: Address::ZERO,
            alloc,
            synthetic: Default::default(),
        },
        model,
    )
}

fn options(dir: &std::path::Path, history_blocks: u64) -> DurableOptions {
    DurableOptions {
        dir: dir.to_path_buf(),
        spec: "prague".into(),
        sync: SyncPolicy::EveryNBlocks(8),
        cache_blocks: 2,
        db_limits: crate::DbLimits { cache_bytes: 16 << 20, write_buffer_bytes: 8 << 20, worker_threads: 1 },
        state_cache: crate::CacheBytes::default(),
        history_blocks,
        block_retention_blocks: 0,
        address_index: false,
        fail_commit_at: 0,
        fail_read_at: 0,
        diverge_at: 0,
        network: String::new(),
    }
}

/// Rows in the two history tables.
fn history_rows(dir: &std::path::Path) -> u64 {
    let (db, _, _) = crate::db::Db::open_existing(dir).expect("opens");
    // Rows below the window leave at compaction (crate::prune).
    db.t.account_history.major_compact().expect("compacts");
    db.t.storage_history.major_compact().expect("compacts");
    let accounts = db.t.account_history.len().expect("len") as u64;
    let storage = db.t.storage_history.len().expect("len") as u64;
    accounts + storage
}

#[test]
fn a_history_window_keeps_the_last_blocks_and_refuses_older_ones() {
    let dir = std::env::temp_dir().join(format!("sluice-history-window-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (genesis, mut model) = start();
    let mut rng = Rng(77);
    let mut snapshots = vec![model.clone()];
    let mut rows = Vec::new();
    {
        let store = Store::open(&genesis, &options(&dir, 5)).expect("opens");
        commit_random(&store, 1..=60, &mut rng, &mut model, &mut snapshots);
        // The last 5 blocks and the head answer exactly; older ones are
        // refused naming the oldest kept.
        let kept: Vec<_> = (55..=60).map(|n| (n, snapshots[n as usize].clone())).collect();
        check_blocks(&store, &kept, "window of 5");
        match store.state_at(54) {
            Err(StoreError::StateUnavailable { block: 54, oldest: 55 }) => {}
            other => panic!("{:?}", other.map(|s| s.block())),
        }
        store.close().expect("closes");
        rows.push(history_rows(&dir));
    }
    {
        // Reopened with a longer chain behind it, the window still holds,
        // and the history stays as small as the window.
        let store = Store::open(&genesis, &options(&dir, 5)).expect("reopens");
        commit_random(&store, 61..=120, &mut rng, &mut model, &mut snapshots);
        let kept: Vec<_> = (115..=120).map(|n| (n, snapshots[n as usize].clone())).collect();
        check_blocks(&store, &kept, "window of 5, reopened");
        assert!(store.state_at(114).is_err());
        store.close().expect("closes");
        rows.push(history_rows(&dir));
    }
    // Each block records at most 10 accounts and their slots: the rows of
    // a 5-block window stay far below 60 blocks' worth, and do not grow.
    assert!(rows[1] <= rows[0] + 40 && rows[1] < 6 * 10 * (1 + SLOTS), "{rows:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_read_at_every_block_equals_what_was_committed_then() {
    for seed in 1..=4u64 {
        let dir = std::env::temp_dir().join(format!("sluice-history-{seed}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let (genesis, mut model) = start();
        let mut opts = options(&dir, 0);
        if seed % 2 == 1 {
            // A cache of a few entries: most reads miss and evict.
            opts.state_cache = crate::CacheBytes { accounts: 300, storage: 300, code: 300 };
        }
        let mut snapshots = vec![model.clone()];
        {
            let store = Store::open(&genesis, &opts).expect("opens");
            commit_random(&store, 1..=40, &mut rng, &mut model, &mut snapshots);
            check(&store, &snapshots, &format!("seed {seed}"));
            assert!(
                store.state_at(41).is_ok(),
                "a block past the head is the caller's to refuse (header not found)"
            );
            store.close().expect("closes");
        }
        let store = Store::open(&genesis, &opts).expect("reopens");
        check(&store, &snapshots, &format!("seed {seed}, after a restart"));
        check_current(&store, &model, &format!("seed {seed}, after a restart"));
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_store_without_a_database_serves_its_head_only() {
    let (genesis, _) = start();
    let store = Store::new(&genesis);
    let mut model = BTreeMap::new();
    let changes = random_changes(&mut Rng(3), &mut model, 1);
    store.commit(&executed(&store.head_block().block.hash, 1, changes)).expect("commits");
    match store.state_at(0) {
        Err(StoreError::StateUnavailable { block: 0, oldest: 1 }) => {}
        other => panic!("{:?}", other.map(|s| s.block())),
    }
    let err = store.state_at(0).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.starts_with("missing trie node"), "{err}");
}

/// Readers hammering current state while blocks commit never leave a
/// stale value in the cache: once the commits are done, every read equals
/// the last block's state.
#[test]
fn reads_racing_commits_leave_no_stale_value() {
    let dir = std::env::temp_dir().join(format!("sluice-cache-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (genesis, mut model) = start();
    let mut opts = options(&dir, 0);
    opts.state_cache = crate::CacheBytes { accounts: 600, storage: 600, code: 600 };
    let store = Arc::new(Store::open(&genesis, &opts).expect("opens"));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, done) = (Arc::clone(&store), Arc::clone(&done));
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    for i in 0..ADDRESSES {
                        let _ = store.account(&addr(i));
                        let _ = store.storage(&addr(i), &U256::from(u64::from(i) % SLOTS));
                    }
                }
            })
        })
        .collect();
    let mut rng = Rng(0x5eed);
    for n in 1..=300 {
        let changes = random_changes(&mut rng, &mut model, n);
        store.commit(&executed(&store.head_block().block.hash, n, changes)).expect("commits");
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    check_current(&store, &model, "after racing reads");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
