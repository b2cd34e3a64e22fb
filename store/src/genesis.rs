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
    /// Synthetic accounts funded besides `alloc` (benchmarks of large state).
    pub synthetic: Synthetic,
}

/// `count` accounts at [`sluice_messages::synthetic_address`]`(0..count)`,
/// each holding `balance` and nothing else. They are written straight to
/// the database at genesis and never listed in a change set, so a chain
/// can start with millions of accounts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synthetic {
    /// How many (0: none).
    pub count: u64,
    /// Balance of each, in wei.
    pub balance: U256,
}

impl Synthetic {
    /// Each synthetic account, in index order.
    pub fn accounts(&self) -> impl Iterator<Item = (Address, U256)> + '_ {
        (0..self.count).map(|i| (sluice_messages::synthetic_address(i), self.balance))
    }
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
        // Absent when there are none, so genesis files fingerprinted before
        // synthetic accounts existed keep their fingerprint.
        if self.synthetic.count > 0 {
            buf.extend_from_slice(b"synthetic");
            buf.extend_from_slice(&self.synthetic.count.to_be_bytes());
            buf.extend_from_slice(&self.synthetic.balance.to_be_bytes::<32>());
        }
        sluice_messages::keccak256(&buf)
    }
}
