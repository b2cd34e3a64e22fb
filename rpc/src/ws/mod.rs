//! JSON-RPC over WebSocket, on the HTTP port: a `GET /` with
//! `Upgrade: websocket` becomes a connection that answers every method
//! through the same framing and limits as HTTP (`framing::respond`, then
//! [`eth::dispatch`](super::eth::dispatch)) and serves `eth_subscribe` /
//! `eth_unsubscribe` for `newHeads`, `logs` and `newPendingTransactions`, as
//! geth does (the last from the pending feed, `crate::events::PendingFeed`),
//! and `consensus_subscribe(["finalized", from?])`, the finalized-block
//! feed followers follow ([`crate::finalized`]).
//!
//! Built on `actix-ws`, not `actix-web-actors` (deprecated): a connection is
//! one async task that owns its session, so every queue and timeout is
//! explicit here rather than hidden in an actor mailbox (actix mailboxes do
//! not bound their senders).
//!
//! ```text
//!  client frames ───▶ respond (eth_subscribe here, the rest eth::dispatch) ──▶ reply ────────┐
//!  committed height ─▶ next blocks read from the store, in order ──▶ notifications ─────────┼─▶ session ─▶ socket
//!  (watch: 1 value)                                                                          │  (<= 32 frames)
//!  ping timer ───────▶ ping; the peer sent nothing for a whole interval: dropped ────────────┘
//! ```
//!
//! Limits, each from config: open connections (`rpc.ws_max_connections`;
//! the handshake past it gets HTTP 503), subscriptions per connection
//! (`rpc.ws_max_subscriptions_per_connection`; -32005 past it), how far a
//! subscriber may fall behind the head (`rpc.ws_max_lag_blocks`), how long a
//! message may wait for room towards the socket (`rpc.ws_send_timeout_ms`)
//! and how long a silent peer is kept (`rpc.ws_ping_interval_ms`). Incoming
//! messages are bounded by `rpc.max_request_body_bytes` (close code 1009
//! past it), batches and replies by the HTTP limits.
//!
//! Nothing is buffered for a slow consumer: store commit publishes only the
//! committed height ([`ChainEvents`](crate::events::ChainEvents)); each
//! connection reads the blocks it has not delivered yet from the store and
//! queues at most actix-ws's 32 frames towards the socket. A connection that
//! falls behind or stops reading is disconnected.
//!
//! The module, by job:
//! - `mod.rs`: the upgrade (`GET /`), its origin check, and the metric
//!   names.
//! - `slots.rs`: [`Connections`], the open connections counted against
//!   `rpc.ws_max_connections` and `rpc.ws_max_connections_per_client`.
//! - `connection.rs`: one connection's session loop, the requests it
//!   answers (subscriptions here, the rest through `framing::respond`), why
//!   it ends and the close frame it then sends.
//! - `subscriptions.rs`: subscription kinds, their ids, the
//!   per-connection limit, `eth_subscribe` / `eth_unsubscribe` and
//!   `consensus_subscribe`.
//! - `pace.rs`: delivering notifications from the feeds (committed blocks,
//!   the pending feed, the finalized feed) with the backpressure that
//!   bounds a slow consumer: the lag limit and the send timeout.
//! - `tests.rs`: the unit tests.

mod connection;
mod pace;
mod slots;
mod subscriptions;
#[cfg(test)]
mod tests;

pub use slots::Connections;

use std::time::Duration;

use actix_web::{http::header, web, HttpRequest, HttpResponse};

use self::{
    connection::Connection,
    slots::{acquire, Full},
    subscriptions::Subscriptions,
};
use super::RpcState;

/// Open WebSocket connections.
pub const WS_CONNECTIONS: &str = "sluice_ws_connections";
/// Live subscriptions, across connections.
pub const WS_SUBSCRIPTIONS: &str = "sluice_ws_subscriptions";
/// Subscription notifications sent.
pub const WS_NOTIFICATIONS: &str = "sluice_ws_notifications_total";
/// Handshakes refused at `rpc.ws_max_connections`.
pub const WS_REFUSED: &str = "sluice_ws_refused_total";
/// Connections the node closed, by `reason`: `lagging`, `send_timeout`,
/// `silent`, `protocol`, `shutdown`.
pub const WS_DROPPED: &str = "sluice_ws_dropped_total";

/// `GET /`: a WebSocket upgrade, or one line saying what this port serves.
pub(crate) async fn get(
    req: HttpRequest,
    body: web::Payload,
    state: web::Data<RpcState>,
    connections: web::Data<Connections>,
) -> HttpResponse {
    let upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if !upgrade {
        return HttpResponse::Ok().body("sluice JSON-RPC: POST JSON here, or open a WebSocket\n");
    }
    let limits = &state.limits;
    // Browsers send the page's origin; other clients usually none. CORS
    // does not cover WebSocket, so the origin is checked here (geth's
    // --ws.origins).
    if let Some(origin) = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        if !limits.cors_allows(origin) {
            return HttpResponse::Forbidden()
                .body(format!("origin {origin} not allowed (rpc.cors_origins)\n"));
        }
    }
    let client = req.peer_addr().map(|a| a.ip());
    let slot = match acquire(&connections, limits, client) {
        Ok(slot) => slot,
        Err(full) => {
            metrics::counter!(WS_REFUSED).increment(1);
            let why = match full {
                Full::Node(n) => format!("too many WebSocket connections: limit {n}\n"),
                Full::Client(n) => format!(
                    "too many WebSocket connections from this client: limit {n} (rpc.ws_max_connections_per_client)\n"
                ),
            };
            return HttpResponse::ServiceUnavailable().body(why);
        }
    };
    let (response, session, stream) = match actix_ws::handle(&req, body) {
        Ok(parts) => parts,
        Err(e) => return e.error_response(),
    };
    let stream = stream
        .max_frame_size(limits.max_request_body_bytes)
        .aggregate_continuations()
        .max_continuation_size(limits.max_request_body_bytes);
    let send_timeout = Duration::from_millis(limits.ws_send_timeout_ms);
    let subs = Subscriptions {
        list: Vec::new(),
        limit: limits.ws_max_subscriptions_per_connection,
        feed_limit: limits.finalized_feed_max_subscribers,
    };
    let state = state.into_inner();
    let connection =
        Connection { delivered: *state.events.heads().borrow(), send_timeout, subs, state, client };
    actix_web::rt::spawn(connection.run(session, stream, slot));
    response
}
