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
    // As in geth, a filter with more topic positions than a log has topics
    // never matches it, even when the extra positions accept anything.
    assert_eq!(logs[0]["topics"].as_array().unwrap().len(), 1);
    let wider =
        node.ok("eth_getLogs", json!([{"fromBlock": "earliest", "topics": [[counter_topic()], null]}]));
    assert!(wider.as_array().unwrap().is_empty(), "{wider}");
    let none = node.ok("eth_getLogs", json!([{"fromBlock": "0x0", "topics": [B256::repeat_byte(9)]}]));
    assert!(none.as_array().unwrap().is_empty());
    let other = node.ok("eth_getLogs", json!([{"fromBlock": "0x0", "address": [random_signer().address()]}]));
    assert!(other.as_array().unwrap().is_empty());
}

/// A creation's receipt carries its contract address the first time any
/// method serves it: polled as fast as the node answers from the moment
/// the deployments are sent, by hash and in its block's receipts.
#[test]
fn a_creation_receipt_is_complete_the_first_time_it_is_served() {
    let node = TestNode::start(&[], &["--block-time-ms", "20"]);
    let owner = dev(0);
    for round in 0..5u64 {
        let first = node.nonce(owner.address(), "pending");
        let raws: Vec<Bytes> = (0..4)
            .map(|i| eip1559(&owner, first + i, TxKind::Create, U256::ZERO, counter_initcode(), 200_000))
            .collect();
        let hashes: Vec<B256> = node
            .send_batch(&raws)
            .iter()
            .map(|a| a["result"].as_str().unwrap_or_else(|| panic!("refused: {a}")).parse().unwrap())
            .collect();
        let mut pending: Vec<usize> = (0..hashes.len()).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !pending.is_empty() {
            assert!(std::time::Instant::now() < deadline, "round {round}: no receipts for {pending:?}");
            pending.retain(|&i| {
                let r = node.ok("eth_getTransactionReceipt", json!([hashes[i]]));
                if r.is_null() {
                    return true;
                }
                let want = json!(owner.address().create(first + i as u64));
                assert_eq!(r["status"], "0x1", "round {round} #{i}: {r}");
                assert_eq!(r["contractAddress"], want, "round {round} #{i}: {r}");
                let block = node.ok("eth_getBlockReceipts", json!([r["blockHash"]]));
                let at = parse_u64(&r["transactionIndex"]) as usize;
                assert_eq!(block[at]["contractAddress"], want, "round {round} #{i} in its block: {block}");
                false
            });
        }
    }
}
