//! Transfers from several senders are included, and balances, nonces,
//! receipts and blocks agree with what was sent.

use alloy_primitives::U256;
use serde_json::json;

use crate::support::*;

#[test]
fn transfers_from_several_senders_reach_receipts_and_balances_match() {
    let node = TestNode::dev();
    let recipient = random_signer().address();
    let senders: Vec<_> = (0..4).map(dev).collect();
    let before: Vec<U256> = senders.iter().map(|s| node.balance(s.address())).collect();
    let per_sender = 5u64;
    let mut hashes = Vec::new();
    for n in 0..per_sender {
        for s in &senders {
            let raw = transfer(s, n, recipient, 1_000 + n);
            let hash = node.send(&raw).expect("admitted");
            assert_eq!(hash, alloy_primitives::keccak256(&raw), "hash is keccak of the raw bytes");
            hashes.push(hash);
        }
    }
    // Pending nonce reflects the reservations at once.
    for s in &senders {
        let pending = node.nonce(s.address(), "pending");
        assert!(pending == per_sender, "pending nonce {pending}");
    }
    let mut fee_paid = vec![U256::ZERO; senders.len()];
    for (i, h) in hashes.iter().enumerate() {
        let r = node.receipt(h);
        assert_eq!(r["status"], "0x1");
        assert_eq!(parse_u64(&r["gasUsed"]), 21_000);
        let price = parse_u256(&r["effectiveGasPrice"]);
        assert_eq!(price, U256::from(BASE_FEE + 1_000), "base fee + tip");
        fee_paid[i % senders.len()] += price * U256::from(21_000u64);
        // The transaction is found by hash, in its block.
        let tx = node.ok("eth_getTransactionByHash", json!([h]));
        assert_eq!(tx["blockHash"], r["blockHash"]);
        assert_eq!(tx["hash"], json!(h));
        // blockTimestamp (execution-apis, 2026) is its block's timestamp.
        let block = node.ok("eth_getBlockByHash", json!([r["blockHash"], true]));
        assert_eq!(tx["blockTimestamp"], block["timestamp"], "{tx}");
        let listed =
            block["transactions"].as_array().unwrap().iter().find(|t| t["hash"] == json!(h)).cloned();
        assert_eq!(listed.map(|t| t["blockTimestamp"].clone()), Some(block["timestamp"].clone()));
    }
    let sent: u64 = (0..per_sender).map(|n| 1_000 + n).sum();
    for (i, s) in senders.iter().enumerate() {
        assert_eq!(node.nonce(s.address(), "latest"), per_sender);
        assert_eq!(node.balance(s.address()), before[i] - fee_paid[i] - U256::from(sent));
    }
    assert_eq!(node.balance(recipient), U256::from(sent * senders.len() as u64));

    // Blocks list the transactions, chain by parent hash, and carry the
    // base fee and a state root (the app hash). Blocks the idle timer
    // sealed while nothing waited are empty and chain like the rest.
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    assert!(head >= 1);
    let mut seen = 0;
    let mut parent = node.ok("eth_getBlockByNumber", json!(["0x0", false]))["hash"].clone();
    for n in 1..=head {
        let b = node.ok("eth_getBlockByNumber", json!([format!("{n:#x}"), true]));
        assert_eq!(b["parentHash"], parent);
        assert_eq!(b["baseFeePerGas"], "0x3b9aca00");
        assert_ne!(b["stateRoot"], json!(alloy_primitives::B256::ZERO));
        let txs = b["transactions"].as_array().unwrap();
        if txs.is_empty() {
            assert_eq!(b["gasUsed"], "0x0", "an empty block uses no gas");
        }
        seen += txs.len();
        let by_hash = node.ok("eth_getBlockByHash", json!([b["hash"], false]));
        assert_eq!(by_hash["number"], b["number"]);
        let receipts = node.ok("eth_getBlockReceipts", json!([format!("{n:#x}")]));
        assert_eq!(receipts.as_array().unwrap().len(), txs.len());
        parent = b["hash"].clone();
    }
    assert_eq!(seen, hashes.len());
}

#[test]
fn legacy_eip155_transfer_is_included() {
    let node = TestNode::dev();
    let to = random_signer().address();
    let hash = node.send(&legacy(&dev(1), 0, to, 7, Some(CHAIN_ID))).unwrap();
    let r = node.receipt(&hash);
    assert_eq!(r["type"], "0x0");
    assert_eq!(parse_u256(&r["effectiveGasPrice"]), U256::from(2 * BASE_FEE));
    assert_eq!(node.balance(to), U256::from(7));
    let tx = node.ok("eth_getTransactionByHash", json!([hash]));
    let v = parse_u64(&tx["v"]);
    assert!(v == CHAIN_ID * 2 + 35 || v == CHAIN_ID * 2 + 36, "EIP-155 v, got {v}");
    assert_eq!(tx["from"], json!(dev(1).address()));
}
