//! The on-disk store: one fjall database (an LSM tree) under the data dir.
//!
//! fjall was chosen by measurement (ARCHITECTURE.md, "Durable store"; bench/engines):
//! a block's writes are random keys (accounts, slots, history rows), which
//! a copy-on-write B-tree (redb, before) pays for by rewriting pages all
//! over the file, 14-20 KB a transfer; an LSM tree appends them to its
//! journal and sorts them in the background, ~1.4 KB a transfer. It is pure
//! Rust (nothing to install), checksums its journal and blocks, and applies
//! a write batch across keyspaces atomically: a block is wholly on disk or
//! not at all.
//!
//! Per block it stores the block (header + raw transactions), its results
//! (receipts, positions, gas used, app hash), its change set, and the app
//! hash in the hash vault, the priors of what it changed (the history), and
//! current state (accounts, storage, code), which is read from here through
//! a bounded cache ([`crate::cache`]), never loaded whole. The writes are in
//! [`crate::write`].

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU32, AtomicU64, Ordering},
        Arc,
    },
};

use alloy_primitives::{Address, Bytes, B256, U256};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};

use crate::address_index::{AddressPage, AddressScan};
use crate::history::{self, AtBlock};
use crate::prune::{self, Windows};
use crate::tables::{corrupt, db_error, decode_account, slot_key, u64_value, StoredBlock, Tables, KEYSPACES};
use sluice_messages::{
    wire::{self, BlockProto, BlockResultsProto, ChangeSetProto},
    ChangeSet, Receipt, SealedBlock,
};

use crate::{Account, StoreError, Synthetic};

/// Directory of the database inside the data dir.
pub const DB_DIR: &str = "chain";
/// Layout version; a different one is refused. 2: fjall (1 was redb).
pub(crate) const SCHEMA_VERSION: u64 = 2;
/// Set in `meta` while the database is open, removed by a clean close:
/// found at open, the last run was killed or crashed.
pub(crate) const OPEN_MARK: &str = "open";

/// When commits reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every block is synced before it is reported committed.
    EveryBlock,
    /// Only every Nth block is synced; after a power loss up to N-1 blocks
    /// that were reported committed may be lost (a killed process loses
    /// none: unsynced blocks are in the OS's buffers).
    EveryNBlocks(u32),
}

/// Identity of the chain a data dir belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainIdentity {
    /// Chain id.
    pub chain_id: u64,
    /// `Genesis::fingerprint`.
    pub genesis: B256,
    /// EVM rules name (`osaka`, `prague`, `cancun`), for replay.
    pub spec: String,
    /// Which network the data dir belongs to: empty for a single node,
    /// `validators:<hash of validators.toml>` for a validator, so neither
    /// opens the other's data dir.
    pub network: String,
}

impl ChainIdentity {
    fn network_name(&self) -> String {
        if self.network.is_empty() {
            "single node".into()
        } else {
            self.network.clone()
        }
    }
}

/// The file an older sluice kept its chain in (a redb database).
pub const REDB_FILE: &str = "chain.redb";

/// A data dir an older sluice wrote (one redb file, `chain.redb`) is
/// refused by name: this build cannot read it, and starting a new chain
/// beside it would look like the old chain was lost.
fn refuse_older_engine(dir: &Path) -> Result<(), StoreError> {
    let old = dir.join(REDB_FILE);
    if old.exists() {
        return Err(corrupt(format!(
            "data dir {} holds {REDB_FILE}, a chain written by an older sluice (its redb store); this build \
             stores chains with fjall and cannot read it: use another --data-dir, or remove {} to start this \
             chain again from genesis",
            dir.display(),
            old.display(),
        )));
    }
    Ok(())
}

/// Bounds of the database itself (beyond the state cache): its memory and
/// its background threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbLimits {
    /// Its block cache (recently read blocks of its tables), in bytes.
    pub cache_bytes: u64,
    /// All write buffers (memtables) together, in bytes, split evenly
    /// between the tables (at least 1 MiB each): a full one is flushed to
    /// disk.
    pub write_buffer_bytes: u64,
    /// Background threads that flush write buffers and compact tables (at
    /// least 1). One is the measured best: with two or more, fjall 3.1's
    /// first worker re-queues every compaction request to itself while
    /// another worker compacts, a busy loop that takes a core from the
    /// commit for as long as the compaction runs.
    pub worker_threads: usize,
}

impl Default for DbLimits {
    fn default() -> Self {
        DbLimits { cache_bytes: 64 << 20, write_buffer_bytes: 128 << 20, worker_threads: 1 }
    }
}

/// fjall's own bound on the table files it keeps open on Linux (fjall
/// 3.1.13, `db_config.rs`): the file cache is never made larger.
pub const FJALL_DEFAULT_CACHED_FILES: usize = 900;

/// The fewest cached files fjall accepts (its builder panics below).
const MIN_CACHED_FILES: usize = 10;

/// How many table files the database keeps open under a process
/// open-file limit of `limit`: a quarter of it, so sockets (RPC
/// connections, peers), journals and the rest keep three quarters, and at
/// most fjall's own default. Unknown or unlimited (`None`): fjall's
/// default. fjall opens files past its cache as it needs them and closes
/// them after; the bound is on what it keeps open between reads.
pub fn cached_files_within(limit: Option<u64>) -> usize {
    match limit {
        None => FJALL_DEFAULT_CACHED_FILES,
        Some(limit) => {
            let quarter = usize::try_from(limit / 4).unwrap_or(usize::MAX);
            quarter.clamp(MIN_CACHED_FILES, FJALL_DEFAULT_CACHED_FILES)
        }
    }
}

/// The process's open-file soft limit (`RLIMIT_NOFILE`), read where the
/// database is opened, after the node raised it at start; `None` when
/// unlimited or unknown.
pub fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit only writes the struct it is given, which
        // outlives the call.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        if rc != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
            return None;
        }
        Some(limit.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The open database.
pub struct Db {
    pub(crate) db: Database,
    pub(crate) t: Tables,
    path: PathBuf,
    pub(crate) policy: SyncPolicy,
    /// Commits since the last synced one (only the committer writes).
    pub(crate) unsynced: AtomicU32,
    /// The open mark was found: the last run did not close cleanly.
    repaired: bool,
    /// State history kept, in blocks (0: all).
    pub(crate) history_blocks: u64,
    /// Blocks kept, in blocks (0: all); see [`crate::prune`].
    pub(crate) block_retention: u64,
    /// The oldest block kept (`meta.blocks_from`, as last committed):
    /// reads below it are refused.
    pub(crate) blocks_from: AtomicU64,
    /// The oldest block kept as of the last synced commit: what the
    /// compaction filters remove below ([`crate::prune::filters`]).
    pub(crate) floor: Arc<AtomicU64>,
    /// The floor the last drop of whole table files used.
    pub(crate) dropped_to: AtomicU64,
    /// The oldest block with state (`meta.history_from`, as last
    /// committed).
    pub(crate) history_from: AtomicU64,
    /// The history rows' floor as of the last synced commit: rows of
    /// blocks below it serve no read ([`crate::prune::filters`]).
    pub(crate) history_floor: Arc<AtomicU64>,
    /// Whether commits write the address index (`store.address_index`).
    pub(crate) address_index: bool,
    /// Each table's write buffer (memtable), in bytes.
    memtable_bytes: u64,
}

/// What a data dir held at start.
pub struct Loaded {
    /// Last committed height.
    pub head: u64,
}

impl Db {
    /// Opens (or creates) the database in `dir`. A data dir of another chain
    /// or genesis, or of another layout, is refused with a message naming
    /// both. Returns `None` as the loaded chain for a new database.
    pub fn open(
        dir: &Path,
        id: &ChainIdentity,
        policy: SyncPolicy,
        memory: DbLimits,
    ) -> Result<(Db, Option<Loaded>), StoreError> {
        refuse_older_engine(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| in_context(e, &format!("creating {}", dir.display())))?;
        let mut me = Self::open_at(dir.join(DB_DIR), policy, memory)?;
        match me.identity()? {
            None => {
                me.write_identity(id)?;
                Ok((me, None))
            }
            Some(stored) if stored != *id => Err(corrupt(format!(
                "data dir {} belongs to chain id {} (genesis {}, {}, {}), but this node is configured for chain id {} \
                 (genesis {}, {}, {}); use another --data-dir",
                dir.display(),
                stored.chain_id,
                stored.genesis,
                stored.spec,
                stored.network_name(),
                id.chain_id,
                id.genesis,
                id.spec,
                id.network_name(),
            ))),
            Some(_) => {
                let head = me.head()?.ok_or_else(|| corrupt("database has a chain identity but no blocks"))?;
                me.repaired = me.meta(OPEN_MARK)?.is_some();
                me.mark_open()?;
                Ok((me, Some(Loaded { head })))
            }
        }
    }

    fn open_at(path: PathBuf, policy: SyncPolicy, memory: DbLimits) -> Result<Db, StoreError> {
        let cannot = |e: fjall::Error| match e {
            // A file the database names (its current version, a table) is
            // gone or cut short, or holds what cannot be decoded: damage,
            // not a failing disk.
            fjall::Error::Io(e) | fjall::Error::Storage(fjall::LsmError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::UnexpectedEof
                        | std::io::ErrorKind::InvalidData
                ) =>
            {
                corrupt(format!("cannot open {}: a file of it is missing or damaged ({e})", path.display()))
            }
            e => match db_error(e) {
                StoreError::Corrupt(why) => corrupt(format!("cannot open {}: {why}", path.display())),
                StoreError::Io(e) => in_context(e, &format!("cannot open {}", path.display())),
                other => other,
            },
        };
        // The write buffer is split evenly between the tables' memtables (a
        // full one is sealed and flushed to a table file). The journal is
        // cut, flushing what it holds, at twice the buffer: what a start
        // after a kill replays stays small.
        let memtable = (memory.write_buffer_bytes / KEYSPACES).max(1 << 20);
        // Within the open-file limit: fjall's default of 900 cached files
        // alone would leave a default soft limit of 1024 a hundred
        // descriptors for every socket, and a read then fails with EMFILE.
        let limit = open_file_limit();
        let (floor, history_floor) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let cached_files = cached_files_within(limit);
        tracing::info!(
            open_file_limit = limit.map_or_else(|| "unlimited".to_string(), |l| l.to_string()),
            cached_files,
            "database file cache sized within the open-file limit (a quarter of it, at most fjall's default)"
        );
        let db = Database::builder(&path)
            .max_cached_files(Some(cached_files))
            .cache_size(memory.cache_bytes)
            .max_journaling_size((memory.write_buffer_bytes * 2).max(64 << 20))
            .worker_threads(memory.worker_threads.max(1))
            .with_compaction_filter_factories(prune::filters(Arc::clone(&floor), Arc::clone(&history_floor)))
            .open()
            .map_err(cannot)?;
        let ks = |name: &str| {
            db.keyspace(name, || KeyspaceCreateOptions::default().max_memtable_size(memtable)).map_err(cannot)
        };
        let t = Tables {
            meta: ks("meta")?,
            blocks: ks("blocks")?,
            results: ks("results")?,
            changes: ks("changes")?,
            vault: ks("app_hashes")?,
            block_by_hash: ks("block_by_hash")?,
            tx_index: ks("tx_index")?,
            accounts: ks("accounts")?,
            storage: ks("storage")?,
            codes: ks("codes")?,
            account_history: ks("account_history")?,
            storage_history: ks("storage_history")?,
            address_txs: ks("address_txs")?,
        };
        let mut me = Db {
            db,
            t,
            path,
            policy,
            unsynced: AtomicU32::new(0),
            repaired: false,
            history_blocks: 0,
            block_retention: 0,
            blocks_from: AtomicU64::new(0),
            floor,
            dropped_to: AtomicU64::new(0),
            history_from: AtomicU64::new(0),
            history_floor,
            address_index: false,
            memtable_bytes: memtable,
        };
        // What the last run pruned to is durable: the filters may remove
        // below it from the first compaction on.
        let from = me.meta_u64("blocks_from")?.unwrap_or(0);
        me.blocks_from = AtomicU64::new(from);
        me.floor.store(from, Ordering::Release);
        let history = me.meta_u64("history_from")?.unwrap_or(0);
        me.history_from = AtomicU64::new(history);
        me.history_floor.store(if history == 0 { 0 } else { history + 1 }, Ordering::Release);
        Ok(me)
    }

    /// Opens an existing database to read it (replay). A damaged one is
    /// refused with [`StoreError::Corrupt`]; a caller reading it whole
    /// guards its reads too (see [`crate::guard`]).
    pub fn open_existing(dir: &Path) -> Result<(Db, ChainIdentity, u64), StoreError> {
        refuse_older_engine(dir)?;
        let path = dir.join(DB_DIR);
        if !path.is_dir() {
            return Err(StoreError::Corrupt(format!("no sluice database at {}", path.display())));
        }
        crate::guard::guarded(&path.clone(), || {
            let me = Self::open_at(path, SyncPolicy::EveryBlock, DbLimits::default())?;
            let id = me.identity()?.ok_or_else(|| corrupt("database has no chain identity"))?;
            let head = me.head()?.ok_or_else(|| corrupt("database has no head"))?;
            Ok((me, id, head))
        })
    }

    /// The database's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f`, a read. A reader may panic on damage (see
    /// [`crate::guard`]), and a block may be read for the first time long
    /// after the database was opened (an old block an RPC call asks for):
    /// such a panic becomes `StoreError::Corrupt`.
    pub(crate) fn read<T>(&self, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        crate::guard::guarded(&self.path, f)
    }

    fn get(&self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<fjall::Slice>, StoreError> {
        self.read(|| ks.get(key).map_err(db_error))
    }

    pub(crate) fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get(&self.t.meta, key)?.map(|v| v.to_vec()))
    }

    pub(crate) fn meta_u64(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.meta(key)?.map(|v| u64_value(&v, &format!("meta {key}"))).transpose()
    }

    fn identity(&self) -> Result<Option<ChainIdentity>, StoreError> {
        let Some(chain_id) = self.meta_u64("chain_id")? else { return Ok(None) };
        let version = self.meta_u64("schema_version")?.unwrap_or(0);
        if version != SCHEMA_VERSION {
            return Err(corrupt(format!(
                "database layout version {version}, this build reads {SCHEMA_VERSION}"
            )));
        }
        let genesis = self.meta("genesis")?.ok_or_else(|| corrupt("meta genesis missing"))?;
        let spec = self.meta("spec")?.ok_or_else(|| corrupt("meta spec missing"))?;
        let network = self.meta("network")?.unwrap_or_default();
        Ok(Some(ChainIdentity {
            chain_id,
            genesis: B256::try_from(genesis.as_slice()).map_err(|_| corrupt("meta genesis"))?,
            spec: String::from_utf8(spec).map_err(|_| corrupt("meta spec"))?,
            network: String::from_utf8(network).map_err(|_| corrupt("meta network"))?,
        }))
    }

    fn write_identity(&self, id: &ChainIdentity) -> Result<(), StoreError> {
        let mut b = self.db.batch().durability(Some(PersistMode::SyncAll));
        let m = &self.t.meta;
        b.insert(m, "schema_version", SCHEMA_VERSION.to_be_bytes());
        b.insert(m, "chain_id", id.chain_id.to_be_bytes());
        b.insert(m, "genesis", id.genesis.as_slice());
        b.insert(m, "spec", id.spec.as_bytes());
        // A new data dir keeps history from genesis on.
        b.insert(m, "history_from", 0u64.to_be_bytes());
        b.insert(m, OPEN_MARK, [1u8]);
        if !id.network.is_empty() {
            b.insert(m, "network", id.network.as_bytes());
        }
        b.commit().map_err(db_error)
    }

    fn mark_open(&self) -> Result<(), StoreError> {
        let mut b = self.db.batch().durability(Some(PersistMode::SyncAll));
        b.insert(&self.t.meta, OPEN_MARK, [1u8]);
        b.commit().map_err(db_error)
    }

    /// The last committed height, if any block was written.
    pub fn head(&self) -> Result<Option<u64>, StoreError> {
        self.meta_u64("head")
    }

    /// Current account `address` (`None`: absent).
    pub fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        self.get(&self.t.accounts, address)?.map(|v| decode_account(&v)).transpose()
    }

    /// Current slot `slot` of `address` (zero when unset).
    pub fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        Ok(self
            .get(&self.t.storage, slot_key(address, slot))?
            .map_or(U256::ZERO, |v| U256::from_be_slice(&v)))
    }

    /// Code by hash (empty when unknown).
    pub fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        Ok(self.get(&self.t.codes, hash)?.map_or_else(Bytes::new, |v| Bytes::copy_from_slice(&v)))
    }

    /// Number of accounts in current state (a scan: for tools and tests).
    pub fn account_count(&self) -> Result<u64, StoreError> {
        self.read(|| self.t.accounts.len().map(|n| n as u64).map_err(db_error))
    }

    /// The synthetic accounts genesis wrote (none for most chains).
    pub fn synthetic(&self) -> Result<Synthetic, StoreError> {
        let Some(v) = self.meta("synthetic")? else { return Ok(Synthetic::default()) };
        if v.len() != 40 {
            return Err(corrupt("meta synthetic"));
        }
        let mut count = [0u8; 8];
        count.copy_from_slice(&v[..8]);
        Ok(Synthetic { count: u64::from_be_bytes(count), balance: U256::from_be_slice(&v[8..]) })
    }

    /// A stored block with its results.
    pub fn block(&self, n: u64) -> Result<Option<StoredBlock>, StoreError> {
        if n < self.blocks_from() {
            return Err(self.pruned(n));
        }
        // Both from one snapshot: a block and its results are one batch.
        let bytes = self.read(|| {
            let snap = self.db.snapshot();
            let Some(block) = snap.get(&self.t.blocks, n.to_be_bytes()).map_err(db_error)? else {
                return Ok(None);
            };
            let results = snap
                .get(&self.t.results, n.to_be_bytes())
                .map_err(db_error)?
                .ok_or_else(|| corrupt(format!("block {n} has no results")))?;
            Ok(Some((block, results)))
        })?;
        let Some((block, results)) = bytes else {
            // Pruned while it was being read: say so, not "missing".
            return if n < self.blocks_from() { Err(self.pruned(n)) } else { Ok(None) };
        };
        let block =
            SealedBlock::try_from(&wire::decode::<BlockProto>(&block).map_err(corrupt)?).map_err(corrupt)?;
        let results = wire::decode::<BlockResultsProto>(&results).map_err(corrupt)?;
        let receipts =
            results.receipts.iter().map(Receipt::try_from).collect::<Result<Vec<_>, _>>().map_err(corrupt)?;
        Ok(Some(StoredBlock {
            block: std::sync::Arc::new(block),
            receipts,
            raw_index: results.raw_index,
            gas_used: results.gas_used,
            app_hash: B256::try_from(results.app_hash.as_slice()).map_err(|_| corrupt("app hash"))?,
        }))
    }

    /// Keeps the last `blocks` blocks (0: all; see [`crate::prune`]) and
    /// state history for the last `history` blocks only (0: all): each
    /// commit then moves the oldest block kept and the oldest block with
    /// state, and compactions drop what fell below them
    /// ([`crate::prune`]). A window wider than what this data dir already
    /// pruned to is refused (what was pruned cannot come back); the
    /// windows are recorded for the next open.
    pub fn keep(&mut self, blocks: u64, history: u64) -> Result<(), StoreError> {
        let had = Windows {
            blocks: self.meta_u64("block_retention")?.unwrap_or(0),
            history: self.meta_u64("history_blocks")?.unwrap_or(0),
        };
        let wanted = Windows { blocks, history };
        if let Some(why) = prune::widening(had, wanted, self.blocks_from(), self.history_from()?) {
            return Err(StoreError::Corrupt(why));
        }
        if had != wanted {
            let mut b = self.db.batch().durability(Some(PersistMode::SyncAll));
            b.insert(&self.t.meta, "block_retention", blocks.to_be_bytes());
            b.insert(&self.t.meta, "history_blocks", history.to_be_bytes());
            b.commit().map_err(db_error)?;
        }
        self.block_retention = blocks;
        self.history_blocks = history;
        Ok(())
    }

    /// The oldest block kept: blocks, receipts and transactions below it
    /// were pruned ([`crate::prune`]); 0 while everything is kept.
    pub fn blocks_from(&self) -> u64 {
        self.blocks_from.load(Ordering::Acquire)
    }

    /// The error a read of pruned block `n` answers.
    fn pruned(&self, n: u64) -> StoreError {
        StoreError::HistoryPruned { block: n, oldest: self.blocks_from() }
    }

    /// Writes the address index ([`crate::address_index`]) with every
    /// block committed from now on (`on`), or not.
    pub fn index_addresses(&mut self, on: bool) {
        self.address_index = on;
    }

    /// Whether commits write the address index.
    pub fn indexes_addresses(&self) -> bool {
        self.address_index
    }

    /// One page of `address`'s indexed transactions (see
    /// [`crate::address_index`]): `page` of them or a few more, to finish
    /// the last block.
    pub fn address_transactions(
        &self,
        address: &Address,
        scan: AddressScan,
        page: usize,
    ) -> Result<AddressPage, StoreError> {
        let from = self.blocks_from();
        // Searching forward from a pruned block starts at the oldest kept.
        let scan = match scan {
            AddressScan::After(n) if from > 0 => AddressScan::After(n.max(from - 1)),
            scan => scan,
        };
        let mut found =
            self.read(|| crate::address_index::search(&self.t.address_txs, address, scan, page))?;
        if found.found.iter().any(|&(block, _)| block < from) {
            // Rows of pruned blocks (not yet compacted away) are not
            // answered; older ones only lie that way when searching back.
            found.found.retain(|&(block, _)| block >= from);
            if matches!(scan, AddressScan::Before(_)) {
                found.more = false;
            }
        }
        Ok(found)
    }

    /// The oldest block whose end state can be read (see
    /// [`crate::history`]).
    pub fn history_from(&self) -> Result<u64, StoreError> {
        Ok(self.history_from.load(Ordering::Acquire))
    }

    /// The account `address` at the end of block `n` (at most the head, at
    /// least [`Db::history_from`]), from one consistent snapshot.
    pub fn account_at(&self, address: &Address, n: u64) -> Result<Option<Account>, StoreError> {
        self.read(|| {
            let snap = self.db.snapshot();
            match history::account_at(&snap, &self.t.account_history, address, n)? {
                AtBlock::Changed(None) => Ok(None),
                AtBlock::Changed(Some(v)) => decode_account(&v).map(Some),
                AtBlock::Current => snap
                    .get(&self.t.accounts, address)
                    .map_err(db_error)?
                    .map(|v| decode_account(&v))
                    .transpose(),
            }
        })
    }

    /// Slot `slot` of `address` at the end of block `n`, as
    /// [`Db::account_at`].
    pub fn storage_at(&self, address: &Address, slot: &U256, n: u64) -> Result<U256, StoreError> {
        self.read(|| {
            let snap = self.db.snapshot();
            match history::slot_at(&snap, &self.t.storage_history, address, slot, n)? {
                AtBlock::Changed(v) => Ok(v),
                AtBlock::Current => Ok(snap
                    .get(&self.t.storage, slot_key(address, slot))
                    .map_err(db_error)?
                    .map_or(U256::ZERO, |v| U256::from_be_slice(&v))),
            }
        })
    }

    /// A block's change set.
    pub fn changes(&self, n: u64) -> Result<Option<ChangeSet>, StoreError> {
        let Some(bytes) = self.get(&self.t.changes, n.to_be_bytes())? else {
            return Ok(None);
        };
        ChangeSet::try_from(&wire::decode::<ChangeSetProto>(&bytes).map_err(corrupt)?)
            .map(Some)
            .map_err(corrupt)
    }

    /// The app hash the vault recorded for height `n`.
    pub fn vault(&self, n: u64) -> Result<Option<B256>, StoreError> {
        self.get(&self.t.vault, n.to_be_bytes())?
            .map(|v| B256::try_from(v.as_ref()).map_err(|_| corrupt("vault record")))
            .transpose()
    }

    /// Height of the block with this hash (a pruned one's too: reading
    /// it then answers [`StoreError::HistoryPruned`]).
    pub fn block_number(&self, hash: &B256) -> Result<Option<u64>, StoreError> {
        self.get(&self.t.block_by_hash, hash)?.map(|v| u64_value(&v, "block hash index")).transpose()
    }

    /// Block and receipt index of a committed transaction.
    pub fn tx_location(&self, hash: &B256) -> Result<Option<(u64, u32)>, StoreError> {
        let Some(v) = self.get(&self.t.tx_index, hash)? else {
            return Ok(None);
        };
        if v.len() != 12 {
            return Err(corrupt("tx index record"));
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&v[..8]);
        let mut i = [0u8; 4];
        i.copy_from_slice(&v[8..]);
        let n = u64::from_be_bytes(n);
        // A pruned block's transactions are unknown, as geth's unindexed
        // ones are.
        if n < self.blocks_from() {
            return Ok(None);
        }
        Ok(Some((n, u32::from_be_bytes(i))))
    }

    /// Bytes the database takes on disk (its tables and journals).
    pub fn size_bytes(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }

    /// Bytes each table's files take on disk, by table name (the journal,
    /// shared by all, is in [`Db::size_bytes`] only).
    pub fn table_bytes(&self) -> Vec<(String, u64)> {
        self.t.all().iter().map(|ks| (ks.name().to_string(), ks.disk_space())).collect()
    }

    /// Whether the last run left the database open (a crash, a kill): its
    /// journal was replayed at open, and with a grouped sync policy blocks
    /// after the last sync may be gone if the machine lost power.
    pub fn repaired(&self) -> bool {
        self.repaired
    }

    /// Every keyspace's memtable written to a table file: the journal then
    /// holds nothing to replay at the next open. Bounded: a flush that
    /// fails (a full disk) poisons the database, and fjall's own wait for
    /// it would never end. (fjall marks `rotate_memtable` hidden; its
    /// version is pinned exactly for it.)
    pub(crate) fn flush(&self, within: std::time::Duration) -> Result<(), StoreError> {
        let all = self.t.all();
        for ks in all {
            ks.rotate_memtable().map_err(db_error)?;
        }
        let deadline = std::time::Instant::now() + within;
        while all.iter().any(|ks| ks.sealed_memtable_count() > 0) {
            // Fails once a flush failed.
            self.db.persist(PersistMode::Buffer).map_err(db_error)?;
            if std::time::Instant::now() > deadline {
                let why = format!("flushing its tables took over {within:?}");
                return Err(StoreError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, why)));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    /// Seals every table's write buffer that outgrew its share of
    /// `store.db_write_buffer_bytes`, for a background flush. fjall keeps
    /// the memtable size a table was created with, so without this a
    /// budget changed in the config would not apply to an existing data
    /// dir. Called after each block's write.
    pub(crate) fn seal_full_write_buffers(&self) -> Result<(), StoreError> {
        use fjall::AbstractTree;
        for ks in self.t.all() {
            if ks.tree.active_memtable().size() > self.memtable_bytes {
                ks.rotate_memtable().map_err(db_error)?;
            }
        }
        Ok(())
    }

    /// Closes the database: every commit becomes durable, the memtables
    /// are flushed (a restart replays no journal) and the open mark is
    /// removed, so the next start knows this one ended cleanly.
    pub fn close(self) -> Result<(), StoreError> {
        let path = self.path.clone();
        crate::guard::guarded(&path, || {
            self.flush(std::time::Duration::from_secs(60))?;
            let mut b = self.db.batch().durability(Some(PersistMode::SyncAll));
            b.remove(&self.t.meta, OPEN_MARK);
            b.commit().map_err(|e| match db_error(e) {
                StoreError::Io(e) => in_context(e, &format!("closing {}", path.display())),
                other => other,
            })
        })
    }
}

/// `e` with what was being done ahead of its message, its kind kept.
fn in_context(e: std::io::Error, doing: &str) -> StoreError {
    StoreError::Io(std::io::Error::new(e.kind(), format!("{doing}: {e}")))
}
