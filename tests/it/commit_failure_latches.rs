//! A failed commit is never silent: block production and execution stop,
//! reads keep working, admission refuses naming the cause, every admitted
//! transaction that can no longer be committed is reported lost by hash
//! (and answers null, not pending), held future-nonce ones too, the error
//! shows in logs and metrics,
//! and the node exits non-zero on shutdown.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

#[test]
fn injected_commit_failure_halts_writes_but_not_reads() {
    // The failure is injected at height 2, meant for the second transfer's
    // block: no empty block may take height 1 or 2, so the chain moves only
    // with transactions.
    let mut node = TestNode::start(
        &[
            ("SLUICE_STORE__INJECT_COMMIT_FAILURE_AT_HEIGHT", "2"),
            ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0"),
        ],
        &["--block-time-ms", "20"],
    );
    let to = random_signer().address();
    let first = node.send(&transfer(&dev(0), 0, to, 1)).unwrap();
    node.receipt(&first);
    // Held for a gap (dev 2's nonce 0 never comes): a halt drops it too.
    let held = node.send(&transfer(&dev(2), 1, to, 1)).unwrap();
    let second = node.send(&transfer(&dev(0), 1, to, 1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.metric("sluice_store_halted").unwrap_or(0.0) < 1.0 {
        assert!(Instant::now() < deadline, "the failure never showed in metrics; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Reads still work, at the last good height.
    assert_eq!(parse_u64(&node.ok("eth_blockNumber", json!([]))), 1);
    assert_eq!(node.balance(to), alloy_primitives::U256::from(1));
    assert!(node.ok("eth_getTransactionReceipt", json!([second])).is_null());
    // The transaction of the failed block is reported lost, once, and is
    // no longer answered as pending.
    assert!(node.ok("eth_getTransactionByHash", json!([second])).is_null());
    // So is the held one, within a sweep (500 ms).
    while node.metric("sluice_txs_dropped_total{reason=\"halted\"}") != Some(2.0) {
        assert!(Instant::now() < deadline, "the held transaction was not reported:\n{}", node.metrics());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(node.ok("eth_getTransactionByHash", json!([held])).is_null());
    for hash in [second, held] {
        assert!(node.log().contains(&format!("{hash}")), "the lost hash is logged:\n{}", node.log());
    }
    // Nothing new is accepted, and the refusal names the cause.
    let e = node.send(&transfer(&dev(1), 0, to, 1)).unwrap_err();
    assert_eq!(e["code"], -32603);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(
            "store halted: commit of block 2 failed: storage I/O error: injected commit failure at height 2"
        ),
        "{e}"
    );
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        node.metric("sluice_txs_dropped_total{reason=\"halted\"}"),
        Some(2.0),
        "the halt's sweeps report each transaction once"
    );
    assert!(node.log().contains("injected commit failure at height 2"), "{}", node.log());
    let status = node.terminate();
    assert!(!status.success(), "a halted node exits non-zero");
}
