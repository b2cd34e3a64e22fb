//! A producer held up by backpressure for several block times (here a slow
//! executor, injected) seals each height once: actix's interval catches up
//! on missed ticks inside one poll, and before the producer guarded against
//! it, two seals queued on the same parent made two blocks with one number
//! and store commit halted the node ("committed out of order").

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[test]
fn a_slow_stage_never_makes_two_blocks_with_one_number() {
    let node = TestNode::start(
        &[
            ("SLUICE_FAULTS__FAILPOINTS", "executor=delay(40)*25"),
            ("SLUICE_PIPELINE__PREPARE_MAILBOX_BLOCKS", "1"),
            ("SLUICE_PIPELINE__PREPARE_AHEAD_BLOCKS", "1"),
            ("SLUICE_PIPELINE__COMMIT_MAILBOX_BLOCKS", "1"),
        ],
        &["--block-time-ms", "5"],
    );
    // Transactions keep arriving while the producer waits for room, so a
    // second seal queued on the same parent would find some to seal.
    let senders: Vec<_> = (0..3)
        .map(|i| {
            let url = node.url.clone();
            std::thread::spawn(move || {
                let to = random_signer().address();
                let mut hashes = Vec::new();
                for nonce in 0..40 {
                    let raw = transfer(&dev(i), nonce, to, 1);
                    let v = rpc(&url, "eth_sendRawTransaction", json!([raw])).unwrap();
                    assert!(v.get("result").is_some(), "{v}");
                    hashes.push(alloy_primitives::keccak256(&raw));
                    std::thread::sleep(Duration::from_millis(8));
                }
                hashes
            })
        })
        .collect();
    let hashes: Vec<_> = senders.into_iter().flat_map(|t| t.join().unwrap()).collect();
    for h in &hashes {
        assert_eq!(node.receipt(h)["status"], "0x1");
    }
    assert_eq!(node.metric("sluice_store_halted"), Some(0.0), "log:\n{}", node.log());
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    let mut total = 0;
    for n in 1..=head {
        let b = node.ok("eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        total += b["transactions"].as_array().unwrap().len();
    }
    assert_eq!(total, hashes.len(), "every transaction in exactly one block");
}
