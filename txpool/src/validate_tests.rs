//! Every stateless admission path, with real signed transactions.

use super::*;
use crate::sign::Signer;
use alloy_consensus::{SignableTransaction, TxEip1559, TxEip2930, TxEip7702, TxLegacy, TypedTransaction};
use alloy_eips::{
    eip2718::Encodable2718,
    eip2930::{AccessList, AccessListItem},
    eip7702::Authorization,
};
use alloy_primitives::{uint, Address, Signature, TxKind, B256};

const CHAIN: u64 = 7;
const GWEI: u128 = 1_000_000_000;

fn rules() -> AdmissionRules {
    AdmissionRules::new(CHAIN, 30_000_000, GWEI)
}

fn signer() -> Signer {
    Signer::from_bytes(&B256::repeat_byte(0x42)).unwrap()
}

fn to() -> TxKind {
    TxKind::Call(Address::repeat_byte(0xbb))
}

fn eip1559() -> TxEip1559 {
    TxEip1559 {
        chain_id: CHAIN,
        nonce: 0,
        gas_limit: 21_000,
        max_fee_per_gas: 2 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to: to(),
        value: U256::from(1),
        ..Default::default()
    }
}

fn legacy(chain_id: Option<u64>) -> TxLegacy {
    TxLegacy { chain_id, nonce: 0, gas_price: GWEI, gas_limit: 21_000, to: to(), ..Default::default() }
}

fn admit(tx: impl Into<TypedTransaction>) -> Result<RecoveredTx, TxError> {
    admit_stateless(signer().sign_raw(tx.into()), &rules())
}

fn err(tx: impl Into<TypedTransaction>) -> String {
    admit(tx).unwrap_err().to_string()
}

#[test]
fn admits_eip1559_eip2930_and_protected_legacy() {
    let eip2930 =
        TxEip2930 { chain_id: CHAIN, gas_price: GWEI, gas_limit: 21_000, to: to(), ..Default::default() };
    for tx in [eip1559().into(), eip2930.into(), legacy(Some(CHAIN)).into()] {
        let tx: TypedTransaction = tx;
        let raw = signer().sign_raw(tx);
        let rtx = admit_stateless(raw.clone(), &rules()).unwrap();
        assert_eq!(rtx.sender, signer().address());
        assert_eq!(rtx.hash, sluice_messages::keccak256(&raw));
        assert_eq!(rtx.raw, raw);
    }
}

#[test]
fn legacy_without_chain_id_is_unprotected() {
    assert_eq!(err(legacy(None)), "only replay-protected (EIP-155) transactions allowed over RPC");
}

#[test]
fn wrong_chain_id_uses_geths_signer_wording() {
    let tx = TxEip1559 { chain_id: 1, ..eip1559() };
    assert_eq!(err(tx), "invalid chain id for signer: have 1 want 7");
    assert_eq!(err(legacy(Some(5))), "invalid chain id for signer: have 5 want 7");
}

#[test]
fn high_s_signature_is_an_invalid_sender() {
    let n = uint!(0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141_U256);
    let tx: TypedTransaction = eip1559().into();
    let low = signer().sign_hash(&tx.signature_hash());
    // (r, n - s) with the other parity is the same point: a second valid
    // ECDSA signature that EIP-2 forbids (it would give the tx a second hash).
    let high = Signature::new(low.r(), n - low.s(), !low.v());
    let envelope = TxEnvelope::new_unhashed(tx, high);
    {
        use alloy_consensus::transaction::SignerRecoverable;
        // alloy's own check rejects it too; ours must not be weaker.
        assert!(envelope.recover_signer().is_err());
    }
    let raw = Bytes::from(envelope.encoded_2718());
    let e = admit_stateless(raw, &rules()).unwrap_err();
    assert_eq!(e, TxError::InvalidSender);
    assert_eq!(e.to_string(), "invalid sender");
}

#[test]
fn tip_above_fee_cap_is_refused() {
    let tx = TxEip1559 { max_priority_fee_per_gas: 3 * GWEI, ..eip1559() };
    assert_eq!(err(tx), "max priority fee per gas higher than max fee per gas");
}

#[test]
fn fee_cap_below_minimum_names_the_sender() {
    let tx = TxEip1559 { max_fee_per_gas: GWEI - 1, max_priority_fee_per_gas: 0, ..eip1559() };
    let expected = format!(
        "max fee per gas less than block base fee: address {}, maxFeePerGas: 999999999, baseFee: 1000000000",
        signer().address()
    );
    assert_eq!(err(tx), expected);
    let cheap_legacy = TxLegacy { gas_price: 1, ..legacy(Some(CHAIN)) };
    assert_eq!(admit(cheap_legacy).unwrap_err().outcome(), "underpriced");
}

#[test]
fn gas_above_block_limit_is_refused() {
    assert_eq!(err(TxEip1559 { gas_limit: 30_000_001, ..eip1559() }), "exceeds block gas limit");
}

#[test]
fn gas_above_the_eip7825_cap_is_refused_from_osaka_on() {
    // A block limit above the cap, so only the cap can refuse.
    let osaka = AdmissionRules { block_gas_limit: 100_000_000, ..rules() };
    assert_eq!(osaka.spec, Spec::Osaka);
    let over = TxEip1559 { gas_limit: (1 << 24) + 1, ..eip1559() };
    let refused = admit_stateless(signer().sign_raw(over.clone().into()), &osaka).unwrap_err();
    assert_eq!(refused.to_string(), "transaction gas limit too high (cap: 16777216, tx: 16777217)");
    assert_eq!((refused.rpc_code(), refused.outcome()), (-32000, "gas_limit"));
    assert!(admit_stateless(signer().sign_raw(TxEip1559 { gas_limit: 1 << 24, ..eip1559() }.into()), &osaka)
        .is_ok());
    // Prague has no cap.
    let prague = AdmissionRules { spec: Spec::Prague, ..osaka };
    assert!(admit_stateless(signer().sign_raw(over.into()), &prague).is_ok());
}

#[test]
fn gas_below_intrinsic_is_refused() {
    assert_eq!(
        err(TxEip1559 { gas_limit: 20_999, ..eip1559() }),
        "intrinsic gas too low: gas 20999, minimum needed 21000"
    );
    // Access list: 2400 per address, 1900 per storage key (EIP-2930).
    let list = AccessList(vec![AccessListItem {
        address: Address::repeat_byte(1),
        storage_keys: vec![B256::ZERO, B256::repeat_byte(1)],
    }]);
    let tx = TxEip1559 { access_list: list, gas_limit: 27_199, ..eip1559() };
    assert_eq!(err(tx.clone()), "intrinsic gas too low: gas 27199, minimum needed 27200");
    assert!(admit(TxEip1559 { gas_limit: 27_200, ..tx }).is_ok());
    // Creation: 53000 + 2 per initcode word (EIP-3860) + calldata.
    let create =
        TxEip1559 { to: TxKind::Create, input: vec![0u8; 64].into(), gas_limit: 53_000, ..eip1559() };
    assert_eq!(err(create), "intrinsic gas too low: gas 53000, minimum needed 53260");
}

#[test]
fn prague_applies_the_calldata_floor_and_cancun_does_not() {
    // 1000 non-zero bytes: 21000 + 16 * 1000 = 37000 intrinsic,
    // 21000 + 10 * 4 * 1000 = 61000 floor (EIP-7623).
    let tx = TxEip1559 { input: vec![0xffu8; 1000].into(), gas_limit: 40_000, ..eip1559() };
    assert_eq!(err(tx.clone()), "insufficient gas for floor data gas cost: gas 40000, minimum needed 61000");
    assert_eq!(admit(tx.clone()).unwrap_err().outcome(), "intrinsic_gas");
    let cancun = AdmissionRules { spec: Spec::Cancun, ..rules() };
    assert!(admit_stateless(signer().sign_raw(tx.into()), &cancun).is_ok());
}

#[test]
fn oversized_is_refused_before_decoding() {
    let limit = DEFAULT_MAX_TX_SIZE_BYTES;
    let e = admit_stateless(Bytes::from(vec![0xffu8; limit + 1]), &rules()).unwrap_err();
    assert_eq!(e.to_string(), format!("oversized data: transaction size {}, limit {limit}", limit + 1));
    let big = TxEip1559 { input: vec![1u8; limit].into(), gas_limit: 10_000_000, ..eip1559() };
    assert_eq!(admit(big).unwrap_err().outcome(), "oversized");
}

#[test]
fn initcode_above_eip3860_limit_is_refused() {
    let create =
        TxEip1559 { to: TxKind::Create, input: vec![1u8; 49_153].into(), gas_limit: 10_000_000, ..eip1559() };
    assert_eq!(err(create), "max initcode size exceeded: code size 49153, limit 49152");
}

#[test]
fn trailing_bytes_are_refused() {
    for tx in [eip1559().into(), legacy(Some(CHAIN)).into()] {
        let tx: TypedTransaction = tx;
        let mut raw = signer().sign_raw(tx).to_vec();
        raw.push(0x80);
        let e = admit_stateless(raw.into(), &rules()).unwrap_err();
        assert_eq!(e.to_string(), "rlp: input contains more than one value");
    }
}

#[test]
fn blob_type_and_unknown_types_are_not_supported() {
    let raw = signer().sign_raw(eip1559().into());
    for ty in [0x03u8, 0x05, 0x7f] {
        let mut blob = raw.to_vec();
        blob[0] = ty;
        let e = admit_stateless(blob.into(), &rules()).unwrap_err();
        assert_eq!(e.to_string(), "transaction type not supported");
        assert_eq!(e.outcome(), "type_not_supported");
    }
}

#[test]
fn garbage_is_an_rlp_error() {
    for garbage in [&[0xde, 0xad, 0xbe, 0xef][..], &[0x02, 0xc3, 0x01], &[0xc0], &[0x80]] {
        let e = admit_stateless(Bytes::copy_from_slice(garbage), &rules()).unwrap_err();
        assert!(e.to_string().starts_with("rlp: "), "{e}");
        assert_eq!((e.rpc_code(), e.outcome()), (-32000, "invalid"));
    }
    let e = admit_stateless(Bytes::new(), &rules()).unwrap_err();
    assert_eq!(e.to_string(), "typed transaction too short");
}

#[test]
fn nonce_at_max_is_refused() {
    assert_eq!(err(TxEip1559 { nonce: u64::MAX, ..eip1559() }), "nonce has max value");
}

fn eip7702(auths: usize) -> TxEip7702 {
    let auth = Authorization { chain_id: U256::from(CHAIN), address: Address::repeat_byte(9), nonce: 1 };
    let signed = auth.clone().into_signed(signer().sign_hash(&auth.signature_hash()));
    TxEip7702 {
        chain_id: CHAIN,
        gas_limit: 100_000,
        max_fee_per_gas: 2 * GWEI,
        to: Address::repeat_byte(3),
        authorization_list: vec![signed; auths],
        ..Default::default()
    }
}

#[test]
fn eip7702_follows_the_policy() {
    let raw = signer().sign_raw(eip7702(1).into());
    let off = admit_stateless(raw.clone(), &rules()).unwrap_err();
    assert_eq!(off, TxError::TypeNotSupported);
    let on = AdmissionRules { allow_eip7702: true, ..rules() };
    assert!(admit_stateless(raw.clone(), &on).is_ok());
    let cancun = AdmissionRules { spec: Spec::Cancun, ..on.clone() };
    assert_eq!(admit_stateless(raw, &cancun).unwrap_err(), TxError::TypeNotSupported);
    let empty = signer().sign_raw(eip7702(0).into());
    assert_eq!(admit_stateless(empty, &on).unwrap_err(), TxError::EmptyAuthList);
    // 25000 per authorization (PER_EMPTY_ACCOUNT_COST).
    let short = signer().sign_raw(TxEip7702 { gas_limit: 45_999, ..eip7702(1) }.into());
    assert_eq!(
        admit_stateless(short, &on).unwrap_err().to_string(),
        "intrinsic gas too low: gas 45999, minimum needed 46000"
    );
}

#[test]
fn funds_must_cover_gas_times_fee_cap_plus_value() {
    let rtx = admit(eip1559()).unwrap();
    let cost = U256::from(21_000u64 * 2_000_000_000 + 1);
    assert!(check_funds(&rtx, cost).is_ok());
    let e = check_funds(&rtx, cost - U256::from(10)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "insufficient funds for gas * price + value: balance {}, tx cost {cost}, overshot 10",
            cost - U256::from(10)
        )
    );
    assert_eq!(e.outcome(), "insufficient_funds");
    let huge = admit(TxEip1559 { value: U256::MAX, ..eip1559() }).unwrap();
    assert!(check_funds(&huge, U256::MAX - U256::from(1)).is_err());
}

/// Admission's intrinsic gas must be exactly where revm's own validation
/// draws the line: refused one gas below, accepted at it, for both specs.
#[test]
fn intrinsic_gas_matches_revms_validation() {
    use revm::{context::TxEnv, handler::validation::validate_initial_tx_gas};
    let list = AccessList(vec![AccessListItem {
        address: Address::repeat_byte(1),
        storage_keys: vec![B256::ZERO; 3],
    }]);
    let mut calldata = vec![0u8; 300];
    calldata.extend(vec![0x5au8; 700]);
    let cases: Vec<TypedTransaction> = vec![
        eip1559().into(),
        TxEip1559 { input: calldata.clone().into(), ..eip1559() }.into(),
        TxEip1559 { input: calldata.clone().into(), access_list: list.clone(), ..eip1559() }.into(),
        TxEip1559 { to: TxKind::Create, input: calldata.into(), ..eip1559() }.into(),
        eip7702(3).into(),
    ];
    for spec in Spec::ALL {
        let rules = AdmissionRules { spec, allow_eip7702: spec.has_eip7702(), ..rules() };
        for tx in &cases {
            let is_7702 = matches!(tx, TypedTransaction::Eip7702(_));
            if is_7702 && spec == Spec::Cancun {
                continue;
            }
            let needed = {
                let envelope = signer().sign_tx(tx.clone());
                let gas = intrinsic_gas(&envelope, spec);
                gas.initial.max(gas.floor)
            };
            for (gas_limit, ok) in [(needed - 1, false), (needed, true)] {
                let mut tx = tx.clone();
                set_gas_limit(&mut tx, gas_limit);
                let env = TxEnv::builder()
                    .tx_type(Some(alloy_consensus::Typed2718::ty(&tx)))
                    .gas_limit(gas_limit)
                    .kind(alloy_consensus::Transaction::kind(&tx))
                    .data(alloy_consensus::Transaction::input(&tx).clone())
                    .access_list(alloy_consensus::Transaction::access_list(&tx).cloned().unwrap_or_default())
                    .authorization_list_signed(
                        alloy_consensus::Transaction::authorization_list(&tx).unwrap_or_default().to_vec(),
                    )
                    .build_fill();
                let revm_ok =
                    validate_initial_tx_gas(env, spec_id(spec), false, false, u64::MAX, None).is_ok();
                let ours = admit_stateless(signer().sign_raw(tx), &rules);
                assert_eq!(revm_ok, ok, "{spec:?} gas {gas_limit}");
                assert_eq!(ours.is_ok(), ok, "{spec:?} gas {gas_limit}: {ours:?}");
            }
        }
    }
}

fn set_gas_limit(tx: &mut TypedTransaction, gas_limit: u64) {
    match tx {
        TypedTransaction::Legacy(t) => t.gas_limit = gas_limit,
        TypedTransaction::Eip2930(t) => t.gas_limit = gas_limit,
        TypedTransaction::Eip1559(t) => t.gas_limit = gas_limit,
        TypedTransaction::Eip4844(_) => unreachable!("not built here"),
        TypedTransaction::Eip7702(t) => t.gas_limit = gas_limit,
    }
}
