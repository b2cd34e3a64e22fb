//! Counting and latency math: error classes, the live counters every
//! thread bumps, the end-of-run tally (scheduled = dropped + admitted +
//! rejected) and nearest-rank percentiles.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// Why a sent transaction was refused, by the wording clients match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// `txpool is full` (-32003): the node sheds load.
    TxpoolFull,
    /// `nonce too high`: a gap the node would not hold (sluice holds up to
    /// `mempool.max_future_txs_per_sender` per sender, as geth queues).
    NonceTooHigh,
    /// `nonce too low`.
    NonceTooLow,
    /// `already known`.
    AlreadyKnown,
    /// `underpriced` / fee cap below the base fee.
    Underpriced,
    /// `insufficient funds`.
    InsufficientFunds,
    /// The node takes no transactions now: shutting down, a stage stopped,
    /// or its store halted (sluice's `transaction admission unavailable`).
    Unavailable,
    /// The HTTP exchange itself failed (timeout, reset, non-200): the
    /// outcome of the batch's transactions is unknown.
    Transport,
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// Every class, in display order.
    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::TxpoolFull,
        ErrorClass::NonceTooHigh,
        ErrorClass::NonceTooLow,
        ErrorClass::AlreadyKnown,
        ErrorClass::Underpriced,
        ErrorClass::InsufficientFunds,
        ErrorClass::Unavailable,
        ErrorClass::Transport,
        ErrorClass::Other,
    ];

    /// Classifies a JSON-RPC error by its message (geth's wording, which
    /// sluice, reth and anvil share); the code alone says little, as -32000
    /// and -32003 each cover many causes.
    pub fn classify(message: &str) -> ErrorClass {
        let m = message.to_ascii_lowercase();
        if m.contains("pool is full") || m.contains("txpool full") {
            ErrorClass::TxpoolFull
        } else if m.contains("nonce too high") || m.contains("nonce gap") {
            ErrorClass::NonceTooHigh
        } else if m.contains("nonce too low") {
            ErrorClass::NonceTooLow
        } else if m.contains("already known") || m.contains("already imported") {
            ErrorClass::AlreadyKnown
        } else if m.contains("underpriced") || m.contains("fee cap") || m.contains("base fee") {
            ErrorClass::Underpriced
        } else if m.contains("insufficient funds") {
            ErrorClass::InsufficientFunds
        } else if m.contains("admission unavailable") || m.contains("halted") || m.contains("shutting down") {
            ErrorClass::Unavailable
        } else {
            ErrorClass::Other
        }
    }

    /// A short label for progress lines and JSON.
    pub fn label(self) -> &'static str {
        match self {
            ErrorClass::TxpoolFull => "txpool_full",
            ErrorClass::NonceTooHigh => "nonce_too_high",
            ErrorClass::NonceTooLow => "nonce_too_low",
            ErrorClass::AlreadyKnown => "already_known",
            ErrorClass::Underpriced => "underpriced",
            ErrorClass::InsufficientFunds => "insufficient_funds",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::Transport => "transport",
            ErrorClass::Other => "other",
        }
    }

    fn index(self) -> usize {
        ErrorClass::ALL.iter().position(|c| *c == self).unwrap_or(ErrorClass::ALL.len() - 1)
    }
}

/// Live counters shared by the sender threads, the block scanner and the
/// progress printer. Relaxed atomics: each is a monotonic count read once a
/// second, no ordering between them is relied on.
#[derive(Debug, Default)]
pub struct Counters {
    /// Slots whose scheduled time has come (the offered load).
    pub scheduled: AtomicU64,
    /// Slots given up before sending: the in-flight bound was reached, or
    /// no sender had a transaction ready.
    pub dropped: AtomicU64,
    /// Transactions the target accepted (a hash came back).
    pub admitted: AtomicU64,
    rejected: [AtomicU64; ErrorClass::ALL.len()],
    /// Slots due or sent and not yet answered.
    pub in_flight: AtomicI64,
    /// Transactions seen in blocks scanned since the start (anyone's).
    pub block_txs: AtomicU64,
    /// Highest block scanned.
    pub head: AtomicU64,
}

impl Counters {
    /// Counts one refusal.
    pub fn reject(&self, class: ErrorClass) {
        self.rejected[class.index()].fetch_add(1, Relaxed);
    }

    /// Refusals of one class so far.
    pub fn rejected(&self, class: ErrorClass) -> u64 {
        self.rejected[class.index()].load(Relaxed)
    }

    /// A consistent-enough copy for reporting.
    pub fn tally(&self) -> Tally {
        Tally {
            scheduled: self.scheduled.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            admitted: self.admitted.load(Relaxed),
            rejected: ErrorClass::ALL
                .iter()
                .map(|c| (*c, self.rejected(*c)))
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }
}

/// The outcome of every scheduled slot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Slots whose time came.
    pub scheduled: u64,
    /// Slots not sent.
    pub dropped: u64,
    /// Sent and accepted.
    pub admitted: u64,
    /// Sent and refused, by class (only classes that occurred).
    pub rejected: Vec<(ErrorClass, u64)>,
}

impl Tally {
    /// All refusals.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().map(|(_, n)| n).sum()
    }

    /// Whether every scheduled slot is accounted for exactly once.
    pub fn balanced(&self) -> bool {
        self.scheduled == self.dropped + self.admitted + self.rejected_total()
    }
}

/// The nearest-rank percentile `p` (0 to 100) of sorted values.
pub fn percentile(sorted: &[u32], p: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Percentiles of a latency sample, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Latency {
    /// Summarizes samples in microseconds (sorted in place).
    pub fn from_micros(samples: &mut [u32]) -> Latency {
        samples.sort_unstable();
        let ms = |v: Option<u32>| v.map_or(0.0, |us| f64::from(us) / 1000.0);
        Latency {
            count: samples.len(),
            p50_ms: ms(percentile(samples, 50.0)),
            p99_ms: ms(percentile(samples, 99.0)),
            max_ms: ms(samples.last().copied()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        let mut s = vec![3000, 1000, 2000];
        let l = Latency::from_micros(&mut s);
        assert_eq!((l.count, l.p50_ms, l.p99_ms, l.max_ms), (3, 2.0, 3.0, 3.0));
    }

    #[test]
    fn errors_are_classified_by_geth_wording() {
        assert_eq!(ErrorClass::classify("txpool is full"), ErrorClass::TxpoolFull);
        assert_eq!(
            ErrorClass::classify("nonce too high: next nonce 3, tx nonce 5"),
            ErrorClass::NonceTooHigh
        );
        assert_eq!(ErrorClass::classify("nonce too low: next nonce 3, tx nonce 1"), ErrorClass::NonceTooLow);
        assert_eq!(ErrorClass::classify("already known"), ErrorClass::AlreadyKnown);
        assert_eq!(
            ErrorClass::classify("Insufficient funds for gas * price + value"),
            ErrorClass::InsufficientFunds
        );
        assert_eq!(ErrorClass::classify("method not found"), ErrorClass::Other);
        // sluice's wording when its store halted or it is shutting down.
        let halted = "transaction admission unavailable: store halted: commit failed; writes stopped";
        assert_eq!(ErrorClass::classify(halted), ErrorClass::Unavailable);
        let stopping = "transaction admission unavailable: node is shutting down";
        assert_eq!(ErrorClass::classify(stopping), ErrorClass::Unavailable);
    }

    #[test]
    fn every_scheduled_slot_is_counted_once() {
        let c = Counters::default();
        for i in 0..10u64 {
            c.scheduled.fetch_add(1, Relaxed);
            match i % 4 {
                0 => c.dropped.fetch_add(1, Relaxed),
                1 | 2 => c.admitted.fetch_add(1, Relaxed),
                _ => {
                    c.reject(ErrorClass::TxpoolFull);
                    0
                }
            };
        }
        let t = c.tally();
        assert_eq!((t.scheduled, t.dropped, t.admitted, t.rejected_total()), (10, 3, 5, 2));
        assert_eq!(t.rejected, vec![(ErrorClass::TxpoolFull, 2)]);
        assert!(t.balanced());
        c.scheduled.fetch_add(1, Relaxed);
        assert!(!c.tally().balanced(), "a slot with no outcome breaks the balance");
    }
}
