//! Otterscan's `ots_*` calls (API level 8, as erigon and reth serve them)
//! against a dev node, as its block, transaction and address pages send
//! them: a counter deployed, called, called to revert, a transfer, and a
//! factory that forwards value and creates a contract. Block details and
//! paged transactions agree with the `eth_` answers; traces, internal
//! operations and revert data are what the transactions did; the history
//! searches find each nonce and each creator; the address searches, with
//! the address index off (the default), answer an error naming it.

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};

use sluice_load::contracts;

use crate::support::*;

/// Where the factory forwards the value it is sent.
const PAYEE: Address = Address::repeat_byte(0x77);

/// A factory: forwards its call's value to [`PAYEE`], then `CREATE`s a
/// contract whose code is the one byte `0x00`.
fn factory_runtime() -> Vec<u8> {
    let mut code = vec![0x5f, 0x5f, 0x5f, 0x5f, 0x34, 0x73]; // 4 × PUSH0, CALLVALUE, PUSH20
    code.extend_from_slice(PAYEE.as_slice());
    code.extend_from_slice(&[0x5a, 0xf1, 0x50]); // GAS CALL POP
                                                 // PUSH8 (PUSH1 0 PUSH0 MSTORE8 PUSH1 1 PUSH0 RETURN) PUSH0 MSTORE
    code.extend_from_slice(&[0x67, 0x60, 0x00, 0x5f, 0x53, 0x60, 0x01, 0x5f, 0xf3, 0x5f, 0x52]);
    code.extend_from_slice(&[0x60, 0x08, 0x60, 0x18, 0x5f, 0xf0, 0x50, 0x00]); // CREATE(0, 24, 8) POP STOP
    code
}

fn address(v: &Value) -> Address {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn otterscan_block_transaction_and_address_pages_answer() {
    let node = TestNode::dev();
    let owner = dev(0);
    let counter = owner.address().create(0);
    let factory = owner.address().create(4);
    let child = factory.create(1);
    let raws = [
        eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000),
        eip1559(&owner, 1, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000),
        // 0xff: the counter reverts with 0xdeadbeef.
        eip1559(&owner, 2, TxKind::Call(counter), U256::ZERO, Bytes::from_static(&[0xff]), 100_000),
        transfer(&owner, 3, PAYEE, 1_000),
        eip1559(&owner, 4, TxKind::Create, U256::ZERO, contracts::initcode(&factory_runtime()), 300_000),
        eip1559(&owner, 5, TxKind::Call(factory), U256::from(500), Bytes::new(), 300_000),
    ];
    let hashes: Vec<B256> = raws.iter().map(|raw| node.send(raw).unwrap()).collect();
    let receipts: Vec<Value> = hashes.iter().map(|h| node.receipt(h)).collect();
    let status: Vec<&str> = receipts.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["0x1", "0x1", "0x0", "0x1", "0x1", "0x1"], "{receipts:?}");
    assert_eq!(address(&receipts[0]["contractAddress"]), counter);
    assert_eq!(address(&receipts[4]["contractAddress"]), factory);

    assert_eq!(node.ok("ots_getApiLevel", json!([])), json!(8));

    // The block page: details and every page of transactions, for each
    // block these landed in.
    let mut numbers: Vec<Value> = receipts.iter().map(|r| r["blockNumber"].clone()).collect();
    numbers.dedup();
    for number in &numbers {
        let block = node.ok("eth_getBlockByNumber", json!([number, false]));
        let details = node.ok("ots_getBlockDetails", json!([number]));
        assert_eq!(node.ok("ots_getBlockDetailsByHash", json!([block["hash"]])), details);
        let b = &details["block"];
        let count = block["transactions"].as_array().unwrap().len();
        assert_eq!(b["transactionCount"], json!(count), "{details}");
        assert_eq!((b["hash"].clone(), b["number"].clone()), (block["hash"].clone(), number.clone()));
        assert!(b.get("transactions").is_none() && b["logsBloom"].is_null(), "{details}");
        assert_eq!(
            details["issuance"],
            json!({"blockReward": "0x0", "uncleReward": "0x0", "issuance": "0x0"})
        );
        let fees = node
            .ok("eth_getBlockReceipts", json!([number]))
            .as_array()
            .unwrap()
            .iter()
            .map(|r| parse_u256(&r["gasUsed"]) * parse_u256(&r["effectiveGasPrice"]))
            .fold(U256::ZERO, |a, b| a + b);
        assert_eq!(parse_u256(&details["totalFees"]), fees);

        let header = node.ok("erigon_getHeaderByNumber", json!([number]));
        assert_eq!(
            (header["hash"].clone(), header["stateRoot"].clone()),
            (block["hash"].clone(), block["stateRoot"].clone())
        );
        assert!(header.get("transactions").is_none(), "{header}");

        // Pages of two, from the block's end: together, the block.
        let mut listed: Vec<Value> = Vec::new();
        for page in 0..count.div_ceil(2) {
            let answer = node.ok("ots_getBlockTransactions", json!([number, page, 2]));
            let txs = answer["fullblock"]["transactions"].as_array().unwrap().clone();
            let rs = answer["receipts"].as_array().unwrap();
            assert_eq!(answer["fullblock"]["transactionCount"], json!(count));
            assert_eq!(txs.len(), rs.len());
            assert_eq!(txs.len(), 2.min(count - 2 * page), "page {page} of {count}");
            for (tx, r) in txs.iter().zip(rs) {
                assert_eq!(tx["hash"], r["transactionHash"]);
                assert!(tx["input"].as_str().unwrap().len() <= 10, "cut to the selector: {tx}");
                assert!(r["logs"].is_null() && r["logsBloom"].is_null(), "{r}");
                assert_eq!(r["timestamp"], block["timestamp"]);
                let full = node.receipt(&tx["hash"].as_str().unwrap().parse().unwrap());
                assert_eq!(
                    (r["status"].clone(), r["gasUsed"].clone()),
                    (full["status"].clone(), full["gasUsed"].clone())
                );
            }
            let mut hashes: Vec<Value> = txs.iter().map(|t| t["hash"].clone()).collect();
            hashes.extend(listed);
            listed = hashes;
        }
        assert_eq!(Value::Array(listed), block["transactions"], "pages count from the end");
        let past = node.ok("ots_getBlockTransactions", json!([number, count.div_ceil(2) + 1, 2]));
        assert_eq!(past["fullblock"]["transactions"], json!([]));
    }
    // The deploy's input, cut to 4 bytes.
    let deploy_block = node.ok("ots_getBlockTransactions", json!([receipts[0]["blockNumber"], 0, 100]));
    let deploy_tx = deploy_block["fullblock"]["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["hash"] == json!(hashes[0]))
        .cloned()
        .unwrap();
    assert_eq!(deploy_tx["input"], json!(Bytes::copy_from_slice(&counter_initcode()[..4])));
    assert_eq!(node.ok("ots_getBlockDetails", json!(["0xffffffff"])), Value::Null);
    assert_eq!(node.ok("erigon_getHeaderByNumber", json!(["0xffffffff"])), Value::Null);

    // The transaction page.
    let trace = node.ok("ots_traceTransaction", json!([hashes[1]]));
    let one = U256::from(1);
    assert_eq!(
        trace,
        json!([{"type": "CALL", "depth": 0, "from": owner.address(), "to": counter, "value": "0x0",
                "input": "0x", "output": B256::from(one)}])
    );
    let deployed = node.ok("ots_traceTransaction", json!([hashes[0]]));
    assert_eq!((deployed[0]["type"].clone(), deployed[0]["to"].clone()), (json!("CREATE"), json!(counter)));
    let built = node.ok("ots_traceTransaction", json!([hashes[5]]));
    let shape: Vec<(Value, Value, Value, Value)> = built
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["type"].clone(), e["depth"].clone(), e["from"].clone(), e["to"].clone()))
        .collect();
    assert_eq!(
        shape,
        [
            (json!("CALL"), json!(0), json!(owner.address()), json!(factory)),
            (json!("CALL"), json!(1), json!(factory), json!(PAYEE)),
            (json!("CREATE"), json!(1), json!(factory), json!(child)),
        ],
        "{built}"
    );
    assert_eq!(built[1]["value"], "0x1f4");
    assert_eq!(
        node.ok("ots_getInternalOperations", json!([hashes[5]])),
        json!([
            {"type": 0, "from": factory, "to": PAYEE, "value": "0x1f4"},
            {"type": 2, "from": factory, "to": child, "value": "0x0"},
        ])
    );
    assert_eq!(node.ok("ots_getInternalOperations", json!([hashes[1]])), json!([]));
    assert_eq!(node.ok("ots_getInternalOperations", json!([hashes[3]])), json!([]));
    assert_eq!(node.ok("ots_getTransactionError", json!([hashes[2]])), json!("0xdeadbeef"));
    assert_eq!(node.ok("ots_getTransactionError", json!([hashes[1]])), json!("0x"));
    let unknown = B256::repeat_byte(9);
    for method in ["ots_traceTransaction", "ots_getInternalOperations", "ots_getTransactionError"] {
        assert_eq!(node.ok(method, json!([unknown])), Value::Null, "{method}");
    }

    // The address page.
    for (nonce, hash) in hashes.iter().enumerate() {
        let found = node.ok("ots_getTransactionBySenderAndNonce", json!([owner.address(), nonce]));
        assert_eq!(found, json!(hash), "nonce {nonce}");
    }
    assert_eq!(node.ok("ots_getTransactionBySenderAndNonce", json!([owner.address(), 6])), Value::Null);
    assert_eq!(node.ok("ots_getTransactionBySenderAndNonce", json!([PAYEE, 0])), Value::Null);
    assert_eq!(
        node.ok("ots_getContractCreator", json!([counter])),
        json!({"hash": hashes[0], "creator": owner.address()})
    );
    assert_eq!(
        node.ok("ots_getContractCreator", json!([child])),
        json!({"hash": hashes[5], "creator": factory})
    );
    assert_eq!(node.ok("ots_getContractCreator", json!([PAYEE])), Value::Null);
    assert_eq!(node.ok("ots_getContractCreator", json!([owner.address()])), Value::Null);
    assert_eq!(node.ok("ots_hasCode", json!([counter, "latest"])), json!(true));
    assert_eq!(node.ok("ots_hasCode", json!([child, "latest"])), json!(true));
    assert_eq!(node.ok("ots_hasCode", json!([owner.address(), "latest"])), json!(false));
    assert_eq!(node.ok("ots_hasCode", json!([counter, "0x0"])), json!(false), "not yet deployed");

    // The address index is off by default: the searches answer an error
    // that names the setting that turns it on.
    for method in ["ots_searchTransactionsBefore", "ots_searchTransactionsAfter"] {
        let e = node.call(method, json!([owner.address(), 0, 25])).unwrap_err();
        assert_eq!(e["code"], -32000, "{method}: {e}");
        let said = e["message"].as_str().unwrap();
        assert!(
            said.contains("store.address_index = true") && said.contains("SLUICE_STORE__ADDRESS_INDEX"),
            "{e}"
        );
    }
}

/// The history searches stay inside `store.history_blocks`: what happened
/// before the window answers "missing trie node" as every older read does,
/// never a scan of the chain; what never happened still answers null.
#[test]
fn otterscan_searches_stay_inside_the_history_kept() {
    let node = TestNode::start(&[("SLUICE_STORE__HISTORY_BLOCKS", "2")], &["--block-time-ms", "50"]);
    let user = dev(3);
    let counter = user.address().create(0);
    let deploy =
        node.send(&eip1559(&user, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap();
    node.receipt(&deploy);
    for n in 1..6u64 {
        node.receipt(&node.send(&transfer(&user, n, PAYEE, 7)).unwrap());
    }
    let missing = |method: &str, params: Value| {
        let err = node.call(method, params).unwrap_err();
        assert_eq!(err["code"], -32000, "{method}: {err}");
        let message = err["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("missing trie node"), "{method}: {err}");
    };
    missing("ots_getTransactionBySenderAndNonce", json!([user.address(), 0]));
    missing("ots_getContractCreator", json!([counter]));
    missing("ots_traceTransaction", json!([deploy]));
    // Past the last nonce, or no code at all: known from the head alone.
    assert_eq!(node.ok("ots_getTransactionBySenderAndNonce", json!([user.address(), 6])), Value::Null);
    assert_eq!(node.ok("ots_getContractCreator", json!([PAYEE])), Value::Null);
    assert_eq!(node.ok("ots_hasCode", json!([counter, "latest"])), json!(true));
}

/// A re-execution is bounded as `trace_*` is: past `rpc.trace_max_bytes`
/// it answers the same error, and the node goes on answering.
#[test]
fn otterscan_traces_share_the_trace_size_limit() {
    let node = TestNode::start(&[("SLUICE_RPC__TRACE_MAX_BYTES", "300")], &["--block-time-ms", "50"]);
    let owner = dev(0);
    let deploy =
        node.send(&eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap();
    node.receipt(&deploy);
    let e = node.call("ots_traceTransaction", json!([deploy])).unwrap_err();
    let message = e["message"].as_str().unwrap_or_default();
    assert_eq!(e["code"], -32000, "{e}");
    assert!(message.starts_with("trace output exceeds rpc.trace_max_bytes (300 bytes)"), "{e}");
    // The internal operations are read off the same recorded frames, so
    // they are bounded alike; the revert data needs no frames.
    let e = node.call("ots_getInternalOperations", json!([deploy])).unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    assert_eq!(node.ok("ots_getTransactionError", json!([deploy])), json!("0x"));
}
