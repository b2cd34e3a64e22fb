//! Execution results.

use alloy_primitives::{Address, Bytes, B256};

/// A log emitted during execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    /// The emitting contract.
    pub address: Address,
    /// Indexed topics (at most four).
    pub topics: Vec<B256>,
    /// Unindexed data.
    pub data: Bytes,
}

/// The receipt of one applied transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The transaction's hash.
    pub tx_hash: B256,
    /// EIP-2718 type (0 legacy, 1, 2, 4).
    pub tx_type: u8,
    /// Position among the block's applied transactions.
    pub index: u32,
    /// Sender.
    pub from: Address,
    /// Recipient; `None` for contract creation.
    pub to: Option<Address>,
    /// Address of the created contract, if any and successful.
    pub contract_address: Option<Address>,
    /// True when execution succeeded (status 1).
    pub success: bool,
    /// Gas used by this transaction (after refunds).
    pub gas_used: u64,
    /// Gas used by this and all earlier transactions of the block.
    pub cumulative_gas_used: u64,
    /// Price per gas actually paid (base fee + effective tip).
    pub effective_gas_price: u128,
    /// Logs, in emission order.
    pub logs: Vec<Log>,
    /// Revert or halt output (empty on success), kept for debugging.
    pub output: Bytes,
}
