//! The recovery stage: decoding, stateless checks and sender recovery of
//! submitted transactions, on a fixed pool of threads behind a bounded
//! mailbox.
//!
//! Sender recovery (~40 us a signature) is the most expensive step of
//! admission. Run on the HTTP workers, an overload queued inside the HTTP
//! server instead of being refused: requests waited behind recoveries with
//! no bound on how long, reads waited with them, and the mempool never
//! filled, so the node could not shed. Here the HTTP worker only offers the
//! raw bytes to this stage's mailbox: when it is full, the submission is
//! answered at once with `txpool is full` (-32003), the capacity signal
//! clients already handle, and the HTTP workers stay free for reads.
//!
//! The mailbox holds one message per transaction, so its bound counts
//! transactions and both threads share a batch's work. Results gather in
//! the batch they came with ([`Batch`]): the submitter is woken once, when
//! the last of its batch is done, not once per transaction (a wake-up of
//! an HTTP worker parked in `epoll` is a system call; per transaction they
//! cost more than the bookkeeping they woke it for).
//!
//! Each thread takes one transaction at a time. A panic in the checks is
//! contained to that transaction (answered with an internal error and
//! counted as a restart): admission is stateless, so there is nothing to
//! rebuild.

use std::{
    io,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    thread,
};

use alloy_primitives::Bytes;
use parking_lot::Mutex;
use sluice_messages::RecoveredTx;
use sluice_txpool::{admit_stateless, AdmissionRules, TxError};
use tokio::sync::oneshot;

use crate::{
    faults::Site,
    mailbox::{mailbox, MailboxProbe, MailboxReceiver, MailboxSender, SendError},
    metrics as m,
    supervise::contain,
};

/// The stage's name in metrics (`actor` label).
pub const ACTOR: &str = "recovery";

/// What a submission comes to: the checked transaction with its sender, or
/// why it was refused.
pub type Recovered = Result<RecoveredTx, TxError>;

/// One submitted transaction to check and recover.
#[derive(Debug)]
pub struct RecoverMsg {
    /// The raw transaction as submitted.
    pub raw: Bytes,
    /// An injected panic fault fired for this submission (see `faults.rs`).
    pub panic: bool,
    /// Where the result goes.
    pub slot: Slot,
}

/// The results of one batch, filled by the recovery threads in any order.
#[derive(Debug)]
struct Gather {
    results: Mutex<Vec<Option<Recovered>>>,
    /// Slots not yet filled, plus one while the submitter is still adding.
    remaining: AtomicUsize,
    /// Fired by whoever brings `remaining` to zero.
    done: Mutex<Option<oneshot::Sender<()>>>,
}

impl Gather {
    fn fill(&self, index: usize, result: Recovered) {
        if let Some(place) = self.results.lock().get_mut(index) {
            *place = Some(result);
        }
        self.release();
    }

    fn release(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(done) = self.done.lock().take() {
                // The submitter may have gone (connection closed).
                let _ = done.send(());
            }
        }
    }
}

/// One submission's place in its batch's results. Dropped unfilled (its
/// message was lost with a thread) it answers "admission stopped", so a
/// batch never waits for a submission nobody will recover.
#[derive(Debug)]
pub struct Slot {
    batch: Arc<Gather>,
    index: usize,
    filled: bool,
}

impl Slot {
    /// Answers this submission.
    pub fn fill(mut self, result: Recovered) {
        self.filled = true;
        self.batch.fill(self.index, result);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.filled {
            self.batch.fill(self.index, Err(TxError::Unavailable("admission stopped")));
        }
    }
}

/// How many submissions the stage has taken (checked or refused), for the
/// executor's rule: blocks of contract calls run in order while it moves,
/// because these threads then hold the cores lanes would use.
#[derive(Debug, Clone, Default)]
pub struct Taken(Arc<AtomicU64>);

impl sluice_executor::Load for Taken {
    fn work_done(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The stage's entry: where admission offers submissions.
#[derive(Debug, Clone)]
pub struct Recovery {
    tx: MailboxSender<RecoverMsg>,
}

impl Recovery {
    /// Starts `workers` threads (at least one) behind a mailbox of
    /// `queue_txs` submissions, counting what they take in `taken`; returns
    /// the entry and a probe of the mailbox for the metrics sampler. The
    /// threads stop when every [`Recovery`] handle is gone.
    pub fn start(
        workers: usize,
        queue_txs: usize,
        rules: AdmissionRules,
        taken: Taken,
    ) -> io::Result<(Self, MailboxProbe)> {
        let (tx, rx) = mailbox::<RecoverMsg>(ACTOR, queue_txs.max(1));
        let probe = rx.probe();
        for i in 0..workers.max(1) {
            let (rx, rules, taken) = (rx.clone(), rules.clone(), taken.clone());
            thread::Builder::new()
                .name(format!("sluice-recover-{i}"))
                .spawn(move || run(&rx, &rules, &taken))?;
        }
        Ok((Recovery { tx }, probe))
    }

    /// A new, empty batch: submissions added to it are answered together,
    /// in the order they were added.
    pub fn batch(&self) -> Batch<'_> {
        let (done, rx) = oneshot::channel();
        let gather = Gather {
            results: Mutex::new(Vec::new()),
            remaining: AtomicUsize::new(1),
            done: Mutex::new(Some(done)),
        };
        Batch { stage: self, gather: Arc::new(gather), done: rx }
    }

    /// Submissions waiting now (for tests and the sampler).
    pub fn depth(&self) -> usize {
        self.tx.depth()
    }

    /// The most submissions ever seen waiting.
    pub fn high_water(&self) -> usize {
        self.tx.high_water()
    }

    /// The mailbox bound.
    pub fn capacity(&self) -> usize {
        self.tx.capacity()
    }
}

/// Submissions on their way through the stage, answered together by
/// [`Batch::wait`] in the order they were added.
#[derive(Debug)]
pub struct Batch<'a> {
    stage: &'a Recovery,
    gather: Arc<Gather>,
    done: oneshot::Receiver<()>,
}

impl Batch<'_> {
    /// The next submission's place in the results.
    fn slot(&mut self) -> Slot {
        let mut results = self.gather.results.lock();
        results.push(None);
        self.gather.remaining.fetch_add(1, Ordering::AcqRel);
        Slot { batch: Arc::clone(&self.gather), index: results.len() - 1, filled: false }
    }

    /// Queues `raw` to be checked and its sender recovered on the stage's
    /// threads, without waiting. A full mailbox answers it `txpool is full`
    /// at once: the caller is not made to wait.
    pub fn submit(&mut self, raw: Bytes, panic: bool) {
        let slot = self.slot();
        match self.stage.tx.try_send(RecoverMsg { raw, panic, slot }) {
            Ok(()) => {}
            Err(SendError::Full(msg)) => msg.slot.fill(Err(TxError::TxPoolFull)),
            Err(SendError::Closed(msg)) => msg.slot.fill(Err(TxError::Unavailable("admission stopped"))),
        }
    }

    /// Queues `raw` as [`Batch::submit`] does, but waits for room in a
    /// full mailbox (transactions another validator sent: refusing them
    /// would only lose this node's copy).
    pub async fn submit_waiting(&mut self, raw: Bytes) {
        let slot = self.slot();
        if let Err(e) = self.stage.tx.send(RecoverMsg { raw, panic: false, slot }).await {
            e.into_inner().slot.fill(Err(TxError::Unavailable("admission stopped")));
        }
    }

    /// Answers the next submission with `error` without recovering it (the
    /// node's own checks refused it first).
    pub fn refuse(&mut self, error: TxError) {
        self.slot().fill(Err(error));
    }

    /// Every submission's result, in the order they were added, once the
    /// last of them is done.
    pub async fn wait(self) -> Vec<Recovered> {
        let Batch { gather, done, .. } = self;
        // The submitter's own count: the batch is complete once it is
        // released and every slot is filled.
        gather.release();
        // An error means the sender went with the batch: nothing is left
        // to wait for either way.
        let _ = done.await;
        let results = std::mem::take(&mut *gather.results.lock());
        results.into_iter().map(|r| r.unwrap_or(Err(TxError::Unavailable("admission stopped")))).collect()
    }
}

/// One recovery thread: until every sender is gone.
fn run(rx: &MailboxReceiver<RecoverMsg>, rules: &AdmissionRules, taken: &Taken) {
    let checked = metrics::counter!(m::RECOVERY_CHECKED);
    while let Some(msg) = rx.recv_blocking() {
        checked.increment(1);
        taken.0.fetch_add(1, Ordering::Relaxed);
        let RecoverMsg { raw, panic, slot } = msg;
        let result = contain(|| {
            if panic {
                panic!("injected panic at failpoint admission");
            }
            admit_stateless(raw, rules)
        });
        let result = result.unwrap_or_else(|panic| {
            metrics::counter!(m::ACTOR_RESTARTS, "actor" => Site::Admission.name()).increment(1);
            tracing::error!(panic, "admission panicked; request answered with an internal error");
            Err(TxError::Unavailable("internal error in admission"))
        });
        slot.fill(result);
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::B256;
    use sluice_txpool::Signer;

    use super::*;

    fn raw(nonce: u64) -> Bytes {
        let signer = Signer::from_bytes(&B256::repeat_byte(7)).expect("a valid key");
        crate::test_support::signed_transfer(&signer, nonce, 31337)
    }

    fn rules() -> AdmissionRules {
        AdmissionRules::new(31337, 30_000_000, 1_000_000_000)
    }

    fn nonces(results: &[Recovered]) -> Vec<Result<u64, String>> {
        results.iter().map(|r| r.as_ref().map(RecoveredTx::nonce).map_err(|e| e.to_string())).collect()
    }

    #[tokio::test]
    async fn a_batch_answers_every_submission_in_order() {
        let (stage, _probe) = Recovery::start(2, 64, rules(), Taken::default()).unwrap();
        let mut batch = stage.batch();
        for n in 0..20 {
            batch.submit(raw(n), false);
        }
        batch.refuse(TxError::TxPoolFull);
        batch.submit(Bytes::from_static(&[0xde, 0xad]), false);
        batch.submit(raw(20), true);
        let got = nonces(&batch.wait().await);
        assert_eq!(got.len(), 23);
        assert_eq!(got[..20], (0..20).map(Ok).collect::<Vec<_>>()[..]);
        assert_eq!(got[20], Err(TxError::TxPoolFull.to_string()));
        assert!(got[21].is_err(), "undecodable bytes are refused: {:?}", got[21]);
        let internal = TxError::Unavailable("internal error in admission").to_string();
        assert_eq!(got[22], Err(internal), "a panic is contained to its submission");
        // An empty batch is complete at once.
        assert!(stage.batch().wait().await.is_empty());
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_lost_submission_does_not_hang() {
        // No threads take from this mailbox: the queue fills and stays full.
        let (tx, rx) = mailbox::<RecoverMsg>(ACTOR, 2);
        let stage = Recovery { tx };
        let mut batch = stage.batch();
        for n in 0..3 {
            batch.submit(raw(n), false);
        }
        // The two queued ones are taken and lost (as with a thread that
        // died holding them): they answer "admission stopped", not never.
        for _ in 0..2 {
            drop(rx.recv_blocking());
        }
        let stopped = TxError::Unavailable("admission stopped").to_string();
        let got = nonces(&batch.wait().await);
        assert_eq!(got, vec![Err(stopped.clone()), Err(stopped), Err(TxError::TxPoolFull.to_string())]);
    }
}
