//! An idle chain keeps moving: with `producer.idle_block_interval_ms` set,
//! a node with nothing to do seals an empty block about that often (never
//! more often), and with 0 it seals none. Empty blocks are full citizens:
//! chained by parent hash, served over HTTP and `newHeads`, executed and
//! committed with a chained app hash, kept across a restart (which resumes
//! after them), and re-executed by `sluice replay`. An idle seal waits for
//! room downstream like any other, so a slow stage never gets two blocks on
//! one parent.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{support::*, ws_client::Ws};

/// The head height.
fn head(node: &TestNode) -> u64 {
    parse_u64(&node.ok("eth_blockNumber", json!([])))
}

/// Block `n` (hashes only).
fn block(node: &TestNode, n: u64) -> Value {
    node.ok("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))
}

/// Waits (up to `within`) until the head reaches `height`; the head then.
fn wait_height(node: &TestNode, height: u64, within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        let h = head(node);
        if h >= height {
            return h;
        }
        assert!(Instant::now() < deadline, "head {h} never reached {height} in {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts blocks `from..=to` chain by parent hash onto block `from - 1`;
/// returns how many carried no transaction.
fn assert_chained(node: &TestNode, from: u64, to: u64) -> usize {
    let mut parent = block(node, from - 1)["hash"].clone();
    let mut empty = 0;
    for n in from..=to {
        let b = block(node, n);
        assert_eq!(b["parentHash"], parent, "block {n} builds on block {}", n - 1);
        if b["transactions"].as_array().unwrap().is_empty() {
            assert_eq!(b["gasUsed"], "0x0", "empty block {n}");
            empty += 1;
        }
        parent = b["hash"].clone();
    }
    empty
}

#[test]
fn an_idle_node_seals_empty_blocks_at_the_configured_interval() {
    let node = TestNode::start(&[], &["--idle-block-interval-ms", "500"]);
    let mut ws = Ws::connect(&node);
    let heads = ws.subscribe(json!(["newHeads"]));
    let start = head(&node);
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let end = head(&node);
    let elapsed = t.elapsed();
    // At least 2 (a loaded 2-core machine may run late), never more than
    // one per interval: each block restarts the idle timer (one more for a
    // block sealed just before `start` was read and committed after).
    assert!(end >= start + 2, "only {} blocks in {elapsed:?} at 500 ms", end - start);
    let most = elapsed.as_millis() as u64 / 500 + 2;
    assert!(end - start <= most, "{} blocks in {elapsed:?}: more than one per 500 ms", end - start);

    assert_eq!(assert_chained(&node, 1, end), end as usize, "nothing was sent: every block is empty");
    let b = node.ok("eth_getBlockByNumber", json!([format!("{end:#x}"), true]));
    assert_eq!(b["transactions"], json!([]));
    assert_eq!(b["gasUsed"], "0x0");
    assert_ne!(b["stateRoot"], block(&node, end - 1)["stateRoot"], "the app hash chains through it");
    assert_eq!(node.ok("eth_getBlockReceipts", json!([format!("{end:#x}")])), json!([]));
    assert_eq!(node.ok("eth_getBlockTransactionCountByNumber", json!([format!("{end:#x}")])), "0x0");

    // Subscribers get empty blocks' headers like any other.
    let (sub, first) = ws.next_note(Duration::from_secs(5)).expect("a newHeads notification");
    assert_eq!(sub, heads);
    let n = parse_u64(&first["number"]);
    assert!(n > start, "a head after the subscription");
    assert_eq!(first["hash"], block(&node, n)["hash"]);
    assert_eq!(first["gasUsed"], "0x0");
}

#[test]
fn with_zero_no_empty_block_is_sealed() {
    let node =
        TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")], &["--block-time-ms", "20"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(head(&node), 0, "an idle chain with idle_block_interval_ms = 0 stays at genesis");
    // Transactions still move it, one block each here.
    let to = random_signer().address();
    let r = node.receipt(&node.send(&transfer(&dev(0), 0, to, 1)).unwrap());
    assert_eq!(parse_u64(&r["blockNumber"]), 1);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(head(&node), 1, "and nothing follows it");
}

#[test]
fn a_restart_resumes_after_empty_blocks_and_replay_matches_the_vault() {
    let mut node = TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "200")], &[]);
    // A transaction between empty blocks, so replay crosses both kinds.
    wait_height(&node, 2, Duration::from_secs(20));
    let to = random_signer().address();
    let r = node.receipt(&node.send(&transfer(&dev(0), 0, to, 5)).unwrap());
    let with_tx = parse_u64(&r["blockNumber"]);
    let before = wait_height(&node, with_tx + 2, Duration::from_secs(20));
    assert!(assert_chained(&node, 1, before) >= 3, "empty blocks around the transfer");
    let kept = block(&node, before);
    assert!(node.terminate().success(), "log:\n{}", node.log());

    node.restart().unwrap();
    // Everything sealed before the stop is still there, unchanged...
    let after = head(&node);
    assert!(after >= before, "head {after} went back below {before}");
    assert_eq!(block(&node, before), kept);
    assert_eq!(node.ok("eth_getTransactionReceipt", json!([r["transactionHash"]])), r);
    // ...and the chain continues on top of it, with empty blocks again.
    let next = wait_height(&node, before + 2, Duration::from_secs(20));
    assert_eq!(block(&node, before + 1)["parentHash"], kept["hash"]);
    assert_chained(&node, 1, next);
    assert_eq!(node.balance(to), alloy_primitives::U256::from(5));
    assert!(node.terminate().success(), "log:\n{}", node.log());
    node.assert_replay_matches_vault("idle chain");
}

#[test]
fn idle_seals_wait_for_a_slow_stage_and_never_share_a_parent() {
    // Idle seals due every 10 ms against an execution stage that takes 150 ms per
    // block and mailboxes of one block: without the wait for room (and the
    // `sealing` guard against actix replaying missed ticks), blocks would
    // pile up or two would be sealed on one parent and commit would halt.
    let node = TestNode::start(
        &[
            ("SLUICE_FAULTS__FAILPOINTS", "executor=delay(150)*20"),
            ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "10"),
            ("SLUICE_PIPELINE__PREPARE_MAILBOX_BLOCKS", "1"),
            ("SLUICE_PIPELINE__PREPARE_AHEAD_BLOCKS", "1"),
            ("SLUICE_PIPELINE__COMMIT_MAILBOX_BLOCKS", "1"),
        ],
        &["--block-time-ms", "5"],
    );
    // Transactions arrive meanwhile, so a second seal on one parent would
    // have something to carry too.
    let to = random_signer().address();
    let mut hashes = Vec::new();
    let mut worst_lag = 0.0f64;
    for nonce in 0..15 {
        hashes.push(node.send(&transfer(&dev(1), nonce, to, 1)).unwrap());
        if let (Some(produced), Some(committed)) = node.produced_and_committed() {
            worst_lag = worst_lag.max(produced - committed);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for h in &hashes {
        assert_eq!(node.receipt(h)["status"], "0x1");
    }
    assert_eq!(node.metric("sluice_store_halted"), Some(0.0), "log:\n{}", node.log());
    // Sealed but uncommitted blocks are bounded by the stages and their
    // one-block mailboxes (preparation, executor, commit, each holding one
    // and working on one), however many idle seals fell due.
    assert!(worst_lag <= 6.0, "{worst_lag} blocks sealed ahead of commit");
    let end = head(&node);
    assert!(assert_chained(&node, 1, end) >= 1, "idle seals happened");
    let mut included = 0;
    for n in 1..=end {
        included += block(&node, n)["transactions"].as_array().unwrap().len();
    }
    assert_eq!(included, hashes.len(), "every transaction in exactly one block");
}
