//! `eth_simulateV1` as geth serves it: blocks on top of a base block, each
//! seeing the state the previous left, with state overrides, full
//! transactions on request, geth's refusals (too many blocks, numbers out
//! of order) and all calls together within `rpc.gas_cap`; nothing is
//! written.

use alloy_primitives::{Address, Bytes, U256};
use serde_json::{json, Value};

use crate::support::*;

#[test]
fn two_blocks_deploy_and_call_the_counter_on_overridden_state() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let base = node.ok("eth_getBlockByNumber", json!(["latest", false]));
    let tag = base["number"].clone();
    let n = parse_u64(&tag);
    // A sender with nothing on chain, funded by a state override.
    let owner = random_signer().address();
    let counter = owner.create(0);
    let blocks = json!([
        {
            "stateOverrides": { format!("{owner:#x}"): {"balance": "0xde0b6b3a7640000"} },
            "calls": [
                {"from": owner, "input": counter_initcode()},
                {"from": owner, "to": counter},
            ]
        },
        {
            "calls": [
                {"from": owner, "to": counter},
                {"from": owner, "to": counter, "input": "0xff"},
            ]
        }
    ]);
    let out =
        node.ok("eth_simulateV1", json!([{"blockStateCalls": blocks, "returnFullTransactions": true}, tag]));
    let out = out.as_array().unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    let (b1, b2) = (&out[0], &out[1]);
    assert_eq!(parse_u64(&b1["number"]), n + 1);
    assert_eq!(parse_u64(&b2["number"]), n + 2);
    assert_eq!(b1["parentHash"], base["hash"]);
    assert_eq!(b2["parentHash"], b1["hash"]);
    assert_eq!(parse_u64(&b1["timestamp"]), parse_u64(&base["timestamp"]) + 12);
    assert_eq!(parse_u64(&b2["timestamp"]), parse_u64(&base["timestamp"]) + 24);
    assert_eq!(b1["baseFeePerGas"], "0x0", "no validation: base fee 0");

    let calls1 = b1["calls"].as_array().unwrap();
    assert_eq!(calls1[0]["status"], "0x1", "{b1}");
    assert_eq!(calls1[0]["returnData"], json!(Bytes::from(counter_runtime())));
    assert_eq!(parse_u256(&calls1[1]["returnData"]), U256::from(1));
    assert_eq!(calls1[1]["logs"][0]["address"], json!(counter));
    assert_eq!(calls1[1]["logs"][0]["topics"][0], json!(counter_topic()));
    assert_eq!(calls1[1]["logs"][0]["blockHash"], b1["hash"]);
    let used: u64 = calls1.iter().map(|c| parse_u64(&c["gasUsed"])).sum();
    assert_eq!(parse_u64(&b1["gasUsed"]), used);

    // Block 2 sees block 1's deployment and count.
    let calls2 = b2["calls"].as_array().unwrap();
    assert_eq!(parse_u256(&calls2[0]["returnData"]), U256::from(2), "{b2}");
    assert_eq!(calls2[1]["status"], "0x0");
    assert_eq!(calls2[1]["error"]["code"], 3);
    assert_eq!(calls2[1]["error"]["data"], "0xdeadbeef");
    assert!(calls2[1]["logs"].as_array().unwrap().is_empty());

    // Full transactions: the calls, from their senders, in their blocks.
    let txs = b1["transactions"].as_array().unwrap();
    assert_eq!(txs.len(), 2);
    assert_eq!(txs[0]["from"], json!(owner));
    assert_eq!(txs[0]["to"], Value::Null);
    assert_eq!(txs[1]["to"], json!(counter));
    assert_eq!(txs[1]["nonce"], "0x1");
    assert_eq!(txs[1]["blockHash"], b1["hash"]);
    assert_eq!(calls1[1]["logs"][0]["transactionHash"], txs[1]["hash"]);
    // Hashes only when not asked for full transactions.
    let out = node.ok("eth_simulateV1", json!([{"blockStateCalls": blocks}, tag]));
    assert_eq!(out[0]["transactions"][1], txs[1]["hash"]);

    // Nothing was written.
    assert_eq!(node.ok("eth_getCode", json!([counter, "latest"])), "0x");
    assert_eq!(node.balance(owner), U256::ZERO);
}

#[test]
fn geth_refusals_and_the_gas_cap() {
    let node = TestNode::start(&[("SLUICE_RPC__GAS_CAP", "50000")], &["--block-time-ms", "50"]);
    let (a, b) = (Address::repeat_byte(0xa1), Address::repeat_byte(0xb2));
    let simulate =
        |blocks: Value| node.call("eth_simulateV1", json!([{"blockStateCalls": blocks}, "latest"]));

    let many: Vec<Value> = (0..257).map(|_| json!({})).collect();
    let e = simulate(json!(many)).unwrap_err();
    assert_eq!((e["code"].clone(), e["message"].clone()), (json!(-38026), json!("too many blocks")));
    let e = simulate(json!([{"blockOverrides": {"number": "0x0"}}])).unwrap_err();
    assert_eq!(e["code"], -38020, "{e}");
    assert!(e["message"].as_str().unwrap().starts_with("block numbers must be in order"), "{e}");
    let e = simulate(json!([])).unwrap_err();
    assert_eq!((e["code"].clone(), e["message"].clone()), (json!(-32602), json!("empty input")));
    let e = node.call("eth_simulateV1", json!([{"blockStateCalls": [{"calls": [{"to": 5}]}]}])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");

    // Validation: a nonce gap is refused with geth's code.
    let e = node
        .call(
            "eth_simulateV1",
            json!([{"validation": true, "blockStateCalls": [{"calls": [{"from": a, "to": b, "nonce": "0x5"}]}]}]),
        )
        .unwrap_err();
    assert_eq!(e["code"], -38011, "{e}");

    // rpc.gas_cap (50000) bounds all calls together: two transfers fit,
    // the third has 8000 gas left.
    let transfer = json!({"from": a, "to": b});
    let out = simulate(json!([{"calls": [transfer, transfer]}])).unwrap();
    assert_eq!(out[0]["gasUsed"], "0xa410");
    let e = simulate(json!([{"calls": [transfer, transfer]}, {"calls": [transfer]}])).unwrap_err();
    assert_eq!(e["code"], -38013, "{e}");
    assert_eq!(e["message"], "intrinsic gas too low: have 8000, want 21000");

    // traceTransfers: an ERC-7528 log for the ether moved.
    let funded = json!({ format!("{a:#x}"): {"balance": "0x64"} });
    let out = node.ok(
        "eth_simulateV1",
        json!([{"traceTransfers": true, "blockStateCalls": [{"stateOverrides": funded, "calls": [{"from": a, "to": b, "value": "0x7"}]}]}]),
    );
    let log = &out[0]["calls"][0]["logs"][0];
    assert_eq!(log["address"], "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "{out}");
    assert_eq!(parse_u256(&log["data"]), U256::from(7));
}

#[test]
fn a_simulation_stops_at_the_call_deadline() {
    // A gas cap that never runs out first: the deadline must stop it.
    let node = TestNode::start(
        &[("SLUICE_RPC__EVM_TIMEOUT_MS", "200"), ("SLUICE_RPC__GAS_CAP", "100000000000")],
        &["--block-time-ms", "50"],
    );
    let x = Address::repeat_byte(0x42);
    // JUMPDEST PUSH1 0 JUMP: loops until out of gas (or stopped).
    let looping = json!({ format!("{x:#x}"): {"code": "0x5b600056"} });
    let block = json!({"calls": [{"to": x}, {"to": x}]});
    let mut blocks = vec![json!({"stateOverrides": looping, "calls": [{"to": x}]})];
    blocks.extend(std::iter::repeat_n(block, 20));
    let started = std::time::Instant::now();
    let e = node.call("eth_simulateV1", json!([{"blockStateCalls": blocks}])).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("execution aborted (timeout = 200ms)"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}
