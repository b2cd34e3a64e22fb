//! Sender threads: each owns one keep-alive connection, a disjoint set of
//! senders and its share of the schedule.
//!
//! ```text
//!  schedule ──due slots──▶ backlog (≤ in-flight bound; excess dropped)
//!                             │ up to --batch slots, or the oldest waited --batch-wait-ms
//!                             ▼
//!  ready senders (round robin) ──next pre-signed tx each──▶ one JSON-RPC batch ──▶ answers
//!        ▲                                                                        │
//!        └── resync: eth_getTransactionCount(addr, "pending") ◀── any refusal ────┘
//! ```
//!
//! A sender's transactions all go through one connection, one batch at a
//! time, and a batch is answered in order, so its nonces arrive in order.
//! A refusal leaves a gap on a node with gapless nonces, so the sender is
//! parked until its pending nonce has been read again; it then goes on from
//! that nonce, re-sending the same signed bytes if it was refused (e.g.
//! `txpool is full` reserves nothing). Every slot ends exactly once as
//! dropped, admitted or rejected.

use std::{
    collections::VecDeque,
    sync::{atomic::Ordering::Relaxed, Arc},
    time::{Duration, Instant},
};

use alloy_primitives::{Address, B256};
use serde_json::Value;

use crate::{
    rpc::{quantity, Rpc},
    schedule::{admit_due, Schedule},
    stats::{Counters, ErrorClass},
    workload::SenderTxs,
};

/// Most senders resynced in one batch (sluice's default batch limit is
/// 1,000 calls).
const RESYNC_BATCH: usize = 500;
/// A sender thread gives up after this many failed exchanges in a row: the
/// target is gone or stuck, and each failure may have cost a whole request
/// timeout.
const MAX_TRANSPORT_FAILURES: u32 = 3;

/// What a sender thread is told.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The JSON-RPC endpoint.
    pub url: String,
    /// Most transactions per JSON-RPC batch.
    pub batch: usize,
    /// The oldest waiting slot is sent after at most this long, batch full
    /// or not.
    pub batch_wait: Duration,
    /// Most slots due or sent and not yet answered, for this thread.
    pub max_in_flight: usize,
    /// No slot is scheduled after this (a duration run).
    pub schedule_end: Option<Duration>,
    /// Hard stop: the backlog is dropped and the thread returns.
    pub deadline: Duration,
    /// Per-request HTTP timeout.
    pub request_timeout: Duration,
}

/// One admitted transaction, times in microseconds since the run's start.
#[derive(Debug, Clone, Copy)]
pub struct Admitted {
    /// Its hash.
    pub hash: B256,
    /// When its slot was due.
    pub scheduled_us: u64,
}

/// What a sender thread hands back.
#[derive(Debug, Default)]
pub struct WorkerResult {
    /// Every admitted transaction.
    pub admitted: Vec<Admitted>,
    /// Admission latency (answer time minus scheduled time), microseconds.
    pub admission_us: Vec<u32>,
    /// Answers whose hash differed from the keccak of the bytes sent.
    pub hash_mismatches: u64,
    /// When the last answer came, since the start.
    pub last_answer: Duration,
    /// The first transport error, if any (for the report).
    pub first_error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    Resync,
    Retired,
}

struct Sender {
    address: Address,
    txs: SenderTxs,
    cursor: usize,
    state: State,
    queued: bool,
}

/// One sender thread's state.
pub struct Worker {
    cfg: WorkerConfig,
    rpc: Rpc,
    schedule: Schedule,
    senders: Vec<Sender>,
    ready: VecDeque<usize>,
    resync: Vec<usize>,
    counters: Arc<Counters>,
    out: WorkerResult,
}

impl Worker {
    /// A worker over `txs` (each with its sender's address).
    pub fn new(
        cfg: WorkerConfig,
        schedule: Schedule,
        txs: Vec<(Address, SenderTxs)>,
        counters: Arc<Counters>,
    ) -> Worker {
        let senders: Vec<Sender> = txs
            .into_iter()
            .map(|(address, txs)| Sender { address, txs, cursor: 0, state: State::Ready, queued: false })
            .collect();
        let rpc = Rpc::new(&cfg.url, cfg.request_timeout);
        let mut w = Worker {
            cfg,
            rpc,
            schedule,
            senders,
            ready: VecDeque::new(),
            resync: Vec::new(),
            counters,
            out: WorkerResult::default(),
        };
        for i in 0..w.senders.len() {
            w.enqueue(i);
        }
        w
    }

    fn enqueue(&mut self, i: usize) {
        let s = &mut self.senders[i];
        if !s.queued && s.state == State::Ready && s.cursor < s.txs.txs.len() {
            s.queued = true;
            self.ready.push_back(i);
        }
    }

    /// The next ready sender's next transaction, round robin.
    fn pick(&mut self) -> Option<(usize, usize)> {
        while let Some(i) = self.ready.pop_front() {
            let s = &mut self.senders[i];
            s.queued = false;
            if s.state != State::Ready || s.cursor >= s.txs.txs.len() {
                continue;
            }
            let k = s.cursor;
            s.cursor += 1;
            self.enqueue(i);
            return Some((i, k));
        }
        None
    }

    /// Runs the schedule to its end (or the deadline) from `t0`.
    pub fn run(mut self, t0: Instant) -> WorkerResult {
        let throttled = self.schedule.rate.is_some();
        let mut total = self.schedule.total;
        let mut emitted: u64 = 0;
        let mut backlog: VecDeque<Duration> = VecDeque::new();
        let mut failures = 0u32;
        loop {
            let elapsed = t0.elapsed();
            if elapsed >= self.cfg.deadline || failures >= MAX_TRANSPORT_FAILURES {
                self.finish_slots(backlog.len() as u64);
                break;
            }
            // Throttled, the total already ends the schedule on time (and
            // slots that came due while a batch was out still count);
            // unthrottled, the end closes the schedule at what was emitted.
            if !throttled && self.cfg.schedule_end.is_some_and(|end| elapsed >= end) {
                total = total.min(emitted);
            }
            let due = Schedule { total, ..self.schedule }.due(elapsed);
            if due > emitted {
                let (queued, dropped) =
                    admit_due(due - emitted, backlog.len(), self.cfg.max_in_flight, throttled);
                for j in 0..queued {
                    backlog.push_back(if throttled { self.schedule.at(emitted + j) } else { elapsed });
                }
                self.counters.scheduled.fetch_add(queued + dropped, Relaxed);
                self.counters.dropped.fetch_add(dropped, Relaxed);
                self.counters.in_flight.fetch_add(queued as i64, Relaxed);
                emitted += queued + dropped;
            }
            if !self.resync.is_empty() {
                self.resync_senders();
            }
            let closed = emitted >= total;
            let oldest_waited =
                backlog.front().is_some_and(|&t| elapsed.saturating_sub(t) >= self.cfg.batch_wait);
            if backlog.len() >= self.cfg.batch
                || (!backlog.is_empty() && (oldest_waited || closed || !throttled))
            {
                let n = backlog.len().min(self.cfg.batch);
                let slots: Vec<Duration> = backlog.drain(..n).collect();
                if self.send(t0, &slots) {
                    failures = 0;
                } else {
                    failures += 1;
                }
                continue;
            }
            if closed && backlog.is_empty() {
                break;
            }
            // Sleep until the next slot is due or the oldest has waited
            // long enough, never more than 5 ms (the deadline stays close).
            let next_due = if throttled { self.schedule.at(emitted) } else { elapsed };
            let flush = backlog.front().map_or(Duration::MAX, |&t| t + self.cfg.batch_wait);
            let wake = next_due.min(flush).saturating_sub(elapsed).min(Duration::from_millis(5));
            std::thread::sleep(wake.max(Duration::from_micros(200)));
        }
        self.out
    }

    /// Marks `n` slots that will never be sent as dropped.
    fn finish_slots(&mut self, n: u64) {
        self.counters.dropped.fetch_add(n, Relaxed);
        self.counters.in_flight.fetch_sub(n as i64, Relaxed);
    }

    /// Sends one batch for `slots`; false if the exchange itself failed.
    fn send(&mut self, t0: Instant, slots: &[Duration]) -> bool {
        let mut picks = Vec::with_capacity(slots.len());
        for &slot in slots {
            match self.pick() {
                Some((s, k)) => picks.push((slot, s, k)),
                // Every sender is exhausted, parked or retired.
                None => self.finish_slots(1),
            }
        }
        if picks.is_empty() {
            return true;
        }
        let hexes: Vec<&str> = picks.iter().map(|&(_, s, k)| &*self.senders[s].txs.txs[k].hex).collect();
        let answers = self.rpc.send_raw_batch(&hexes);
        let now = t0.elapsed();
        self.out.last_answer = now;
        self.counters.in_flight.fetch_sub(picks.len() as i64, Relaxed);
        let answers = match answers {
            Ok(a) => a,
            Err(e) => {
                // The outcome is unknown: count a transport refusal and
                // resync, so a tx that did get in is not sent twice.
                if self.out.first_error.is_none() {
                    self.out.first_error = Some(e.to_string());
                }
                for &(_, s, _) in &picks {
                    self.counters.reject(ErrorClass::Transport);
                    self.park(s);
                }
                return false;
            }
        };
        for (&(slot, s, k), answer) in picks.iter().zip(answers) {
            match answer {
                Ok(v) => {
                    let tx = &self.senders[s].txs.txs[k];
                    if v.as_str().and_then(|h| h.parse::<B256>().ok()) != Some(tx.hash) {
                        self.out.hash_mismatches += 1;
                    }
                    self.counters.admitted.fetch_add(1, Relaxed);
                    self.out.admitted.push(Admitted { hash: tx.hash, scheduled_us: slot.as_micros() as u64 });
                    let latency = now.saturating_sub(slot).as_micros().min(u128::from(u32::MAX)) as u32;
                    self.out.admission_us.push(latency);
                }
                Err(f) => {
                    self.counters.reject(ErrorClass::classify(&f.message));
                    self.park(s);
                }
            }
        }
        true
    }

    fn park(&mut self, s: usize) {
        if self.senders[s].state == State::Ready {
            self.senders[s].state = State::Resync;
            self.resync.push(s);
        }
    }

    /// Reads parked senders' pending nonces and moves their cursors there.
    fn resync_senders(&mut self) {
        let take = self.resync.len().min(RESYNC_BATCH);
        let batch: Vec<usize> = self.resync.drain(..take).collect();
        let calls: Vec<(&str, Value)> = batch
            .iter()
            .map(|&s| ("eth_getTransactionCount", serde_json::json!([self.senders[s].address, "pending"])))
            .collect();
        let answers = match self.rpc.batch("eth_getTransactionCount", &calls) {
            Ok(a) => a,
            Err(_) => {
                // Try again on the next turn (bounded by the deadline).
                self.resync.extend(batch);
                return;
            }
        };
        for (s, answer) in batch.into_iter().zip(answers) {
            let pending = answer.ok().and_then(|v| quantity("eth_getTransactionCount", &v).ok());
            let sender = &mut self.senders[s];
            let first = sender.txs.txs.first().map_or(0, |t| t.nonce);
            match pending.and_then(|p| p.checked_sub(first)) {
                Some(idx) if (idx as usize) <= sender.txs.txs.len() => {
                    sender.cursor = idx as usize;
                    sender.state = State::Ready;
                    self.enqueue(s);
                }
                // The node knows of nonces we never signed, or none at all.
                _ => sender.state = State::Retired,
            }
        }
    }
}
