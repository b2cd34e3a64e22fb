//! Chain events for subscribers: the height of the last committed block,
//! published by store commit, and the node's shutdown.
//!
//! Only the height is published, on a `tokio::sync::watch` channel: it holds
//! one value, so publishing never waits and never buffers, however slow a
//! subscriber is. A subscriber reads the blocks it has not delivered yet from
//! the store, in order, and decides itself when it is too far behind
//! (`rpc.ws_max_lag_blocks`): nothing between the committer and a WebSocket
//! grows with a slow consumer.

use std::sync::Arc;

use tokio::sync::watch;

/// The publishing side, cheap to clone: the committer and the RPC server
/// each hold one.
#[derive(Clone)]
pub struct ChainEvents {
    head: Arc<watch::Sender<u64>>,
    closing: Arc<watch::Sender<bool>>,
}

impl ChainEvents {
    /// Events starting at the committed height `head`.
    pub fn new(head: u64) -> Self {
        ChainEvents { head: Arc::new(watch::channel(head).0), closing: Arc::new(watch::channel(false).0) }
    }

    /// Block `height` is committed and readable from the store.
    pub fn committed(&self, height: u64) {
        self.head.send_replace(height);
    }

    /// The node is shutting down: subscribers close their connections.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// The committed height, updated as blocks commit.
    pub fn heads(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// Becomes `true` when the node shuts down.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishing_keeps_only_the_latest_height() {
        let events = ChainEvents::new(0);
        let mut heads = events.heads();
        for h in 1..=1000 {
            events.committed(h);
        }
        assert!(heads.has_changed().unwrap_or(false));
        assert_eq!(*heads.borrow_and_update(), 1000);
        events.close();
        assert!(*events.closing().borrow());
    }
}
