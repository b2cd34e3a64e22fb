//! sluice's JSON-RPC 2.0 server over HTTP ([`server`]): framing and limits
//! ([`framing`]),
//! methods ([`eth`]; `eth_config` in [`eth_config`]; those that run the
//! EVM in [`calls`], [`simulate`], [`trace`] and [`parity`], on the
//! [`pool`]),
//! parameters ([`params`]), JSON shapes ([`format`]),
//! raw forms, `eth_getAccount` and the `txpool_` views ([`raw`]),
//! Otterscan's `ots_` namespace and `erigon_getHeaderByNumber` ([`ots`]),
//! errors ([`error`]), log queries (`logs`) and polling filters
//! ([`filters`]); over WebSocket on the same port, with `eth_subscribe`
//! ([`ws`]).
//!
//! It depends on no actor system: it reads the store, and reaches the
//! pipeline through the [`Pipeline`] handle the node gives it; committed
//! heights come as [`events::ChainEvents`].

pub mod calls;
pub mod error;
pub mod eth;
pub mod eth_config;
pub mod events;
pub mod filters;
pub mod finalized;
pub mod format;
pub mod framing;
pub(crate) mod http;
pub(crate) mod logs;
pub mod metrics;
#[cfg(feature = "offline")]
pub mod offline;
pub mod ots;
pub mod params;
pub mod parity;
pub mod pipeline;
pub mod pool;
pub mod raw;
pub(crate) mod reply;
pub(crate) mod selector;
pub mod server;
pub mod simulate;
pub mod submission;
pub mod sync;
pub mod trace;
pub mod ws;

pub use pipeline::{BoxFuture, Pipeline};

use std::sync::Arc;

use sluice_config::RpcConfig;
use sluice_executor::ExecConfig;
use sluice_store::Store;
use sluice_txpool::{AdmissionRules, PendingTxs};

use events::ChainEvents;

/// Everything an RPC worker needs, shared by all workers.
pub struct RpcState {
    /// Committed chain and state.
    pub store: Arc<Store>,
    /// The pipeline: submissions and in-flight nonces.
    pub pipeline: Arc<dyn Pipeline>,
    /// In-flight transactions by hash.
    pub pending: Arc<PendingTxs>,
    /// Stateless admission rules (chain id, block gas limit).
    pub rules: AdmissionRules,
    /// Execution rules for `eth_call` and `eth_estimateGas`.
    pub exec: ExecConfig,
    /// Limits.
    pub limits: RpcConfig,
    /// Suggested priority fee (wei).
    pub suggested_tip_wei: u128,
    /// Committed heights and shutdown, for WebSocket subscriptions.
    pub events: ChainEvents,
    /// Installed polling filters (`eth_newFilter` and the rest).
    pub filters: filters::Filters,
    /// What `eth_syncing` answers (a validator catching up).
    pub sync: Arc<sync::SyncStatus>,
    /// The threads that run calls executing the EVM for a caller.
    pub calls: Arc<pool::CallPool>,
    /// The finalized-block feed (a network's nodes publish to it; a single
    /// node's stays empty).
    pub finalized: Arc<finalized::FinalizedFeed>,
}

/// The priority fee `eth_maxPriorityFeePerGas` suggests (wei): 1 gwei.
/// The base fee is fixed, so a tip only orders transactions in a block.
pub const SUGGESTED_TIP_WEI: u128 = 1_000_000_000;

impl RpcState {
    /// The server's state over `store` and `pipeline`, with polling
    /// filters sized from `limits`, subscriptions fed from `events`, and
    /// nothing yet in flight (no pending transactions, not syncing). The
    /// one constructor: the node, its offline double and tests use it.
    pub fn new(
        store: Arc<Store>,
        pipeline: Arc<dyn Pipeline>,
        rules: AdmissionRules,
        exec: ExecConfig,
        limits: RpcConfig,
        events: ChainEvents,
    ) -> RpcState {
        RpcState {
            filters: filters::Filters::new(&limits),
            finalized: Arc::new(finalized::FinalizedFeed::new(
                limits.finalized_feed_blocks,
                limits.finalized_feed_max_subscribers,
            )),
            calls: Arc::new(pool::CallPool::new(
                limits.call_workers(),
                limits.call_queue_calls,
                if limits.call_workers_sched_idle {
                    pool::Priority::Idle
                } else {
                    pool::Priority::Nice(limits.call_workers_nice)
                },
            )),
            store,
            pipeline,
            pending: Arc::default(),
            rules,
            exec,
            limits,
            suggested_tip_wei: SUGGESTED_TIP_WEI,
            events,
            sync: Arc::default(),
        }
    }
}

/// Shared handle.
pub type SharedState = Arc<RpcState>;

/// What a call knows of the request it came in: who sent it (for the
/// per-client caps) and when the request's time runs out.
#[derive(Debug, Clone, Copy)]
pub struct CallContext {
    /// The client's address; `None` in process (fuzzing, tests).
    pub client: Option<std::net::IpAddr>,
    /// When the request's time (`rpc.batch_timeout_ms`) runs out.
    pub until: std::time::Instant,
}
