//! Store commit: the only writer of state.
//!
//! Runs alone on its own OS thread. Commits executed blocks in order,
//! chaining the app hash; then publishes the committed height (the
//! finalizer drops the block from its overlay, RPC serves it), forgets the
//! block's transactions from the in-flight index, and tells the nonce actor
//! which senders progressed.
//!
//! A failed commit is latched by the store: this actor then refuses every
//! later block, the finalizer stops executing, reads keep working, and the
//! error is in the logs and in `sluice_store_halted`.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use actix::prelude::*;
use sluice_store::Store;
use tokio::sync::oneshot;

use crate::{
    events::ChainEvents,
    mailbox::{MailboxReceiver, MailboxSender},
    metrics::{self as m, ActorMetrics},
    pending::PendingTxs,
    protocol::{CommitMsg, NonceMsg},
};

/// The store commit actor.
pub struct Committer {
    store: Arc<Store>,
    committed: Arc<AtomicU64>,
    pending: Arc<PendingTxs>,
    nonce: MailboxSender<NonceMsg>,
    rx: Option<MailboxReceiver<CommitMsg>>,
    done: Option<oneshot::Sender<()>>,
    metrics: ActorMetrics,
    /// Where committed heights are published for subscribers (WebSocket).
    events: Option<ChainEvents>,
}

impl Committer {
    /// A committer writing to `store`. `done` is answered when the actor
    /// stops, after its mailbox is drained: the end of a clean shutdown.
    pub fn new(
        store: Arc<Store>,
        committed: Arc<AtomicU64>,
        pending: Arc<PendingTxs>,
        nonce: MailboxSender<NonceMsg>,
        rx: MailboxReceiver<CommitMsg>,
        done: oneshot::Sender<()>,
    ) -> Self {
        Committer {
            store,
            committed,
            pending,
            nonce,
            rx: Some(rx),
            done: Some(done),
            metrics: ActorMetrics::new("committer"),
            events: None,
        }
    }

    /// Publishes each committed height to `events` (subscriptions).
    pub fn with_events(mut self, events: ChainEvents) -> Self {
        self.events = Some(events);
        self
    }
}

impl Actor for Committer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

impl StreamHandler<CommitMsg> for Committer {
    fn handle(&mut self, msg: CommitMsg, _ctx: &mut Context<Self>) {
        let start = Instant::now();
        let number = msg.block.block.header.number;
        match self.store.commit(&msg.block) {
            Ok(info) => {
                let app_hash = info.app_hash;
                if info.synced {
                    metrics::histogram!(m::STORE_SYNC_SECONDS).record(info.write.as_secs_f64());
                }
                metrics::gauge!(m::STORE_APP_HASH_HEIGHT).set(number as f64);
                self.committed.store(number, Ordering::Release);
                for r in &msg.block.receipts {
                    self.pending.remove(&r.tx_hash);
                }
                for (hash, _) in &msg.block.skipped {
                    self.pending.remove(hash);
                }
                metrics::histogram!(m::COMMIT_SECONDS).record(start.elapsed().as_secs_f64());
                metrics::gauge!(m::COMMITTED_HEIGHT).set(number as f64);
                metrics::counter!(m::TXS_INCLUDED).increment(msg.block.receipts.len() as u64);
                tracing::debug!(number, txs = msg.block.receipts.len(), %app_hash, "committed");
                if let Some(events) = &self.events {
                    events.committed(number);
                }
                let progress = NonceMsg::Executed { height: number, senders: msg.senders };
                if self.nonce.send_blocking(progress).is_err() {
                    tracing::warn!(number, "nonce actor stopped; progress not delivered");
                }
            }
            Err(e) => {
                tracing::error!(number, error = %e, "commit failed; the node stops producing and executing");
                self.store.halt(e.to_string());
                metrics::gauge!(m::STORE_HALTED).set(1.0);
            }
        }
        self.metrics.handled(start);
    }
}
