//! SIGTERM stops admission first, then drains the pipeline in order: the
//! transactions still in the mempool are sealed, executed and committed
//! before the process exits, and it exits 0.

use crate::support::*;

#[test]
fn sigterm_commits_what_was_admitted_and_exits_cleanly() {
    // A block time far beyond the test and no idle blocks (an idle seal
    // would carry the waiting transactions): only shutdown can seal them.
    let mut node =
        TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")], &["--block-time-ms", "600000"]);
    for n in 0..3 {
        node.send(&transfer(&dev(0), n, random_signer().address(), 1)).unwrap();
    }
    assert_eq!(node.nonce(dev(0).address(), "latest"), 0, "nothing committed yet");
    let status = node.terminate();
    assert!(status.success(), "exit status {status}; log:\n{}", node.log());
    let log = node.log();
    assert!(log.contains("last block committed"), "{log}");
    assert!(log.contains("height=1"), "the pending block was committed before exit:\n{log}");
}

#[test]
fn sigterm_keeps_blocks_a_grouped_sync_had_not_synced() {
    // With syncs grouped, only a crash may lose the unsynced blocks: a
    // clean stop closes the database, which makes them durable (and leaves
    // nothing to repair at the next start).
    let mut node = TestNode::start(
        &[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0"), ("SLUICE_STORE__SYNC_EVERY_BLOCKS", "1000")],
        &["--block-time-ms", "50"],
    );
    for n in 0..3 {
        node.receipt(&node.send(&transfer(&dev(0), n, random_signer().address(), 1)).unwrap());
    }
    let head = node.ok("eth_blockNumber", serde_json::json!([]));
    assert!(node.terminate().success(), "{}", node.log());
    node.restart().unwrap();
    assert_eq!(node.ok("eth_blockNumber", serde_json::json!([])), head);
    assert_eq!(node.nonce(dev(0).address(), "latest"), 3);
}
