//! Block retention: what a full node keeps of its chain, and how the rest
//! leaves the disk.
//!
//! A full node (`store.mode = "full"`) keeps the last
//! `store.block_retention_blocks` blocks: their bodies, results, change
//! sets, app hashes and every index pointing at them (block hash, tx hash,
//! the address index). The oldest block kept, `blocks_from`, is one number
//! in `meta`, written in the batch of the commit that moves it, so after a
//! crash it is exactly what the last durable block left. Everything below
//! it is gone *logically* at once: reads check it first and answer geth's
//! "pruned history unavailable" (the tx and address indexes answer as if
//! the rows were not there), so no reader ever sees a half-removed height.
//!
//! Physical removal follows, off the commit's path and without a tombstone
//! per row:
//! - compaction filters drop rows of heights below the floor whenever
//!   fjall compacts a table: by the height in the key for the height-keyed
//!   tables and the address index, by the height in the value for the
//!   hash-keyed `tx_index` and `block_by_hash`;
//! - the height-keyed tables are written in key order, so their table files
//!   hold contiguous height ranges that fjall may move down its levels
//!   without rewriting (no compaction, no filter): every
//!   [`DROP_EVERY_BLOCKS`] blocks, files wholly below the floor are dropped
//!   as files (`drop_range`).
//!
//! The filters see the floor of the last *synced* commit only: rows are
//! never removed from disk while the number that hides them could still be
//! lost with a power cut.
//!
//! State history keeps its own window (`store.history_blocks`,
//! [`crate::history`]): `history_from` moves in the same batch, and the
//! history tables' filters drop rows recorded by blocks up to it (by the
//! block at the end of their key), which served reads before it only.
//! The blocks of the state window are kept too (`blocks_from` never passes
//! `history_from + 1`): a state read names its block.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use fjall::compaction::filter::{
    CompactionFilter, CompactionFilterResult, Context, Factory, ItemAccessor, Verdict,
};

/// Blocks kept at least: BLOCKHASH reads the last 256 blocks' hashes
/// while executing, and a finalized block's `state_ref` names an earlier
/// app hash, both read from the blocks kept.
pub const MIN_BLOCK_RETENTION: u64 = 256;

/// How far the floor moves between two drops of whole table files.
pub const DROP_EVERY_BLOCKS: u64 = 1024;

/// Where a row's block height is: a big-endian `u64` at this offset of its
/// key or of its value.
#[derive(Debug, Clone, Copy)]
enum HeightAt {
    Key(usize),
    Value(usize),
}

/// The height a table's rows are pruned by, by keyspace name; `None` for
/// the tables that are not pruned by height (current state, meta).
fn height_at(keyspace: &str) -> Option<HeightAt> {
    Some(match keyspace {
        "blocks" | "results" | "changes" | "app_hashes" => HeightAt::Key(0),
        "address_txs" | "account_history" => HeightAt::Key(20),
        "storage_history" => HeightAt::Key(52),
        "block_by_hash" | "tx_index" => HeightAt::Value(0),
        _ => return None,
    })
}

/// Whether a table's rows are state history (pruned by the state window,
/// not the block retention).
fn is_history(keyspace: &str) -> bool {
    matches!(keyspace, "account_history" | "storage_history")
}

/// The compaction filters of every pruned table, each reading its floor
/// when a compaction starts: `floor` (the oldest block kept, as last
/// synced; 0: nothing pruned) for blocks and their indexes, `history` (one
/// past the last block whose history rows serve no read, as last synced)
/// for the state history. For fjall's
/// `DatabaseBuilder::with_compaction_filter_factories`.
#[allow(clippy::type_complexity)] // fjall's own signature
pub(crate) fn filters(
    floor: Arc<AtomicU64>,
    history: Arc<AtomicU64>,
) -> Arc<dyn Fn(&str) -> Option<Arc<dyn Factory>> + Send + Sync> {
    Arc::new(move |keyspace: &str| {
        let at = height_at(keyspace)?;
        let floor = Arc::clone(if is_history(keyspace) { &history } else { &floor });
        let factory: Arc<dyn Factory> = Arc::new(BelowFloor { at, floor });
        Some(factory)
    })
}

/// Makes a [`Prune`] filter per compaction.
struct BelowFloor {
    at: HeightAt,
    floor: Arc<AtomicU64>,
}

impl Factory for BelowFloor {
    fn name(&self) -> &str {
        "sluice-block-retention"
    }

    fn make_filter(&self, _: &Context) -> Box<dyn CompactionFilter> {
        Box::new(Prune { at: self.at, below: self.floor.load(Ordering::Acquire) })
    }
}

/// Removes the rows of blocks below `below` from one compaction's output.
struct Prune {
    at: HeightAt,
    below: u64,
}

/// The big-endian height at `offset` of `bytes`, if they are long enough.
fn height(bytes: &[u8], offset: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(offset..offset + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

impl CompactionFilter for Prune {
    fn filter_item(&mut self, item: ItemAccessor<'_>, _: &Context) -> CompactionFilterResult {
        if self.below == 0 {
            return Ok(Verdict::Keep);
        }
        let h = match self.at {
            HeightAt::Key(offset) => height(item.key(), offset),
            HeightAt::Value(offset) => height(&item.value()?, offset),
        };
        // A row whose height cannot be read (a tombstone, damage) is kept:
        // a filter never guesses.
        Ok(match h {
            Some(h) if h < self.below => Verdict::Remove,
            _ => Verdict::Keep,
        })
    }
}

/// What a data dir was pruned to, kept in `meta` so a restart with a wider
/// window is refused rather than served with holes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows {
    /// `store.block_retention_blocks` (0: all blocks kept).
    pub(crate) blocks: u64,
    /// `store.history_blocks` (0: all state history kept).
    pub(crate) history: u64,
}

/// Why a data dir cannot be opened with `wanted`: it pruned with `had`
/// down to `blocks_from` (blocks) and `history_from` (state), and the new
/// window asks for more than what is left. Narrowing is always allowed;
/// widening only while nothing was pruned yet.
pub(crate) fn widening(had: Windows, wanted: Windows, blocks_from: u64, history_from: u64) -> Option<String> {
    let wider = |had: u64, wanted: u64| wanted == 0 || (had != 0 && wanted > had);
    let name = |w: u64| if w == 0 { "all (archive mode)".to_string() } else { format!("{w} blocks") };
    if blocks_from > 0 && wider(had.blocks, wanted.blocks) {
        return Some(format!(
            "store.block_retention_blocks asks for {} but this data dir was pruned to {} and keeps blocks from \
             {blocks_from} on: what was pruned cannot come back. Keep a retention of at most {}, or start a new \
             data dir (an archive node must keep every block from genesis)",
            name(wanted.blocks),
            name(had.blocks),
            had.blocks,
        ));
    }
    if history_from > 0 && wider(had.history, wanted.history) {
        return Some(format!(
            "store.history_blocks asks for {} but this data dir was pruned to {} and keeps state from block \
             {history_from} on: what was pruned cannot come back. Keep a window of at most {}, or start a new \
             data dir (an archive node must keep every block's state from genesis)",
            name(wanted.history),
            name(had.history),
            had.history,
        ));
    }
    None
}

#[cfg(test)]
#[path = "prune_tests.rs"]
mod tests;
