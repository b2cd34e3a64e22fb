//! Block retention on a real database: what is refused, what is kept,
//! what leaves the disk, and which windows a pruned data dir accepts.

use std::sync::Arc;

use alloy_primitives::{keccak256, Address, B256, U256};
use fjall::Readable;
use sluice_messages::{AccountChange, BlockHeader, ChangeSet, ExecutedBlock, Receipt, SealedBlock};

use super::*;
use crate::{AddressScan, DurableOptions, Genesis, GenesisAccount, Store, StoreError, SyncPolicy};

#[test]
fn heights_are_read_where_each_table_keeps_them() {
    assert!(matches!(height_at("blocks"), Some(HeightAt::Key(0))));
    assert!(matches!(height_at("address_txs"), Some(HeightAt::Key(20))));
    assert!(matches!(height_at("tx_index"), Some(HeightAt::Value(0))));
    assert!(matches!(height_at("account_history"), Some(HeightAt::Key(20))));
    assert!(matches!(height_at("storage_history"), Some(HeightAt::Key(52))));
    assert!(height_at("accounts").is_none() && height_at("storage").is_none());
    assert!(is_history("storage_history") && !is_history("blocks"));
    assert_eq!(height(&7u64.to_be_bytes(), 0), Some(7));
    assert_eq!(height(&[1, 2, 3], 0), None);
}

#[test]
fn narrowing_is_allowed_and_widening_a_pruned_dir_is_not() {
    let had = Windows { blocks: 1000, history: 100 };
    // Nothing pruned yet: any window.
    assert!(widening(had, Windows { blocks: 0, history: 0 }, 0, 0).is_none());
    // Narrower or equal: fine.
    assert!(widening(had, Windows { blocks: 500, history: 50 }, 10, 10).is_none());
    assert!(widening(had, had, 10, 10).is_none());
    let why = widening(had, Windows { blocks: 2000, history: 100 }, 10, 0).expect("refused");
    assert!(why.contains("keeps blocks from 10 on") && why.contains("at most 1000"), "{why}");
    let why = widening(had, Windows { blocks: 0, history: 100 }, 10, 0).expect("refused");
    assert!(why.contains("all (archive mode)"), "{why}");
    let why = widening(had, Windows { blocks: 1000, history: 200 }, 0, 5).expect("refused");
    assert!(why.contains("state from block 5"), "{why}");
}

const SENDER: Address = Address::repeat_byte(0xa);

fn genesis() -> Genesis {
    let mut alloc = std::collections::BTreeMap::new();
    alloc.insert(SENDER, GenesisAccount { balance: U256::from(u64::MAX), ..Default::default() });
    Genesis {
        chain_id: 1,
        timestamp: 0,
        gas_limit: 30_000_000,
        base_fee: 7,
        coinbase: Address::ZERO,
        alloc,
        synthetic: Default::default(),
    }
}

fn opts(dir: &std::path::Path, blocks: u64, history: u64) -> DurableOptions {
    DurableOptions {
        dir: dir.to_path_buf(),
        spec: "osaka".into(),
        sync: SyncPolicy::EveryNBlocks(4),
        cache_blocks: 2,
        db_limits: crate::DbLimits { cache_bytes: 16 << 20, write_buffer_bytes: 8 << 20, worker_threads: 1 },
        state_cache: crate::CacheBytes::default(),
        history_blocks: history,
        block_retention_blocks: blocks,
        address_index: true,
        fail_commit_at: 0,
        fail_read_at: 0,
        diverge_at: 0,
        network: String::new(),
    }
}

/// The hash of block `n`'s one transaction.
fn tx(n: u64) -> B256 {
    keccak256(n.to_be_bytes())
}

/// Commits blocks `from..=to`, each with one transaction from [`SENDER`]
/// to a fresh address (its receipt indexes both).
fn commit(store: &Store, from: u64, to: u64) {
    for n in from..=to {
        let parent = store.head_block();
        let header = BlockHeader {
            number: n,
            parent_hash: parent.block.hash,
            timestamp: n,
            coinbase: Address::ZERO,
            gas_limit: 30_000_000,
            base_fee: 7,
            tx_root: tx(n),
            state_ref: None,
        };
        let to = Address::from_word(tx(n));
        let receipt = Receipt {
            tx_hash: tx(n),
            tx_type: 2,
            index: 0,
            from: SENDER,
            to: Some(to),
            contract_address: None,
            success: true,
            gas_used: 21_000,
            cumulative_gas_used: 21_000,
            effective_gas_price: 7,
            logs: vec![],
            output: Default::default(),
        };
        let change = |address, balance, nonce| AccountChange {
            address,
            deleted: false,
            balance,
            nonce,
            code: None,
            storage_cleared: false,
            storage: vec![],
        };
        let changes = ChangeSet {
            accounts: vec![change(SENDER, U256::from(u64::MAX - n), n), change(to, U256::from(1), 0)],
        };
        let executed = ExecutedBlock {
            block: Arc::new(SealedBlock { hash: header.hash(), header, txs: vec![Default::default()] }),
            receipts: vec![receipt],
            raw_index: vec![0],
            skipped: vec![],
            gas_used: 21_000,
            changes: Arc::new(changes),
            app_hash: B256::ZERO,
        };
        store.commit(&executed).expect("commits");
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-prune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Rows of `table` whose height (read as its filter reads it) is below
/// `floor`.
fn rows_below(db: &crate::db::Db, table: &fjall::Keyspace, floor: u64) -> usize {
    let at = height_at(table.name().as_ref()).expect("a pruned table");
    let snap = db.db.snapshot();
    snap.iter(table)
        .filter_map(|row| {
            let (k, v) = row.into_inner().expect("reads");
            let h = match at {
                HeightAt::Key(o) => height(&k, o),
                HeightAt::Value(o) => height(&v, o),
            };
            h.filter(|&h| h < floor)
        })
        .count()
}

#[test]
fn a_full_store_refuses_pruned_blocks_and_compaction_removes_them() {
    let dir = temp_dir("window");
    let (blocks, head) = (300, 1_500u64);
    let oldest = head + 1 - blocks;
    {
        let store = Store::open(&genesis(), &opts(&dir, blocks, 50)).expect("opens");
        commit(&store, 1, head);
        assert_eq!(store.oldest_block(), oldest);
        // Below the window: geth's words with both heights; at and above
        // it: the block.
        match store.try_block(oldest - 1) {
            Err(e @ StoreError::HistoryPruned { .. }) => {
                let why = e.to_string();
                assert!(why.starts_with("pruned history unavailable"), "{why}");
                assert!(why.contains(&format!("block {}", oldest - 1)) && why.contains(&oldest.to_string()));
            }
            other => panic!("{:?}", other.map(|b| b.map(|b| b.block.header.number))),
        }
        assert!(matches!(store.try_block(3), Err(StoreError::HistoryPruned { block: 3, .. })));
        assert_eq!(store.try_block(oldest).expect("reads").expect("kept").block.header.number, oldest);
        // A pruned block by hash is pruned too; its transaction unknown.
        let old_hash = store.try_block(oldest).unwrap().unwrap().block.header.parent_hash;
        assert!(matches!(store.try_block_by_hash(&old_hash), Err(StoreError::HistoryPruned { .. })));
        assert!(store.try_transaction(&tx(5)).expect("reads").is_none());
        assert!(store.try_transaction(&tx(oldest - 1)).expect("reads").is_none());
        assert_eq!(
            store.try_transaction(&tx(oldest)).expect("reads").expect("kept").0.block.header.number,
            oldest
        );
        // The address index answers only kept blocks, from either end.
        let back = store.address_transactions(&SENDER, AddressScan::Before(u64::MAX), 10_000).unwrap();
        assert_eq!(back.found.len() as u64, blocks);
        assert!(!back.more && back.found.iter().all(|&(b, _)| b >= oldest));
        let forward = store.address_transactions(&SENDER, AddressScan::After(0), 5).unwrap();
        assert_eq!(forward.found.first(), Some(&(oldest, 0)));
        assert!(forward.more);
        // The state window is its own (50), the blocks' is wider.
        assert_eq!(store.oldest_state().unwrap(), head - 50);
        store.close().expect("closes");
    }
    // Every pruned table, compacted: nothing below the floor is left.
    let (db, _, _) = crate::db::Db::open_existing(&dir).expect("opens");
    let t = &db.t;
    let pruned = [&t.blocks, &t.results, &t.changes, &t.vault, &t.block_by_hash, &t.tx_index, &t.address_txs];
    assert!(pruned.iter().all(|ks| rows_below(&db, ks, oldest) > 0), "rows are there before compaction");
    for ks in pruned {
        ks.major_compact().expect("compacts");
        assert_eq!(rows_below(&db, ks, oldest), 0, "{} keeps rows below {oldest}", ks.name());
    }
    // The state history's rows recorded up to the oldest block with state
    // served older reads only: gone too; the window's are all there.
    let state_from = head - 50;
    assert!(rows_below(&db, &t.account_history, state_from + 1) > 0, "history rows before compaction");
    t.account_history.major_compact().expect("compacts");
    assert_eq!(rows_below(&db, &t.account_history, state_from + 1), 0);
    // Two accounts change per block: 50 blocks' rows are left.
    assert_eq!(t.account_history.len().unwrap() as u64, 2 * 50);
    // Kept rows are all there: blocks, and one tx per block.
    assert_eq!(t.blocks.len().unwrap() as u64, blocks);
    assert_eq!(t.tx_index.len().unwrap() as u64, blocks);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pruned_data_dir_may_narrow_its_windows_but_never_widen_them() {
    let dir = temp_dir("windows");
    {
        let store = Store::open(&genesis(), &opts(&dir, 300, 20)).expect("opens");
        commit(&store, 1, 400);
        store.close().expect("closes");
    }
    let refused = |blocks, history| match Store::open(&genesis(), &opts(&dir, blocks, history)) {
        Err(StoreError::Corrupt(why)) => why,
        Ok(_) => panic!("a window of {blocks} blocks, {history} of state, was accepted"),
        Err(e) => panic!("{e}"),
    };
    let why = refused(500, 20);
    assert!(why.contains("cannot come back") && why.contains("at most 300"), "{why}");
    assert!(refused(0, 20).contains("archive mode"));
    assert!(refused(300, 0).contains("store.history_blocks"));
    assert!(refused(300, 40).contains("state from block"));
    // Narrower: accepted, and the next commit prunes further.
    let store = Store::open(&genesis(), &opts(&dir, 260, 10)).expect("narrows");
    assert_eq!(store.oldest_block(), 101);
    commit(&store, 401, 401);
    assert_eq!(store.oldest_block(), 402 - 260);
    assert!(matches!(store.try_block(141), Err(StoreError::HistoryPruned { .. })));
    store.close().expect("closes");
    // The narrower window is now the one a reopen is held to.
    let why = refused(300, 10);
    assert!(why.contains("at most 260"), "{why}");
    // Below the BLOCKHASH window: refused whatever the data dir.
    assert!(refused(100, 10).contains("BLOCKHASH"));
    let _ = std::fs::remove_dir_all(&dir);
}
