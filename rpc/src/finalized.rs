//! The finalized-block feed every node in a network serves: each block
//! consensus finalized, with its finalization certificate, both in
//! consensus's encoding, so that a follower can check the certificate
//! against the validator set and the block against the certificate
//! without trusting the node that served them.
//!
//! - `consensus_getFinalized(height | "latest")`: one item, or `null` if
//!   this node does not keep it (the feed keeps the last
//!   `rpc.finalized_feed_blocks`).
//! - `consensus_subscribe(["finalized", from?])` over WebSocket: every item
//!   from `from` (default: the next one) as it is finalized, before the node
//!   executes it. At most `rpc.finalized_feed_max_subscribers` at once
//!   (-32005 past it): each costs the node a block's bytes per block, and a
//!   validator's egress is the chain's.
//!
//! Items are JSON objects `{height, finalization, block}` (quantities and
//! hex bytes).

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_messages::FinalizedItem;
use tokio::sync::watch;

/// Subscribers of the feed now.
pub const FEED_SUBSCRIBERS: &str = "sluice_feed_subscribers";

/// The last finalized items, by height, and the newest height.
#[derive(Debug)]
pub struct FinalizedFeed {
    items: Mutex<VecDeque<Arc<FinalizedItem>>>,
    keep: usize,
    latest: watch::Sender<u64>,
    subscribers: AtomicUsize,
    max_subscribers: usize,
}

impl FinalizedFeed {
    /// A feed keeping the last `keep` items, for at most `max_subscribers`.
    pub fn new(keep: usize, max_subscribers: usize) -> FinalizedFeed {
        FinalizedFeed {
            items: Mutex::new(VecDeque::with_capacity(keep.min(4096))),
            keep: keep.max(1),
            latest: watch::channel(0).0,
            subscribers: AtomicUsize::new(0),
            max_subscribers,
        }
    }

    /// Adds the next item. Consensus publishes in height order; an item
    /// that does not follow the last (a restart, a gap left by a full
    /// queue) starts the window afresh, so what is kept stays contiguous.
    pub fn publish(&self, item: FinalizedItem) {
        let height = item.height;
        let mut items = self.items.lock();
        match items.back() {
            Some(last) if last.height + 1 == height => {}
            Some(last) if last.height >= height => return,
            _ => items.clear(),
        }
        items.push_back(Arc::new(item));
        while items.len() > self.keep {
            items.pop_front();
        }
        drop(items);
        self.latest.send_replace(height);
    }

    /// The item at `height`, if kept.
    pub fn get(&self, height: u64) -> Option<Arc<FinalizedItem>> {
        let items = self.items.lock();
        let first = items.front()?.height;
        items.get(usize::try_from(height.checked_sub(first)?).ok()?).cloned()
    }

    /// The newest height published (0: none yet).
    pub fn latest(&self) -> u64 {
        *self.latest.borrow()
    }

    /// The oldest height kept, if any.
    pub fn oldest(&self) -> Option<u64> {
        self.items.lock().front().map(|i| i.height)
    }

    /// Watches the newest height.
    pub fn heads(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// Takes a subscriber slot; `None` when all are taken. The slot is
    /// given back when the returned guard drops.
    pub fn subscribe(self: &Arc<Self>) -> Option<Subscriber> {
        let taken = self.subscribers.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < self.max_subscribers).then_some(n + 1)
        });
        let now = taken.ok()? + 1;
        metrics::gauge!(FEED_SUBSCRIBERS).set(now as f64);
        Some(Subscriber { feed: Arc::clone(self) })
    }
}

/// A subscriber's slot on the feed.
#[derive(Debug)]
pub struct Subscriber {
    feed: Arc<FinalizedFeed>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let now = self.feed.subscribers.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        metrics::gauge!(FEED_SUBSCRIBERS).set(now as f64);
    }
}

/// An item as JSON.
pub fn item_json(item: &FinalizedItem) -> Value {
    json!({
        "height": format!("{:#x}", item.height),
        "finalization": item.finalization,
        "block": item.block,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(height: u64) -> FinalizedItem {
        FinalizedItem { height, finalization: vec![1, 2].into(), block: vec![3].into() }
    }

    #[test]
    fn keeps_a_contiguous_window() {
        let feed = FinalizedFeed::new(3, 1);
        assert!(feed.get(1).is_none());
        for h in 1..=5 {
            feed.publish(item(h));
        }
        assert_eq!((feed.oldest(), feed.latest()), (Some(3), 5));
        assert!(feed.get(2).is_none());
        assert_eq!(feed.get(4).map(|i| i.height), Some(4));
        feed.publish(item(4));
        assert_eq!(feed.latest(), 5, "an old item is ignored");
        feed.publish(item(9));
        assert_eq!((feed.oldest(), feed.latest()), (Some(9), 9), "a gap starts afresh");
        assert_eq!(item_json(&item(9))["height"], "0x9");
        assert_eq!(item_json(&item(9))["finalization"], "0x0102");
    }

    #[test]
    fn subscribers_are_bounded() {
        let feed = Arc::new(FinalizedFeed::new(3, 2));
        let a = feed.subscribe().expect("a slot");
        let _b = feed.subscribe().expect("a slot");
        assert!(feed.subscribe().is_none());
        drop(a);
        assert!(feed.subscribe().is_some());
    }
}
