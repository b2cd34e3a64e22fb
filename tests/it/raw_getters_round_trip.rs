//! The raw getters answer what was sent and what the block objects say:
//! `debug_getRawTransaction` the exact bytes (keccak: the hash),
//! `debug_getRawHeader` / `debug_getRawBlock` / `debug_getRawReceipts` RLP
//! and EIP-2718 that decode to the fields `eth_getBlockByNumber` and
//! `eth_getBlockReceipts` report; `eth_getAccount` agrees with the single
//! reads; `txpool_inspect` / `txpool_contentFrom` show a held transaction
//! in geth's shapes; `eth_getProof` is refused naming why.
//!
//! A raw header does not hash to the block hash: sluice's block hash is the
//! keccak of its protobuf header (README), so that is not checked here.

use std::time::{Duration, Instant};

use alloy_consensus::{
    transaction::SignerRecoverable, Block, Header, ReceiptEnvelope, Transaction, TxEnvelope,
};
use alloy_eips::eip2718::{Decodable2718, Encodable2718};
use alloy_primitives::{keccak256, Bytes, TxKind, B256, U256};
use alloy_rlp::Decodable;
use serde_json::{json, Value};

use crate::support::*;

const EMPTY_ROOT: &str = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";

fn bytes(v: &Value) -> Bytes {
    v.as_str().unwrap_or_else(|| panic!("hex bytes, got {v}")).parse().unwrap()
}

#[test]
fn raw_getters_decode_to_what_the_objects_report() {
    let node = TestNode::dev();
    let sender = dev(0);
    let to = random_signer().address();
    let nonce = node.nonce(sender.address(), "latest");
    // A legacy transfer, a dynamic-fee one and a deployment, sent together
    // so they tend to share a block.
    let raws = vec![
        legacy(&sender, nonce, to, 7, Some(CHAIN_ID)),
        transfer(&sender, nonce + 1, to, 9),
        eip1559(&sender, nonce + 2, TxKind::Create, U256::ZERO, counter_initcode(), 200_000),
    ];
    let answers = node.send_batch(&raws);
    let hashes: Vec<B256> = answers
        .iter()
        .map(|a| a["result"].as_str().unwrap_or_else(|| panic!("{a}")).parse().unwrap())
        .collect();
    let receipts: Vec<Value> = hashes.iter().map(|h| node.receipt(h)).collect();

    for (raw, hash) in raws.iter().zip(&hashes) {
        let got = bytes(&node.ok("debug_getRawTransaction", json!([hash])));
        assert_eq!(&got, raw, "the exact bytes sent");
        assert_eq!(keccak256(&got), *hash);
        // Decoded, the fields eth_getTransactionByHash reports.
        let tx = TxEnvelope::decode_2718(&mut got.as_ref()).expect("EIP-2718 transaction");
        let object = node.ok("eth_getTransactionByHash", json!([hash]));
        let sig = tx.signature();
        for (field, value) in [
            ("hash", json!(tx.tx_hash())),
            ("type", json!(format!("{:#x}", u8::from(tx.tx_type())))),
            ("nonce", json!(format!("{:#x}", tx.nonce()))),
            ("to", json!(tx.to())),
            ("value", json!(format!("{:#x}", tx.value()))),
            ("gas", json!(format!("{:#x}", tx.gas_limit()))),
            ("input", json!(tx.input())),
            ("chainId", json!(tx.chain_id().map(|id| format!("{id:#x}")))),
            ("maxFeePerGas", json!(tx.is_dynamic_fee().then(|| format!("{:#x}", tx.max_fee_per_gas())))),
            ("maxPriorityFeePerGas", json!(tx.max_priority_fee_per_gas().map(|f| format!("{f:#x}")))),
            ("r", json!(format!("{:#x}", sig.r()))),
            ("s", json!(format!("{:#x}", sig.s()))),
        ] {
            assert_eq!(value, object[field], "{field} of {hash}: {object}");
        }
        assert_eq!(
            json!(tx.recover_signer().unwrap()),
            object["from"],
            "the signer the raw bytes recover to: {object}"
        );
    }
    // Unknown: null, as the execution-apis tests, reth, Nethermind and Besu
    // answer (geth's own answer is "0x", an accident of its types).
    assert_eq!(node.ok("debug_getRawTransaction", json!([B256::repeat_byte(0xee)])), Value::Null);
    let bad = node.call("debug_getRawTransaction", json!(["0x12"])).unwrap_err();
    assert_eq!(bad["code"], -32602, "{bad}");

    for r in &receipts {
        let number = r["blockNumber"].clone();
        let object = node.ok("eth_getBlockByNumber", json!([number, false]));
        let block_hash = object["hash"].clone();
        let raw_header = bytes(&node.ok("debug_getRawHeader", json!([number])));
        let header = Header::decode(&mut raw_header.as_ref()).expect("header RLP");
        for (field, value) in [
            ("parentHash", json!(header.parent_hash)),
            ("stateRoot", json!(header.state_root)),
            ("transactionsRoot", json!(header.transactions_root)),
            ("receiptsRoot", json!(header.receipts_root)),
            ("logsBloom", json!(header.logs_bloom)),
            ("miner", json!(header.beneficiary)),
            ("number", json!(format!("{:#x}", header.number))),
            ("timestamp", json!(format!("{:#x}", header.timestamp))),
            ("gasUsed", json!(format!("{:#x}", header.gas_used))),
            ("gasLimit", json!(format!("{:#x}", header.gas_limit))),
            ("baseFeePerGas", json!(header.base_fee_per_gas.map(|f| format!("{f:#x}")))),
        ] {
            assert_eq!(value, object[field], "{field} of block {number}");
        }
        // The same block by hash, as a string and as EIP-1898.
        assert_eq!(bytes(&node.ok("debug_getRawHeader", json!([block_hash]))), raw_header);
        let by_hash = json!([{"blockHash": block_hash}]);
        assert_eq!(bytes(&node.ok("debug_getRawHeader", by_hash.clone())), raw_header);

        let raw_block = bytes(&node.ok("debug_getRawBlock", by_hash.clone()));
        let block = Block::<TxEnvelope>::decode(&mut raw_block.as_ref()).expect("block RLP");
        assert_eq!(block.header, header);
        let tx_hashes: Vec<Value> =
            block.body.transactions.iter().map(|tx| json!(keccak256(tx.encoded_2718()))).collect();
        assert_eq!(Value::Array(tx_hashes), object["transactions"], "block {number}");

        let objects = node.ok("eth_getBlockReceipts", json!([number]));
        let raw_receipts = node.ok("debug_getRawReceipts", by_hash);
        let raw_receipts = raw_receipts.as_array().unwrap();
        assert_eq!(raw_receipts.len(), objects.as_array().unwrap().len());
        for (raw, object) in raw_receipts.iter().zip(objects.as_array().unwrap()) {
            let raw = bytes(raw);
            let envelope = ReceiptEnvelope::decode_2718(&mut raw.as_ref()).expect("EIP-2718 receipt");
            assert_eq!(json!(format!("{:#x}", u8::from(envelope.tx_type()))), object["type"]);
            let r = envelope.as_receipt_with_bloom().unwrap();
            assert_eq!(json!(format!("{:#x}", r.receipt.cumulative_gas_used)), object["cumulativeGasUsed"]);
            assert_eq!(json!(format!("{:#x}", u8::from(r.receipt.status.coerce_status()))), object["status"]);
            assert_eq!(json!(r.logs_bloom), object["logsBloom"]);
            assert_eq!(r.receipt.logs.len(), object["logs"].as_array().unwrap().len());
        }
    }

    // Nothing there: geth's answers (an empty string or null for a number
    // past the head, an error or no receipts for an unknown hash).
    let far = json!(["0xffffff"]);
    assert_eq!(node.ok("debug_getRawHeader", far.clone()), "0x");
    assert_eq!(node.ok("debug_getRawBlock", far.clone()), "0x");
    assert_eq!(node.ok("debug_getRawReceipts", far), Value::Null);
    let unknown = json!([B256::repeat_byte(0xee)]);
    for (method, what) in [("debug_getRawHeader", "header"), ("debug_getRawBlock", "block")] {
        let e = node.call(method, unknown.clone()).unwrap_err();
        assert_eq!(e["code"], -32000, "{method}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{what} #")) && message.ends_with(" not found"), "{e}");
    }
    assert_eq!(node.ok("debug_getRawReceipts", unknown), json!([]));

    // eth_getAccount: the single reads, together.
    let contract = receipts[2]["contractAddress"].as_str().unwrap().to_string();
    for who in [json!(sender.address()), json!(contract)] {
        let account = node.ok("eth_getAccount", json!([who, "latest"]));
        assert_eq!(account["nonce"], node.ok("eth_getTransactionCount", json!([who, "latest"])), "{account}");
        assert_eq!(account["balance"], node.ok("eth_getBalance", json!([who, "latest"])), "{account}");
        let code = bytes(&node.ok("eth_getCode", json!([who, "latest"])));
        assert_eq!(account["codeHash"], json!(keccak256(&code)), "{account}");
        assert_eq!(account["storageRoot"], EMPTY_ROOT, "sluice keeps no storage trie: {account}");
    }
    // Before the sender's transactions, at genesis.
    let genesis = node.ok("eth_getAccount", json!([sender.address(), "0x0"]));
    assert_eq!(genesis["nonce"], node.ok("eth_getTransactionCount", json!([sender.address(), "0x0"])));
    assert_eq!(node.ok("eth_getAccount", json!([random_signer().address(), "latest"])), Value::Null);
    let e = node.call("eth_getAccount", json!(["0x1234", "latest"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");

    // eth_getProof: refused, saying why, once its parameters parse (with
    // or without storage keys and block, as geth defaults them).
    for params in [
        json!([sender.address(), [], "latest"]),
        json!([contract, [B256::ZERO], {"blockHash": receipts[2]["blockHash"]}]),
        json!([sender.address(), []]),
    ] {
        let e = node.call("eth_getProof", params.clone()).unwrap_err();
        assert_eq!(e["code"], -32000, "{params}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with("eth_getProof is not supported"), "{e}");
        assert!(message.contains("stateRoot is an app hash"), "{e}");
    }
    let e = node.call("eth_getProof", json!(["0x1234", [], "latest"])).unwrap_err();
    assert_eq!(e["code"], -32602, "a bad address is a bad parameter first: {e}");
}

#[test]
fn txpool_views_show_a_held_transaction() {
    let node = TestNode::dev();
    let sender = dev(1);
    let to = random_signer().address();
    let nonce = node.nonce(sender.address(), "latest");
    // A nonce gap: held (geth's queue) until it fills.
    let raw = transfer(&sender, nonce + 5, to, 7);
    let hash = node.send(&raw).expect("held, answered with its hash");
    let key = (nonce + 5).to_string();

    let inspect = node.ok("txpool_inspect", json!([]));
    let line = &inspect["queued"][sender.address().to_checksum(None)][&key];
    assert_eq!(
        line,
        &json!(format!("{}: 7 wei + 21000 gas × {} wei", to.to_checksum(None), 2 * BASE_FEE)),
        "{inspect}"
    );

    assert_eq!(inspect["pending"], json!({}), "nothing else in the pool: {inspect}");

    let from = node.ok("txpool_contentFrom", json!([sender.address()]));
    let held = &from["queued"][&key];
    assert_eq!(held["hash"], json!(hash), "{from}");
    assert_eq!(held["from"], json!(sender.address()), "{from}");
    assert_eq!(held["nonce"], json!(format!("{:#x}", nonce + 5)), "{from}");
    assert_eq!(held["to"], json!(to), "{from}");
    assert_eq!(held["value"], "0x7", "{from}");
    assert_eq!(held["gasPrice"], json!(format!("{:#x}", 2 * BASE_FEE)), "pending: the fee cap, as geth");
    for unmined in ["blockHash", "blockNumber", "transactionIndex"] {
        assert_eq!(held[unmined], Value::Null, "{unmined}: {from}");
    }
    assert_eq!(from["queued"].as_object().map(|m| m.len()), Some(1), "{from}");
    assert_eq!(from["pending"], json!({}), "{from}");
    let other = node.ok("txpool_contentFrom", json!([random_signer().address()]));
    assert_eq!(other, json!({"pending": {}, "queued": {}}));
    let e = node.call("txpool_contentFrom", json!(["0x1234"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");

    // A held transaction is in the pool: its raw bytes are served.
    assert_eq!(bytes(&node.ok("debug_getRawTransaction", json!([hash]))), raw);

    // The gap filled, it is mined, and leaves the pool's views.
    let fill: Vec<Bytes> = (nonce..nonce + 5).map(|n| transfer(&sender, n, to, 1)).collect();
    for answer in node.send_batch(&fill) {
        assert!(answer["result"].is_string(), "{answer}");
    }
    let mined = node.receipt(&hash);
    assert_eq!(mined["status"], "0x1", "{mined}");
    // The pool forgets a block's transactions as the block commits; give
    // it a moment after the receipt.
    let empty = json!({"pending": {}, "queued": {}});
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.ok("txpool_inspect", json!([])) != empty {
        assert!(Instant::now() < deadline, "{}", node.ok("txpool_inspect", json!([])));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(node.ok("txpool_contentFrom", json!([sender.address()])), empty);
    assert_eq!(bytes(&node.ok("debug_getRawTransaction", json!([hash]))), raw, "mined, the same bytes");
}

#[test]
fn namespaces_left_out_of_rpc_apis_hide_them() {
    // A validator's apis: no debug, no txpool.
    let node = TestNode::start(&[("SLUICE_RPC__APIS", "eth,net,web3")], &["--block-time-ms", "50"]);
    for (method, params) in [
        ("debug_getRawHeader", json!(["latest"])),
        ("debug_getRawTransaction", json!([B256::ZERO])),
        ("txpool_inspect", json!([])),
        ("txpool_contentFrom", json!([dev(0).address()])),
    ] {
        let e = node.call(method, params).unwrap_err();
        assert_eq!(e["code"], -32601, "{method}: {e}");
    }
    assert!(node.ok("eth_getAccount", json!([dev(0).address(), "latest"]))["balance"].is_string());
}
