//! A proposal's transactions: every stateless refusal, and the time one
//! full 5,000-transaction block takes.

use super::*;
use crate::sign::Signer;
use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Address, Signature, TxKind, B256, U256};

const CHAIN: u64 = 7;
const GWEI: u64 = 1_000_000_000;
const GAS: u64 = 30_000_000;

fn rules() -> AdmissionRules {
    AdmissionRules::for_proposals(CHAIN, crate::Spec::Osaka, GAS, GWEI, 128 * 1024)
}

fn signer(i: u64) -> Signer {
    let mut secret = [0u8; 32];
    secret[24..].copy_from_slice(&(i + 1).to_be_bytes());
    Signer::from_bytes(&B256::from(secret)).unwrap()
}

fn tx(nonce: u64) -> TxEip1559 {
    TxEip1559 {
        chain_id: CHAIN,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 2 * u128::from(GWEI),
        max_priority_fee_per_gas: 1,
        to: TxKind::Call(Address::repeat_byte(0xbb)),
        value: U256::from(1),
        ..Default::default()
    }
}

fn raw(t: TxEip1559) -> Bytes {
    signer(0).sign_raw(TypedTransaction::Eip1559(t))
}

fn check(raws: &[Bytes]) -> Result<(), ProposalError> {
    check_proposal_txs(raws, &rules(), 2)
}

fn refused_at(raws: &[Bytes]) -> (usize, &'static str) {
    match check(raws).unwrap_err() {
        e @ ProposalError::Tx { index, .. } => (index, e.reason()),
        e @ ProposalError::GasOverBlock { index, .. } => (index, e.reason()),
        e @ ProposalError::Duplicate { index, .. } => (index, e.reason()),
        e @ ProposalError::BlockOversized { .. } => (usize::MAX, e.reason()),
    }
}

#[test]
fn honest_transactions_pass() {
    let raws: Vec<Bytes> = (0..50).map(|n| raw(tx(n))).collect();
    check(&raws).unwrap();
    check(&[]).unwrap();
}

#[test]
fn undecodable_bytes_trailing_bytes_and_blob_types_are_refused() {
    let good = raw(tx(0));
    let mut trailing = good.to_vec();
    trailing.push(0);
    for (junk, reason) in [
        (Bytes::from(vec![0xc3, 1, 2]), "invalid"),
        (Bytes::from(trailing), "invalid"),
        (Bytes::from(vec![3, 0xc0]), "type_not_supported"),
        (Bytes::from(vec![0x42; 300]), "type_not_supported"),
        (Bytes::new(), "invalid"),
    ] {
        assert_eq!(refused_at(&[good.clone(), junk]), (1, reason));
    }
}

#[test]
fn a_bad_signature_is_refused() {
    let t = tx(0);
    // r = 1, s = 1 is in range but recovers no point (or a random one with
    // a high s); zero r is out of range. Each must fail recovery.
    for sig in [Signature::new(U256::ZERO, U256::from(1), false), Signature::new(U256::MAX, U256::MAX, true)]
    {
        let bad =
            Bytes::from(alloy_consensus::TxEnvelope::new_unhashed(t.clone().into(), sig).encoded_2718());
        assert_eq!(refused_at(&[raw(tx(1)), bad]), (1, "invalid_sender"));
    }
}

#[test]
fn another_chain_and_unprotected_legacy_are_refused() {
    let other = raw(TxEip1559 { chain_id: CHAIN + 1, ..tx(0) });
    assert_eq!(refused_at(&[other]), (0, "chain_id"));
    let legacy = alloy_consensus::TxLegacy {
        chain_id: None,
        gas_price: 2 * u128::from(GWEI),
        gas_limit: 21_000,
        to: TxKind::Call(Address::ZERO),
        ..Default::default()
    };
    let legacy = signer(0).sign_raw(TypedTransaction::Legacy(legacy));
    assert_eq!(refused_at(&[legacy]), (0, "unprotected"));
}

#[test]
fn gas_below_intrinsic_and_fees_below_the_base_fee_are_refused() {
    assert_eq!(refused_at(&[raw(TxEip1559 { gas_limit: 20_999, ..tx(0) })]), (0, "intrinsic_gas"));
    assert_eq!(refused_at(&[raw(TxEip1559 { max_fee_per_gas: 1, ..tx(0) })]), (0, "underpriced"));
    let tip = TxEip1559 { max_priority_fee_per_gas: 3 * u128::from(GWEI), ..tx(0) };
    assert_eq!(refused_at(&[raw(tip)]), (0, "tip_above_cap"));
}

#[test]
fn a_transaction_twice_is_refused() {
    let raws = [raw(tx(0)), raw(tx(1)), raw(tx(0))];
    assert_eq!(refused_at(&raws), (2, "duplicate"));
    assert_eq!(check(&raws).unwrap_err().to_string(), "transaction 2 repeats transaction 0");
    check(&raws[..2]).unwrap();
}

#[test]
fn declared_gas_over_the_block_limit_is_refused() {
    // Each fits alone; the third takes the sum past 30M.
    let big = |n| raw(TxEip1559 { gas_limit: 10_000_001, ..tx(n) });
    let raws = [big(0), big(1), big(2)];
    assert_eq!(refused_at(&raws), (2, "block_gas"));
    check(&raws[..2]).unwrap();
    // Exactly the limit is fine.
    let exact = [0, 1, 2].map(|n| raw(TxEip1559 { gas_limit: 10_000_000, ..tx(n) }));
    check(&exact).unwrap();
}

#[test]
fn gas_over_the_eip7825_cap_is_refused_on_osaka_only() {
    let over = |spec| {
        let rules = AdmissionRules::for_proposals(CHAIN, spec, 100_000_000, GWEI, 128 * 1024);
        check_proposal_txs(&[raw(TxEip1559 { gas_limit: (1 << 24) + 1, ..tx(0) })], &rules, 1)
    };
    let refused = over(crate::Spec::Osaka).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "transaction 0: transaction gas limit too high (cap: 16777216, tx: 16777217)"
    );
    assert_eq!(refused.reason(), "gas_limit");
    over(crate::Spec::Prague).unwrap();
}

#[test]
fn a_block_past_the_eip7934_size_cap_is_refused_on_osaka_only() {
    // 70 transactions of 120 KiB of calldata each: 8.4 MB, past the cap,
    // each within the size and gas limits.
    let big = |n| raw(TxEip1559 { input: vec![1u8; 120 * 1024].into(), gas_limit: 5_000_000, ..tx(n) });
    let raws: Vec<Bytes> = (0..70).map(big).collect();
    let rules = |spec| AdmissionRules::for_proposals(CHAIN, spec, u64::MAX, GWEI, 128 * 1024);
    let refused = check_proposal_txs(&raws, &rules(crate::Spec::Osaka), 2).unwrap_err();
    assert!(matches!(refused, ProposalError::BlockOversized { limit: 8_388_608, .. }), "{refused}");
    assert_eq!(refused.reason(), "block_size");
    check_proposal_txs(&raws, &rules(crate::Spec::Prague), 2).unwrap();
    // Within the cap: the first 60 (7.4 MB).
    check_proposal_txs(&raws[..60], &rules(crate::Spec::Osaka), 2).unwrap();
}

/// One full block as the brief sizes it: 5,000 signed transfers (block gas
/// 30M would hold only 1,428 of them at 21,000, so the limit is raised to
/// 5,000 x 21,000). Prints the time: run with `--nocapture`.
#[test]
fn a_5000_transaction_block_verifies_in_bounded_time() {
    let raws: Vec<Bytes> =
        (0..5_000u64).map(|i| signer(i % 64).sign_raw(TypedTransaction::Eip1559(tx(i)))).collect();
    let rules = AdmissionRules::for_proposals(CHAIN, crate::Spec::Prague, 5_000 * 21_000, GWEI, 128 * 1024);
    for workers in [1, 2] {
        let start = std::time::Instant::now();
        check_proposal_txs(&raws, &rules, workers).unwrap();
        let took = start.elapsed();
        println!("5,000-tx proposal checked with {workers} worker(s) in {took:?}");
        // Generous: ~40 us per recovery is 200 ms on one core; a debug build
        // is slower, and the CI machine is shared.
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }
}
