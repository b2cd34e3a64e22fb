//! The HTTP server: `POST /` answers JSON-RPC through [`crate::framing`];
//! a `GET /` with `Upgrade: websocket` becomes a WebSocket ([`super::ws`]),
//! whose messages go through the same framing.
//!
//! Limits, each from config: request body size (larger bodies get HTTP 413
//! before any parsing), connections per worker, keep-alive, the time a
//! client has to send its request head and then its body (slow or idle
//! connections are dropped), and the time the node's unacknowledged writes
//! may wait on a client that does not read (`TCP_USER_TIMEOUT`: the kernel
//! drops the connection). A `POST` must carry a JSON content type and a
//! `Host` in `rpc.vhosts` ([`crate::http`]). The framing's own limits are
//! in [`crate::framing`].

use std::time::Duration;

use actix_web::{dev::ServerHandle, http::header, web, App, HttpRequest, HttpResponse, HttpServer};

use super::{framing::respond, http, SharedState};

/// Starts the HTTP server on its own worker threads. Returns the bound
/// address (the configured port may be 0) and a handle to stop it.
pub fn start(state: SharedState) -> std::io::Result<(std::net::SocketAddr, ServerHandle)> {
    let limits = state.limits.clone();
    let data = web::Data::from(state);
    let ws_connections = web::Data::new(super::ws::Connections::default());
    let with_cors = !limits.cors_list().is_empty();
    let cors_config = limits.clone();
    let write_timeout = Duration::from_millis(limits.write_timeout_ms);
    let server = HttpServer::new(move || {
        App::new()
            .wrap(actix_web::middleware::Condition::new(with_cors, cors(&cors_config)))
            .app_data(data.clone())
            .route("/", web::post().to(handle))
            .app_data(ws_connections.clone())
            // GET: a WebSocket upgrade (JSON-RPC and eth_subscribe), or a
            // line saying what this port is.
            .route("/", web::get().to(super::ws::get))
    })
    .workers(limits.workers())
    .max_connections(limits.max_connections_per_worker)
    .keep_alive(Duration::from_millis(limits.keep_alive_ms))
    .client_request_timeout(Duration::from_millis(limits.client_request_timeout_ms))
    .client_disconnect_timeout(Duration::from_millis(1000))
    .on_connect(move |conn, _| write_timeout_on(conn, write_timeout))
    .disable_signals()
    .shutdown_timeout(10)
    .bind(limits.addr)?;
    let addr = server.addrs().first().copied().unwrap_or(limits.addr);
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    Ok((addr, handle))
}

/// CORS as `rpc.cors_origins` says: preflights answered, responses
/// carrying `Access-Control-Allow-Origin` for the allowed origins.
fn cors(limits: &sluice_config::RpcConfig) -> actix_cors::Cors {
    let cors = actix_cors::Cors::default()
        .allowed_methods(["POST", "GET", "OPTIONS"])
        .allow_any_header()
        .max_age(3600);
    let origins = limits.cors_list();
    if origins.contains(&"*") {
        return cors.allow_any_origin().send_wildcard();
    }
    origins.into_iter().fold(cors, |cors, origin| cors.allowed_origin(origin))
}

fn json_response(body: Vec<u8>) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(body)
}

/// Bounds how long the kernel keeps unacknowledged data for a connection
/// (a client that stopped reading): past `timeout` it drops the connection,
/// and the worker's write fails instead of waiting for ever. actix has no
/// write timeout of its own.
fn write_timeout_on(conn: &dyn std::any::Any, timeout: Duration) {
    if let Some(stream) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
        if let Err(e) = socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout)) {
            tracing::warn!(error = %e, "could not set the connection's write timeout");
        }
    }
}

/// The request's body, once the request passed [`http`]'s checks: the
/// host, a declared length within the limit (refused before any of the
/// body is read), a JSON content type, and the body within its time.
async fn checked_body(
    req: &HttpRequest,
    limits: &sluice_config::RpcConfig,
    payload: web::Payload,
) -> Result<web::Bytes, http::Refused> {
    http::allowed_host(req, &limits.vhosts)?;
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_request_body_bytes as u64) {
        return Err(http::Refused::TooLarge(limits.max_request_body_bytes));
    }
    http::json_content(req)?;
    let read_timeout = Duration::from_millis(limits.read_timeout_ms);
    http::read_body(payload, limits.max_request_body_bytes, read_timeout).await
}

async fn handle(req: HttpRequest, state: web::Data<super::RpcState>, payload: web::Payload) -> HttpResponse {
    let body = match checked_body(&req, &state.limits, payload).await {
        Ok(body) => body,
        Err(refused) => return refused.response(),
    };
    let client = req.peer_addr().map(|a| a.ip());
    match respond(&state.into_inner(), &body, &mut |_, _| None, client).await {
        Some(bytes) => json_response(bytes),
        None => HttpResponse::Ok().finish(),
    }
}
