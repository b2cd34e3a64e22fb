//! An in-memory [`StateReader`] for tests, here and in other crates.
//!
//! [`MemState::apply`] applies a [`ChangeSet`] exactly as the change-set
//! definition in [`crate::sequential`] prescribes, so tests can chain blocks
//! and check that applying a block's changes reproduces its end state.

use alloy_primitives::{keccak256, map::HashMap, Address, Bytes, B256, U256};
use sluice_messages::ChangeSet;
use sluice_state::{Account, StateReader, StoreError, EMPTY_CODE_HASH};

/// A state held in hash maps (foldhash, as revm's own `CacheDB`). Absent
/// accounts do not exist; absent slots are zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemState {
    accounts: HashMap<Address, Account>,
    storage: HashMap<Address, HashMap<U256, U256>>,
    codes: HashMap<B256, Bytes>,
    block_hashes: HashMap<u64, B256>,
}

impl MemState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates or overwrites an account without code.
    pub fn set_account(&mut self, address: Address, balance: U256, nonce: u64) -> &mut Self {
        let code_hash = self.accounts.get(&address).map_or(EMPTY_CODE_HASH, |a| a.code_hash);
        self.accounts.insert(address, Account { balance, nonce, code_hash });
        self
    }

    /// Gives an account code (creating it with nonce 1 if absent, as a
    /// deployed contract would be); returns the code hash.
    pub fn set_code(&mut self, address: Address, code: Bytes) -> B256 {
        let hash = keccak256(&code);
        self.codes.insert(hash, code);
        self.accounts
            .entry(address)
            .or_insert(Account { balance: U256::ZERO, nonce: 1, code_hash: hash })
            .code_hash = hash;
        hash
    }

    /// Sets a storage slot (zero removes it).
    pub fn set_storage(&mut self, address: Address, slot: U256, value: U256) -> &mut Self {
        if !value.is_zero() {
            self.storage.entry(address).or_default().insert(slot, value);
        } else if let Some(slots) = self.storage.get_mut(&address) {
            slots.remove(&slot);
            // Keep "no storage" in one spelling so states compare equal.
            if slots.is_empty() {
                self.storage.remove(&address);
            }
        }
        self
    }

    /// Records a block hash for BLOCKHASH.
    pub fn set_block_hash(&mut self, number: u64, hash: B256) -> &mut Self {
        self.block_hashes.insert(number, hash);
        self
    }

    /// The account at `address`, if it exists.
    pub fn get_account(&self, address: &Address) -> Option<Account> {
        self.accounts.get(address).copied()
    }

    /// A storage slot's value.
    pub fn get_storage(&self, address: &Address, slot: &U256) -> U256 {
        self.storage.get(address).and_then(|s| s.get(slot)).copied().unwrap_or_default()
    }

    /// Applies a block's change set.
    pub fn apply(&mut self, changes: &ChangeSet) {
        for change in &changes.accounts {
            if change.storage_cleared {
                self.storage.remove(&change.address);
            }
            if change.deleted {
                self.accounts.remove(&change.address);
                continue;
            }
            let code_hash = match &change.code {
                Some(code) => {
                    self.codes.insert(code.hash, code.code.clone());
                    code.hash
                }
                None => self.accounts.get(&change.address).map_or(EMPTY_CODE_HASH, |a| a.code_hash),
            };
            self.accounts
                .insert(change.address, Account { balance: change.balance, nonce: change.nonce, code_hash });
            for (slot, value) in &change.storage {
                self.set_storage(change.address, *slot, *value);
            }
        }
    }
}

impl StateReader for MemState {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        Ok(self.get_account(address))
    }

    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        Ok(self.codes.get(hash).cloned().unwrap_or_default())
    }

    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        Ok(self.get_storage(address, slot))
    }

    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        Ok(self.block_hashes.get(&number).copied().unwrap_or_default())
    }
}
