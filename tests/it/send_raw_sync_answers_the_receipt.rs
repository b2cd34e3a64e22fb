//! `eth_sendRawTransactionSync` (EIP-7966): submits and answers the
//! receipt once its block is committed; a nonce gap is refused (code 6, the
//! expected nonce as data), not held; past the timeout, code 4 with the
//! hash, and the transaction still goes on to be included.

use alloy_primitives::keccak256;
use serde_json::json;

use crate::support::*;

#[test]
fn answers_the_receipt_refuses_gaps_and_times_out_with_the_hash() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let sender = dev(1);
    let to = random_signer().address();
    let raw = transfer(&sender, 0, to, 5);
    let r = node.ok("eth_sendRawTransactionSync", json!([raw]));
    assert_eq!(r["status"], "0x1", "{r}");
    assert_eq!(r["transactionHash"], json!(keccak256(&raw)));
    assert_eq!(node.balance(to), alloy_primitives::U256::from(5), "committed when answered");

    // A gap: refused with the expected nonce, nothing held.
    let gap = node.call("eth_sendRawTransactionSync", json!([transfer(&sender, 3, to, 5)])).unwrap_err();
    assert_eq!((gap["code"].as_i64(), gap["data"].as_str()), (Some(6), Some("0x1")), "{gap}");
    assert_eq!(node.ok("txpool_status", json!([]))["queued"], "0x0");

    // The timeout as a quantity (viem sends it so) works too.
    let r = node.ok("eth_sendRawTransactionSync", json!([transfer(&sender, 1, to, 5), "0x2710"]));
    assert_eq!(r["status"], "0x1", "{r}");
}

#[test]
fn a_receipt_later_than_the_timeout_is_code_4_with_the_hash() {
    let node =
        TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")], &["--block-time-ms", "1500"]);
    let raw = transfer(&dev(2), 0, random_signer().address(), 1);
    let e = node.call("eth_sendRawTransactionSync", json!([raw, 100])).unwrap_err();
    assert_eq!(e["code"], 4, "{e}");
    assert_eq!(e["data"], json!(keccak256(&raw)));
    assert!(e["message"].as_str().unwrap_or_default().contains("wasn't processed in 100ms"), "{e}");
    // It was admitted: it is included all the same.
    assert_eq!(node.receipt(&keccak256(&raw))["status"], "0x1");
}
