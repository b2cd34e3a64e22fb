//! Where a block's chunks end (see [`Bounds`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{wait_until, CHUNK_TXS};

/// Where chunks end: `ends[k]` is chunk `k`'s end, [`OPEN`] until fixed;
/// chunk `k` starts where chunk `k - 1` ends.
///
/// With more than two workers, chunk `k` is simply the `k`th run of
/// [`CHUNK_TXS`] transactions. With two, fixed chunks leave no slack: the
/// workers alternate, each correcting its chunk right after the other's,
/// so whichever is late by a few microseconds (a chunk that loads more
/// cold state, one with a re-run) makes the other wait, and on this
/// project's machines that was ~10% of the lanes' time. So chunk ends are
/// fixed as the block runs instead: once chunk `k - 1` is final, its
/// worker asks for chunk `k` to end ([`Bounds::ask_end`]); chunk `k`'s worker
/// ends it [`RUNWAY_TXS`] transactions past where it is, corrects what it
/// ran so far (the chunk before being final), and runs those last
/// transactions on exact state. Meanwhile the asking worker has started
/// chunk `k + 1` there. A chunk no one asks to
/// end stops at [`MAX_CHUNK_TXS`], and its worker waits, as with fixed
/// chunks. (Chunks come out ~3 runways long: the runway on each side,
/// plus what is speculated while the other worker corrects its chunk.)
pub(super) struct Bounds {
    ends: Box<[AtomicUsize]>,
    /// `wanted[k]`: chunk `k - 1` is final; chunk `k`'s worker should fix
    /// its end.
    wanted: Box<[AtomicBool]>,
    /// Whether ends are fixed as the block runs.
    dynamic: bool,
}

/// A chunk's end, not fixed yet.
const OPEN: usize = usize::MAX;

/// How far past where it is a chunk ends when asked to (see [`Bounds`]):
/// against fixed chunks of 16, ERC-20 transfers among 1,000 holders were
/// 7-10% faster with 6 (~15% more re-runs), 2-6% with 5 or 8, and no faster
/// with 3 or 12 (two workers alternating block by block, in one process).
/// Since the runway runs on exact state, 3, 4, 10 and 14 were 1-3% slower
/// than 6.
const RUNWAY_TXS: usize = 6;

/// The longest a chunk whose end no one asked for may grow: a longer chunk
/// misses more of what the other worker changes, and runs again more.
const MAX_CHUNK_TXS: usize = 4 * CHUNK_TXS;

impl Bounds {
    /// The bounds of a block of `txs` transactions on `n` workers.
    pub(super) fn new(txs: usize, n: usize) -> Self {
        let dynamic = n == 2;
        // Every chunk but the last holds at least `CHUNK_TXS` transactions
        // (`RUNWAY_TXS` when ends are fixed as the block runs); one slot
        // more for the empty chunk after the last.
        let chunks = txs.div_ceil(if dynamic { RUNWAY_TXS } else { CHUNK_TXS }) + 1;
        let ends = (0..chunks)
            .map(|k| {
                let fixed = ((k + 1) * CHUNK_TXS).min(txs);
                AtomicUsize::new(if dynamic && k > 0 { OPEN } else { fixed })
            })
            .collect();
        Bounds { ends, wanted: (0..chunks).map(|_| AtomicBool::new(false)).collect(), dynamic }
    }

    /// How many chunk slots there are.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Asks chunk `k`'s worker to end it (chunk `k - 1` is final).
    pub(super) fn ask_end(&self, k: usize) {
        if self.dynamic {
            if let Some(wanted) = self.wanted.get(k) {
                wanted.store(true, Ordering::Release);
            }
        }
    }

    /// There is no chunk `k` (chunk `k - 1` ended at the block's `end`):
    /// its end is its start, for the worker of chunk `k + 1`.
    pub(super) fn close(&self, k: usize, end: usize) {
        let _ = self.ends[k].compare_exchange(OPEN, end, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Chunk `k`'s end, once fixed (`None` if the block was given up).
    pub(super) fn wait_end(&self, k: usize, stop: &AtomicBool) -> Option<usize> {
        wait_until(stop, 2_000, || Some(self.ends[k].load(Ordering::Acquire)).filter(|end| *end != OPEN))
    }

    /// Whether chunk `k`, speculated up to `x` (from `start`), holds
    /// transaction `x`: fixes its end if asked to, or if it grew too long.
    pub(super) fn holds(&self, k: usize, start: usize, x: usize, txs: usize) -> bool {
        let mut end = self.ends[k].load(Ordering::Acquire);
        if end == OPEN {
            if x >= txs {
                end = txs;
            } else if self.wanted[k].load(Ordering::Acquire) {
                end = (x + RUNWAY_TXS).min(txs);
            } else if x - start >= MAX_CHUNK_TXS {
                end = x;
            } else {
                return true;
            }
            self.ends[k].store(end, Ordering::Release);
        }
        x < end
    }
}
