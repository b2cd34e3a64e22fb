//! The prepared-transaction cache and block preparation.
//!
//! Admission recovers every sender once; the cache hands that work to block
//! preparation, keyed by the keccak of the exact raw bytes (the canonical tx
//! hash: any other key and every lookup silently misses). 64 shards, chosen
//! by the first hash byte, keep lock hold times to a map probe; each shard
//! evicts its oldest entry first.
//!
//! Hashing happens before any lock is taken, spread over worker threads in
//! contiguous index ranges (the seed system lost 560 us per block and
//! stalled admission by hashing under a lock).

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use alloy_consensus::Transaction;
use alloy_primitives::{
    map::{B256Map, B256Set},
    Bytes, B256,
};
use keccak_asm::{Digest, Keccak256};
use parking_lot::Mutex;
use sluice_messages::{PreparedTx, RecoveredTx};

use crate::recover::recover_raw_with_hash;

/// Number of cache shards; a shard is chosen by `hash[0] % SHARDS`.
pub const SHARDS: usize = 64;

/// Below this many transactions per worker, spawning threads costs more
/// than it saves (keccak is ~300 ns per transfer, a thread spawn ~20 us).
pub const MIN_HASHES_PER_WORKER: usize = 64;

/// Transactions hashed and looked up as one piece of work in preparation.
const PIECE: usize = 256;

/// Below this many recoveries per worker, recovery stays on one thread
/// (one recovery is ~40 us, so even a few justify a thread).
pub(crate) const MIN_RECOVERIES_PER_WORKER: usize = 4;

/// Reason given for the second copy of a transaction in one block.
pub const DUPLICATE_IN_BLOCK: &str = "duplicate transaction in block";

#[derive(Debug, Default)]
struct Shard {
    map: B256Map<Arc<RecoveredTx>>,
    /// Hashes in insertion order; the front is evicted first.
    ring: VecDeque<B256>,
}

/// Recovered transactions by hash, bounded, oldest evicted first.
#[derive(Debug)]
pub struct PreparedTxCache {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl PreparedTxCache {
    /// A cache holding about `capacity` transactions (split evenly across
    /// the shards, at least one each). Size it to the blocks in flight times
    /// the transactions per block.
    pub fn new(capacity: usize) -> Self {
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        PreparedTxCache {
            shards,
            per_shard,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn shard(&self, hash: &B256) -> &Mutex<Shard> {
        &self.shards[hash[0] as usize % SHARDS]
    }

    /// Remembers an admitted transaction. Re-inserting a cached hash keeps
    /// its place in the eviction order.
    pub fn insert(&self, tx: &RecoveredTx) {
        self.insert_shared(Arc::new(tx.clone()));
    }

    /// [`PreparedTxCache::insert`] of a transaction already shared.
    pub fn insert_shared(&self, tx: Arc<RecoveredTx>) {
        let mut shard = self.shard(&tx.hash).lock();
        if shard.map.contains_key(&tx.hash) {
            return;
        }
        if shard.map.len() >= self.per_shard {
            if let Some(oldest) = shard.ring.pop_front() {
                shard.map.remove(&oldest);
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        shard.ring.push_back(tx.hash);
        shard.map.insert(tx.hash, tx);
    }

    /// The cached transaction with this hash, if it is EIP-155 protected for
    /// `chain_id` (a sender is only reused for a transaction that could not
    /// be replayed from another chain). Does not remove it: a block may be
    /// prepared again after a reorganisation of the pipeline.
    pub fn get(&self, hash: &B256, chain_id: u64) -> Option<Arc<RecoveredTx>> {
        let found = {
            let shard = self.shard(hash).lock();
            shard.map.get(hash).filter(|tx| tx.tx.chain_id() == Some(chain_id)).cloned()
        };
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Cached transactions.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total capacity (per-shard capacity times the shard count).
    pub fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }

    /// Lookups that found a usable entry.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Entries evicted to make room.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
}

/// Splits `0..len` into at most `workers` contiguous ranges of at least
/// `min_per_worker` items (one range when there is not enough work).
fn chunk_len(len: usize, workers: usize, min_per_worker: usize) -> usize {
    let useful = (len / min_per_worker.max(1)).clamp(1, workers.max(1));
    len.div_ceil(useful).max(1)
}

/// Keccak of every raw transaction, in order, over `workers` threads
/// (contiguous ranges, one reused hasher per worker; single-threaded below
/// [`MIN_HASHES_PER_WORKER`] transactions per worker).
pub fn hash_batch(raws: &[Bytes], workers: usize) -> Vec<B256> {
    let mut out = vec![B256::ZERO; raws.len()];
    let chunk = chunk_len(raws.len(), workers, MIN_HASHES_PER_WORKER);
    if chunk >= raws.len() {
        hash_range(raws, &mut out);
        return out;
    }
    std::thread::scope(|s| {
        let mut parts = raws.chunks(chunk).zip(out.chunks_mut(chunk));
        // The calling thread takes the first range itself: one spawn fewer.
        let first = parts.next();
        for (r, o) in parts {
            s.spawn(move || hash_range(r, o));
        }
        if let Some((r, o)) = first {
            hash_range(r, o);
        }
    });
    out
}

/// Keccak of each of `raws` into `out`, with one reused hasher.
fn hash_range(raws: &[Bytes], out: &mut [B256]) {
    hash_range_with(&mut Keccak256::new(), raws, out);
}

fn hash_range_with(hasher: &mut Keccak256, raws: &[Bytes], out: &mut [B256]) {
    for (raw, slot) in raws.iter().zip(out.iter_mut()) {
        hasher.update(raw);
        *slot = B256::from(<[u8; 32]>::from(hasher.finalize_reset()));
    }
}

/// Decodes and recovers a block's transactions, reusing senders recovered
/// at admission.
///
/// Each worker hashes a contiguous range of the block (no lock held), then
/// looks its hashes up under short shard locks; then the misses are decoded
/// and recovered over `workers` threads with libsecp256k1. A raw that does not decode or recover becomes
/// [`PreparedTx::Invalid`]; so does every copy of a transaction after its
/// first, whether or not the cache held it.
pub fn prepare_block(
    raws: &[Bytes],
    cache: &PreparedTxCache,
    chain_id: u64,
    workers: usize,
) -> Vec<PreparedTx> {
    prepare_block_timed(raws, cache, chain_id, workers).0
}

/// Time spent in each phase of [`prepare_block_timed`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PrepareTimings {
    /// Hashing every raw transaction (no lock held): the slowest worker's.
    pub hash: std::time::Duration,
    /// The rest of the hash-and-look-up phase: cache lookups under the
    /// shard locks, and finding duplicates.
    pub lookup: std::time::Duration,
    /// Decoding and recovering the misses.
    pub recover: std::time::Duration,
    /// Transactions found in the cache.
    pub hits: usize,
    /// Transactions recovered here (including undecodable ones).
    pub misses: usize,
}

/// [`prepare_block`], also reporting how long each phase took.
pub fn prepare_block_timed(
    raws: &[Bytes],
    cache: &PreparedTxCache,
    chain_id: u64,
    workers: usize,
) -> (Vec<PreparedTx>, PrepareTimings) {
    let t0 = std::time::Instant::now();
    let n = raws.len();
    // An empty reason marks "not found yet": every such slot is filled below.
    let pending = |hash: B256| PreparedTx::Invalid { hash, reason: String::new() };
    let mut txs = vec![pending(B256::ZERO); n];
    let mut hashes = vec![B256::ZERO; n];
    let look_up = |hasher: &mut Keccak256, raws: &[Bytes], hashes: &mut [B256], out: &mut [PreparedTx]| {
        let start = std::time::Instant::now();
        hash_range_with(hasher, raws, hashes);
        let hashed = start.elapsed();
        for (hash, slot) in hashes.iter().zip(out.iter_mut()) {
            *slot = match cache.get(hash, chain_id) {
                Some(tx) => PreparedTx::Ready(tx),
                None => pending(*hash),
            };
        }
        hashed
    };
    // Contiguous pieces handed out one at a time: a worker that starts late
    // (a thread spawn is tens of microseconds) takes fewer pieces instead of
    // holding up the block with a fixed half.
    let threads = n.div_ceil(chunk_len(n, workers, MIN_HASHES_PER_WORKER)).max(1);
    let pieces = Mutex::new(raws.chunks(PIECE).zip(hashes.chunks_mut(PIECE)).zip(txs.chunks_mut(PIECE)));
    let work = || {
        let mut hasher = Keccak256::new();
        let mut hashed = std::time::Duration::ZERO;
        loop {
            let next = pieces.lock().next();
            let Some(((r, h), o)) = next else {
                return hashed;
            };
            hashed += look_up(&mut hasher, r, h, o);
        }
    };
    let hash_time = std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        // The calling thread works too: one spawn fewer.
        let mut slowest = work();
        for handle in handles {
            match handle.join() {
                Ok(t) => slowest = slowest.max(t),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        slowest
    });
    // Every copy of a transaction after its first is not applicable,
    // found in the cache or not.
    let mut seen = B256Set::default();
    seen.reserve(n);
    for (hash, slot) in hashes.iter().zip(txs.iter_mut()) {
        if !seen.insert(*hash) {
            *slot = PreparedTx::Invalid { hash: *hash, reason: DUPLICATE_IN_BLOCK.to_owned() };
        }
    }
    let t2 = std::time::Instant::now();
    let misses: Vec<usize> = (0..n)
        .filter(|&i| matches!(&txs[i], PreparedTx::Invalid { reason, .. } if reason.is_empty()))
        .collect();
    let timings_misses = misses.len();
    let recovered = recover_many(raws, &hashes, &misses, workers);
    for (i, tx) in misses.into_iter().zip(recovered) {
        txs[i] = tx;
    }
    let t3 = std::time::Instant::now();
    let timings = PrepareTimings {
        hash: hash_time,
        lookup: (t2 - t0).saturating_sub(hash_time),
        recover: t3 - t2,
        hits: raws.len() - timings_misses,
        misses: timings_misses,
    };
    (txs, timings)
}

/// Decodes and recovers `raws[i]` for each `i` in `which`, in order.
fn recover_many(raws: &[Bytes], hashes: &[B256], which: &[usize], workers: usize) -> Vec<PreparedTx> {
    let one = |&i: &usize| match recover_raw_with_hash(raws[i].clone(), hashes[i]) {
        Ok(tx) => PreparedTx::ready(tx),
        Err(e) => PreparedTx::Invalid { hash: hashes[i], reason: e.to_string() },
    };
    par_map(which, workers, MIN_RECOVERIES_PER_WORKER, one)
}

/// `f` of each item, in order, over up to `workers` scoped threads in
/// contiguous ranges (the calling thread takes the first; one thread below
/// `min_per_worker` items per worker). Shared by block preparation and a
/// validator's check of a proposal, so both spread sender recovery the
/// same way without a thread pool of their own.
pub(crate) fn par_map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    min_per_worker: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let chunk = chunk_len(items.len(), workers, min_per_worker);
    if chunk >= items.len() {
        return items.iter().map(&f).collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .skip(1)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        let mut out: Vec<R> = items[..chunk].iter().map(f).collect();
        for handle in handles {
            match handle.join() {
                Ok(part) => out.extend(part),
                // Recovery does not panic; should it, propagate rather than
                // produce a block with missing transactions.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
