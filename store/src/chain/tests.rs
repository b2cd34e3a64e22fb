//! Store tests on a real database in a temporary directory.

use std::sync::Arc;

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::{AccountChange, BlockHeader, ChangeSet, CodeChange, ExecutedBlock, SealedBlock};

use super::*;
use crate::{Genesis, GenesisAccount, StateReader, SyncPolicy};

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
        db_limits: crate::DbLimits { cache_bytes: 16 << 20, write_buffer_bytes: 8 << 20, worker_threads: 1 },
        state_cache: crate::CacheBytes::default(),
        history_blocks: 0,
        block_retention_blocks: 0,
        address_index: false,
        fail_commit_at: 0,
        fail_read_at: 0,
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
fn the_genesis_hash_is_block_zeros_in_memory_and_after_a_reopen() {
    let memory = Store::new(&genesis(1));
    assert_eq!(memory.genesis_hash(), memory.block(0).unwrap().block.hash);
    assert_eq!(memory.genesis_hash(), genesis_sealed(&genesis(1)).0.hash);
    let dir = temp_dir("genesis-hash");
    let block0 = {
        let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
        build(&store, 3);
        store.block(0).unwrap().block.hash
    };
    // Reopened past its two cached blocks: the hash is not read back from
    // block 0 but recomputed, and must agree with what was written.
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert_eq!(store.genesis_hash(), block0);
    assert_eq!(store.genesis_hash(), memory.genesis_hash());
    let _ = std::fs::remove_dir_all(dir);
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
fn a_data_dir_of_the_older_engine_is_refused_by_name() {
    let dir = temp_dir("redb");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(crate::db::REDB_FILE), b"redb").unwrap();
    let Err(StoreError::Corrupt(why)) = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)) else {
        panic!("a redb data dir must be refused");
    };
    assert!(
        why.contains("chain.redb") && why.contains("older sluice") && why.contains("--data-dir"),
        "{why}"
    );
    assert!(!dir.join(crate::db::DB_DIR).exists(), "nothing written beside it");
    let Err(StoreError::Corrupt(why)) = crate::db::Db::open_existing(&dir) else {
        panic!("replay must refuse it too");
    };
    assert!(why.contains("chain.redb"), "{why}");
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
fn a_failed_read_answers_its_caller_and_never_halts() {
    // A read that fails with an I/O error (EMFILE under a connection flood,
    // a transient EIO) is reachable from RPC and gossip: it must answer
    // only that read, be counted, and leave the store committing.
    let dir = temp_dir("read-error");
    let mut o = opts(&dir, SyncPolicy::EveryBlock);
    o.fail_read_at = 2;
    let store = Store::open(&genesis(1), &o).unwrap();
    build(&store, 6);
    let two = {
        // Block 2 is older than the two cached blocks: read from disk.
        let b = block(&store.block(1).unwrap(), 2);
        b.block.hash
    };
    assert!(matches!(store.try_block(2), Err(StoreError::Io(_))), "the caller gets the error");
    assert!(store.block(2).is_none(), "the Option reader answers not found");
    assert!(matches!(store.try_block_by_hash(&two), Err(StoreError::Io(_))));
    assert_eq!(store.read_errors(), 3, "each failed read is counted");
    assert_eq!(store.halted(), None, "an I/O error of a read never halts the store");
    // Other reads and commits go on.
    assert_eq!(store.block(3).unwrap().block.header.number, 3);
    let next = block(&store.head_block(), 7);
    assert!(store.commit(&next).is_ok(), "commits go on after a failed read");
    assert_eq!(store.head(), 7);
    assert_eq!(store.read_errors(), 3);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn damage_found_by_a_read_still_halts() {
    // The other half of the rule: damage is not answered and forgotten.
    let dir = temp_dir("read-damage");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    build(&store, 4);
    let found: Result<Option<()>, StoreError> =
        store.read_disk(|_| Err(StoreError::Corrupt("a block that does not decode".into())));
    assert!(matches!(found, Err(StoreError::Corrupt(_))));
    assert!(store
        .halted()
        .is_some_and(|h| matches!(&h, Halt::Damaged { .. }) && h.to_string().contains("does not decode")));
    assert_eq!(store.read_errors(), 0, "damage is a halt, not a read error");
    let next = block(&store.head_block(), 5);
    assert!(matches!(store.commit(&next), Err(StoreError::Halted(_))));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_file_cache_takes_a_quarter_of_the_open_file_limit_at_most_fjalls_default() {
    use crate::db::{cached_files_within, FJALL_DEFAULT_CACHED_FILES};
    assert_eq!(cached_files_within(Some(1024)), 256);
    assert_eq!(cached_files_within(Some(256)), 64);
    assert_eq!(cached_files_within(Some(1 << 20)), FJALL_DEFAULT_CACHED_FILES);
    assert_eq!(cached_files_within(None), FJALL_DEFAULT_CACHED_FILES);
    assert_eq!(cached_files_within(Some(8)), 10, "fjall refuses fewer than 10");
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

/// Every file of the database in `dir`, with its contents.
fn db_files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    fn walk(p: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
        for e in std::fs::read_dir(p).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join(crate::db::DB_DIR), &mut out);
    out.sort();
    out
}

/// Puts the database in `dir` back to exactly `files` (opening and closing
/// it rewrites its version files).
fn restore(dir: &std::path::Path, files: &[(std::path::PathBuf, Vec<u8>)]) {
    let _ = std::fs::remove_dir_all(dir.join(crate::db::DB_DIR));
    for (path, bytes) in files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// The damage done to each file in turn: each of its first 16 pages of
/// 4 KiB (or the whole of a smaller file) flipped, then the file cut at
/// each eighth of what was written (a journal is preallocated: its first
/// 32 KiB hold what a short test wrote).
fn damage(good: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    let pages = good.len().div_ceil(4096).min(16);
    let flipped = (0..pages).map(move |page| {
        let mut bad = good.to_vec();
        bad[page * 4096..].iter_mut().take(4096).for_each(|b| *b ^= 0x5a);
        bad
    });
    let written = good.len().min(32 << 10);
    flipped.chain((1..8).map(move |e| good[..written * e / 8].to_vec()))
}

#[test]
fn a_damaged_database_is_refused_with_an_error_never_a_panic() {
    // Opening must turn every damage into an error or, where fjall drops a
    // damaged journal tail, open a chain that is a prefix of the real one.
    let dir = temp_dir("damaged");
    let hashes = {
        let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
        let hashes = build(&store, 6);
        store.close().unwrap();
        hashes
    };
    let files = db_files(&dir);
    let (mut refused, mut opened) = (0, 0);
    for (i, bad) in files.iter().enumerate().flat_map(|(i, (_, good))| damage(good).map(move |b| (i, b))) {
        restore(&dir, &files);
        std::fs::write(&files[i].0, &bad).unwrap();
        let opening =
            std::panic::catch_unwind(|| Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)));
        match opening.expect("opening a damaged database must not panic") {
            Err(StoreError::Corrupt(why)) => {
                assert!(why.contains(crate::db::DB_DIR), "{why}");
                refused += 1;
            }
            Err(e) => panic!("damage is Corrupt, got {e} ({})", files[i].0.display()),
            Ok(store) => {
                let head = store.head();
                assert!(head <= 6);
                if head > 0 {
                    assert_eq!(
                        store.head_block().app_hash,
                        hashes[head as usize - 1],
                        "a prefix of the chain"
                    );
                }
                opened += 1;
            }
        }
    }
    eprintln!("damaged database: refused {refused}, opened {opened}");
    assert!(refused > 0, "refused {refused}, opened {opened}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn close_makes_unsynced_commits_durable_and_frees_the_file() {
    // The node closes the store while other threads may still hold it.
    let dir = temp_dir("close");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryNBlocks(1000))).unwrap();
    let hashes = build(&store, 4);
    store.close().unwrap();
    assert!(matches!(store.commit(&block(&store.head_block(), 5)), Err(StoreError::Closed)));
    // The database is free (fjall refuses a second open of one still open)
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
    for (path, bytes) in db_files(&dir) {
        let to = copy.join(path.strip_prefix(&dir).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
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
    // Opening reads the recent blocks; older blocks are read from the
    // table files when asked for (an RPC call). Each page of each file in
    // turn is damaged under a freshly opened store (with no block cache,
    // every read goes to the files).
    let dir = temp_dir("damaged-open");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    build(&store, 12);
    let hashes: Vec<B256> = (1..=12).map(|n| store.block(n).unwrap().block.hash).collect();
    // Closing flushes every table to files.
    store.close().unwrap();
    drop(store);
    let files = db_files(&dir);
    let (mut panics, mut failed, mut pages, mut reasons) = (0, 0, 0, Vec::new());
    for (i, (path, good)) in files.iter().enumerate() {
        for page in 0..good.len().div_ceil(4096).min(16) {
            restore(&dir, &files);
            let uncached = DurableOptions {
                db_limits: crate::DbLimits { cache_bytes: 0, write_buffer_bytes: 8 << 20, worker_threads: 1 },
                ..opts(&dir, SyncPolicy::EveryBlock)
            };
            let store = Store::open(&genesis(1), &uncached).unwrap();
            let mut bad = good.clone();
            bad[page * 4096..].iter_mut().take(4096).for_each(|b| *b ^= 0x5a);
            std::fs::write(path, &bad).unwrap();
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
            let _ = i;
        }
    }
    assert_eq!(panics, 0, "{panics} reads panicked over {pages} damaged pages");
    assert!(failed > 0, "some damage must be found over {pages} pages");
    assert!(reasons.iter().any(|r| r.to_string().contains("corrupt store")), "{reasons:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn write_buffers_stay_within_the_configured_budget_on_an_existing_data_dir() {
    // fjall keeps the memtable size a table was created with: created with
    // 96 MiB of write buffers (8 MiB a table), reopened with 12 MiB (1 MiB
    // a table), the smaller budget must hold.
    let dir = temp_dir("write-buffers");
    let memory = |mib: u64| DurableOptions {
        db_limits: crate::DbLimits { cache_bytes: 1 << 20, write_buffer_bytes: mib << 20, worker_threads: 1 },
        ..opts(&dir, SyncPolicy::EveryNBlocks(1000))
    };
    Store::open(&genesis(1), &memory(96)).unwrap().close().unwrap();
    let store = Store::open(&genesis(1), &memory(12)).unwrap();
    let table = 1 << 20;
    for n in 1..=24 {
        // 256 KiB of raw transactions a block: 6 MiB in the blocks table.
        let mut b = block(&store.head_block(), n);
        let header = b.block.header.clone();
        b.block = Arc::new(SealedBlock {
            hash: b.block.hash,
            header,
            txs: vec![Bytes::from(vec![7u8; 256 << 10])],
        });
        store.commit(&b).unwrap();
        let disk = store.disk().unwrap();
        use fjall::AbstractTree;
        let active = disk.t.blocks.tree.active_memtable().size();
        assert!(active <= table, "block {n}: the blocks table buffers {active} B, over its {table} B");
    }
    // What was sealed is flushed to table files in the background.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.disk().unwrap().t.blocks.table_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "nothing flushed");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

/// A receipt of `from`'s transaction `index`, to `to` (a creation when
/// `None`, making `created`).
fn receipt(
    index: u32,
    from: Address,
    to: Option<Address>,
    created: Option<Address>,
) -> sluice_messages::Receipt {
    sluice_messages::Receipt {
        tx_hash: B256::repeat_byte(index as u8 + 1),
        tx_type: 2,
        index,
        from,
        to,
        contract_address: created,
        success: true,
        gas_used: 21_000,
        cumulative_gas_used: 21_000 * (u64::from(index) + 1),
        effective_gas_price: 7,
        logs: vec![],
        output: Bytes::new(),
    }
}

/// Commits blocks 1..=6 where `a` sends in blocks 1, 2 (twice), 4 and 6,
/// `b` receives `a`'s calls, `a` creates `c` in block 4, and `b` sends
/// to itself in block 5.
fn build_with_receipts(store: &Store, a: Address, b: Address, c: Address) {
    for n in 1..=6u64 {
        let mut executed = block(&store.head_block(), n);
        executed.receipts = match n {
            1 | 6 => vec![receipt(0, a, Some(b), None)],
            2 => vec![
                receipt(0, a, Some(b), None),
                receipt(1, Address::repeat_byte(9), Some(c), None),
                receipt(2, a, Some(b), None),
            ],
            4 => vec![receipt(0, a, None, Some(c))],
            5 => vec![receipt(0, b, Some(b), None)],
            _ => vec![],
        };
        executed.raw_index = (0..executed.receipts.len() as u32).collect();
        store.commit(&executed).unwrap();
    }
}

#[test]
fn the_address_index_lists_senders_recipients_and_created_contracts_by_page() {
    use crate::{AddressPage, AddressScan};
    let (a, b, c) = (Address::repeat_byte(0xa), Address::repeat_byte(0xb), Address::repeat_byte(0xc));
    let dir = temp_dir("address-index");
    let store = Store::open(
        &genesis(1),
        &DurableOptions { address_index: true, ..opts(&dir, SyncPolicy::EveryBlock) },
    )
    .unwrap();
    assert!(store.indexes_addresses());
    build_with_receipts(&store, a, b, c);
    let all = |addr: &Address, scan| store.address_transactions(addr, scan, 100).unwrap();
    let page = |found: &[(u64, u32)], more| AddressPage { found: found.to_vec(), more };
    // The sender, newest first and oldest first.
    assert_eq!(
        all(&a, AddressScan::Before(u64::MAX)),
        page(&[(6, 0), (4, 0), (2, 2), (2, 0), (1, 0)], false)
    );
    assert_eq!(all(&a, AddressScan::After(0)), page(&[(1, 0), (2, 0), (2, 2), (4, 0), (6, 0)], false));
    // A call's recipient (once for a transfer to itself), a created
    // contract and a contract called.
    assert_eq!(all(&b, AddressScan::After(0)), page(&[(1, 0), (2, 0), (2, 2), (5, 0), (6, 0)], false));
    assert_eq!(all(&c, AddressScan::After(0)), page(&[(2, 1), (4, 0)], false));
    assert_eq!(all(&Address::repeat_byte(0xd), AddressScan::After(0)), AddressPage::default());
    // Bounds are exclusive.
    assert_eq!(all(&a, AddressScan::Before(4)), page(&[(2, 2), (2, 0), (1, 0)], false));
    assert_eq!(all(&a, AddressScan::After(4)), page(&[(6, 0)], false));
    assert_eq!(all(&a, AddressScan::Before(1)), AddressPage::default());
    assert_eq!(all(&a, AddressScan::After(6)), AddressPage::default());
    // Pages: a block is never split, and `more` says whether rows are left.
    let scan = |scan, n| store.address_transactions(&a, scan, n).unwrap();
    assert_eq!(scan(AddressScan::Before(u64::MAX), 1), page(&[(6, 0)], true));
    assert_eq!(scan(AddressScan::Before(6), 2), page(&[(4, 0), (2, 2), (2, 0)], true), "block 2 finished");
    assert_eq!(scan(AddressScan::Before(2), 2), page(&[(1, 0)], false));
    assert_eq!(scan(AddressScan::After(0), 2), page(&[(1, 0), (2, 0), (2, 2)], true));
    assert_eq!(scan(AddressScan::After(2), 2), page(&[(4, 0), (6, 0)], false));
    assert_eq!(scan(AddressScan::After(0), 0), page(&[(1, 0)], true), "at least one");
    // Kept across a reopen.
    store.close().unwrap();
    let store = Store::open(
        &genesis(1),
        &DurableOptions { address_index: true, ..opts(&dir, SyncPolicy::EveryBlock) },
    )
    .unwrap();
    assert_eq!(
        store.address_transactions(&c, AddressScan::Before(u64::MAX), 10).unwrap(),
        page(&[(4, 0), (2, 1)], false)
    );
}

#[test]
fn nothing_is_indexed_while_the_address_index_is_off() {
    use crate::{AddressPage, AddressScan};
    let (a, b, c) = (Address::repeat_byte(0xa), Address::repeat_byte(0xb), Address::repeat_byte(0xc));
    let dir = temp_dir("address-index-off");
    let store = Store::open(&genesis(1), &opts(&dir, SyncPolicy::EveryBlock)).unwrap();
    assert!(!store.indexes_addresses());
    build_with_receipts(&store, a, b, c);
    for addr in [a, b, c] {
        assert_eq!(
            store.address_transactions(&addr, AddressScan::After(0), 100).unwrap(),
            AddressPage::default()
        );
    }
    // Turned on later: only blocks from then on are indexed.
    store.close().unwrap();
    let store = Store::open(
        &genesis(1),
        &DurableOptions { address_index: true, ..opts(&dir, SyncPolicy::EveryBlock) },
    )
    .unwrap();
    let mut executed = block(&store.head_block(), 7);
    executed.receipts = vec![receipt(0, a, Some(b), None)];
    executed.raw_index = vec![0];
    store.commit(&executed).unwrap();
    assert_eq!(
        store.address_transactions(&a, AddressScan::Before(u64::MAX), 100).unwrap(),
        AddressPage { found: vec![(7, 0)], more: false }
    );
    // A store without a database indexes nothing.
    let memory = Store::new(&genesis(1));
    assert!(!memory.indexes_addresses());
    assert_eq!(memory.address_transactions(&a, AddressScan::After(0), 10).unwrap(), AddressPage::default());
}
