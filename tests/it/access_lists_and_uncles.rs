//! `eth_createAccessList` answers as geth: the slots a call touches with
//! the gas it uses carrying them, a failed call's error beside its list,
//! at any retained block; the pre-merge uncle methods answer empty.

use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::json;

use crate::support::*;

#[test]
fn access_lists_name_the_touched_slots_and_their_gas() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let owner = dev(0);
    let raw = eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    let counter: Address = r["contractAddress"].as_str().unwrap().parse().unwrap();
    let deployed = format!("{:#x}", parse_u64(&r["blockNumber"]));
    let call = json!({"from": owner.address(), "to": counter});
    let out = node.ok("eth_createAccessList", json!([call, "latest"]));
    let slot0 = format!("0x{}", "0".repeat(64));
    assert_eq!(
        out["accessList"],
        json!([{"address": counter, "storageKeys": [slot0]}]),
        "the counter's slot, not the sender (warm anyway): {out}"
    );
    assert!(out.get("error").is_none(), "{out}");
    // The gas is what the transaction costs carrying the list: sent with
    // it, its receipt uses exactly that.
    let gas = parse_u64(&out["gasUsed"]);
    let list: alloy_eips::eip2930::AccessList =
        serde_json::from_value(out["accessList"].clone()).expect("an access list");
    let raw = owner.sign_raw(alloy_consensus::TypedTransaction::Eip1559(alloy_consensus::TxEip1559 {
        chain_id: 31337,
        nonce: 1,
        gas_limit: 100_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000,
        to: TxKind::Call(counter),
        value: U256::ZERO,
        access_list: list,
        input: Bytes::new(),
    }));
    let r = node.receipt(&node.send(&raw).unwrap());
    assert_eq!(r["status"], "0x1", "{r}");
    assert_eq!(parse_u64(&r["gasUsed"]), gas, "receipt {r} vs createAccessList {out}");
    // Too little gas: the list still, and the failure beside it (geth).
    let starved = json!({"from": owner.address(), "to": counter, "gas": "0x6590"});
    let out = node.ok("eth_createAccessList", json!([starved]));
    assert_eq!(out["error"], "out of gas", "{out}");
    // At an older block, the state then: before the deploy no code, so
    // nothing touched.
    let before = format!("{:#x}", u64::from_str_radix(&deployed[2..], 16).unwrap() - 1);
    let out = node.ok("eth_createAccessList", json!([call, before]));
    assert_eq!(out["accessList"], json!([]), "{out}");
    assert_eq!(parse_u64(&out["gasUsed"]), 21_000, "{out}");
    // Bad input: a clear error, not a panic.
    let err = node.call("eth_createAccessList", json!([{"to": "0x12"}])).unwrap_err();
    assert_eq!(err["code"], -32602, "{err}");
}

#[test]
fn uncle_methods_answer_empty() {
    let node = TestNode::start(&[], &[]);
    assert_eq!(node.ok("eth_getUncleByBlockNumberAndIndex", json!(["latest", "0x0"])), json!(null));
    let head = node.ok("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(node.ok("eth_getUncleByBlockHashAndIndex", json!([head["hash"], "0x0"])), json!(null));
    assert_eq!(node.ok("eth_getUncleCountByBlockHash", json!([head["hash"]])), json!("0x0"));
    let err = node.call("eth_getUncleByBlockNumberAndIndex", json!(["latest"])).unwrap_err();
    assert_eq!(err["code"], -32602, "{err}");
}
