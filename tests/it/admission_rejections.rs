//! Every admission refusal answers a standard code and geth's wording, and
//! refusing one transaction never disturbs the next.

use alloy_consensus::{TxEip1559, TxEnvelope, TypedTransaction};
use alloy_eips::eip2718::{Decodable2718, Encodable2718};
use alloy_primitives::{Bytes, Signature, TxKind, U256};
use serde_json::{json, Value};

use crate::support::*;

fn refused(node: &TestNode, raw: &Bytes) -> (i64, String) {
    let e: Value = node.send(raw).expect_err("must be refused");
    (e["code"].as_i64().unwrap(), e["message"].as_str().unwrap().to_string())
}

fn tx1559(nonce: u64, gas: u64, max_fee: u128, tip: u128, chain_id: u64, input: Bytes) -> TypedTransaction {
    TypedTransaction::Eip1559(TxEip1559 {
        chain_id,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: tip,
        to: TxKind::Call(random_signer().address()),
        value: U256::from(1),
        input,
        access_list: Default::default(),
    })
}

#[test]
fn each_refusal_has_its_code_and_geth_message() {
    // Future nonces are refused, not held, with the queue turned off.
    let node =
        TestNode::start(&[("SLUICE_MEMPOOL__MAX_FUTURE_TXS_PER_SENDER", "0")], &["--block-time-ms", "1000"]);
    let a = dev(0);

    // already known, then nonce too low once committed.
    let first = transfer(&a, 0, random_signer().address(), 1);
    let hash = node.send(&first).unwrap();
    assert_eq!(refused(&node, &first), (-32000, "already known".into()));
    node.receipt(&hash);
    assert_eq!(refused(&node, &first), (-32000, "nonce too low: next nonce 1, tx nonce 0".into()));

    // A nonce ahead of the next one, with nothing held for gaps.
    let (code, msg) = refused(&node, &transfer(&a, 5, random_signer().address(), 1));
    assert_eq!((code, msg.as_str()), (-32000, "nonce too high: next nonce 1, tx nonce 5"));

    // Funds.
    let poor = random_signer();
    let (code, msg) = refused(&node, &transfer(&poor, 0, a.address(), 1));
    assert_eq!(code, -32000);
    assert!(msg.starts_with("insufficient funds for gas * price + value: balance 0, tx cost "), "{msg}");

    // Chain id and replay protection.
    let (code, msg) = refused(&node, &a.sign_raw(tx1559(1, 21_000, 2 * BASE_FEE, 1, 1, Bytes::new())));
    assert_eq!((code, msg.as_str()), (-32000, "invalid chain id for signer: have 1 want 31337"));
    let (_, msg) = refused(&node, &legacy(&a, 1, random_signer().address(), 1, None));
    assert_eq!(msg, "only replay-protected (EIP-155) transactions allowed over RPC");

    // Gas.
    let (_, msg) =
        refused(&node, &a.sign_raw(tx1559(1, 1_000_000_000, 2 * BASE_FEE, 1, CHAIN_ID, Bytes::new())));
    assert_eq!(msg, "exceeds block gas limit");
    let (_, msg) = refused(&node, &a.sign_raw(tx1559(1, 20_000, 2 * BASE_FEE, 1, CHAIN_ID, Bytes::new())));
    assert_eq!(msg, "intrinsic gas too low: gas 20000, minimum needed 21000");

    // Fees.
    let (_, msg) =
        refused(&node, &a.sign_raw(tx1559(1, 21_000, BASE_FEE, BASE_FEE + 1, CHAIN_ID, Bytes::new())));
    assert_eq!(msg, "max priority fee per gas higher than max fee per gas");
    let (_, msg) = refused(&node, &a.sign_raw(tx1559(1, 21_000, BASE_FEE - 1, 0, CHAIN_ID, Bytes::new())));
    assert!(msg.starts_with("max fee per gas less than block base fee"), "{msg}");

    // Size.
    let big = Bytes::from(vec![1u8; 140_000]);
    let (_, msg) = refused(&node, &a.sign_raw(tx1559(1, 3_000_000, 2 * BASE_FEE, 1, CHAIN_ID, big)));
    assert!(msg.starts_with("oversized data: transaction size "), "{msg}");
    assert!(msg.ends_with("limit 131072"), "{msg}");

    // Encodings: blob type, garbage RLP, trailing bytes, bad hex.
    let (_, msg) = refused(&node, &Bytes::from_static(&[0x03, 0xc0]));
    assert_eq!(msg, "transaction type not supported");
    let (code, msg) = refused(&node, &Bytes::from_static(&[0x02, 0xff, 0x01]));
    assert_eq!(code, -32000);
    assert!(msg.starts_with("rlp"), "{msg}");
    let mut trailing = transfer(&a, 1, random_signer().address(), 1).to_vec();
    trailing.push(0x00);
    let (_, msg) = refused(&node, &Bytes::from(trailing));
    assert_eq!(msg, "rlp: input contains more than one value");
    let e = node.call("eth_sendRawTransaction", json!(["0xzz"])).unwrap_err();
    assert_eq!(e["code"], -32602);
    let e = node.call("eth_sendRawTransaction", json!([])).unwrap_err();
    assert_eq!(e["code"], -32602);

    // A high-s signature (the malleable twin of a valid one).
    let valid = transfer(&a, 1, random_signer().address(), 1);
    let env = TxEnvelope::decode_2718(&mut valid.as_ref()).unwrap();
    let sig = *env.signature();
    let n =
        U256::from_str_radix("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141", 16).unwrap();
    let flipped = Signature::new(sig.r(), n - sig.s(), !sig.v());
    let typed: TypedTransaction = env.into_typed_transaction();
    let twin = Bytes::from(TxEnvelope::new_unhashed(typed, flipped).encoded_2718());
    let (code, msg) = refused(&node, &twin);
    assert_eq!((code, msg.as_str()), (-32000, "invalid sender"));

    // After all of that, the valid transaction is still admitted and mined.
    let r = node.receipt(&node.send(&valid).unwrap());
    assert_eq!(r["status"], "0x1");
    let metrics = node.metrics();
    for outcome in [
        "ok",
        "nonce_too_low",
        "already_known",
        "insufficient_funds",
        "chain_id",
        "oversized",
        "invalid_sender",
    ] {
        assert!(
            metrics.contains(&format!("sluice_tx_admission_total{{result=\"{outcome}\"}}")),
            "missing admission outcome {outcome}"
        );
    }
}

/// A batch's submissions are admitted together (one nonce reservation
/// step) yet each gets its own answer, in place: refusals between
/// admissions disturb neither, other calls in the batch are answered as
/// usual, and a sender's nonces in one batch go in in order.
#[test]
fn a_batch_answers_each_submission_in_place() {
    let node = TestNode::start(&[], &["--block-time-ms", "200"]);
    let (a, b) = (dev(0), dev(1));
    let to = random_signer().address();
    let a0 = transfer(&a, 0, to, 1);
    let a1 = transfer(&a, 1, to, 1);
    let b0 = transfer(&b, 0, to, 1);
    let gap = transfer(&b, 5, to, 1);
    let poor = transfer(&random_signer(), 0, to, 1);
    let send = |id: u64, raw: &Bytes| json!({"jsonrpc": "2.0", "id": id, "method": "eth_sendRawTransaction", "params": [raw]});
    let batch = json!([
        send(0, &a0),
        send(1, &a0),
        {"jsonrpc": "2.0", "id": 2, "method": "eth_chainId"},
        send(3, &Bytes::from_static(&[0xde, 0xad])),
        send(4, &a1),
        send(5, &poor),
        {"jsonrpc": "2.0", "method": "eth_sendRawTransaction", "params": [b0]},
        send(7, &gap),
    ]);
    let answers = node.post(&batch);
    let answers = answers.as_array().expect("a batch answer");
    assert_eq!(answers.len(), 7, "the notification is not answered: {answers:?}");
    let by_id = |id: u64| answers.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no answer {id}"));
    let hash = |raw: &Bytes| json!(alloy_primitives::keccak256(raw));
    assert_eq!(by_id(0)["result"], hash(&a0));
    assert_eq!(by_id(1)["error"]["message"], "already known");
    assert_eq!(by_id(2)["result"], "0x7a69");
    assert_eq!(by_id(3)["error"]["code"], -32000, "{}", by_id(3));
    assert_eq!(by_id(4)["result"], hash(&a1));
    let funds = by_id(5)["error"]["message"].as_str().unwrap_or_default();
    assert!(funds.starts_with("insufficient funds for gas * price + value"), "{funds}");
    // Held for its gap (nonces 1-4 of b are missing): answered with its hash.
    assert_eq!(by_id(7)["result"], hash(&gap));
    // Answers keep the batch's order.
    let ids: Vec<u64> = answers.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4, 5, 7]);
    for raw in [&a0, &a1, &b0] {
        assert_eq!(node.receipt(&alloy_primitives::keccak256(raw))["status"], "0x1");
    }
    let queued = node.ok("txpool_status", json!([]));
    assert_eq!(queued["queued"], "0x1", "{queued}");
}
