//! The journal's one writer thread, doing group commit: admission hands it
//! the transactions it is about to answer with a oneshot; the thread takes
//! everything queued, appends it, syncs once and answers every waiter. Under
//! load one `fdatasync` covers many JSON-RPC requests, so the cost per
//! transaction falls as the rate rises.
//!
//! Bounded twice: the queue to the thread (a full queue makes admission
//! wait: backpressure reaches the client as latency), and the file. When the
//! file passes `mempool.journal_max_bytes` it is rewritten with only the
//! transactions still pending (nonce not yet committed); if those alone
//! take more than half the limit, new transactions are refused with
//! `txpool is full` until a later rewrite (retried every
//! [`FULL_RETRY`]) frees room. Half, not all: just under the limit, every
//! small append would trigger another rewrite of the whole file.

use std::{
    io,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use tokio::sync::oneshot;

use crate::{
    journal::{Entry, Journal},
    metrics as m,
};

/// How often a full journal is rewritten again to see whether blocks
/// committed enough of it.
pub const FULL_RETRY: Duration = Duration::from_secs(2);

/// Whether a journaled transaction is still pending (its sender's
/// committed nonce has not passed it); compaction keeps those.
pub type PendingFilter = Box<dyn Fn(&Entry) -> bool + Send>;

/// Why transactions could not be made durable in the journal.
///
/// Cloneable because one append answers every request of its batch: the
/// I/O error is shared rather than copied, so each waiter sees the cause
/// itself and not only its text.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JournalWriteError {
    /// The writer thread is gone (the node is stopping, or the thread
    /// died), so nothing more can be written.
    #[error("writer stopped")]
    Stopped,
    /// Appending to or syncing the file failed; the text is the OS's
    /// (`No space left on device`), as clients saw it before.
    #[error(transparent)]
    Io(Arc<io::Error>),
}

struct Request {
    entries: Vec<Entry>,
    reply: oneshot::Sender<Result<(), JournalWriteError>>,
}

/// The handle admission writes through.
pub struct JournalWriter {
    queue: flume::Sender<Request>,
    full: Arc<AtomicBool>,
}

impl JournalWriter {
    /// Starts the writer thread on `journal`: at most `queue` requests wait
    /// for it, and the file is compacted with `pending` past `max_bytes`.
    pub fn start(
        journal: Journal,
        max_bytes: u64,
        queue: usize,
        pending: PendingFilter,
    ) -> io::Result<JournalWriter> {
        let (tx, rx) = flume::bounded(queue.max(1));
        let full = Arc::new(AtomicBool::new(false));
        let thread = Writer { journal, max_bytes, pending, full: Arc::clone(&full), last_rewrite: None };
        std::thread::Builder::new().name("txjournal".into()).spawn(move || thread.run(rx))?;
        Ok(JournalWriter { queue: tx, full })
    }

    /// Whether new transactions are refused: the pending ones alone fill
    /// the journal.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Appends `entries` and returns once they are on disk, or why not.
    pub async fn write(&self, entries: Vec<Entry>) -> Result<(), JournalWriteError> {
        if entries.is_empty() {
            return Ok(());
        }
        let (reply, rx) = oneshot::channel();
        self.queue.send_async(Request { entries, reply }).await.map_err(|_| JournalWriteError::Stopped)?;
        rx.await.map_err(|_| JournalWriteError::Stopped)?
    }
}

struct Writer {
    journal: Journal,
    max_bytes: u64,
    pending: PendingFilter,
    full: Arc<AtomicBool>,
    last_rewrite: Option<Instant>,
}

impl Writer {
    fn run(mut self, rx: flume::Receiver<Request>) {
        let sync_seconds = metrics::histogram!(m::TXJOURNAL_SYNC_SECONDS);
        metrics::gauge!(m::TXJOURNAL_BYTES).set(self.journal.len() as f64);
        loop {
            let first = if self.full.load(Ordering::Relaxed) {
                match rx.recv_timeout(FULL_RETRY) {
                    Ok(r) => Some(r),
                    Err(flume::RecvTimeoutError::Timeout) => None,
                    Err(flume::RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match rx.recv() {
                    Ok(r) => Some(r),
                    Err(_) => return,
                }
            };
            // Everything queued behind the first request shares its sync.
            let batch: Vec<Request> = first.into_iter().chain(rx.try_iter()).collect();
            if !batch.is_empty() {
                let started = Instant::now();
                let written = self.journal.append(batch.iter().flat_map(|r| r.entries.iter()));
                sync_seconds.record(started.elapsed().as_secs_f64());
                let answer = written.map_err(|e| JournalWriteError::Io(Arc::new(e)));
                if let Err(e) = &answer {
                    tracing::error!(error = %e, "writing the transaction journal failed");
                }
                for r in batch {
                    let _ = r.reply.send(answer.clone());
                }
            }
            self.compact_if_due();
            metrics::gauge!(m::TXJOURNAL_BYTES).set(self.journal.len() as f64);
        }
    }

    /// Rewrites the journal with only pending transactions when it passed
    /// its limit (while full, at most every [`FULL_RETRY`]).
    fn compact_if_due(&mut self) {
        let full = self.full.load(Ordering::Relaxed);
        let due = if full {
            self.last_rewrite.is_none_or(|t| t.elapsed() >= FULL_RETRY)
        } else {
            self.journal.len() > self.max_bytes
        };
        if !due {
            return;
        }
        self.last_rewrite = Some(Instant::now());
        let before = self.journal.len();
        match self.journal.rewrite(&self.pending) {
            Ok((kept, dropped)) => {
                let now_full = self.journal.len() > self.max_bytes / 2;
                if now_full != full {
                    tracing::warn!(
                        bytes = self.journal.len(),
                        limit = self.max_bytes,
                        full = now_full,
                        "transaction journal {}",
                        if now_full {
                            "full of pending transactions: refusing new ones"
                        } else {
                            "has room again"
                        }
                    );
                }
                self.full.store(now_full, Ordering::Release);
                tracing::debug!(
                    before,
                    after = self.journal.len(),
                    kept,
                    dropped,
                    "transaction journal rewritten"
                );
            }
            Err(e) => {
                // Appends go on to the old file; new transactions are
                // refused until a rewrite succeeds, so it stays bounded.
                tracing::error!(error = %e, "rewriting the transaction journal failed");
                self.full.store(true, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clients are answered with these texts (`transaction journal: ...`):
    /// they are the ones the writer sent as strings before.
    #[test]
    fn errors_read_as_before() {
        assert_eq!(JournalWriteError::Stopped.to_string(), "writer stopped");
        let full = io::Error::new(io::ErrorKind::StorageFull, "No space left on device");
        assert_eq!(JournalWriteError::Io(Arc::new(full)).to_string(), "No space left on device");
    }

    /// A writer whose thread is gone answers `Stopped`, not a panic.
    #[tokio::test]
    async fn a_gone_thread_is_stopped() {
        let (queue, rx) = flume::bounded(1);
        drop(rx);
        let writer = JournalWriter { queue, full: Arc::new(AtomicBool::new(false)) };
        let entry = Entry { sender: Default::default(), nonce: 0, raw: vec![1].into() };
        assert!(matches!(writer.write(vec![entry]).await, Err(JournalWriteError::Stopped)));
    }
}
