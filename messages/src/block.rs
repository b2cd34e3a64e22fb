//! Blocks at each stage: sealed by the producer, prepared for execution,
//! executed by the execution stage.

use std::sync::Arc;

use alloy_primitives::{Address, Bytes, B256};

use crate::{changes::ChangeSet, receipt::Receipt, skip::SkipReason, tx::PreparedTx};

/// What the block producer decides when it seals a block. The app hash
/// (`stateRoot` over RPC) is not part of it: it is only known after
/// execution, and is chained from this header's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    /// Height; genesis is 0.
    pub number: u64,
    /// Hash of the previous block's header (zero for genesis).
    pub parent_hash: B256,
    /// Seconds since the Unix epoch.
    pub timestamp: u64,
    /// Receives priority fees (the base fee is burned, as in London).
    pub coinbase: Address,
    /// Gas available to the block's transactions.
    pub gas_limit: u64,
    /// Base fee per gas, a configured constant.
    pub base_fee: u64,
    /// Keccak over the concatenated hashes of the block's raw transactions,
    /// so the header commits to its body.
    pub tx_root: B256,
    /// An earlier height's app hash as the proposer computed it, so that
    /// every validator checks every other's execution (CometBFT's "app hash
    /// of H in a later block", with a variable lag). `None` on a single
    /// node, where the header encodes, and hashes, exactly as before the
    /// field existed.
    pub state_ref: Option<StateRef>,
}

/// A claim, carried in a header, that the chain's app hash after block
/// `height` is `app_hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRef {
    /// The height the claim is about (0: genesis).
    pub height: u64,
    /// The app hash after that height.
    pub app_hash: B256,
}

/// A block as produced: a header, its hash and the raw transactions in order.
#[derive(Debug, Clone)]
pub struct SealedBlock {
    /// The header.
    pub header: BlockHeader,
    /// Keccak of the header's protobuf encoding.
    pub hash: B256,
    /// Raw EIP-2718 transactions in block order. Senders are not carried:
    /// preparation finds them in the prepared-transaction cache (filled at
    /// admission) or recovers them.
    pub txs: Vec<Bytes>,
}

/// A sealed block whose transactions are decoded and whose senders are
/// recovered, ready for ordered execution.
#[derive(Debug, Clone)]
pub struct PreparedBlock {
    /// The sealed block.
    pub block: Arc<SealedBlock>,
    /// One entry per raw transaction, in block order.
    pub txs: Vec<PreparedTx>,
}

/// The result of executing a prepared block.
#[derive(Debug, Clone)]
pub struct ExecutedBlock {
    /// The sealed block that was executed.
    pub block: Arc<SealedBlock>,
    /// Receipts of the applied transactions, in block order.
    pub receipts: Vec<Receipt>,
    /// For each receipt, the position of its transaction in `block.txs`
    /// (skipped transactions have no receipt, so the two can differ).
    pub raw_index: Vec<u32>,
    /// Transactions that could not be applied at their position, with why.
    pub skipped: Vec<(B256, SkipReason)>,
    /// Total gas used by applied transactions.
    pub gas_used: u64,
    /// The block's state changes, canonical order. Shared: the execution stage's
    /// overlay reads it while store commit writes it.
    pub changes: Arc<ChangeSet>,
    /// The chained app hash after this block (filled by store commit).
    pub app_hash: B256,
}
