//! A sender whose code is an EIP-7702 delegation gets one transaction in
//! flight at a time, as geth 1.15+ allows: its delegated code can spend
//! its balance whenever anyone calls it, so the in-flight costs admission
//! counted prove nothing. A second one is refused with geth's "in-flight
//! transaction limit reached for delegated accounts", a gapped one with
//! "gapped-nonce tx from delegated accounts"; replacing the one in flight
//! still works.

use alloy_consensus::{TxEip1559, TxEip7702, TypedTransaction};
use alloy_eips::eip7702::Authorization;
use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::json;
use sluice_txpool::Signer;

use crate::support::*;

/// A transfer of 1 wei from `from` paying `fee` and tip `fee / 2`.
fn send_one(from: &Signer, nonce: u64, to: Address, fee: u128) -> Bytes {
    from.sign_raw(TypedTransaction::Eip1559(TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: fee,
        max_priority_fee_per_gas: fee / 2,
        to: TxKind::Call(to),
        value: U256::from(1),
        input: Bytes::new(),
        access_list: Default::default(),
    }))
}

#[test]
fn a_delegated_sender_gets_one_transaction_in_flight() {
    // Blocks every second: a transaction stays in flight long enough.
    let node = TestNode::start(&[], &["--block-time-ms", "1000"]);
    let (sponsor, authority) = (dev(0), dev(1));
    let target = Address::repeat_byte(0x42);
    let auth = Authorization { chain_id: U256::from(CHAIN_ID), address: target, nonce: 0 };
    let signed = auth.clone().into_signed(authority.sign_hash(&auth.signature_hash()));
    let delegate = sponsor.sign_raw(TypedTransaction::Eip7702(TxEip7702 {
        chain_id: CHAIN_ID,
        nonce: 0,
        gas_limit: 100_000,
        max_fee_per_gas: 2 * BASE_FEE,
        max_priority_fee_per_gas: 1_000,
        to: sponsor.address(),
        value: U256::ZERO,
        access_list: Default::default(),
        authorization_list: vec![signed],
        input: Bytes::new(),
    }));
    let r = node.receipt(&node.send(&delegate).expect("type 4 admitted"));
    assert_eq!(r["status"], "0x1", "{r}");
    let code = node.ok("eth_getCode", json!([authority.address(), "latest"]));
    assert_eq!(code, json!(format!("0xef0100{}", hex(target))), "delegated");
    // The authorization took nonce 0 of the authority.
    let next = node.nonce(authority.address(), "latest");
    assert_eq!(next, 1);

    let to = random_signer().address();
    let fee = 2 * BASE_FEE;
    let first = node.send(&send_one(&authority, next, to, fee)).expect("one in flight");
    for nonce in [next + 1, next + 3] {
        let e = node.send(&send_one(&authority, nonce, to, fee)).unwrap_err();
        assert_eq!(e["message"], "in-flight transaction limit reached for delegated accounts", "{e}");
        assert_eq!(e["code"], -32000, "{e}");
    }
    // Replacing the one in flight is still allowed (with the bump).
    let faster = node.send(&send_one(&authority, next, to, fee * 2)).expect("replacement");
    let r = node.receipt(&faster);
    assert_eq!(r["status"], "0x1", "{r}");
    assert!(node.ok("eth_getTransactionReceipt", json!([first])).is_null(), "replaced");
    // Nothing in flight: a gap is refused, not held.
    let e = node.send(&send_one(&authority, next + 2, to, fee)).unwrap_err();
    assert_eq!(e["message"], "gapped-nonce tx from delegated accounts", "{e}");
    assert_eq!(node.ok("txpool_status", json!([]))["queued"], "0x0");
    // An ordinary sender still gets several in flight.
    let plain = dev(2);
    for nonce in 0..3 {
        node.send(&send_one(&plain, nonce, to, fee)).expect("ordinary sender");
    }
}

fn hex(a: Address) -> String {
    a.0.iter().map(|b| format!("{b:02x}")).collect()
}
