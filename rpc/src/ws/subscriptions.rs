//! A connection's subscriptions: what each delivers ([`Kind`]), its id,
//! the per-connection limit (`rpc.ws_max_subscriptions_per_connection`),
//! and the calls that make and remove them (`eth_subscribe`,
//! `eth_unsubscribe`, `consensus_subscribe`). The feeds each kind reads are
//! read in `pace.rs`.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, OnceLock,
};

use serde_json::Value;
use sluice_messages::LogCriteria;

use super::WS_SUBSCRIPTIONS;
use crate::{
    error::{RpcError, INVALID_PARAMS, LIMIT_EXCEEDED, SERVER_ERROR},
    logs::log_criteria,
    params::Params,
};

/// What a subscription delivers.
pub(super) enum Kind {
    /// Every committed block's header.
    NewHeads,
    /// Every matching log, in block and log order.
    Logs(LogCriteria),
    /// Every transaction entering the mempool: its hash, or with `full`
    /// the transaction object (geth's `["newPendingTransactions", true]`).
    NewPendingTransactions {
        /// Whole transactions rather than hashes.
        full: bool,
    },
    /// Every finalized block with its certificate
    /// (`consensus_subscribe(["finalized", from?])`, see
    /// [`crate::finalized`]), from the height in `cursor`; holds one of the
    /// feed's subscriber slots.
    Finalized(#[allow(dead_code)] crate::finalized::Subscriber),
}

/// One `eth_subscribe`.
pub(super) struct Subscription {
    /// The id notifications carry.
    pub(super) id: String,
    /// What it delivers.
    pub(super) kind: Kind,
    /// The first block it reports: the one after the head when it was made
    /// (`u64::MAX` for pending transactions, which follow `cursor`).
    pub(super) first_block: u64,
    /// Pending transactions: the next feed sequence number to send; the
    /// finalized feed: the next height.
    pub(super) cursor: u64,
}

/// A connection's subscriptions.
pub(super) struct Subscriptions {
    /// Live subscriptions, in the order they were made.
    pub(super) list: Vec<Subscription>,
    /// `rpc.ws_max_subscriptions_per_connection`.
    pub(super) limit: usize,
    /// `rpc.finalized_feed_max_subscribers` (for the message).
    pub(super) feed_limit: usize,
}

impl Subscriptions {
    /// `eth_subscribe`: `["newHeads"]` or `["logs", {address, topics}]`.
    pub(super) fn subscribe(
        &mut self,
        params: Option<&Value>,
        (head, pending): (u64, u64),
    ) -> Result<Value, RpcError> {
        let p = Params::new(params)?;
        let name =
            p.req(0)?.as_str().ok_or_else(|| RpcError::invalid_arg(0, "expected a subscription name"))?;
        let kind = match name {
            "newHeads" => Kind::NewHeads,
            "newPendingTransactions" => Kind::NewPendingTransactions {
                full: match p.opt(1) {
                    None => false,
                    Some(v) => v.as_bool().ok_or_else(|| RpcError::invalid_arg(1, "expected a boolean"))?,
                },
            },
            "logs" => match p.opt(1) {
                None => Kind::Logs(LogCriteria::default()),
                Some(filter) => {
                    let o = filter
                        .as_object()
                        .ok_or_else(|| RpcError::invalid_arg(1, "expected a filter object"))?;
                    Kind::Logs(log_criteria(o, 1)?)
                }
            },
            other => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("no \"{other}\" subscription in eth namespace"),
                ))
            }
        };
        if self.list.len() >= self.limit {
            return Err(RpcError::new(
                LIMIT_EXCEEDED,
                format!("too many subscriptions on this connection: limit {}", self.limit),
            ));
        }
        let id = subscription_id();
        let first_block = match kind {
            Kind::NewPendingTransactions { .. } => u64::MAX,
            _ => head + 1,
        };
        self.list.push(Subscription { id: id.clone(), kind, first_block, cursor: pending });
        metrics::gauge!(WS_SUBSCRIPTIONS).increment(1.0);
        Ok(Value::String(id))
    }

    /// `consensus_subscribe`: `["finalized"]` (from the next finalized
    /// block) or `["finalized", from]` (from height `from`, if the feed
    /// still keeps it: a follower resuming after its committed head).
    pub(super) fn subscribe_finalized(
        &mut self,
        params: Option<&Value>,
        feed: &Arc<crate::finalized::FinalizedFeed>,
    ) -> Result<Value, RpcError> {
        let p = Params::new(params)?;
        let name =
            p.req(0)?.as_str().ok_or_else(|| RpcError::invalid_arg(0, "expected a subscription name"))?;
        if name != "finalized" {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("no \"{name}\" subscription in consensus namespace"),
            ));
        }
        let from = p.opt(1).map(|_| p.u64(1)).transpose()?.unwrap_or(feed.latest() + 1);
        if self.list.len() >= self.limit {
            return Err(RpcError::new(
                LIMIT_EXCEEDED,
                format!("too many subscriptions on this connection: limit {}", self.limit),
            ));
        }
        let slot = feed.subscribe().ok_or_else(|| {
            RpcError::new(
                LIMIT_EXCEEDED,
                format!(
                    "too many finalized-feed subscribers: limit {} (rpc.finalized_feed_max_subscribers)",
                    self.feed_limit
                ),
            )
        })?;
        let id = subscription_id();
        self.list.push(Subscription {
            id: id.clone(),
            kind: Kind::Finalized(slot),
            first_block: u64::MAX,
            cursor: from,
        });
        metrics::gauge!(WS_SUBSCRIPTIONS).increment(1.0);
        Ok(Value::String(id))
    }

    /// `eth_unsubscribe`: `true`, or geth's "subscription not found".
    pub(super) fn unsubscribe(&mut self, params: Option<&Value>) -> Result<Value, RpcError> {
        let p = Params::new(params)?;
        let id = p.req(0)?.as_str().ok_or_else(|| RpcError::invalid_arg(0, "expected a subscription id"))?;
        let i = self
            .list
            .iter()
            .position(|s| s.id.eq_ignore_ascii_case(id))
            .ok_or_else(|| RpcError::new(SERVER_ERROR, "subscription not found"))?;
        self.list.remove(i);
        metrics::gauge!(WS_SUBSCRIPTIONS).decrement(1.0);
        Ok(Value::Bool(true))
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        metrics::gauge!(WS_SUBSCRIPTIONS).decrement(self.list.len() as f64);
    }
}

/// A random-looking id, unique in this process: `0x` and 32 hex digits, as
/// geth's.
pub(super) fn subscription_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SALT: OnceLock<Vec<u8>> = OnceLock::new();
    let salt = SALT.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let mut s = nanos.to_be_bytes().to_vec();
        s.extend_from_slice(&std::process::id().to_be_bytes());
        s
    });
    let mut input = salt.clone();
    input.extend_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    let digest = sluice_messages::keccak256(&input);
    format!("0x{}", alloy_primitives::hex::encode(&digest[..16]))
}
