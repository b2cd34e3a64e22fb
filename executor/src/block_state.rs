//! One block's state during execution: block-start state plus the effects of the transactions
//! applied so far, remembering enough of the block-start values to produce
//! the block's change set (see [`crate::sequential`] for its definition).

use alloy_primitives::{
    map::{AddressMap, Entry as MapEntry, U256Map},
    Address, Bytes, B256, U256,
};
use revm::{
    primitives::KECCAK_EMPTY,
    state::{Account, AccountInfo, Bytecode, EvmState},
    Database, DatabaseRef,
};
use sluice_messages::{AccountChange, ChangeSet};
use sluice_state::{Account as StoredAccount, StateReader};

use crate::db::{account_info, deleted, normalize_code_hash, updated, CodeCache, DbError, StateDb};

/// One storage slot: its value at block start and now.
#[derive(Debug, Clone, Copy)]
struct Slot {
    original: U256,
    current: U256,
}

/// One account as seen during the block.
#[derive(Debug)]
struct Entry {
    /// At block start (`None`: did not exist).
    original: Option<StoredAccount>,
    /// Now (`None`: does not exist).
    current: Option<AccountInfo>,
    /// Slots read or written during the block. When `wiped`, this holds every
    /// slot that can be non-zero.
    storage: U256Map<Slot>,
    /// The block created a contract here or destroyed the account: storage
    /// from before the block no longer applies.
    wiped: bool,
}

impl Entry {
    /// The block-start value of a slot not yet in `storage`. Accounts that
    /// did not exist at block start have no storage, and wiped ones no
    /// longer have what they had.
    fn start_slot(&self, db: StateDb<'_>, address: Address, key: U256) -> Result<U256, DbError> {
        if self.wiped || self.original.is_none() {
            Ok(U256::ZERO)
        } else {
            db.storage_ref(address, key)
        }
    }
}

/// Block-start state with the block's changes on top; the database revm
/// executes against.
#[derive(Debug)]
pub(crate) struct BlockState<'a> {
    db: StateDb<'a>,
    accounts: AddressMap<Entry>,
    /// Analysed code, so each contract is analysed once per block.
    codes: CodeCache,
    /// Served an account that exists empty since [`BlockState::took_empty`]
    /// last asked.
    served_empty: bool,
}

/// Loads an account into the block state on first sight. A free function so the
/// caller can keep using the block state's other fields while holding the entry.
fn load<'m>(
    accounts: &'m mut AddressMap<Entry>,
    db: StateDb<'_>,
    address: Address,
) -> Result<&'m mut Entry, DbError> {
    match accounts.entry(address) {
        MapEntry::Occupied(e) => Ok(e.into_mut()),
        MapEntry::Vacant(v) => {
            let original = db.reader().account(&address)?;
            let current = original.as_ref().map(account_info);
            Ok(v.insert(Entry { original, current, storage: U256Map::default(), wiped: false }))
        }
    }
}

impl<'a> BlockState<'a> {
    /// A block state with no changes yet, with room for `accounts` accounts
    /// (growing a map of large entries copies them all, so size it up front).
    pub(crate) fn with_capacity(state: &'a dyn StateReader, accounts: usize) -> Self {
        BlockState {
            db: StateDb::new(state),
            accounts: AddressMap::with_capacity_and_hasher(accounts, Default::default()),
            codes: CodeCache::default(),
            served_empty: false,
        }
    }

    /// Whether an account that exists empty was served since the last time
    /// this was asked (see `journal/mod.rs` for why it matters).
    pub(crate) fn took_empty(&mut self) -> bool {
        std::mem::take(&mut self.served_empty)
    }

    /// Applies one transaction's state (as returned by revm) on top.
    ///
    /// Follows revm's own `DatabaseCommit` semantics for post-Spurious-Dragon
    /// forks: untouched accounts are ignored, self-destructed ones vanish,
    /// created ones start from empty storage, and touched empty accounts are
    /// deleted (EIP-161).
    pub(crate) fn commit_tx(&mut self, changes: EvmState) -> Result<(), DbError> {
        for (address, account) in changes {
            self.commit_account(address, account, false)?;
        }
        Ok(())
    }

    /// Applies the state of a journal kept across several transactions
    /// (`journal/mod.rs`), of which only the last may have created,
    /// destroyed or deleted an account. Its slots' original values are
    /// those of each slot's last transaction, not of the journal's start,
    /// so every slot it holds is applied, changed or not.
    pub(crate) fn commit_journal(&mut self, state: &EvmState) -> Result<(), DbError> {
        for (address, account) in state {
            if account.is_touched() {
                self.commit_account(*address, account.clone(), true)?;
            }
        }
        Ok(())
    }

    /// Applies one account's state; every slot it holds if `all_slots`,
    /// else only those changed.
    fn commit_account(&mut self, address: Address, account: Account, all_slots: bool) -> Result<(), DbError> {
        let db = self.db;
        {
            if !account.is_touched() {
                return Ok(());
            }
            let entry = load(&mut self.accounts, db, address)?;
            if account.is_selfdestructed() {
                entry.current = None;
                entry.storage.clear();
                entry.wiped = true;
                return Ok(());
            }
            if account.info.is_empty() && !account.is_created() {
                // EIP-161. Deleting an account that exists removes its
                // storage too; "deleting" one that never existed is a no-op.
                if entry.current.is_some() {
                    entry.wiped = true;
                }
                entry.current = None;
                entry.storage.clear();
                return Ok(());
            }
            if account.is_created() {
                entry.storage.clear();
                entry.wiped = true;
            }
            for (key, slot) in account.storage {
                if !all_slots && !slot.is_changed() {
                    continue;
                }
                match entry.storage.get_mut(&key) {
                    Some(s) => s.current = slot.present_value,
                    None => {
                        let original = entry.start_slot(db, address, key)?;
                        entry.storage.insert(key, Slot { original, current: slot.present_value });
                    }
                }
            }
            entry.current = Some(account.info);
        }
        Ok(())
    }

    /// The block's change set: see [`crate::sequential`] for the definition.
    pub(crate) fn change_set(&self) -> Result<ChangeSet, DbError> {
        // Sort small (address, entry) pairs rather than finished changes.
        let mut entries: Vec<(&Address, &Entry)> = self.accounts.iter().collect();
        entries.sort_unstable_by_key(|(address, _)| **address);
        let mut accounts = Vec::new();
        for (address, entry) in entries {
            if let Some(change) = self.account_change(*address, entry)? {
                accounts.push(change);
            }
        }
        Ok(ChangeSet { accounts })
    }

    fn account_change(&self, address: Address, e: &Entry) -> Result<Option<AccountChange>, DbError> {
        let Some(info) = &e.current else {
            // Gone at the end: a change only if it existed at block start.
            return Ok(e.original.is_some().then(|| deleted(address)));
        };
        let start_code_hash = e.original.map_or(KECCAK_EMPTY, |a| normalize_code_hash(a.code_hash));
        let info_changed = match &e.original {
            None => true,
            Some(a) => {
                a.balance != info.balance || a.nonce != info.nonce || start_code_hash != info.code_hash
            }
        };
        let mut storage: Vec<(U256, U256)> = e
            .storage
            .iter()
            .filter(|(_, s)| if e.wiped { !s.current.is_zero() } else { s.current != s.original })
            .map(|(k, s)| (*k, s.current))
            .collect();
        if !info_changed && !e.wiped && storage.is_empty() {
            return Ok(None);
        }
        storage.sort_unstable_by_key(|(k, _)| *k);
        updated(address, info, start_code_hash, storage, e.wiped, || self.code_bytes(info)).map(Some)
    }

    /// The raw bytes of an account's current code.
    fn code_bytes(&self, info: &AccountInfo) -> Result<Bytes, DbError> {
        if let Some(code) = &info.code {
            return Ok(code.original_bytes());
        }
        if let Some(code) = self.codes.cached(&info.code_hash) {
            return Ok(code.original_bytes());
        }
        Ok(self.db.reader().code(&info.code_hash)?)
    }
}

impl Database for BlockState<'_> {
    type Error = DbError;

    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        let current = load(&mut self.accounts, self.db, address)?.current.clone();
        self.served_empty |= current.as_ref().is_some_and(AccountInfo::is_empty);
        Ok(current)
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.codes.get(self.db, code_hash)
    }

    fn storage(&mut self, address: Address, index: U256) -> Result<U256, DbError> {
        let db = self.db;
        let entry = load(&mut self.accounts, db, address)?;
        if let Some(slot) = entry.storage.get(&index) {
            return Ok(slot.current);
        }
        let value = entry.start_slot(db, address, index)?;
        entry.storage.insert(index, Slot { original: value, current: value });
        Ok(value)
    }

    fn block_hash(&mut self, number: u64) -> Result<B256, DbError> {
        self.db.block_hash_ref(number)
    }
}
