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
//! Each thread takes one transaction at a time and answers on the message's
//! reply channel. A panic in the checks is contained to that transaction
//! (answered with an internal error and counted as a restart): admission is
//! stateless, so there is nothing to rebuild.

use std::{io, thread};

use alloy_primitives::Bytes;
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

/// One submitted transaction to check and recover.
#[derive(Debug)]
pub struct RecoverMsg {
    /// The raw transaction as submitted.
    pub raw: Bytes,
    /// An injected panic fault fired for this submission (see `faults.rs`).
    pub panic: bool,
    /// Where the result goes.
    pub reply: oneshot::Sender<Result<RecoveredTx, TxError>>,
}

/// The stage's entry: where admission offers submissions.
#[derive(Debug, Clone)]
pub struct Recovery {
    tx: MailboxSender<RecoverMsg>,
}

impl Recovery {
    /// Starts `workers` threads (at least one) behind a mailbox of
    /// `queue_txs` submissions; returns the entry and a probe of the
    /// mailbox for the metrics sampler. The threads stop when every
    /// [`Recovery`] handle is gone.
    pub fn start(
        workers: usize,
        queue_txs: usize,
        rules: AdmissionRules,
    ) -> io::Result<(Self, MailboxProbe)> {
        let (tx, rx) = mailbox::<RecoverMsg>(ACTOR, queue_txs.max(1));
        let probe = rx.probe();
        for i in 0..workers.max(1) {
            let (rx, rules) = (rx.clone(), rules.clone());
            thread::Builder::new().name(format!("sluice-recover-{i}")).spawn(move || run(&rx, &rules))?;
        }
        Ok((Recovery { tx }, probe))
    }

    /// Queues `raw` to be checked and its sender recovered on the stage's
    /// threads, without waiting. A full mailbox is `txpool is full` at once:
    /// the caller is not made to wait.
    pub fn submit(&self, raw: Bytes, panic: bool) -> Result<Recovering, TxError> {
        let (reply, rx) = oneshot::channel();
        match self.tx.try_send(RecoverMsg { raw, panic, reply }) {
            Ok(()) => Ok(Recovering(rx)),
            Err(SendError::Full(_)) => Err(TxError::TxPoolFull),
            Err(SendError::Closed(_)) => Err(TxError::Unavailable("admission stopped")),
        }
    }

    /// Queues `raw` as [`Recovery::submit`] does, but waits for room in a
    /// full mailbox (transactions another validator sent: refusing them
    /// would only lose this node's copy).
    pub async fn submit_waiting(&self, raw: Bytes) -> Result<Recovering, TxError> {
        let (reply, rx) = oneshot::channel();
        match self.tx.send(RecoverMsg { raw, panic: false, reply }).await {
            Ok(()) => Ok(Recovering(rx)),
            Err(_) => Err(TxError::Unavailable("admission stopped")),
        }
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

/// A submitted transaction on its way through the stage.
#[derive(Debug)]
pub struct Recovering(oneshot::Receiver<Result<RecoveredTx, TxError>>);

impl Recovering {
    /// The checked transaction with its sender.
    pub async fn wait(self) -> Result<RecoveredTx, TxError> {
        self.0.await.map_err(|_| TxError::Unavailable("admission stopped"))?
    }
}

/// One recovery thread: until every sender is gone.
fn run(rx: &MailboxReceiver<RecoverMsg>, rules: &AdmissionRules) {
    while let Some(msg) = rx.recv_blocking() {
        let RecoverMsg { raw, panic, reply } = msg;
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
        // The submitter may have gone (connection closed): nothing to do.
        let _ = reply.send(result);
    }
}
