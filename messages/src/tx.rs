//! Transactions as they travel through the pipeline.

use std::sync::Arc;

use alloy_consensus::TxEnvelope;
use alloy_primitives::{Address, Bytes, B256};

/// Keccak-256 of `data`.
///
/// Every transaction hash in sluice is the keccak of the exact raw
/// (EIP-2718) bytes, which is what `eth_sendRawTransaction` returns and what
/// ethers checks against its own computation.
pub fn keccak256(data: &[u8]) -> B256 {
    alloy_primitives::keccak256(data)
}

/// A transaction admitted over RPC: decoded, validated statelessly, with its
/// sender recovered once (sender recovery is the most expensive step on the
/// path, so it is never repeated for a transaction admitted here).
#[derive(Debug, Clone)]
pub struct RecoveredTx {
    /// Keccak of [`RecoveredTx::raw`]: the canonical transaction hash.
    pub hash: B256,
    /// The exact EIP-2718 bytes the client sent.
    pub raw: Bytes,
    /// The decoded transaction.
    pub tx: TxEnvelope,
    /// The signer recovered with libsecp256k1.
    pub sender: Address,
}

impl RecoveredTx {
    /// The transaction's nonce.
    pub fn nonce(&self) -> u64 {
        alloy_consensus::Transaction::nonce(&self.tx)
    }

    /// The transaction's gas limit.
    pub fn gas_limit(&self) -> u64 {
        alloy_consensus::Transaction::gas_limit(&self.tx)
    }
}

/// A block transaction after preparation: decoded with its sender, or the
/// reason it cannot be (it then executes as "not applicable" and is left out
/// of the block's results deterministically).
#[derive(Debug, Clone)]
pub enum PreparedTx {
    /// Decoded and recovered. Shared with the prepared-transaction cache
    /// (filled at admission): a cache hit is a reference count, not a copy
    /// of the decoded transaction.
    Ready(Arc<RecoveredTx>),
    /// Undecodable, unrecoverable, or a duplicate of an earlier transaction in
    /// the same block.
    Invalid {
        /// Keccak of the raw bytes.
        hash: B256,
        /// Why the transaction cannot be applied.
        reason: String,
    },
}

impl PreparedTx {
    /// A decoded and recovered transaction.
    pub fn ready(tx: RecoveredTx) -> Self {
        PreparedTx::Ready(Arc::new(tx))
    }

    /// The transaction's hash, valid or not.
    pub fn hash(&self) -> B256 {
        match self {
            PreparedTx::Ready(tx) => tx.hash,
            PreparedTx::Invalid { hash, .. } => *hash,
        }
    }
}
