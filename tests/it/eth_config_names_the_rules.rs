//! `eth_config` (EIP-7910) names the rules the node runs, as geth answers
//! it: the running spec's precompiles under EIP-7910's names (Osaka's
//! P256VERIFY at 0x100, which Prague lacks), its blob schedule, the chain
//! id, the EIP-2124 fork hash of block 0 (every fork active at genesis,
//! nothing scheduled: `next` and `last` are null), and no system contracts
//! (sluice runs none of their system calls).

use alloy_primitives::B256;
use serde_json::{json, Value};

use crate::support::*;

const P256VERIFY_AT: &str = "0x0000000000000000000000000000000000000100";

/// The fork id a node must answer: the CRC-32 of its own block 0's hash.
fn fork_id_of_block_zero(node: &TestNode) -> String {
    let block0 = node.ok("eth_getBlockByNumber", json!(["0x0", false]));
    let hash: B256 = serde_json::from_value(block0["hash"].clone()).unwrap();
    format!("0x{}", alloy_primitives::hex::encode(sluice_rpc::eth_config::fork_hash(&hash)))
}

fn assert_nothing_scheduled(config: &Value) {
    assert_eq!(config["next"], Value::Null, "{config}");
    assert_eq!(config["last"], Value::Null, "{config}");
    let current = &config["current"];
    assert_eq!(current["activationTime"], json!(0), "{config}");
    assert_eq!(current["chainId"], json!("0x7a69"), "{config}");
    assert_eq!(current["systemContracts"], json!({}), "{config}");
    assert_eq!(current["blobSchedule"], json!({"baseFeeUpdateFraction": 5_007_716, "max": 9, "target": 6}));
}

#[test]
fn osaka_names_p256verify_and_prague_does_not() {
    let mut osaka = TestNode::dev();
    let config = osaka.ok("eth_config", json!([]));
    assert_nothing_scheduled(&config);
    let precompiles = &config["current"]["precompiles"];
    assert_eq!(precompiles["P256VERIFY"], json!(P256VERIFY_AT), "{config}");
    assert_eq!(precompiles["ECREC"], json!("0x0000000000000000000000000000000000000001"));
    assert_eq!(precompiles.as_object().map(|m| m.len()), Some(18), "{config}");
    let fork_id = fork_id_of_block_zero(&osaka);
    assert_eq!(config["current"]["forkId"], json!(fork_id), "{config}");
    // Asked again with no parameters at all, and after a restart (block 0's
    // hash is then recomputed from the genesis, not read back): the same.
    let bare = osaka.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "eth_config"}));
    assert_eq!(bare["result"], config, "{bare}");
    osaka.restart().unwrap();
    assert_eq!(osaka.ok("eth_config", json!([])), config);

    let prague = TestNode::start(&[("SLUICE_CHAIN__SPEC", "prague")], &["--block-time-ms", "50"]);
    let config = prague.ok("eth_config", json!([]));
    assert_nothing_scheduled(&config);
    let precompiles = &config["current"]["precompiles"];
    assert_eq!(precompiles.get("P256VERIFY"), None, "{config}");
    assert!(
        !precompiles.as_object().unwrap().values().any(|a| a == P256VERIFY_AT),
        "nothing at 0x100 on Prague: {config}"
    );
    assert_eq!(precompiles.as_object().map(|m| m.len()), Some(17), "{config}");
    assert_eq!(precompiles["BLS12_PAIRING_CHECK"], json!("0x000000000000000000000000000000000000000f"));
    assert_eq!(config["current"]["forkId"], json!(fork_id_of_block_zero(&prague)), "{config}");
}
