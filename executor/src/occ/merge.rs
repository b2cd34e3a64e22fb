//! The block's change set from the multi-version memory once every
//! transaction is committed: only committed incarnations remain in it, so
//! each location's last version is its end-of-block value.
//!
//! Each worker turns its share of the shards into sorted partial results;
//! accounts whose storage was never written become finished changes right
//! there, the few others (contracts) are joined with their slots at the end.
//! The rules are the sequential overlay's (see [`crate::sequential`]),
//! replayed per account over its versions in block order.

use alloy_primitives::{Address, U256};
use revm::{primitives::KECCAK_EMPTY, state::Bytecode};
use sluice_messages::{AccountChange, ChangeSet, CodeChange};
use sluice_store::{Account as StoredAccount, StateReader};

use super::{
    cell::AccountCell,
    commit::CoinbaseState,
    footprint::{event, field, AccountValue},
    mv::MvMemory,
};
use crate::db::{deleted, normalize_code_hash, DbError};

/// An account at the end of the block.
#[derive(Debug)]
pub(crate) struct AccountFinal {
    address: Address,
    base: Option<StoredAccount>,
    value: AccountValue,
    code: Option<Bytecode>,
    /// Created, self-destructed, or deleted while it existed.
    wiped: bool,
    /// The last transaction after which its earlier storage reads zero.
    last_wipe: Option<u32>,
}

impl AccountFinal {
    pub(crate) fn coinbase(address: Address, state: &CoinbaseState) -> Self {
        AccountFinal {
            address,
            base: state.base,
            value: state.value,
            code: state.code.clone(),
            wiped: false,
            last_wipe: None,
        }
    }

    fn replay(reader: &dyn StateReader, address: Address, cell: &AccountCell) -> Result<Self, DbError> {
        let base = match cell.base {
            Some(base) => base,
            None => reader.account(&address)?,
        };
        let mut f = AccountFinal {
            address,
            base,
            value: AccountValue::from_stored(base.as_ref()),
            code: None,
            wiped: false,
            last_wipe: None,
        };
        for v in cell.versions.as_slice() {
            let m = v.mask;
            if m & (event::CREATED | event::DESTROYED) != 0 || (m & event::EMPTIED != 0 && f.value.exists) {
                f.wiped = true;
            }
            if m & event::WIPES != 0 {
                f.last_wipe = Some(v.tx);
            }
            if m & field::BALANCE != 0 {
                f.value.balance = v.value.balance;
            }
            if m & field::NONCE != 0 {
                f.value.nonce = v.value.nonce;
            }
            if m & field::CODE != 0 {
                f.value.code_hash = v.value.code_hash;
                f.code.clone_from(&v.code);
            }
            if m & field::EXISTS != 0 {
                f.value.exists = v.value.exists;
            }
        }
        Ok(f)
    }

    /// Its entry in the change set, if it has one; `slots` are its written
    /// slots, sorted.
    pub(crate) fn change(
        &self,
        reader: &dyn StateReader,
        slots: &[SlotFinal],
    ) -> Result<Option<AccountChange>, DbError> {
        let address = self.address;
        if !self.value.exists {
            return Ok(self.base.is_some().then(|| deleted(address)));
        }
        let start_code_hash = self.base.map_or(KECCAK_EMPTY, |a| normalize_code_hash(a.code_hash));
        let v = self.value;
        let info_changed = self
            .base
            .is_none_or(|a| a.balance != v.balance || a.nonce != v.nonce || start_code_hash != v.code_hash);
        let mut storage = Vec::new();
        for s in slots {
            let now = if self.last_wipe.is_some_and(|w| s.tx < w) { U256::ZERO } else { s.value };
            let changed = if self.wiped {
                !now.is_zero()
            } else {
                let start = match s.base {
                    Some(start) => start,
                    None if self.base.is_some() => reader.storage(&address, &s.key)?,
                    None => U256::ZERO,
                };
                now != start
            };
            if changed {
                storage.push((s.key, now));
            }
        }
        if !info_changed && !self.wiped && storage.is_empty() {
            return Ok(None);
        }
        let code = if v.code_hash == start_code_hash {
            None
        } else {
            let code = match &self.code {
                Some(code) => code.original_bytes(),
                None => reader.code(&v.code_hash)?,
            };
            Some(CodeChange { hash: v.code_hash, code })
        };
        Ok(Some(AccountChange {
            address,
            deleted: false,
            balance: v.balance,
            nonce: v.nonce,
            code,
            storage_cleared: self.wiped,
            storage,
        }))
    }
}

/// A written storage slot at the end of the block.
#[derive(Debug)]
pub(crate) struct SlotFinal {
    address: Address,
    key: U256,
    value: U256,
    /// Its last writer.
    tx: u32,
    base: Option<U256>,
}

/// One worker's share of the change set: the changes of the accounts whose
/// address starts with a byte in its range, sorted.
#[derive(Debug, Default)]
pub(crate) struct MergePart {
    changes: Vec<AccountChange>,
}

/// Addresses as integers, in the same order: cheaper to compare in sorts.
fn address_key(a: &Address) -> (u64, u64, u32) {
    let b = a.as_slice();
    let mut hi = [0u8; 8];
    let mut mid = [0u8; 8];
    let mut lo = [0u8; 4];
    hi.copy_from_slice(&b[..8]);
    mid.copy_from_slice(&b[8..16]);
    lo.copy_from_slice(&b[16..]);
    (u64::from_be_bytes(hi), u64::from_be_bytes(mid), u32::from_be_bytes(lo))
}

/// Worker `worker` of `workers`: the accounts whose address starts with a
/// byte in this range. Ranges split the change set into consecutive pieces,
/// so the parts only need concatenating.
fn first_bytes(worker: usize, workers: usize) -> std::ops::Range<usize> {
    let workers = workers.max(1);
    256 * worker / workers..256 * (worker + 1) / workers
}

/// Builds worker `worker`'s part of the change set; `coinbase` is the
/// coinbase's end state (it is never versioned).
pub(crate) fn merge_part(
    reader: &dyn StateReader,
    mv: &MvMemory,
    coinbase: AccountFinal,
    worker: usize,
    workers: usize,
) -> Result<MergePart, DbError> {
    let range = first_bytes(worker, workers);
    let mine = |a: &Address| range.contains(&usize::from(a[0]));
    // Built in memory order into buckets by the address's first byte, each
    // then ordered through a small index (moving large changes around in a
    // sort costs more than building them), and concatenated: visiting cells
    // or gathering results in address order would miss the cache each time.
    let per_bucket = mv.len_hint() / 200;
    let mut buckets: Vec<Vec<Option<AccountChange>>> =
        range.clone().map(|_| Vec::with_capacity(per_bucket)).collect();
    let mut joins = Vec::new();
    let mut slots = Vec::new();
    // Every worker reads every shard (for its own addresses), starting at a
    // different one so that they rarely wait for each other's lock.
    let shards = mv.shards();
    for i in 0..shards {
        let (accounts, slot_cells) = mv.shard((i + shards * worker / workers.max(1)) % shards);
        for (key, cell) in slot_cells.iter() {
            if let (true, Some(last)) = (mine(&key.key.0), cell.versions.as_slice().last()) {
                let (address, key) = key.key;
                slots.push(SlotFinal { address, key, value: last.value, tx: last.tx, base: cell.base });
            }
        }
        for (key, cell) in accounts.iter() {
            let address = key.key;
            if !mine(&address) || address == coinbase.address {
                continue;
            }
            if cell.versions.is_empty() && !cell.storage_written {
                continue;
            }
            let f = AccountFinal::replay(reader, address, cell)?;
            if cell.storage_written {
                joins.push(f);
            } else if let Some(change) = f.change(reader, &[])? {
                buckets[usize::from(address[0]) - range.start].push(Some(change));
            }
        }
    }
    // Accounts with storage written (contracts: few), with their slots.
    if mine(&coinbase.address) {
        joins.push(coinbase);
    }
    joins.sort_unstable_by_key(|f| address_key(&f.address));
    slots.sort_unstable_by_key(|s| (address_key(&s.address), s.key));
    let mut at = 0;
    for f in joins {
        let end = at + slots[at..].partition_point(|s| s.address == f.address);
        if let Some(change) = f.change(reader, &slots[at..end])? {
            buckets[usize::from(f.address[0]) - range.start].push(Some(change));
        }
        at = end;
    }
    // Publishing a slot flags its account, so every slot was joined.
    assert!(at == slots.len(), "a storage slot was written for an account that was not");
    let mut part = MergePart { changes: Vec::with_capacity(buckets.iter().map(Vec::len).sum()) };
    let mut order = Vec::new();
    for mut bucket in buckets {
        order.clear();
        order.extend(
            bucket.iter().enumerate().filter_map(|(i, c)| Some((address_key(&c.as_ref()?.address), i))),
        );
        order.sort_unstable();
        part.changes.extend(order.iter().filter_map(|(_, i)| bucket[*i].take()));
    }
    Ok(part)
}

/// The change set: the workers' parts, in worker order.
pub(crate) fn assemble(parts: Vec<MergePart>) -> ChangeSet {
    let mut accounts = Vec::with_capacity(parts.iter().map(|p| p.changes.len()).sum());
    for mut part in parts {
        accounts.append(&mut part.changes);
    }
    ChangeSet { accounts }
}
