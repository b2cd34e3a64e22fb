//! A bounded in-memory cache of current state over the database.
//!
//! A durable store keeps current state on disk only; this cache holds the
//! accounts, storage slots and code read or written recently, each kind
//! within its own byte budget (S3-FIFO eviction, from `quick_cache`). A miss
//! reads the database and fills the cache.
//!
//! Why a miss never fills a stale value: a commit first writes the block to
//! the database, then (under `gate`, exclusively) writes every account and
//! slot the block changed into the cache and bumps `epoch`. A reader that
//! missed notes the epoch before reading the database and fills under
//! `gate` (shared) only if the epoch is unchanged. If it read before the
//! database write, any key the commit changed is overwritten by the commit
//! afterwards or, once the epoch moved, not filled; if it read after, it
//! read the new value. Readers that hit take no lock beyond the cache's own.
//!
//! Between the database write and the cache update a reader may see some of
//! the committing block's values before the store's head moves to it. The
//! executor reads that block's changes from its overlay until the commit
//! returns (see [`crate::uncommitted`]), so it never sees the mix; an RPC read
//! at `latest` may, for the instant between the write and the head's move
//! (reads at a named block go through the history: see
//! [`crate::Store::state_at`]).

use std::sync::atomic::{AtomicU64, Ordering};

use alloy_primitives::{Address, Bytes, B256, U256};
use parking_lot::RwLock;
use quick_cache::{sync::Cache, Weighter};
use sluice_messages::ChangeSet;

use crate::Account;

/// Byte budgets of the state cache, one per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBytes {
    /// Accounts (balance, nonce, code hash; absent accounts too).
    pub accounts: u64,
    /// Storage slots.
    pub storage: u64,
    /// Contract code, weighed by its length.
    pub code: u64,
}

impl Default for CacheBytes {
    fn default() -> Self {
        CacheBytes { accounts: 128 << 20, storage: 128 << 20, code: 64 << 20 }
    }
}

/// What one cached entry costs beyond its key and value: the cache's
/// per-entry state (64-68 bytes) and its hash table's share (10-20, up to
/// twice that once the table rounds up to a power of two), measured with
/// `Cache::memory_used` from 1,000 to 1,000,000 entries; the test below
/// holds the budgets to it. So an account costs up to ~210 bytes, a slot
/// ~190.
const ENTRY_OVERHEAD: u64 = 104;

fn entry_bytes<K, V>() -> u64 {
    (std::mem::size_of::<(K, V)>() as u64) + ENTRY_OVERHEAD
}

/// Weighs code by its length, so the budget is in bytes.
#[derive(Clone)]
struct CodeWeight;

impl Weighter<B256, Bytes> for CodeWeight {
    fn weight(&self, _key: &B256, code: &Bytes) -> u64 {
        entry_bytes::<B256, Bytes>() + code.len() as u64
    }
}

/// Cache hits and misses since start, per kind (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Account reads answered from memory.
    pub account_hits: u64,
    /// Account reads that went to the database.
    pub account_misses: u64,
    /// Slot reads answered from memory.
    pub storage_hits: u64,
    /// Slot reads that went to the database.
    pub storage_misses: u64,
    /// Bytes held now, all kinds.
    pub bytes: u64,
}

/// The cache (see the module docs for its consistency rule).
pub struct StateCache {
    accounts: Cache<Address, Option<Account>>,
    storage: Cache<(Address, U256), U256>,
    codes: Cache<B256, Bytes, CodeWeight>,
    epoch: AtomicU64,
    gate: RwLock<()>,
    /// Hits and misses: account, account, storage, storage.
    counts: [AtomicU64; 4],
}

/// The epoch a reader saw before it read the database: what it may fill.
#[derive(Debug, Clone, Copy)]
pub struct Epoch(u64);

impl StateCache {
    /// A cache within `limits`.
    pub fn new(limits: CacheBytes) -> StateCache {
        let items = |bytes: u64, each: u64| (bytes / each).max(1) as usize;
        let code_items = items(limits.code, 4096);
        StateCache {
            accounts: Cache::new(items(limits.accounts, entry_bytes::<Address, Option<Account>>())),
            storage: Cache::new(items(limits.storage, entry_bytes::<(Address, U256), U256>())),
            codes: Cache::with_weighter(code_items, limits.code.max(1), CodeWeight),
            epoch: AtomicU64::new(0),
            gate: RwLock::new(()),
            counts: Default::default(),
        }
    }

    /// The account if cached: `Some(None)` is an account known absent.
    pub fn account(&self, address: &Address) -> Option<Option<Account>> {
        let found = self.accounts.get(address);
        self.count(0, found.is_some());
        found
    }

    fn count(&self, kind: usize, hit: bool) {
        self.counts[kind + usize::from(!hit)].fetch_add(1, Ordering::Relaxed);
    }

    /// The slot if cached.
    pub fn storage(&self, address: &Address, slot: &U256) -> Option<U256> {
        let found = self.storage.get(&(*address, *slot));
        self.count(2, found.is_some());
        found
    }

    /// Code by hash if cached.
    pub fn code(&self, hash: &B256) -> Option<Bytes> {
        self.codes.get(hash)
    }

    /// To be taken before a database read whose result is filled.
    pub fn epoch(&self) -> Epoch {
        Epoch(self.epoch.load(Ordering::Acquire))
    }

    /// Fills an account read from the database at `seen`, unless a commit
    /// updated the cache since.
    pub fn fill_account(&self, seen: Epoch, address: Address, account: Option<Account>) {
        let _gate = self.gate.read();
        if self.epoch.load(Ordering::Acquire) == seen.0 {
            self.accounts.insert(address, account);
        }
    }

    /// Fills a slot read from the database at `seen`, as
    /// [`StateCache::fill_account`].
    pub fn fill_storage(&self, seen: Epoch, address: Address, slot: U256, value: U256) {
        let _gate = self.gate.read();
        if self.epoch.load(Ordering::Acquire) == seen.0 {
            self.storage.insert((address, slot), value);
        }
    }

    /// Fills code read from the database: code under a hash never changes.
    pub fn fill_code(&self, hash: B256, code: Bytes) {
        self.codes.insert(hash, code);
    }

    /// Records a block the database has just committed: every account and
    /// slot it changed, with `code_hashes[i]` the code hash change `i`
    /// leaves and `wiped` the slots its deleted or recreated accounts held.
    pub fn committed(&self, changes: &ChangeSet, code_hashes: &[B256], wiped: &[(Address, U256)]) {
        let _gate = self.gate.write();
        for (address, slot) in wiped {
            self.storage.remove(&(*address, *slot));
        }
        for (c, code_hash) in changes.accounts.iter().zip(code_hashes) {
            if c.deleted {
                self.accounts.insert(c.address, None);
                continue;
            }
            if let Some(code) = &c.code {
                self.codes.insert(code.hash, code.code.clone());
            }
            let account = Account { balance: c.balance, nonce: c.nonce, code_hash: *code_hash };
            self.accounts.insert(c.address, Some(account));
            for (slot, value) in &c.storage {
                self.storage.insert((c.address, *slot), *value);
            }
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Hits, misses and size.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            account_hits: self.counts[0].load(Ordering::Relaxed),
            account_misses: self.counts[1].load(Ordering::Relaxed),
            storage_hits: self.counts[2].load(Ordering::Relaxed),
            storage_misses: self.counts[3].load(Ordering::Relaxed),
            bytes: self.bytes(),
        }
    }

    /// Bytes held: what the cache's own structures use (code's weight
    /// counts each entry and its body; its table is added).
    pub fn bytes(&self) -> u64 {
        let tables = self.accounts.memory_used().total() + self.storage.memory_used().total();
        (tables + self.codes.memory_used().map) as u64 + self.codes.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct(n: u64) -> Option<Account> {
        Some(Account { balance: U256::from(n), nonce: n, code_hash: crate::EMPTY_CODE_HASH })
    }

    /// Filled with several times what its budgets hold, the cache stays
    /// within them, at small and large budgets.
    #[test]
    fn cache_stays_within_its_byte_budgets() {
        for budget in [64u64 << 10, 1 << 20, 3 << 20, 16 << 20] {
            let limits = CacheBytes { accounts: budget, storage: budget, code: budget };
            let cache = StateCache::new(limits);
            let n = budget / 40;
            for i in 0..n {
                let a = sluice_messages::synthetic_address(i);
                cache.fill_account(cache.epoch(), a, acct(i));
                cache.fill_storage(cache.epoch(), a, U256::from(i), U256::from(i));
                if i < n / 100 {
                    cache.fill_code(B256::from(U256::from(i)), Bytes::from(vec![0u8; 5_000]));
                }
            }
            let used_a = cache.accounts.memory_used().total() as u64;
            let used_s = cache.storage.memory_used().total() as u64;
            // Code's weight counts each entry and its body.
            let used_c = cache.codes.memory_used().map as u64 + cache.codes.weight();
            assert!(used_a <= budget, "{budget}: accounts use {used_a}");
            assert!(used_s <= budget, "{budget}: storage uses {used_s}");
            assert!(used_c <= budget + (1 << 16), "{budget}: code uses {used_c}");
            // And it is not trivially empty: most of each budget is used.
            assert!(used_a > budget / 2 && used_s > budget / 2, "{budget}: {used_a} {used_s}");
            assert!(cache.bytes() <= 3 * budget + (1 << 16));
        }
    }

    /// A fill that raced a commit is dropped: the commit's value stays.
    #[test]
    fn a_fill_older_than_a_commit_is_dropped() {
        let cache = StateCache::new(CacheBytes::default());
        let a = Address::repeat_byte(1);
        let seen = cache.epoch();
        let changes = ChangeSet {
            accounts: vec![sluice_messages::AccountChange {
                address: a,
                deleted: false,
                balance: U256::from(9),
                nonce: 9,
                code: None,
                storage_cleared: false,
                storage: vec![(U256::from(1), U256::from(5))],
            }],
        };
        cache.committed(&changes, &[crate::EMPTY_CODE_HASH], &[]);
        // Read from the database before the commit: stale, so not filled.
        cache.fill_account(seen, a, acct(1));
        cache.fill_storage(seen, a, U256::from(1), U256::from(4));
        assert_eq!(cache.account(&a), Some(acct(9)));
        assert_eq!(cache.storage(&a, &U256::from(1)), Some(U256::from(5)));
        // A wipe removes the slots the account held.
        cache.committed(&ChangeSet::default(), &[], &[(a, U256::from(1))]);
        assert_eq!(cache.storage(&a, &U256::from(1)), None);
    }
}
