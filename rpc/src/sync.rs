//! What `eth_syncing` reports, and whether state may be read at all.
//!
//! A validator learns of finalized blocks from consensus before it has
//! executed and committed them; while it is more than
//! [`SYNCING_LAG_BLOCKS`] behind (catching up after a restart, or after
//! being cut off), `eth_syncing` answers geth's progress object instead of
//! `false`. A single node is never behind anything.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_store::Store;

use crate::error::{RpcError, SERVER_ERROR};

/// Behind by more than this many blocks is syncing. A validator under
/// load normally trails finalization by a few blocks (preparation,
/// execution and commit of the blocks in flight); that is not syncing.
pub const SYNCING_LAG_BLOCKS: u64 = 8;

/// The highest finalized height this node has heard of, and where the
/// current catch-up began.
#[derive(Debug, Default)]
pub struct SyncStatus {
    highest: AtomicU64,
    started: Mutex<Option<u64>>,
}

impl SyncStatus {
    /// Consensus has seen blocks finalized up to `height`.
    pub fn finalized(&self, height: u64) {
        self.highest.fetch_max(height, Ordering::AcqRel);
    }

    /// `eth_syncing` with the committed head at `head`: `false`, or
    /// `{startingBlock, currentBlock, highestBlock}` as geth answers.
    pub fn answer(&self, head: u64) -> Value {
        let highest = self.highest.load(Ordering::Acquire);
        let mut started = self.started.lock();
        if highest <= head + SYNCING_LAG_BLOCKS {
            *started = None;
            return Value::Bool(false);
        }
        let start = *started.get_or_insert(head);
        json!({
            "startingBlock": format!("0x{start:x}"),
            "currentBlock": format!("0x{head:x}"),
            "highestBlock": format!("0x{highest:x}"),
        })
    }
}

/// Refuses reads of state, receipts and calls on a node whose state is
/// known wrong (see [`Store::diverged`]), naming the halt and its
/// height; after any other halt (a full disk) reads are served.
pub fn state_readable(store: &Store) -> Result<(), RpcError> {
    match store.diverged() {
        None => Ok(()),
        Some((height, halt)) => Err(RpcError::new(
            SERVER_ERROR,
            format!("this node halted: its state is wrong from height {height} ({halt}); ask another node"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncing_only_while_further_behind_than_the_lag() {
        let s = SyncStatus::default();
        assert_eq!(s.answer(0), Value::Bool(false));
        s.finalized(100);
        assert_eq!(
            s.answer(10),
            json!({"startingBlock": "0xa", "currentBlock": "0xa", "highestBlock": "0x64"})
        );
        // The start stays where the catch-up began.
        assert_eq!(s.answer(50)["startingBlock"], "0xa");
        assert_eq!(s.answer(50)["currentBlock"], "0x32");
        assert_eq!(s.answer(100 - SYNCING_LAG_BLOCKS), Value::Bool(false));
        s.finalized(50);
        assert_eq!(s.answer(92), Value::Bool(false), "the highest never moves back");
    }
}
