//! JSON-RPC over WebSocket on the HTTP port: calls and batches answer as over
//! HTTP; `newHeads` and `logs` subscriptions deliver every block and every
//! matching log, in order, from the block after they were made;
//! `eth_unsubscribe` stops one; SIGTERM closes open connections (1001)
//! without holding up shutdown.

use std::time::{Duration, Instant};

use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::{json, Value};

use crate::{
    support::*,
    ws_client::{Ended, Ws},
};

/// Deploys the counter contract (each call logs the incremented value).
fn deploy_counter(node: &TestNode) -> Address {
    let owner = dev(0);
    let raw = eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    assert_eq!(r["status"], "0x1");
    r["contractAddress"].as_str().unwrap().parse().unwrap()
}

#[test]
fn calls_and_subscriptions_deliver_every_block_and_log_in_order() {
    let node = TestNode::dev();
    let counter = deploy_counter(&node);
    let mut ws = Ws::connect(&node);

    // Calls answer as over HTTP, batches too.
    assert_eq!(ws.call("eth_chainId", json!([])).unwrap(), json!("0x7a69"));
    assert_eq!(
        ws.call("eth_getBalance", json!([dev(1).address(), "latest"])),
        node.call("eth_getBalance", json!([dev(1).address(), "latest"]))
    );
    let batch = ws.request(&json!([
        {"jsonrpc": "2.0", "id": 7, "method": "eth_blockNumber"},
        {"jsonrpc": "2.0", "id": 8, "method": "eth_nope"},
    ]));
    assert_eq!(batch[0]["id"], 7);
    assert_eq!(batch[1]["error"]["code"], -32601);
    assert_eq!(ws.call("eth_subscribe", json!(["syncing"])).unwrap_err()["code"], -32602);

    let heads = ws.subscribe(json!(["newHeads"]));
    let logs = ws.subscribe(json!(["logs", {"address": counter, "topics": [counter_topic()]}]));
    assert_ne!(heads, logs);
    assert_eq!(heads.len(), 34, "0x + 32 hex digits, as geth");
    let start = parse_u64(&node.ok("eth_blockNumber", json!([])));

    // Three rounds, each its own block: two counter calls and a transfer.
    let user = dev(1);
    let mut nonce = 0;
    let mut receipts = Vec::new();
    for _ in 0..3 {
        let mut last = None;
        for _ in 0..2 {
            let raw = eip1559(&user, nonce, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000);
            nonce += 1;
            last = Some(node.send(&raw).unwrap());
            receipts.push(last.unwrap());
        }
        node.send(&transfer(&user, nonce, Address::repeat_byte(9), 1)).unwrap();
        nonce += 1;
        node.receipt(&last.unwrap());
    }
    let receipts: Vec<Value> = receipts.iter().map(|h| node.receipt(h)).collect();
    let end = parse_u64(&node.ok("eth_blockNumber", json!([])));
    assert!(end >= start + 3);

    let mut head_numbers = Vec::new();
    let mut log_notes = Vec::new();
    while head_numbers.last() != Some(&end) || log_notes.len() < receipts.len() {
        let (sub, result) = ws.next_note(Duration::from_secs(10)).expect("a notification within 10 s");
        if sub == heads {
            let n = parse_u64(&result["number"]);
            let block = node.ok("eth_getBlockByNumber", json!([result["number"], false]));
            assert_eq!(result["hash"], block["hash"]);
            assert_eq!(result["parentHash"], block["parentHash"]);
            assert_eq!(result["baseFeePerGas"], "0x3b9aca00");
            assert!(result.get("transactions").is_none(), "a header, not a block");
            head_numbers.push(n);
        } else {
            assert_eq!(sub, logs);
            log_notes.push(result);
        }
    }
    assert_eq!(head_numbers, (start + 1..=end).collect::<Vec<_>>(), "every block, in order");
    for (i, (note, receipt)) in log_notes.iter().zip(&receipts).enumerate() {
        assert_eq!(note, &receipt["logs"][0], "log {i} as in its receipt");
        assert_eq!(parse_u256(&note["data"]), U256::from(i + 1));
    }

    // Unsubscribed: heads stop, logs go on.
    assert_eq!(ws.call("eth_unsubscribe", json!([heads])).unwrap(), json!(true));
    assert!(ws.call("eth_unsubscribe", json!([heads])).is_err(), "already gone");
    let h =
        node.send(&eip1559(&user, nonce, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000)).unwrap();
    node.receipt(&h);
    let (sub, result) = ws.next_note(Duration::from_secs(10)).expect("the log");
    assert_eq!(sub, logs);
    assert_eq!(parse_u256(&result["data"]), U256::from(7));
    assert!(ws.next_note(Duration::from_millis(300)).is_none(), "no header after eth_unsubscribe");

    // HTTP GET without an upgrade still says what the port is.
    let (status, text) = match ureq::get(&node.url).call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(status, 200);
    assert!(text.contains("WebSocket"), "{text}");
}

#[test]
fn pending_transaction_subscriptions_stream_each_admitted_one() {
    let node = TestNode::dev();
    let mut ws = Ws::connect(&node);
    let hashes = ws.subscribe(json!(["newPendingTransactions"]));
    let full = ws.subscribe(json!(["newPendingTransactions", true]));
    let sender = dev(1);
    let sent: Vec<_> =
        (0..3).map(|n| node.send(&transfer(&sender, n, random_signer().address(), 1)).unwrap()).collect();
    let (mut got_hashes, mut got_full) = (Vec::new(), Vec::new());
    while got_hashes.len() + got_full.len() < 6 {
        let (sub, result) =
            ws.next_note(Duration::from_secs(10)).expect("a pending-transaction notification");
        if sub == hashes {
            got_hashes.push(result.as_str().unwrap().parse::<alloy_primitives::B256>().unwrap());
        } else {
            assert_eq!(sub, full);
            assert_eq!(result["from"], json!(sender.address()), "{result}");
            assert!(result["blockHash"].is_null(), "pending: {result}");
            got_full.push(result["hash"].as_str().unwrap().parse::<alloy_primitives::B256>().unwrap());
        }
    }
    assert_eq!(got_hashes, sent, "each admitted hash once, in admission order");
    assert_eq!(got_full, sent);
    // Held for a nonce gap is not pending yet: nothing streams until the
    // gap fills.
    let held = node.send(&transfer(&sender, 4, random_signer().address(), 1)).unwrap();
    assert!(ws.next_note(Duration::from_millis(300)).is_none(), "a held transaction is not pending");
    let gap = node.send(&transfer(&sender, 3, random_signer().address(), 1)).unwrap();
    let mut next: Vec<_> = (0..4).filter_map(|_| ws.next_note(Duration::from_secs(10))).collect();
    next.retain(|(sub, _)| *sub == hashes);
    let order: Vec<_> =
        next.iter().map(|(_, r)| r.as_str().unwrap().parse::<alloy_primitives::B256>().unwrap()).collect();
    assert_eq!(order, vec![gap, held], "the gap first, then what it released");
}

#[test]
fn sigterm_closes_websockets_and_the_node_exits_promptly() {
    let mut node = TestNode::dev();
    let mut ws = Ws::connect(&node);
    ws.subscribe(json!(["newHeads"]));
    let t = Instant::now();
    let status = node.terminate();
    assert!(status.success(), "exit status {status}");
    assert!(t.elapsed() < Duration::from_secs(5), "shutdown took {:?} with a WebSocket open", t.elapsed());
    let (ended, _) = ws.drain_until_end(Duration::from_secs(5));
    assert_eq!(ended, Ended::Closed(1001), "going away");
}
