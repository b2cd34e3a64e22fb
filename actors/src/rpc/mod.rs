//! JSON-RPC 2.0 over HTTP: framing and limits ([`server`]), methods
//! ([`eth`]), parameters ([`params`]), JSON shapes ([`format`]), errors
//! ([`error`]), log queries (`logs`) and polling filters ([`filters`]);
//! over WebSocket on the same port, with `eth_subscribe` ([`ws`]).

pub mod error;
pub mod eth;
pub mod filters;
pub mod format;
pub(crate) mod logs;
pub mod params;
pub mod server;
pub mod ws;

use std::sync::{atomic::AtomicBool, Arc};

use sluice_config::RpcConfig;
use sluice_executor::ExecConfig;
use sluice_store::Store;
use sluice_txpool::{AdmissionRules, PoolCounters};

use crate::{
    events::ChainEvents,
    mailbox::{mailbox, MailboxSender},
    pending::PendingTxs,
    protocol::NonceMsg,
    recovery::Recovery,
};

/// Everything an RPC worker needs, shared by all workers.
pub struct RpcState {
    /// Committed chain and state.
    pub store: Arc<Store>,
    /// The nonce actor's mailbox: the entry to the pipeline.
    pub nonce: MailboxSender<NonceMsg>,
    /// In-flight transactions by hash.
    pub pending: Arc<PendingTxs>,
    /// Stateless admission rules.
    pub rules: AdmissionRules,
    /// Execution rules for `eth_call` and `eth_estimateGas`.
    pub exec: ExecConfig,
    /// Limits.
    pub limits: RpcConfig,
    /// Suggested priority fee (wei).
    pub suggested_tip_wei: u128,
    /// False once shutdown began: new transactions are refused.
    pub accepting: AtomicBool,
    /// Committed heights and shutdown, for WebSocket subscriptions.
    pub events: ChainEvents,
    /// Installed polling filters (`eth_newFilter` and the rest).
    pub filters: filters::Filters,
    /// Where submitted transactions are checked and their senders recovered.
    pub recovery: crate::recovery::Recovery,
    /// The mempool's occupancy: a full pool refuses submissions before
    /// their senders are recovered.
    pub pool: Arc<sluice_txpool::PoolCounters>,
}

impl RpcState {
    /// A state with no pipeline behind it, for answering request bodies in
    /// process (the fuzz targets, tests of the JSON-RPC layer): the nonce
    /// mailbox is closed, so `eth_sendRawTransaction` runs every check,
    /// sender recovery included, then answers "admission stopped".
    pub fn offline(
        store: Arc<Store>,
        rules: AdmissionRules,
        exec: ExecConfig,
        limits: RpcConfig,
    ) -> std::io::Result<Arc<RpcState>> {
        let (nonce, _closed) = mailbox::<NonceMsg>("nonce", 1);
        let (recovery, _probe) = Recovery::start(1, 64, rules.clone())?;
        Ok(Arc::new(RpcState {
            store,
            nonce,
            pending: Arc::default(),
            rules,
            exec,
            filters: filters::Filters::new(&limits),
            limits,
            suggested_tip_wei: 1_000_000_000,
            accepting: AtomicBool::new(true),
            events: ChainEvents::new(0),
            recovery,
            pool: Arc::new(PoolCounters::new(1000, 1 << 20)),
        }))
    }
}

/// Shared handle.
pub type SharedState = Arc<RpcState>;
