//! A closed pipeline (feature `offline`): what the fuzz targets and the
//! JSON-RPC layer's tests answer request bodies with, in process and
//! without an actor system. `eth_sendRawTransaction` runs the stateless
//! checks and sender recovery, as the node's recovery stage does, then
//! answers "admission stopped"; every other pipeline call answers
//! "admission stopped" too, and `debug_` methods are not found.

use std::sync::Arc;

use alloy_primitives::{Address, Bytes, B256};
use serde_json::Value;
use sluice_config::RpcConfig;
use sluice_executor::ExecConfig;
use sluice_messages::RecoveredTx;
use sluice_store::Store;

use crate::events::ChainEvents;
use sluice_txpool::{admit_stateless, AdmissionRules, TxError};

use crate::{
    error::{RpcError, SERVER_ERROR},
    pipeline::{BoxFuture, Pipeline},
    RpcState,
};

/// Mempool entries the closed pipeline's pending feed keeps (none are ever
/// published to it).
const PENDING_FEED_TXS: usize = 1024;

/// A pipeline that checks what it is offered and admits nothing.
pub struct ClosedPipeline {
    rules: AdmissionRules,
}

impl ClosedPipeline {
    /// A closed pipeline checking submissions against `rules`.
    pub fn new(rules: AdmissionRules) -> Self {
        ClosedPipeline { rules }
    }
}

fn stopped() -> RpcError {
    RpcError::new(SERVER_ERROR, "admission stopped")
}

impl Pipeline for ClosedPipeline {
    fn admit(&self, raws: Vec<Bytes>, _hold_gaps: bool) -> BoxFuture<'_, Vec<Result<B256, TxError>>> {
        let results = raws
            .into_iter()
            .map(|raw| {
                admit_stateless(raw, &self.rules)?;
                Err(TxError::Unavailable("admission stopped"))
            })
            .collect();
        Box::pin(std::future::ready(results))
    }

    fn pending_nonce(&self, _address: Address) -> BoxFuture<'_, Result<Option<u64>, RpcError>> {
        Box::pin(std::future::ready(Err(stopped())))
    }

    fn status(&self) -> BoxFuture<'_, Result<(u64, u64), RpcError>> {
        Box::pin(std::future::ready(Err(stopped())))
    }

    fn queued(&self) -> BoxFuture<'_, Result<Vec<RecoveredTx>, RpcError>> {
        Box::pin(std::future::ready(Err(stopped())))
    }

    fn debug(&self, method: &str, _params: Option<&Value>) -> Result<Value, RpcError> {
        Err(RpcError::method_not_found(method))
    }
}

/// A JSON-RPC state over `store` with a [`ClosedPipeline`] behind it.
pub fn offline_state(
    store: Arc<Store>,
    rules: AdmissionRules,
    exec: ExecConfig,
    limits: RpcConfig,
) -> Arc<RpcState> {
    let pipeline = Arc::new(ClosedPipeline::new(rules.clone()));
    let events = ChainEvents::new(store.head(), PENDING_FEED_TXS);
    Arc::new(RpcState::new(store, pipeline, rules, exec, limits, events))
}
