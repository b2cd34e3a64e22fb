//! Blocks of contract calls run on lanes (the parallel executor's chunked
//! engine) in the real node, and their results are those of executing the
//! transactions one by one: every transaction increments one counter, so
//! every chunk conflicts with the ones before it and is corrected;
//! `sluice replay` (the sequential executor) reaches the same app hashes.
//! By default a block admitted while it executes runs in order instead:
//! admission's threads hold the cores lanes would use.

use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::json;

use crate::support::*;

#[test]
fn conflicting_contract_calls_on_lanes_count_every_transaction() {
    // Lanes for blocks of 2+ transactions (the default is 64), even
    // though admission just recovered them (by default such blocks run in
    // order); a second between blocks, so that one batch lands in one
    // block.
    let mut node = TestNode::start(
        &[
            ("SLUICE_PIPELINE__OCC_MIN_BLOCK_TXS", "2"),
            ("SLUICE_PIPELINE__OCC_LANES_WHILE_ADMITTING", "true"),
            ("SLUICE_PRODUCER__BLOCK_TIME_MS", "1000"),
        ],
        &[],
    );
    let blocks = count_48_increments(&node);
    // The batch landed in few blocks, and at least one ran on lanes.
    assert!(blocks.len() <= 3, "blocks {blocks:?}");
    let lanes = node.metric("sluice_occ_blocks_total{path=\"lanes\"}").unwrap_or(0.0);
    assert!(lanes >= 1.0, "no block ran on lanes:\n{}", node.metrics());
    // The sequential executor re-runs the chain from disk to the same app
    // hashes.
    assert!(node.terminate().success(), "log:\n{}", node.log());
    node.assert_replay_matches_vault("after blocks on lanes");
}

/// Deploys a counter and increments it 48 times in one batch (4 senders x
/// 12 nonces; lanes judge a block contended only after 64 transactions);
/// checks every increment counted once; the blocks they landed in.
fn count_48_increments(node: &TestNode) -> std::collections::BTreeSet<String> {
    let owner = dev(0);
    let raw = eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    assert_eq!(r["status"], "0x1", "deploy receipt {r}");
    let counter: Address = r["contractAddress"].as_str().unwrap().parse().unwrap();

    let mut batch = Vec::new();
    for s in 0..4 {
        let signer = dev(s);
        let first = node.nonce(signer.address(), "pending");
        for n in 0..12 {
            let raw = eip1559(&signer, first + n, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000);
            batch.push(json!({"jsonrpc": "2.0", "id": batch.len(), "method": "eth_sendRawTransaction", "params": [raw]}));
        }
    }
    let answers = node.post(&json!(batch));
    let hashes: Vec<_> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["result"].as_str().unwrap_or_else(|| panic!("refused: {a}")).parse().unwrap())
        .collect();
    let mut blocks = std::collections::BTreeSet::new();
    for (i, h) in hashes.iter().enumerate() {
        let r = node.receipt(h);
        assert_eq!(r["status"], "0x1", "transaction {i}: {r}");
        blocks.insert(r["blockNumber"].as_str().unwrap().to_string());
    }
    let slot = node.ok("eth_getStorageAt", json!([counter, "0x0", "latest"]));
    assert_eq!(parse_u256(&slot), U256::from(48), "every increment counted once");
    blocks
}

#[test]
fn blocks_admitted_while_they_execute_run_in_order_by_default() {
    let node = TestNode::start(
        &[("SLUICE_PIPELINE__OCC_MIN_BLOCK_TXS", "2"), ("SLUICE_PRODUCER__BLOCK_TIME_MS", "1000")],
        &[],
    );
    count_48_increments(&node);
    // The batch's first block at least (a later one, if the batch spilled
    // over, follows no admission and may run on lanes).
    let busy = node.metric("sluice_occ_blocks_total{path=\"journal\",reason=\"busy\"}").unwrap_or(0.0);
    assert!(busy >= 1.0, "no block ran in order for admission:\n{}", node.metrics());
}
