//! Whether a block of contract calls runs on lanes or in order on one
//! journal: a rule of two counts, no clock.
//!
//! Both modes are exact, so the rule decides only speed. Lanes hand a
//! block's chunks from thread to thread; they win while a second core is
//! free (1.6-1.8x the one journal on the `occ` bench) and lose while other
//! stages keep every core busy, because each hand-off then waits for a
//! thread to be scheduled (on 2 vCPUs under an ERC-20 load, ~33-42 ms a
//! block on lanes against ~11-13 ms in order). So:
//!
//! - **Busy:** in order while admission is recovering senders, that is
//!   while its count of recovered transactions ([`Load::work_done`]) moved
//!   since the previous block of contract calls. (Replay, catch-up, a
//!   follower and a burst's tail see it stand still and run lanes.)
//! - **Given up:** a block lanes gave up on (contention, or something they
//!   do not model) cost an attempt and the run in order after it; the next
//!   `backoff` blocks of contract calls run in order, `backoff` doubling
//!   from 1 to [`MAX_BACKOFF_BLOCKS`] while attempts keep giving up, and
//!   back to 1 once lanes finish a block.
//!
//! Why counts and not timings: a machine's speed moves by a third within a
//! minute when it is shared, so timing each mode per gas needs medians of
//! ratios bracketed by the blocks around them to choose right, and still
//! spends blocks exploring the slower mode; the counts say which mode
//! wins directly, and the same way on every run.

use std::{fmt, sync::Arc};

use crate::stats::InOrder;

/// Work other stages do on the node's cores: lanes run only while it
/// stands still.
pub trait Load: Send + Sync + fmt::Debug {
    /// A count that grows as the work is done (admission: transactions
    /// whose senders were recovered). Only its changes matter.
    fn work_done(&self) -> u64;
}

/// Most blocks of contract calls run in order after lanes gave up on
/// several in a row: an attempt costs about a block, so one in 64 keeps the
/// waste under 2% on a workload lanes never finish.
pub(crate) const MAX_BACKOFF_BLOCKS: u32 = 64;

/// How a block of contract calls runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On lanes, on every worker.
    Lanes,
    /// In order on the one journal, for this reason.
    InOrder(InOrder),
}

/// The per-executor rule (see the module docs).
#[derive(Debug)]
pub(crate) struct Rule {
    /// Admission's work, if the node has any (benches and replay do not).
    load: Option<Arc<dyn Load>>,
    /// `load`'s count when the previous block was chosen for.
    seen: u64,
    /// Blocks of contract calls still to run in order after a give-up.
    skip: u32,
    /// What `skip` is set to at the next give-up.
    backoff: u32,
}

impl Rule {
    /// A rule reading `load` (none: never busy).
    pub(crate) fn new(load: Option<Arc<dyn Load>>) -> Self {
        let seen = load.as_ref().map_or(0, |l| l.work_done());
        Rule { load, seen, skip: 0, backoff: 1 }
    }

    /// The load it reads, for a clone of its executor.
    pub(crate) fn load(&self) -> Option<Arc<dyn Load>> {
        self.load.clone()
    }

    /// The mode of the next block of contract calls.
    pub(crate) fn choose(&mut self) -> Mode {
        // Read every block, so that a block run in order for a give-up
        // does not leave the next comparing against an old count.
        let now = self.load.as_ref().map_or(0, |l| l.work_done());
        let busy = std::mem::replace(&mut self.seen, now) != now;
        if self.skip > 0 {
            self.skip -= 1;
            return Mode::InOrder(InOrder::GaveUpRecently);
        }
        if busy {
            return Mode::InOrder(InOrder::Busy);
        }
        Mode::Lanes
    }

    /// Lanes finished a block: the next give-up waits one block again.
    pub(crate) fn finished(&mut self) {
        self.backoff = 1;
    }

    /// Lanes gave up on a block: the next `backoff` blocks run in order.
    pub(crate) fn gave_up(&mut self) {
        self.skip = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF_BLOCKS);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[derive(Debug, Default)]
    struct Counter(AtomicU64);

    impl Load for Counter {
        fn work_done(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn without_load_every_block_runs_on_lanes() {
        let mut rule = Rule::new(None);
        for _ in 0..10 {
            assert_eq!(rule.choose(), Mode::Lanes);
            rule.finished();
        }
    }

    #[test]
    fn in_order_while_admission_works_lanes_once_it_stops() {
        let load = Arc::new(Counter::default());
        let mut rule = Rule::new(Some(load.clone()));
        assert_eq!(rule.choose(), Mode::Lanes, "nothing recovered since start");
        for _ in 0..5 {
            load.0.fetch_add(100, Ordering::Relaxed);
            assert_eq!(rule.choose(), Mode::InOrder(InOrder::Busy));
        }
        // Admission stops: the first block after it still saw work before
        // it, the next sees none.
        assert_eq!(rule.choose(), Mode::Lanes);
        assert_eq!(rule.choose(), Mode::Lanes);
        // One transaction between blocks is work too.
        load.0.fetch_add(1, Ordering::Relaxed);
        assert_eq!(rule.choose(), Mode::InOrder(InOrder::Busy));
    }

    #[test]
    fn give_ups_back_off_doubling_and_a_finished_block_resets() {
        let mut rule = Rule::new(None);
        // Lanes give up on every block they try: the blocks in order
        // between tries double, 1, 2, 4, ... up to the most.
        let mut gaps = Vec::new();
        let mut gap = 0;
        for _ in 0..400 {
            match rule.choose() {
                Mode::Lanes => {
                    gaps.push(gap);
                    gap = 0;
                    rule.gave_up();
                }
                Mode::InOrder(why) => {
                    assert_eq!(why, InOrder::GaveUpRecently);
                    gap += 1;
                }
            }
        }
        assert_eq!(&gaps[..9], &[0, 1, 2, 4, 8, 16, 32, 64, 64]);
        // Lanes finish one: the next give-up costs one block again.
        while rule.choose() != Mode::Lanes {}
        rule.finished();
        assert_eq!(rule.choose(), Mode::Lanes);
        rule.gave_up();
        assert_eq!(rule.choose(), Mode::InOrder(InOrder::GaveUpRecently));
        assert_eq!(rule.choose(), Mode::Lanes);
    }

    #[test]
    fn a_give_up_outranks_an_idle_admission_and_reads_the_count_meanwhile() {
        let load = Arc::new(Counter::default());
        let mut rule = Rule::new(Some(load.clone()));
        assert_eq!(rule.choose(), Mode::Lanes);
        rule.gave_up();
        load.0.fetch_add(5, Ordering::Relaxed);
        assert_eq!(rule.choose(), Mode::InOrder(InOrder::GaveUpRecently));
        // The work was seen by the block in order: this one is idle.
        assert_eq!(rule.choose(), Mode::Lanes);
    }
}
