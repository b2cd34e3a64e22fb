//! Choosing, block by block, between speculating in parallel and running in
//! order on one journal.
//!
//! Both modes are exact, so the choice decides only speed, and which is
//! faster depends on the transactions and the machine. Speculation pays a
//! fixed cost per transaction (multi-version reads, validation, the
//! hand-off between cores: ~2.5 us on this project's 2-core machines);
//! it wins when transactions are expensive and independent, and loses on
//! cheap contract calls such as ERC-20 transfers (~2.3 us each in order),
//! where one journal is faster than two workers. The chooser measures
//! instead of guessing: it keeps a moving average of wall time per unit of
//! gas for each mode, runs each block in the faster one (in order only
//! when clearly faster), and every `explore_every_blocks` blocks tries the
//! other, so a change of workload (or of load on the machine) is noticed.

use std::time::Duration;

/// How a block of contract calls runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On the multi-version engine, speculatively on every worker.
    Parallel,
    /// In order on one thread (one journal, else the sequential executor).
    InOrder,
}

impl Mode {
    fn other(self) -> Mode {
        match self {
            Mode::Parallel => Mode::InOrder,
            Mode::InOrder => Mode::Parallel,
        }
    }
}

/// Weight of the newest block in each mode's moving average.
const WEIGHT: f64 = 0.3;

/// How much faster in order must look to be chosen: timings on a shared
/// machine swing by tens of percent from one block to the next, and a
/// block run in order leaves a core idle. Without a margin, one unlucky
/// sample sends the executor in order for `explore_every_blocks` blocks.
const IN_ORDER_MARGIN: f64 = 1.15;

/// The per-executor choice between the two modes.
#[derive(Debug, Clone)]
pub(crate) struct Chooser {
    /// 0: always parallel (the chooser is off).
    explore_every_blocks: u32,
    /// Moving averages of nanoseconds per gas: parallel, in order.
    ns_per_gas: [Option<f64>; 2],
    /// Blocks run in the faster mode since the other was last tried.
    since_explore: u32,
}

impl Chooser {
    /// A chooser that tries the slower mode every `explore_every_blocks`
    /// blocks; 0 turns it off (every block speculates).
    pub(crate) fn new(explore_every_blocks: u32) -> Self {
        Chooser { explore_every_blocks, ns_per_gas: [None, None], since_explore: 0 }
    }

    /// Every how many blocks the slower mode is tried (0: off).
    pub(crate) fn explore_every_blocks(&self) -> u32 {
        self.explore_every_blocks
    }

    /// The mode the next block runs in.
    pub(crate) fn choose(&mut self) -> Mode {
        if self.explore_every_blocks == 0 {
            return Mode::Parallel;
        }
        let best = match self.ns_per_gas {
            [None, _] => return Mode::Parallel,
            [_, None] => return Mode::InOrder,
            [Some(parallel), Some(in_order)] if parallel <= in_order * IN_ORDER_MARGIN => Mode::Parallel,
            _ => Mode::InOrder,
        };
        self.since_explore += 1;
        if self.since_explore >= self.explore_every_blocks {
            self.since_explore = 0;
            return best.other();
        }
        best
    }

    /// Records that a block using `gas` took `elapsed` in `mode`.
    pub(crate) fn record(&mut self, mode: Mode, gas: u64, elapsed: Duration) {
        if gas == 0 {
            return;
        }
        let sample = elapsed.as_nanos() as f64 / gas as f64;
        let average = &mut self.ns_per_gas[mode as usize];
        *average = Some(average.map_or(sample, |old| old + (sample - old) * WEIGHT));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chooser: &mut Chooser, blocks: usize, parallel_ns: u64, in_order_ns: u64) -> Vec<Mode> {
        (0..blocks)
            .map(|_| {
                let mode = chooser.choose();
                let ns = if mode == Mode::Parallel { parallel_ns } else { in_order_ns };
                chooser.record(mode, 1_000, Duration::from_nanos(ns));
                mode
            })
            .collect()
    }

    #[test]
    fn off_always_speculates() {
        let mut chooser = Chooser::new(0);
        assert!(run(&mut chooser, 50, 2_000, 1_000).iter().all(|m| *m == Mode::Parallel));
    }

    #[test]
    fn measures_both_then_keeps_the_faster_and_explores_the_other() {
        let mut chooser = Chooser::new(8);
        let modes = run(&mut chooser, 66, 2_000, 1_000);
        assert_eq!(&modes[..2], &[Mode::Parallel, Mode::InOrder]);
        let parallel: Vec<usize> =
            modes.iter().enumerate().skip(2).filter(|(_, m)| **m == Mode::Parallel).map(|(i, _)| i).collect();
        // Every 8th block after the first two tries the slower mode.
        assert_eq!(parallel, vec![9, 17, 25, 33, 41, 49, 57, 65]);
        // And the other way round.
        let mut chooser = Chooser::new(8);
        let modes = run(&mut chooser, 66, 1_000, 2_000);
        assert_eq!(modes.iter().filter(|m| **m == Mode::InOrder).count(), 1 + 8);
    }

    #[test]
    fn in_order_must_be_clearly_faster() {
        let mut chooser = Chooser::new(8);
        // In order 10% faster: within the margin, speculation stays.
        let modes = run(&mut chooser, 20, 1_100, 1_000);
        assert_eq!(modes[1], Mode::InOrder, "measured once");
        assert_eq!(modes[2..].iter().filter(|m| **m == Mode::InOrder).count(), 2, "{modes:?}");
    }

    #[test]
    fn follows_a_change_of_workload() {
        let mut chooser = Chooser::new(4);
        run(&mut chooser, 20, 2_000, 1_000);
        // Parallel becomes 4x faster: the next exploration shows it, and a
        // few explorations later it is the mode of choice.
        let modes = run(&mut chooser, 40, 250, 1_000);
        let parallel = modes[28..].iter().filter(|m| **m == Mode::Parallel).count();
        assert_eq!(parallel, 9, "{modes:?}");
    }
}
