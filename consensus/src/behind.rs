//! A validator further behind than its peers keep blocks can never catch
//! up from them: marshal asks them for a block they pruned, they answer
//! nothing, and it asks again forever. [`CatchUp`] notices (the network's
//! finalized tip more than a retention ahead of the committed height, and
//! no block committed for a while) and says so once, naming the oldest
//! block the others still serve, so the node halts with that error instead
//! of waiting silently.
//!
//! The others' retention is taken to be this node's
//! (`store.block_retention_blocks`; validators of one network are expected
//! to share it). A node behind by more that still receives blocks (its
//! peers keep more, or archive everything) is never stopped: only no
//! progress for [`CATCH_UP_PATIENCE`] counts.

use std::{num::NonZeroU64, time::Duration, time::SystemTime};

/// How long a validator more than a retention behind may go without
/// committing a block before it is declared unable to catch up: many
/// fetch timeouts and retries of marshal's backfill.
pub(crate) const CATCH_UP_PATIENCE: Duration = Duration::from_secs(30);

/// Watches one validator's catch-up (plain data: the archive keeper feeds
/// it the heights and the time).
#[derive(Debug)]
pub(crate) struct CatchUp {
    retention: u64,
    patience: Duration,
    /// The committed height last seen, and when it was first seen.
    last: (u64, SystemTime),
    /// Said once: the node halts on it.
    said: bool,
}

impl CatchUp {
    /// A watch for a node whose peers keep `retention` blocks, started at
    /// `now` with `committed` blocks committed.
    pub(crate) fn new(retention: NonZeroU64, patience: Duration, committed: u64, now: SystemTime) -> Self {
        CatchUp { retention: retention.get(), patience, last: (committed, now), said: false }
    }

    /// The error to halt with, once: `tip` (the highest height finalized
    /// anywhere, as marshal learnt it) is more than the retention ahead of
    /// `committed`, and no block was committed for the patience.
    pub(crate) fn check(&mut self, committed: u64, tip: u64, now: SystemTime) -> Option<String> {
        if committed != self.last.0 {
            self.last = (committed, now);
            return None;
        }
        let stalled = now.duration_since(self.last.1).unwrap_or_default();
        if self.said || tip <= committed.saturating_add(self.retention) || stalled < self.patience {
            return None;
        }
        self.said = true;
        let oldest = tip.saturating_sub(self.retention) + 1;
        Some(format!(
            "this validator committed block {committed} but the network finalized block {tip}: {} blocks behind, \
             more than the {} blocks validators keep (store.block_retention_blocks, taking the others' to be this \
             node's), and no block came for {}s: the oldest block the others still serve is about {oldest}, past \
             the {} this node needs next. It cannot catch up from them: stop it and copy a caught-up validator's \
             data dir (its chain/ and consensus/), or run the network's validators with store.mode = \"archive\"; \
             state sync is not built yet",
            tip - committed,
            self.retention,
            stalled.as_secs(),
            committed + 1,
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn only_a_stalled_node_further_behind_than_the_retention_is_stopped_and_once() {
        let t0 = SystemTime::UNIX_EPOCH;
        let at = |s: u64| t0 + Duration::from_secs(s);
        let patience = Duration::from_secs(30);
        let mut w = CatchUp::new(NonZeroU64::new(100).unwrap(), patience, 10, t0);
        // Behind by less than the retention: waits as long as it takes.
        assert_eq!(w.check(10, 110, at(1000)), None);
        // Further behind, but blocks still come: catching up.
        assert_eq!(w.check(11, 500, at(1001)), None);
        assert_eq!(w.check(11, 500, at(1030)), None, "not yet the patience");
        let why = w.check(11, 500, at(1031)).expect("stalled past the patience");
        assert!(why.contains("committed block 11") && why.contains("finalized block 500"), "{why}");
        assert!(why.contains("about 401") && why.contains("past the 12"), "{why}");
        assert_eq!(w.check(11, 600, at(2000)), None, "said once");
    }
}
