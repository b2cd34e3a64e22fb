//! The consensus-critical rules: identical on every validator, kept in the
//! validator set file rather than in each node's config.

use serde::{Deserialize, Serialize};
use sluice_messages::BlockHeader;

use crate::block::BlockLimits;

/// Rules every validator applies to every proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Gas per block: every header carries exactly this.
    pub block_gas_limit: u64,
    /// The constant base fee: every header carries exactly this.
    pub base_fee_wei: u64,
    /// Most transactions in a block.
    pub max_block_txs: usize,
    /// Most raw transaction bytes in a block.
    pub max_block_bytes: usize,
    /// Most bytes in one raw transaction.
    pub max_tx_size_bytes: usize,
    /// How far ahead of a follower's clock a proposal's timestamp may be
    /// before the follower waits for its clock to catch up.
    pub max_timestamp_drift_s: u64,
}

impl Rules {
    /// The decoder's limits.
    pub fn limits(&self) -> BlockLimits {
        BlockLimits {
            max_txs: self.max_block_txs,
            max_tx_bytes: self.max_tx_size_bytes,
            max_block_bytes: self.max_block_bytes,
        }
    }

    /// Whether a header (and its body's sizes) keep the rules.
    pub fn header_ok(&self, h: &BlockHeader, tx_sizes: impl Iterator<Item = usize>) -> bool {
        if h.gas_limit != self.block_gas_limit || h.base_fee != self.base_fee_wei {
            return false;
        }
        let (mut count, mut bytes) = (0usize, 0usize);
        for size in tx_sizes {
            if size > self.max_tx_size_bytes {
                return false;
            }
            count += 1;
            bytes += size;
        }
        count <= self.max_block_txs && bytes <= self.max_block_bytes
    }
}
