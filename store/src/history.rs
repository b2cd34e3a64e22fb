//! State history: what every account and storage slot held at the end of
//! any retained block.
//!
//! Each commit records, for every account and slot its block changes, the
//! value it held *before* the block (its prior), keyed by (key, block).
//! The value at the end of block `n` is then the prior recorded by the
//! first block after `n` that changed the key, or, if no later block did,
//! the current value. This is reth's change sets plus history index folded
//! into one sorted table per kind: one range read finds the first change
//! after `n`. The priors come free from the commit's own writes (redb's
//! `insert` and `remove` return the value they replace).
//!
//! An account wiped by a creation, self-destruct or EIP-161 deletion has
//! every slot it held recorded, so its storage reads as it was before.
//!
//! Blocks committed before a data dir kept history (an older sluice) have
//! none: the oldest block with state is kept in `meta` (`history_from`)
//! and reads below it are refused, never answered with today's values.

use alloy_primitives::{Address, U256};
use redb::{ReadTransaction, ReadableTable, Table, TableDefinition};

use crate::StoreError;

/// (address ++ block, big-endian) -> the account before that block: an
/// encoded account, or empty when it did not exist.
pub(crate) const ACCOUNT_HISTORY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("account_history");
/// (address ++ slot ++ block, big-endian) -> the slot's value before that
/// block (32 bytes).
pub(crate) const STORAGE_HISTORY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("storage_history");

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

/// The history tables of one commit's write transaction.
pub(crate) struct HistoryWriter<'t> {
    pub(crate) accounts: Table<'t, &'static [u8], &'static [u8]>,
    pub(crate) storage: Table<'t, &'static [u8], &'static [u8]>,
    pub(crate) block: u64,
}

impl HistoryWriter<'_> {
    /// `address` held `prior` (an encoded account; `None`: absent) before
    /// this block.
    pub(crate) fn account(&mut self, address: &Address, prior: Option<&[u8]>) -> Result<(), redb::Error> {
        if self.block == 0 {
            // Genesis priors would serve reads before block 0: none.
            return Ok(());
        }
        let k = account_key(address, self.block);
        self.accounts.insert(k.as_slice(), prior.unwrap_or_default())?;
        Ok(())
    }

    /// Slot `slot` of `address` held `prior` before this block. With
    /// `keep`, a prior already recorded in this block stays (an account
    /// wiped and then written: the wipe recorded the true prior first).
    pub(crate) fn slot(
        &mut self,
        address: &Address,
        slot: &U256,
        prior: U256,
        keep: bool,
    ) -> Result<(), redb::Error> {
        if self.block == 0 {
            return Ok(());
        }
        let k = slot_key(address, slot, self.block);
        if keep && self.storage.get(k.as_slice())?.is_some() {
            return Ok(());
        }
        self.storage.insert(k.as_slice(), prior.to_be_bytes::<32>().as_slice())?;
        Ok(())
    }
}

impl HistoryWriter<'_> {
    /// Drops what block `b` recorded (its change set `set` names the keys;
    /// a wiped account's slots are found by scanning its history).
    pub(crate) fn forget(&mut self, b: u64, set: &sluice_messages::ChangeSet) -> Result<(), redb::Error> {
        for c in &set.accounts {
            self.accounts.remove(account_key(&c.address, b).as_slice())?;
            if c.deleted || c.storage_cleared {
                let lo = slot_key(&c.address, &U256::ZERO, 0);
                let hi = slot_key(&c.address, &U256::MAX, u64::MAX);
                let at_b = b.to_be_bytes();
                let gone = self
                    .storage
                    .extract_from_if::<&[u8], _>(lo.as_slice()..=hi.as_slice(), |k, _| k[52..] == at_b)?;
                for entry in gone {
                    entry?;
                }
            }
            for (slot, _) in &c.storage {
                self.storage.remove(slot_key(&c.address, slot, b).as_slice())?;
            }
        }
        Ok(())
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
    r: &ReadTransaction,
    table: TableDefinition<&[u8], &[u8]>,
    lo: &[u8],
    hi: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    let table = match r.open_table(table) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let first = table.range::<&[u8]>(lo..=hi).map_err(io)?.next();
    first.map(|entry| entry.map(|(_, v)| v.value().to_vec()).map_err(io)).transpose()
}

/// The account `address` at the end of block `n`, from the history (the
/// encoded account, `None` if it did not exist).
pub(crate) fn account_at(
    r: &ReadTransaction,
    address: &Address,
    n: u64,
) -> Result<AtBlock<Option<Vec<u8>>>, StoreError> {
    let (lo, hi) = (account_key(address, n.saturating_add(1)), account_key(address, u64::MAX));
    Ok(match first_change(r, ACCOUNT_HISTORY, &lo, &hi)? {
        None => AtBlock::Current,
        Some(v) => AtBlock::Changed((!v.is_empty()).then_some(v)),
    })
}

/// Slot `slot` of `address` at the end of block `n`, from the history.
pub(crate) fn slot_at(
    r: &ReadTransaction,
    address: &Address,
    slot: &U256,
    n: u64,
) -> Result<AtBlock<U256>, StoreError> {
    let (lo, hi) = (slot_key(address, slot, n.saturating_add(1)), slot_key(address, slot, u64::MAX));
    match first_change(r, STORAGE_HISTORY, &lo, &hi)? {
        None => Ok(AtBlock::Current),
        Some(v) if v.len() == 32 => Ok(AtBlock::Changed(U256::from_be_slice(&v))),
        Some(v) => Err(StoreError::Corrupt(format!("storage history record of {} bytes", v.len()))),
    }
}

fn io(e: impl std::fmt::Display) -> StoreError {
    crate::db::io_error(e)
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
