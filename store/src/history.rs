//! State history: what every account and storage slot held at the end of
//! any retained block.
//!
//! Each commit records, for every account and slot its block changes, the
//! value it held *before* the block (its prior), keyed by (key, block).
//! The value at the end of block `n` is then the prior recorded by the
//! first block after `n` that changed the key, or, if no later block did,
//! the current value. This is reth's change sets plus history index folded
//! into one sorted table per kind: one range read finds the first change
//! after `n`. The priors are what the block's commit read through the state
//! cache before writing (see [`crate::write`]): the executor just read
//! every key the block changes, so they are almost always in memory.
//!
//! An account wiped by a creation, self-destruct or EIP-161 deletion has
//! every slot it held recorded, so its storage reads as it was before.
//!
//! Blocks committed before a data dir kept history (an older sluice) have
//! none: the oldest block with state is kept in `meta` (`history_from`)
//! and reads below it are refused, never answered with today's values.

use alloy_primitives::{Address, U256};
use fjall::{Keyspace, OwnedWriteBatch as WriteBatch, Readable, Snapshot};

use crate::{
    tables::{db_error, Tables},
    StoreError,
};

fn account_key(address: &Address, block: u64) -> [u8; 28] {
    let mut k = [0u8; 28];
    k[..20].copy_from_slice(address.as_slice());
    k[20..].copy_from_slice(&block.to_be_bytes());
    k
}

fn slot_key(address: &Address, slot: &U256, block: u64) -> [u8; 60] {
    let mut k = [0u8; 60];
    k[..20].copy_from_slice(address.as_slice());
    k[20..52].copy_from_slice(&slot.to_be_bytes::<32>());
    k[52..].copy_from_slice(&block.to_be_bytes());
    k
}

/// Records one block's priors into its commit's write batch. Keyspaces
/// `account_history` ((address ++ block) -> the encoded account before
/// that block, empty when it did not exist) and `storage_history`
/// ((address ++ slot ++ block) -> the slot's 32-byte value before it).
pub(crate) struct HistoryWriter<'a> {
    pub(crate) batch: &'a mut WriteBatch,
    pub(crate) t: &'a Tables,
    pub(crate) block: u64,
}

impl HistoryWriter<'_> {
    /// `address` held `prior` (an encoded account; `None`: absent) before
    /// this block.
    pub(crate) fn account(&mut self, address: &Address, prior: Option<&[u8]>) {
        if self.block == 0 {
            // Genesis priors would serve reads before block 0: none.
            return;
        }
        let k = account_key(address, self.block);
        self.batch.insert(&self.t.account_history, k, prior.unwrap_or_default());
    }

    /// Slot `slot` of `address` held `prior` before this block (each slot
    /// once per block: the caller skips a slot a wipe recorded already).
    pub(crate) fn slot(&mut self, address: &Address, slot: &U256, prior: U256) {
        if self.block == 0 {
            return;
        }
        let k = slot_key(address, slot, self.block);
        self.batch.insert(&self.t.storage_history, k, prior.to_be_bytes::<32>());
    }
}

/// What the history says about a key at the end of a block.
pub(crate) enum AtBlock<T> {
    /// A later block changed it: this is the value it held then.
    Changed(T),
    /// No later block changed it: the current value is the answer.
    Current,
}

/// The value recorded by the first change in `lo..=hi` of `table` (one
/// key's history after some block), if any.
fn first_change(
    snap: &Snapshot,
    table: &Keyspace,
    lo: &[u8],
    hi: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    let first = snap.range(table, lo..=hi).next();
    first.map(|entry| entry.value().map(|v| v.to_vec()).map_err(db_error)).transpose()
}

/// The account `address` at the end of block `n`, from the history (the
/// encoded account, `None` if it did not exist).
pub(crate) fn account_at(
    snap: &Snapshot,
    table: &Keyspace,
    address: &Address,
    n: u64,
) -> Result<AtBlock<Option<Vec<u8>>>, StoreError> {
    let (lo, hi) = (account_key(address, n.saturating_add(1)), account_key(address, u64::MAX));
    Ok(match first_change(snap, table, &lo, &hi)? {
        None => AtBlock::Current,
        Some(v) => AtBlock::Changed((!v.is_empty()).then_some(v)),
    })
}

/// Slot `slot` of `address` at the end of block `n`, from the history.
pub(crate) fn slot_at(
    snap: &Snapshot,
    table: &Keyspace,
    address: &Address,
    slot: &U256,
    n: u64,
) -> Result<AtBlock<U256>, StoreError> {
    let (lo, hi) = (slot_key(address, slot, n.saturating_add(1)), slot_key(address, slot, u64::MAX));
    match first_change(snap, table, &lo, &hi)? {
        None => Ok(AtBlock::Current),
        Some(v) if v.len() == 32 => Ok(AtBlock::Changed(U256::from_be_slice(&v))),
        Some(v) => Err(StoreError::Corrupt(format!("storage history record of {} bytes", v.len()))),
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
