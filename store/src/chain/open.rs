//! Opening a store: in memory at genesis, or a data dir resumed at its
//! last durable height after re-verifying its newest app hashes; block 0
//! built from a genesis; and closing, explicit or on drop.

use std::{
    collections::{HashMap, VecDeque},
    sync::{atomic::AtomicU64, Arc},
};

use alloy_primitives::B256;
use parking_lot::RwLock;
use sluice_messages::{AccountChange, BlockHeader, ChangeSet, CodeChange, SealedBlock};

use super::{Inner, Store};
use crate::{
    apphash::{app_hash, fold_synthetic},
    cache::{CacheBytes, StateCache},
    db::{ChainIdentity, Db, DbLimits, SyncPolicy},
    state::MemState,
    tables::StoredBlock,
    write::Priors,
    Genesis, StoreError,
};

/// How to open a durable store.
#[derive(Debug, Clone)]
pub struct DurableOptions {
    /// The data dir.
    pub dir: std::path::PathBuf,
    /// EVM rules name, recorded for replay.
    pub spec: String,
    /// When commits are synced.
    pub sync: SyncPolicy,
    /// Recent blocks kept in memory.
    pub cache_blocks: usize,
    /// The database's own memory: its block cache and write buffers.
    pub db_limits: DbLimits,
    /// Budgets of the state cache over the database.
    pub state_cache: CacheBytes,
    /// State history kept, in blocks (0: all); see [`crate::history`].
    pub history_blocks: u64,
    /// Blocks kept, in blocks (0: all; at least
    /// [`crate::prune::MIN_BLOCK_RETENTION`] otherwise); see
    /// [`crate::prune`].
    pub block_retention_blocks: u64,
    /// Write the address index ([`crate::address_index`]) with each block
    /// committed (`store.address_index`).
    pub address_index: bool,
    /// Fault injection: the commit of this height fails (0 = never).
    pub fail_commit_at: u64,
    /// Fault injection: every read of this height's block from the
    /// database (not from the recent blocks in memory) fails with an I/O
    /// error, as under EMFILE or EIO (0 = never). Set by the store's tests;
    /// the node leaves it 0.
    pub fail_read_at: u64,
    /// Fault injection: the app hash of this height is perturbed, and so
    /// every later one (0 = never).
    pub diverge_at: u64,
    /// The network the data dir belongs to (see [`crate::db::ChainIdentity::network`]).
    pub network: String,
}

/// The genesis allocation as a change set, so block 0's app hash is computed
/// like every other block's.
fn genesis_changes(genesis: &Genesis) -> ChangeSet {
    ChangeSet {
        accounts: genesis
            .alloc
            .iter()
            .map(|(address, a)| AccountChange {
                address: *address,
                deleted: false,
                balance: a.balance,
                nonce: a.nonce,
                code: (!a.code.is_empty())
                    .then(|| CodeChange { hash: sluice_messages::keccak256(&a.code), code: a.code.clone() }),
                storage_cleared: false,
                storage: a.storage.iter().map(|(k, v)| (*k, *v)).collect(),
            })
            .collect(),
    }
}

/// Block 0 and the app hash after it (which, unlike the block hash,
/// covers the allocation), as every node built on `genesis` has them.
pub fn genesis_sealed(genesis: &Genesis) -> (Arc<SealedBlock>, B256) {
    let (block, _) = genesis_block(genesis);
    (block.block, block.app_hash)
}

/// Block 0's header: it covers the genesis parameters but not the
/// allocation (that is the app hash's job), so it is cheap to build.
fn genesis_header(genesis: &Genesis) -> BlockHeader {
    BlockHeader {
        number: 0,
        parent_hash: B256::ZERO,
        timestamp: genesis.timestamp,
        coinbase: genesis.coinbase,
        gas_limit: genesis.gas_limit,
        base_fee: genesis.base_fee,
        tx_root: sluice_messages::keccak256(&[]),
        state_ref: None,
    }
}

fn genesis_block(genesis: &Genesis) -> (StoredBlock, ChangeSet) {
    let header = genesis_header(genesis);
    let hash = header.hash();
    let changes = genesis_changes(genesis);
    let app = fold_synthetic(app_hash(&B256::ZERO, 0, &hash, 0, &changes), &genesis.synthetic);
    let block = StoredBlock {
        block: Arc::new(SealedBlock { header, hash, txs: Vec::new() }),
        receipts: Vec::new(),
        raw_index: Vec::new(),
        gas_used: 0,
        app_hash: app,
    };
    (block, changes)
}

/// How many of the most recent blocks are re-verified against the hash
/// vault when a data dir is opened.
const VERIFY_RECENT_BLOCKS: u64 = 16;

impl Store {
    /// An in-memory store holding only the genesis block (tests, replay).
    pub fn new(genesis: &Genesis) -> Store {
        let mut state = MemState::default();
        for (address, acct) in &genesis.alloc {
            state.insert_genesis(*address, acct);
        }
        for (address, balance) in genesis.synthetic.accounts() {
            let acct = crate::GenesisAccount { balance, ..Default::default() };
            state.insert_genesis(address, &acct);
        }
        let (block, _) = genesis_block(genesis);
        let genesis_hash = block.block.hash;
        let mut inner = Inner {
            state,
            head: 0,
            recent: VecDeque::new(),
            by_hash: HashMap::new(),
            txs: Some(HashMap::new()),
            halted: None,
            diverged: None,
        };
        inner.push(Arc::new(block));
        Store {
            inner: RwLock::new(inner),
            db: None,
            cache: None,
            cache_blocks: usize::MAX,
            genesis_fingerprint: genesis.fingerprint(),
            genesis_hash,
            repaired: false,
            fail_commit_at: 0,
            fail_read_at: 0,
            read_errors: AtomicU64::new(0),
            diverge_at: 0,
        }
    }

    /// Fault injection: from block `height` on, this store's app hashes
    /// differ from every other node's (as `DurableOptions::diverge_at`).
    /// A builder rather than an option, because its callers (the consensus
    /// simulation) run in-memory stores, which take no options.
    pub fn with_divergence_at(mut self, height: u64) -> Store {
        self.diverge_at = height;
        self
    }

    /// Opens the durable store in `opts.dir`: a new data dir starts at
    /// genesis; an existing one resumes at its last durable height after
    /// re-verifying its most recent app hashes against the hash vault.
    /// A damaged file is refused with [`StoreError::Corrupt`] (see
    /// [`crate::guard`]).
    pub fn open(genesis: &Genesis, opts: &DurableOptions) -> Result<Store, StoreError> {
        crate::guard::guarded(&opts.dir.join(crate::db::DB_DIR), || Self::open_unguarded(genesis, opts))
    }

    fn open_unguarded(genesis: &Genesis, opts: &DurableOptions) -> Result<Store, StoreError> {
        let id = ChainIdentity {
            chain_id: genesis.chain_id,
            genesis: genesis.fingerprint(),
            spec: opts.spec.clone(),
            network: opts.network.clone(),
        };
        let (mut db, loaded) = Db::open(&opts.dir, &id, opts.sync, opts.db_limits)?;
        if opts.block_retention_blocks != 0 && opts.block_retention_blocks < crate::prune::MIN_BLOCK_RETENTION
        {
            return Err(StoreError::Corrupt(format!(
                "a block retention of {} blocks is below the {} execution reads back (BLOCKHASH)",
                opts.block_retention_blocks,
                crate::prune::MIN_BLOCK_RETENTION
            )));
        }
        db.keep(opts.block_retention_blocks, opts.history_blocks)?;
        db.index_addresses(opts.address_index);
        let head = match loaded {
            None => {
                let (block, changes) = genesis_block(genesis);
                let hashes: Vec<B256> = changes
                    .accounts
                    .iter()
                    .map(|c| c.code.as_ref().map_or(crate::EMPTY_CODE_HASH, |code| code.hash))
                    .collect();
                db.write_synthetic(&genesis.synthetic)?;
                // Genesis is always synced: everything after builds on it.
                db.write_block(&block, &changes, &hashes, &Priors::default())?;
                0
            }
            Some(loaded) => loaded.head,
        };
        let mut inner = Inner {
            state: MemState::default(),
            head: 0,
            recent: VecDeque::new(),
            by_hash: HashMap::new(),
            txs: None,
            halted: None,
            diverged: None,
        };
        let first = head.saturating_sub(opts.cache_blocks.max(1) as u64 - 1);
        for n in first..=head {
            let block = db.block(n)?.ok_or_else(|| StoreError::Corrupt(format!("block {n} is missing")))?;
            inner.push(Arc::new(block));
        }
        verify_recent(&db, head)?;
        let mut store = Store {
            inner: RwLock::new(inner),
            db: None,
            cache: Some(StateCache::new(opts.state_cache)),
            cache_blocks: usize::MAX,
            genesis_fingerprint: id.genesis,
            // The data dir was opened under this genesis's fingerprint, so
            // its block 0 has this hash, whether or not it is still kept.
            genesis_hash: genesis_header(genesis).hash(),
            repaired: false,
            fail_commit_at: 0,
            fail_read_at: 0,
            read_errors: AtomicU64::new(0),
            diverge_at: 0,
        };
        store.repaired = db.repaired();
        store.db = Some(RwLock::new(Some(db)));
        store.cache_blocks = opts.cache_blocks.max(1);
        store.fail_commit_at = opts.fail_commit_at;
        store.fail_read_at = opts.fail_read_at;
        store.diverge_at = opts.diverge_at;
        Ok(store)
    }

    /// Closes the database, making every commit durable and marking it
    /// cleanly closed, so the next start does not report a crash. It does
    /// not wait for the store's other
    /// holders to go: threads still winding down at exit would keep the
    /// file open. Reads after it find only cached blocks; commits fail.
    pub fn close(&self) -> Result<(), StoreError> {
        let db = self.db.as_ref().and_then(|db| db.write().take());
        db.map_or(Ok(()), Db::close)
    }
}

impl Drop for Store {
    /// Closes the file if [`Store::close`] was not called (a store dropped
    /// by a test, or by a node that failed to start): through
    /// [`Db::close`], so damage found while closing is an error here,
    /// not a panic in a destructor, which during another panic's unwinding
    /// would abort the process. The error has no one to go to: the file is
    /// as damaged as it was, and the next open reports it.
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Whether a failed read found damage (the store halts) rather than a
/// failure of the moment (the read is answered with it): what the database
/// found corrupt, or a file of it missing or cut short, as `Db::open`
/// tells them apart at open.
pub(super) fn is_damage(e: &StoreError) -> bool {
    match e {
        StoreError::Corrupt(_) => true,
        StoreError::Io(e) => matches!(
            e.kind(),
            std::io::ErrorKind::NotFound
                | std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::InvalidData
        ),
        _ => false,
    }
}

/// Recomputes the app hashes of the most recent blocks from their stored
/// change sets and checks them against the hash vault: a corrupted or
/// half-written data dir is refused at start instead of diverging later.
fn verify_recent(db: &Db, head: u64) -> Result<(), StoreError> {
    let first = head.saturating_sub(VERIFY_RECENT_BLOCKS).max(1);
    for n in first..=head {
        let block = db.block(n)?.ok_or_else(|| StoreError::Corrupt(format!("block {n} is missing")))?;
        let changes =
            db.changes(n)?.ok_or_else(|| StoreError::Corrupt(format!("change set {n} is missing")))?;
        let prev = db
            .vault(n - 1)?
            .ok_or_else(|| StoreError::Corrupt(format!("hash vault has no height {}", n - 1)))?;
        let recorded =
            db.vault(n)?.ok_or_else(|| StoreError::Corrupt(format!("hash vault has no height {n}")))?;
        let computed = app_hash(&prev, n, &block.block.hash, block.gas_used, &changes);
        if computed != recorded || block.app_hash != recorded {
            return Err(StoreError::Corrupt(format!(
                "app hash mismatch at height {n}: the hash vault recorded {recorded}, the stored block gives {computed}"
            )));
        }
    }
    Ok(())
}
