//! Executed-but-uncommitted blocks layered over the committed store.
//!
//! The execution stage executes block N+1 while store commit is still writing
//! block N; N+1 reads N's writes through this overlay. A layer is dropped
//! only after the store has committed it, so every read sees either the
//! layer or the committed value, which are equal.

use std::{collections::HashMap, sync::Arc};

use alloy_primitives::{Address, Bytes, B256, U256};
use sluice_messages::{AccountChange, ChangeSet};

use crate::{reader::EMPTY_CODE_HASH, Account, StateReader, StoreError};

/// One executed block's changes, indexed by address for lookups.
#[derive(Debug)]
pub struct Layer {
    /// The block's height.
    pub number: u64,
    /// The block's hash.
    pub hash: B256,
    changes: Arc<ChangeSet>,
    index: HashMap<Address, usize>,
    codes: HashMap<B256, Bytes>,
}

impl Layer {
    /// Indexes a change set.
    pub fn new(number: u64, hash: B256, changes: Arc<ChangeSet>) -> Layer {
        let index = changes.accounts.iter().enumerate().map(|(i, a)| (a.address, i)).collect();
        let codes = changes
            .accounts
            .iter()
            .filter_map(|a| a.code.as_ref())
            .map(|c| (c.hash, c.code.clone()))
            .collect();
        Layer { number, hash, changes, index, codes }
    }

    fn get(&self, address: &Address) -> Option<&AccountChange> {
        self.index.get(address).map(|&i| &self.changes.accounts[i])
    }
}

/// Layers (oldest first) over a base reader.
pub struct Overlay<B> {
    base: B,
    layers: Vec<Layer>,
}

impl<B: StateReader> Overlay<B> {
    /// An overlay with no layers.
    pub fn new(base: B) -> Self {
        Overlay { base, layers: Vec::new() }
    }

    /// Adds the newest executed block.
    pub fn push(&mut self, layer: Layer) {
        self.layers.push(layer);
    }

    /// Drops layers at or below `height` (the store has committed them).
    pub fn committed(&mut self, height: u64) {
        self.layers.retain(|l| l.number > height);
    }

    /// Number of layers held (executed blocks not yet committed).
    pub fn depth(&self) -> usize {
        self.layers.len()
    }

    /// The base reader.
    pub fn base(&self) -> &B {
        &self.base
    }
}

impl<B: StateReader> StateReader for Overlay<B> {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        for layer in self.layers.iter().rev() {
            if let Some(c) = layer.get(address) {
                if c.deleted {
                    return Ok(None);
                }
                // The code may have been set by an older layer; resolve it.
                let code_hash = match (&c.code, c.storage_cleared) {
                    (Some(code), _) => code.hash,
                    (None, true) => EMPTY_CODE_HASH,
                    (None, false) => continue_code_lookup(&self.layers, &self.base, address, layer.number)?,
                };
                return Ok(Some(Account { balance: c.balance, nonce: c.nonce, code_hash }));
            }
        }
        self.base.account(address)
    }

    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        for layer in self.layers.iter().rev() {
            if let Some(code) = layer.codes.get(hash) {
                return Ok(code.clone());
            }
        }
        self.base.code(hash)
    }

    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        for layer in self.layers.iter().rev() {
            if let Some(c) = layer.get(address) {
                if let Ok(i) = c.storage.binary_search_by(|(k, _)| k.cmp(slot)) {
                    return Ok(c.storage[i].1);
                }
                if c.deleted || c.storage_cleared {
                    return Ok(U256::ZERO);
                }
            }
        }
        self.base.storage(address, slot)
    }

    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        for layer in &self.layers {
            if layer.number == number {
                return Ok(layer.hash);
            }
        }
        self.base.block_hash(number)
    }
}

/// The code hash of `address` as of layers older than `below`, or the base.
fn continue_code_lookup<B: StateReader>(
    layers: &[Layer],
    base: &B,
    address: &Address,
    below: u64,
) -> Result<B256, StoreError> {
    for layer in layers.iter().rev().filter(|l| l.number < below) {
        if let Some(c) = layer.get(address) {
            match (&c.code, c.storage_cleared || c.deleted) {
                (Some(code), _) => return Ok(code.hash),
                (None, true) => return Ok(EMPTY_CODE_HASH),
                (None, false) => continue,
            }
        }
    }
    Ok(base.account(address)?.map(|a| a.code_hash).unwrap_or(EMPTY_CODE_HASH))
}
