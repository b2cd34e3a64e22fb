//! eth_call and eth_estimateGas.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{Address, Bytes, U256};
use common::*;
use sluice_executor::{call, estimate_gas, testing::MemState, CallRequest, ExecError};

const COUNTER: Address = Address::repeat_byte(0xc0);
const LOGGER: Address = Address::repeat_byte(0x10);
const REVERTER: Address = Address::repeat_byte(0x20);
const SPINNER: Address = Address::repeat_byte(0x30);
const CLEARER: Address = Address::repeat_byte(0x40);

fn state() -> MemState {
    let mut state = funded_state();
    state.set_code(COUNTER, counter_runtime());
    state.set_code(LOGGER, logger_runtime());
    state.set_code(REVERTER, reverter_runtime());
    state.set_code(SPINNER, spinner_runtime());
    state.set_storage(COUNTER, U256::ZERO, U256::from(41));
    // SSTORE(0, 0) on a set slot: earns a refund, so the gas used after
    // refunds is below the gas limit the call needs.
    state.set_code(CLEARER, Bytes::from_static(&[0x60, 0x00, 0x60, 0x00, 0x55, 0x00]));
    state.set_storage(CLEARER, U256::ZERO, U256::from(1));
    state
}

fn to(a: Address) -> CallRequest {
    CallRequest { to: Some(a), ..Default::default() }
}

#[test]
fn call_returns_data_without_committing() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    let out = call(&state, &cfg(), &lim(), &h, &to(COUNTER)).expect("call runs");
    assert!(out.success && !out.revert && out.halt_reason.is_none());
    assert_eq!(out.output, word(42));
    assert!(out.gas_used > 21_000);
    // Same answer again: nothing was committed.
    assert_eq!(call(&state, &cfg(), &lim(), &h, &to(COUNTER)).expect("call runs").output, word(42));

    let out = call(&state, &cfg(), &lim(), &h, &to(LOGGER)).expect("call runs");
    assert_eq!(out.logs.len(), 1);
    assert_eq!(out.logs[0].data, word(0x2a));
}

#[test]
fn call_reports_revert_and_halt() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    let out = call(&state, &cfg(), &lim(), &h, &to(REVERTER)).expect("call runs");
    assert!(!out.success && out.revert);
    assert_eq!(out.output, word(0xdead));

    let out = call(&state, &cfg(), &lim(), &h, &CallRequest { gas: Some(100_000), ..to(SPINNER) })
        .expect("call runs");
    assert!(!out.success && !out.revert);
    assert_eq!(out.halt_reason.as_deref(), Some("out of gas"));
    assert_eq!(out.gas_used, 100_000);
}

#[test]
fn unpriced_calls_need_no_funds_but_priced_ones_do() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    let nobody = Address::repeat_byte(0x99);
    // From an account that does not exist, with value: allowed when free.
    let req = CallRequest { from: Some(nobody), value: Some(U256::from(10)), ..to(COUNTER) };
    assert!(call(&state, &cfg(), &lim(), &h, &req).expect("free call").success);
    // With a gas price, the sender must pay.
    let priced = CallRequest { gas_price: Some(2_000_000_000), ..req.clone() };
    match call(&state, &cfg(), &lim(), &h, &priced) {
        Err(ExecError::InvalidCall(msg)) => assert!(msg.starts_with("insufficient funds"), "{msg}"),
        other => panic!("expected insufficient funds, got {other:?}"),
    }
    // A funded sender with a price and a wrong nonce: nonce is not checked.
    let ok = CallRequest { from: Some(signer(1).address()), nonce: Some(77), ..priced };
    assert!(call(&state, &cfg(), &lim(), &h, &ok).expect("priced call").success);
    // Both fee styles at once is refused, as geth does.
    let both = CallRequest { max_fee_per_gas: Some(1), ..ok };
    assert!(matches!(call(&state, &cfg(), &lim(), &h, &both), Err(ExecError::InvalidCall(_))));
}

#[test]
fn estimate_transfer_is_21000() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    let req = CallRequest {
        from: Some(signer(1).address()),
        value: Some(U256::from(1)),
        ..to(Address::repeat_byte(0x77))
    };
    assert_eq!(estimate_gas(&state, &cfg(), &lim(), &h, &req).expect("estimates"), 21_000);
}

#[test]
fn estimate_is_the_smallest_gas_that_succeeds() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    for target in [COUNTER, LOGGER, CLEARER] {
        let req = CallRequest { from: Some(signer(1).address()), ..to(target) };
        let gas = estimate_gas(&state, &cfg(), &lim(), &h, &req).expect("estimates");
        let at =
            |g| call(&state, &cfg(), &lim(), &h, &CallRequest { gas: Some(g), ..req.clone() }).expect("runs");
        assert!(at(gas).success, "succeeds with the estimate");
        assert!(!at(gas - 1).success, "fails with one less");
    }
    // The clearer's estimate exceeds the gas it uses after its refund.
    let gas = estimate_gas(&state, &cfg(), &lim(), &h, &to(CLEARER)).expect("estimates");
    let used = call(&state, &cfg(), &lim(), &h, &to(CLEARER)).expect("runs").gas_used;
    assert!(gas > used, "estimate {gas}, used {used}");
}

#[test]
fn estimate_of_a_deployment_succeeds_with_its_result() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    let req = CallRequest {
        from: Some(signer(1).address()),
        input: init_code(&[], &counter_runtime()),
        ..Default::default()
    };
    let gas = estimate_gas(&state, &cfg(), &lim(), &h, &req).expect("estimates");
    assert!(
        call(&state, &cfg(), &lim(), &h, &CallRequest { gas: Some(gas), ..req.clone() })
            .expect("runs")
            .success
    );
    assert!(
        !call(&state, &cfg(), &lim(), &h, &CallRequest { gas: Some(gas - 1), ..req }).expect("runs").success
    );
}

#[test]
fn estimate_errors_like_geth() {
    let state = state();
    let h = header(1, 1_000_000);
    match estimate_gas(&state, &cfg(), &lim(), &h, &to(REVERTER)) {
        Err(e @ ExecError::Reverted { .. }) => {
            assert_eq!(e.to_string(), "execution reverted");
            let ExecError::Reverted { output } = e else { unreachable!() };
            assert_eq!(output, word(0xdead));
        }
        other => panic!("expected a revert, got {other:?}"),
    }
    match estimate_gas(&state, &cfg(), &lim(), &h, &to(SPINNER)) {
        Err(e) => assert_eq!(e.to_string(), "gas required exceeds allowance (1000000)"),
        Ok(g) => panic!("spinner estimated at {g}"),
    }
    // A gas price caps the allowance at what the balance pays for.
    let poor = Address::repeat_byte(0x55);
    let mut state = state;
    state.set_account(poor, U256::from(30_000u64 * 1_000_000_000), 0);
    let req = CallRequest { from: Some(poor), gas_price: Some(1_000_000_000), ..to(SPINNER) };
    match estimate_gas(&state, &cfg(), &lim(), &h, &req) {
        Err(e) => assert_eq!(e.to_string(), "gas required exceeds allowance (30000)"),
        Ok(g) => panic!("spinner estimated at {g}"),
    }
    let req = CallRequest { value: Some(U256::from(u128::MAX)), ..req };
    assert_eq!(
        estimate_gas(&state, &cfg(), &lim(), &h, &req).map_err(|e| e.to_string()),
        Err("insufficient funds for transfer".to_string())
    );
}

#[test]
fn calldata_to_an_account_without_code_is_estimated_by_search() {
    let state = state();
    let h = header(1, GAS_LIMIT);
    let req = CallRequest { input: Bytes::from_static(&[1, 2, 3, 4]), ..to(Address::repeat_byte(0x77)) };
    let gas = estimate_gas(&state, &cfg(), &lim(), &h, &req).expect("estimates");
    // Prague's EIP-7623 floor (10 per token, 4 tokens per non-zero byte)
    // beats the standard 16 per non-zero byte.
    assert_eq!(gas, 21_000 + 4 * 4 * 10);
}
