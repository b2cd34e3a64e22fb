//! A full mempool gives up its cheapest transaction for a better-paying
//! one, as geth's does: a newcomer paying more than the cheapest sender's
//! last in-flight transaction evicts it (its sender may send that nonce
//! again); one paying the same is refused with `-32003 txpool is full`,
//! one paying less with `transaction underpriced`. Without this, whoever
//! fills the pool first at the lowest price holds it.

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{keccak256, Address, Bytes, TxKind, U256};
use serde_json::json;
use sluice_txpool::Signer;

use crate::{backpressure_txpool_full::genesis_for, support::*};

/// A signed transfer of 1 wei paying tip `tip` under fee cap `10 * BASE_FEE`.
fn paying(from: &Signer, nonce: u64, to: Address, tip: u128) -> Bytes {
    from.sign_raw(TypedTransaction::Eip1559(TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 10 * BASE_FEE,
        max_priority_fee_per_gas: tip,
        to: TxKind::Call(to),
        value: U256::from(1),
        input: Bytes::new(),
        access_list: Default::default(),
    }))
}

#[test]
fn a_better_paying_transaction_evicts_the_cheapest_tail() {
    let senders: Vec<_> = (0..5).map(|_| random_signer()).collect();
    let dir = std::env::temp_dir().join(format!("sluice-evict-{}", std::process::id()));
    let genesis = genesis_for(&dir, &senders);
    // Four transactions fill the pool; no idle blocks, and the first block
    // 10 s after start, leave them queued while the test runs.
    let node = TestNode::start(
        &[("SLUICE_MEMPOOL__MAX_TXS", "4"), ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")],
        &["--block-time-ms", "10000", "--genesis", genesis.to_str().unwrap()],
    );
    let start = node.ok("eth_blockNumber", json!([]));
    let sink = random_signer().address();
    let gwei = 1_000_000_000;
    let cheap: Vec<Bytes> = (0..4).map(|i| paying(&senders[i], 0, sink, (i as u128 + 1) * gwei)).collect();
    for raw in &cheap {
        node.send(raw).expect("room for four");
    }
    let newcomer = &senders[4];
    let e = node.send(&paying(newcomer, 0, sink, gwei - 1)).unwrap_err();
    assert_eq!(
        (e["code"].clone(), e["message"].clone()),
        (json!(-32000), json!("transaction underpriced")),
        "{e}"
    );
    let e = node.send(&paying(newcomer, 0, sink, gwei)).unwrap_err();
    assert_eq!((e["code"].clone(), e["message"].clone()), (json!(-32003), json!("txpool is full")), "{e}");
    assert_eq!(node.metric("sluice_txs_dropped_total{reason=\"evicted\"}").unwrap_or(0.0), 0.0);

    // Outbidding the cheapest (1 gwei) takes its room.
    let better = node.send(&paying(newcomer, 0, sink, 2 * gwei)).expect("evicts the 1 gwei transfer");
    assert_eq!(node.ok("txpool_status", json!([]))["pending"], "0x4", "still at the bound");
    let evicted = keccak256(&cheap[0]);
    assert!(node.ok("eth_getTransactionByHash", json!([evicted])).is_null(), "evicted means gone");
    assert_eq!(node.metric("sluice_txs_dropped_total{reason=\"evicted\"}"), Some(1.0));
    // Its sender may send that nonce again, paying enough to evict the
    // next cheapest (2 gwei: the newcomer's and sender 1's tie; sender 1's
    // came first, but either may go).
    let again = node.send(&paying(&senders[0], 0, sink, 3 * gwei)).expect("the evicted nonce is free again");
    assert_eq!(node.metric("sluice_txs_dropped_total{reason=\"evicted\"}"), Some(2.0));

    assert_eq!(node.ok("eth_blockNumber", json!([])), start, "no block took the pool meanwhile");

    // Every kept transaction is mined; no evicted one is.
    let kept: Vec<_> = [keccak256(&cheap[1]), better, keccak256(&cheap[2]), keccak256(&cheap[3]), again]
        .into_iter()
        .filter(|h| !node.ok("eth_getTransactionByHash", json!([h])).is_null())
        .collect();
    assert_eq!(kept.len(), 4, "one of the two 2 gwei transfers was evicted");
    for hash in &kept {
        assert_eq!(node.receipt(hash)["status"], "0x1");
    }
    assert!(node.ok("eth_getTransactionReceipt", json!([evicted])).is_null());
    assert_eq!(node.balance(sink), U256::from(4));
    let _ = std::fs::remove_dir_all(dir);
}
