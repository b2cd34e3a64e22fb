//! A dapp served from another origin calls the node from a browser, so
//! CORS applies: preflights are answered, responses carry
//! `Access-Control-Allow-Origin` for allowed origins (any by default, as
//! anvil), and a WebSocket handshake from a page of another origin is
//! refused when the origins are restricted.

use std::io::{Read, Write};

use crate::support::*;

const PAGE: &str = "http://localhost:3000";

fn preflight(node: &TestNode, origin: &str) -> ureq::Response {
    let r = ureq::request("OPTIONS", &node.url)
        .set("Origin", origin)
        .set("Access-Control-Request-Method", "POST")
        .set("Access-Control-Request-Headers", "content-type")
        .call();
    match r {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("preflight: {e}"),
    }
}

fn post_from(node: &TestNode, origin: &str) -> ureq::Response {
    let r = ureq::post(&node.url)
        .set("Origin", origin)
        .set("Content-Type", "application/json")
        .send_string(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#);
    match r {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("post: {e}"),
    }
}

/// The status line of a WebSocket handshake sent with `origin`.
fn ws_handshake(node: &TestNode, origin: &str) -> String {
    let addr = node.url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).expect("connects");
    let req = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n"
    );
    s.write_all(req.as_bytes()).expect("sends");
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).expect("reads");
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_string()
}

#[test]
fn any_origin_by_default() {
    let node = TestNode::dev();
    let r = preflight(&node, PAGE);
    assert_eq!(r.status(), 200, "preflight");
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert!(r.header("access-control-allow-methods").unwrap_or_default().contains("POST"));
    let r = post_from(&node, PAGE);
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert!(ws_handshake(&node, PAGE).contains("101"), "a page's WebSocket is accepted");
}

#[test]
fn restricted_origins_admit_only_those() {
    let node =
        TestNode::start(&[("SLUICE_RPC__CORS_ORIGINS", "http://localhost:3000, https://app.example")], &[]);
    let r = preflight(&node, PAGE);
    assert_eq!(r.header("access-control-allow-origin"), Some(PAGE));
    let r = post_from(&node, "https://app.example");
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    // Another page: no grant (the browser refuses the call).
    let r = preflight(&node, "http://evil.example");
    assert_ne!(r.status(), 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(ws_handshake(&node, PAGE).contains("101"));
    let refused = ws_handshake(&node, "http://evil.example");
    assert!(refused.contains("403") || refused.contains("400"), "{refused}");
    // Scripts (no Origin) are not browsers: unaffected.
    assert_eq!(parse_u64(&node.ok("eth_chainId", serde_json::json!([]))), CHAIN_ID);
}

#[test]
fn no_origins_admit_no_page() {
    let node = TestNode::start(&[("SLUICE_RPC__CORS_ORIGINS", "")], &[]);
    let r = post_from(&node, PAGE);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(ws_handshake(&node, PAGE).contains("403"));
    assert_eq!(parse_u64(&node.ok("eth_chainId", serde_json::json!([]))), CHAIN_ID);
}
