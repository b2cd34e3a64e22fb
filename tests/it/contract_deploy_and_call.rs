//! A contract is deployed, a transaction changes its storage and emits a
//! log, `eth_call` reads it, a revert answers code 3 with its data, and
//! `eth_getLogs` filters by address and topic.

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::json;

use crate::support::*;

fn deploy(node: &TestNode) -> Address {
    let owner = dev(0);
    let nonce = node.nonce(owner.address(), "pending");
    let gas = parse_u64(
        &node.ok("eth_estimateGas", json!([{"from": owner.address(), "input": counter_initcode()}])),
    );
    let raw = eip1559(&owner, nonce, TxKind::Create, U256::ZERO, counter_initcode(), gas);
    let r = node.receipt(&node.send(&raw).unwrap());
    assert_eq!(r["status"], "0x1", "deploy receipt {r}");
    r["contractAddress"].as_str().unwrap().parse().unwrap()
}

#[test]
fn deploy_call_storage_logs_and_revert() {
    let node = TestNode::dev();
    let counter = deploy(&node);
    let code = node.ok("eth_getCode", json!([counter, "latest"]));
    assert_eq!(code, json!(Bytes::from(counter_runtime())));

    // eth_call executes without changing state.
    let out = node.ok("eth_call", json!([{"to": counter, "data": "0x"}, "latest"]));
    assert_eq!(parse_u256(&out), U256::from(1));
    let slot = node.ok("eth_getStorageAt", json!([counter, "0x0", "latest"]));
    assert_eq!(parse_u256(&slot), U256::ZERO);

    // Two transactions increment the stored counter and log.
    let user = dev(2);
    let gas = parse_u64(&node.ok("eth_estimateGas", json!([{"from": user.address(), "to": counter}])));
    assert!(gas > 21_000 && gas < 100_000, "estimate {gas}");
    let mut last = B256::ZERO;
    for n in 0..2 {
        last = node.send(&eip1559(&user, n, TxKind::Call(counter), U256::ZERO, Bytes::new(), gas)).unwrap();
    }
    let r = node.receipt(&last);
    assert_eq!(r["status"], "0x1");
    assert_eq!(r["logs"][0]["address"], json!(counter));
    assert_eq!(r["logs"][0]["topics"][0], json!(counter_topic()));
    assert_eq!(parse_u256(&r["logs"][0]["data"]), U256::from(2));
    let slot = node.ok("eth_getStorageAt", json!([counter, "0x0", "latest"]));
    assert_eq!(parse_u256(&slot), U256::from(2));

    // A reverting call answers code 3 with the revert data.
    let err = node.call("eth_call", json!([{"to": counter, "data": "0xff"}, "latest"])).unwrap_err();
    assert_eq!(err["code"], 3);
    assert_eq!(err["data"], "0xdeadbeef");
    assert!(err["message"].as_str().unwrap().starts_with("execution reverted"));
    let err = node
        .call("eth_estimateGas", json!([{"from": user.address(), "to": counter, "data": "0xff"}]))
        .unwrap_err();
    assert_eq!(err["code"], 3, "{err}");

    // A reverted transaction is included with status 0.
    let raw = eip1559(&user, 2, TxKind::Call(counter), U256::ZERO, Bytes::from_static(&[0xff]), 60_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    assert_eq!(r["status"], "0x0");
    assert!(r["logs"].as_array().unwrap().is_empty());

    // Logs by address and topic, over the whole chain.
    let logs = node.ok("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest", "address": counter}]));
    assert_eq!(logs.as_array().unwrap().len(), 2);
    let logs = node.ok("eth_getLogs", json!([{"fromBlock": "earliest", "topics": [[counter_topic()]]}]));
    assert_eq!(logs.as_array().unwrap().len(), 2);
    let none = node.ok("eth_getLogs", json!([{"fromBlock": "0x0", "topics": [B256::repeat_byte(9)]}]));
    assert!(none.as_array().unwrap().is_empty());
    let other = node.ok("eth_getLogs", json!([{"fromBlock": "0x0", "address": [random_signer().address()]}]));
    assert!(other.as_array().unwrap().is_empty());
}
