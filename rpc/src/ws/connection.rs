//! One WebSocket connection: the task that owns its session and selects
//! over client frames, committed heads, the pending and finalized feeds,
//! shutdown and the ping timer; the requests it answers; why it ends
//! ([`End`]) and the close frame it then sends.

use std::{net::IpAddr, sync::Arc, time::Duration};

use actix_ws::{AggregatedMessage, AggregatedMessageStream, CloseCode, CloseReason, ProtocolError, Session};
use serde_json::Value;
use tokio::time::MissedTickBehavior;

use super::{pace::timed, slots::Slot, subscriptions::Subscriptions, WS_DROPPED};
use crate::{framing, SharedState};

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
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

/// One WebSocket connection.
pub(super) struct Connection {
    /// Everything an RPC worker needs.
    pub(super) state: SharedState,
    /// Its subscriptions.
    pub(super) subs: Subscriptions,
    /// The last height whose notifications were sent (or that had no
    /// subscriber).
    pub(super) delivered: u64,
    /// `rpc.ws_send_timeout_ms`.
    pub(super) send_timeout: Duration,
    /// The client's address (its filters count against its cap).
    pub(super) client: Option<IpAddr>,
}

impl Connection {
    /// Serves the connection until the client leaves, breaks a limit, or the
    /// node stops.
    pub(super) async fn run(mut self, mut session: Session, mut stream: AggregatedMessageStream, slot: Slot) {
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
}

/// The close code for a frame the codec refused.
fn protocol_end(e: &ProtocolError) -> End {
    tracing::debug!(error = %e, "WebSocket protocol error");
    match e {
        ProtocolError::Overflow => End::Protocol(CloseCode::Size),
        _ => End::Protocol(CloseCode::Protocol),
    }
}
