//! Store tests on a real database in a temporary directory.

use std::sync::Arc;

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::{AccountChange, BlockHeader, ChangeSet, CodeChange, ExecutedBlock, SealedBlock};

use super::*;
use crate::{Genesis, GenesisAccount, SyncPolicy};

fn genesis(chain_id: u64) -> Genesis {
    let mut alloc = std::collections::BTreeMap::new();
    alloc.insert(
        Address::repeat_byte(1),
        GenesisAccount { balance: U256::from(1_000_000u64), ..Default::default() },
    );
    Genesis {
        chain_id,
        timestamp: 0,
        gas_limit: 30_000_000,
        base_fee: 7,
        coinbase: Address::ZERO,
        alloc,
        synthetic: Default::default(),
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn opts(dir: &std::path::Path, sync: SyncPolicy) -> DurableOptions {
    DurableOptions {
        dir: dir.to_path_buf(),
        spec: "prague".into(),
        sync,
        cache_blocks: 2,
        db_cache_bytes: 16 << 20,
        state_cache: crate::CacheBytes::default(),
        history_blocks: 0,
        fail_commit_at: 0,
        diverge_at: 0,
        network: String::new(),
    }
}

/// Block `n` moving `n` wei from account 1 to account 2 and writing a slot
/// and code at account 3.
fn block(parent: &StoredBlock, n: u64) -> ExecutedBlock {
    let header = BlockHeader {
        number: n,
        parent_hash: parent.block.hash,
        timestamp: n,
        coinbase: Address::ZERO,
        gas_limit: 30_000_000,
        base_fee: 7,
        tx_root: B256::repeat_byte(n as u8),
        state_ref: None,
    };
    let code = Bytes::from(vec![0x60, n as u8]);
    let changes = ChangeSet {
        accounts: vec![
            AccountChange {
                address: Address::repeat_byte(1),
                deleted: false,
                balance: U256::from(1_000_000 - n * (n + 1) / 2),
                nonce: n,
                code: None,
                storage_cleared: false,
                storage: vec![],
            },
            AccountChange {
                address: Address::repeat_byte(2),
                deleted: false,
                balance: U256::from(n * (n + 1) / 2),
                nonce: 0,
                code: None,
                storage_cleared: false,
                storage: vec![],
            },
            AccountChange {
                address: Address::repeat_byte(3),
                deleted: false,
                balance: U256::ZERO,
                nonce: 1,
                code: Some(CodeChange { hash: sluice_messages::keccak256(&code), code }),
                storage_cleared: true,
                storage: vec![(U256::from(n), U256::from(n * 10))],
            },
        ],
    };
    ExecutedBlock {
        block: Arc::new(SealedBlock { hash: header.hash(), header, txs: vec![] }),
        receipts: vec![],
        raw_index: vec![],
        skipped: vec![],
        gas_used: 21_000 * n,
        changes: Arc::new(changes),
        app_hash: B256::ZERO,
    }
}

fn build(store: &Store, blocks: u64) -> Vec<B256> {
    (1..=blocks)
        .map(|n| {
            let b = block(&store.head_block(), n);
            store.commit(&b).unwrap().app_hash
        })
        .collect()
}

#[test]
fn two_stores_fed_the_same_blocks_agree_on_every_app_hash() {
    let (a, b) = (Store::new(&genesis(1)), Store::new(&genesis(1)));
    assert_eq!(a.head_block().app_hash, b.head_block().app_hash);
    assert_eq!(build(&a, 5), build(&b, 5));
    let dir = temp_dir("agree");
    let durable = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert_eq!(durable.head_block().app_hash, Store::new(&genesis(1)).head_block().app_hash);
    assert_eq!(build(&durable, 5), build(&Store::new(&genesis(1)), 5));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn reopening_resumes_state_blocks_and_hashes_beyond_the_cache() {
    let dir = temp_dir("reopen");
    let hashes = {
        let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
        build(&store, 6)
    };
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert_eq!(store.head(), 6);
    assert_eq!(store.head_block().app_hash, hashes[5]);
    // Older than the two cached blocks: read from disk.
    assert_eq!(store.block(2).unwrap().app_hash, hashes[1]);
    assert_eq!(store.block_by_hash(&store.block(1).unwrap().block.hash).unwrap().block.header.number, 1);
    assert_eq!(store.account(&Address::repeat_byte(2)).unwrap().unwrap().balance, U256::from(21));
    // Storage was cleared at every block, so only the last slot remains.
    let three = Address::repeat_byte(3);
    assert_eq!(store.storage(&three, &U256::from(6)).unwrap(), U256::from(60));
    assert_eq!(store.storage(&three, &U256::from(5)).unwrap(), U256::ZERO);
    assert_eq!(store.code(&store.account(&three).unwrap().unwrap().code_hash).unwrap().as_ref(), &[0x60, 6]);
    // It continues the chain.
    let next = block(&store.head_block(), 7);
    assert!(store.commit(&next).is_ok());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn another_chain_and_out_of_order_blocks_are_refused() {
    let dir = temp_dir("other");
    drop(Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap());
    let err = Store::open(&genesis(2), &opts(&dir, SyncPolicy::EveryBlock)).err().unwrap();
    assert!(err.to_string().contains("belongs to chain id 1"), "{err}");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    let skip = block(&store.head_block(), 2);
    assert!(matches!(store.commit(&skip), Err(StoreError::OutOfOrder { expected: 1, got: 2 })));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_failed_commit_is_latched() {
    let dir = temp_dir("latch");
    let mut o = opts(&dir, SyncPolicy::EveryBlock);
    o.fail_commit_at = 2;
    let store = Store::open(&genesis(1), &o).unwrap();
    build(&store, 1);
    let b2 = block(&store.head_block(), 2);
    assert!(matches!(store.commit(&b2), Err(StoreError::Io(_))));
    assert!(store.halted().is_some());
    assert!(matches!(store.commit(&b2), Err(StoreError::Halted(_))), "every later commit fails");
    assert_eq!(store.head(), 1, "reads stay at the last good height");
    drop(store);
    // Nothing half-written: the data dir reopens at height 1.
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert_eq!(store.head(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn grouped_sync_reports_which_commits_reached_the_disk() {
    let dir = temp_dir("grouped");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryNBlocks(3))).unwrap();
    let synced: Vec<bool> = (1..=6)
        .map(|n| {
            let b = block(&store.head_block(), n);
            store.commit(&b).unwrap().synced
        })
        .collect();
    assert_eq!(synced, vec![false, false, true, false, false, true]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_damaged_database_is_refused_with_an_error_never_a_panic() {
    // redb panics on some of these (its allocator's assertions, page types
    // it cannot read); opening must turn every one into an error.
    let dir = temp_dir("damaged");
    drop(Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).map(|s| build(&s, 6)).unwrap());
    let path = dir.join(crate::db::DB_FILE);
    let good = std::fs::read(&path).unwrap();
    let (mut refused, mut opened) = (0, 0);
    let damaged = (0..good.len() / 4096)
        .map(|page| {
            let mut bad = good.clone();
            bad[page * 4096..][..4096].fill(0x5a);
            bad
        })
        .chain((1..8).map(|i| good[..good.len() * i / 8].to_vec()));
    for bad in damaged {
        std::fs::write(&path, &bad).unwrap();
        let opening =
            std::panic::catch_unwind(|| Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)));
        match opening.expect("opening a damaged file must not panic") {
            Err(StoreError::Corrupt(why)) => {
                assert!(why.contains("chain.redb"), "{why}");
                refused += 1;
            }
            Err(e) => panic!("damage is Corrupt, got {e}"),
            // A page the head's state never reads, or a free one.
            Ok(_) => opened += 1,
        }
    }
    assert!(refused > opened, "refused {refused}, opened {opened}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn close_makes_unsynced_commits_durable_and_frees_the_file() {
    // The node closes the store while other threads may still hold it.
    let dir = temp_dir("close");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryNBlocks(1000))).unwrap();
    let hashes = build(&store, 4);
    store.close().unwrap();
    assert!(matches!(store.commit(&block(&store.head_block(), 5)), Err(StoreError::Halted(_))));
    // The file is free (redb refuses a second open of a file still open)
    // and holds the four unsynced blocks.
    let again = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert_eq!(again.head(), 4);
    assert_eq!(again.head_block().app_hash, hashes[3]);
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_file_left_open_is_repaired_at_open_and_a_closed_one_is_not() {
    let (dir, copy) = (temp_dir("left-open"), temp_dir("left-open-copy"));
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert!(!store.repaired_at_open(), "a new file");
    build(&store, 3);
    // The file as a crash would leave it: still open.
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(dir.join(crate::db::DB_FILE), copy.join(crate::db::DB_FILE)).unwrap();
    let crashed = Store::open(&genesis(1), &opts(&copy, SyncPolicy::EveryBlock)).unwrap();
    assert!(crashed.repaired_at_open());
    assert_eq!(crashed.head(), 3, "every block was synced");
    store.close().unwrap();
    let reopened = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert!(!reopened.repaired_at_open());
    assert_eq!(reopened.head(), 3);
    for d in [dir, copy] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_page_damaged_under_an_open_store_fails_reads_never_with_a_panic() {
    // Opening reads the state and the recent blocks; older blocks are read
    // from the file when asked for (an RPC call), and redb panics on some
    // damage there too. Each page in turn is damaged under a freshly
    // opened store (its page cache holding only what opening read).
    let dir = temp_dir("damaged-open");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    build(&store, 12);
    let hashes: Vec<B256> = (1..=12).map(|n| store.block(n).unwrap().block.hash).collect();
    store.close().unwrap();
    drop(store);
    let path = dir.join(crate::db::DB_FILE);
    let good = std::fs::read(&path).unwrap();
    let (mut panics, mut failed, mut pages, mut reasons) = (0, 0, 0, Vec::new());
    for page in 0..good.len() / 4096 {
        std::fs::write(&path, &good).unwrap();
        // No page cache: every read goes to the file.
        let uncached = DurableOptions { db_cache_bytes: 0, ..opts(&dir, SyncPolicy::EveryBlock) };
        let store = Store::open(&genesis(1), &uncached).unwrap();
        {
            use std::io::{Seek, Write};
            let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.seek(std::io::SeekFrom::Start(page as u64 * 4096)).unwrap();
            file.write_all(&vec![0x5a; if std::env::var("ALL").is_ok() { good.len() } else { 4096 }])
                .unwrap();
        }
        pages += 1;
        let before = failed;
        for (i, hash) in hashes.iter().enumerate() {
            let n = i as u64 + 1;
            let reads = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (
                    store.block(n).map(|b| b.block.hash),
                    store.block_by_hash(hash).map(|b| b.block.header.number),
                )
            }));
            match reads {
                Err(_) => panics += 1,
                Ok((Some(h), Some(m))) if h == *hash && m == n => {}
                Ok(_) => failed += 1,
            }
        }
        // A failed read halts the store, with the reason.
        assert_eq!(store.halted().is_some(), failed > before, "{:?}", store.halted());
        reasons.extend(store.halted());
        drop(store);
    }
    // Unguarded, 40 reads panicked here (an unreachable page type in a
    // tree), and closing the store panicked on the first damaged page.
    assert_eq!(panics, 0, "{panics} reads panicked over {pages} damaged pages");
    assert!(failed > 0, "some damage must be found over {pages} pages");
    assert!(reasons.iter().any(|r| r.contains("chain.redb is damaged")), "{reasons:?}");
    let _ = std::fs::remove_dir_all(dir);
}
