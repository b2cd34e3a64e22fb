//! The on-disk store: one redb database under the data dir.
//!
//! redb was chosen because it is pure Rust (nothing to install), ACID with
//! copy-on-write B-trees and checksums (a torn write is never half-visible,
//! corruption is detected when the file is opened), and lets each commit
//! choose whether it is synced: exactly the durability policy sluice needs.
//!
//! Per block it stores the block (header + raw transactions), its results
//! (receipts, positions, gas used, app hash), its change set, and the app
//! hash in the hash vault, the priors of what it changed (the history), and
//! current state (accounts, storage, code), which is read from here through
//! a bounded cache ([`crate::cache`]), never loaded whole. One write
//! transaction per block: a block is either wholly on disk or not.

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicU32, Ordering},
};

use alloy_primitives::{Address, Bytes, B256, U256};
use prost::Message;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use crate::history::{self, AtBlock, HistoryWriter, ACCOUNT_HISTORY, STORAGE_HISTORY};
use sluice_messages::{
    wire::{self, BlockProto, BlockResultsProto, ChangeSetProto, ReceiptProto},
    ChangeSet, Receipt, SealedBlock,
};

use crate::{chain::StoredBlock, Account, StoreError, Synthetic};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const BLOCKS: TableDefinition<u64, &[u8]> = TableDefinition::new("blocks");
const RESULTS: TableDefinition<u64, &[u8]> = TableDefinition::new("results");
const CHANGES: TableDefinition<u64, &[u8]> = TableDefinition::new("changes");
/// The hash vault: every height's app hash.
const VAULT: TableDefinition<u64, &[u8]> = TableDefinition::new("app_hashes");
const BLOCK_BY_HASH: TableDefinition<&[u8], u64> = TableDefinition::new("block_by_hash");
const TX_INDEX: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tx_index");
const ACCOUNTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("accounts");
const STORAGE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("storage");
const CODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("codes");

/// File name of the database inside the data dir.
pub const DB_FILE: &str = "chain.redb";
/// Layout version; a different one is refused.
const SCHEMA_VERSION: u64 = 1;

/// When commits reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every block is synced before it is reported committed.
    EveryBlock,
    /// Only every Nth block is synced; after a crash up to N-1 blocks that
    /// were reported committed may be lost.
    EveryNBlocks(u32),
}

/// Identity of the chain a data dir belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainIdentity {
    /// Chain id.
    pub chain_id: u64,
    /// `Genesis::fingerprint`.
    pub genesis: B256,
    /// EVM rules name (`prague`, `cancun`), for replay.
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

/// redb's own I/O errors read "I/O error: ..."; the variant says I/O
/// already, so the cause (e.g. "No space left on device") comes right
/// after it, once.
fn io(e: impl std::fmt::Display) -> StoreError {
    io_error(e)
}

/// See [`io`] (for the other modules of this crate).
pub(crate) fn io_error(e: impl std::fmt::Display) -> StoreError {
    let message = e.to_string();
    StoreError::Io(message.strip_prefix("I/O error: ").map_or_else(|| message.clone(), str::to_owned))
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn encode_account(a: &Account) -> [u8; 72] {
    let mut out = [0u8; 72];
    out[..32].copy_from_slice(&a.balance.to_be_bytes::<32>());
    out[32..40].copy_from_slice(&a.nonce.to_be_bytes());
    out[40..].copy_from_slice(a.code_hash.as_slice());
    out
}

fn decode_account(v: &[u8]) -> Result<Account, StoreError> {
    if v.len() != 72 {
        return Err(corrupt(format!("account record of {} bytes", v.len())));
    }
    let mut nonce = [0u8; 8];
    nonce.copy_from_slice(&v[32..40]);
    Ok(Account {
        balance: U256::from_be_slice(&v[..32]),
        nonce: u64::from_be_bytes(nonce),
        code_hash: B256::from_slice(&v[40..]),
    })
}

fn slot_key(address: &Address, slot: &U256) -> [u8; 52] {
    let mut k = [0u8; 52];
    k[..20].copy_from_slice(address.as_slice());
    k[20..].copy_from_slice(&slot.to_be_bytes::<32>());
    k
}

/// How many blocks' history one commit drops at most: a window shortened
/// on a long chain shrinks over many commits, not in one.
pub const PRUNE_BLOCKS_PER_COMMIT: u64 = 64;

/// Drops the history of blocks up to `oldest` (the oldest block whose state
/// stays readable: rows recorded by a block serve reads before it only),
/// from where the last pruning stopped, and moves `history_from` there.
fn prune_history(
    w: &redb::WriteTransaction,
    history: &mut HistoryWriter<'_>,
    oldest: u64,
) -> Result<(), StoreError> {
    let mut meta = w.open_table(META).map_err(io)?;
    let from = match meta.get("history_from").map_err(io)? {
        Some(v) => u64::from_be_bytes(v.value().try_into().map_err(|_| corrupt("meta history_from"))?),
        None => 0,
    };
    if oldest <= from {
        return Ok(());
    }
    let until = oldest.min(from + PRUNE_BLOCKS_PER_COMMIT);
    let changes = w.open_table(CHANGES).map_err(io)?;
    for b in from + 1..=until {
        let Some(bytes) = changes.get(b).map_err(io)? else { continue };
        let set = ChangeSet::try_from(&wire::decode::<ChangeSetProto>(bytes.value()).map_err(corrupt)?)
            .map_err(corrupt)?;
        history.forget(b, &set).map_err(io)?;
    }
    meta.insert("history_from", until.to_be_bytes().as_slice()).map_err(io)?;
    Ok(())
}

/// The open database.
pub struct Db {
    db: Database,
    path: PathBuf,
    policy: SyncPolicy,
    /// Commits since the last synced one (only the committer writes).
    unsynced: AtomicU32,
    /// redb found the file not cleanly closed and repaired it at open.
    repaired: bool,
    /// State history kept, in blocks (0: all).
    history_blocks: u64,
}

/// What a data dir held at start.
pub struct Loaded {
    /// Last committed height.
    pub head: u64,
}

/// What one block's write did.
#[derive(Debug, Default)]
pub struct Written {
    /// Whether it was synced to disk.
    pub synced: bool,
    /// The slots that deleted or recreated accounts held, now gone.
    pub wiped: Vec<(Address, U256)>,
}

/// Synthetic accounts are inserted this many per write transaction, so a
/// genesis of millions does not hold them all as dirty pages at once.
const SYNTHETIC_BATCH: u64 = 500_000;

impl Db {
    /// Opens (or creates) the database in `dir`. A data dir of another chain
    /// or genesis, or of another layout, is refused with a message naming
    /// both. Returns `None` as the loaded chain for a new database.
    /// `cache_bytes` bounds redb's own page cache (its default is 1 GiB).
    pub fn open(
        dir: &Path,
        id: &ChainIdentity,
        policy: SyncPolicy,
        cache_bytes: usize,
    ) -> Result<(Db, Option<Loaded>), StoreError> {
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(DB_FILE);
        let repairing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let noted = std::sync::Arc::clone(&repairing);
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .set_repair_callback(move |_| noted.store(true, std::sync::atomic::Ordering::Relaxed))
            .create(&path)
            .map_err(|e| corrupt(format!("cannot open {}: {e}", path.display())))?;
        let repaired = repairing.load(std::sync::atomic::Ordering::Relaxed);
        let me = Db { db, path, policy, unsynced: AtomicU32::new(0), repaired, history_blocks: 0 };
        let stored = me.identity()?;
        match stored {
            None => {
                me.write_identity(id)?;
                Ok((me, None))
            }
            Some(stored) if stored != *id => Err(corrupt(format!(
                "data dir {} belongs to chain id {} (genesis {}, {}, {}), but this node is configured for chain id {} \
                 (genesis {}, {}, {}); use another --data-dir",
                me.path.display(),
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
                let loaded = me.load()?;
                if me.meta_u64("history_from")?.is_none() {
                    // Written by a sluice that kept no history: it starts
                    // at the head this one found.
                    let w = me.db.begin_write().map_err(io)?;
                    w.open_table(META)
                        .map_err(io)?
                        .insert("history_from", loaded.head.to_be_bytes().as_slice())
                        .map_err(io)?;
                    w.commit().map_err(io)?;
                }
                Ok((me, Some(loaded)))
            }
        }
    }

    /// Opens an existing database to read it (replay); the only write is
    /// redb's repair of a file left open by a crash. A damaged file is
    /// refused with [`StoreError::Corrupt`] (see
    /// [`crate::guard`]); later reads of a damaged file may still panic, so
    /// a caller reading it whole guards its reads too.
    pub fn open_existing(dir: &Path) -> Result<(Db, ChainIdentity, u64), StoreError> {
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return Err(StoreError::Corrupt(format!("no sluice database at {}", path.display())));
        }
        crate::guard::guarded(&path.clone(), || Self::open_existing_at(path))
    }

    fn open_existing_at(path: PathBuf) -> Result<(Db, ChainIdentity, u64), StoreError> {
        let db =
            Database::open(&path).map_err(|e| corrupt(format!("cannot open {}: {e}", path.display())))?;
        let me = Db {
            db,
            path,
            policy: SyncPolicy::EveryBlock,
            unsynced: AtomicU32::new(0),
            repaired: false,
            history_blocks: 0,
        };
        let id = me.identity()?.ok_or_else(|| corrupt("database has no chain identity"))?;
        let head = me.head()?.ok_or_else(|| corrupt("database has no head"))?;
        Ok((me, id, head))
    }

    /// Runs `f` in a read transaction. redb panics on some damage it
    /// finds in a page (an unreachable page type), and a page may be read
    /// for the first time long after the file was opened (an old block an
    /// RPC call asks for): such a panic becomes `StoreError::Corrupt`.
    fn read<T>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        crate::guard::guarded(&self.path, || f(&self.db.begin_read().map_err(io)?))
    }

    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.read(|r| {
            let t = match r.open_table(META) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(io(e)),
            };
            Ok(t.get(key).map_err(io)?.map(|v| v.value().to_vec()))
        })
    }

    fn meta_u64(&self, key: &str) -> Result<Option<u64>, StoreError> {
        match self.meta(key)? {
            None => Ok(None),
            Some(v) => {
                let bytes: [u8; 8] = v.as_slice().try_into().map_err(|_| corrupt(format!("meta {key}")))?;
                Ok(Some(u64::from_be_bytes(bytes)))
            }
        }
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
        // Absent in data dirs written before validators existed: single node.
        let network = self.meta("network")?.unwrap_or_default();
        Ok(Some(ChainIdentity {
            chain_id,
            genesis: B256::try_from(genesis.as_slice()).map_err(|_| corrupt("meta genesis"))?,
            spec: String::from_utf8(spec).map_err(|_| corrupt("meta spec"))?,
            network: String::from_utf8(network).map_err(|_| corrupt("meta network"))?,
        }))
    }

    fn write_identity(&self, id: &ChainIdentity) -> Result<(), StoreError> {
        let w = self.db.begin_write().map_err(io)?;
        {
            let mut m = w.open_table(META).map_err(io)?;
            m.insert("schema_version", SCHEMA_VERSION.to_be_bytes().as_slice()).map_err(io)?;
            m.insert("chain_id", id.chain_id.to_be_bytes().as_slice()).map_err(io)?;
            m.insert("genesis", id.genesis.as_slice()).map_err(io)?;
            m.insert("spec", id.spec.as_bytes()).map_err(io)?;
            // A new data dir keeps history from genesis on.
            m.insert("history_from", 0u64.to_be_bytes().as_slice()).map_err(io)?;
            if !id.network.is_empty() {
                m.insert("network", id.network.as_bytes()).map_err(io)?;
            }
        }
        w.commit().map_err(io)
    }

    /// The last committed height, if any block was written.
    pub fn head(&self) -> Result<Option<u64>, StoreError> {
        self.meta_u64("head")
    }

    fn load(&self) -> Result<Loaded, StoreError> {
        let head = self.head()?.ok_or_else(|| corrupt("database has a chain identity but no blocks"))?;
        Ok(Loaded { head })
    }

    /// Current account `address` (`None`: absent).
    pub fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        self.read(|r| match r.open_table(ACCOUNTS).map_err(io)?.get(address.as_slice()).map_err(io)? {
            Some(v) => decode_account(v.value()).map(Some),
            None => Ok(None),
        })
    }

    /// Current slot `slot` of `address` (zero when unset).
    pub fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        let k = slot_key(address, slot);
        self.read(|r| {
            let t = r.open_table(STORAGE).map_err(io)?;
            let v = t.get(k.as_slice()).map_err(io)?;
            Ok(v.map_or(U256::ZERO, |v| U256::from_be_slice(v.value())))
        })
    }

    /// Code by hash (empty when unknown).
    pub fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        self.read(|r| {
            let t = r.open_table(CODES).map_err(io)?;
            let v = t.get(hash.as_slice()).map_err(io)?;
            Ok(v.map_or_else(Bytes::new, |v| Bytes::copy_from_slice(v.value())))
        })
    }

    /// Number of accounts in current state.
    pub fn account_count(&self) -> Result<u64, StoreError> {
        self.read(|r| r.open_table(ACCOUNTS).map_err(io)?.len().map_err(io))
    }

    /// Writes genesis's synthetic accounts (before its block, which makes
    /// them part of the chain), in batches of [`SYNTHETIC_BATCH`] in address
    /// order, and records how many there are for replay.
    pub fn write_synthetic(&self, synthetic: &Synthetic) -> Result<(), StoreError> {
        if synthetic.count == 0 {
            return Ok(());
        }
        let path = self.path.clone();
        crate::guard::guarded(&path, || {
            let empty = Account { balance: synthetic.balance, nonce: 0, code_hash: crate::EMPTY_CODE_HASH };
            let value = encode_account(&empty);
            // All sorted first (20 bytes each, freed after): inserted in key
            // order, each batch appends to the tree instead of rewriting
            // pages all over it (which grew a 10M-account file to 3.4 GB).
            let mut all: Vec<Address> =
                (0..synthetic.count).map(sluice_messages::synthetic_address).collect();
            all.sort_unstable();
            for keys in all.chunks(SYNTHETIC_BATCH as usize) {
                let mut w = self.db.begin_write().map_err(io)?;
                w.set_durability(Durability::None).map_err(io)?;
                {
                    let mut accounts = w.open_table(ACCOUNTS).map_err(io)?;
                    for k in keys {
                        accounts.insert(k.as_slice(), value.as_slice()).map_err(io)?;
                    }
                }
                w.commit().map_err(io)?;
            }
            drop(all);
            let mut record = [0u8; 40];
            record[..8].copy_from_slice(&synthetic.count.to_be_bytes());
            record[8..].copy_from_slice(&synthetic.balance.to_be_bytes::<32>());
            let w = self.db.begin_write().map_err(io)?;
            w.open_table(META).map_err(io)?.insert("synthetic", record.as_slice()).map_err(io)?;
            // Synced by the genesis block's commit that follows.
            w.commit().map_err(io)
        })
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

    /// Writes one committed block in one transaction. `code_hashes[i]` is
    /// the code hash account change `i` leaves. Synced per the policy.
    pub fn write_block(
        &self,
        stored: &StoredBlock,
        changes: &ChangeSet,
        code_hashes: &[B256],
    ) -> Result<Written, StoreError> {
        // A write reads pages too (the tables' trees, the allocator's
        // state): damage found there panics as on a read.
        let path = self.path.clone();
        crate::guard::guarded(&path, || self.write_block_unguarded(stored, changes, code_hashes))
    }

    fn write_block_unguarded(
        &self,
        stored: &StoredBlock,
        changes: &ChangeSet,
        code_hashes: &[B256],
    ) -> Result<Written, StoreError> {
        let n = stored.block.header.number;
        // Genesis is always synced: everything after builds on it.
        let sync = n == 0
            || match self.policy {
                SyncPolicy::EveryBlock => true,
                SyncPolicy::EveryNBlocks(every) => self.unsynced.load(Ordering::Relaxed) + 1 >= every.max(1),
            };
        let mut gone_slots = Vec::new();
        let mut w = self.db.begin_write().map_err(io)?;
        w.set_durability(if sync { Durability::Immediate } else { Durability::None }).map_err(io)?;
        {
            let block = BlockProto::from(stored.block.as_ref()).encode_to_vec();
            w.open_table(BLOCKS).map_err(io)?.insert(n, block.as_slice()).map_err(io)?;
            let results = BlockResultsProto {
                receipts: stored.receipts.iter().map(ReceiptProto::from).collect(),
                raw_index: stored.raw_index.clone(),
                gas_used: stored.gas_used,
                app_hash: stored.app_hash.to_vec(),
            }
            .encode_to_vec();
            w.open_table(RESULTS).map_err(io)?.insert(n, results.as_slice()).map_err(io)?;
            let change_bytes = ChangeSetProto::from(changes).encode_to_vec();
            w.open_table(CHANGES).map_err(io)?.insert(n, change_bytes.as_slice()).map_err(io)?;
            w.open_table(VAULT).map_err(io)?.insert(n, stored.app_hash.as_slice()).map_err(io)?;
            w.open_table(BLOCK_BY_HASH).map_err(io)?.insert(stored.block.hash.as_slice(), n).map_err(io)?;
            let mut txs = w.open_table(TX_INDEX).map_err(io)?;
            for (i, r) in stored.receipts.iter().enumerate() {
                let mut loc = [0u8; 12];
                loc[..8].copy_from_slice(&n.to_be_bytes());
                loc[8..].copy_from_slice(&(i as u32).to_be_bytes());
                txs.insert(r.tx_hash.as_slice(), loc.as_slice()).map_err(io)?;
            }
            let mut accounts = w.open_table(ACCOUNTS).map_err(io)?;
            let mut storage = w.open_table(STORAGE).map_err(io)?;
            let mut codes = w.open_table(CODES).map_err(io)?;
            let mut history = HistoryWriter {
                accounts: w.open_table(ACCOUNT_HISTORY).map_err(io)?,
                storage: w.open_table(STORAGE_HISTORY).map_err(io)?,
                block: n,
            };
            for (c, code_hash) in changes.accounts.iter().zip(code_hashes) {
                let wiped = c.deleted || c.storage_cleared;
                if wiped {
                    // Every slot the account held goes, each recorded as
                    // it was before this block.
                    let lo = slot_key(&c.address, &U256::ZERO);
                    let hi = slot_key(&c.address, &U256::MAX);
                    let gone = storage
                        .extract_from_if::<&[u8], _>(lo.as_slice()..=hi.as_slice(), |_, _| true)
                        .map_err(io)?;
                    for entry in gone {
                        let (k, v) = entry.map_err(io)?;
                        let (k, v) = (k.value(), v.value());
                        if k.len() != 52 || v.len() != 32 {
                            return Err(corrupt("storage record"));
                        }
                        let slot = U256::from_be_slice(&k[20..]);
                        history.slot(&c.address, &slot, U256::from_be_slice(v), false).map_err(io)?;
                        gone_slots.push((c.address, slot));
                    }
                }
                if c.deleted {
                    let prior = accounts.remove(c.address.as_slice()).map_err(io)?;
                    history.account(&c.address, prior.as_ref().map(|p| p.value())).map_err(io)?;
                    continue;
                }
                if let Some(code) = &c.code {
                    codes.insert(code.hash.as_slice(), code.code.as_ref()).map_err(io)?;
                }
                let acct = Account { balance: c.balance, nonce: c.nonce, code_hash: *code_hash };
                let prior =
                    accounts.insert(c.address.as_slice(), encode_account(&acct).as_slice()).map_err(io)?;
                history.account(&c.address, prior.as_ref().map(|p| p.value())).map_err(io)?;
                drop(prior);
                for (slot, value) in &c.storage {
                    let k = slot_key(&c.address, slot);
                    let prior = if value.is_zero() {
                        storage.remove(k.as_slice()).map_err(io)?
                    } else {
                        storage.insert(k.as_slice(), value.to_be_bytes::<32>().as_slice()).map_err(io)?
                    };
                    let prior = prior.map_or(U256::ZERO, |p| U256::from_be_slice(p.value()));
                    history.slot(&c.address, slot, prior, wiped).map_err(io)?;
                }
            }
            if self.history_blocks > 0 && n > self.history_blocks {
                prune_history(&w, &mut history, n - self.history_blocks)?;
            }
            drop(history);
            w.open_table(META).map_err(io)?.insert("head", n.to_be_bytes().as_slice()).map_err(io)?;
        }
        w.commit().map_err(io)?;
        if sync {
            self.unsynced.store(0, Ordering::Relaxed);
        } else {
            self.unsynced.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Written { synced: sync, wiped: gone_slots })
    }

    /// A stored block with its results.
    pub fn block(&self, n: u64) -> Result<Option<StoredBlock>, StoreError> {
        let bytes = self.read(|r| {
            let Some(block) =
                r.open_table(BLOCKS).map_err(io)?.get(n).map_err(io)?.map(|v| v.value().to_vec())
            else {
                return Ok(None);
            };
            let results = r
                .open_table(RESULTS)
                .map_err(io)?
                .get(n)
                .map_err(io)?
                .map(|v| v.value().to_vec())
                .ok_or_else(|| corrupt(format!("block {n} has no results")))?;
            Ok(Some((block, results)))
        })?;
        let Some((block, results)) = bytes else {
            return Ok(None);
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

    /// Keeps state history for the last `blocks` blocks only (0: all):
    /// each commit then drops the history of the block that left the
    /// window (up to [`PRUNE_BLOCKS_PER_COMMIT`] at a time, when the window
    /// was shortened).
    pub fn keep_history_blocks(&mut self, blocks: u64) {
        self.history_blocks = blocks;
    }

    /// The oldest block whose end state can be read (see
    /// [`crate::history`]).
    pub fn history_from(&self) -> Result<u64, StoreError> {
        Ok(self.meta_u64("history_from")?.unwrap_or(0))
    }

    /// The account `address` at the end of block `n` (at most the head, at
    /// least [`Db::history_from`]), from one consistent snapshot.
    pub fn account_at(&self, address: &Address, n: u64) -> Result<Option<Account>, StoreError> {
        self.read(|r| match history::account_at(r, address, n)? {
            AtBlock::Changed(None) => Ok(None),
            AtBlock::Changed(Some(v)) => decode_account(&v).map(Some),
            AtBlock::Current => {
                match r.open_table(ACCOUNTS).map_err(io)?.get(address.as_slice()).map_err(io)? {
                    Some(v) => decode_account(v.value()).map(Some),
                    None => Ok(None),
                }
            }
        })
    }

    /// Slot `slot` of `address` at the end of block `n`, as
    /// [`Db::account_at`].
    pub fn storage_at(&self, address: &Address, slot: &U256, n: u64) -> Result<U256, StoreError> {
        self.read(|r| match history::slot_at(r, address, slot, n)? {
            AtBlock::Changed(v) => Ok(v),
            AtBlock::Current => {
                let k = slot_key(address, slot);
                let table = r.open_table(STORAGE).map_err(io)?;
                Ok(table
                    .get(k.as_slice())
                    .map_err(io)?
                    .map_or(U256::ZERO, |v| U256::from_be_slice(v.value())))
            }
        })
    }

    /// A block's change set.
    pub fn changes(&self, n: u64) -> Result<Option<ChangeSet>, StoreError> {
        let bytes = self.read(|r| {
            Ok(r.open_table(CHANGES).map_err(io)?.get(n).map_err(io)?.map(|v| v.value().to_vec()))
        })?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        ChangeSet::try_from(&wire::decode::<ChangeSetProto>(&bytes).map_err(corrupt)?)
            .map(Some)
            .map_err(corrupt)
    }

    /// The app hash the vault recorded for height `n`.
    pub fn vault(&self, n: u64) -> Result<Option<B256>, StoreError> {
        self.read(|r| {
            let t = match r.open_table(VAULT) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(io(e)),
            };
            let v = t.get(n).map_err(io)?;
            v.map(|v| B256::try_from(v.value()).map_err(|_| corrupt("vault record"))).transpose()
        })
    }

    /// Height of the block with this hash.
    pub fn block_number(&self, hash: &B256) -> Result<Option<u64>, StoreError> {
        self.read(|r| {
            Ok(r.open_table(BLOCK_BY_HASH).map_err(io)?.get(hash.as_slice()).map_err(io)?.map(|v| v.value()))
        })
    }

    /// Block and receipt index of a committed transaction.
    pub fn tx_location(&self, hash: &B256) -> Result<Option<(u64, u32)>, StoreError> {
        let v = self.read(|r| {
            Ok(r.open_table(TX_INDEX)
                .map_err(io)?
                .get(hash.as_slice())
                .map_err(io)?
                .map(|v| v.value().to_vec()))
        })?;
        let Some(v) = v else {
            return Ok(None);
        };
        if v.len() != 12 {
            return Err(corrupt("tx index record"));
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&v[..8]);
        let mut i = [0u8; 4];
        i.copy_from_slice(&v[8..]);
        Ok(Some((u64::from_be_bytes(n), u32::from_be_bytes(i))))
    }

    /// Size of the database file.
    pub fn size_bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0)
    }

    /// Whether redb found the file not cleanly closed (a crash, a kill) and
    /// repaired it when it was opened: it walks the whole file to do so,
    /// and rolls back commits that were not synced.
    pub fn repaired(&self) -> bool {
        self.repaired
    }

    /// Closes the file: pending commits become durable and the file is
    /// marked cleanly closed (dropping it does the same, but silently).
    pub fn close(self) -> Result<(), StoreError> {
        // Closing writes the allocator's state, reading what it covers.
        let path = self.path;
        crate::guard::guarded(&path, || {
            self.db.close().map_err(|e| StoreError::Io(format!("closing {}: {e}", path.display())))
        })
    }
}
