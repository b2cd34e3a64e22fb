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
use crate::db::{normalize_code_hash, DbError};

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
    fn change(
        &self,
        reader: &dyn StateReader,
        slots: &[SlotFinal],
    ) -> Result<Option<AccountChange>, DbError> {
        let address = self.address;
        if !self.value.exists {
            return Ok(self.base.is_some().then(|| AccountChange {
                address,
                deleted: true,
                balance: U256::ZERO,
                nonce: 0,
                code: None,
                storage_cleared: true,
                storage: Vec::new(),
            }));
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

/// One worker's share of the change set, each list sorted.
#[derive(Debug, Default)]
pub(crate) struct MergePart {
    changes: Vec<AccountChange>,
    /// Accounts with storage written, finished in `assemble`.
    joins: Vec<AccountFinal>,
    slots: Vec<SlotFinal>,
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

/// Works through shards `worker`, `worker + workers`, ... of `mv`.
pub(crate) fn merge_part(
    reader: &dyn StateReader,
    mv: &MvMemory,
    coinbase: Address,
    worker: usize,
    workers: usize,
) -> Result<MergePart, DbError> {
    let mut part = MergePart::default();
    let shards: Vec<_> = (worker..mv.shards()).step_by(workers.max(1)).map(|i| mv.shard(i)).collect();
    // Built in memory order into buckets by the address's first byte, each
    // then sorted (small, in cache) and the buckets concatenated: visiting
    // the cells in address order, or gathering results in address order,
    // would miss the cache on each account.
    let total: usize = shards.iter().map(|(accounts, _)| accounts.len()).sum();
    let mut buckets: Vec<Vec<AccountChange>> =
        (0..256).map(|_| Vec::with_capacity(total / 200 + 1)).collect();
    for (accounts, slots) in &shards {
        for (key, cell) in slots.iter() {
            if let Some(last) = cell.versions.as_slice().last() {
                let (address, key) = key.key;
                part.slots.push(SlotFinal { address, key, value: last.value, tx: last.tx, base: cell.base });
            }
        }
        for (key, cell) in accounts.iter() {
            let address = key.key;
            // The coinbase is never versioned: it is finished from the
            // commit's state, in `assemble`.
            if address == coinbase || (cell.versions.is_empty() && !cell.storage_written) {
                continue;
            }
            let f = AccountFinal::replay(reader, address, cell)?;
            if cell.storage_written {
                part.joins.push(f);
            } else if let Some(change) = f.change(reader, &[])? {
                buckets[usize::from(address[0])].push(change);
            }
        }
    }
    // Not cleared here: both workers would free version lists the other
    // allocated at once, which glibc serializes on its arena locks. The next
    // block clears the memory on one thread (`MvMemory::reset`).
    drop(shards);
    part.changes.reserve(buckets.iter().map(Vec::len).sum());
    for mut bucket in buckets {
        bucket.sort_unstable_by_key(|c| address_key(&c.address));
        part.changes.append(&mut bucket);
    }
    part.joins.sort_unstable_by_key(|f| address_key(&f.address));
    part.slots.sort_unstable_by_key(|s| (address_key(&s.address), s.key));
    Ok(part)
}

/// Puts the workers' parts and the coinbase together, in canonical order.
pub(crate) fn assemble(
    reader: &dyn StateReader,
    parts: Vec<MergePart>,
    coinbase: AccountFinal,
) -> Result<ChangeSet, DbError> {
    let mut changes = Vec::with_capacity(parts.len() + 1);
    let mut joins = Vec::with_capacity(parts.len() + 1);
    let mut slots = Vec::with_capacity(parts.len());
    for part in parts {
        changes.push(part.changes);
        joins.push(part.joins);
        slots.push(part.slots);
    }
    joins.push(vec![coinbase]);
    let joins = kmerge(joins, |f: &AccountFinal| f.address);
    let slots = kmerge(slots, |s| (s.address, s.key));
    let mut joined = Vec::with_capacity(joins.len());
    let mut at = 0;
    for f in joins {
        let start = at;
        let end = start + slots[start..].partition_point(|s| s.address == f.address);
        at = end;
        if let Some(change) = f.change(reader, &slots[start..end])? {
            joined.push(change);
        }
    }
    // Publishing a slot flags its account, so every slot was joined.
    assert!(at == slots.len(), "a storage slot was written for an account that was not");
    changes.push(joined);
    Ok(ChangeSet { accounts: kmerge(changes, |c| c.address) })
}

/// Merges sorted lists into one sorted list.
fn kmerge<T, K: Ord>(lists: Vec<Vec<T>>, key: impl Fn(&T) -> K) -> Vec<T> {
    let total = lists.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total);
    let mut iters: Vec<_> = lists.into_iter().map(|l| l.into_iter().peekable()).collect();
    loop {
        let mut best: Option<(usize, K)> = None;
        for (i, it) in iters.iter_mut().enumerate() {
            if let Some(head) = it.peek() {
                let k = key(head);
                if best.as_ref().is_none_or(|(_, b)| k < *b) {
                    best = Some((i, k));
                }
            }
        }
        let Some((i, _)) = best else {
            return out;
        };
        if let Some(item) = iters[i].next() {
            out.push(item);
        }
    }
}
