//! The committed chain: blocks, receipts, transaction index and state,
//! behind one lock so readers always see a whole block.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use alloy_primitives::{Address, Bytes, B256, U256};
use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};
use sluice_messages::{
    AccountChange, BlockHeader, ChangeSet, CodeChange, ExecutedBlock, Log, LogCriteria, SealedBlock,
};

use crate::{
    apphash::{app_hash, fold_synthetic},
    cache::{CacheBytes, CacheStats, StateCache},
    db::{ChainIdentity, Db, DbLimits, SyncPolicy},
    state::MemState,
    tables::StoredBlock,
    write::Priors,
    Account, Genesis, Halt, StateReader, StoreError,
};

/// Where a committed transaction lives.
#[derive(Debug, Clone, Copy)]
struct TxLocation {
    block: u64,
    index: u32,
}

struct Inner {
    /// Current state of an in-memory store (a durable one reads it from
    /// the database through `Store::cache`).
    state: MemState,
    /// Height of the last committed block.
    head: u64,
    /// The most recent committed blocks, oldest first, ending at `head`.
    /// With a database this holds at most `cache_blocks`; older blocks are
    /// read from disk.
    recent: VecDeque<Arc<StoredBlock>>,
    by_hash: HashMap<B256, u64>,
    /// Where each transaction of `recent` is, for a store without a
    /// database only: a durable store finds them in its tx index (recent
    /// ones in the database's write buffers), because a map of every
    /// transaction in `recent` (up to ~640k) grows by rehashing the whole
    /// of it, which held a commit for 140-190 ms.
    txs: Option<HashMap<B256, TxLocation>>,
    /// The first halt: every later commit fails with it.
    halted: Option<Halt>,
    /// The first halt that says this node's state is wrong (another app
    /// hash than a quorum's, a fork; see [`Halt::wrong_from`]), even when
    /// another halt came first. Reads of state and receipts are refused
    /// then; after any other halt (a full disk) they are served.
    diverged: Option<(u64, Halt)>,
}

impl Inner {
    fn cached(&self, number: u64) -> Option<&Arc<StoredBlock>> {
        let first = self.head + 1 - self.recent.len() as u64;
        number.checked_sub(first).and_then(|i| self.recent.get(i as usize))
    }

    fn push(&mut self, block: Arc<StoredBlock>) {
        let number = block.block.header.number;
        for (i, r) in block.receipts.iter().enumerate() {
            if let Some(txs) = &mut self.txs {
                txs.insert(r.tx_hash, TxLocation { block: number, index: i as u32 });
            }
        }
        self.by_hash.insert(block.block.hash, number);
        self.head = number;
        self.recent.push_back(block);
    }

    fn evict_to(&mut self, keep: usize) {
        while self.recent.len() > keep.max(1) {
            if let Some(old) = self.recent.pop_front() {
                self.by_hash.remove(&old.block.hash);
                if let Some(txs) = &mut self.txs {
                    for r in &old.receipts {
                        txs.remove(&r.tx_hash);
                    }
                }
            }
        }
    }
}

/// What a commit did, for metrics.
#[derive(Debug, Clone, Copy)]
pub struct CommitInfo {
    /// The block's app hash.
    pub app_hash: B256,
    /// Whether the write was synced to disk (false without a database, or
    /// between syncs of a grouped policy).
    pub synced: bool,
    /// Time spent writing (and syncing) the database.
    pub write: std::time::Duration,
}

/// The committed chain and state. Only [`Store::commit`] writes.
pub struct Store {
    inner: RwLock<Inner>,
    /// `None` in memory; `Some(None)` once [`Store::close`] closed it.
    /// Reads and the commit share it (reads see the last committed
    /// transaction while a write is under way); only close takes it alone.
    db: Option<RwLock<Option<Db>>>,
    /// Current state read from the database, within a byte budget
    /// (durable stores only).
    cache: Option<StateCache>,
    cache_blocks: usize,
    genesis_fingerprint: B256,
    /// Block 0's hash, kept from the open: `eth_config`'s fork id is
    /// derived from it, and block 0 itself may be pruned from the history.
    genesis_hash: B256,
    /// The database was repaired when it was opened ([`Db::repaired`]).
    repaired: bool,
    /// Commit of this height fails (fault injection; 0 = never).
    fail_commit_at: u64,
    /// Reads of this height's block from the database fail with an I/O
    /// error (fault injection; 0 = never).
    fail_read_at: u64,
    /// Reads of the database that failed without damage (see
    /// [`Store::read_errors`]).
    read_errors: AtomicU64,
    /// From this height on, the app hash is perturbed (fault injection, to
    /// prove validators catch divergence; 0 = never).
    diverge_at: u64,
}

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

/// A log with the position it was emitted at, for `eth_getLogs`.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// The log.
    pub log: Log,
    /// Block height.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Transaction hash.
    pub tx_hash: B256,
    /// Transaction index in the block.
    pub tx_index: u32,
    /// Log index in the block.
    pub log_index: u32,
}

/// A filter for [`Store::logs`].
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    /// First block (inclusive).
    pub from: u64,
    /// Last block (inclusive).
    pub to: u64,
    /// Which logs of those blocks.
    pub criteria: LogCriteria,
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

    /// Fingerprint of the genesis this store started from.
    pub fn genesis_fingerprint(&self) -> B256 {
        self.genesis_fingerprint
    }

    /// Block 0's hash (what `eth_getBlockByNumber(0)` reports), known
    /// even once block 0 is pruned from the kept history.
    pub fn genesis_hash(&self) -> B256 {
        self.genesis_hash
    }

    /// Whether the data dir had not been closed cleanly (a crash, a kill):
    /// its database replayed its journal when opened, and after a power
    /// loss blocks a grouped sync policy had not synced are gone.
    pub fn repaired_at_open(&self) -> bool {
        self.repaired
    }

    /// Height of the last committed block.
    pub fn head(&self) -> u64 {
        self.inner.read().head
    }

    /// The last committed block.
    pub fn head_block(&self) -> Arc<StoredBlock> {
        let inner = self.inner.read();
        match inner.recent.back() {
            Some(b) => Arc::clone(b),
            None => unreachable!("the store always holds its head block"),
        }
    }

    /// A committed block by height; `None` also when the database failed
    /// to read it (counted and logged: see [`Store::try_block`]).
    pub fn block(&self, number: u64) -> Option<Arc<StoredBlock>> {
        self.try_block(number).ok().flatten()
    }

    /// A committed block by height, or the error its read from the
    /// database met (after an I/O error the store goes on; see
    /// `read_disk`).
    pub fn try_block(&self, number: u64) -> Result<Option<Arc<StoredBlock>>, StoreError> {
        let oldest = self.oldest_block();
        if number < oldest {
            return Err(StoreError::HistoryPruned { block: number, oldest });
        }
        {
            let inner = self.inner.read();
            if number > inner.head {
                return Ok(None);
            }
            if let Some(b) = inner.cached(number) {
                return Ok(Some(Arc::clone(b)));
            }
        }
        let inject = self.fail_read_at != 0 && number == self.fail_read_at;
        let found = self.read_disk(|db| {
            if inject {
                let why = format!("injected read failure of block {number}");
                return Err(StoreError::Io(std::io::Error::other(why)));
            }
            db.block(number)
        })?;
        Ok(found.map(Arc::new))
    }

    /// A committed block by hash; `None` also when a read failed (see
    /// [`Store::try_block_by_hash`]).
    pub fn block_by_hash(&self, hash: &B256) -> Option<Arc<StoredBlock>> {
        self.try_block_by_hash(hash).ok().flatten()
    }

    /// A committed block by hash, or the error a read of the database met.
    pub fn try_block_by_hash(&self, hash: &B256) -> Result<Option<Arc<StoredBlock>>, StoreError> {
        let cached = self.inner.read().by_hash.get(hash).copied();
        let number = match cached {
            Some(n) => n,
            None => match self.read_disk(|db| db.block_number(hash))? {
                Some(n) => n,
                None => return Ok(None),
            },
        };
        self.try_block(number)
    }

    /// A committed transaction: its block and receipt index; `None` also
    /// when a read failed (see [`Store::try_transaction`]).
    pub fn transaction(&self, hash: &B256) -> Option<(Arc<StoredBlock>, usize)> {
        self.try_transaction(hash).ok().flatten()
    }

    /// A committed transaction (its block and receipt index), or the error
    /// a read of the database met.
    pub fn try_transaction(&self, hash: &B256) -> Result<Option<(Arc<StoredBlock>, usize)>, StoreError> {
        let cached = self.inner.read().txs.as_ref().and_then(|txs| txs.get(hash).copied());
        let loc = match cached {
            Some(loc) => loc,
            None => match self.read_disk(|db| db.tx_location(hash))? {
                Some((block, index)) => TxLocation { block, index },
                None => return Ok(None),
            },
        };
        if loc.block > self.head() {
            return Ok(None);
        }
        Ok(self.try_block(loc.block)?.map(|b| (b, loc.index as usize)))
    }

    /// Whether this store writes the address index (a durable store opened
    /// with `address_index`): only then does
    /// [`Store::address_transactions`] find anything.
    pub fn indexes_addresses(&self) -> bool {
        self.disk().is_some_and(|db| db.indexes_addresses())
    }

    /// One page of `address`'s committed transactions from the address
    /// index, as (block, receipt index) in the search's order; empty for a
    /// store without a database. Rows of blocks above the head (written,
    /// not yet reported committed) are left out.
    pub fn address_transactions(
        &self,
        address: &Address,
        scan: crate::AddressScan,
        page: usize,
    ) -> Result<crate::AddressPage, StoreError> {
        let head = self.head();
        let found = self.read_disk(|db| db.address_transactions(address, scan, page).map(Some))?;
        let mut found = found.unwrap_or_default();
        if found.found.iter().any(|&(block, _)| block > head) {
            found.found.retain(|&(block, _)| block <= head);
            // Newer rows only lie past the head in the After direction.
            if matches!(scan, crate::AddressScan::After(_)) {
                found.more = false;
            }
        }
        Ok(found)
    }

    /// Reads of the database that failed without finding damage (an I/O
    /// error such as EMFILE or EIO) since the store was opened: each was
    /// answered with its error and logged, and the store went on. Exported
    /// as `sluice_store_read_errors_total`.
    pub fn read_errors(&self) -> u64 {
        self.read_errors.load(Ordering::Relaxed)
    }

    /// Why the store halted, if it did.
    pub fn halted(&self) -> Option<Halt> {
        self.inner.read().halted.clone()
    }

    /// Number of accounts in current state.
    pub fn account_count(&self) -> usize {
        match self.disk() {
            Some(db) => db.account_count().map_or(0, |n| n as usize),
            None => self.inner.read().state.len(),
        }
    }

    /// The state cache's hits, misses and size (durable stores only).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(StateCache::stats)
    }

    /// Size of the database file (0 in memory).
    pub fn db_bytes(&self) -> u64 {
        self.disk().map_or(0, |db| db.size_bytes())
    }

    /// Bytes of each of the database's tables, by name (none in memory).
    pub fn table_bytes(&self) -> Vec<(String, u64)> {
        self.disk().map_or_else(Vec::new, |db| db.table_bytes())
    }

    /// What `read` finds in the file, if this store is durable and not
    /// closed (`Ok(None)` once closed: only cached blocks are served then).
    ///
    /// The rule for a failed read: these reads (blocks, block hashes,
    /// transaction positions) are reachable from RPC callers and gossip,
    /// with hashes and heights anyone picks, so a failure that outside load
    /// can cause must not stop the node.
    /// - Damage found ([`StoreError::Corrupt`], or an I/O error saying a
    ///   file is missing or cut short: [`is_damage`]) halts the store as a
    ///   failed commit does: a file that fails reads of committed blocks is
    ///   not one to commit more to.
    /// - Any other error (EMFILE under a connection flood, ENOMEM, a
    ///   transient EIO) answers only this read: it is returned to the
    ///   caller, counted in [`Store::read_errors`] and logged at warn; the
    ///   store goes on, and a later read may succeed.
    ///
    /// A failed write or commit still halts the store ([`Store::commit`]).
    fn read_disk<T>(
        &self,
        read: impl FnOnce(&Db) -> Result<Option<T>, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let found = match self.disk() {
            Some(db) => read(&db),
            None => return Ok(None),
        };
        found.inspect_err(|e| {
            if matches!(e, StoreError::HistoryPruned { .. }) {
                // Pruned while being read: an answer, not a failure.
            } else if is_damage(e) {
                self.halt(Halt::Damaged { cause: e.to_string() });
            } else {
                self.read_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "a read of the database failed; answered with the error, the store goes on");
            }
        })
    }

    /// The open database, if this store is durable and not closed.
    fn disk(&self) -> Option<MappedRwLockReadGuard<'_, Db>> {
        // Recursive: a read under way must not wait behind a close queued
        // after it (parking_lot's locks are fair to writers).
        RwLockReadGuard::try_map(self.db.as_ref()?.read_recursive(), Option::as_ref).ok()
    }

    /// The open database, or the error a read of a closed store answers.
    fn open_disk(&self) -> Result<MappedRwLockReadGuard<'_, Db>, StoreError> {
        self.disk().ok_or(StoreError::Closed)
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

    /// Commits an executed block: writes it durably (per the sync policy),
    /// then makes it visible to readers, chaining its app hash. Blocks must
    /// arrive in order. A failure is latched: every later commit fails.
    pub fn commit(&self, executed: &ExecutedBlock) -> Result<CommitInfo, StoreError> {
        let (prev, expected) = {
            let inner = self.inner.read();
            if let Some(halt) = &inner.halted {
                return Err(StoreError::Halted(halt.clone()));
            }
            let prev = match inner.recent.back() {
                Some(b) => b.app_hash,
                None => unreachable!("the store always holds its head block"),
            };
            (prev, inner.head + 1)
        };
        let (code_hashes, priors) = self.code_hashes_and_priors(&executed.changes)?;
        let number = executed.block.header.number;
        if number != expected {
            return Err(StoreError::OutOfOrder { expected, got: number });
        }
        self.check_state_ref(executed)?;
        let mut app = app_hash(&prev, number, &executed.block.hash, executed.gas_used, &executed.changes);
        if self.diverge_at != 0 && number == self.diverge_at {
            app.0[0] ^= 0xff;
        }
        let stored = Arc::new(StoredBlock {
            block: Arc::clone(&executed.block),
            receipts: executed.receipts.clone(),
            raw_index: executed.raw_index.clone(),
            gas_used: executed.gas_used,
            app_hash: app,
        });
        let start = std::time::Instant::now();
        let mut synced = false;
        if let Some(db) = &self.db {
            let result = if number == self.fail_commit_at {
                Err(StoreError::Io(std::io::Error::other(format!(
                    "injected commit failure at height {number}"
                ))))
            } else {
                let db = db.read_recursive();
                match db.as_ref().map(|db| (db.vault(number), db)) {
                    None => Err(StoreError::Closed),
                    Some((Ok(Some(recorded)), _)) if recorded != app => Err(StoreError::Corrupt(format!(
                        "app hash mismatch at height {number}: the hash vault recorded {recorded}, this node produced {app}"
                    ))),
                    Some((Err(e), _)) => Err(e),
                    Some((Ok(_), db)) => db.write_block(&stored, &executed.changes, &code_hashes, &priors),
                }
            };
            match result {
                Ok(written) => {
                    synced = written.synced;
                    if let Some(cache) = &self.cache {
                        cache.committed(&executed.changes, &code_hashes, &written.wiped);
                    }
                }
                Err(e) => {
                    self.halt(Halt::CommitFailed { height: number, cause: e.to_string() });
                    return Err(e);
                }
            }
        }
        let write = start.elapsed();
        let mut inner = self.inner.write();
        if self.cache.is_none() {
            inner.state.apply(&executed.changes);
        }
        inner.push(stored);
        let keep = self.cache_blocks;
        inner.evict_to(keep);
        Ok(CommitInfo { app_hash: app, synced, write })
    }

    /// A validator's block carries another validator's claim about an
    /// earlier app hash, signed by a quorum once finalized: if this node
    /// computed another, its state has diverged and it must stop (latched
    /// like any failed commit).
    fn check_state_ref(&self, executed: &ExecutedBlock) -> Result<(), StoreError> {
        let Some(claim) = executed.block.header.state_ref else { return Ok(()) };
        let number = executed.block.header.number;
        let mine = if claim.height < number {
            // A failed read fails this commit, which halts like any failed
            // commit (and is not taken for a height never committed).
            match self.try_block(claim.height) {
                Ok(b) => b.map(|b| b.app_hash),
                Err(e) => {
                    self.halt(Halt::CommitFailed { height: number, cause: e.to_string() });
                    return Err(e);
                }
            }
        } else {
            None
        };
        let halt = match mine {
            Some(mine) if mine == claim.app_hash => return Ok(()),
            Some(mine) => Halt::Diverged { height: claim.height, ours: mine, theirs: claim.app_hash },
            None => Halt::CommitFailed {
                height: number,
                cause: format!("it refers to height {}, which this node has not committed", claim.height),
            },
        };
        self.halt(halt.clone());
        Err(StoreError::Halted(halt))
    }

    /// The code hash each account change leaves (what the change says for
    /// fresh accounts, otherwise the current one) and, with a database,
    /// what each change replaces (see [`Priors`]), read through the state
    /// cache: the executor has just read all of it.
    fn code_hashes_and_priors(&self, changes: &ChangeSet) -> Result<(Vec<B256>, Priors), StoreError> {
        if self.cache.is_none() {
            let inner = self.inner.read();
            let hashes = changes.accounts.iter().map(|c| inner.state.code_hash_after(c)).collect();
            return Ok((hashes, Priors::default()));
        }
        let mut hashes = Vec::with_capacity(changes.accounts.len());
        let mut priors = Priors {
            accounts: Vec::with_capacity(changes.accounts.len()),
            slots: Vec::with_capacity(changes.accounts.len()),
        };
        for c in &changes.accounts {
            let before = self.account(&c.address)?;
            let wiped = c.storage_cleared || c.deleted;
            hashes.push(match (&c.code, wiped) {
                (Some(code), _) => code.hash,
                (None, true) => crate::EMPTY_CODE_HASH,
                (None, false) => before.map_or(crate::EMPTY_CODE_HASH, |a| a.code_hash),
            });
            priors.accounts.push(before);
            let slots = if wiped {
                Vec::new()
            } else {
                c.storage.iter().map(|(slot, _)| self.storage(&c.address, slot)).collect::<Result<_, _>>()?
            };
            priors.slots.push(slots);
        }
        Ok((hashes, priors))
    }

    /// Latches a halt: every later commit fails with the first one. A halt
    /// that says this node's state is wrong ([`Halt::wrong_from`]) is also
    /// kept by [`Store::diverged`], even after another halt.
    pub fn halt(&self, halt: Halt) {
        let mut inner = self.inner.write();
        if let (Some(height), None) = (halt.wrong_from(), &inner.diverged) {
            inner.diverged = Some((height, halt.clone()));
        }
        inner.halted.get_or_insert(halt);
    }

    /// The first height whose state is known wrong, and the halt that
    /// said so (this node's app hash disagrees with what a quorum
    /// finalized, or it committed another block than the one finalized);
    /// `None` unless one latched.
    pub fn diverged(&self) -> Option<(u64, Halt)> {
        self.inner.read().diverged.clone()
    }

    /// Logs matching `filter`, at most `limit` of them; `None` when more
    /// than `limit` match (the caller reports the limit).
    pub fn logs(&self, filter: &LogFilter, limit: usize) -> Option<Vec<LogEntry>> {
        let mut out = Vec::new();
        let last = filter.to.min(self.head());
        for number in filter.from..=last {
            let Some(stored) = self.block(number) else { continue };
            let mut log_index = 0u32;
            for r in &stored.receipts {
                for log in &r.logs {
                    if filter.criteria.matches(log) {
                        if out.len() == limit {
                            return None;
                        }
                        out.push(LogEntry {
                            log: log.clone(),
                            block_number: number,
                            block_hash: stored.block.hash,
                            tx_hash: r.tx_hash,
                            tx_index: r.index,
                            log_index,
                        });
                    }
                    log_index += 1;
                }
            }
        }
        Some(out)
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
fn is_damage(e: &StoreError) -> bool {
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

/// State at the end of a retained block: [`Store::state_at`].
pub struct StateAt<'a> {
    store: &'a Store,
    block: u64,
}

impl StateAt<'_> {
    /// The block whose end state this reads.
    pub fn block(&self) -> u64 {
        self.block
    }
}

impl Store {
    /// State as of the end of block `n`, which must be committed: read
    /// from the history on disk (see [`crate::history`]), consistent
    /// however far the chain has moved since. A store without a database
    /// (in-memory) keeps no history and serves its head only. A block
    /// older than the history is [`StoreError::StateUnavailable`].
    pub fn state_at(&self, n: u64) -> Result<StateAt<'_>, StoreError> {
        let oldest = self.oldest_state()?;
        if n < oldest {
            return Err(StoreError::StateUnavailable { block: n, oldest });
        }
        Ok(StateAt { store: self, block: n })
    }

    /// The oldest block whose end state [`Store::state_at`] reads: the
    /// start of the history kept (`store.history_blocks`), or the head for
    /// a store without a database.
    pub fn oldest_state(&self) -> Result<u64, StoreError> {
        match self.disk() {
            Some(db) => db.history_from(),
            None => Ok(self.head()),
        }
    }

    /// The oldest block kept: blocks, receipts and transactions below it
    /// were pruned (`store.block_retention_blocks`, see [`crate::prune`]);
    /// 0 while every block is kept, and without a database.
    pub fn oldest_block(&self) -> u64 {
        self.disk().map_or(0, |db| db.blocks_from())
    }

    /// Whether state at `n` is read from memory: only without a database.
    /// (With one, even the head's state is read through the history: a
    /// commit may land between a reader's check and its read, and the
    /// history answers for the block asked, memory for the newest.)
    fn at_head(&self, _n: u64) -> bool {
        self.db.is_none()
    }
}

impl StateReader for StateAt<'_> {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        if self.store.at_head(self.block) {
            return self.store.account(address);
        }
        self.store.open_disk()?.account_at(address, self.block)
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        // Code is never removed: by hash, it is the same at every block.
        self.store.code(hash)
    }
    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        if self.store.at_head(self.block) {
            return self.store.storage(address, slot);
        }
        self.store.open_disk()?.storage_at(address, slot, self.block)
    }
    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        self.store.block_hash(number)
    }
}

/// Current state: from memory without a database; with one, from the
/// cache, a miss read from the database and filled (see [`crate::cache`]).
impl StateReader for Store {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        let Some(cache) = &self.cache else { return Ok(self.inner.read().state.account(address)) };
        if let Some(found) = cache.account(address) {
            return Ok(found);
        }
        let seen = cache.epoch();
        let found = self.open_disk()?.account(address)?;
        cache.fill_account(seen, *address, found);
        Ok(found)
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        let Some(cache) = &self.cache else { return Ok(self.inner.read().state.code(hash)) };
        if let Some(found) = cache.code(hash) {
            return Ok(found);
        }
        let found = self.open_disk()?.code(hash)?;
        if !found.is_empty() {
            cache.fill_code(*hash, found.clone());
        }
        Ok(found)
    }
    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        let Some(cache) = &self.cache else { return Ok(self.inner.read().state.storage(address, slot)) };
        if let Some(found) = cache.storage(address, slot) {
            return Ok(found);
        }
        let seen = cache.epoch();
        let found = self.open_disk()?.storage(address, slot)?;
        cache.fill_storage(seen, *address, *slot, found);
        Ok(found)
    }
    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        // A failed read is an error, never a zero hash: execution on a
        // wrong BLOCKHASH would diverge.
        Ok(self.try_block(number)?.map(|b| b.block.hash).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests;
