//! The JSON-RPC server's metric names (the node describes and exports
//! them; this crate only records).

/// JSON-RPC calls by method.
pub const RPC_REQUESTS: &str = "sluice_rpc_requests_total";
/// JSON-RPC call latency by method.
pub const RPC_SECONDS: &str = "sluice_rpc_request_seconds";
/// JSON-RPC errors by code.
pub const RPC_ERRORS: &str = "sluice_rpc_errors_total";
