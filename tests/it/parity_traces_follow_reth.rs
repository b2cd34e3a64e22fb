//! Parity-style traces over JSON-RPC (`trace_*`, as reth and erigon serve
//! them, built by revm-inspectors): a deploy, a call and a transfer on a
//! dev node; the four methods agree with each other and with the receipts;
//! unknown transactions and blocks answer `null`; a trace past
//! `rpc.trace_max_bytes` answers what the geth tracers answer, one past
//! `rpc.evm_timeout_ms` "execution timeout".

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};

use crate::support::*;

/// A localized trace without its localized fields: what a replay's
/// `trace` holds.
fn unlocalized(t: &Value) -> Value {
    let mut t = t.clone();
    if let Some(o) = t.as_object_mut() {
        for key in ["blockHash", "blockNumber", "transactionHash", "transactionPosition"] {
            o.remove(key);
        }
    }
    t
}

#[test]
fn trace_methods_agree_with_each_other_and_the_receipts() {
    let node = TestNode::dev();
    let owner = dev(0);
    let deploy =
        node.send(&eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap();
    let created = node.receipt(&deploy);
    let counter: Address = created["contractAddress"].as_str().unwrap().parse().unwrap();
    let call =
        node.send(&eip1559(&owner, 1, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000)).unwrap();
    let to = Address::repeat_byte(0x77);
    let pay = node.send(&transfer(&owner, 2, to, 1_000)).unwrap();
    let limits = [200_000u64, 100_000, 21_000];

    for (i, hash) in [deploy, call, pay].iter().enumerate() {
        let r = node.receipt(hash);
        assert_eq!(r["status"], "0x1", "{r}");
        let traces = node.ok("trace_transaction", json!([hash]));
        let list = traces.as_array().unwrap();
        assert_eq!(list.len(), 1, "no internal calls: {traces}");
        let root = &list[0];
        // Where it sits, as the receipt says.
        assert_eq!(root["transactionHash"], json!(hash));
        assert_eq!(root["blockHash"], r["blockHash"]);
        assert_eq!(json!(root["blockNumber"].as_u64().unwrap()), json!(parse_u64(&r["blockNumber"])));
        assert_eq!(
            json!(root["transactionPosition"].as_u64().unwrap()),
            json!(parse_u64(&r["transactionIndex"]))
        );
        assert_eq!((root["subtraces"].clone(), root["traceAddress"].clone()), (json!(0), json!([])));
        assert_eq!(root["action"]["from"], json!(owner.address()));
        // Gas: the trace starts after the intrinsic gas, which the
        // receipt counts; nothing is refunded here.
        let intrinsic = limits[i] - parse_u64(&root["action"]["gas"]);
        assert_eq!(parse_u64(&r["gasUsed"]), intrinsic + parse_u64(&root["result"]["gasUsed"]), "{root}");

        // trace_block holds the same traces.
        let block = node.ok("trace_block", json!([r["blockNumber"]]));
        let mine: Vec<Value> = block
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["transactionHash"] == json!(hash))
            .cloned()
            .collect();
        assert_eq!(Value::Array(mine), traces);

        // trace_replayTransaction: the same trace, unlocalized, and the
        // state diff.
        let replay = node.ok("trace_replayTransaction", json!([hash, ["trace", "stateDiff"]]));
        assert_eq!(replay["trace"], json!([unlocalized(root)]));
        assert!(replay["vmTrace"].is_null());
        let diff = &replay["stateDiff"];
        assert!(
            diff[format!("{:#x}", owner.address())]["balance"]["*"].is_object(),
            "the sender pays: {diff}"
        );
        // trace_replayBlockTransactions: the same answer, with the hash.
        let replays =
            node.ok("trace_replayBlockTransactions", json!([r["blockNumber"], ["trace", "stateDiff"]]));
        let mut entry = replays
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["transactionHash"] == json!(hash))
            .cloned()
            .unwrap();
        entry.as_object_mut().unwrap().remove("transactionHash");
        assert_eq!(entry, replay);

        match i {
            0 => {
                assert_eq!(root["type"], "create");
                assert_eq!(root["result"]["address"], json!(counter));
                assert_eq!(root["result"]["code"], json!(Bytes::from(counter_runtime())));
                assert_eq!(
                    diff[format!("{counter:#x}")]["code"]["+"],
                    json!(Bytes::from(counter_runtime())),
                    "{diff}"
                );
            }
            1 => {
                assert_eq!(
                    (root["type"].clone(), root["action"]["to"].clone()),
                    (json!("call"), json!(counter))
                );
                assert_eq!(parse_u256(&root["result"]["output"]), U256::from(1));
                assert_eq!(replay["output"], root["result"]["output"]);
                let slot = &diff[format!("{counter:#x}")]["storage"][format!("{:#066x}", 0)]["*"];
                assert_eq!((parse_u256(&slot["from"]), parse_u256(&slot["to"])), (U256::ZERO, U256::from(1)));
            }
            _ => {
                assert_eq!(root["action"]["value"], "0x3e8");
                assert_eq!(root["result"]["gasUsed"], "0x0");
                assert_eq!(diff[format!("{to:#x}")]["balance"]["+"], "0x3e8", "{diff}");
            }
        }
    }

    // A vmTrace, asked for alone.
    let vm = node.ok("trace_replayTransaction", json!([call, ["vmTrace"]]));
    assert_eq!(vm["vmTrace"]["code"], json!(Bytes::from(counter_runtime())));
    assert!(vm["vmTrace"]["ops"].as_array().is_some_and(|ops| !ops.is_empty()), "{vm}");
    assert_eq!(vm["trace"], json!([]));

    // Unknown: null, as reth answers.
    let unknown = B256::repeat_byte(7);
    assert_eq!(node.ok("trace_transaction", json!([unknown])), Value::Null);
    assert_eq!(node.ok("trace_replayTransaction", json!([unknown, ["trace"]])), Value::Null);
    assert_eq!(node.ok("trace_block", json!(["0xffffffff"])), Value::Null);
    assert_eq!(node.ok("trace_replayBlockTransactions", json!(["0xffffffff", ["trace"]])), Value::Null);
    // A trace type that does not exist is refused.
    let e = node.call("trace_replayTransaction", json!([call, ["everything"]])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
}

#[test]
fn a_trace_past_max_bytes_answers_as_the_geth_tracers_do() {
    let node = TestNode::start(&[("SLUICE_RPC__TRACE_MAX_BYTES", "300")], &["--block-time-ms", "50"]);
    let owner = dev(0);
    let deploy =
        node.send(&eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap();
    let r = node.receipt(&deploy);
    let geth = node.call("debug_traceTransaction", json!([deploy])).unwrap_err();
    let limit = |e: &Value| {
        let message = e["message"].as_str().unwrap_or_default();
        (e["code"].clone(), message.split(';').next().unwrap_or_default().to_string())
    };
    let expected = (json!(-32000), "trace output exceeds rpc.trace_max_bytes (300 bytes)".to_string());
    assert_eq!(limit(&geth), expected, "{geth}");
    for (method, params) in [
        ("trace_transaction", json!([deploy])),
        ("trace_block", json!([r["blockNumber"]])),
        ("trace_replayTransaction", json!([deploy, ["trace", "stateDiff"]])),
        ("trace_replayBlockTransactions", json!([r["blockNumber"], ["stateDiff"]])),
    ] {
        let e = node.call(method, params).unwrap_err();
        assert_eq!(limit(&e), expected, "{method}: {e}");
    }
    // The node still answers.
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
}

#[test]
fn a_trace_past_rpc_evm_timeout_ms_stops() {
    let node = TestNode::start(&[("SLUICE_RPC__EVM_TIMEOUT_MS", "1")], &["--block-time-ms", "50"]);
    // Initcode that loops until its 16M gas (under Osaka's cap) run out
    // (JUMPDEST PUSH1 0 JUMP): about 1.3 million steps to replay.
    let spin = Bytes::from_static(&[0x5b, 0x60, 0x00, 0x56]);
    let hash = node.send(&eip1559(&dev(0), 0, TxKind::Create, U256::ZERO, spin, 16_000_000)).unwrap();
    let r = node.receipt(&hash);
    assert_eq!(r["status"], "0x0", "out of gas: {r}");
    for (method, params) in [
        ("trace_transaction", json!([hash])),
        ("trace_block", json!([r["blockNumber"]])),
        ("trace_replayTransaction", json!([hash, ["trace", "vmTrace"]])),
        ("trace_replayBlockTransactions", json!([r["blockNumber"], ["trace"]])),
    ] {
        let e = node.call(method, params).unwrap_err();
        assert_eq!(
            (e["code"].clone(), e["message"].clone()),
            (json!(-32000), json!("execution timeout")),
            "{method}: {e}"
        );
    }
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
}
