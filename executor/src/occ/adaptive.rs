//! Choosing, block by block, between lanes and running in order on one
//! journal, for blocks of contract calls.
//!
//! Both modes are exact, so the choice decides only speed, and which is
//! faster depends on the transactions and the machine. Lanes pay for
//! their bookkeeping (noting what each run read and changed, correcting
//! chunks, the hand-off between cores: one lane alone takes ~1.2x the
//! one journal's time) and win when a second core is free; when it is not
//! (on a 2-core node, admission and recovery keep it busy under load),
//! one journal is faster. The chooser measures
//! instead of guessing: it runs blocks in the mode that looks faster (in
//! order only when clearly faster) and tries the other every
//! `explore_every_blocks` blocks, so a change of workload (or of load on
//! the machine) is noticed. While explorations agree with the choice they
//! grow apart, up to [`MAX_BACKOFF`] times that: each runs a block in the
//! slower mode.
//!
//! What it compares is not each mode's average time: on a shared machine
//! the speed of the same code moves by a third within a minute, so a mode
//! last measured at a quiet moment looks faster than one measured since.
//! Instead, each exploration is compared with the blocks just before and
//! just after it (their geometric mean): one ratio, taken at one moment,
//! whatever the machine's speed then. The choice follows the median of
//! the last [`RATIOS`] ratios, so one unlucky block (the other process on
//! the machine waking up) does not decide it either.

use std::time::Duration;

/// How a block of contract calls runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On lanes, on every worker.
    Lanes,
    /// In order on one thread, on the one journal.
    InOrder,
}

impl Mode {
    fn other(self) -> Mode {
        match self {
            Mode::Lanes => Mode::InOrder,
            Mode::InOrder => Mode::Lanes,
        }
    }
}

/// How many recent explorations the choice is the median of.
const RATIOS: usize = 5;

/// How far apart explorations may grow, in multiples of
/// `explore_every_blocks`: each exploration that agrees with the choice
/// doubles the interval up to this, and one that disagrees brings it back.
/// An exploration runs a block in the slower mode: one in 8 blocks cost
/// ERC-20 blocks ~2% on average, and more at the median.
const MAX_BACKOFF: u32 = 4;

/// How much faster in order must look to be chosen: a block run in order
/// leaves a core idle, and close calls should not flip the mode back and
/// forth.
const IN_ORDER_MARGIN: f64 = 1.15;

/// The per-executor choice between the two modes.
#[derive(Debug, Clone)]
pub(crate) struct Chooser {
    /// 0: always parallel (the chooser is off).
    explore_every_blocks: u32,
    /// The last (up to) three blocks' modes and nanoseconds per gas,
    /// oldest first.
    history: Vec<(Mode, f64)>,
    /// Recent ratios of in-order time per gas over parallel time per gas,
    /// one per exploration, oldest first.
    ratios: Vec<f64>,
    /// Blocks run in the faster mode since the other was last tried.
    since_explore: u32,
    /// Blocks between explorations now: `explore_every_blocks` times a
    /// power of two, up to [`MAX_BACKOFF`] times.
    interval: u32,
}

impl Chooser {
    /// A chooser that tries the slower mode every `explore_every_blocks`
    /// blocks (up to [`MAX_BACKOFF`] times less often while the choice
    /// holds); 0 turns it off (every block speculates).
    pub(crate) fn new(explore_every_blocks: u32) -> Self {
        Chooser {
            explore_every_blocks,
            history: Vec::with_capacity(3),
            ratios: Vec::with_capacity(RATIOS),
            since_explore: 0,
            interval: explore_every_blocks,
        }
    }

    /// Every how many blocks the slower mode is tried (0: off).
    pub(crate) fn explore_every_blocks(&self) -> u32 {
        self.explore_every_blocks
    }

    /// The mode the next block runs in.
    pub(crate) fn choose(&mut self) -> Mode {
        if self.explore_every_blocks == 0 {
            return Mode::Lanes;
        }
        let Some(ratio) = self.median() else {
            // Nothing compared yet: two blocks in parallel, one in order,
            // then parallel again, so that the first ratio brackets the
            // in-order block like every later one. The first block is not
            // compared: it starts the workers' threads and fills their
            // tables (in the bench it took 1.3-5x the second), and a
            // ratio against it can hold blocks in order until two more
            // explorations outvote it.
            return match self.history[..] {
                [.., (Mode::Lanes, _), (Mode::Lanes, _)] => Mode::InOrder,
                _ => Mode::Lanes,
            };
        };
        let best = faster(ratio);
        self.since_explore += 1;
        if self.since_explore >= self.interval {
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
        let sample = elapsed.as_nanos().max(1) as f64 / gas as f64;
        if self.history.len() == 3 {
            self.history.remove(0);
        }
        self.history.push((mode, sample));
        // In order over parallel, from one block in each mode.
        let ratio = |(a, x): (Mode, f64), y: f64| if a == Mode::InOrder { x / y } else { y / x };
        let ratio = match self.history[..] {
            // An exploration between two blocks in the other mode.
            [(before, x), middle, (after, z)] if before == after && middle.0 != before => {
                let ratio = ratio(middle, (x * z).sqrt());
                // It agrees with the choice (the mode it was compared
                // with): the next one may wait longer.
                self.interval = match faster(ratio) == before {
                    true => {
                        let most = self.explore_every_blocks.saturating_mul(MAX_BACKOFF);
                        self.interval.saturating_mul(2).min(most)
                    }
                    false => self.explore_every_blocks,
                };
                Some(ratio)
            }
            _ => None,
        };
        if let Some(ratio) = ratio {
            if self.ratios.len() == RATIOS {
                self.ratios.remove(0);
            }
            self.ratios.push(ratio);
        }
    }

    /// Records that a block the workers gave up on (found contended: it
    /// ran in order after their attempt) took `elapsed` in parallel mode.
    /// Its time counts [`IN_ORDER_MARGIN`] times: the margin is for the
    /// core a block in order leaves idle, and this block left it idle all
    /// the same, so in order is chosen whenever it is faster at all. (On a
    /// counter every transaction increments, the attempt and the run after
    /// it took ~1.1x the run alone: within the margin, every block paid
    /// for the attempt.)
    pub(crate) fn record_given_up(&mut self, gas: u64, elapsed: Duration) {
        self.record(Mode::Lanes, gas, elapsed.mul_f64(IN_ORDER_MARGIN));
    }

    /// The median of the recent ratios (the mean of the middle two of an
    /// even number), if there are any.
    fn median(&self) -> Option<f64> {
        let n = self.ratios.len();
        let mut sorted = [0.0; RATIOS];
        sorted[..n].copy_from_slice(&self.ratios);
        let sorted = &mut sorted[..n];
        sorted.sort_by(f64::total_cmp);
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(sorted[n / 2]),
            _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
        }
    }
}

/// The faster mode, given a ratio of in-order time over parallel time:
/// in order only when clearly faster.
fn faster(ratio: f64) -> Mode {
    if ratio * IN_ORDER_MARGIN < 1.0 {
        Mode::InOrder
    } else {
        Mode::Lanes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `blocks` blocks, each in the mode the chooser picks, recorded
    /// by `record(chooser, block, mode)`; the modes picked.
    fn drive(
        chooser: &mut Chooser,
        blocks: usize,
        mut record: impl FnMut(&mut Chooser, usize, Mode),
    ) -> Vec<Mode> {
        (0..blocks)
            .map(|b| {
                let mode = chooser.choose();
                record(chooser, b, mode);
                mode
            })
            .collect()
    }

    fn run(chooser: &mut Chooser, blocks: usize, parallel_ns: u64, in_order_ns: u64) -> Vec<Mode> {
        drive(chooser, blocks, |chooser, _, mode| {
            let ns = if mode == Mode::Lanes { parallel_ns } else { in_order_ns };
            chooser.record(mode, 1_000, Duration::from_nanos(ns));
        })
    }

    #[test]
    fn the_largest_configured_interval_backs_off_without_overflow() {
        let mut chooser = Chooser::new(u32::MAX);
        let modes = run(&mut chooser, 40, 1_000, 2_000);
        assert_eq!(modes.iter().filter(|m| **m == Mode::InOrder).count(), 1, "{modes:?}");
        assert_eq!(chooser.interval, u32::MAX);
    }

    #[test]
    fn off_always_speculates() {
        let mut chooser = Chooser::new(0);
        assert!(run(&mut chooser, 50, 2_000, 1_000).iter().all(|m| *m == Mode::Lanes));
    }

    #[test]
    fn measures_both_then_keeps_the_faster_and_explores_the_other() {
        let mut chooser = Chooser::new(8);
        let modes = run(&mut chooser, 130, 2_000, 1_000);
        assert_eq!(&modes[..4], &[Mode::Lanes, Mode::Lanes, Mode::InOrder, Mode::Lanes]);
        let parallel: Vec<usize> =
            modes.iter().enumerate().skip(4).filter(|(_, m)| **m == Mode::Lanes).map(|(i, _)| i).collect();
        // Blocks 1 to 3 bracket an in-order block, and blocks 2 to 4 a
        // parallel one that agrees: the next exploration waits twice 8
        // blocks; each agreeing with the choice, the next waits twice as
        // long, up to 4 times 8 blocks.
        assert_eq!(parallel, vec![19, 51, 83, 115]);
        // And the other way round.
        let mut chooser = Chooser::new(8);
        let modes = run(&mut chooser, 130, 1_000, 2_000);
        let in_order: Vec<usize> =
            modes.iter().enumerate().filter(|(_, m)| **m == Mode::InOrder).map(|(i, _)| i).collect();
        // (Blocks 1 to 3 already bracket an in-order block that agrees.)
        assert_eq!(in_order, vec![2, 19, 51, 83, 115], "{modes:?}");
    }

    #[test]
    fn in_order_must_be_clearly_faster() {
        let mut chooser = Chooser::new(8);
        // In order 10% faster: within the margin, speculation stays.
        let modes = run(&mut chooser, 20, 1_100, 1_000);
        assert_eq!(modes[2], Mode::InOrder, "measured once");
        assert_eq!(modes[3..].iter().filter(|m| **m == Mode::InOrder).count(), 1, "{modes:?}");
    }

    #[test]
    fn blocks_given_up_on_run_in_order_when_that_is_faster_at_all() {
        // Speculation gives every block up, and with its attempt takes
        // 1.08x in order: within the margin, but no core was used.
        let modes = drive(&mut Chooser::new(8), 40, |chooser, _, mode| match mode {
            Mode::Lanes => chooser.record_given_up(1_000, Duration::from_nanos(1_080)),
            Mode::InOrder => chooser.record(mode, 1_000, Duration::from_nanos(1_000)),
        });
        let parallel = modes[3..].iter().filter(|m| **m == Mode::Lanes).count();
        assert!(parallel <= 3, "only the explorations: {modes:?}");
        // Recorded as an ordinary parallel block, it stays parallel.
        let modes = run(&mut Chooser::new(8), 40, 1_080, 1_000);
        assert!(modes[3..].iter().filter(|m| **m == Mode::Lanes).count() > 30, "{modes:?}");
    }

    #[test]
    fn follows_a_change_of_workload() {
        let mut chooser = Chooser::new(4);
        run(&mut chooser, 20, 2_000, 1_000);
        // Parallel becomes 4x faster: after enough explorations show it
        // (the median needs a majority of the recent samples), it is the
        // mode of choice, and in order is only explored.
        let modes = run(&mut chooser, 60, 250, 1_000);
        let first = modes.windows(2).position(|w| w == [Mode::Lanes, Mode::Lanes]);
        assert!(first.is_some_and(|i| i < 20), "{modes:?}");
        // Explorations had grown 4x apart; the first to disagree brings
        // them back to every 4th block, until the choice follows.
        // (Here: blocks 7, 11 and 15, then parallel from block 17.)
        assert_eq!(modes[9..20].iter().filter(|m| **m == Mode::Lanes).count(), 5, "{modes:?}");
        let in_order = modes[20..].iter().filter(|m| **m == Mode::InOrder).count();
        assert_eq!(in_order, 3, "{modes:?}");
    }

    /// A machine whose speed moves as this project's shared 2-core
    /// machines do, block by block: `drift` (the machine's speed halving
    /// and doubling over ~20 blocks), or `spikes` (+-10% noise, one block
    /// in 10 twice as slow, one in 20 much faster).
    fn run_noisy(chooser: &mut Chooser, blocks: usize, cost: [f64; 2], spikes: bool) -> Vec<Mode> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 10_000) as f64 / 10_000.0
        };
        (0..blocks)
            .map(|b| {
                let mode = chooser.choose();
                let speed = if spikes {
                    let slow = if random() < 0.1 { 2.0 } else { 1.0 };
                    let fast = if random() < 0.05 { 0.6 } else { 1.0 };
                    (0.9 + 0.2 * random()) * slow * fast
                } else {
                    (1.5 + 0.5 * (b as f64 * std::f64::consts::TAU / 23.0).sin()) * (0.9 + 0.2 * random())
                };
                let ns = cost[mode as usize] * speed * 1_000.0;
                chooser.record(mode, 1_000, Duration::from_nanos(ns as u64));
                mode
            })
            .collect()
    }

    #[test]
    fn a_machine_whose_speed_moves_does_not_fool_it() {
        // One mode truly 1.3x faster than the other: nearly all blocks
        // run in it. This chooser runs 3-8% of them in the slower mode
        // (explorations included); the previous one (a moving average of
        // each mode's own times, exploring every 8th block) ran 12.5-36%.
        for spikes in [false, true] {
            for (cost, faster) in [([1.0, 1.3], Mode::Lanes), ([1.3, 1.0], Mode::InOrder)] {
                let mut chooser = Chooser::new(8);
                let modes = run_noisy(&mut chooser, 2_000, cost, spikes);
                let blocks = modes.len() - 16;
                let wrong = modes[16..].iter().filter(|m| **m != faster).count();
                assert!(wrong <= blocks / 10, "{wrong} of {blocks} in the slower mode");
            }
        }
    }

    #[test]
    fn a_slow_first_block_does_not_send_it_in_order() {
        // The first block starts the workers and fills their tables: here
        // 3x slower than the rest, with speculation truly 1.3x faster.
        // Only the bootstrap's in-order block and explorations run in
        // order. (Taking the first ratio against block 0 ran 17 of 40 in
        // order.)
        let modes = drive(&mut Chooser::new(8), 40, |chooser, b, mode| {
            let ns = match (b, mode) {
                (0, _) => 3_000,
                (_, Mode::Lanes) => 1_000,
                (_, Mode::InOrder) => 1_300,
            };
            chooser.record(mode, 1_000, Duration::from_nanos(ns));
        });
        assert_eq!(modes.iter().filter(|m| **m == Mode::InOrder).count(), 2, "{modes:?}");
    }

    #[test]
    fn two_unlucky_explorations_do_not_flip_it() {
        let mut chooser = Chooser::new(4);
        run(&mut chooser, 30, 1_000, 1_200);
        // Two explorations in a row run in order 3x faster than the blocks
        // around them (the other process on the machine paused): a
        // minority of the recent ratios, so parallel stays. (The previous
        // chooser went in order for the next four blocks.)
        for _ in 0..2 {
            let mut mode = Mode::Lanes;
            while mode == Mode::Lanes {
                mode = chooser.choose();
                let ns = if mode == Mode::Lanes { 1_000 } else { 400 };
                chooser.record(mode, 1_000, Duration::from_nanos(ns));
            }
        }
        assert_eq!(run(&mut chooser, 3, 1_000, 1_200), vec![Mode::Lanes; 3]);
    }
}
