//! Parity-style traces over JSON-RPC (`trace_*`, as reth and erigon serve
//! them, built by revm-inspectors): a deploy, a call and a transfer on a
//! dev node; the four methods agree with each other and with the receipts;
//! unknown transactions and blocks answer `null`; a trace past
//! `rpc.trace_max_bytes` answers what the geth tracers answer, one past
//! `rpc.evm_timeout_ms` "execution timeout". `trace_filter` answers what
//! `trace_block` answers over its range, filtered by address as alloy's
//! matcher filters (reth's), paged by `after`/`count`, and refuses a range
//! past `rpc.trace_filter_max_blocks`.

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

#[test]
fn trace_filter_is_trace_block_over_the_range_filtered_and_paged() {
    let node = TestNode::start(&[("SLUICE_RPC__TRACE_FILTER_MAX_BLOCKS", "40")], &["--block-time-ms", "50"]);
    let (owner, other) = (dev(0), dev(1));
    let deploy =
        node.send(&eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap();
    let counter: Address = node.receipt(&deploy)["contractAddress"].as_str().unwrap().parse().unwrap();
    let call =
        node.send(&eip1559(&owner, 1, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000)).unwrap();
    let to = Address::repeat_byte(0x77);
    let pay = node.send(&transfer(&other, 0, to, 1_000)).unwrap();
    let numbers: Vec<u64> =
        [deploy, call, pay].iter().map(|h| parse_u64(&node.receipt(h)["blockNumber"])).collect();
    let (first, last) = (*numbers.iter().min().unwrap(), *numbers.iter().max().unwrap());
    assert!(last - first < 40, "the test's blocks fit the limit: {numbers:?}");
    let hex = |n: u64| json!(format!("{n:#x}"));
    let range = |extra: Value| {
        let mut f = json!({ "fromBlock": hex(first), "toBlock": hex(last) });
        f.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        f
    };
    let filter = |extra: Value| node.ok("trace_filter", json!([range(extra)]));
    let hashes = |v: &Value| -> Vec<Value> {
        v.as_array().unwrap().iter().map(|t| t["transactionHash"].clone()).collect()
    };

    // The whole range: trace_block's answers, concatenated in block order.
    let all = filter(json!({}));
    let mut blocks = Vec::new();
    for n in first..=last {
        blocks.extend(node.ok("trace_block", json!([hex(n)])).as_array().unwrap().clone());
    }
    assert_eq!(all, Value::Array(blocks));
    assert_eq!(hashes(&all), vec![json!(deploy), json!(call), json!(pay)], "{all}");

    // By address (alloy's matcher, reth's): fromAddress, toAddress (a
    // create's is the created contract), both (intersection, the default),
    // or either (mode "union").
    let from_owner = filter(json!({ "fromAddress": [owner.address()] }));
    assert_eq!(hashes(&from_owner), vec![json!(deploy), json!(call)]);
    assert_eq!(hashes(&filter(json!({ "toAddress": [to] }))), vec![json!(pay)]);
    assert_eq!(hashes(&filter(json!({ "toAddress": [counter] }))), vec![json!(deploy), json!(call)]);
    let both = json!({ "fromAddress": [other.address()], "toAddress": [counter] });
    assert_eq!(filter(both.clone()), json!([]));
    let mut either = both;
    either["mode"] = json!("union");
    assert_eq!(filter(either), all);
    assert_eq!(filter(json!({ "fromAddress": [Address::repeat_byte(0x55)] })), json!([]));

    // Paging: skip `after`, take `count`.
    let list = all.as_array().unwrap();
    assert_eq!(filter(json!({ "after": 1 })), json!(list[1..]));
    assert_eq!(filter(json!({ "after": 1, "count": 1 })), json!([list[1]]));
    assert_eq!(filter(json!({ "count": 2 })), json!(list[..2]));
    assert_eq!(filter(json!({ "after": 3 })), json!([]));
    assert_eq!(filter(json!({ "fromAddress": [owner.address()], "after": 1 })), json!([from_owner[1]]));

    // A range of 40 blocks passes; 41 is refused, naming the limit.
    assert!(node
        .call("trace_filter", json!([{ "fromBlock": hex(first), "toBlock": hex(first + 39) }]))
        .is_ok());
    let e = node
        .call("trace_filter", json!([{ "fromBlock": hex(first), "toBlock": hex(first + 40) }]))
        .unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("block range too large") && m.contains("rpc.trace_filter_max_blocks"), "{m}");
    // The default range starts at genesis.
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    if head >= 40 {
        assert_eq!(node.call("trace_filter", json!([{}])).unwrap_err()["code"], -32000);
    }
    // fromBlock past toBlock: reth's words.
    let e = node
        .call("trace_filter", json!([{ "fromBlock": hex(last), "toBlock": hex(first.saturating_sub(1)) }]));
    let e = e.unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("fromBlock cannot be greater than toBlock"), "{e}");
    // A field that does not exist is refused (alloy's TraceFilter).
    assert_eq!(node.call("trace_filter", json!([{ "fromBlok": "0x1" }])).unwrap_err()["code"], -32602);
}

#[test]
fn trace_filter_shares_one_max_bytes_across_its_range() {
    // Each transfer's trace fits alone; the range's together do not.
    let node = TestNode::start(&[("SLUICE_RPC__TRACE_MAX_BYTES", "1500")], &["--block-time-ms", "50"]);
    let to = Address::repeat_byte(0x77);
    let mut numbers = Vec::new();
    for nonce in 0..3 {
        let hash = node.send(&transfer(&dev(0), nonce, to, 1_000)).unwrap();
        numbers.push(parse_u64(&node.receipt(&hash)["blockNumber"]));
    }
    let (first, last) = (numbers[0], numbers[2]);
    for n in &numbers {
        assert!(node.call("trace_block", json!([format!("{n:#x}")])).is_ok());
    }
    let range = json!([{ "fromBlock": format!("{first:#x}"), "toBlock": format!("{last:#x}") }]);
    let e = node.call("trace_filter", range).unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    assert!(
        e["message"].as_str().unwrap().starts_with("trace output exceeds rpc.trace_max_bytes (1500 bytes)"),
        "{e}"
    );
    // What is filtered out does not count.
    let none = json!([{ "fromBlock": format!("{first:#x}"), "toBlock": format!("{last:#x}"), "toAddress": [Address::repeat_byte(0x55)] }]);
    assert_eq!(node.ok("trace_filter", none), json!([]));
}
