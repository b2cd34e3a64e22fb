//! Otterscan's address page against a dev node started with the address
//! index on (`SLUICE_STORE__ADDRESS_INDEX=true`): an address's
//! transactions (sent, received, a contract it created) across blocks,
//! paged by `ots_searchTransactionsBefore` from the head down and by
//! `ots_searchTransactionsAfter` from genesis up, as erigon pages them
//! (both newest first; `firstPage` holds the newest, `lastPage` the
//! oldest), and the page size bounded by `rpc.ots_max_page_txs`.

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};

use crate::support::*;

/// Where the owner's transfers go.
const PAYEE: Address = Address::repeat_byte(0x55);

fn hashes(page: &Value) -> Vec<Value> {
    page["txs"].as_array().unwrap().iter().map(|t| t["hash"].clone()).collect()
}

fn block_of(tx: &Value) -> u64 {
    parse_u64(&tx["blockNumber"])
}

#[test]
fn otterscan_searches_page_an_addresss_transactions_from_the_address_index() {
    let node = TestNode::start(&[("SLUICE_STORE__ADDRESS_INDEX", "true")], &["--block-time-ms", "50"]);
    let (owner, friend) = (dev(0), dev(1));
    let counter = owner.address().create(0);
    // One at a time, each after the last one's receipt: each in a later
    // block than the one before.
    let mut raws = vec![eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)];
    raws.extend((1..=4).map(|nonce| transfer(&owner, nonce, PAYEE, 1_000)));
    raws.push(transfer(&friend, 0, owner.address(), 5));
    raws.push(eip1559(&owner, 5, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000));
    let mut mined: Vec<(B256, u64)> = Vec::new();
    for raw in &raws {
        let hash = node.send(raw).unwrap();
        let r = node.receipt(&hash);
        assert_eq!(r["status"], json!("0x1"), "{r}");
        mined.push((hash, parse_u64(&r["blockNumber"])));
    }
    assert!(mined.windows(2).all(|w| w[0].1 < w[1].1), "one block each: {mined:?}");
    let newest_first: Vec<Value> = mined.iter().rev().map(|(h, _)| json!(h)).collect();

    // Before, from the head down, pages of 3: firstPage on the first,
    // lastPage on the one that reaches the oldest.
    let mut listed = Vec::new();
    let mut from = 0u64;
    let mut pages = Vec::new();
    loop {
        let page = node.ok("ots_searchTransactionsBefore", json!([owner.address(), from, 3]));
        let txs = page["txs"].as_array().unwrap();
        let receipts = page["receipts"].as_array().unwrap();
        assert_eq!(txs.len(), receipts.len());
        for (tx, r) in txs.iter().zip(receipts) {
            assert_eq!(tx["hash"], r["transactionHash"]);
            let block = node.ok("eth_getBlockByNumber", json!([tx["blockNumber"], false]));
            assert_eq!(r["timestamp"], json!(parse_u64(&block["timestamp"])), "a number, as erigon's");
            let full = node.ok("eth_getTransactionByHash", json!([tx["hash"]]));
            assert_eq!(tx, &full, "the whole transaction");
            assert_eq!(r["gasUsed"], node.receipt(&tx["hash"].as_str().unwrap().parse().unwrap())["gasUsed"]);
        }
        listed.extend(hashes(&page));
        pages.push((page["firstPage"].clone(), page["lastPage"].clone(), txs.len()));
        if page["lastPage"] == json!(true) {
            break;
        }
        from = block_of(txs.last().unwrap());
        assert!(pages.len() < 10, "{pages:?}");
    }
    assert_eq!(listed, newest_first, "every transaction once, newest first");
    assert_eq!(
        pages,
        [(json!(true), json!(false), 3), (json!(false), json!(false), 3), (json!(false), json!(true), 1)]
    );

    // After, from genesis up, pages of 3, each newest first: lastPage on
    // the first (it holds the oldest), firstPage on the one that reaches
    // the newest.
    let mut listed: Vec<Value> = Vec::new();
    let mut from = 0u64;
    let mut pages = Vec::new();
    loop {
        let page = node.ok("ots_searchTransactionsAfter", json!([owner.address(), from, 3]));
        let txs = page["txs"].as_array().unwrap();
        let blocks: Vec<u64> = txs.iter().map(block_of).collect();
        assert!(blocks.windows(2).all(|w| w[0] > w[1]), "newest first: {blocks:?}");
        let mut newer = hashes(&page);
        newer.extend(listed);
        listed = newer;
        pages.push((page["firstPage"].clone(), page["lastPage"].clone(), txs.len()));
        if page["firstPage"] == json!(true) {
            break;
        }
        from = blocks[0];
        assert!(pages.len() < 10, "{pages:?}");
    }
    assert_eq!(listed, newest_first);
    assert_eq!(
        pages,
        [(json!(false), json!(true), 3), (json!(false), json!(false), 3), (json!(true), json!(false), 1)]
    );

    // A recipient, and a contract: created, then called.
    let payee = node.ok("ots_searchTransactionsBefore", json!([PAYEE, 0, 25]));
    let sent: Vec<Value> = mined[1..5].iter().rev().map(|(h, _)| json!(h)).collect();
    assert_eq!(hashes(&payee), sent);
    assert_eq!((payee["firstPage"].clone(), payee["lastPage"].clone()), (json!(true), json!(true)));
    let contract = node.ok("ots_searchTransactionsAfter", json!([counter, 0, 25]));
    assert_eq!(hashes(&contract), [json!(mined[6].0), json!(mined[0].0)]);
    // Bounds are exclusive; nothing past the head.
    let (first_block, last_block) = (mined[0].1, mined[6].1);
    let before_first = node.ok("ots_searchTransactionsBefore", json!([owner.address(), first_block, 25]));
    assert_eq!(hashes(&before_first), Vec::<Value>::new());
    assert_eq!(before_first["lastPage"], json!(true));
    let after_last = node.ok("ots_searchTransactionsAfter", json!([owner.address(), last_block, 25]));
    assert_eq!((hashes(&after_last), after_last["firstPage"].clone()), (vec![], json!(true)));
    let stranger = node.ok("ots_searchTransactionsBefore", json!([Address::repeat_byte(0x99), 0, 25]));
    assert_eq!(stranger, json!({"txs": [], "receipts": [], "firstPage": true, "lastPage": true}));

    // The page size is bounded (rpc.ots_max_page_txs, 25 as Otterscan asks).
    for method in ["ots_searchTransactionsBefore", "ots_searchTransactionsAfter"] {
        node.ok(method, json!([owner.address(), 0, 25]));
        let e = node.call(method, json!([owner.address(), 0, 26])).unwrap_err();
        assert_eq!(e["code"], -32000, "{e}");
        assert!(e["message"].as_str().unwrap().contains("max allowed page size: 25"), "{e}");
    }
}
