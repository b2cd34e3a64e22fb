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
/// and `logs` subscriptions all match with it. Its lists are kept sorted,
/// so a log is matched by binary search, never by a scan: a subscription
/// with a thousand addresses costs a few comparisons a log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogCriteria {
    /// Accepted emitters, sorted and unique (empty: any).
    addresses: Vec<Address>,
    /// Per topic position, the accepted values, sorted and unique (empty:
    /// any). As in geth, a log with fewer topics than there are positions
    /// never matches, even if the positions past its last topic accept any
    /// value.
    topics: Vec<Vec<B256>>,
}

impl LogCriteria {
    /// Criteria accepting logs of any of `addresses` (none: any) whose
    /// topic at each position is one of that position's `topics` (none:
    /// any).
    pub fn new(mut addresses: Vec<Address>, mut topics: Vec<Vec<B256>>) -> LogCriteria {
        addresses.sort_unstable();
        addresses.dedup();
        for alternatives in &mut topics {
            alternatives.sort_unstable();
            alternatives.dedup();
        }
        LogCriteria { addresses, topics }
    }

    /// The accepted emitters (empty: any).
    pub fn addresses(&self) -> &[Address] {
        &self.addresses
    }

    /// Per position, the accepted topics (empty: any).
    pub fn topics(&self) -> &[Vec<B256>] {
        &self.topics
    }

    /// Whether `log` is accepted.
    pub fn matches(&self, log: &Log) -> bool {
        (self.addresses.is_empty() || self.addresses.binary_search(&log.address).is_ok())
            && self.topics.len() <= log.topics.len()
            && self
                .topics
                .iter()
                .zip(&log.topics)
                .all(|(accepted, t)| accepted.is_empty() || accepted.binary_search(t).is_ok())
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
        let c = LogCriteria::new;
        assert!(c(vec![], vec![]).matches(&log));
        assert!(c(vec![addr], vec![vec![t0]]).matches(&log));
        assert!(c(vec![addr], vec![vec![]]).matches(&log), "an empty position accepts any topic");
        assert!(!c(vec![Address::ZERO], vec![]).matches(&log));
        assert!(!c(vec![], vec![vec![B256::ZERO]]).matches(&log));
        assert!(!c(vec![], vec![vec![], vec![t0]]).matches(&log), "no topic at position 1");
        assert!(!c(vec![], vec![vec![], vec![]]).matches(&log), "geth: a wildcard past the last topic too");
    }

    #[test]
    fn long_lists_match_in_any_order() {
        let addrs: Vec<Address> =
            (0..1000u16).rev().map(|i| Address::left_padding_from(&i.to_be_bytes())).collect();
        let topics: Vec<B256> =
            (0..1000u16).map(|i| B256::left_padding_from(&i.to_be_bytes())).rev().collect();
        let c = LogCriteria::new(addrs.clone(), vec![topics.clone(), topics.clone()]);
        for (a, t) in addrs.iter().zip(&topics) {
            let log = Log { address: *a, topics: vec![*t, *t], data: Default::default() };
            assert!(c.matches(&log));
        }
        let stranger =
            Log { address: Address::repeat_byte(0xee), topics: vec![topics[0]], data: Default::default() };
        assert!(!c.matches(&stranger));
        assert_eq!(LogCriteria::new(vec![addrs[0], addrs[0]], vec![]).addresses().len(), 1, "deduplicated");
    }
}
