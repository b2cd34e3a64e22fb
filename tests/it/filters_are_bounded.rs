//! Log filters are bounded per request as geth bounds them (1,000
//! addresses, 4 topic positions of 1,000 alternatives, with geth's
//! messages), and the node-wide filter and WebSocket caps cannot be taken
//! whole by one client address.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use alloy_primitives::{Address, B256};
use serde_json::{json, Value};

use crate::support::*;

fn addresses(n: u16) -> Vec<Address> {
    (0..n).map(|i| Address::left_padding_from(&i.to_be_bytes())).collect()
}

fn topics(n: u16) -> Vec<B256> {
    (0..n).map(|i| B256::left_padding_from(&i.to_be_bytes())).collect()
}

#[test]
fn log_criteria_are_bounded_with_geths_messages() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let refused = |method: &str, filter: Value| {
        let e = node.call(method, json!([filter])).expect_err("refused");
        (e["code"].as_i64().unwrap(), e["message"].as_str().unwrap().to_string())
    };
    for method in ["eth_getLogs", "eth_newFilter"] {
        let many = json!({"address": addresses(1001), "fromBlock": "0x0"});
        assert_eq!(refused(method, many), (-32000, "exceed max addresses".into()));
        let deep = json!({"topics": [null, null, null, null, null]});
        assert_eq!(refused(method, deep), (-32000, "exceed max topics".into()));
        let wide = json!({"topics": [topics(1001)]});
        assert_eq!(
            refused(method, wide),
            (-32000, "exceed max addresses or topics per search position".into())
        );
        // At the limits: served.
        let full =
            json!({"address": addresses(1000), "topics": [topics(1000), null, topics(3), topics(1000)]});
        node.ok(method, json!([full]));
    }
    // The same bounds on a logs subscription.
    let mut ws = crate::ws_client::Ws::connect(&node);
    let e = ws.call("eth_subscribe", json!(["logs", {"address": addresses(1001)}])).unwrap_err();
    assert_eq!(e["message"], "exceed max addresses", "{e}");
    assert!(ws.call("eth_subscribe", json!(["logs", {"address": addresses(1000)}])).is_ok());
}

/// A raw HTTP/1.1 exchange from source address `from` (any 127/8 address
/// is this machine): the status code and body.
fn from_address(from: [u8; 4], to: SocketAddr, request: &str) -> (u16, String) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    socket.connect(&to.into()).unwrap();
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = s.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_string())
}

#[test]
fn one_client_cannot_take_every_filter_or_websocket() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__MAX_FILTERS", "8"),
            ("SLUICE_RPC__MAX_FILTERS_PER_CLIENT", "3"),
            ("SLUICE_RPC__WS_MAX_CONNECTIONS_PER_CLIENT", "2"),
        ],
        &[],
    );
    let addr: SocketAddr = node.url.trim_start_matches("http://").parse().unwrap();
    let new_filter = |from: [u8; 4]| {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"eth_newBlockFilter","params":[]}"#;
        let request = format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let (code, text) = from_address(from, addr, &request);
        assert_eq!(code, 200, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    for _ in 0..3 {
        assert!(new_filter([127, 0, 0, 1])["result"].is_string());
    }
    let refused = new_filter([127, 0, 0, 1]);
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("rpc.max_filters_per_client"),
        "{refused}"
    );
    // Another client still gets one.
    assert!(new_filter([127, 0, 0, 2])["result"].is_string());

    let upgrade = "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let open: Vec<_> = (0..2)
        .map(|_| {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            socket.connect(&addr.into()).unwrap();
            let mut s: TcpStream = socket.into();
            s.write_all(upgrade.as_bytes()).unwrap();
            let mut buf = [0u8; 12];
            s.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"HTTP/1.1 101");
            s
        })
        .collect();
    let (code, body) = from_address([127, 0, 0, 1], addr, upgrade);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("rpc.ws_max_connections_per_client"), "{body}");
    let (code, _) = from_address([127, 0, 0, 3], addr, upgrade);
    assert_eq!(code, 101, "another client still connects");
    drop(open);
}
