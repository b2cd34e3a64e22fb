//! Reads of committed blocks, transactions, the address index and sizes,
//! from the recent blocks in memory or the database, and the rule for a
//! read of the database that fails.

use std::sync::{atomic::Ordering, Arc};

use alloy_primitives::{Address, B256};

use super::{open::is_damage, Store, TxLocation};
use crate::{
    cache::{CacheStats, StateCache},
    db::Db,
    tables::StoredBlock,
    Halt, StoreError,
};

impl Store {
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
    pub(super) fn read_disk<T>(
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
}
