//! The JSON-RPC server's metrics: their names, and [`register`], which
//! describes them and creates each family at zero (the node installs the
//! recorder and exports them; this crate records).

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};

pub use crate::ws::{WS_CONNECTIONS, WS_DROPPED, WS_NOTIFICATIONS, WS_REFUSED, WS_SUBSCRIPTIONS};

/// JSON-RPC calls by method.
pub const RPC_REQUESTS: &str = "sluice_rpc_requests_total";
/// JSON-RPC call latency by method.
pub const RPC_SECONDS: &str = "sluice_rpc_request_seconds";
/// JSON-RPC errors by code.
pub const RPC_ERRORS: &str = "sluice_rpc_errors_total";
/// HTTP requests refused for taking too long, by stage (`read`).
pub const HTTP_TIMED_OUT: &str = "sluice_http_timed_out_total";
/// Calls running on the call pool's workers.
pub const RPC_CALLS_RUNNING: &str = "sluice_rpc_calls_running";
/// Calls waiting for a call worker.
pub const RPC_CALLS_QUEUED: &str = "sluice_rpc_calls_queued";
/// Calls refused because the call pool was full.
pub const RPC_CALLS_REFUSED: &str = "sluice_rpc_calls_refused_total";
/// Calls answered at their deadline (`execution aborted`).
pub const RPC_CALLS_TIMED_OUT: &str = "sluice_rpc_calls_timed_out_total";

/// Describes the server's metrics to the installed recorder and creates
/// every family at zero, so a fresh node's dashboards show 0 rather than
/// "No data" (families with a label get one representative series).
/// Called once, after the recorder is installed.
pub fn register() {
    describe_counter!(RPC_REQUESTS, "JSON-RPC calls by method");
    describe_histogram!(RPC_SECONDS, Unit::Seconds, "JSON-RPC call latency by method");
    describe_counter!(RPC_ERRORS, "JSON-RPC error answers by code");
    describe_counter!(HTTP_TIMED_OUT, "HTTP requests whose body did not arrive within rpc.read_timeout_ms");
    describe_gauge!(RPC_CALLS_RUNNING, "Calls running on the call pool (eth_call, estimates, traces)");
    describe_gauge!(RPC_CALLS_QUEUED, "Calls waiting for a call worker");
    describe_counter!(RPC_CALLS_REFUSED, "Calls refused with -32005: every call worker busy, the queue full");
    describe_counter!(RPC_CALLS_TIMED_OUT, "Calls answered at their deadline (execution aborted)");
    describe_gauge!(WS_CONNECTIONS, "Open WebSocket connections");
    describe_gauge!(WS_SUBSCRIPTIONS, "Live WebSocket subscriptions, across connections");
    describe_counter!(WS_NOTIFICATIONS, "WebSocket subscription notifications sent");
    describe_counter!(WS_REFUSED, "WebSocket handshakes refused at rpc.ws_max_connections");
    describe_counter!(WS_DROPPED, "WebSocket connections the node closed, by reason");

    metrics::counter!(RPC_REQUESTS, "method" => "eth_blockNumber").increment(0);
    let _ = metrics::histogram!(RPC_SECONDS, "method" => "eth_blockNumber");
    metrics::counter!(RPC_ERRORS, "code" => "-32000").increment(0);
    metrics::counter!(HTTP_TIMED_OUT, "stage" => "read").increment(0);
    metrics::gauge!(RPC_CALLS_RUNNING).set(0.0);
    metrics::gauge!(RPC_CALLS_QUEUED).set(0.0);
    metrics::counter!(RPC_CALLS_REFUSED).increment(0);
    metrics::counter!(RPC_CALLS_TIMED_OUT).increment(0);
    metrics::gauge!(WS_CONNECTIONS).set(0.0);
    metrics::gauge!(WS_SUBSCRIPTIONS).set(0.0);
    metrics::counter!(WS_NOTIFICATIONS).increment(0);
    metrics::counter!(WS_REFUSED).increment(0);
    for reason in ["lagging", "send_timeout", "silent", "protocol"] {
        metrics::counter!(WS_DROPPED, "reason" => reason).increment(0);
    }
}
