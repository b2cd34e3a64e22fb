//! Contracts: deployment, storage, logs, reverts, self-destruct, EIP-7702.
#![allow(missing_docs)]

mod common;

use alloy_consensus::{TxEip7702, TypedTransaction};
use alloy_eips::eip7702::Authorization;
use alloy_primitives::{keccak256, Address, Bytes, TxKind, B256, U256};
use common::*;
use sluice_executor::{execute_block, BlockOutcome, ExecConfig, Spec};
use sluice_messages::{AccountChange, PreparedTx};

fn change(out: &BlockOutcome, a: Address) -> &AccountChange {
    out.changes.accounts.iter().find(|c| c.address == a).expect("account in change set")
}

fn listed(out: &BlockOutcome, a: Address) -> bool {
    out.changes.accounts.iter().any(|c| c.address == a)
}

#[test]
fn deploy_then_call_counter_across_blocks() {
    let state = funded_state();
    let alice = signer(1);
    let counter = alice.address().create(0);
    // The constructor also stores 7 in slot 1.
    let init = init_code(&[0x60, 0x07, 0x60, 0x01, 0x55], &counter_runtime());
    let b1 = block(
        1,
        GAS_LIMIT,
        vec![
            eip1559(&alice, 0, TxKind::Create, 0, init, 200_000),
            eip1559(&alice, 1, TxKind::Call(counter), 0, Bytes::new(), 100_000),
        ],
    );
    let out1 = run(&state, &b1);
    assert!(out1.skipped.is_empty(), "{:?}", out1.skipped);
    assert_eq!(out1.receipts[0].contract_address, Some(counter));
    assert_eq!(out1.receipts[0].to, None);
    assert!(out1.receipts[1].success);
    let c = change(&out1, counter);
    assert_eq!(c.code.as_ref().map(|c| c.code.clone()), Some(counter_runtime()));
    assert_eq!(c.code.as_ref().map(|c| c.hash), Some(keccak256(counter_runtime())));
    assert!(c.storage_cleared && !c.deleted);
    assert_eq!(c.nonce, 1);
    assert_eq!(c.storage, vec![(U256::ZERO, U256::from(1)), (U256::from(1), U256::from(7))]);

    // Next block on top of the applied change set: only slot 0 changes.
    let state2 = after(&state, &out1);
    let out2 = run(
        &state2,
        &block(2, GAS_LIMIT, vec![eip1559(&alice, 2, TxKind::Call(counter), 0, Bytes::new(), 100_000)]),
    );
    let c = change(&out2, counter);
    assert!(!c.storage_cleared && c.code.is_none());
    assert_eq!(c.storage, vec![(U256::ZERO, U256::from(2))]);
    // Sorted by address.
    let addrs: Vec<_> = out2.changes.accounts.iter().map(|a| a.address).collect();
    let mut sorted = addrs.clone();
    sorted.sort();
    assert_eq!(addrs, sorted);
}

#[test]
fn storage_written_back_to_its_start_value_is_not_a_change() {
    let mut state = funded_state();
    let alice = signer(1);
    // Runtime: SSTORE(0, CALLVALUE) — then a second call restores slot 0.
    let setter = Address::repeat_byte(0x5e);
    state.set_code(setter, Bytes::from_static(&[0x34, 0x60, 0x00, 0x55, 0x00]));
    state.set_storage(setter, U256::ZERO, U256::from(5));
    let out = run(
        &state,
        &block(
            1,
            GAS_LIMIT,
            vec![
                eip1559(&alice, 0, TxKind::Call(setter), 9, Bytes::new(), 100_000),
                eip1559(&alice, 1, TxKind::Call(setter), 5, Bytes::new(), 100_000),
            ],
        ),
    );
    assert!(out.receipts.iter().all(|r| r.success));
    // Its balance changed (it received 14 wei), its storage did not.
    let c = change(&out, setter);
    assert!(c.storage.is_empty() && !c.storage_cleared);
    assert_eq!(c.balance, U256::from(14));
}

#[test]
fn logs_reverts_and_read_only_contracts() {
    let mut state = funded_state();
    let alice = signer(1);
    let (logger, reverter) = (Address::repeat_byte(0x10), Address::repeat_byte(0x20));
    state.set_code(logger, logger_runtime());
    state.set_code(reverter, reverter_runtime());
    let out = run(
        &state,
        &block(
            1,
            GAS_LIMIT,
            vec![
                eip1559(&alice, 0, TxKind::Call(logger), 0, Bytes::new(), 100_000),
                eip1559(&alice, 1, TxKind::Call(reverter), 0, Bytes::new(), 100_000),
            ],
        ),
    );
    let (logged, reverted) = (&out.receipts[0], &out.receipts[1]);
    assert!(logged.success && logged.output.is_empty());
    assert_eq!(logged.logs.len(), 1);
    assert_eq!(logged.logs[0].address, logger);
    assert_eq!(logged.logs[0].topics, vec![B256::from(U256::from(0xaa))]);
    assert_eq!(logged.logs[0].data, word(0x2a));

    assert!(!reverted.success && reverted.logs.is_empty());
    assert_eq!(reverted.output, word(0xdead));
    assert!(reverted.gas_used > 21_000 && reverted.gas_used < 100_000);
    assert_eq!(reverted.cumulative_gas_used, logged.gas_used + reverted.gas_used);
    // A reverted transaction still pays and bumps the nonce.
    assert_eq!(change(&out, alice.address()).nonce, 2);
    // Called, but unchanged: neither contract appears.
    assert!(!listed(&out, logger) && !listed(&out, reverter));
}

#[test]
fn contract_destroyed_in_its_constructor() {
    let mut state = funded_state();
    let alice = signer(1);
    let fresh = alice.address().create(0);
    let prefunded = alice.address().create(1);
    state.set_account(prefunded, U256::from(5), 0);
    // Init code: SELFDESTRUCT(CALLER), with storage written first.
    let init = Bytes::from_static(&[0x60, 0x01, 0x60, 0x00, 0x55, 0x33, 0xff]);
    let out = run(
        &state,
        &block(
            1,
            GAS_LIMIT,
            vec![
                eip1559(&alice, 0, TxKind::Create, 1_000, init.clone(), 200_000),
                eip1559(&alice, 1, TxKind::Create, 0, init, 200_000),
            ],
        ),
    );
    assert!(out.receipts.iter().all(|r| r.success), "{:?}", out.receipts);
    // Never existed before or after: absent.
    assert!(!listed(&out, fresh));
    // Existed (funded) at block start, gone now: deleted.
    let c = change(&out, prefunded);
    assert!(c.deleted && c.storage_cleared && c.storage.is_empty() && c.balance.is_zero());
    let end = after(&state, &out);
    assert!(end.get_account(&prefunded).is_none());
    // The 1000 wei came back, and the prefunded 5 wei went to alice too.
    let fees: u128 = out.receipts.iter().map(|r| u128::from(r.gas_used) * r.effective_gas_price).sum();
    assert_eq!(balance(&end, alice.address()), U256::from(100 * ETH - fees + 5));
}

fn delegate(
    sponsor: &sluice_txpool::Signer,
    authority: &sluice_txpool::Signer,
    target: Address,
) -> PreparedTx {
    let auth = Authorization { chain_id: U256::from(CHAIN_ID), address: target, nonce: 0 };
    let signed = auth.clone().into_signed(authority.sign_hash(&auth.signature_hash()));
    let tx = TxEip7702 {
        chain_id: CHAIN_ID,
        nonce: 0,
        gas_limit: 200_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 2_000_000_000,
        to: authority.address(),
        value: U256::ZERO,
        access_list: Default::default(),
        authorization_list: vec![signed],
        input: Bytes::new(),
    };
    PreparedTx::ready(recovered(sponsor, TypedTransaction::Eip7702(tx)))
}

#[test]
fn eip7702_delegation_sets_code_and_runs_it() {
    let mut state = funded_state();
    let (alice, bob) = (signer(1), signer(2));
    let counter = Address::repeat_byte(0xc7);
    state.set_code(counter, counter_runtime());
    let tx = delegate(&bob, &alice, counter);

    let out = run(&state, &block(1, GAS_LIMIT, vec![tx.clone()]));
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
    assert!(out.receipts[0].success);
    assert_eq!(out.receipts[0].tx_type, 4);
    let c = change(&out, alice.address());
    let mut designator = vec![0xef, 0x01, 0x00];
    designator.extend_from_slice(counter.as_slice());
    assert_eq!(c.code.as_ref().map(|c| c.code.to_vec()), Some(designator));
    assert_eq!(c.nonce, 1);
    assert_eq!(c.storage, vec![(U256::ZERO, U256::from(1))]);
    assert!(!c.storage_cleared);

    // Cancun has no set-code transactions: skipped.
    let cancun = ExecConfig { spec: Spec::Cancun, ..cfg() };
    let out = execute_block(&state, &cancun, &block(1, GAS_LIMIT, vec![tx])).expect("executes");
    assert!(out.receipts.is_empty() && out.changes.accounts.is_empty());
    assert_eq!(out.skipped.len(), 1);
}

#[test]
fn one_block_or_two_reach_the_same_state() {
    let state = funded_state();
    let (alice, bob) = (signer(1), signer(2));
    let counter = alice.address().create(0);
    let init = init_code(&[0x60, 0x07, 0x60, 0x01, 0x55], &counter_runtime());
    let txs = vec![
        eip1559(&alice, 0, TxKind::Create, 0, init, 200_000),
        transfer(&bob, 0, alice.address(), 3),
        eip1559(&alice, 1, TxKind::Call(counter), 0, Bytes::new(), 100_000),
        eip1559(&bob, 1, TxKind::Call(counter), 5, Bytes::new(), 100_000),
    ];
    let whole = after(&state, &run(&state, &block(1, GAS_LIMIT, txs.clone())));

    let first = run(&state, &block(1, GAS_LIMIT, txs[..2].to_vec()));
    let mid = after(&state, &first);
    let second = run(&mid, &block(1, GAS_LIMIT, txs[2..].to_vec()));
    assert!(second.receipts.iter().all(|r| r.success));
    assert_eq!(after(&mid, &second), whole);
    assert_eq!(whole.get_storage(&counter, &U256::ZERO), U256::from(2));
    assert_eq!(balance(&whole, counter), U256::from(5));
}

#[test]
fn out_of_gas_consumes_the_limit_and_cancun_blocks_run() {
    let mut state = funded_state();
    let alice = signer(1);
    let spinner = Address::repeat_byte(0x30);
    state.set_code(spinner, spinner_runtime());
    let b = block(1, GAS_LIMIT, vec![eip1559(&alice, 0, TxKind::Call(spinner), 0, Bytes::new(), 50_000)]);
    for spec in Spec::ALL {
        let out = execute_block(&state, &ExecConfig { spec, ..cfg() }, &b).expect("executes");
        let r = &out.receipts[0];
        assert!(!r.success && r.output.is_empty() && r.logs.is_empty());
        assert_eq!((r.gas_used, out.gas_used), (50_000, 50_000));
        assert!(!listed(&out, spinner));
    }
}

/// The counter and token every workload and test shares
/// (`sluice_load::contracts`), through revm: the token mints, transfers,
/// refuses a transfer past the balance and reports balances; the counter
/// counts, logs and reverts on request.
#[test]
fn the_shared_counter_and_token_behave_as_documented() {
    use sluice_load::contracts::{call_address_amount, BALANCE_OF_SELECTOR, MINT_SELECTOR};
    let mut state = funded_state();
    let (token, counter) = (Address::repeat_byte(0x70), Address::repeat_byte(0xc0));
    state.set_code(token, erc20::runtime());
    state.set_code(counter, counter_runtime());
    let (alice, bob) = (signer(1), signer(2));
    let call =
        |s: &sluice_txpool::Signer, nonce, to, data| eip1559(s, nonce, TxKind::Call(to), 0, data, 100_000);
    let b = block(
        1,
        GAS_LIMIT,
        vec![
            call(&alice, 0, token, call_address_amount(MINT_SELECTOR, alice.address(), U256::from(100))),
            call(&alice, 1, token, erc20::transfer_call(bob.address(), 30)),
            call(&bob, 0, token, erc20::transfer_call(alice.address(), 50)),
            call(&alice, 2, counter, Bytes::new()),
            call(&alice, 3, counter, Bytes::from_static(&[0xff])),
        ],
    );
    let out = run(&state, &b);
    let ok: Vec<bool> = out.receipts.iter().map(|r| r.success).collect();
    assert_eq!(ok, [true, true, false, true, false], "{:?}", out.receipts);
    let topics = &out.receipts[1].logs[0].topics;
    assert_eq!(topics[0], erc20::transfer_topic());
    assert_eq!(topics[1..], [alice.address().into_word(), bob.address().into_word()]);
    assert_eq!(out.receipts[3].logs[0].topics[0], sluice_load::contracts::counter_topic());
    assert_eq!(out.receipts[4].output, Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef]));
    let end = after(&state, &out);
    assert_eq!(end.get_storage(&token, &erc20::balance_slot(alice.address())), U256::from(70));
    assert_eq!(end.get_storage(&token, &erc20::balance_slot(bob.address())), U256::from(30));
    assert_eq!(end.get_storage(&counter, &U256::ZERO), U256::from(1));
    let h = header(2, GAS_LIMIT);
    let mut balance_of = BALANCE_OF_SELECTOR.to_vec();
    balance_of.extend_from_slice(bob.address().into_word().as_slice());
    let req =
        sluice_executor::CallRequest { to: Some(token), input: balance_of.into(), ..Default::default() };
    let got = sluice_executor::call(&end, &cfg(), &lim(), &h, &req).expect("call runs");
    assert_eq!(got.output, Bytes::from(U256::from(30).to_be_bytes::<32>().to_vec()));
}
