//! The producer's sealing policy as plain Rust: when a block is sealed, when
//! a build request is answered, when a shutdown flush is done. The actor
//! feeds it events with the time and the mempool's length, carries out the
//! [`Decision`] it answers, and reports back when the work is done; nothing
//! here knows about actix, timers or mailboxes, so every rule is tested
//! below without them.
//!
//! ```text
//!            tick (pool > 0) ─┐
//!   wake (pool >= full block) ─┼─▶ Seal ──▶ finished ──▶ pool still full? ─▶ Seal (backlog)
//!   idle (quiet >= interval) ──┘    ▲          │
//!                                   │          └──▶ flushing? ─▶ Seal (flush) … ─▶ FinishFlush
//!   build request ─▶ waits until pool >= full block, or block_time with pool > 0,
//!                    or empty_wait (block_time if shorter) ─▶ Build ─▶ finished
//! ```
//!
//! One rule holds across every path: at most one seal or build is in flight
//! (`busy`). actix replays missed interval ticks inside one poll and runs
//! `ctx.wait` futures last-in first-out, so without it two seals could be
//! queued on one parent and make two blocks with one number.

use std::time::{Duration, Instant};

/// How the producer decides to seal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProducerMode {
    /// A single node: seal by count, by `block_time` and on the idle timer,
    /// and hand each block to preparation.
    #[default]
    Timer,
    /// A validator: no timers; a block is built only when consensus asks
    /// (`ProducerMsg::Build`) and handed back, never to preparation.
    OnRequest,
}

/// Whether a seal may produce a block without transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Only a block with transactions (the block-time tick, wake-ups,
    /// shutdown's flush).
    TxsOnly,
    /// Empty if nothing waits: the chain has been idle too long.
    EmptyAllowed,
}

/// What started a seal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The `block_time` interval.
    Tick,
    /// The mempool holds a full block.
    Wake,
    /// No block for `idle_block_interval`.
    Idle,
    /// The seal before left a full block waiting: sealed back to back.
    Backlog,
    /// Shutdown's flush.
    Flush,
}

impl Trigger {
    /// Whether the producer's failpoint strikes this seal: each seal a
    /// timer or a wake-up begins, never a continuation or the flush.
    pub fn strikes_faults(self) -> bool {
        matches!(self, Trigger::Tick | Trigger::Wake | Trigger::Idle)
    }
}

/// What the producer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing now.
    Nothing,
    /// Seal one block from the mempool and hand it to preparation; report
    /// with [`SealPolicy::seal_finished`] (or [`SealPolicy::seal_lost`]).
    Seal {
        /// Whether it may be empty.
        fill: Fill,
        /// Why.
        trigger: Trigger,
    },
    /// Take one block for the waiting build request and answer it; report
    /// with [`SealPolicy::seal_finished`].
    Build,
    /// A build request this producer does not serve (timer mode, or
    /// shutting down): drop its reply.
    Decline,
    /// The flush is over: answer it and stop.
    FinishFlush {
        /// Transactions left in the mempool.
        left: u64,
    },
}

/// Where a shutdown flush is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// No flush asked.
    No,
    /// Asked while a seal was in flight: starts when it finishes.
    Pending,
    /// The flush's own seal is in flight.
    Sealing,
    /// Answered; nothing more happens.
    Done,
}

/// The sealing policy.
#[derive(Debug)]
pub struct SealPolicy {
    mode: ProducerMode,
    block_time: Duration,
    /// Transactions that make a full block.
    full_block: u64,
    idle: Option<Duration>,
    /// When the last block was handed on (or the producer started): the
    /// idle timer counts from here.
    last_block_at: Instant,
    /// A seal or build is in flight.
    busy: bool,
    /// An injected stall: no seal begins before this.
    stall_until: Option<Instant>,
    flush: Flush,
    /// On-request mode: how long a build request waits for a first
    /// transaction before it is answered with an empty block (never less
    /// than `block_time`).
    empty_wait: Duration,
    /// When the waiting build request is due.
    request: Option<Due>,
}

/// When a waiting build request is answered (besides a full block).
#[derive(Debug, Clone, Copy)]
struct Due {
    /// With what the mempool holds, if it holds anything: arrival plus
    /// `block_time`.
    txs: Instant,
    /// Whatever the mempool holds, empty or not: arrival plus the longer
    /// of `block_time` and `empty_wait`.
    any: Instant,
}

impl SealPolicy {
    /// A policy that starts at `now`; `full_block` is `max_block_txs`, and
    /// `idle` is `None` when the chain moves only with transactions.
    pub fn new(
        mode: ProducerMode,
        block_time: Duration,
        full_block: usize,
        idle: Option<Duration>,
        now: Instant,
    ) -> Self {
        SealPolicy {
            mode,
            block_time,
            full_block: full_block as u64,
            idle,
            last_block_at: now,
            busy: false,
            stall_until: None,
            flush: Flush::No,
            empty_wait: Duration::ZERO,
            request: None,
        }
    }

    /// On-request mode: a build request that finds the mempool empty at
    /// `block_time` waits up to `empty_wait` from its arrival for a first
    /// transaction, and is answered as soon as one arrives. An idle
    /// network then seals about one empty block per `empty_wait` instead
    /// of one per `block_time`; a busy one never waits longer than before.
    pub fn with_empty_wait(mut self, empty_wait: Duration) -> Self {
        self.empty_wait = empty_wait;
        self
    }

    /// The mode.
    pub fn mode(&self) -> ProducerMode {
        self.mode
    }

    /// Whether a seal or build is in flight.
    pub fn busy(&self) -> bool {
        self.busy
    }

    /// The `block_time` interval ticked.
    pub fn tick(&mut self, now: Instant, pool: u64) -> Decision {
        if self.mode != ProducerMode::Timer || self.flush != Flush::No || pool == 0 {
            return Decision::Nothing;
        }
        self.begin(now, Fill::TxsOnly, Trigger::Tick)
    }

    /// The nonce actor says the mempool holds a full block.
    pub fn wake(&mut self, now: Instant, pool: u64) -> Decision {
        match self.mode {
            ProducerMode::OnRequest => self.poll(now, pool),
            ProducerMode::Timer if self.flush == Flush::No && pool >= self.full_block => {
                self.begin(now, Fill::TxsOnly, Trigger::Wake)
            }
            ProducerMode::Timer => Decision::Nothing,
        }
    }

    /// The idle timer fired.
    pub fn idle_check(&mut self, now: Instant) -> Decision {
        let Some(idle) = self.idle.filter(|_| self.mode == ProducerMode::Timer) else {
            return Decision::Nothing;
        };
        if self.flush != Flush::No || now.saturating_duration_since(self.last_block_at) < idle {
            return Decision::Nothing;
        }
        self.begin(now, Fill::EmptyAllowed, Trigger::Idle)
    }

    /// How long until the idle timer should look again; `None`: never (no
    /// idle blocks, on-request mode, or shutting down). Overdue (a seal in
    /// flight, or one a fault dropped), it looks a whole interval later
    /// rather than spin.
    pub fn next_idle_check(&self, now: Instant) -> Option<Duration> {
        let idle = self.idle.filter(|_| self.mode == ProducerMode::Timer && self.flush == Flush::No)?;
        let due = self.last_block_at + idle;
        Some(if due > now { due - now } else { idle })
    }

    /// An injected stall: no seal begins before `until` (the one that met
    /// the fault proceeds).
    pub fn stall(&mut self, until: Instant) {
        self.stall_until = Some(until);
    }

    /// A seal a trigger began never ran (a fault ate it: an error, a drop,
    /// a contained panic). Nothing follows until the next trigger.
    pub fn seal_lost(&mut self, pool: u64) -> Decision {
        self.busy = false;
        match self.flush {
            Flush::Pending => self.start_flush(pool),
            _ => Decision::Nothing,
        }
    }

    /// The seal or build in flight is done; `progressed`: a block was
    /// handed on (to preparation, or to the requester).
    pub fn seal_finished(&mut self, now: Instant, progressed: bool, pool: u64) -> Decision {
        self.busy = false;
        if progressed {
            self.last_block_at = now;
        }
        match self.flush {
            Flush::Pending => self.start_flush(pool),
            Flush::Sealing if progressed && pool > 0 => self.begin_now(Fill::TxsOnly, Trigger::Flush),
            Flush::Sealing => self.finish_flush(pool),
            Flush::Done => Decision::Nothing,
            Flush::No => match self.mode {
                ProducerMode::Timer if pool >= self.full_block => {
                    self.begin_now(Fill::TxsOnly, Trigger::Backlog)
                }
                ProducerMode::Timer => Decision::Nothing,
                ProducerMode::OnRequest => self.poll(now, pool),
            },
        }
    }

    /// Consensus asks for a block. It waits until the mempool holds a full
    /// block, or `block_time` has passed and it holds something, or the
    /// empty wait is over; one still waiting is superseded.
    pub fn build_requested(&mut self, now: Instant, pool: u64) -> Decision {
        if self.mode != ProducerMode::OnRequest || self.flush != Flush::No {
            return Decision::Decline;
        }
        let txs = now + self.block_time;
        self.request = Some(Due { txs, any: now + self.block_time.max(self.empty_wait) });
        self.poll(now, pool)
    }

    /// Looks whether the waiting build request is due.
    pub fn poll(&mut self, now: Instant, pool: u64) -> Decision {
        let Some(due) = self.request else { return Decision::Nothing };
        let due = pool >= self.full_block || (pool > 0 && now >= due.txs) || now >= due.any;
        if self.busy || !due {
            return Decision::Nothing;
        }
        self.request = None;
        self.busy = true;
        Decision::Build
    }

    /// How long until the waiting build request is next due by time (at
    /// `block_time` if transactions wait by then, else at the end of the
    /// empty wait); `None` when none waits (or a build is in flight).
    pub fn next_poll(&self, now: Instant) -> Option<Duration> {
        let due = self.request.filter(|_| !self.busy)?;
        let next = if now < due.txs { due.txs } else { due.any };
        Some(next.saturating_duration_since(now))
    }

    /// The waiting requester went away before its build began.
    pub fn cancel_request(&mut self) {
        self.request = None;
    }

    /// Shutdown: in timer mode, seal until the mempool is empty; in
    /// on-request mode seal nothing (only a leader may). Either way a seal
    /// in flight finishes first.
    pub fn flush(&mut self, pool: u64) -> Decision {
        self.request = None;
        if self.flush != Flush::No {
            return Decision::Nothing;
        }
        if self.busy {
            self.flush = Flush::Pending;
            return Decision::Nothing;
        }
        self.start_flush(pool)
    }

    fn start_flush(&mut self, pool: u64) -> Decision {
        if self.mode == ProducerMode::Timer && pool > 0 {
            self.flush = Flush::Sealing;
            return self.begin_now(Fill::TxsOnly, Trigger::Flush);
        }
        self.finish_flush(pool)
    }

    fn finish_flush(&mut self, pool: u64) -> Decision {
        self.flush = Flush::Done;
        Decision::FinishFlush { left: pool }
    }

    /// A seal a trigger begins: not while one is in flight or stalled.
    fn begin(&mut self, now: Instant, fill: Fill, trigger: Trigger) -> Decision {
        if self.busy || self.stall_until.is_some_and(|t| t > now) {
            return Decision::Nothing;
        }
        self.stall_until = None;
        self.begin_now(fill, trigger)
    }

    /// A continuation: the seal before just finished, so no other is in
    /// flight, and a stall does not hold it.
    fn begin_now(&mut self, fill: Fill, trigger: Trigger) -> Decision {
        self.busy = true;
        Decision::Seal { fill, trigger }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
