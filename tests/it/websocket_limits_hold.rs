//! Every WebSocket limit holds, each set from config: open connections (HTTP
//! 503 past `rpc.ws_max_connections`), subscriptions per connection (-32005
//! past `rpc.ws_max_subscriptions_per_connection`), slow consumers (dropped
//! once `rpc.ws_max_lag_blocks` behind the head, or when a message waits
//! `rpc.ws_send_timeout_ms` for room: never buffered for), silent peers
//! (dropped after `rpc.ws_ping_interval_ms` without a frame), and the HTTP
//! limits on message size and batch length.

use std::time::{Duration, Instant};

use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::json;

use crate::{
    support::*,
    ws_client::{Ended, Ws},
};

/// Waits (up to 20 s) until a metric line starting with `prefix` reaches
/// `want`.
fn wait_metric(node: &TestNode, prefix: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = node.metric(prefix);
        if got == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{prefix} is {got:?}, want {want}; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn connections_past_the_limit_get_503_until_one_closes() {
    let node = TestNode::start(&[("SLUICE_RPC__WS_MAX_CONNECTIONS", "2")], &["--block-time-ms", "50"]);
    let a = Ws::connect(&node);
    let mut b = Ws::connect(&node);
    match Ws::try_connect(&node) {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 503),
        Err(e) => panic!("want HTTP 503, got {e}"),
        Ok(_) => panic!("a third connection was accepted past the limit of 2"),
    }
    wait_metric(&node, "sluice_ws_refused_total", 1.0);
    // Plain HTTP is not counted against the WebSocket limit.
    assert_eq!(node.ok("eth_chainId", json!([])), json!("0x7a69"));
    assert!(b.call("eth_blockNumber", json!([])).is_ok(), "open connections keep working");
    a.close();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut c = loop {
        match Ws::try_connect(&node) {
            Ok(c) => break c,
            Err(e) => assert!(Instant::now() < deadline, "slot not released after a close: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(c.call("eth_chainId", json!([])).is_ok());
}

#[test]
fn subscriptions_per_connection_are_capped() {
    let node = TestNode::start(
        &[("SLUICE_RPC__WS_MAX_SUBSCRIPTIONS_PER_CONNECTION", "2")],
        &["--block-time-ms", "50"],
    );
    let mut ws = Ws::connect(&node);
    let first = ws.subscribe(json!(["newHeads"]));
    ws.subscribe(json!(["logs", {}]));
    let err = ws.call("eth_subscribe", json!(["newHeads"])).unwrap_err();
    assert_eq!(err["code"], -32005, "{err}");
    assert!(err["message"].as_str().unwrap().contains("limit 2"), "{err}");
    assert_eq!(ws.call("eth_unsubscribe", json!([first])).unwrap(), json!(true));
    ws.subscribe(json!(["newHeads"]));
    // The budget is per connection.
    let mut other = Ws::connect(&node);
    other.subscribe(json!(["newHeads"]));
    other.subscribe(json!(["newHeads"]));
    assert!(other.call("eth_subscribe", json!(["newHeads"])).is_err());
}

/// Calldata logged by [`logger_initcode`]'s contract: 100 kB, so each log
/// notification is about 200 kB of hex.
const LOG_BYTES: usize = 100_000;
/// Subscriptions of the stuck reader, each to every log: a block with two
/// 100 kB logs is 100 notifications, about 20 MB, far more than the socket
/// buffers hold, so a reader that reads nothing is soon stuck.
const STUCK_SUBS: usize = 50;

/// A contract that logs its whole calldata (LOG0) and stops.
fn logger_initcode() -> Bytes {
    // CALLDATASIZE PUSH0 PUSH0 CALLDATACOPY CALLDATASIZE PUSH0 LOG0 STOP
    let runtime = [0x36, 0x5f, 0x5f, 0x37, 0x36, 0x5f, 0xa0, 0x00];
    let mut code = vec![0x60, runtime.len() as u8, 0x80, 0x60, 0x0b, 0x60, 0x00, 0x39, 0x60, 0x00, 0xf3];
    code.extend(runtime);
    Bytes::from(code)
}

/// Deploys the logger (dev account 2's nonce 0).
fn deploy_logger(node: &TestNode) -> Address {
    let raw = eip1559(&dev(2), 0, TxKind::Create, U256::ZERO, logger_initcode(), 100_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    r["contractAddress"].as_str().unwrap().parse().unwrap()
}

/// One block with `count` 100 kB logs from dev account 2, starting at
/// `nonce`; returns the block number.
fn big_logs(node: &TestNode, logger: Address, nonce: u64, count: u64) -> u64 {
    let data = Bytes::from(vec![0u8; LOG_BYTES]);
    let mut hash = None;
    for n in nonce..nonce + count {
        hash = Some(
            node.send(&eip1559(&dev(2), n, TxKind::Call(logger), U256::ZERO, data.clone(), 2_000_000))
                .unwrap(),
        );
    }
    let r = node.receipt(&hash.unwrap());
    assert_eq!(r["status"], "0x1");
    parse_u64(&r["blockNumber"])
}

/// `blocks` more blocks of one transfer each (dev account 3); returns the
/// last block number.
fn more_blocks(node: &TestNode, blocks: u64) -> u64 {
    let mut last = 0;
    for n in 0..blocks {
        let r = node.receipt(&node.send(&transfer(&dev(3), n, Address::repeat_byte(7), 1)).unwrap());
        last = parse_u64(&r["blockNumber"]);
    }
    last
}

/// A connection subscribed [`STUCK_SUBS`] times to every log that reads
/// nothing after the subscriptions' answers.
fn stuck_reader(node: &TestNode) -> Ws {
    let mut ws = Ws::connect(node);
    for _ in 0..STUCK_SUBS {
        ws.subscribe(json!(["logs", {}]));
    }
    ws
}

#[test]
fn a_subscriber_too_far_behind_is_dropped_while_others_keep_up() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__WS_MAX_LAG_BLOCKS", "3"),
            ("SLUICE_RPC__WS_SEND_TIMEOUT_MS", "60000"),
            ("SLUICE_RPC__WS_PING_INTERVAL_MS", "60000"),
        ],
        &["--block-time-ms", "50"],
    );
    let logger = deploy_logger(&node);
    let mut stuck = stuck_reader(&node);
    let mut healthy = Ws::connect(&node);
    let heads = healthy.subscribe(json!(["newHeads"]));
    let start = parse_u64(&node.ok("eth_blockNumber", json!([])));

    big_logs(&node, logger, 1, 2);
    let end = more_blocks(&node, 5);
    // Stuck on a full socket, it is dropped as soon as the head is more than
    // 3 blocks past the block it was sending, not after the 60 s timeout.
    wait_metric(&node, "sluice_ws_dropped_total{reason=\"lagging\"}", 1.0);
    assert_eq!(node.metric("sluice_ws_dropped_total{reason=\"send_timeout\"}").unwrap_or(0.0), 0.0);
    let (ended, notes) = stuck.drain_until_end(Duration::from_secs(20));
    assert_ne!(ended, Ended::Open, "the lagging connection is closed");
    assert!(notes < 2 * STUCK_SUBS, "it got {notes} of {} logs before being dropped", 2 * STUCK_SUBS);

    // The other subscriber got every block, in order.
    let mut seen = Vec::new();
    while seen.last() != Some(&end) {
        let (sub, head) = healthy.next_note(Duration::from_secs(10)).expect("every head");
        assert_eq!(sub, heads);
        seen.push(parse_u64(&head["number"]));
    }
    assert_eq!(seen, (start + 1..=end).collect::<Vec<_>>());
}

#[test]
fn a_subscriber_that_stops_reading_is_dropped_after_the_send_timeout() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__WS_MAX_LAG_BLOCKS", "1000"),
            ("SLUICE_RPC__WS_SEND_TIMEOUT_MS", "300"),
            ("SLUICE_RPC__WS_PING_INTERVAL_MS", "60000"),
        ],
        &["--block-time-ms", "50"],
    );
    let logger = deploy_logger(&node);
    let mut stuck = stuck_reader(&node);
    big_logs(&node, logger, 1, 2);
    wait_metric(&node, "sluice_ws_dropped_total{reason=\"send_timeout\"}", 1.0);
    let (ended, notes) = stuck.drain_until_end(Duration::from_secs(20));
    assert_ne!(ended, Ended::Open);
    assert!(notes < 2 * STUCK_SUBS, "it got {notes} of {} logs before being dropped", 2 * STUCK_SUBS);
    // The node is unaffected: more blocks, more subscribers.
    let mut fresh = Ws::connect(&node);
    let logs = fresh.subscribe(json!(["logs", {"address": logger}]));
    big_logs(&node, logger, 3, 1);
    let (sub, log) = fresh.next_note(Duration::from_secs(10)).expect("a log");
    assert_eq!(sub, logs);
    assert_eq!(log["data"].as_str().unwrap().len(), 2 + 2 * LOG_BYTES);
}

#[test]
fn a_silent_peer_is_dropped_after_a_ping_interval() {
    let node = TestNode::start(&[("SLUICE_RPC__WS_PING_INTERVAL_MS", "200")], &["--block-time-ms", "50"]);
    let mut silent = Ws::connect(&node);
    let mut lively = Ws::connect(&node);
    // The lively client reads (tungstenite answers pings as it reads); the
    // silent one reads nothing, so it never answers a ping.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(1500) {
        assert!(lively.next_note(Duration::from_millis(100)).is_none());
    }
    wait_metric(&node, "sluice_ws_dropped_total{reason=\"silent\"}", 1.0);
    assert_eq!(lively.call("eth_chainId", json!([])).unwrap(), json!("0x7a69"), "still connected");
    let (ended, _) = silent.drain_until_end(Duration::from_secs(5));
    assert_eq!(ended, Ended::Closed(1008), "policy violation: no pong");
}

#[test]
fn oversized_messages_and_batches_are_refused() {
    let node = TestNode::start(
        &[("SLUICE_RPC__MAX_REQUEST_BODY_BYTES", "2000"), ("SLUICE_RPC__MAX_BATCH_LEN", "3")],
        &["--block-time-ms", "50"],
    );
    let mut ws = Ws::connect(&node);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"});
    let resp = ws.request(&json!([call, call, call, call]));
    assert_eq!(resp["error"]["code"], -32600, "{resp}");
    assert!(ws.request(&json!([call, call, call])).as_array().is_some_and(|a| a.len() == 3));
    let padding = "x".repeat(3000);
    ws.send_text(json!({"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "pad": padding}).to_string());
    let (ended, _) = ws.drain_until_end(Duration::from_secs(5));
    assert_eq!(ended, Ended::Closed(1009), "message too big");
    wait_metric(&node, "sluice_ws_dropped_total{reason=\"protocol\"}", 1.0);
}
