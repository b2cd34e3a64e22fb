//! A flood into a tiny mempool: some transactions are refused with
//! `-32003 txpool is full`, every admitted one is included, the node keeps
//! answering reads, and refused transactions are accepted once there is
//! room again.

use std::collections::BTreeMap;

use alloy_primitives::Bytes;
use serde_json::{json, Value};

use crate::support::*;

/// Writes a geth-style genesis funding `signers`.
pub fn genesis_for(node_dir: &std::path::Path, signers: &[sluice_txpool::Signer]) -> std::path::PathBuf {
    let alloc: BTreeMap<String, Value> = signers
        .iter()
        .map(|s| (format!("{}", s.address()), json!({"balance": "0xde0b6b3a7640000"})))
        .collect();
    let path = node_dir.join(format!("genesis-{}.json", signers.len()));
    std::fs::create_dir_all(node_dir).unwrap();
    std::fs::write(&path, json!({"config": {"chainId": CHAIN_ID}, "alloc": alloc}).to_string()).unwrap();
    path
}

#[test]
fn flood_gets_txpool_full_and_every_admitted_tx_is_included() {
    let senders: Vec<_> = (0..100).map(|_| random_signer()).collect();
    let dir = std::env::temp_dir().join(format!("sluice-genesis-{}", std::process::id()));
    let genesis = genesis_for(&dir, &senders);
    let node = TestNode::start(
        &[("SLUICE_MEMPOOL__MAX_TXS", "20")],
        &["--block-time-ms", "1000", "--genesis", genesis.to_str().unwrap()],
    );
    let sink = random_signer().address();
    let raws: Vec<Bytes> = senders.iter().map(|s| transfer(s, 0, sink, 1)).collect();
    let answers = node.send_batch(&raws);
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for (i, a) in answers.iter().enumerate() {
        match a.get("error") {
            None => admitted.push(i),
            Some(e) => {
                assert_eq!(e["code"], -32003, "{e}");
                assert_eq!(e["message"], "txpool is full");
                refused.push(i);
            }
        }
    }
    assert!(admitted.len() >= 20, "the pool takes what fits: {}", admitted.len());
    assert!(!refused.is_empty(), "a flood past the bound must be refused");
    assert_eq!(admitted.len() + refused.len(), raws.len(), "every call answered");
    // The node answers reads while the pool is full.
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
    for &i in &admitted {
        let r = node.receipt(&alloy_primitives::keccak256(&raws[i]));
        assert_eq!(r["status"], "0x1");
    }
    for &i in &refused {
        let hash = alloy_primitives::keccak256(&raws[i]);
        assert!(node.ok("eth_getTransactionByHash", json!([hash])).is_null(), "refused means not kept");
    }
    // With room again, a refused transaction is admitted and included.
    let again = &raws[refused[0]];
    let r = node.receipt(&node.send(again).unwrap());
    assert_eq!(r["status"], "0x1");
    assert!(node.metric("sluice_tx_admission_total{result=\"txpool_full\"}").unwrap_or(0.0) >= 1.0);
    let _ = std::fs::remove_dir_all(dir);
}
