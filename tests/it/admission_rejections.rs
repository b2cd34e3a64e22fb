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
