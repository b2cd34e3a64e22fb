//! The committed chain: blocks, receipts, transaction index and state,
//! behind one lock so readers always see a whole block.
//!
//! [`Store`] has several jobs; each has its own file, so a change to one
//! (say, how reads fail) is read and reviewed without the others:
//! - `mod.rs`: the [`Store`] and its in-memory part (`Inner`: the
//!   recent blocks, state without a database, the latched halts) and
//!   small accessors every other file uses.
//! - `open.rs`: making a store (in memory, or a data dir resumed and
//!   re-verified), block 0 from a genesis, and closing.
//! - `commit.rs`: the only writer, [`Store::commit`], with the consensus
//!   check of a block's claim about an earlier app hash, and the halts.
//! - `state_at.rs`: state reads, current and at a retained block.
//! - `reads.rs`: blocks, transactions, the address index and sizes, and
//!   what a failed read of the database does.
//! - `logs.rs`: logs with their positions, for `eth_getLogs` and the
//!   WebSocket subscriptions alike.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use alloy_primitives::B256;
use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};

use crate::{cache::StateCache, db::Db, state::MemState, tables::StoredBlock, Halt, StoreError};

mod commit;
mod logs;
mod open;
mod reads;
mod state_at;

pub use commit::CommitInfo;
pub use logs::{LogEntry, LogFilter};
pub use open::{genesis_sealed, DurableOptions};
pub use state_at::StateAt;

/// Where a committed transaction lives.
#[derive(Debug, Clone, Copy)]
struct TxLocation {
    block: u64,
    index: u32,
}

struct Inner {
    /// Current state of an in-memory store (a durable one reads it from
    /// the database through `Store::cache`).
    state: MemState,
    /// Height of the last committed block.
    head: u64,
    /// The most recent committed blocks, oldest first, ending at `head`.
    /// With a database this holds at most `cache_blocks`; older blocks are
    /// read from disk.
    recent: VecDeque<Arc<StoredBlock>>,
    by_hash: HashMap<B256, u64>,
    /// Where each transaction of `recent` is, for a store without a
    /// database only: a durable store finds them in its tx index (recent
    /// ones in the database's write buffers), because a map of every
    /// transaction in `recent` (up to ~640k) grows by rehashing the whole
    /// of it, which held a commit for 140-190 ms.
    txs: Option<HashMap<B256, TxLocation>>,
    /// The first halt: every later commit fails with it.
    halted: Option<Halt>,
    /// The first halt that says this node's state is wrong (another app
    /// hash than a quorum's, a fork; see [`Halt::wrong_from`]), even when
    /// another halt came first. Reads of state and receipts are refused
    /// then; after any other halt (a full disk) they are served.
    diverged: Option<(u64, Halt)>,
}

impl Inner {
    fn cached(&self, number: u64) -> Option<&Arc<StoredBlock>> {
        let first = self.head + 1 - self.recent.len() as u64;
        number.checked_sub(first).and_then(|i| self.recent.get(i as usize))
    }

    fn push(&mut self, block: Arc<StoredBlock>) {
        let number = block.block.header.number;
        for (i, r) in block.receipts.iter().enumerate() {
            if let Some(txs) = &mut self.txs {
                txs.insert(r.tx_hash, TxLocation { block: number, index: i as u32 });
            }
        }
        self.by_hash.insert(block.block.hash, number);
        self.head = number;
        self.recent.push_back(block);
    }

    fn evict_to(&mut self, keep: usize) {
        while self.recent.len() > keep.max(1) {
            if let Some(old) = self.recent.pop_front() {
                self.by_hash.remove(&old.block.hash);
                if let Some(txs) = &mut self.txs {
                    for r in &old.receipts {
                        txs.remove(&r.tx_hash);
                    }
                }
            }
        }
    }
}

/// The committed chain and state. Only [`Store::commit`] writes.
pub struct Store {
    inner: RwLock<Inner>,
    /// `None` in memory; `Some(None)` once [`Store::close`] closed it.
    /// Reads and the commit share it (reads see the last committed
    /// transaction while a write is under way); only close takes it alone.
    db: Option<RwLock<Option<Db>>>,
    /// Current state read from the database, within a byte budget
    /// (durable stores only).
    cache: Option<StateCache>,
    cache_blocks: usize,
    genesis_fingerprint: B256,
    /// Block 0's hash, kept from the open: `eth_config`'s fork id is
    /// derived from it, and block 0 itself may be pruned from the history.
    genesis_hash: B256,
    /// The database was repaired when it was opened ([`Db::repaired`]).
    repaired: bool,
    /// Commit of this height fails (fault injection; 0 = never).
    fail_commit_at: u64,
    /// Reads of this height's block from the database fail with an I/O
    /// error (fault injection; 0 = never).
    fail_read_at: u64,
    /// Reads of the database that failed without damage (see
    /// [`Store::read_errors`]).
    read_errors: AtomicU64,
    /// From this height on, the app hash is perturbed (fault injection, to
    /// prove validators catch divergence; 0 = never).
    diverge_at: u64,
}

impl Store {
    /// Fingerprint of the genesis this store started from.
    pub fn genesis_fingerprint(&self) -> B256 {
        self.genesis_fingerprint
    }

    /// Block 0's hash (what `eth_getBlockByNumber(0)` reports), known
    /// even once block 0 is pruned from the kept history.
    pub fn genesis_hash(&self) -> B256 {
        self.genesis_hash
    }

    /// Whether the data dir had not been closed cleanly (a crash, a kill):
    /// its database replayed its journal when opened, and after a power
    /// loss blocks a grouped sync policy had not synced are gone.
    pub fn repaired_at_open(&self) -> bool {
        self.repaired
    }

    /// Height of the last committed block.
    pub fn head(&self) -> u64 {
        self.inner.read().head
    }

    /// The last committed block.
    pub fn head_block(&self) -> Arc<StoredBlock> {
        let inner = self.inner.read();
        match inner.recent.back() {
            Some(b) => Arc::clone(b),
            None => unreachable!("the store always holds its head block"),
        }
    }

    /// Reads of the database that failed without finding damage (an I/O
    /// error such as EMFILE or EIO) since the store was opened: each was
    /// answered with its error and logged, and the store went on. Exported
    /// as `sluice_store_read_errors_total`.
    pub fn read_errors(&self) -> u64 {
        self.read_errors.load(Ordering::Relaxed)
    }

    /// Why the store halted, if it did.
    pub fn halted(&self) -> Option<Halt> {
        self.inner.read().halted.clone()
    }

    /// The open database, if this store is durable and not closed.
    fn disk(&self) -> Option<MappedRwLockReadGuard<'_, Db>> {
        // Recursive: a read under way must not wait behind a close queued
        // after it (parking_lot's locks are fair to writers).
        RwLockReadGuard::try_map(self.db.as_ref()?.read_recursive(), Option::as_ref).ok()
    }

    /// The open database, or the error a read of a closed store answers.
    fn open_disk(&self) -> Result<MappedRwLockReadGuard<'_, Db>, StoreError> {
        self.disk().ok_or(StoreError::Closed)
    }
}

#[cfg(test)]
mod tests;
