//! The narrow handle the server reaches the node's pipeline through.
//!
//! The server reads chain and state from the store directly; everything
//! else it needs of the node, submitting a transaction, the next nonce
//! counting in-flight transactions, the fault-injection methods, goes
//! through [`Pipeline`], which the node implements over its actors (and
//! tests and fuzz targets over a pipeline that is closed).

use std::{future::Future, pin::Pin};

use alloy_primitives::{Address, Bytes, B256};
use serde_json::Value;
use sluice_txpool::TxError;

use crate::error::RpcError;

/// A boxed future: the trait's methods return these so it can be used as
/// `dyn Pipeline`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the JSON-RPC server needs of the node behind it.
pub trait Pipeline: Send + Sync {
    /// Admits raw transactions together, in order: the node's own checks
    /// and sender recovery of all of them begin before the first is
    /// awaited, then their nonces are reserved in one step. Each one's
    /// hash, or why it was refused, in order. A JSON-RPC batch's
    /// submissions go through one call, so the batch crosses the pipeline's
    /// hops once, not once per transaction. With `hold_gaps`, a nonce above
    /// the sender's next one is held until the gap fills; without, it is
    /// refused ("nonce too high", as `eth_sendRawTransactionSync` requires).
    fn admit(&self, raws: Vec<Bytes>, hold_gaps: bool) -> BoxFuture<'_, Vec<Result<B256, TxError>>>;

    /// Admits one raw transaction ([`Pipeline::admit`] of one).
    fn admit_one(&self, raw: Bytes, hold_gaps: bool) -> BoxFuture<'_, Result<B256, TxError>> {
        Box::pin(async move {
            let mut results = self.admit(vec![raw], hold_gaps).await;
            results.pop().unwrap_or(Err(TxError::Unavailable("admission stopped")))
        })
    }

    /// The next nonce of `address` counting its admitted, uncommitted
    /// transactions; `None` when it has none in flight.
    fn pending_nonce(&self, address: Address) -> BoxFuture<'_, Result<Option<u64>, RpcError>>;

    /// Transactions waiting: `(pending, queued)`, the mempool's and those
    /// held for a nonce gap (`txpool_status`).
    fn status(&self) -> BoxFuture<'_, Result<(u64, u64), RpcError>>;

    /// The transactions held for a nonce gap (`txpool_content`'s
    /// `queued`; bounded by `mempool.max_future_txs`).
    fn queued(&self) -> BoxFuture<'_, Result<Vec<sluice_messages::RecoveredTx>, RpcError>>;

    /// A `debug_` method (fault injection), or method-not-found.
    fn debug(&self, method: &str, params: Option<&Value>) -> Result<Value, RpcError>;
}
