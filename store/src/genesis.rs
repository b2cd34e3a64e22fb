//! Genesis: the state a chain starts from.

use std::collections::BTreeMap;

use alloy_primitives::{Address, Bytes, B256, U256};

/// One account in the genesis allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenesisAccount {
    /// Balance in wei.
    pub balance: U256,
    /// Starting nonce.
    pub nonce: u64,
    /// Contract code (empty for none).
    pub code: Bytes,
    /// Storage slots.
    pub storage: BTreeMap<U256, U256>,
}

/// Everything needed to build block 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Genesis {
    /// The chain id.
    pub chain_id: u64,
    /// Block 0's timestamp.
    pub timestamp: u64,
    /// Block 0's gas limit.
    pub gas_limit: u64,
    /// Block 0's base fee.
    pub base_fee: u64,
    /// Block 0's coinbase.
    pub coinbase: Address,
    /// Funded accounts, sorted by address.
    pub alloc: BTreeMap<Address, GenesisAccount>,
}

impl Genesis {
    /// Keccak over the allocation's canonical encoding, so two data dirs can
    /// tell whether they started from the same genesis.
    pub fn fingerprint(&self) -> B256 {
        let mut buf = Vec::with_capacity(64 + self.alloc.len() * 64);
        buf.extend_from_slice(&self.chain_id.to_be_bytes());
        buf.extend_from_slice(&self.timestamp.to_be_bytes());
        for (addr, acct) in &self.alloc {
            buf.extend_from_slice(addr.as_slice());
            buf.extend_from_slice(&acct.balance.to_be_bytes::<32>());
            buf.extend_from_slice(&acct.nonce.to_be_bytes());
            buf.extend_from_slice(sluice_messages::keccak256(&acct.code).as_slice());
            for (k, v) in &acct.storage {
                buf.extend_from_slice(&k.to_be_bytes::<32>());
                buf.extend_from_slice(&v.to_be_bytes::<32>());
            }
        }
        sluice_messages::keccak256(&buf)
    }
}
