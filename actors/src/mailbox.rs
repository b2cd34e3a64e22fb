//! Bounded mailboxes between stages.
//!
//! actix's own mailboxes do not bound what a producer can queue (`do_send`
//! ignores capacity; `try_send` bounds are per sender handle, see
//! `shared/reference/runtime-pitfalls.md`), so every stage reads from a
//! `flume::bounded` channel instead, registered with the actor as a stream.
//! Its capacity is the bound, whoever sends and however many senders there
//! are:
//! - [`MailboxSender::send`] waits while the mailbox is full: backpressure,
//!   the stage before waits for this one;
//! - [`MailboxSender::send_blocking`] does the same for stages that run on
//!   their own OS thread;
//! - [`MailboxSender::try_send`] never waits and hands the message back when
//!   the mailbox is full, counting the rejection.
//!
//! Each mailbox reports its depth, capacity and high-water mark, and its
//! senders count the times they found it full and waited
//! (`sluice_mailbox_waits_total`) or were refused: a bound that holds is
//! one its senders feel.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use crate::metrics as m;

/// Shared bookkeeping of one mailbox.
#[derive(Debug)]
struct Shared {
    actor: &'static str,
    /// Which of the actor's mailboxes (mempool shards have one each), as
    /// the `mailbox` label, so several never overwrite each other's gauges.
    index: String,
    capacity: usize,
    high_water: AtomicUsize,
}

/// The sending side of a mailbox. Cheap to clone; every clone shares the
/// same bound.
#[derive(Debug)]
pub struct MailboxSender<M> {
    tx: flume::Sender<M>,
    shared: Arc<Shared>,
}

impl<M> Clone for MailboxSender<M> {
    fn clone(&self) -> Self {
        MailboxSender { tx: self.tx.clone(), shared: Arc::clone(&self.shared) }
    }
}

/// Why a message could not be delivered; the message comes back.
#[derive(Debug)]
pub enum SendError<M> {
    /// The mailbox is at capacity (only from `try_send`).
    Full(M),
    /// The receiving actor has stopped.
    Closed(M),
}

impl<M> SendError<M> {
    /// The undelivered message.
    pub fn into_inner(self) -> M {
        match self {
            SendError::Full(m) | SendError::Closed(m) => m,
        }
    }
}

impl<M> MailboxSender<M> {
    fn note_depth(&self) {
        let depth = self.tx.len();
        self.shared.high_water.fetch_max(depth, Ordering::Relaxed);
    }

    /// Sends if there is room; else hands the message back for the caller
    /// to wait with, counting the wait.
    fn send_now(&self, msg: M) -> Result<Option<M>, SendError<M>> {
        match self.tx.try_send(msg) {
            Ok(()) => {
                self.note_depth();
                Ok(None)
            }
            Err(flume::TrySendError::Full(msg)) => {
                metrics::counter!(m::MAILBOX_WAITS, "actor" => self.shared.actor).increment(1);
                Ok(Some(msg))
            }
            Err(flume::TrySendError::Disconnected(msg)) => Err(SendError::Closed(msg)),
        }
    }

    /// Sends, waiting while the mailbox is full.
    pub async fn send(&self, msg: M) -> Result<(), SendError<M>> {
        let Some(msg) = self.send_now(msg)? else { return Ok(()) };
        let res = self.tx.send_async(msg).await.map_err(|e| SendError::Closed(e.into_inner()));
        self.note_depth();
        res
    }

    /// Sends from a dedicated OS thread, blocking it while the mailbox is
    /// full. Never call this on an event loop shared with other actors.
    pub fn send_blocking(&self, msg: M) -> Result<(), SendError<M>> {
        let Some(msg) = self.send_now(msg)? else { return Ok(()) };
        let res = self.tx.send(msg).map_err(|e| SendError::Closed(e.into_inner()));
        self.note_depth();
        res
    }

    /// Sends without waiting; a full mailbox hands the message back.
    pub fn try_send(&self, msg: M) -> Result<(), SendError<M>> {
        match self.tx.try_send(msg) {
            Ok(()) => {
                self.note_depth();
                Ok(())
            }
            Err(flume::TrySendError::Full(msg)) => {
                metrics::counter!(m::MAILBOX_REJECTED, "actor" => self.shared.actor).increment(1);
                Err(SendError::Full(msg))
            }
            Err(flume::TrySendError::Disconnected(msg)) => Err(SendError::Closed(msg)),
        }
    }

    /// Like [`MailboxSender::try_send`], for a caller that will wait when the
    /// mailbox is full rather than give up, so the refusal is not counted.
    pub fn offer(&self, msg: M) -> Result<(), SendError<M>> {
        match self.tx.try_send(msg) {
            Ok(()) => {
                self.note_depth();
                Ok(())
            }
            Err(flume::TrySendError::Full(msg)) => Err(SendError::Full(msg)),
            Err(flume::TrySendError::Disconnected(msg)) => Err(SendError::Closed(msg)),
        }
    }

    /// Messages waiting now.
    pub fn depth(&self) -> usize {
        self.tx.len()
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// The most messages ever seen waiting.
    pub fn high_water(&self) -> usize {
        self.shared.high_water.load(Ordering::Relaxed)
    }

    /// The owning actor's name (the metrics label).
    pub fn actor(&self) -> &'static str {
        self.shared.actor
    }
}

/// The receiving side, handed to the actor (as a stream) when it starts.
/// Clones share the mailbox: a stage run by a pool of threads gives each
/// thread one, and each message goes to one of them.
#[derive(Debug)]
pub struct MailboxReceiver<M> {
    rx: flume::Receiver<M>,
    shared: Arc<Shared>,
}

impl<M> Clone for MailboxReceiver<M> {
    fn clone(&self) -> Self {
        MailboxReceiver { rx: self.rx.clone(), shared: Arc::clone(&self.shared) }
    }
}

impl<M: Send + 'static> MailboxReceiver<M> {
    /// A probe for the metrics sampler.
    pub fn probe(&self) -> MailboxProbe {
        let rx = self.rx.clone();
        MailboxProbe { rx: Box::new(move || rx.len()), shared: Arc::clone(&self.shared) }
    }

    /// The next message, blocking this (dedicated OS) thread until one
    /// arrives; `None` once every sender is gone and the mailbox is drained.
    pub fn recv_blocking(&self) -> Option<M> {
        self.rx.recv().ok()
    }

    /// The messages as a stream, for `ctx.add_stream`. It ends when every
    /// sender is gone and the mailbox is drained: that is how a stage learns
    /// the stage before it has stopped.
    pub fn into_stream(self) -> flume::r#async::RecvStream<'static, M> {
        self.rx.into_stream()
    }
}

/// A read-only view of a mailbox for the metrics sampler. It holds a
/// receiver clone, never a sender, so it does not keep the mailbox open:
/// shutdown still sees the mailbox close when the stage before stops.
pub struct MailboxProbe {
    rx: Box<dyn Fn() -> usize + Send + Sync>,
    shared: Arc<Shared>,
}

impl MailboxProbe {
    /// Samples depth, capacity and high-water mark into gauges.
    pub fn record(&self) {
        let (actor, index) = (self.shared.actor, self.shared.index.clone());
        let depth = (self.rx)();
        self.shared.high_water.fetch_max(depth, Ordering::Relaxed);
        metrics::gauge!(m::MAILBOX_DEPTH, "actor" => actor, "mailbox" => index.clone()).set(depth as f64);
        metrics::gauge!(m::MAILBOX_CAPACITY, "actor" => actor, "mailbox" => index.clone())
            .set(self.shared.capacity as f64);
        metrics::gauge!(m::MAILBOX_HIGH_WATER, "actor" => actor, "mailbox" => index)
            .set(self.shared.high_water.load(Ordering::Relaxed) as f64);
    }
}

/// A new mailbox for `actor` holding at most `capacity` messages.
pub fn mailbox<M>(actor: &'static str, capacity: usize) -> (MailboxSender<M>, MailboxReceiver<M>) {
    mailbox_indexed(actor, 0, capacity)
}

/// Mailbox number `index` of an actor with several (mempool shards).
pub fn mailbox_indexed<M>(
    actor: &'static str,
    index: usize,
    capacity: usize,
) -> (MailboxSender<M>, MailboxReceiver<M>) {
    // Registered at zero so dashboards show every actor, refusals or not.
    metrics::counter!(m::MAILBOX_REJECTED, "actor" => actor).increment(0);
    metrics::counter!(m::MAILBOX_WAITS, "actor" => actor).increment(0);
    let (tx, rx) = flume::bounded(capacity);
    let shared =
        Arc::new(Shared { actor, index: index.to_string(), capacity, high_water: AtomicUsize::new(0) });
    (MailboxSender { tx, shared: Arc::clone(&shared) }, MailboxReceiver { rx, shared })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_send_refuses_past_capacity_and_returns_the_message() {
        let (tx, _rx) = mailbox::<u32>("test", 2);
        let clone = tx.clone();
        tx.try_send(1).unwrap();
        clone.try_send(2).unwrap();
        // Cloning does not add room (unlike actix's per-sender bound).
        assert!(matches!(tx.clone().try_send(3), Err(SendError::Full(3))));
        assert_eq!(tx.depth(), 2);
        assert_eq!(tx.high_water(), 2);
    }

    #[test]
    fn blocking_send_waits_for_the_consumer() {
        let (tx, rx) = mailbox::<u32>("test", 1);
        tx.send_blocking(1).unwrap();
        let t = std::thread::spawn(move || {
            tx.send_blocking(2).unwrap();
            tx.high_water()
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished(), "a send into a full mailbox must wait");
        assert_eq!(rx.rx.recv().unwrap(), 1);
        assert_eq!(t.join().unwrap(), 1, "the bound held while the sender waited");
        assert_eq!(rx.rx.recv().unwrap(), 2);
    }

    #[test]
    fn closed_mailbox_returns_the_message() {
        let (tx, rx) = mailbox::<u32>("test", 1);
        drop(rx);
        assert!(matches!(tx.send_blocking(5), Err(SendError::Closed(5))));
    }
}
