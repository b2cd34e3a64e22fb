//! Decoding raw EIP-2718 bytes and recovering the sender with libsecp256k1.
//!
//! Recovery is the most expensive step of admission (33-53 us per tx with
//! libsecp256k1, 4-5x that with alloy's pure-Rust k256), so it runs once per
//! transaction, here, and never through alloy's `recover_signer`.

use alloy_consensus::{
    transaction::RlpEcdsaDecodableTx, Signed, TxEip1559, TxEip2930, TxEip7702, TxEnvelope, TxLegacy,
};
use alloy_primitives::{uint, Address, Bytes, Signature, B256, U256};
use secp256k1::{
    ecdsa::{RecoverableSignature, RecoveryId},
    Message, SECP256K1,
};
use sluice_messages::RecoveredTx;

use crate::{error::TxError, sign::address_of};

/// The secp256k1 group order n.
const SECP256K1_N: U256 = uint!(0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141_U256);
/// n / 2: EIP-2 (Homestead) forbids s above it, so a signature has exactly
/// one valid form and a transaction exactly one hash.
const SECP256K1_HALF_N: U256 = uint!(0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0_U256);

/// Type bytes of EIP-2718 envelopes.
const TYPE_EIP2930: u8 = 1;
const TYPE_EIP1559: u8 = 2;
const TYPE_EIP7702: u8 = 4;
/// Highest byte that is a type tag rather than the start of an RLP list.
const TYPE_MAX: u8 = 0x7f;

/// Decodes exact EIP-2718 bytes whose keccak is `hash`.
///
/// Accepts legacy, EIP-2930, EIP-1559 and EIP-7702 (whether 7702 is allowed
/// is policy, checked by the caller); refuses blob transactions and unknown
/// types with `transaction type not supported`, and any trailing byte.
/// Passing the already computed hash spares alloy's decoder a second keccak
/// of the same bytes.
pub fn decode_envelope(raw: &[u8], hash: B256) -> Result<TxEnvelope, TxError> {
    let Some(&first) = raw.first() else {
        return Err(TxError::TypedTxTooShort);
    };
    if first > TYPE_MAX {
        let mut buf = raw;
        let (tx, sig) = TxLegacy::rlp_decode_with_signature(&mut buf).map_err(TxError::Rlp)?;
        ensure_consumed(buf)?;
        return Ok(TxEnvelope::Legacy(Signed::new_unchecked(tx, sig, hash)));
    }
    if raw.len() == 1 {
        return Err(TxError::TypedTxTooShort);
    }
    let mut buf = &raw[1..];
    let envelope = match first {
        TYPE_EIP2930 => TxEnvelope::Eip2930(decode_typed::<TxEip2930>(&mut buf, hash)?),
        TYPE_EIP1559 => TxEnvelope::Eip1559(decode_typed::<TxEip1559>(&mut buf, hash)?),
        TYPE_EIP7702 => TxEnvelope::Eip7702(decode_typed::<TxEip7702>(&mut buf, hash)?),
        // Type 3 (blobs) needs sidecars and a blob market sluice does not
        // have; anything else is unknown.
        _ => return Err(TxError::TypeNotSupported),
    };
    ensure_consumed(buf)?;
    Ok(envelope)
}

fn decode_typed<T: RlpEcdsaDecodableTx>(buf: &mut &[u8], hash: B256) -> Result<Signed<T>, TxError> {
    let (tx, sig) = T::rlp_decode_with_signature(buf).map_err(TxError::Rlp)?;
    Ok(Signed::new_unchecked(tx, sig, hash))
}

fn ensure_consumed(rest: &[u8]) -> Result<(), TxError> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(TxError::TrailingBytes)
    }
}

/// Whether `sig` has r and s in `[1, n-1]` and a low s (EIP-2).
pub fn signature_in_range(sig: &Signature) -> bool {
    let (r, s) = (sig.r(), sig.s());
    !r.is_zero() && r < SECP256K1_N && !s.is_zero() && s <= SECP256K1_HALF_N
}

/// Recovers the signer of `tx` with libsecp256k1.
///
/// A signature that is out of range, has a high s, or does not recover to
/// a point is `invalid sender`, as in geth.
pub fn recover_sender(tx: &TxEnvelope) -> Result<Address, TxError> {
    let sig = tx.signature();
    if !signature_in_range(sig) {
        return Err(TxError::InvalidSender);
    }
    let mut compact = [0u8; 64];
    compact[..32].copy_from_slice(&sig.r().to_be_bytes::<32>());
    compact[32..].copy_from_slice(&sig.s().to_be_bytes::<32>());
    let id = if sig.v() { RecoveryId::One } else { RecoveryId::Zero };
    let recoverable = RecoverableSignature::from_compact(&compact, id).map_err(|_| TxError::InvalidSender)?;
    let digest = Message::from_digest(tx.signature_hash().0);
    let public = SECP256K1.recover_ecdsa(digest, &recoverable).map_err(|_| TxError::InvalidSender)?;
    Ok(address_of(&public))
}

/// Hashes, decodes and recovers a raw transaction without any admission
/// policy: what block preparation needs for a transaction that missed the
/// cache.
pub fn recover_raw(raw: Bytes) -> Result<RecoveredTx, TxError> {
    let hash = sluice_messages::keccak256(&raw);
    recover_raw_with_hash(raw, hash)
}

/// [`recover_raw`] with the keccak of `raw` already computed.
pub fn recover_raw_with_hash(raw: Bytes, hash: B256) -> Result<RecoveredTx, TxError> {
    let tx = decode_envelope(&raw, hash)?;
    let sender = recover_sender(&tx)?;
    Ok(RecoveredTx { hash, raw, tx, sender })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::Signer;
    use alloy_consensus::{Transaction, TxEip1559};
    use alloy_primitives::{TxKind, U256};

    fn signer() -> Signer {
        Signer::from_bytes(&B256::repeat_byte(0x11)).unwrap()
    }

    fn transfer(nonce: u64) -> TxEip1559 {
        TxEip1559 {
            chain_id: 7,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(Address::repeat_byte(0x22)),
            value: U256::from(5),
            ..Default::default()
        }
    }

    #[test]
    fn recovers_the_signer_and_keeps_the_raw_hash() {
        let s = signer();
        let raw = s.sign_raw(transfer(3).into());
        let rtx = recover_raw(raw.clone()).unwrap();
        assert_eq!(rtx.sender, s.address());
        assert_eq!(rtx.hash, sluice_messages::keccak256(&raw));
        assert_eq!(*rtx.tx.tx_hash(), rtx.hash);
        assert_eq!(rtx.tx.nonce(), 3);
    }

    #[test]
    fn agrees_with_alloys_recovery() {
        use alloy_consensus::transaction::SignerRecoverable;
        let raw = signer().sign_raw(transfer(0).into());
        let rtx = recover_raw(raw).unwrap();
        assert_eq!(rtx.tx.recover_signer().unwrap(), rtx.sender);
    }

    #[test]
    fn zero_r_is_an_invalid_sender() {
        let tx =
            TxEnvelope::new_unhashed(transfer(0).into(), Signature::new(U256::ZERO, U256::from(1), false));
        assert_eq!(recover_sender(&tx), Err(TxError::InvalidSender));
    }

    #[test]
    fn s_at_or_above_n_is_an_invalid_sender() {
        let tx =
            TxEnvelope::new_unhashed(transfer(0).into(), Signature::new(U256::from(1), SECP256K1_N, false));
        assert_eq!(recover_sender(&tx), Err(TxError::InvalidSender));
    }

    #[test]
    fn empty_and_lone_type_byte_are_too_short() {
        assert_eq!(decode_envelope(&[], B256::ZERO).unwrap_err(), TxError::TypedTxTooShort);
        assert_eq!(decode_envelope(&[2], B256::ZERO).unwrap_err(), TxError::TypedTxTooShort);
    }
}
