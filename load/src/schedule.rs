//! The open-loop schedule: slot i of a sender thread is due at
//! `t0 + i / rate`, whether or not earlier slots were answered, so a slow
//! target cannot slow the offered load down (no coordinated omission).
//! Latency is measured from a slot's scheduled time, not from when it was
//! finally sent.

use std::time::Duration;

/// One sender thread's share of the offered load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Slots per second; `None` = unthrottled (as fast as answers come).
    pub rate: Option<f64>,
    /// Slots in all (`u64::MAX` = until the duration ends).
    pub total: u64,
}

impl Schedule {
    /// Splits `rate` and `total` evenly over `threads` sender threads.
    pub fn split(rate: Option<f64>, total: u64, threads: usize) -> Vec<Schedule> {
        let n = threads.max(1) as u64;
        (0..n)
            .map(|k| Schedule {
                rate: rate.map(|r| r / n as f64),
                total: if total == u64::MAX { u64::MAX } else { total / n + u64::from(k < total % n) },
            })
            .collect()
    }

    /// How many slots are due `elapsed` after the start (slot 0 is due at
    /// once). Unthrottled: all of them.
    pub fn due(&self, elapsed: Duration) -> u64 {
        match self.rate {
            None => self.total,
            Some(r) => {
                let due = (elapsed.as_secs_f64() * r).floor() as u64 + 1;
                due.min(self.total)
            }
        }
    }

    /// When slot `i` is due (unthrottled: at once).
    pub fn at(&self, i: u64) -> Duration {
        match self.rate {
            Some(r) if r > 0.0 => Duration::from_secs_f64(i as f64 / r),
            _ => Duration::ZERO,
        }
    }
}

/// What happens to `new` slots that just became due when `backlog` slots
/// already wait and at most `bound` may be in flight: `(queued, dropped)`.
/// Throttled, the excess is dropped (the offered load does not bend);
/// unthrottled, it simply is not scheduled yet (nothing is dropped).
pub fn admit_due(new: u64, backlog: usize, bound: usize, throttled: bool) -> (u64, u64) {
    let room = bound.saturating_sub(backlog) as u64;
    let queued = new.min(room);
    if throttled {
        (queued, new - queued)
    } else {
        (queued, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_come_due_at_the_rate() {
        let s = Schedule { rate: Some(1000.0), total: 50 };
        assert_eq!(s.due(Duration::ZERO), 1);
        assert_eq!(s.due(Duration::from_millis(10)), 11);
        assert_eq!(s.due(Duration::from_secs(5)), 50, "never more than the total");
        assert_eq!(s.at(10), Duration::from_millis(10));
        let u = Schedule { rate: None, total: 7 };
        assert_eq!(u.due(Duration::ZERO), 7);
        assert_eq!(u.at(3), Duration::ZERO);
    }

    #[test]
    fn split_keeps_the_total_and_the_rate() {
        let parts = Schedule::split(Some(1000.0), 10, 4);
        assert_eq!(parts.iter().map(|p| p.total).sum::<u64>(), 10);
        assert_eq!(parts.iter().map(|p| p.rate.unwrap_or(0.0)).sum::<f64>(), 1000.0);
        assert_eq!(parts[0].total, 3);
        assert_eq!(parts[3].total, 2);
        assert!(Schedule::split(None, u64::MAX, 3).iter().all(|p| p.total == u64::MAX));
    }

    #[test]
    fn in_flight_bound_drops_only_when_throttled() {
        assert_eq!(admit_due(10, 0, 100, true), (10, 0));
        assert_eq!(admit_due(10, 95, 100, true), (5, 5));
        assert_eq!(admit_due(10, 120, 100, true), (0, 10));
        assert_eq!(admit_due(10, 95, 100, false), (5, 0));
    }
}
