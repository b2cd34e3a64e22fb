//! JSON-RPC over WebSocket, on the HTTP port: a `GET /` with
//! `Upgrade: websocket` becomes a connection that answers every method
//! through the same framing and limits as HTTP (`framing::respond`, then
//! [`eth::dispatch`](super::eth::dispatch)) and serves `eth_subscribe` /
//! `eth_unsubscribe` for `newHeads`, `logs` and `newPendingTransactions`, as
//! geth does (the last from the pending feed, `sluice_store::PendingFeed`),
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
//! committed height ([`ChainEvents`](sluice_store::ChainEvents)); each
//! connection reads the blocks it has not delivered yet from the store and
//! queues at most actix-ws's 32 frames towards the socket. A connection that
//! falls behind or stops reading is disconnected.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::Duration,
};

use actix_web::{http::header, web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, AggregatedMessageStream, CloseCode, CloseReason, ProtocolError, Session};
use serde_json::Value;
use sluice_messages::LogCriteria;
use sluice_store::{LogEntry, StoredBlock};
use tokio::{sync::watch, time::MissedTickBehavior};

use super::{
    error::{RpcError, INVALID_PARAMS, LIMIT_EXCEEDED, SERVER_ERROR},
    format, framing,
    logs::log_criteria,
    params::Params,
    RpcState, SharedState,
};

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

/// Open WebSocket connections, counted across HTTP workers, in all and
/// per client address.
#[derive(Debug, Default)]
pub struct Connections {
    open: parking_lot::Mutex<Open>,
}

/// What [`Connections`] counts.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    /// Per client address; an address with none is removed.
    by_client: HashMap<IpAddr, usize>,
}

/// One counted connection, released when dropped.
struct Slot(web::Data<Connections>, Option<IpAddr>);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.0.open.lock();
        open.total -= 1;
        if let Some(ip) = self.1 {
            if let Some(n) = open.by_client.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    open.by_client.remove(&ip);
                }
            }
        }
        metrics::gauge!(WS_CONNECTIONS).decrement(1.0);
    }
}

/// Why a handshake found no slot.
enum Full {
    /// `rpc.ws_max_connections` open.
    Node(usize),
    /// `rpc.ws_max_connections_per_client` open from this address.
    Client(usize),
}

/// A slot for a connection from `client`, within both limits.
fn acquire(
    connections: &web::Data<Connections>,
    limits: &sluice_config::RpcConfig,
    client: Option<IpAddr>,
) -> Result<Slot, Full> {
    let mut open = connections.open.lock();
    if open.total >= limits.ws_max_connections {
        return Err(Full::Node(limits.ws_max_connections));
    }
    if let Some(ip) = client {
        let n = open.by_client.entry(ip).or_default();
        if *n >= limits.ws_max_connections_per_client {
            return Err(Full::Client(limits.ws_max_connections_per_client));
        }
        *n += 1;
    }
    open.total += 1;
    metrics::gauge!(WS_CONNECTIONS).increment(1.0);
    Ok(Slot(connections.clone(), client))
}

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

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The client sent a close frame.
    ClientClosed,
    /// The socket is gone.
    Gone,
    /// A malformed or oversized frame.
    Protocol(CloseCode),
    /// More than `ws_max_lag_blocks` behind the head.
    Lagging,
    /// A message found no room towards the socket within `ws_send_timeout_ms`.
    SendTimeout,
    /// Nothing from the peer, not even a pong, for a whole ping interval.
    Silent,
    /// The node is stopping.
    Shutdown,
}

impl End {
    /// The `reason` label when the node closed the connection.
    fn dropped(self) -> Option<&'static str> {
        match self {
            End::ClientClosed | End::Gone => None,
            End::Protocol(_) => Some("protocol"),
            End::Lagging => Some("lagging"),
            End::SendTimeout => Some("send_timeout"),
            End::Silent => Some("silent"),
            End::Shutdown => Some("shutdown"),
        }
    }
}

/// What a subscription delivers.
enum Kind {
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
struct Subscription {
    /// The id notifications carry.
    id: String,
    /// What it delivers.
    kind: Kind,
    /// The first block it reports: the one after the head when it was made
    /// (`u64::MAX` for pending transactions, which follow `cursor`).
    first_block: u64,
    /// Pending transactions: the next feed sequence number to send; the
    /// finalized feed: the next height.
    cursor: u64,
}

/// A connection's subscriptions.
struct Subscriptions {
    list: Vec<Subscription>,
    /// `rpc.ws_max_subscriptions_per_connection`.
    limit: usize,
    /// `rpc.finalized_feed_max_subscribers` (for the message).
    feed_limit: usize,
}

impl Subscriptions {
    /// `eth_subscribe`: `["newHeads"]` or `["logs", {address, topics}]`.
    fn subscribe(&mut self, params: Option<&Value>, (head, pending): (u64, u64)) -> Result<Value, RpcError> {
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
    fn subscribe_finalized(
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
    fn unsubscribe(&mut self, params: Option<&Value>) -> Result<Value, RpcError> {
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
fn subscription_id() -> String {
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

/// One WebSocket connection.
struct Connection {
    state: SharedState,
    subs: Subscriptions,
    /// The last height whose notifications were sent (or that had no
    /// subscriber).
    delivered: u64,
    /// `rpc.ws_send_timeout_ms`.
    send_timeout: Duration,
    /// The client's address (its filters count against its cap).
    client: Option<IpAddr>,
}

impl Connection {
    /// Serves the connection until the client leaves, breaks a limit, or the
    /// node stops.
    async fn run(mut self, mut session: Session, mut stream: AggregatedMessageStream, slot: Slot) {
        let mut heads = self.state.events.heads();
        let mut closing = self.state.events.closing();
        let mut admitted = self.state.events.pending().watch();
        let mut finalized = self.state.finalized.heads();
        let interval = Duration::from_millis(self.state.limits.ws_ping_interval_ms);
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Whether the peer sent any frame since the last ping.
        let mut heard = true;
        let end = loop {
            tokio::select! {
                msg = stream.recv() => {
                    heard = true;
                    let step = match msg {
                        None => Err(End::Gone),
                        Some(Err(e)) => Err(protocol_end(&e)),
                        Some(Ok(AggregatedMessage::Text(text))) => self.request(&mut session, text.as_bytes()).await,
                        Some(Ok(AggregatedMessage::Binary(bytes))) => self.request(&mut session, &bytes).await,
                        Some(Ok(AggregatedMessage::Ping(p))) => timed(self.send_timeout, session.pong(&p)).await,
                        Some(Ok(AggregatedMessage::Pong(_))) => Ok(()),
                        Some(Ok(AggregatedMessage::Close(_))) => Err(End::ClientClosed),
                    };
                    if let Err(end) = step {
                        break end;
                    }
                }
                changed = heads.changed() => {
                    if changed.is_err() {
                        break End::Shutdown;
                    }
                    if let Err(end) = self.deliver(&mut session, &mut heads).await {
                        break end;
                    }
                }
                changed = admitted.changed() => {
                    if changed.is_err() {
                        break End::Shutdown;
                    }
                    if let Err(end) = self.deliver_pending(&mut session).await {
                        break end;
                    }
                }
                changed = finalized.changed() => {
                    if changed.is_err() {
                        break End::Shutdown;
                    }
                    if let Err(end) = self.deliver_finalized(&mut session).await {
                        break end;
                    }
                }
                _ = closing.wait_for(|c| *c) => break End::Shutdown,
                _ = ping.tick() => {
                    if !heard {
                        break End::Silent;
                    }
                    heard = false;
                    if let Err(end) = timed(self.send_timeout, session.ping(b"")).await {
                        break end;
                    }
                }
            }
        };
        if let Some(reason) = end.dropped() {
            metrics::counter!(WS_DROPPED, "reason" => reason).increment(1);
            tracing::info!(reason, "WebSocket connection dropped by the node");
        }
        let close = match end {
            End::ClientClosed => Some(CloseReason::from(CloseCode::Normal)),
            End::Protocol(code) => Some(CloseReason::from(code)),
            End::Shutdown => Some(CloseReason::from(CloseCode::Away)),
            End::Lagging => Some(CloseReason {
                code: CloseCode::Policy,
                description: Some("subscriber too far behind the head".into()),
            }),
            End::Silent => Some(CloseReason { code: CloseCode::Policy, description: Some("no pong".into()) }),
            // The peer is gone or reads nothing: a close frame would only wait.
            End::Gone | End::SendTimeout => None,
        };
        if let Some(reason) = close {
            // Best effort: a peer that reads nothing must not hold the slot.
            let wait = self.send_timeout.min(Duration::from_secs(1));
            let _ = tokio::time::timeout(wait, session.close(Some(reason))).await;
        }
        drop(slot);
    }

    /// Answers one incoming message (a call or a batch).
    async fn request(&mut self, session: &mut Session, body: &[u8]) -> Result<(), End> {
        let state = Arc::clone(&self.state);
        let subs = &mut self.subs;
        let mut local = |method: &str, params: Option<&Value>| match method {
            "eth_subscribe" => {
                Some(subs.subscribe(params, (state.store.head(), state.events.pending().next_seq())))
            }
            "eth_unsubscribe" => Some(subs.unsubscribe(params)),
            "consensus_subscribe" if state.limits.serves(method) => {
                Some(subs.subscribe_finalized(params, &state.finalized))
            }
            "consensus_unsubscribe" if state.limits.serves(method) => Some(subs.unsubscribe(params)),
            _ => None,
        };
        let Some(reply) = framing::respond(&self.state, body, &mut local, self.client).await else {
            return Ok(());
        };
        // serde_json writes UTF-8.
        let text = String::from_utf8_lossy(&reply).into_owned();
        timed(self.send_timeout, session.text(text)).await
    }

    /// Sends each `newPendingTransactions` subscription what entered the
    /// mempool since its cursor. A subscriber the feed's ring has lapped is
    /// dropped as lagging (it would miss transactions), as is one whose
    /// socket takes no data for `rpc.ws_send_timeout_ms`.
    async fn deliver_pending(&mut self, session: &mut Session) -> Result<(), End> {
        let feed = self.state.events.pending();
        for sub in self.subs.list.iter_mut() {
            let Kind::NewPendingTransactions { full } = sub.kind else { continue };
            loop {
                let (txs, cursor, lost) = feed.since(sub.cursor, 256);
                if lost {
                    return Err(End::Lagging);
                }
                if txs.is_empty() {
                    break;
                }
                for tx in &txs {
                    let result =
                        if full { format::transaction(tx, None) } else { serde_json::json!(tx.hash) };
                    let note = format!(
                        r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"{}","result":{result}}}}}"#,
                        sub.id
                    );
                    timed(self.send_timeout, session.text(note)).await?;
                    metrics::counter!(WS_NOTIFICATIONS).increment(1);
                }
                sub.cursor = cursor;
            }
        }
        Ok(())
    }

    /// Sends each finalized-feed subscription every item from its cursor to
    /// the newest. One whose next item the feed no longer keeps (it fell
    /// more than `rpc.finalized_feed_blocks` behind, or asked for an older
    /// one) is dropped as lagging: it would miss blocks.
    async fn deliver_finalized(&mut self, session: &mut Session) -> Result<(), End> {
        let feed = Arc::clone(&self.state.finalized);
        for sub in self.subs.list.iter_mut() {
            let Kind::Finalized(_) = sub.kind else { continue };
            while sub.cursor <= feed.latest() {
                let Some(item) = feed.get(sub.cursor) else {
                    if feed.oldest().is_some_and(|oldest| sub.cursor < oldest) {
                        return Err(End::Lagging);
                    }
                    break;
                };
                let note = format!(
                    r#"{{"jsonrpc":"2.0","method":"consensus_subscription","params":{{"subscription":"{}","result":{}}}}}"#,
                    sub.id,
                    crate::finalized::item_json(&item)
                );
                timed(self.send_timeout, session.text(note)).await?;
                metrics::counter!(WS_NOTIFICATIONS).increment(1);
                sub.cursor += 1;
            }
        }
        Ok(())
    }

    /// Sends the notifications of every block committed since the last
    /// call, in order, checking the lag before each.
    async fn deliver(&mut self, session: &mut Session, heads: &mut watch::Receiver<u64>) -> Result<(), End> {
        let head = *heads.borrow_and_update();
        let Some(first_wanted) = self.subs.list.iter().map(|s| s.first_block).min() else {
            self.delivered = head;
            return Ok(());
        };
        let max_lag = self.state.limits.ws_max_lag_blocks;
        for number in first_wanted.max(self.delivered + 1)..=head {
            let Some(block) = self.state.store.block(number) else {
                tracing::warn!(number, "committed block not readable; notifications skipped");
                self.delivered = number;
                continue;
            };
            let pace = Pace { heads, number, max_lag, send_timeout: self.send_timeout };
            let mut header: Option<String> = None;
            for sub in self.subs.list.iter().filter(|s| s.first_block <= number) {
                match &sub.kind {
                    Kind::NewHeads => {
                        let header = header.get_or_insert_with(|| header_json(&block).to_string());
                        pace.send(session, &sub.id, header).await?;
                    }
                    Kind::Logs(criteria) => {
                        for entry in LogEntry::from_block(&block, criteria) {
                            pace.send(session, &sub.id, &format::log(&entry).to_string()).await?;
                        }
                    }
                    Kind::NewPendingTransactions { .. } | Kind::Finalized(_) => {}
                }
            }
            self.delivered = number;
        }
        Ok(())
    }
}

/// How notifications of block `number` are sent: each waits at most
/// `send_timeout` for room towards the socket, and the connection is
/// dropped as soon as the committed head is more than `max_lag` blocks past
/// `number`, whether it is sending slowly or stuck on a full socket.
struct Pace<'a> {
    heads: &'a watch::Receiver<u64>,
    number: u64,
    max_lag: u64,
    send_timeout: Duration,
}

impl Pace<'_> {
    async fn send(&self, session: &mut Session, id: &str, result: &str) -> Result<(), End> {
        let mut heads = self.heads.clone();
        let (number, max_lag) = (self.number, self.max_lag);
        let lagging = async move {
            if heads.wait_for(|head| head.saturating_sub(number) > max_lag).await.is_err() {
                // No more heads (the node is stopping): never lagging.
                std::future::pending::<()>().await;
            }
        };
        let note = format!(
            r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"{id}","result":{result}}}}}"#
        );
        tokio::select! {
            biased;
            () = lagging => Err(End::Lagging),
            sent = timed(self.send_timeout, session.text(note)) => {
                sent?;
                metrics::counter!(WS_NOTIFICATIONS).increment(1);
                Ok(())
            }
        }
    }
}

/// The close code for a frame the codec refused.
fn protocol_end(e: &ProtocolError) -> End {
    tracing::debug!(error = %e, "WebSocket protocol error");
    match e {
        ProtocolError::Overflow => End::Protocol(CloseCode::Size),
        _ => End::Protocol(CloseCode::Protocol),
    }
}

/// Waits at most `timeout` for room towards the socket.
async fn timed(
    timeout: Duration,
    send: impl std::future::Future<Output = Result<(), actix_ws::Closed>>,
) -> Result<(), End> {
    match tokio::time::timeout(timeout, send).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::Gone),
        Err(_) => Err(End::SendTimeout),
    }
}

/// A `newHeads` header: the block object without its body, as geth sends.
fn header_json(block: &StoredBlock) -> Value {
    let mut v = format::block(block, Vec::new());
    if let Some(o) = v.as_object_mut() {
        for body_field in ["transactions", "uncles", "withdrawals", "size", "totalDifficulty"] {
            o.remove(body_field);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_geth_shaped() {
        let (a, b) = (subscription_id(), subscription_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 34);
        assert!(a.starts_with("0x"));
    }

    #[test]
    fn subscription_limit_and_unsubscribe() {
        let mut subs = Subscriptions { list: Vec::new(), limit: 2, feed_limit: 1 };
        let heads = serde_json::json!(["newHeads"]);
        let id = subs.subscribe(Some(&heads), (5, 0)).unwrap_or_default();
        assert!(subs.subscribe(Some(&serde_json::json!(["logs", {"address": []}])), (5, 0)).is_ok());
        let err = subs.subscribe(Some(&heads), (5, 0)).err().map(|e| e.code);
        assert_eq!(err, Some(LIMIT_EXCEEDED));
        assert_eq!(subs.list[0].first_block, 6);
        assert_eq!(subs.unsubscribe(Some(&serde_json::json!([id]))).ok(), Some(Value::Bool(true)));
        assert!(subs.unsubscribe(Some(&serde_json::json!(["0x00"]))).is_err());
        assert!(subs.subscribe(Some(&serde_json::json!(["newPendingTransactions", "yes"])), (5, 0)).is_err());
        assert!(subs.subscribe(Some(&serde_json::json!(["syncing"])), (5, 0)).is_err());
    }
}
