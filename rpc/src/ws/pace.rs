//! Notifications, and the backpressure that bounds a slow consumer:
//! nothing is queued for it beyond actix-ws's 32 frames. Each message waits
//! at most `rpc.ws_send_timeout_ms` for room towards the socket
//! ([`timed`]); block notifications are read from the store block by block
//! and the connection is dropped once the head is more than
//! `rpc.ws_max_lag_blocks` past the block it is sending ([`Pace`]); a
//! pending-feed or finalized-feed subscriber the feed has moved past is
//! dropped as lagging.

use std::{sync::Arc, time::Duration};

use actix_ws::Session;
use serde_json::Value;
use sluice_store::{LogEntry, StoredBlock};
use tokio::sync::watch;

use super::{
    connection::{Connection, End},
    subscriptions::Kind,
    WS_NOTIFICATIONS,
};
use crate::format;

impl Connection {
    /// Sends each `newPendingTransactions` subscription what entered the
    /// mempool since its cursor. A subscriber the feed's ring has lapped is
    /// dropped as lagging (it would miss transactions), as is one whose
    /// socket takes no data for `rpc.ws_send_timeout_ms`.
    pub(super) async fn deliver_pending(&mut self, session: &mut Session) -> Result<(), End> {
        let feed = self.state.events.pending();
        for sub in self.subs.list.iter_mut() {
            let Kind::NewPendingTransactions { full } = sub.kind else { continue };
            loop {
                let (txs, cursor, lost) = feed.since(sub.cursor, 256);
                if lost {
                    return Err(End::Lagging);
                }
                if txs.is_empty() {
                    break;
                }
                for tx in &txs {
                    let result =
                        if full { format::transaction(tx, None) } else { serde_json::json!(tx.hash) };
                    let note = format!(
                        r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"{}","result":{result}}}}}"#,
                        sub.id
                    );
                    timed(self.send_timeout, session.text(note)).await?;
                    metrics::counter!(WS_NOTIFICATIONS).increment(1);
                }
                sub.cursor = cursor;
            }
        }
        Ok(())
    }

    /// Sends each finalized-feed subscription every item from its cursor to
    /// the newest. One whose next item the feed no longer keeps (it fell
    /// more than `rpc.finalized_feed_blocks` behind, or asked for an older
    /// one) is dropped as lagging: it would miss blocks.
    pub(super) async fn deliver_finalized(&mut self, session: &mut Session) -> Result<(), End> {
        let feed = Arc::clone(&self.state.finalized);
        for sub in self.subs.list.iter_mut() {
            let Kind::Finalized(_) = sub.kind else { continue };
            while sub.cursor <= feed.latest() {
                let Some(item) = feed.get(sub.cursor) else {
                    if feed.oldest().is_some_and(|oldest| sub.cursor < oldest) {
                        return Err(End::Lagging);
                    }
                    break;
                };
                let note = format!(
                    r#"{{"jsonrpc":"2.0","method":"consensus_subscription","params":{{"subscription":"{}","result":{}}}}}"#,
                    sub.id,
                    crate::finalized::item_json(&item)
                );
                timed(self.send_timeout, session.text(note)).await?;
                metrics::counter!(WS_NOTIFICATIONS).increment(1);
                sub.cursor += 1;
            }
        }
        Ok(())
    }

    /// Sends the notifications of every block committed since the last
    /// call, in order, checking the lag before each.
    pub(super) async fn deliver(
        &mut self,
        session: &mut Session,
        heads: &mut watch::Receiver<u64>,
    ) -> Result<(), End> {
        let head = *heads.borrow_and_update();
        let Some(first_wanted) = self.subs.list.iter().map(|s| s.first_block).min() else {
            self.delivered = head;
            return Ok(());
        };
        let max_lag = self.state.limits.ws_max_lag_blocks;
        for number in first_wanted.max(self.delivered + 1)..=head {
            let Some(block) = self.state.store.block(number) else {
                tracing::warn!(number, "committed block not readable; notifications skipped");
                self.delivered = number;
                continue;
            };
            let pace = Pace { heads, number, max_lag, send_timeout: self.send_timeout };
            let mut header: Option<String> = None;
            for sub in self.subs.list.iter().filter(|s| s.first_block <= number) {
                match &sub.kind {
                    Kind::NewHeads => {
                        let header = header.get_or_insert_with(|| header_json(&block).to_string());
                        pace.send(session, &sub.id, header).await?;
                    }
                    Kind::Logs(criteria) => {
                        for entry in LogEntry::from_block(&block, criteria) {
                            pace.send(session, &sub.id, &format::log(&entry).to_string()).await?;
                        }
                    }
                    Kind::NewPendingTransactions { .. } | Kind::Finalized(_) => {}
                }
            }
            self.delivered = number;
        }
        Ok(())
    }
}

/// How notifications of block `number` are sent: each waits at most
/// `send_timeout` for room towards the socket, and the connection is
/// dropped as soon as the committed head is more than `max_lag` blocks past
/// `number`, whether it is sending slowly or stuck on a full socket.
struct Pace<'a> {
    heads: &'a watch::Receiver<u64>,
    number: u64,
    max_lag: u64,
    send_timeout: Duration,
}

impl Pace<'_> {
    /// Sends one notification of block `number` to subscription `id`.
    async fn send(&self, session: &mut Session, id: &str, result: &str) -> Result<(), End> {
        let mut heads = self.heads.clone();
        let (number, max_lag) = (self.number, self.max_lag);
        let lagging = async move {
            if heads.wait_for(|head| head.saturating_sub(number) > max_lag).await.is_err() {
                // No more heads (the node is stopping): never lagging.
                std::future::pending::<()>().await;
            }
        };
        let note = format!(
            r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"{id}","result":{result}}}}}"#
        );
        tokio::select! {
            biased;
            () = lagging => Err(End::Lagging),
            sent = timed(self.send_timeout, session.text(note)) => {
                sent?;
                metrics::counter!(WS_NOTIFICATIONS).increment(1);
                Ok(())
            }
        }
    }
}

/// Waits at most `timeout` for room towards the socket.
pub(super) async fn timed(
    timeout: Duration,
    send: impl std::future::Future<Output = Result<(), actix_ws::Closed>>,
) -> Result<(), End> {
    match tokio::time::timeout(timeout, send).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::Gone),
        Err(_) => Err(End::SendTimeout),
    }
}

/// A `newHeads` header: the block object without its body, as geth sends.
fn header_json(block: &StoredBlock) -> Value {
    let mut v = format::block(block, Vec::new());
    if let Some(o) = v.as_object_mut() {
        for body_field in ["transactions", "uncles", "withdrawals", "size", "totalDifficulty"] {
            o.remove(body_field);
        }
    }
    v
}
