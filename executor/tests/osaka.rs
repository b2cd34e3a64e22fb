//! Osaka, the default rules, as revm 43 runs them: CLZ (EIP-7939),
//! P256VERIFY (EIP-7951), MODEXP's bounds and prices (EIP-7823, EIP-7883)
//! and the transaction gas cap (EIP-7825), each against Prague, where it
//! does not apply; and geth's wording for an opcode a fork lacks.
#![allow(missing_docs)]

mod common;

use alloy_primitives::{address, hex, Address, Bytes, TxKind, U256};
use common::*;
use sluice_executor::{
    call, estimate_gas, execute_block, testing::MemState, BlockExecutor, CallRequest, ExecConfig, ExecError,
    ParallelExecutor, Spec,
};

/// Returns CLZ of its 32-byte calldata word:
/// `PUSH1 0 CALLDATALOAD CLZ PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN`.
const CLZ_CODE: [u8; 12] = [0x60, 0x00, 0x35, 0x1e, 0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00, 0xf3];
const CLZ: Address = Address::repeat_byte(0xc1);
/// 0x0c: no fork defines it.
const UNDEFINED: Address = Address::repeat_byte(0x0c);
const DESIGNATED_INVALID: Address = Address::repeat_byte(0xfe);
const P256VERIFY: Address = address!("0000000000000000000000000000000000000100");
const MODEXP: Address = Address::with_last_byte(0x05);

/// revm's first secp256r1 vector (hash, r, s, x, y): a valid signature.
const P256_VALID: &str = "4cee90eb86eaa050036147a12d49004b6b9c72bd725d39d4785011fe190f0b4da73bd4903f0ce3b639bbbf6e8e80d16931ff4bcf5993d58468e8fb19086e8cac36dbcd03009df8c59286b162af3bd7fcc0450c9aa81be5d10d312af6c66b1d604aebd3099c618202fcfe16ae7770b0c49ab5eadf74b754204a3bb6060e44eff37618b065f9832de4ca6ca971a7a1adc826d0f7c00181a5fb2ddf79ae00b4e10e";

fn state() -> MemState {
    let mut state = funded_state();
    state.set_code(CLZ, Bytes::from_static(&CLZ_CODE));
    state.set_code(UNDEFINED, Bytes::from_static(&[0x0c]));
    state.set_code(DESIGNATED_INVALID, Bytes::from_static(&[0xfe]));
    state
}

fn on(spec: Spec) -> ExecConfig {
    ExecConfig { spec, ..cfg() }
}

fn call_on(spec: Spec, to: Address, input: Vec<u8>) -> sluice_executor::CallOutcome {
    let req = CallRequest { to: Some(to), input: input.into(), ..Default::default() };
    call(&state(), &on(spec), &lim(), &header(1, GAS_LIMIT), &req).expect("call runs")
}

#[test]
fn osaka_is_the_default() {
    assert_eq!(cfg().spec, Spec::Osaka);
}

#[test]
fn clz_counts_leading_zeros_on_osaka_and_is_an_invalid_opcode_before() {
    for (x, zeros) in [(U256::ZERO, 256u64), (U256::from(1), 255), (U256::MAX, 0), (U256::from(1) << 200, 55)]
    {
        let out = call_on(Spec::Osaka, CLZ, x.to_be_bytes::<32>().to_vec());
        assert!(out.success, "{out:?}");
        assert_eq!(out.output, word(zeros), "CLZ({x})");
    }
    let out = call_on(Spec::Prague, CLZ, vec![0; 32]);
    assert!(!out.success && !out.revert);
    assert_eq!(out.halt_reason.as_deref(), Some("invalid opcode: CLZ"));
}

#[test]
fn invalid_opcodes_are_named_as_geth_names_them() {
    for spec in [Spec::Osaka, Spec::Prague] {
        let out = call_on(spec, UNDEFINED, vec![]);
        assert_eq!(out.halt_reason.as_deref(), Some("invalid opcode: opcode 0xc not defined"));
        let out = call_on(spec, DESIGNATED_INVALID, vec![]);
        assert_eq!(out.halt_reason.as_deref(), Some("invalid opcode: INVALID"));
    }
    // Estimation reports the same words.
    let req = CallRequest { to: Some(CLZ), input: vec![0; 32].into(), ..Default::default() };
    let err = estimate_gas(&state(), &on(Spec::Prague), &lim(), &header(1, GAS_LIMIT), &req).unwrap_err();
    assert_eq!(err.to_string(), "invalid opcode: CLZ");
}

#[test]
fn p256verify_answers_one_for_a_valid_signature_and_nothing_otherwise() {
    let valid = hex::decode(P256_VALID).expect("hex");
    let out = call_on(Spec::Osaka, P256VERIFY, valid.clone());
    assert!(out.success);
    assert_eq!(out.output, word(1));
    // A wrong message hash, and a short input: success, empty output.
    let mut wrong = valid.clone();
    wrong[0] ^= 0x70;
    for input in [wrong, valid[..100].to_vec()] {
        let out = call_on(Spec::Osaka, P256VERIFY, input);
        assert!(out.success && out.output.is_empty(), "{out:?}");
    }
    // Before Osaka 0x100 is an empty account.
    let out = call_on(Spec::Prague, P256VERIFY, valid);
    assert!(out.success && out.output.is_empty());
}

/// MODEXP input: lengths, then base, exponent, modulus.
fn modexp_input(base: &[u8], exp: &[u8], modulus: &[u8]) -> Vec<u8> {
    let mut input = Vec::new();
    for len in [base.len(), exp.len(), modulus.len()] {
        input.extend_from_slice(&U256::from(len).to_be_bytes::<32>());
    }
    input.extend_from_slice(base);
    input.extend_from_slice(exp);
    input.extend_from_slice(modulus);
    input
}

#[test]
fn modexp_refuses_inputs_past_1024_bytes_on_osaka_and_costs_more() {
    // EIP-7823: a 1,025-byte base fails on Osaka, runs on Prague.
    let big = modexp_input(&[7u8; 1025], &[3], &[13]);
    let out = call_on(Spec::Osaka, MODEXP, big.clone());
    assert!(!out.success, "{out:?}");
    // In geth's words, naming the length past the bound (geth checks base,
    // exponent, modulus in that order).
    assert_eq!(out.halt_reason.as_deref(), Some("base length is too large"));
    for (input, why) in [
        (modexp_input(&[7], &[3u8; 1025], &[13]), "exponent length is too large"),
        (modexp_input(&[7], &[3], &[13u8; 1025]), "modulus length is too large"),
        (modexp_input(&[7u8; 1025], &[3u8; 1025], &[13]), "base length is too large"),
    ] {
        assert_eq!(call_on(Spec::Osaka, MODEXP, input).halt_reason.as_deref(), Some(why));
    }
    let out = call_on(Spec::Prague, MODEXP, big);
    assert!(out.success && out.output.len() == 1, "{out:?}");
    // 1,024 bytes is still within the bound.
    assert!(call_on(Spec::Osaka, MODEXP, modexp_input(&[7u8; 1024], &[3], &[13])).success);
    // EIP-7883: 64-byte operands and a 32-byte exponent cost 64 * 255 / 3
    // = 5,440 gas on Prague and 2 * 64 * 255 = 32,640 on Osaka (the
    // divisor dropped, the complexity doubled past 32 bytes), for the same
    // answer.
    let priced = modexp_input(&[0xab; 64], &[0xff; 32], &[0xcd; 64]);
    let (osaka, prague) =
        (call_on(Spec::Osaka, MODEXP, priced.clone()), call_on(Spec::Prague, MODEXP, priced));
    assert!(osaka.success && prague.success);
    assert_eq!(osaka.output, prague.output);
    // Prague's total may be the EIP-7623 calldata floor rather than its
    // execution, hence a bound and not the exact 27,200 difference.
    assert!(osaka.gas_used > prague.gas_used + 25_000, "{} vs {}", osaka.gas_used, prague.gas_used);
}

#[test]
fn calls_skip_the_gas_cap_and_estimates_stay_within_it() {
    let state = {
        let mut s = state();
        s.set_code(Address::repeat_byte(0x30), spinner_runtime());
        s
    };
    let h = header(1, GAS_LIMIT);
    let spin = CallRequest { to: Some(Address::repeat_byte(0x30)), ..Default::default() };
    // eth_call defaults to the block gas limit (30M), past the cap.
    let out = call(&state, &cfg(), &lim(), &h, &spin).expect("call runs");
    assert_eq!((out.halt_reason.as_deref(), out.gas_used), (Some("out of gas"), GAS_LIMIT));
    for (spec, cap) in [(Spec::Osaka, 1u64 << 24), (Spec::Prague, GAS_LIMIT)] {
        let err = estimate_gas(&state, &on(spec), &lim(), &h, &spin).unwrap_err();
        assert!(matches!(err, ExecError::GasExceedsAllowance(hi) if hi == cap), "{spec:?}: {err:?}");
    }
}

#[test]
fn blocks_skip_a_transaction_over_the_gas_cap_on_osaka_only() {
    let state = funded_state();
    let (alice, bob) = (signer(1), signer(2));
    let over = eip1559(&alice, 0, TxKind::Call(bob.address()), 5, Bytes::new(), (1 << 24) + 1);
    let at_cap = eip1559(&alice, 0, TxKind::Call(bob.address()), 5, Bytes::new(), 1 << 24);
    let over_hash = match &over {
        sluice_messages::PreparedTx::Ready(t) => t.hash,
        sluice_messages::PreparedTx::Invalid { hash, .. } => *hash,
    };
    let b = block(1, GAS_LIMIT, vec![over, at_cap]);
    let out = execute_block(&state, &cfg(), &b).expect("executes");
    assert_eq!((out.receipts.len(), out.skipped.len()), (1, 1));
    assert_eq!(out.skipped[0].0, over_hash);
    assert!(out.skipped[0].1.to_string().contains("gas limit"), "{}", out.skipped[0].1);
    assert!(
        matches!(out.skipped[0].1, sluice_messages::SkipReason::GasLimitAboveCap { cap: 16_777_216, .. }),
        "{:?}",
        out.skipped[0].1
    );
    // The parallel executor agrees (its transfer path checks the cap too).
    let mut exec = ParallelExecutor::new(cfg(), 2, 1);
    let parallel = exec.execute(&state, &b).expect("executes");
    assert_eq!(
        (parallel.receipts, parallel.skipped, parallel.changes),
        (out.receipts, out.skipped, out.changes)
    );
    // Prague applies the first and skips the second (nonce 0 taken).
    let out = execute_block(&state, &on(Spec::Prague), &b).expect("executes");
    assert_eq!((out.receipts.len(), out.skipped.len()), (1, 1));
    assert_eq!(out.receipts[0].gas_used, 21_000);
    assert_eq!(nonce(&after(&state, &out), alice.address()), 1);
}
