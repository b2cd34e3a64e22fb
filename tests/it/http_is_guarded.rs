//! HTTP is guarded as geth guards it: only JSON bodies (415 otherwise, so a
//! cross-site page's "simple request" runs nothing), only `Host` names in
//! `rpc.vhosts` (403 otherwise, against DNS rebinding; requests by address
//! pass), a body must arrive within `rpc.read_timeout_ms` (408, and the
//! connection is closed), and a client that stops reading is dropped once
//! the node's writes wait `rpc.write_timeout_ms`.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::{Duration, Instant},
};

use serde_json::json;

use crate::support::*;

/// Sends a raw HTTP/1.1 request and reads the status line's code and the
/// body (the node closes or answers within the read timeout given).
fn raw(addr: &str, head: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_string())
}

const CHAIN_ID: &str = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#;

#[test]
fn only_json_bodies_to_known_hosts_are_served() {
    let node = TestNode::start(&[], &[]);
    let addr = node.url.trim_start_matches("http://").to_string();
    let post = |host: &str, ctype: Option<&str>| {
        let ctype = ctype.map(|c| format!("Content-Type: {c}\r\n")).unwrap_or_default();
        raw(&addr, &format!("POST / HTTP/1.1\r\nHost: {host}\r\n{ctype}"), CHAIN_ID)
    };
    // What a page on another site can send without a preflight.
    for ctype in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let (code, body) = post("localhost:8545", ctype);
        assert_eq!(code, 415, "{ctype:?}: {body}");
        assert_eq!(body, "invalid content type, only application/json is supported");
    }
    // A name rebound to 127.0.0.1 by a hostile page's DNS.
    let (code, body) = post("evil.example", Some("application/json"));
    assert_eq!((code, body.as_str()), (403, "invalid host specified"));
    // The names and addresses the node answers to.
    for host in ["localhost:8545", "LOCALHOST", "127.0.0.1:8545", &addr] {
        let (code, body) = post(host, Some("application/json; charset=utf-8"));
        assert_eq!(code, 200, "{host}: {body}");
        assert!(body.contains("0x7a69"), "{body}");
    }
    // rpc.vhosts names more, or any.
    let any = TestNode::start(&[("SLUICE_RPC__VHOSTS", "*")], &[]);
    let addr = any.url.trim_start_matches("http://").to_string();
    let (code, _) =
        raw(&addr, "POST / HTTP/1.1\r\nHost: node.example\r\nContent-Type: application/json\r\n", CHAIN_ID);
    assert_eq!(code, 200);
}

#[test]
fn a_stalled_body_is_timed_out_and_its_connection_closed() {
    let node = TestNode::start(&[("SLUICE_RPC__READ_TIMEOUT_MS", "1000")], &[]);
    let addr = node.url.trim_start_matches("http://").to_string();
    // Heads promising 5 MB, then nothing.
    let stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{").unwrap();
            s
        })
        .collect();
    // Cheap requests are served meanwhile.
    node.ok("eth_blockNumber", json!([]));
    let start = Instant::now();
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut text = String::new();
        // The answer, then the close (read_to_string returns at EOF).
        s.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    }
    assert!(start.elapsed() < Duration::from_secs(8), "closed after {:?}", start.elapsed());
    assert!(node.metric("sluice_http_timed_out_total").unwrap_or_default() >= 50.0);
    node.ok("eth_blockNumber", json!([]));
}

#[test]
fn a_client_that_stops_reading_is_dropped() {
    let node = TestNode::start(
        &[("SLUICE_RPC__WRITE_TIMEOUT_MS", "1000"), ("SLUICE_RPC__TRACE_MAX_BYTES", "100000000")],
        &[],
    );
    let addr: std::net::SocketAddr = node.url.trim_start_matches("http://").parse().unwrap();
    // A struct log of about 130,000 steps: about 12 MB of JSON, more than
    // the node's socket buffer and the client's small one hold.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceCall",
        "params": [{"input": "0x5b600056", "gas": "0x80000"}, "latest"]})
    .to_string();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut s: TcpStream = socket.into();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Never read while the node writes; then read what is left.
    std::thread::sleep(Duration::from_secs(8));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    // The node dropped the connection: a reset once the client's window
    // opens again, or nothing more at all.
    let ended = loop {
        match s.read(&mut buf) {
            Ok(0) => break "eof".to_string(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break e.to_string(),
        }
    };
    let text = String::from_utf8_lossy(&got);
    let complete = text.trim_end().ends_with('}') && text.contains("\"structLogs\"");
    assert!(
        !complete,
        "the whole answer was kept for a client that did not read ({} bytes, {ended})",
        got.len()
    );
    node.ok("eth_blockNumber", json!([]));
}
