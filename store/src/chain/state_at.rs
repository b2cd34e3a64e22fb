//! State reads: current state (memory, or the cache over the database)
//! and state at the end of any retained block (the history on disk).

use alloy_primitives::{Address, Bytes, B256, U256};

use super::Store;
use crate::{Account, StateReader, StoreError};

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
