//! A transaction with the same sender and nonce as one the pool holds
//! replaces it only with geth's price bump (`mempool.price_bump_percent`,
//! 10) on both its fee cap and its tip; else `replacement transaction
//! underpriced`. Wallets' "speed up" and "cancel" rely on it.

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::json;
use sluice_txpool::Signer;

use crate::support::*;

/// A signed transfer of `wei` paying fee cap `fee` and tip `tip`.
fn priced(from: &Signer, nonce: u64, to: Address, wei: u64, fee: u128, tip: u128) -> Bytes {
    from.sign_raw(TypedTransaction::Eip1559(TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: fee,
        max_priority_fee_per_gas: tip,
        to: TxKind::Call(to),
        value: U256::from(wei),
        input: Bytes::new(),
        access_list: Default::default(),
    }))
}

#[test]
fn a_held_transaction_is_replaced_only_with_the_bump() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let sender = dev(2);
    let to = random_signer().address();
    let (fee, tip) = (2 * BASE_FEE, 1_000);
    // Nonce 1 waits for nonce 0.
    node.send(&priced(&sender, 1, to, 1, fee, tip)).expect("held");
    for (f, t) in [(fee, tip), (fee * 2, tip), (fee * 110 / 100 - 1, tip * 2)] {
        let e = node.send(&priced(&sender, 1, to, 2, f, t)).unwrap_err();
        assert_eq!(e["message"], "replacement transaction underpriced", "fee {f} tip {t}: {e}");
        assert_eq!(e["code"], -32000, "{e}");
    }
    let winner = node.send(&priced(&sender, 1, to, 3, fee * 110 / 100, tip * 110 / 100)).expect("replaces");
    assert_eq!(node.ok("txpool_status", json!([]))["queued"], "0x1");
    node.send(&priced(&sender, 0, to, 10, fee, tip)).expect("fills the gap");
    let r = node.receipt(&winner);
    assert_eq!(r["status"], "0x1", "{r}");
    assert_eq!(node.balance(to), U256::from(13), "nonce 0's 10 wei and the replacement's 3");
}

#[test]
fn a_pending_transaction_is_sped_up_or_cancelled_with_the_bump() {
    // Blocks every 2 s: the transactions below wait in their shard.
    let node = TestNode::start(&[], &["--block-time-ms", "2000"]);
    let sender = dev(3);
    let to = random_signer().address();
    let (fee, tip) = (2 * BASE_FEE, 1_000_000);
    let old = node.send(&priced(&sender, 0, to, 5, fee, tip)).expect("admitted");
    let again = node.send(&priced(&sender, 0, to, 5, fee, tip)).unwrap_err();
    assert_eq!(again["message"], "already known", "{again}");
    let e = node.send(&priced(&sender, 0, to, 6, fee * 109 / 100, tip * 2)).unwrap_err();
    assert_eq!(e["message"], "replacement transaction underpriced", "{e}");
    assert_eq!(e["code"], -32000, "{e}");
    // "Speed up": same transfer, fees 10% up. Then "cancel" that one: 0 wei
    // to itself, fees 10% up again.
    let faster = node.send(&priced(&sender, 0, to, 5, fee * 11 / 10, tip * 11 / 10)).expect("replaces");
    let cancel = priced(&sender, 0, sender.address(), 0, fee * 121 / 100, tip * 121 / 100);
    let cancel = node.send(&cancel).expect("replaces again");
    assert_eq!(node.ok("txpool_status", json!([]))["pending"], "0x1", "one transaction per nonce");
    let r = node.receipt(&cancel);
    assert_eq!(r["status"], "0x1", "{r}");
    for hash in [old, faster] {
        let gone = node.ok("eth_getTransactionByHash", json!([hash]));
        assert!(gone.is_null(), "{hash} replaced, never mined: {gone}");
        assert!(node.ok("eth_getTransactionReceipt", json!([hash])).is_null());
    }
    assert_eq!(node.balance(to), U256::ZERO, "the transfer was cancelled");
    // A mined nonce stays too low, whatever the fees.
    let e = node.send(&priced(&sender, 0, to, 1, fee * 3, tip * 3)).unwrap_err();
    assert_eq!(e["message"], "nonce too low: next nonce 1, tx nonce 0", "{e}");
}
