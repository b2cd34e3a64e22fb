//! Writes to the database: one write batch per block, and genesis's
//! synthetic accounts.
//!
//! A block's batch holds everything it changes: the block, its results,
//! change set, vault entry and indexes, current state, its history rows and
//! the oldest blocks kept ([`crate::prune`]). fjall applies a batch
//! atomically (one journal entry, checksummed), so a crash leaves a block
//! wholly on disk or not at all. Each key appears once per batch: a batch's
//! writes share one sequence number, so two writes of one key in it would
//! have no order.

use std::{collections::HashSet, sync::atomic::Ordering};

use alloy_primitives::{Address, B256, U256};
use fjall::{PersistMode, Readable};
use prost::Message;
use sluice_messages::{
    wire::{BlockProto, BlockResultsProto, ChangeSetProto, ReceiptProto},
    ChangeSet,
};

use fjall::AbstractTree;

use crate::{
    address_index,
    db::{Db, SyncPolicy},
    history::HistoryWriter,
    prune,
    tables::{corrupt, db_error, encode_account, slot_key, StoredBlock},
    Account, StoreError, Synthetic,
};

/// What each account change of a block replaced: the account before the
/// block and, for an account not wiped by it, the value before it of each
/// slot it changes (in the change's order). The committer reads them
/// through the state cache; genesis has none.
#[derive(Debug, Default)]
pub struct Priors {
    /// One per account change.
    pub accounts: Vec<Option<Account>>,
    /// One list per account change, one value per changed slot (empty for
    /// a wiped account: its slots are read from the database).
    pub slots: Vec<Vec<U256>>,
}

/// What one block's write did.
#[derive(Debug, Default)]
pub struct Written {
    /// Whether it was synced to disk.
    pub synced: bool,
    /// The slots that deleted or recreated accounts held, now gone.
    pub wiped: Vec<(Address, U256)>,
}

/// Synthetic accounts are ingested this many per table file.
const SYNTHETIC_BATCH: usize = 1_000_000;

impl Db {
    /// Writes genesis's synthetic accounts (before its block, which makes
    /// them part of the chain), sorted, straight into table files
    /// (fjall's ingestion: no journal, no memtable), and records how many
    /// there are for replay.
    pub fn write_synthetic(&self, synthetic: &Synthetic) -> Result<(), StoreError> {
        if synthetic.count == 0 {
            return Ok(());
        }
        self.read(|| {
            let empty = Account { balance: synthetic.balance, nonce: 0, code_hash: crate::EMPTY_CODE_HASH };
            let value = encode_account(&empty);
            // All sorted first (20 bytes each, freed after): ingestion
            // takes keys in order.
            let mut all: Vec<Address> =
                (0..synthetic.count).map(sluice_messages::synthetic_address).collect();
            all.sort_unstable();
            for keys in all.chunks(SYNTHETIC_BATCH) {
                let mut ingest = self.t.accounts.start_ingestion().map_err(db_error)?;
                for k in keys {
                    ingest.write(k.as_slice(), value.as_slice()).map_err(db_error)?;
                }
                ingest.finish().map_err(db_error)?;
            }
            drop(all);
            let mut record = [0u8; 40];
            record[..8].copy_from_slice(&synthetic.count.to_be_bytes());
            record[8..].copy_from_slice(&synthetic.balance.to_be_bytes::<32>());
            // Synced by the genesis block's commit that follows.
            self.t.meta.insert("synthetic", record.as_slice()).map_err(db_error)
        })
    }

    /// Writes one committed block in one batch. `code_hashes[i]` is the
    /// code hash account change `i` leaves, `priors` what it replaced.
    /// Synced per the policy.
    pub fn write_block(
        &self,
        stored: &StoredBlock,
        changes: &ChangeSet,
        code_hashes: &[B256],
        priors: &Priors,
    ) -> Result<Written, StoreError> {
        // Guarded: the wiped accounts' slots are read while writing.
        self.read(|| {
            let n = stored.block.header.number;
            // Genesis is always synced: everything after builds on it.
            let sync = n == 0
                || match self.policy {
                    SyncPolicy::EveryBlock => true,
                    SyncPolicy::EveryNBlocks(every) => {
                        self.unsynced.load(Ordering::Relaxed) + 1 >= every.max(1)
                    }
                };
            let t = &self.t;
            // What was committed before this block: the wiped accounts' slots
            // and the history window's start are read from it.
            let snap = self.db.snapshot();
            let mut batch = self.db.batch().durability(Some(if sync {
                PersistMode::SyncAll
            } else {
                PersistMode::Buffer
            }));
            let key = n.to_be_bytes();
            batch.insert(&t.blocks, key, BlockProto::from(stored.block.as_ref()).encode_to_vec());
            let results = BlockResultsProto {
                receipts: stored.receipts.iter().map(ReceiptProto::from).collect(),
                raw_index: stored.raw_index.clone(),
                gas_used: stored.gas_used,
                app_hash: stored.app_hash.to_vec(),
            };
            batch.insert(&t.results, key, results.encode_to_vec());
            batch.insert(&t.changes, key, ChangeSetProto::from(changes).encode_to_vec());
            batch.insert(&t.vault, key, stored.app_hash.as_slice());
            batch.insert(&t.block_by_hash, stored.block.hash.as_slice(), key);
            for (i, r) in stored.receipts.iter().enumerate() {
                let mut loc = [0u8; 12];
                loc[..8].copy_from_slice(&key);
                loc[8..].copy_from_slice(&(i as u32).to_be_bytes());
                batch.insert(&t.tx_index, r.tx_hash.as_slice(), loc);
                if self.address_index {
                    // Each key once per batch: a transfer to oneself, or a
                    // creation's sender and contract, name one row.
                    let mut seen: Vec<alloy_primitives::Address> = Vec::with_capacity(3);
                    for a in [Some(r.from), r.to, r.contract_address].into_iter().flatten() {
                        if !seen.contains(&a) {
                            seen.push(a);
                            batch.insert(&t.address_txs, address_index::key(&a, n, i as u32), [0u8; 0]);
                        }
                    }
                }
            }
            let mut gone_slots = Vec::new();
            let mut history = HistoryWriter { batch: &mut batch, t, block: n };
            for (i, (c, code_hash)) in changes.accounts.iter().zip(code_hashes).enumerate() {
                let prior = priors.accounts.get(i).copied().flatten();
                history
                    .account(&c.address, prior.as_ref().map(encode_account).as_ref().map(|p| p.as_slice()));
                let wiped = c.deleted || c.storage_cleared;
                // Slots the change writes: a wipe leaves them to the writes.
                let written: HashSet<U256> = c.storage.iter().map(|(s, _)| *s).collect();
                let mut recorded = HashSet::new();
                if wiped {
                    // Every slot the account held goes, each recorded as it
                    // was before this block.
                    for entry in snap.prefix(&t.storage, c.address) {
                        let (k, v) = entry.into_inner().map_err(db_error)?;
                        if k.len() != 52 || v.len() != 32 {
                            return Err(corrupt("storage record"));
                        }
                        let slot = U256::from_be_slice(&k[20..]);
                        history.slot(&c.address, &slot, U256::from_be_slice(&v));
                        recorded.insert(slot);
                        if !written.contains(&slot) {
                            history.batch.remove(&t.storage, k);
                            gone_slots.push((c.address, slot));
                        }
                    }
                }
                if c.deleted {
                    history.batch.remove(&t.accounts, c.address.as_slice());
                    continue;
                }
                if let Some(code) = &c.code {
                    history.batch.insert(&t.codes, code.hash.as_slice(), code.code.as_ref());
                }
                let acct = Account { balance: c.balance, nonce: c.nonce, code_hash: *code_hash };
                history.batch.insert(&t.accounts, c.address.as_slice(), encode_account(&acct));
                let slot_priors = priors.slots.get(i);
                for (j, (slot, value)) in c.storage.iter().enumerate() {
                    let k = slot_key(&c.address, slot);
                    if value.is_zero() {
                        history.batch.remove(&t.storage, k);
                    } else {
                        history.batch.insert(&t.storage, k, value.to_be_bytes::<32>());
                    }
                    if recorded.contains(slot) {
                        continue;
                    }
                    let prior = match slot_priors.and_then(|s| s.get(j)) {
                        // Wiped, and not held before: it was zero.
                        _ if wiped || n == 0 => U256::ZERO,
                        Some(p) => *p,
                        None => return Err(corrupt(format!("block {n}: no prior for a changed slot"))),
                    };
                    history.slot(&c.address, slot, prior);
                }
            }
            let history_from = if self.history_blocks > 0 && n > self.history_blocks {
                self.prune_history(&snap, &mut history, n - self.history_blocks)?
            } else {
                self.history_from()?
            };
            let blocks_from = self.next_blocks_from(n, history_from);
            if blocks_from > self.blocks_from() {
                batch.insert(&t.meta, "blocks_from", blocks_from.to_be_bytes());
            }
            batch.insert(&t.meta, "head", key);
            batch.commit().map_err(db_error)?;
            self.blocks_from.fetch_max(blocks_from, Ordering::AcqRel);
            self.history_from.fetch_max(history_from, Ordering::AcqRel);
            self.seal_full_write_buffers()?;
            if sync {
                self.unsynced.store(0, Ordering::Relaxed);
                self.pruned_durably();
            } else {
                self.unsynced.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Written { synced: sync, wiped: gone_slots })
        })
    }

    /// Moves `history_from` to `oldest` (the oldest block whose state stays
    /// readable) and returns it. Nothing is removed here: the rows recorded
    /// by blocks up to it only served reads before it, and the history
    /// tables' compaction filters drop them ([`crate::prune`]) once a
    /// synced commit made the move durable. (Removing them in the commit,
    /// one tombstone per changed key, cost a block of 3,400 transfers ~25%
    /// of its commit.)
    fn prune_history(
        &self,
        snap: &fjall::Snapshot,
        history: &mut HistoryWriter<'_>,
        oldest: u64,
    ) -> Result<u64, StoreError> {
        let from = match snap.get(&self.t.meta, "history_from").map_err(db_error)? {
            Some(v) => u64::from_be_bytes(v.as_ref().try_into().map_err(|_| corrupt("meta history_from"))?),
            None => 0,
        };
        if oldest <= from {
            return Ok(from);
        }
        history.batch.insert(&self.t.meta, "history_from", oldest.to_be_bytes());
        Ok(oldest)
    }

    /// The oldest block kept once block `n` is committed: the last
    /// `block_retention` blocks, and every block of the state history
    /// still kept (its pruning reads their change sets), never less than
    /// before.
    fn next_blocks_from(&self, n: u64, history_from: u64) -> u64 {
        if self.block_retention == 0 {
            return self.blocks_from();
        }
        let mut from = (n + 1).saturating_sub(self.block_retention);
        if self.history_blocks > 0 {
            from = from.min(history_from + 1);
        }
        from.max(self.blocks_from())
    }

    /// After a synced commit: the floor it made durable is handed to the
    /// compaction filters, and once it moved [`prune::DROP_EVERY_BLOCKS`]
    /// since the last time, the height-keyed tables' files wholly below it
    /// are deleted. A failed drop frees nothing yet and costs nothing
    /// else: the next one retries it.
    fn pruned_durably(&self) {
        let from = self.blocks_from();
        self.floor.store(from, Ordering::Release);
        // History rows of blocks up to `history_from` serve no read.
        let history = self.history_from.load(Ordering::Acquire);
        self.history_floor.store(if history == 0 { 0 } else { history + 1 }, Ordering::Release);
        if from < self.dropped_to.load(Ordering::Relaxed) + prune::DROP_EVERY_BLOCKS {
            return;
        }
        self.dropped_to.store(from, Ordering::Relaxed);
        let below = from.to_be_bytes();
        for ks in [&self.t.blocks, &self.t.results, &self.t.changes, &self.t.vault] {
            if let Err(e) = ks.tree.drop_range::<&[u8], _>(..below.as_slice()) {
                tracing::warn!(error = ?e, table = %ks.name(), "dropping pruned table files failed; retried later");
            }
        }
    }
}
