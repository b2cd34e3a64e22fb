//! The HTTP server: `POST /` answers JSON-RPC through [`crate::framing`];
//! a `GET /` with `Upgrade: websocket` becomes a WebSocket ([`super::ws`]),
//! whose messages go through the same framing.
//!
//! Limits, each from config: request body size (larger bodies get HTTP 413
//! before any parsing), connections per worker, keep-alive and the time a
//! client has to send its request head (slow or idle connections are
//! dropped). The framing's own limits are in [`crate::framing`].

use std::time::Duration;

use actix_web::{dev::ServerHandle, web, App, HttpResponse, HttpServer};

use super::{framing::respond, SharedState};

/// Starts the HTTP server on its own worker threads. Returns the bound
/// address (the configured port may be 0) and a handle to stop it.
pub fn start(state: SharedState) -> std::io::Result<(std::net::SocketAddr, ServerHandle)> {
    let limits = state.limits.clone();
    let data = web::Data::from(state);
    let ws_connections = web::Data::new(super::ws::Connections::default());
    let (body_limit, with_cors) = (limits.max_request_body_bytes, !limits.cors_list().is_empty());
    let cors_config = limits.clone();
    let server = HttpServer::new(move || {
        App::new()
            .wrap(actix_web::middleware::Condition::new(with_cors, cors(&cors_config)))
            .app_data(data.clone())
            .app_data(web::PayloadConfig::new(body_limit))
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

async fn handle(state: web::Data<super::RpcState>, body: web::Bytes) -> HttpResponse {
    match respond(&state.into_inner(), &body, &mut |_, _| None).await {
        Some(bytes) => json_response(bytes),
        None => HttpResponse::Ok().finish(),
    }
}
