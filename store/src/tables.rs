//! The bottom layer of the store: the database's tables (fjall
//! keyspaces), how records are encoded in them, and what the engine's
//! errors mean. History ([`crate::history`]) and the database
//! ([`crate::db`], [`crate::write`]) build on it; the chain
//! ([`crate::chain`]) on them.

use std::sync::Arc;

use alloy_primitives::{Address, Bytes, B256, U256};
use fjall::Keyspace;
use sluice_messages::{Receipt, SealedBlock};

use crate::{Account, StoreError};

/// A committed block with its results.
#[derive(Debug)]
pub struct StoredBlock {
    /// The sealed block.
    pub block: Arc<SealedBlock>,
    /// Receipts of applied transactions, in order.
    pub receipts: Vec<Receipt>,
    /// For each receipt, the index of its transaction in `block.txs`.
    pub raw_index: Vec<u32>,
    /// Gas used by the block.
    pub gas_used: u64,
    /// App hash after the block (`stateRoot` over RPC).
    pub app_hash: B256,
}

impl StoredBlock {
    /// Raw bytes of the applied transaction at receipt index `i`.
    pub fn raw_tx(&self, i: usize) -> Option<&Bytes> {
        self.raw_index.get(i).and_then(|&r| self.block.txs.get(r as usize))
    }
}

/// fjall's errors as the store's: an I/O error names its cause once ("No
/// space left on device (os error 28)"), not fjall's debug form; a
/// checksum mismatch or undecodable block is damage.
pub(crate) fn db_error(e: fjall::Error) -> StoreError {
    match e {
        fjall::Error::Io(e) | fjall::Error::Storage(fjall::LsmError::Io(e)) => StoreError::Io(e),
        fjall::Error::JournalRecovery(e) => StoreError::Corrupt(format!("its journal cannot be read: {e:?}")),
        fjall::Error::Poisoned => StoreError::Io(std::io::Error::other(
            "an earlier write failed and the database refuses further writes",
        )),
        fjall::Error::Locked => StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            "the data dir is in use by another process",
        )),
        other => StoreError::Corrupt(format!("{other:?}")),
    }
}

/// Damage found in a record sluice wrote.
pub(crate) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

pub(crate) fn encode_account(a: &Account) -> [u8; 72] {
    let mut out = [0u8; 72];
    out[..32].copy_from_slice(&a.balance.to_be_bytes::<32>());
    out[32..40].copy_from_slice(&a.nonce.to_be_bytes());
    out[40..].copy_from_slice(a.code_hash.as_slice());
    out
}

pub(crate) fn decode_account(v: &[u8]) -> Result<Account, StoreError> {
    if v.len() != 72 {
        return Err(corrupt(format!("account record of {} bytes", v.len())));
    }
    let mut nonce = [0u8; 8];
    nonce.copy_from_slice(&v[32..40]);
    Ok(Account {
        balance: U256::from_be_slice(&v[..32]),
        nonce: u64::from_be_bytes(nonce),
        code_hash: B256::from_slice(&v[40..]),
    })
}

pub(crate) fn slot_key(address: &Address, slot: &U256) -> [u8; 52] {
    let mut k = [0u8; 52];
    k[..20].copy_from_slice(address.as_slice());
    k[20..].copy_from_slice(&slot.to_be_bytes::<32>());
    k
}

pub(crate) fn u64_value(v: &[u8], what: &str) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = v.try_into().map_err(|_| corrupt(format!("{what} record")))?;
    Ok(u64::from_be_bytes(bytes))
}

/// How many keyspaces [`Tables`] has.
pub(crate) const KEYSPACES: u64 = 13;

/// The database's keyspaces (its tables). Heights are big-endian, so they
/// sort in order.
pub(crate) struct Tables {
    /// Identity, head, history window, synthetic genesis, the open mark.
    pub(crate) meta: Keyspace,
    /// Height -> block.
    pub(crate) blocks: Keyspace,
    /// Height -> results.
    pub(crate) results: Keyspace,
    /// Height -> change set.
    pub(crate) changes: Keyspace,
    /// The hash vault: height -> app hash.
    pub(crate) vault: Keyspace,
    /// Block hash -> height.
    pub(crate) block_by_hash: Keyspace,
    /// Transaction hash -> (height, receipt index).
    pub(crate) tx_index: Keyspace,
    /// Address -> account.
    pub(crate) accounts: Keyspace,
    /// Address ++ slot -> value (nonzero only).
    pub(crate) storage: Keyspace,
    /// Code hash -> code.
    pub(crate) codes: Keyspace,
    /// See [`crate::history`].
    pub(crate) account_history: Keyspace,
    /// See [`crate::history`].
    pub(crate) storage_history: Keyspace,
    /// Address ++ block ++ receipt index -> nothing; see
    /// [`crate::address_index`] (empty while `store.address_index` is off).
    pub(crate) address_txs: Keyspace,
}

impl Tables {
    /// Every table, for what applies to all (flushing, write buffers).
    pub(crate) fn all(&self) -> [&Keyspace; KEYSPACES as usize] {
        [
            &self.meta,
            &self.blocks,
            &self.results,
            &self.changes,
            &self.vault,
            &self.block_by_hash,
            &self.tx_index,
            &self.accounts,
            &self.storage,
            &self.codes,
            &self.account_history,
            &self.storage_history,
            &self.address_txs,
        ]
    }
}
