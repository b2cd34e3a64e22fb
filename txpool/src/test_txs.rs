//! Transactions for the pool's unit tests: priced as asked, with a made-up
//! signature and hash (the pool's engines check neither).

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy_primitives::{keccak256, Address, Bytes, TxKind, U256};
use sluice_messages::RecoveredTx;

/// A 21,000-gas call of `sender` at `nonce` paying fee cap `fee` and tip
/// `tip`, counting `raw_bytes` in the pool; its hash tells sender, nonce
/// and fees apart.
pub(crate) fn priced(sender: Address, nonce: u64, fee: u128, tip: u128, raw_bytes: usize) -> RecoveredTx {
    let t = TxEip1559 {
        chain_id: 1,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: fee,
        max_priority_fee_per_gas: tip,
        to: TxKind::Call(Address::ZERO),
        ..Default::default()
    };
    let signed = t.into_signed(alloy_primitives::Signature::new(U256::from(1), U256::from(1), false));
    let hash =
        keccak256([sender.as_slice(), &nonce.to_be_bytes(), &fee.to_be_bytes(), &tip.to_be_bytes()].concat());
    RecoveredTx { hash, raw: Bytes::from(vec![0; raw_bytes]), tx: TxEnvelope::Eip1559(signed), sender }
}
