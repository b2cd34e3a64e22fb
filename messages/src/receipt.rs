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

/// Which logs a filter accepts, by geth's rules: `eth_getLogs`, log filters
/// and `logs` subscriptions all match with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogCriteria {
    /// Accepted emitters (empty: any).
    pub addresses: Vec<Address>,
    /// Per topic position, the accepted values (empty: any). As in geth, a
    /// log with fewer topics than there are positions never matches, even
    /// if the positions past its last topic accept any value.
    pub topics: Vec<Vec<B256>>,
}

impl LogCriteria {
    /// Whether `log` is accepted.
    pub fn matches(&self, log: &Log) -> bool {
        (self.addresses.is_empty() || self.addresses.contains(&log.address))
            && self.topics.len() <= log.topics.len()
            && self
                .topics
                .iter()
                .zip(&log.topics)
                .all(|(accepted, t)| accepted.is_empty() || accepted.contains(t))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_criteria_follow_geth() {
        let addr = Address::repeat_byte(1);
        let t0 = B256::repeat_byte(2);
        let log = Log { address: addr, topics: vec![t0], data: Default::default() };
        let c = |addresses: Vec<Address>, topics: Vec<Vec<B256>>| LogCriteria { addresses, topics };
        assert!(c(vec![], vec![]).matches(&log));
        assert!(c(vec![addr], vec![vec![t0]]).matches(&log));
        assert!(c(vec![addr], vec![vec![]]).matches(&log), "an empty position accepts any topic");
        assert!(!c(vec![Address::ZERO], vec![]).matches(&log));
        assert!(!c(vec![], vec![vec![B256::ZERO]]).matches(&log));
        assert!(!c(vec![], vec![vec![], vec![t0]]).matches(&log), "no topic at position 1");
        assert!(!c(vec![], vec![vec![], vec![]]).matches(&log), "geth: a wildcard past the last topic too");
    }
}
