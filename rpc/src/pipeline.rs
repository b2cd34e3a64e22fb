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

/// A submission whose admission has begun; awaiting it finishes it: the
/// transaction's hash once its nonce is reserved, or why it was refused.
pub type Admitting<'a> = BoxFuture<'a, Result<B256, TxError>>;

/// What the JSON-RPC server needs of the node behind it.
pub trait Pipeline: Send + Sync {
    /// Starts admitting the raw transaction `raw` (the node's own checks,
    /// then sender recovery queued, not awaited) and returns what finishes
    /// it. A batch begins all its submissions before it finishes the first,
    /// so their senders are recovered in parallel while the calls are
    /// answered in order. With `hold_gaps`, a nonce above the sender's next
    /// one is held until the gap fills; without, it is refused ("nonce too
    /// high", as `eth_sendRawTransactionSync` requires).
    fn begin(&self, raw: Bytes, hold_gaps: bool) -> BoxFuture<'_, Admitting<'_>>;

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
