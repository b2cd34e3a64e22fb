//! A full node (`store.mode = "full"`) keeps a window of its chain: a
//! block below it answers geth's "pruned history unavailable" (4444) by
//! number and by hash, its transaction is not found, `earliest` is the
//! oldest block kept, and logs reaching below it are refused whole. A
//! kill -9 while it prunes leaves every kept block readable; a restart may
//! narrow the window but never widen it, nor turn it into an archive node;
//! replay, which needs every block, says why it cannot run.

use std::time::{Duration, Instant};

use alloy_primitives::U256;
use serde_json::{json, Value};

use crate::support::*;

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// The number `earliest` names now.
fn earliest(node: &TestNode) -> u64 {
    parse_u64(&node.ok("eth_getBlockByNumber", json!(["earliest", false]))["number"])
}

fn assert_pruned(err: &Value, what: &str) {
    assert_eq!(err["code"], 4444, "{what}: {err}");
    let message = err["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("pruned history unavailable"), "{what}: {err}");
}

fn set(node: &mut TestNode, key: &str, value: &str) {
    node.env.retain(|(k, _)| k != key);
    node.env.push((key.to_string(), value.to_string()));
}

#[test]
fn pruned_blocks_answer_4444_and_a_restart_cannot_widen_the_window() {
    let env = [
        ("SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "300"),
        ("SLUICE_STORE__HISTORY_BLOCKS", "16"),
        ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "5"),
    ];
    let mut node = TestNode::start(&env, &["--block-time-ms", "5"]);
    let to = random_signer().address();
    let hash = node.send(&transfer(&dev(1), 0, to, 7)).unwrap();
    let receipt = node.receipt(&hash);
    let (number, block_hash) = (parse_u64(&receipt["blockNumber"]), receipt["blockHash"].clone());

    // Idle blocks move the window past the transfer's block.
    let deadline = Instant::now() + Duration::from_secs(120);
    while earliest(&node) <= number {
        assert!(Instant::now() < deadline, "the window never passed block {number}; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = node.call("eth_getBlockByNumber", json!([hex(number), false])).unwrap_err();
    assert_pruned(&err, "block by number");
    assert!(err["message"].as_str().unwrap().contains(&format!("block {number}")), "{err}");
    assert_pruned(&node.call("eth_getBlockByHash", json!([block_hash, false])).unwrap_err(), "block by hash");
    assert_pruned(&node.call("eth_getBlockReceipts", json!([hex(number)])).unwrap_err(), "receipts");
    let logs = json!([{"fromBlock": hex(number), "toBlock": hex(number + 10)}]);
    assert_pruned(&node.call("eth_getLogs", logs).unwrap_err(), "logs");
    assert_eq!(node.ok("eth_getTransactionByHash", json!([hash])), Value::Null);
    assert_eq!(node.ok("eth_getTransactionReceipt", json!([hash])), Value::Null);
    // The pruned transfer's effect is still in the current state.
    assert_eq!(parse_u256(&node.ok("eth_getBalance", json!([to, "latest"]))), U256::from(7));
    // `earliest` is the oldest block kept (the window moves on with every
    // idle block: a block just above it may be gone a moment later, one
    // near the head is not); logs from it too.
    let oldest = earliest(&node);
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    node.ok("eth_getBlockByNumber", json!([hex(head - 10), true]));
    node.ok("eth_getLogs", json!([{"fromBlock": "earliest", "toBlock": hex(oldest + 50)}]));
    // The gauges follow within a scrape tick (500 ms).
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let metrics = node.metrics();
        let gauge = metric_in(&metrics, "sluice_store_oldest_block ").unwrap_or(0.0);
        if gauge > number as f64 {
            break metrics;
        }
        assert!(Instant::now() < deadline, "sluice_store_oldest_block {gauge}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(metrics.contains("sluice_store_table_bytes{table=\"blocks\"}"), "per-table bytes exported");

    // Killed while blocks are pruned at every commit: every kept block
    // still reads after the restart, and the window goes on moving.
    node.kill9();
    node.restart().expect("restarts after kill -9");
    let (from, head) = (earliest(&node), parse_u64(&node.ok("eth_blockNumber", json!([]))));
    assert!(from >= oldest, "the window never moves back: {from} < {oldest}");
    for n in from..=head {
        match node.call("eth_getBlockByNumber", json!([hex(n), false])) {
            Ok(b) => assert_eq!(parse_u64(&b["number"]), n, "kept block {n} reads after the kill"),
            // Pruned since `from` was read: only if the window moved past it.
            Err(e) => {
                assert_pruned(&e, "a block the window left");
                assert!(earliest(&node) > n, "kept block {n} does not read after the kill: {e}");
            }
        }
    }

    // Wider, or archive mode: refused at start, naming what to do.
    assert!(node.terminate().success(), "log:\n{}", node.log());
    set(&mut node, "SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "600");
    let log = node.restart().expect_err("a wider window is refused");
    assert!(log.contains("cannot come back") && log.contains("at most 300"), "{log}");
    set(&mut node, "SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "300");
    set(&mut node, "SLUICE_STORE__MODE", "archive");
    let log = node.restart().expect_err("archive mode on a pruned data dir is refused");
    assert!(log.contains("archive mode"), "{log}");
    // Narrower: accepted.
    set(&mut node, "SLUICE_STORE__MODE", "full");
    set(&mut node, "SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "256");
    node.restart().expect("a narrower window is accepted");
    let deadline = Instant::now() + Duration::from_secs(60);
    while parse_u64(&node.ok("eth_blockNumber", json!([]))) - earliest(&node) > 256 {
        assert!(Instant::now() < deadline, "the window never narrowed; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(node.terminate().success(), "log:\n{}", node.log());
    let (ok, out) = node.replay();
    assert!(!ok && out.contains("pruned history unavailable"), "{out}");
}
