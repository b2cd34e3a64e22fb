//! A block is ordered as geth orders it: effective tip first, then arrival
//! across senders, each sender's nonces in order. A deployment followed by
//! calls from other accounts (what every deploy script does) runs the calls
//! against the deployed code, whichever mempool shard each sender is in.

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::json;
use sluice_txpool::Signer;

use crate::support::*;

/// One JSON-RPC batch of raw transactions; every one admitted.
fn send_batch(node: &TestNode, raws: &[Bytes]) -> Vec<B256> {
    node.send_batch(raws)
        .iter()
        .map(|a| a["result"].as_str().unwrap_or_else(|| panic!("refused: {a}")).parse().expect("hash"))
        .collect()
}

/// Block number and index of each transaction (after waiting for all).
fn positions(node: &TestNode, hashes: &[B256]) -> Vec<(u64, u64)> {
    hashes
        .iter()
        .map(|h| {
            let r = node.receipt(h);
            (parse_u64(&r["blockNumber"]), parse_u64(&r["transactionIndex"]))
        })
        .collect()
}

/// Signers funded from dev account 1, one block.
fn funded_signers(node: &TestNode, n: usize) -> Vec<Signer> {
    let signers: Vec<Signer> = (0..n).map(|_| random_signer()).collect();
    let payer = dev(1);
    let start = node.nonce(payer.address(), "pending");
    let raws: Vec<Bytes> = signers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let wei = U256::from(10u64).pow(U256::from(18u64));
            eip1559(&payer, start + i as u64, TxKind::Call(s.address()), wei, Bytes::new(), 21_000)
        })
        .collect();
    positions(node, &send_batch(node, &raws));
    signers
}

fn with_tip(from: &Signer, nonce: u64, tip: u128) -> Bytes {
    from.sign_raw(TypedTransaction::Eip1559(TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: BASE_FEE + tip,
        max_priority_fee_per_gas: tip,
        to: TxKind::Call(Address::repeat_byte(0x77)),
        value: U256::from(1),
        input: Bytes::new(),
        access_list: Default::default(),
    }))
}

/// A node that seals one block for everything a batch brings (the block
/// timer starts at the first transaction) and nothing while idle.
fn node() -> TestNode {
    TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")], &["--block-time-ms", "700"])
}

#[test]
fn a_deployment_then_calls_from_other_senders_run_in_arrival_order() {
    let node = node();
    let callers = funded_signers(&node, 5);
    let deployer = dev(0);
    // Twice, so that the order cannot come from which shard a block
    // happened to visit first.
    for round in 0..2u64 {
        let nonce = node.nonce(deployer.address(), "pending");
        let counter = deployer.address().create(nonce);
        let mut raws =
            vec![eip1559(&deployer, nonce, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)];
        for n in 0..4 {
            for c in &callers {
                raws.push(eip1559(c, 4 * round + n, TxKind::Call(counter), U256::ZERO, Bytes::new(), 60_000));
            }
        }
        let at = positions(&node, &send_batch(&node, &raws));
        assert!(at.windows(2).all(|w| w[0] < w[1]), "round {round}: block order is arrival order: {at:?}");
        let slot = node.ok("eth_getStorageAt", json!([counter, "0x0", "latest"]));
        assert_eq!(parse_u256(&slot), U256::from(20), "round {round}: every call counted");
    }
}

#[test]
fn a_higher_tip_goes_first_but_never_before_its_senders_earlier_nonce() {
    let node = node();
    let s = funded_signers(&node, 3);
    let gwei = 1_000_000_000u128;
    // Arrival: a (tip 1 gwei), b (1), c nonce 0 (1), c nonce 1 (9), b
    // nonce 1 (5).
    let raws = [
        with_tip(&s[0], 0, gwei),
        with_tip(&s[1], 0, gwei),
        with_tip(&s[2], 0, gwei),
        with_tip(&s[2], 1, 9 * gwei),
        with_tip(&s[1], 1, 5 * gwei),
    ];
    let at = positions(&node, &send_batch(&node, &raws));
    assert!(at.iter().all(|(b, _)| *b == at[0].0), "one block: {at:?}");
    let order: Vec<u64> = at.iter().map(|(_, i)| *i).collect();
    // The senders' first transactions all tip 1: a (arrived first), then
    // b (before c); b's nonce 1 (tip 5) then beats c's nonce 0 (tip 1);
    // c's nonce 1 (tip 9) waits for c's nonce 0.
    assert_eq!(order, vec![0, 1, 3, 4, 2], "{at:?}");
}
