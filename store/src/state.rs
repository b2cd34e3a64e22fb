//! Current state in memory: accounts, storage and code.

use std::collections::HashMap;

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::ChangeSet;

use crate::{reader::EMPTY_CODE_HASH, Account, GenesisAccount};

/// Accounts, storage and code at one height.
#[derive(Debug, Default)]
pub struct MemState {
    accounts: HashMap<Address, Account>,
    storage: HashMap<Address, HashMap<U256, U256>>,
    codes: HashMap<B256, Bytes>,
}

impl MemState {
    /// The account, if it exists.
    pub fn account(&self, address: &Address) -> Option<Account> {
        self.accounts.get(address).copied()
    }

    /// Code by hash; empty when unknown.
    pub fn code(&self, hash: &B256) -> Bytes {
        self.codes.get(hash).cloned().unwrap_or_default()
    }

    /// A storage slot; zero when unset.
    pub fn storage(&self, address: &Address, slot: &U256) -> U256 {
        self.storage.get(address).and_then(|s| s.get(slot)).copied().unwrap_or_default()
    }

    /// Number of accounts.
    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    /// True when no account exists.
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// Inserts an account as loaded from disk.
    pub fn insert_account(&mut self, address: Address, account: Account) {
        self.accounts.insert(address, account);
    }

    /// Inserts a storage slot as loaded from disk.
    pub fn insert_slot(&mut self, address: Address, slot: U256, value: U256) {
        self.storage.entry(address).or_default().insert(slot, value);
    }

    /// Inserts code as loaded from disk.
    pub fn insert_code(&mut self, hash: B256, code: Bytes) {
        self.codes.insert(hash, code);
    }

    /// The code hash `change` leaves at its account: what the change says
    /// for fresh accounts, otherwise the current one. Called before `apply`.
    pub fn code_hash_after(&self, change: &sluice_messages::AccountChange) -> B256 {
        match (&change.code, change.storage_cleared || change.deleted) {
            (Some(code), _) => code.hash,
            (None, true) => EMPTY_CODE_HASH,
            (None, false) => self.accounts.get(&change.address).map_or(EMPTY_CODE_HASH, |a| a.code_hash),
        }
    }

    /// Inserts a genesis account.
    pub fn insert_genesis(&mut self, address: Address, acct: &GenesisAccount) {
        let code_hash = if acct.code.is_empty() {
            EMPTY_CODE_HASH
        } else {
            let hash = sluice_messages::keccak256(&acct.code);
            self.codes.insert(hash, acct.code.clone());
            hash
        };
        self.accounts.insert(address, Account { balance: acct.balance, nonce: acct.nonce, code_hash });
        if !acct.storage.is_empty() {
            self.storage.insert(address, acct.storage.iter().map(|(k, v)| (*k, *v)).collect());
        }
    }

    /// Applies a block's change set. See `sluice_messages::changes` for the
    /// meaning of each field; an account with `storage_cleared` is fresh, so
    /// its code is exactly what the change says (none means empty).
    pub fn apply(&mut self, changes: &ChangeSet) {
        for c in &changes.accounts {
            if c.deleted {
                self.accounts.remove(&c.address);
                self.storage.remove(&c.address);
                continue;
            }
            if c.storage_cleared {
                self.storage.remove(&c.address);
            }
            let previous = self.accounts.get(&c.address).map(|a| a.code_hash);
            let code_hash = match (&c.code, c.storage_cleared) {
                (Some(code), _) => {
                    self.codes.entry(code.hash).or_insert_with(|| code.code.clone());
                    code.hash
                }
                (None, true) => EMPTY_CODE_HASH,
                (None, false) => previous.unwrap_or(EMPTY_CODE_HASH),
            };
            self.accounts.insert(c.address, Account { balance: c.balance, nonce: c.nonce, code_hash });
            if !c.storage.is_empty() {
                let slots = self.storage.entry(c.address).or_default();
                for (k, v) in &c.storage {
                    if v.is_zero() {
                        slots.remove(k);
                    } else {
                        slots.insert(*k, *v);
                    }
                }
                if slots.is_empty() {
                    self.storage.remove(&c.address);
                }
            }
        }
    }
}
