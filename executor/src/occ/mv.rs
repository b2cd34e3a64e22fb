//! Multi-version memory: for every location, the value each transaction of
//! the block wrote, so that transaction `k` reads the latest write of a
//! transaction before `k`, or the block-start state.
//!
//! Sharded maps behind short mutexes (at most two held at once, taken in
//! shard order: a plain transfer updates its two accounts). Block-start
//! values are cached in the cells the first time they are needed, so the
//! state reader is asked once per location per block. The coinbase account
//! is never stored here: fees make it change in every transaction, so the
//! commit serves it (see `commit.rs`); its storage slots are stored here.

use std::{
    collections::HashMap,
    hash::{BuildHasher, BuildHasherDefault, Hash, Hasher},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, MutexGuard,
    },
};

use alloy_primitives::{
    map::{AddressSet, DefaultHashBuilder},
    Address, U256,
};
use sluice_store::StateReader;

use super::{
    cell::{load_base, view, AccountCell, AccountVersion, AccountView, SlotCell, SlotVersion},
    footprint::{event, field, AccountRead, AccountWrite, SlotRead, SlotWrite, Version},
};
use crate::db::DbError;

/// Shards per map (a power of two).
const SHARDS: usize = 64;

/// Locks a mutex, ignoring poisoning: a panicking worker aborts the whole
/// parallel attempt, so nothing reads the data it may have left half-done.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A key with its hash, computed once per access: it picks the shard and
/// is passed through as the map's hash (foldhash, randomly seeded, so keys
/// chosen by users cannot be aimed at one bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hashed<K> {
    hash: u64,
    pub(crate) key: K,
}

impl<K> Hash for Hashed<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Passes a [`Hashed`] key's hash through.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else still hashes correctly.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Map<K, V> = HashMap<Hashed<K>, V, BuildHasherDefault<PassThrough>>;
pub(crate) type AccountMap = Map<Address, AccountCell>;
pub(crate) type SlotMap = Map<(Address, U256), SlotCell>;

#[repr(align(64))]
#[derive(Debug, Default)]
struct Shard<K, V>(Mutex<Map<K, V>>);

/// The block's multi-version memory.
pub(crate) struct MvMemory {
    hasher: DefaultHashBuilder,
    accounts: Box<[Shard<Address, AccountCell>]>,
    slots: Box<[Shard<(Address, U256), SlotCell>]>,
    /// Some write so far wiped an account's storage; until then slot reads
    /// need not look at accounts.
    any_wipes: AtomicBool,
}

impl std::fmt::Debug for MvMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MvMemory").finish_non_exhaustive()
    }
}

impl MvMemory {
    /// Room for about `accounts` accounts.
    pub(crate) fn new(accounts: usize) -> Self {
        let per_shard = accounts / SHARDS + 1;
        let shard = || Shard(Mutex::new(Map::with_capacity_and_hasher(per_shard, Default::default())));
        MvMemory {
            hasher: DefaultHashBuilder::default(),
            accounts: (0..SHARDS).map(|_| shard()).collect(),
            slots: (0..SHARDS).map(|_| Shard(Mutex::default())).collect(),
            any_wipes: AtomicBool::new(false),
        }
    }

    fn account_key(&self, address: Address) -> Hashed<Address> {
        Hashed { hash: self.hasher.hash_one(address), key: address }
    }

    fn slot_key(&self, address: Address, key: U256) -> Hashed<(Address, U256)> {
        Hashed { hash: self.hasher.hash_one((address, key)), key: (address, key) }
    }

    /// The shard of a key: bits the map itself does not lean on (hashbrown
    /// uses the low bits for the bucket and the top seven as a tag).
    fn shard_of(hash: u64) -> usize {
        (hash >> 32) as usize % SHARDS
    }

    fn account_shard(&self, key: &Hashed<Address>) -> MutexGuard<'_, AccountMap> {
        lock(&self.accounts[Self::shard_of(key.hash)].0)
    }

    fn slot_shard(&self, key: &Hashed<(Address, U256)>) -> MutexGuard<'_, SlotMap> {
        lock(&self.slots[Self::shard_of(key.hash)].0)
    }

    /// The account as transaction `tx` sees it: each field from the latest
    /// write before `tx`, else from the block-start state.
    pub(crate) fn read_account(
        &self,
        reader: &dyn StateReader,
        address: Address,
        tx: u32,
    ) -> Result<AccountView, DbError> {
        let k = self.account_key(address);
        let mut shard = self.account_shard(&k);
        view(shard.entry(k).or_default(), reader, address, tx)
    }

    /// Runs `f` on the cells of two different accounts, holding both shard
    /// locks (taken in shard order, so two such calls cannot deadlock, and
    /// nothing else holds more than one).
    pub(crate) fn with_pair<R>(
        &self,
        a: Address,
        b: Address,
        f: impl FnOnce(&mut AccountCell, &mut AccountCell) -> R,
    ) -> R {
        assert!(a != b, "a pair of accounts must be two accounts");
        let (ka, kb) = (self.account_key(a), self.account_key(b));
        let (sa, sb) = (Self::shard_of(ka.hash), Self::shard_of(kb.hash));
        if sa == sb {
            let mut shard = lock(&self.accounts[sa].0);
            shard.entry(ka).or_default();
            shard.entry(kb).or_default();
            let [Some(ca), Some(cb)] = shard.get_disjoint_mut([&ka, &kb]) else {
                unreachable!("both cells were just inserted");
            };
            return f(ca, cb);
        }
        let (first, second) = if sa < sb { (sa, sb) } else { (sb, sa) };
        let mut g1 = lock(&self.accounts[first].0);
        let mut g2 = lock(&self.accounts[second].0);
        let (ga, gb) = if sa < sb { (&mut g1, &mut g2) } else { (&mut g2, &mut g1) };
        f(ga.entry(ka).or_default(), gb.entry(kb).or_default())
    }

    /// The storage slot as transaction `tx` sees it.
    pub(crate) fn read_slot(
        &self,
        reader: &dyn StateReader,
        address: Address,
        key: U256,
        tx: u32,
    ) -> Result<SlotRead, DbError> {
        let wipes = self.any_wipes.load(Ordering::Acquire);
        let sk = self.slot_key(address, key);
        if !wipes {
            let shard = self.slot_shard(&sk);
            if let Some(cell) = shard.get(&sk) {
                if let Some(v) = cell.versions.below(tx).next() {
                    let version = Version::of(v.tx, v.incarnation);
                    return Ok(SlotRead { address, key, version, value: v.value });
                }
                if let Some(value) = cell.base {
                    return Ok(SlotRead { address, key, version: Version::BASE, value });
                }
            }
        }
        // The latest wipe of the account before `tx` (a wipe and a slot
        // write by the same transaction: the write came after the wipe), and
        // whether the account existed at block start (if not, its storage is
        // empty and the reader is not asked, as in the sequential overlay).
        let (wipe, existed) = {
            let k = self.account_key(address);
            let mut shard = self.account_shard(&k);
            let cell = shard.entry(k).or_default();
            let wipe = if wipes {
                cell.versions.below(tx).find(|v| v.mask & event::WIPES != 0).map(|v| (v.tx, v.incarnation))
            } else {
                None
            };
            (wipe, load_base(cell, reader, &address)?.is_some())
        };
        let mut shard = self.slot_shard(&sk);
        let cell = shard.entry(sk).or_default();
        let latest = cell.versions.below(tx).next().copied();
        if let Some((wiped_by, incarnation)) = wipe {
            if latest.is_none_or(|v| v.tx < wiped_by) {
                let version = Version::of(wiped_by, incarnation);
                return Ok(SlotRead { address, key, version, value: U256::ZERO });
            }
        }
        if let Some(v) = latest {
            return Ok(SlotRead { address, key, version: Version::of(v.tx, v.incarnation), value: v.value });
        }
        let value = match cell.base {
            Some(value) => value,
            None => {
                let value = if existed { reader.storage(&address, &key)? } else { U256::ZERO };
                cell.base = Some(value);
                value
            }
        };
        Ok(SlotRead { address, key, version: Version::BASE, value })
    }

    /// Whether `read`, made by transaction `tx`, still holds: same version,
    /// or (after a re-run that wrote the same) same value.
    pub(crate) fn account_read_holds(
        &self,
        reader: &dyn StateReader,
        read: &AccountRead,
        tx: u32,
    ) -> Result<bool, DbError> {
        let now = self.read_account(reader, read.address, tx)?;
        for (bit, i) in field::EACH {
            if read.mask & bit != 0
                && now.versions[i] != read.versions[i]
                && !now.value.same(&read.value, bit)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `read`, made by transaction `tx`, still holds.
    pub(crate) fn slot_read_holds(
        &self,
        reader: &dyn StateReader,
        read: &SlotRead,
        tx: u32,
    ) -> Result<bool, DbError> {
        let now = self.read_slot(reader, read.address, read.key, tx)?;
        Ok(now.version == read.version || now.value == read.value)
    }

    /// Makes transaction `tx`'s writes visible to later transactions,
    /// replacing its earlier incarnation's at the same locations.
    /// `flagged` holds the accounts this worker already flagged as having
    /// storage written in this block, so that a contract written by every
    /// transaction does not cost a lock on its account each time.
    pub(crate) fn publish<'w>(
        &self,
        tx: u32,
        incarnation: u32,
        accounts: impl IntoIterator<Item = &'w AccountWrite>,
        slots: &[SlotWrite],
        flagged: &mut AddressSet,
    ) {
        for w in accounts {
            if w.mask & event::WIPES != 0 {
                self.any_wipes.store(true, Ordering::Release);
            }
            let version =
                AccountVersion { tx, incarnation, mask: w.mask, value: w.value, code: w.code.clone() };
            let k = self.account_key(w.address);
            self.account_shard(&k).entry(k).or_default().versions.insert(version);
        }
        for w in slots {
            if flagged.insert(w.address) {
                let k = self.account_key(w.address);
                self.account_shard(&k).entry(k).or_default().storage_written = true;
            }
            let version = SlotVersion { tx, incarnation, value: w.value };
            let k = self.slot_key(w.address, w.key);
            self.slot_shard(&k).entry(k).or_default().versions.insert(version);
        }
    }

    /// Removes transaction `tx`'s writes at these locations.
    pub(crate) fn unpublish<'w>(
        &self,
        tx: u32,
        accounts: impl IntoIterator<Item = &'w AccountWrite>,
        slots: &[SlotWrite],
    ) {
        for w in accounts {
            let k = self.account_key(w.address);
            if let Some(cell) = self.account_shard(&k).get_mut(&k) {
                cell.versions.remove(tx);
            }
        }
        for w in slots {
            let k = self.slot_key(w.address, w.key);
            if let Some(cell) = self.slot_shard(&k).get_mut(&k) {
                cell.versions.remove(tx);
            }
        }
    }

    /// The number of shards of each map.
    pub(crate) fn shards(&self) -> usize {
        SHARDS
    }

    /// Shard `i` of both maps (for the change set, once every transaction is
    /// committed).
    pub(crate) fn shard(&self, i: usize) -> (MutexGuard<'_, AccountMap>, MutexGuard<'_, SlotMap>) {
        (lock(&self.accounts[i].0), lock(&self.slots[i].0))
    }

    /// About how many accounts the memory holds (read without locking
    /// every shard: one shard, scaled).
    pub(crate) fn len_hint(&self) -> usize {
        lock(&self.accounts[0].0).len() * SHARDS
    }

    /// Ready for another block (keeping the maps' capacity).
    pub(crate) fn reset(&mut self) {
        for shard in self.accounts.iter_mut().map(|s| &mut s.0) {
            shard.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        }
        for shard in self.slots.iter_mut() {
            shard.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        }
        *self.any_wipes.get_mut() = false;
    }
}
