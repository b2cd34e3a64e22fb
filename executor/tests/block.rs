//! Block execution: transfers, fees, skipping and the change set's shape.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, B256, U256};
use common::*;
use sluice_executor::{BlockExecutor, SequentialExecutor};
use sluice_messages::{PreparedTx, SkipReason};

#[test]
fn eip1559_transfer_moves_value_pays_tip_and_burns_base_fee() {
    let state = funded_state();
    let (alice, bob) = (signer(1), Address::repeat_byte(0xb0));
    let out = run(&state, &block(1, GAS_LIMIT, vec![transfer(&alice, 0, bob, ETH)]));
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
    assert_eq!(out.gas_used, 21_000);

    let r = &out.receipts[0];
    assert!(r.success);
    assert_eq!((r.index, r.tx_type, r.gas_used, r.cumulative_gas_used), (0, 2, 21_000, 21_000));
    assert_eq!((r.from, r.to, r.contract_address), (alice.address(), Some(bob), None));
    // min(max_fee 10 gwei, base 1 gwei + tip 2 gwei)
    assert_eq!(r.effective_gas_price, 3_000_000_000);
    assert!(r.logs.is_empty() && r.output.is_empty());

    let end = after(&state, &out);
    let fee = U256::from(21_000u64 * 3_000_000_000);
    assert_eq!(balance(&end, alice.address()), U256::from(99 * ETH) - fee);
    assert_eq!(nonce(&end, alice.address()), 1);
    assert_eq!(balance(&end, bob), U256::from(ETH));
    assert_eq!(balance(&end, coinbase()), U256::from(21_000u64 * 2_000_000_000));
    // Exactly three accounts changed, sorted; the other funded signers did not.
    let mut expected = vec![alice.address(), bob, coinbase()];
    expected.sort();
    let changed: Vec<_> = out.changes.accounts.iter().map(|a| a.address).collect();
    assert_eq!(changed, expected);
    for a in &out.changes.accounts {
        assert!(!a.deleted && !a.storage_cleared && a.code.is_none() && a.storage.is_empty());
    }
}

#[test]
fn legacy_transfer_pays_gas_price() {
    let state = funded_state();
    let (alice, bob) = (signer(1), Address::repeat_byte(0xb0));
    let out = run(&state, &block(1, GAS_LIMIT, vec![legacy(&alice, 0, bob, 5, 4_000_000_000)]));
    let r = &out.receipts[0];
    assert!(r.success);
    assert_eq!((r.tx_type, r.effective_gas_price), (0, 4_000_000_000));
    let end = after(&state, &out);
    assert_eq!(balance(&end, alice.address()), U256::from(100 * ETH - 5 - 21_000 * 4_000_000_000));
    assert_eq!(balance(&end, coinbase()), U256::from(21_000u128 * 3_000_000_000));
    assert_eq!(balance(&end, bob), U256::from(5));
}

#[test]
fn inapplicable_transactions_are_skipped_and_later_ones_still_apply() {
    let mut state = funded_state();
    let poor = signer(9);
    state.set_account(poor.address(), U256::from(1_000), 0);
    let (alice, bob, carol) = (signer(1), signer(2), Address::repeat_byte(0xc0));
    let cheap = {
        // A fee cap below the 1 gwei base fee.
        let tx = alloy_consensus::TxEip1559 {
            chain_id: CHAIN_ID,
            nonce: 0,
            gas_limit: 21_000,
            max_fee_per_gas: 500_000_000,
            max_priority_fee_per_gas: 0,
            to: alloy_primitives::TxKind::Call(carol),
            value: U256::from(1),
            access_list: Default::default(),
            input: Default::default(),
        };
        PreparedTx::ready(recovered(&bob, alloy_consensus::TypedTransaction::Eip1559(tx)))
    };
    let invalid = PreparedTx::Invalid { hash: B256::repeat_byte(7), reason: "undecodable".into() };
    let txs = vec![
        transfer(&alice, 0, carol, 1),
        transfer(&alice, 2, carol, 1), // nonce gap
        transfer(&poor, 0, carol, 1),  // cannot pay for gas
        invalid.clone(),
        cheap,
        transfer(&alice, 1, carol, 1),
        transfer(&bob, 0, carol, 1),
    ];
    let hashes: Vec<B256> = txs.iter().map(PreparedTx::hash).collect();
    let out = run(&state, &block(1, GAS_LIMIT, txs));

    let applied: Vec<B256> = out.receipts.iter().map(|r| r.tx_hash).collect();
    assert_eq!(applied, vec![hashes[0], hashes[5], hashes[6]]);
    assert_eq!(out.receipts.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(out.receipts[2].cumulative_gas_used, 63_000);
    assert_eq!(out.gas_used, 63_000);

    let skipped: Vec<B256> = out.skipped.iter().map(|(h, _)| *h).collect();
    assert_eq!(skipped, vec![hashes[1], hashes[2], hashes[3], hashes[4]]);
    // The kind of each refusal is data; its text is what the node logs.
    let kinds: Vec<&SkipReason> = out.skipped.iter().map(|(_, r)| r).collect();
    assert!(matches!(kinds[0], SkipReason::NonceTooHigh { tx: 2, state: 1 }), "{:?}", kinds[0]);
    assert!(matches!(kinds[1], SkipReason::InsufficientFunds { .. }), "{:?}", kinds[1]);
    assert_eq!(kinds[2], &SkipReason::Other("undecodable".into()));
    assert_eq!(kinds[3], &SkipReason::FeeCapBelowBaseFee);
    let reasons: Vec<String> = out.skipped.iter().map(|(_, r)| r.to_string()).collect();
    assert!(reasons[0].contains("nonce 2 too high"), "{}", reasons[0]);
    assert!(reasons[1].contains("lack of funds"), "{}", reasons[1]);
    assert_eq!(reasons[2], "undecodable");
    assert!(reasons[3].contains("basefee"), "{}", reasons[3]);

    let end = after(&state, &out);
    assert_eq!(nonce(&end, alice.address()), 2);
    assert_eq!(nonce(&end, bob.address()), 1);
    assert_eq!(balance(&end, carol), U256::from(3));
    // The poor sender was not touched at all.
    assert!(out.changes.accounts.iter().all(|a| a.address != poor.address()));
}

#[test]
fn gas_limit_above_remaining_block_gas_is_skipped() {
    let state = funded_state();
    let (alice, bob) = (signer(1), signer(2));
    let to = Address::repeat_byte(0xd0);
    let big = eip1559(&bob, 0, alloy_primitives::TxKind::Call(to), 1, Default::default(), 40_000);
    let big_hash = big.hash();
    // 50k of block gas: the first transfer leaves 29k, too little for a 40k limit.
    let out =
        run(&state, &block(1, 50_000, vec![transfer(&alice, 0, to, 1), big, transfer(&alice, 1, to, 1)]));
    assert_eq!(out.receipts.len(), 2);
    assert_eq!(out.skipped.len(), 1);
    assert_eq!(out.skipped[0].0, big_hash);
    assert!(out.skipped[0].1.to_string().contains("remaining block gas 29000"), "{}", out.skipped[0].1);
    assert!(matches!(out.skipped[0].1, SkipReason::BlockGasReached { remaining: 29_000, .. }));
    assert_eq!(out.gas_used, 42_000);
}

#[test]
fn touched_empty_accounts_do_not_appear() {
    let state = funded_state();
    let alice = signer(1);
    let nobody = Address::repeat_byte(0xee);
    // Zero value to a non-existent account, and a zero tip to a
    // non-existent coinbase: both are touched and stay empty (EIP-161).
    let tx = alloy_consensus::TxEip1559 {
        chain_id: CHAIN_ID,
        nonce: 0,
        gas_limit: 21_000,
        max_fee_per_gas: BASE_FEE.into(),
        max_priority_fee_per_gas: 0,
        to: alloy_primitives::TxKind::Call(nobody),
        value: U256::ZERO,
        access_list: Default::default(),
        input: Default::default(),
    };
    let tx = PreparedTx::ready(recovered(&alice, alloy_consensus::TypedTransaction::Eip1559(tx)));
    let out = run(&state, &block(1, GAS_LIMIT, vec![tx]));
    assert_eq!(out.receipts.len(), 1);
    let changed: Vec<_> = out.changes.accounts.iter().map(|a| a.address).collect();
    assert_eq!(changed, vec![alice.address()]);
}

#[test]
fn existing_empty_account_touched_is_deleted() {
    let mut state = funded_state();
    let empty = Address::repeat_byte(0xe1);
    state.set_account(empty, U256::ZERO, 0);
    let out = run(&state, &block(1, GAS_LIMIT, vec![transfer(&signer(1), 0, empty, 0)]));
    let change = out.changes.accounts.iter().find(|a| a.address == empty).expect("deleted account listed");
    assert!(change.deleted && change.storage_cleared);
    assert!(after(&state, &out).get_account(&empty).is_none());
}

#[test]
fn execution_is_deterministic_and_the_trait_matches_the_function() {
    let state = funded_state();
    let to = Address::repeat_byte(0x42);
    let txs = (0..20).map(|n| transfer(&signer(1 + (n % 4) as u8), n / 4, to, 1 + u128::from(n))).collect();
    let b = block(3, GAS_LIMIT, txs);
    let first = run(&state, &b);
    assert_eq!(first.receipts.len(), 20);
    let mut exec = SequentialExecutor::new(cfg());
    assert_eq!(exec.execute(&state, &b).expect("executes"), first);
    assert_eq!(run(&state, &b), first);
}

#[test]
fn empty_block_changes_nothing() {
    let out = run(&funded_state(), &block(1, GAS_LIMIT, vec![]));
    assert!(out.receipts.is_empty() && out.skipped.is_empty() && out.changes.accounts.is_empty());
    assert_eq!(out.gas_used, 0);
}
