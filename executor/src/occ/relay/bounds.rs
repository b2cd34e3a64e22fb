//! Where a block's chunks end (see [`Bounds`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{wait_until, CHUNK_TXS};

/// Where chunks end; chunk `k` starts where chunk `k - 1` ends.
///
/// With more than two workers, chunk `k` is simply the `k`th run of
/// [`CHUNK_TXS`] transactions. With two, fixed chunks leave no slack: the
/// workers alternate, each correcting its chunk right after the other's,
/// so whichever is late by a few microseconds (a chunk that loads more
/// cold state, one with a re-run) makes the other wait, and on this
/// project's machines that was ~10% of the lanes' time. So chunk ends are
/// fixed as the block runs instead. A chunk's worker publishes, before
/// each transaction, which one it is at; once chunk `k - 1` is final, its
/// worker ends chunk `k` itself ([`Bounds::end`]), [`RUNWAY_TXS`]
/// transactions past where chunk `k`'s worker is, and starts chunk `k + 1`
/// there at once. Chunk `k`'s worker sees the end at its next transaction,
/// corrects what it ran so far (the chunk before being final), and runs
/// the last transactions on exact state. Chunk 0 is ended the same way by
/// the other worker once it is up (its thread wakes after the caller's).
/// A chunk no one ends stops at [`MAX_CHUNK_TXS`], and its worker waits,
/// as with fixed chunks. (Chunks come out ~3 runways long: the runway on
/// each side, plus what is speculated while the other worker corrects its
/// chunk.)
///
/// Progress and end share one word per chunk, changed only by
/// compare-and-swap: a worker never starts a transaction past an end, and
/// an end is never fixed before a transaction its worker already started.
pub(super) struct Bounds {
    /// Per chunk: its end once fixed, else [`OPEN`] with the transaction
    /// its worker is at.
    ends: Box<[Slot]>,
    txs: usize,
}

/// One chunk's word, alone in its cache lines: each worker changes its
/// chunk's word before every transaction, and neighbouring words sharing
/// a line would bounce it between the cores at that rate.
#[repr(align(128))]
struct Slot(AtomicUsize);

impl Slot {
    /// Fixes the chunk's end at `end(where its worker is)`, unless it is
    /// fixed already.
    fn fix(&self, end: impl Fn(usize) -> usize) {
        let mut now = self.0.load(Ordering::Acquire);
        while now & OPEN != 0 {
            match self.0.compare_exchange_weak(now, end(now & !OPEN), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(changed) => now = changed,
            }
        }
    }
}

/// Set in a chunk's word while its end is not fixed; the other bits are
/// the transaction its worker is at.
const OPEN: usize = 1 << (usize::BITS - 1);

/// How far past where its worker is a chunk is ended (see [`Bounds`]):
/// against fixed chunks of 16, ERC-20 transfers among 1,000 holders were
/// 7-10% faster with 6 (~15% more re-runs), 2-6% with 5 or 8, and no faster
/// with 3 or 12 (two workers alternating block by block, in one process).
/// Since the runway runs on exact state, 3, 4, 10 and 14 were 1-3% slower
/// than 6.
const RUNWAY_TXS: usize = 6;

/// The longest a chunk no one ended may grow: a longer chunk misses more
/// of what the other worker changes, and runs again more. An end fixed by
/// the other worker is capped here too: its worker is always short of it.
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
            .map(|k| Slot(AtomicUsize::new(if dynamic { OPEN } else { ((k + 1) * CHUNK_TXS).min(txs) })))
            .collect();
        Bounds { ends, txs }
    }

    /// How many chunk slots there are.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Ends chunk `k`, which starts at `start`, a runway past where its
    /// worker is (or past its start, if its worker has not started it):
    /// called once chunk `k - 1` is final, by its worker. Nothing if the
    /// end is fixed already (the chunk grew too long, or holds the block's
    /// last transaction).
    pub(super) fn end(&self, k: usize, start: usize) {
        if let Some(slot) = self.ends.get(k) {
            slot.fix(|at| (at.max(start) + RUNWAY_TXS).min(start + MAX_CHUNK_TXS).min(self.txs));
        }
    }

    /// There is no chunk `k` (chunk `k - 1` ended at the block's `end`):
    /// its end is its start, for the worker of chunk `k + 1`.
    pub(super) fn close(&self, k: usize, end: usize) {
        self.ends[k].fix(|_| end);
    }

    /// Chunk `k`'s end, once fixed (`None` if the block was given up).
    pub(super) fn wait_end(&self, k: usize, stop: &AtomicBool) -> Option<usize> {
        let Slot(word) = &self.ends[k];
        wait_until(stop, 2_000, || Some(word.load(Ordering::Acquire)).filter(|end| end & OPEN == 0))
    }

    /// Whether chunk `k`, which starts at `start`, holds transaction `x`
    /// (called before running each, in order): if its end is not fixed,
    /// records that its worker is at `x`, or fixes the end if the chunk
    /// grew too long or `x` is past the block.
    pub(super) fn holds(&self, k: usize, start: usize, x: usize) -> bool {
        let Slot(word) = &self.ends[k];
        let mut now = word.load(Ordering::Acquire);
        while now & OPEN != 0 {
            let end = if x >= self.txs {
                Some(self.txs)
            } else if x - start >= MAX_CHUNK_TXS {
                Some(x)
            } else {
                None
            };
            match word.compare_exchange_weak(
                now,
                end.unwrap_or(OPEN | x),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return end.is_none_or(|end| x < end),
                Err(changed) => now = changed,
            }
        }
        x < now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs chunk `k` from `start` while `holds` says so, calling `during`
    /// before each transaction; returns where it stopped.
    fn run(bounds: &Bounds, k: usize, start: usize, mut during: impl FnMut(usize)) -> usize {
        let mut x = start;
        while bounds.holds(k, start, x) {
            during(x);
            x += 1;
        }
        x
    }

    #[test]
    fn ended_a_runway_past_where_its_worker_is() {
        let bounds = Bounds::new(1_000, 2);
        // Chunk 0's worker is at transaction 9 when the other ends it.
        let end = run(&bounds, 0, 0, |x| {
            if x == 9 {
                bounds.end(0, 0);
            }
        });
        assert_eq!(end, 9 + RUNWAY_TXS);
        let never = AtomicBool::new(false);
        assert_eq!(bounds.wait_end(0, &never), Some(end));
    }

    #[test]
    fn ended_before_its_worker_started_it() {
        let bounds = Bounds::new(1_000, 2);
        bounds.end(1, 64);
        assert_eq!(run(&bounds, 1, 64, |_| {}), 64 + RUNWAY_TXS);
        // An end once fixed stays.
        bounds.end(1, 64);
        bounds.close(1, 64);
        assert_eq!(bounds.wait_end(1, &AtomicBool::new(false)), Some(64 + RUNWAY_TXS));
    }

    #[test]
    fn a_chunk_no_one_ends_stops_at_its_limit_or_the_block_end() {
        let bounds = Bounds::new(1_000, 2);
        assert_eq!(run(&bounds, 0, 0, |_| {}), MAX_CHUNK_TXS);
        assert_eq!(run(&bounds, 1, 990, |_| {}), 1_000);
        // Ended at its first transaction, or near the block's end (not
        // past it).
        let bounds = Bounds::new(100, 2);
        assert_eq!(run(&bounds, 1, 90, |_| bounds.end(1, 90)), 90 + RUNWAY_TXS);
        let bounds = Bounds::new(100, 2);
        assert_eq!(run(&bounds, 1, 97, |_| bounds.end(1, 97)), 100);
    }

    #[test]
    fn an_end_fixed_near_the_limit_stops_at_it() {
        let bounds = Bounds::new(1_000, 2);
        // The worker is at 61 when the other ends its chunk: a runway
        // would take it to 67, the limit stops it at 64.
        let end = run(&bounds, 0, 0, |x| {
            if x == MAX_CHUNK_TXS - 3 {
                bounds.end(0, 0);
            }
        });
        assert_eq!(end, MAX_CHUNK_TXS);
    }

    #[test]
    fn with_more_workers_chunks_are_fixed() {
        let bounds = Bounds::new(100, 3);
        bounds.end(1, 16);
        assert_eq!(run(&bounds, 1, CHUNK_TXS, |_| {}), 2 * CHUNK_TXS);
        assert_eq!(run(&bounds, 6, 6 * CHUNK_TXS, |_| {}), 100);
    }

    #[test]
    fn an_end_is_never_before_a_started_transaction() {
        // The two workers race: one runs chunk 1, the other ends it at
        // some moment; whatever the interleaving, the chunk runs to a
        // runway past where it was, never less, and never past the limit
        // (an ender late enough finds the runner just short of it: before
        // the cap, CI saw 67 once, in a debug build).
        for _ in 0..200 {
            let bounds = Bounds::new(10_000, 2);
            let started = AtomicUsize::new(0);
            std::thread::scope(|s| {
                s.spawn(|| {
                    while started.load(Ordering::Acquire) < 20 {
                        std::hint::spin_loop();
                    }
                    bounds.end(1, 0);
                });
                let end = run(&bounds, 1, 0, |x| started.store(x, Ordering::Release));
                let fixed = bounds.wait_end(1, &AtomicBool::new(false));
                assert_eq!(fixed, Some(end));
                assert!(end > 20 && end <= MAX_CHUNK_TXS, "{end}");
            });
        }
    }
}
