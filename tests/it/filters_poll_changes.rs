//! Polling filters over HTTP, with geth's semantics: a block filter reports
//! each new block's hash once, in order; a log filter reports each new
//! matching log once (address and topic filtering as `eth_getLogs`), and
//! `eth_getFilterLogs` its whole range; `eth_uninstallFilter` answers true
//! then false; unknown, uninstalled and expired ids answer -32000 `filter
//! not found`; and every limit holds: `rpc.max_filters`,
//! `rpc.filter_timeout_ms`, and the `eth_getLogs` limits on what one poll
//! returns.

use std::time::{Duration, Instant};

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};

use crate::support::*;

/// Deploys the counter contract (each call logs the new count) from dev
/// account 0.
fn deploy_counter(node: &TestNode) -> Address {
    let raw = eip1559(&dev(0), 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    r["contractAddress"].as_str().unwrap().parse().unwrap()
}

/// Calls the counter from dev account 1 at `nonce`; the receipt.
fn bump(node: &TestNode, counter: Address, nonce: u64) -> Value {
    let raw = eip1559(&dev(1), nonce, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000);
    node.receipt(&node.send(&raw).unwrap())
}

fn changes(node: &TestNode, id: &Value) -> Result<Value, Value> {
    node.call("eth_getFilterChanges", json!([id]))
}

fn array(v: Value) -> Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("an array, got {v}")).clone()
}

fn assert_not_found(result: Result<Value, Value>) {
    let e = result.expect_err("an unknown filter");
    assert_eq!((e["code"].as_i64(), e["message"].as_str()), (Some(-32000), Some("filter not found")), "{e}");
}

fn head(node: &TestNode) -> u64 {
    parse_u64(&node.ok("eth_blockNumber", json!([])))
}

#[test]
fn a_block_filter_reports_every_new_block_once_in_order() {
    let node = TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "100")], &[]);
    let id = node.ok("eth_newBlockFilter", json!([]));
    let text = id.as_str().unwrap();
    assert!(text.starts_with("0x") && !text.starts_with("0x0") && text.len() <= 34, "a quantity: {id}");
    let start = head(&node);
    let mut seen: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 6 {
        assert!(Instant::now() < deadline, "only {} new blocks reported", seen.len());
        seen.extend(array(changes(&node, &id).unwrap()));
        std::thread::sleep(Duration::from_millis(70));
    }
    for (i, hash) in seen.iter().enumerate() {
        let n = start + 1 + i as u64;
        let block = node.ok("eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        assert_eq!(&block["hash"], hash, "report {i} is block {n}");
    }
    // A filter for another kind of thing has no logs.
    assert_not_found(node.call("eth_getFilterLogs", json!([id])));
    // A pending-transaction filter reports each admitted hash once.
    let pending = node.ok("eth_newPendingTransactionFilter", json!([]));
    let hash = node.send(&transfer(&dev(0), 0, random_signer().address(), 1)).unwrap();
    assert_eq!(changes(&node, &pending).unwrap(), json!([hash]));
    assert_eq!(changes(&node, &pending).unwrap(), json!([]), "once");
}

#[test]
fn a_log_filter_reports_new_matching_logs_once() {
    let node = TestNode::dev();
    let counter = deploy_counter(&node);
    let by_both = node.ok("eth_newFilter", json!([{"address": counter, "topics": [counter_topic()]}]));
    let by_topic = node.ok("eth_newFilter", json!([{"topics": [[B256::repeat_byte(1), counter_topic()]]}]));
    let other_address = node.ok("eth_newFilter", json!([{"address": [random_signer().address()]}]));
    let other_topic = node.ok("eth_newFilter", json!([{"address": counter, "topics": [null, B256::ZERO]}]));
    let receipts: Vec<Value> = (0..3).map(|n| bump(&node, counter, n)).collect();
    node.receipt(&node.send(&transfer(&dev(2), 0, counter, 1)).unwrap());

    let want: Vec<Value> = receipts.iter().map(|r| r["logs"][0].clone()).collect();
    assert_eq!(array(changes(&node, &by_both).unwrap()), want, "the three logs, as in the receipts");
    assert_eq!(array(changes(&node, &by_topic).unwrap()), want);
    assert_eq!(changes(&node, &by_both).unwrap(), json!([]), "each reported once");
    assert_eq!(changes(&node, &other_address).unwrap(), json!([]));
    assert_eq!(changes(&node, &other_topic).unwrap(), json!([]));
    let fourth = bump(&node, counter, 3);
    assert_eq!(array(changes(&node, &by_both).unwrap()), vec![fourth["logs"][0].clone()]);

    // eth_getFilterLogs: the whole range, including logs from before the
    // filter existed, as eth_getLogs answers it.
    let all = node.ok("eth_newFilter", json!([{"fromBlock": "0x0", "address": counter}]));
    let everything = node.ok("eth_getLogs", json!([{"fromBlock": "0x0", "address": counter}]));
    assert_eq!(array(everything.clone()).len(), 4);
    assert_eq!(node.ok("eth_getFilterLogs", json!([all])), everything);
    let bounded =
        node.ok("eth_newFilter", json!([{"fromBlock": "0x0", "toBlock": receipts[0]["blockNumber"]}]));
    assert_eq!(node.ok("eth_getFilterLogs", json!([bounded])), json!([receipts[0]["logs"][0]]));
    // A filter made with bad criteria is refused at once.
    let e = node.call("eth_newFilter", json!([{"fromBlock": "0x5", "toBlock": "0x1"}])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
}

#[test]
fn uninstall_unknown_ids_and_the_filter_limit() {
    let node = TestNode::start(&[("SLUICE_RPC__MAX_FILTERS", "2")], &["--block-time-ms", "50"]);
    let a = node.ok("eth_newBlockFilter", json!([]));
    let b = node.ok("eth_newFilter", json!([{}]));
    assert_ne!(a, b);
    let e = node.call("eth_newPendingTransactionFilter", json!([])).unwrap_err();
    assert_eq!(e["code"], -32005, "{e}");
    assert_eq!(e["message"], "too many filters: limit 2");
    assert!(node.call("eth_newBlockFilter", json!([])).is_err(), "every kind counts");

    assert_eq!(node.ok("eth_uninstallFilter", json!([a])), json!(true));
    assert_eq!(node.ok("eth_uninstallFilter", json!([a])), json!(false));
    assert_not_found(changes(&node, &a));
    // Its slot is free again.
    let c = node.ok("eth_newBlockFilter", json!([]));
    assert!(changes(&node, &c).is_ok());

    for unknown in [json!("0x1234"), json!("0xnothex"), json!("filter")] {
        assert_not_found(changes(&node, &unknown));
        assert_not_found(node.call("eth_getFilterLogs", json!([unknown])));
        assert_eq!(node.ok("eth_uninstallFilter", json!([unknown])), json!(false));
    }
    assert_eq!(node.call("eth_getFilterChanges", json!([7])).unwrap_err()["code"], -32602);
    assert_eq!(node.call("eth_getFilterChanges", json!([])).unwrap_err()["code"], -32602);
    assert_eq!(node.call("eth_newFilter", json!([])).unwrap_err()["code"], -32602);
}

#[test]
fn filters_not_polled_for_the_timeout_expire() {
    let node = TestNode::start(
        &[("SLUICE_RPC__FILTER_TIMEOUT_MS", "1000"), ("SLUICE_RPC__MAX_FILTERS", "2")],
        &["--block-time-ms", "50"],
    );
    let idle = node.ok("eth_newBlockFilter", json!([]));
    let polled = node.ok("eth_newFilter", json!([{}]));
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(2500) {
        assert!(changes(&node, &polled).is_ok(), "a filter polled within the timeout lives on");
        std::thread::sleep(Duration::from_millis(150));
    }
    assert_not_found(changes(&node, &idle));
    assert_eq!(node.ok("eth_uninstallFilter", json!([idle])), json!(false));
    // eth_getFilterLogs does not keep a filter alive (as in geth).
    let fresh = node.ok("eth_newFilter", json!([{}]));
    std::thread::sleep(Duration::from_millis(200));
    assert!(node.call("eth_getFilterLogs", json!([fresh])).is_ok());
    std::thread::sleep(Duration::from_millis(1200));
    assert_not_found(node.call("eth_getFilterLogs", json!([fresh])));
    // Expired filters leave room under the limit.
    node.ok("eth_newBlockFilter", json!([]));
}

#[test]
fn what_one_poll_returns_is_bounded_by_the_get_logs_limits() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__MAX_LOGS_RESULTS", "2"),
            ("SLUICE_RPC__MAX_LOGS_BLOCK_RANGE", "3"),
            ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0"),
        ],
        &["--block-time-ms", "20"],
    );
    let counter = deploy_counter(&node);
    let logs = node.ok("eth_newFilter", json!([{"address": counter}]));
    // Nothing moves the chain but transactions (idle blocks are off), so
    // the block filter's first report is the block after this one.
    let created = head(&node);
    let blocks = node.ok("eth_newBlockFilter", json!([]));
    // Three logs (in one block or a few): more than max_logs_results.
    let raws: Vec<Bytes> = (0..3)
        .map(|n| eip1559(&dev(1), n, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000))
        .collect();
    let batch: Vec<Value> = raws
        .iter()
        .map(|raw| json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]}))
        .collect();
    node.post(&Value::Array(batch));
    for raw in &raws {
        node.receipt(&alloy_primitives::keccak256(raw));
    }
    let e = changes(&node, &logs).unwrap_err();
    assert_eq!(
        (e["code"].as_i64(), e["message"].as_str()),
        (Some(-32005), Some("query returned more than 2 results"))
    );
    // The refused range is not reported again: the filter moves on.
    assert_eq!(changes(&node, &logs).unwrap(), json!([]));

    // Five more blocks: wider than max_logs_block_range for the log
    // filter, and reported three hashes at a time by the block filter.
    let start = head(&node);
    for n in 3..8 {
        bump(&node, counter, n);
    }
    let end = head(&node);
    assert!(end >= start + 5);
    let e = changes(&node, &logs).unwrap_err();
    assert_eq!(
        (e["code"].as_i64(), e["message"].as_str()),
        (Some(-32005), Some("query exceeds max block range 3"))
    );
    let mut hashes = Vec::new();
    loop {
        let got = array(changes(&node, &blocks).unwrap());
        assert!(got.len() <= 3, "{} hashes in one poll", got.len());
        if got.is_empty() {
            break;
        }
        hashes.extend(got);
    }
    let want: Vec<Value> = (created + 1..=end)
        .map(|n| node.ok("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))["hash"].clone())
        .collect();
    assert_eq!(hashes, want, "every block once, in order, over several polls");
}
