//! JSON-RPC errors: a standard code and a geth-style message.

use alloy_primitives::Bytes;
use serde_json::{json, Value};

/// Parse error: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Parameters missing or of the wrong type.
pub const INVALID_PARAMS: i64 = -32602;
/// A fault inside the node.
pub const INTERNAL_ERROR: i64 = -32603;
/// Generic server-side refusal (geth's invalid input).
pub const SERVER_ERROR: i64 = -32000;
/// The request's time ran out before this call was run (geth's batch
/// timeout).
pub const REQUEST_TIMED_OUT: i64 = -32002;
/// A limit was exceeded (response size, log range).
pub const LIMIT_EXCEEDED: i64 = -32005;
/// Execution reverted (with the revert data).
pub const EXECUTION_REVERTED: i64 = 3;
/// A block, its receipts or logs were pruned (geth's
/// `PrunedHistoryError`, EIP-4444's code).
pub const PRUNED_HISTORY: i64 = 4444;

/// An error answer to one JSON-RPC call.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// The message, worded as geth words it.
    pub message: String,
    /// Extra data (the revert data of a reverted call).
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    /// `invalid argument N: reason`, as geth reports bad parameters.
    pub fn invalid_arg(index: usize, reason: impl std::fmt::Display) -> Self {
        RpcError::new(INVALID_PARAMS, format!("invalid argument {index}: {reason}"))
    }

    /// The method does not exist.
    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(METHOD_NOT_FOUND, format!("the method {method} does not exist/is not available"))
    }

    /// A reverted call: code 3, the revert reason in the message, the raw
    /// revert data as `data` (what ethers and viem decode).
    pub fn reverted(output: &Bytes) -> Self {
        RpcError {
            code: EXECUTION_REVERTED,
            message: sluice_executor::revert_message(output),
            data: Some(Value::String(output.to_string())),
        }
    }

    /// The JSON error object.
    pub fn to_json(&self) -> Value {
        match &self.data {
            Some(data) => json!({"code": self.code, "message": self.message, "data": data}),
            None => json!({"code": self.code, "message": self.message}),
        }
    }
}

impl From<sluice_txpool::TxError> for RpcError {
    fn from(e: sluice_txpool::TxError) -> Self {
        RpcError::new(e.rpc_code(), e.to_string())
    }
}

impl From<sluice_store::StoreError> for RpcError {
    fn from(e: sluice_store::StoreError) -> Self {
        match e {
            // The caller asked for pruned state: geth answers -32000.
            sluice_store::StoreError::StateUnavailable { .. } => RpcError::new(SERVER_ERROR, e.to_string()),
            // A pruned block: geth's code, its message first.
            sluice_store::StoreError::HistoryPruned { .. } => RpcError::new(PRUNED_HISTORY, e.to_string()),
            e => RpcError::new(INTERNAL_ERROR, e.to_string()),
        }
    }
}

impl From<sluice_executor::ExecError> for RpcError {
    fn from(e: sluice_executor::ExecError) -> Self {
        match e {
            sluice_executor::ExecError::Reverted { output } => RpcError::reverted(&output),
            other => RpcError::new(SERVER_ERROR, other.to_string()),
        }
    }
}
