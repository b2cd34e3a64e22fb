//! A transaction whose nonce is above its sender's next one is held, as
//! geth holds it, and enters the mempool when the gap fills: a sender's
//! nonces sent in reverse order are all included, in order. Held ones are
//! bounded per sender, expire (reported), and leave
//! `eth_getTransactionCount(addr, "pending")` alone.

use std::time::{Duration, Instant};

use alloy_primitives::B256;
use serde_json::json;

use crate::support::*;

#[test]
fn nonces_sent_in_reverse_order_are_all_included_in_order() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let sender = dev(2);
    let to = random_signer().address();
    let mut hashes: Vec<(u64, B256)> = Vec::new();
    for nonce in (1..10u64).rev() {
        hashes.push((
            nonce,
            node.send(&transfer(&sender, nonce, to, nonce)).expect("held, answered with its hash"),
        ));
    }
    let status = node.ok("txpool_status", json!([]));
    assert_eq!(
        (status["pending"].as_str(), status["queued"].as_str()),
        (Some("0x0"), Some("0x9")),
        "{status}"
    );
    // txpool_content lists each held one under its sender and nonce, as
    // geth does (nonce keys in decimal).
    let content = node.ok("txpool_content", json!([]));
    let held = &content["queued"][format!("{:#x}", sender.address())];
    assert_eq!(held.as_object().map(|m| m.len()), Some(9), "{content}");
    assert_eq!(held["5"]["hash"], json!(hashes[4].1), "{content}");
    assert_eq!(held["5"]["nonce"], "0x5", "{content}");
    assert_eq!(content["pending"], json!({}), "{content}");
    // Held transactions do not move the pending nonce (as geth).
    assert_eq!(node.nonce(sender.address(), "pending"), 0);
    // The same held transaction again is already known.
    let again = node.send(&transfer(&sender, 5, to, 5)).unwrap_err();
    assert_eq!(again["message"], "already known", "{again}");
    // The gap fills: everything held follows, in nonce order.
    hashes.push((0, node.send(&transfer(&sender, 0, to, 0)).expect("admitted")));
    hashes.sort();
    let mut last = (0u64, 0u64);
    for (nonce, hash) in &hashes {
        let r = node.receipt(hash);
        assert_eq!(r["status"], "0x1", "nonce {nonce}: {r}");
        let at = (parse_u64(&r["blockNumber"]), parse_u64(&r["transactionIndex"]));
        assert!(
            at > last || *nonce == 0,
            "nonce {nonce} included after nonce {} ({at:?} vs {last:?})",
            nonce - 1
        );
        last = at;
    }
    assert_eq!(node.nonce(sender.address(), "latest"), 10);
    assert_eq!(node.balance(to), alloy_primitives::U256::from(45));
    let status = node.ok("txpool_status", json!([]));
    assert_eq!(status["queued"], "0x0");
}

#[test]
fn held_transactions_are_bounded_per_sender_and_expire_reported() {
    let node = TestNode::start(
        &[
            ("SLUICE_MEMPOOL__MAX_FUTURE_TXS_PER_SENDER", "3"),
            ("SLUICE_MEMPOOL__FUTURE_TX_LIFETIME_MS", "300"),
            ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "100"),
        ],
        &["--block-time-ms", "50"],
    );
    let sender = dev(3);
    let to = random_signer().address();
    for nonce in [4u64, 3, 2] {
        node.send(&transfer(&sender, nonce, to, 1)).expect("held");
    }
    let e = node.send(&transfer(&sender, 1, to, 1)).unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    // Past the lifetime, the held ones are dropped and reported (each with
    // its hash in the log), and the gap filling later brings nothing.
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.metric("sluice_txs_dropped_total{reason=\"future_expired\"}").unwrap_or(0.0) < 3.0 {
        assert!(Instant::now() < deadline, "held transactions never expired:\n{}", node.metrics());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(node.log().contains("held transaction dropped"), "{}", node.log());
    assert_eq!(node.ok("txpool_status", json!([]))["queued"], "0x0");
    let first = node.send(&transfer(&sender, 0, to, 1)).expect("admitted");
    node.receipt(&first);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(node.nonce(sender.address(), "latest"), 1, "only nonce 0 was included");
}
