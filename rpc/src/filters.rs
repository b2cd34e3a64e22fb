//! Polling filters, as geth serves them: `eth_newFilter`,
//! `eth_newBlockFilter`, `eth_newPendingTransactionFilter`,
//! `eth_getFilterChanges`, `eth_getFilterLogs`, `eth_uninstallFilter`. What
//! ethers' `JsonRpcProvider` uses for contract events over HTTP, and viem
//! for `watchContractEvent`.
//!
//! A filter is a cursor, not a buffer: it keeps the first committed height
//! it has not reported, and a poll reads the blocks since then from the
//! store (as a WebSocket subscription does). Nothing accumulates for a
//! client that polls slowly or never again. Filters belong to the node, not
//! to a connection (as in geth): any connection may poll an id, which is why
//! ids are unguessable 128-bit values.
//!
//! Limits, each from config: live filters (`rpc.max_filters`, and
//! `rpc.max_filters_per_client` from one client address, so one client
//! cannot hold every slot; -32005 past either); a filter not polled with `eth_getFilterChanges` for
//! `rpc.filter_timeout_ms` expires, and its id then answers geth's -32000
//! `filter not found`; a block filter reports at most
//! `rpc.max_logs_block_range` hashes per poll (the rest on the next one); a
//! log filter's changes obey the `eth_getLogs` limits and past them answer
//! its error. The cursor moves past a refused range all the same (as reth
//! does), so a filter never stays stuck on it; `eth_getLogs` over a
//! narrower range recovers what was refused.
//!
//! A pending-transaction filter reports each transaction that entered the
//! mempool since the last poll, once, from the pending feed
//! (`crate::events::PendingFeed`: the last `rpc.pending_feed_txs`); polled less
//! often than that, it misses the oldest.

use std::{
    collections::{hash_map::RandomState, HashMap},
    hash::BuildHasher,
    net::IpAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_config::RpcConfig;

use super::{
    error::{RpcError, LIMIT_EXCEEDED, SERVER_ERROR},
    logs::{Blocks, End, LogQuery},
    params::Params,
    RpcState,
};

/// What a filter reports.
#[derive(Debug)]
enum Kind {
    /// Hashes of new blocks.
    Blocks,
    /// Hashes of transactions that entered the mempool (`next` is a
    /// cursor into the pending feed).
    PendingTxs,
    /// New logs matching a query.
    Logs(Arc<LogQuery>),
}

/// One installed filter.
#[derive(Debug)]
struct Filter {
    kind: Kind,
    /// The first committed height not reported yet.
    next: u64,
    /// Creation or the last `eth_getFilterChanges`: expiry counts from here.
    polled: Instant,
    /// The client that installed it (`None`: in process).
    owner: Option<IpAddr>,
}

/// The node's installed filters, shared by every RPC worker.
#[derive(Debug)]
pub struct Filters {
    live: Mutex<HashMap<u128, Filter>>,
    /// `rpc.max_filters`.
    max: usize,
    /// `rpc.max_filters_per_client`.
    max_per_client: usize,
    /// `rpc.filter_timeout_ms`.
    timeout: Duration,
    /// Keys of the id generator, drawn from the OS at start.
    keys: RandomState,
    /// Makes each id's input unique.
    counter: AtomicU64,
}

/// geth's answer for an unknown, expired or uninstalled filter id.
fn not_found() -> RpcError {
    RpcError::new(SERVER_ERROR, "filter not found")
}

impl Filters {
    /// No filters yet, with the limits in `limits`.
    pub fn new(limits: &RpcConfig) -> Self {
        Filters {
            live: Mutex::new(HashMap::new()),
            max: limits.max_filters,
            max_per_client: limits.max_filters_per_client,
            timeout: Duration::from_millis(limits.filter_timeout_ms),
            keys: RandomState::new(),
            counter: AtomicU64::new(0),
        }
    }

    /// A fresh id: SipHash under keys the OS drew at start, over a counter,
    /// so ids cannot be predicted from ids seen before. Never 0.
    fn fresh_id(&self) -> u128 {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let (hi, lo) = (self.keys.hash_one((n, 0u8)), self.keys.hash_one((n, 1u8)));
        ((u128::from(hi) << 64) | u128::from(lo)).max(1)
    }

    /// Drops filters that were not polled for the timeout.
    fn sweep(&self, live: &mut HashMap<u128, Filter>) {
        live.retain(|_, f| f.polled.elapsed() < self.timeout);
    }

    /// Installs a filter for `owner` reporting from `next` on (a block
    /// height, or for pending transactions a feed sequence number); its id.
    fn install(&self, kind: Kind, next: u64, owner: Option<IpAddr>) -> Result<Value, RpcError> {
        let mut live = self.live.lock();
        self.sweep(&mut live);
        if live.len() >= self.max {
            return Err(RpcError::new(LIMIT_EXCEEDED, format!("too many filters: limit {}", self.max)));
        }
        // A scan: at most rpc.max_filters entries, under the lock already.
        if owner.is_some() && live.values().filter(|f| f.owner == owner).count() >= self.max_per_client {
            return Err(RpcError::new(
                LIMIT_EXCEEDED,
                format!(
                    "too many filters from this client: limit {} (rpc.max_filters_per_client)",
                    self.max_per_client
                ),
            ));
        }
        let mut id = self.fresh_id();
        while live.contains_key(&id) {
            id = self.fresh_id();
        }
        live.insert(id, Filter { kind, next, polled: Instant::now(), owner });
        Ok(Value::String(format!("{id:#x}")))
    }

    /// `eth_getFilterChanges`: what happened since the last poll.
    fn changes(&self, s: &RpcState, id: u128) -> Result<Value, RpcError> {
        let head = s.store.head();
        let mut live = self.live.lock();
        self.sweep(&mut live);
        let f = live.get_mut(&id).ok_or_else(not_found)?;
        f.polled = Instant::now();
        let from = f.next;
        match &f.kind {
            Kind::PendingTxs => {
                // Bounded per poll, like blocks; the rest waits.
                let cap = s.limits.max_logs_results.max(1);
                let (txs, cursor, _lost) = s.events.pending().since(from, cap);
                f.next = cursor;
                Ok(Value::Array(txs.iter().map(|tx| json!(tx.hash)).collect()))
            }
            Kind::Blocks => {
                // Bounded per poll; the rest waits for the next one.
                let cap = s.limits.max_logs_block_range.max(1);
                let to = head.min(from.saturating_add(cap - 1));
                f.next = f.next.max(to + 1);
                drop(live);
                let hashes = (from..=to).filter_map(|n| s.store.block(n)).map(|b| json!(b.block.hash));
                Ok(Value::Array(hashes.collect()))
            }
            Kind::Logs(query) => {
                let query = Arc::clone(query);
                f.next = f.next.max(head + 1);
                // The store is read without the lock: other filters' polls
                // do not wait on this one's query.
                drop(live);
                let (lo, hi) = match query.blocks {
                    // A named block is in the past: it gets no new logs.
                    Blocks::Hash(_) => return Ok(json!([])),
                    Blocks::Range { from: start, to: end } => {
                        let lo = match start {
                            End::Number(n) => from.max(n),
                            End::Head | End::Earliest => from,
                        };
                        let hi = match end {
                            End::Number(n) => head.min(n),
                            End::Head => head,
                            // Only blocks at the oldest kept: a poll finds
                            // none newer.
                            End::Earliest => return Ok(json!([])),
                        };
                        (lo, hi)
                    }
                };
                if lo > hi {
                    return Ok(json!([]));
                }
                query.logs(s, lo, hi)
            }
        }
    }

    /// `eth_getFilterLogs`: every log the filter's range holds now.
    fn all_logs(&self, s: &RpcState, id: u128) -> Result<Value, RpcError> {
        let query = {
            let mut live = self.live.lock();
            self.sweep(&mut live);
            match live.get(&id).map(|f| &f.kind) {
                Some(Kind::Logs(q)) => Arc::clone(q),
                // geth: only log filters have logs.
                _ => return Err(not_found()),
            }
        };
        let (from, to) = query.range(s)?;
        query.logs(s, from, to)
    }

    /// `eth_uninstallFilter`: whether the filter existed.
    fn uninstall(&self, id: u128) -> bool {
        let mut live = self.live.lock();
        self.sweep(&mut live);
        live.remove(&id).is_some()
    }
}

/// A filter id parameter. Ids are hex quantities; a string that is not
/// one names no filter.
fn filter_id(p: &Params<'_>) -> Result<Option<u128>, RpcError> {
    let text = p.req(0)?.as_str().ok_or_else(|| RpcError::invalid_arg(0, "expected a filter id"))?;
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    Ok(digits.and_then(|d| u128::from_str_radix(d, 16).ok()))
}

/// The methods served here.
pub(crate) const METHODS: [&str; 6] = [
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
];

/// Serves one of [`METHODS`] for `client`.
pub(crate) fn call(
    s: &RpcState,
    method: &str,
    p: &Params<'_>,
    client: Option<IpAddr>,
) -> Result<Value, RpcError> {
    let filters = &s.filters;
    let head = s.store.head();
    match method {
        "eth_newFilter" => {
            let query = LogQuery::parse(p.req(0)?, 0)?;
            filters.install(Kind::Logs(Arc::new(query)), head + 1, client)
        }
        "eth_newBlockFilter" => filters.install(Kind::Blocks, head + 1, client),
        "eth_newPendingTransactionFilter" => {
            filters.install(Kind::PendingTxs, s.events.pending().next_seq(), client)
        }
        "eth_getFilterChanges" => filters.changes(s, filter_id(p)?.ok_or_else(not_found)?),
        "eth_getFilterLogs" => filters.all_logs(s, filter_id(p)?.ok_or_else(not_found)?),
        "eth_uninstallFilter" => Ok(Value::Bool(filter_id(p)?.is_some_and(|id| filters.uninstall(id)))),
        _ => Err(RpcError::method_not_found(method)),
    }
}
