//! Open WebSocket connections, counted across HTTP workers against
//! `rpc.ws_max_connections` and `rpc.ws_max_connections_per_client`: a
//! handshake takes a [`Slot`] or is refused, and the slot is released when
//! its connection's task ends.

use std::{collections::HashMap, net::IpAddr};

use actix_web::web;

use super::WS_CONNECTIONS;

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
pub(super) struct Slot(web::Data<Connections>, Option<IpAddr>);

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
pub(super) enum Full {
    /// `rpc.ws_max_connections` open.
    Node(usize),
    /// `rpc.ws_max_connections_per_client` open from this address.
    Client(usize),
}

/// A slot for a connection from `client`, within both limits.
pub(super) fn acquire(
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
