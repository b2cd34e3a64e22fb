//! Logs with their positions in the chain, for `eth_getLogs` and the
//! WebSocket `logs` subscription.

use alloy_primitives::B256;
use sluice_messages::{Log, LogCriteria};

use super::Store;
use crate::tables::StoredBlock;

/// A log with the position it was emitted at, for `eth_getLogs` and the
/// `logs` subscription.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// The log.
    pub log: Log,
    /// Block height.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Transaction hash.
    pub tx_hash: B256,
    /// Transaction index in the block.
    pub tx_index: u32,
    /// Log index in the block.
    pub log_index: u32,
}

/// A filter for [`Store::logs`].
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    /// First block (inclusive).
    pub from: u64,
    /// Last block (inclusive).
    pub to: u64,
    /// Which logs of those blocks.
    pub criteria: LogCriteria,
}

impl LogEntry {
    /// The logs of `block` that match `criteria`, in order, each with its
    /// position: its log index counts every log of the block, matching or
    /// not, as `eth_getLogs` and the `logs` subscription both report it.
    /// One builder for both, so the two can never number a log apart; a
    /// log is cloned only once it matches.
    pub fn from_block<'a>(
        block: &'a StoredBlock,
        criteria: &'a LogCriteria,
    ) -> impl Iterator<Item = LogEntry> + 'a {
        let (number, hash) = (block.block.header.number, block.block.hash);
        block
            .receipts
            .iter()
            .flat_map(|r| r.logs.iter().map(move |log| (r, log)))
            .enumerate()
            .filter(|(_, (_, log))| criteria.matches(log))
            .map(move |(i, (r, log))| LogEntry {
                log: log.clone(),
                block_number: number,
                block_hash: hash,
                tx_hash: r.tx_hash,
                tx_index: r.index,
                log_index: i as u32,
            })
    }
}

impl Store {
    /// Logs matching `filter`, at most `limit` of them; `None` when more
    /// than `limit` match (the caller reports the limit).
    pub fn logs(&self, filter: &LogFilter, limit: usize) -> Option<Vec<LogEntry>> {
        let mut out = Vec::new();
        let last = filter.to.min(self.head());
        for number in filter.from..=last {
            let Some(stored) = self.block(number) else { continue };
            for entry in LogEntry::from_block(&stored, &filter.criteria) {
                if out.len() == limit {
                    return None;
                }
                out.push(entry);
            }
        }
        Some(out)
    }
}
