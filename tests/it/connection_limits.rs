//! Connections are bounded and slow clients are timed out: with one worker
//! allowed two connections, two slow clients hold both and a third client
//! waits; once the slow clients' time to send their request head runs out
//! they are dropped and the third is served. Oversized responses are
//! refused with -32005.

use std::{
    io::Write,
    net::TcpStream,
    time::{Duration, Instant},
};

use serde_json::{json, Value};

use crate::support::*;

#[test]
fn slow_clients_hold_at_most_the_connection_limit_and_are_dropped() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__WORKERS", "1"),
            ("SLUICE_RPC__MAX_CONNECTIONS_PER_WORKER", "2"),
            ("SLUICE_RPC__CLIENT_REQUEST_TIMEOUT_MS", "1500"),
        ],
        &[],
    );
    let addr = node.url.trim_start_matches("http://").to_string();
    let mut slow: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            // Half a request head, never finished.
            s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}).to_string();
    let blocked = ureq::post(&node.url)
        .timeout(Duration::from_millis(600))
        .set("content-type", "application/json")
        .send_string(&body);
    assert!(blocked.is_err(), "a third connection must wait while two slow clients hold the limit");
    // The slow clients are dropped after their timeout; then a client is served.
    let start = Instant::now();
    let served = loop {
        match ureq::post(&node.url)
            .timeout(Duration::from_secs(2))
            .set("content-type", "application/json")
            .send_string(&body)
        {
            Ok(r) => break r.into_string().unwrap(),
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("never served after the slow clients timed out: {e}"),
        }
    };
    let v: Value = serde_json::from_str(&served).unwrap();
    assert_eq!(v["result"], "0x7a69");
    slow.clear();
}

#[test]
fn responses_over_the_limit_are_refused() {
    let node = TestNode::start(&[("SLUICE_RPC__MAX_RESPONSE_BYTES", "3000")], &[]);
    // One block fits; a batch of ten does not.
    assert!(node.call("eth_getBlockByNumber", json!(["0x0", false])).is_ok());
    let batch: Vec<Value> =
        (0..10).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "eth_getBlockByNumber", "params": ["0x0", false]})).collect();
    let resp = node.post(&Value::Array(batch));
    assert_eq!(resp["error"]["code"], -32005, "{resp}");
    assert!(resp["error"]["message"].as_str().unwrap().starts_with("response too large"));
}
