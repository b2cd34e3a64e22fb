//! Admission refuses overdrafts (geth's rule): a sender's in-flight
//! transactions' maximum costs count against its balance, so an account
//! funded for one transaction cannot get a second one admitted that
//! execution would then skip unpaid.

use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::Value;
use sluice_txpool::Signer;

use crate::support::*;

/// Gas limit of each test transfer: far above the 21,000 it uses, so most
/// of its maximum cost comes back as a refund.
const GAS: u64 = 1_000_000;
/// Value of each test transfer, in wei.
const VALUE: u64 = 1_000;

/// The maximum cost admission charges a transfer of `gas` at the helpers'
/// fee cap (`2 * BASE_FEE`) carrying `value`.
fn max_cost(gas: u64, value: u64) -> U256 {
    U256::from(gas) * U256::from(2 * BASE_FEE) + U256::from(value)
}

/// A transfer of `VALUE` with a gas limit of `gas`.
fn send_of(from: &Signer, nonce: u64, to: Address, gas: u64) -> Bytes {
    eip1559(from, nonce, TxKind::Call(to), U256::from(VALUE), Bytes::new(), gas)
}

fn message(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_else(|| panic!("refused: {answer}"))
}

#[test]
fn a_sender_funded_for_one_transfer_gets_only_one_admitted() {
    let node = TestNode::dev();
    let funder = dev(0);
    let poor = random_signer();
    let to = random_signer().address();
    let cost = max_cost(GAS, VALUE);
    let fund = u64::try_from(cost).unwrap();
    let funding =
        node.send(&transfer(&funder, node.nonce(funder.address(), "pending"), poor.address(), fund)).unwrap();
    node.receipt(&funding);
    assert_eq!(node.balance(poor.address()), cost);

    // Ten at once, in one batch: the first takes the whole balance.
    let raws: Vec<Bytes> = (0..10).map(|n| send_of(&poor, n, to, GAS)).collect();
    let answers = node.send_batch(&raws);
    assert!(answers[0].get("error").is_none(), "the first is admitted: {}", answers[0]);
    let overdraft = format!(
        "insufficient funds for gas * price + value: balance {cost}, queued cost {cost}, tx cost {cost}, overshot {cost}"
    );
    for (n, answer) in answers.iter().enumerate().skip(1) {
        assert_eq!(answer["error"]["code"], -32000, "tx {n}: {answer}");
        assert_eq!(message(answer), overdraft, "tx {n}");
    }

    let hash: alloy_primitives::B256 = answers[0]["result"].as_str().unwrap().parse().unwrap();
    let receipt = node.receipt(&hash);
    assert_eq!(receipt["status"], "0x1");
    let gas_used = parse_u64(&receipt["gasUsed"]);
    let price = parse_u256(&receipt["effectiveGasPrice"]);
    assert_eq!(gas_used, 21_000);
    // Only the first was paid for, and it paid only for the gas it used.
    let left = cost - U256::from(gas_used) * price - U256::from(VALUE);
    assert_eq!(node.balance(poor.address()), left);
    assert_eq!(node.balance(to), U256::from(VALUE));
    assert_eq!(node.nonce(poor.address(), "latest"), 1);

    // Refunded: what the rest of the balance covers is admitted again, one
    // more is an overdraft.
    let small = max_cost(21_000, VALUE);
    let fits = u64::try_from(left / small).unwrap();
    assert!(fits >= 2, "the refund pays for several small transfers");
    let raws: Vec<Bytes> = (1..=fits + 1).map(|n| send_of(&poor, n, to, 21_000)).collect();
    let answers = node.send_batch(&raws);
    for answer in &answers[..fits as usize] {
        assert!(answer.get("error").is_none(), "affordable: {answer}");
    }
    let queued = small * U256::from(fits);
    let refused = format!(
        "insufficient funds for gas * price + value: balance {left}, queued cost {queued}, tx cost {small}, overshot {}",
        queued + small - left
    );
    assert_eq!(message(&answers[fits as usize]), refused);
    let last: alloy_primitives::B256 =
        answers[fits as usize - 1]["result"].as_str().unwrap().parse().unwrap();
    assert_eq!(node.receipt(&last)["status"], "0x1");
    assert_eq!(node.nonce(poor.address(), "latest"), fits + 1);
    assert_eq!(node.balance(to), U256::from(VALUE) * U256::from(fits + 1));
}
