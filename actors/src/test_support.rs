//! Fixtures shared by the crate's unit tests.

use alloy_consensus::TxEip1559;
use alloy_primitives::{Address, Bytes, TxKind, U256};
use sluice_txpool::Signer;

/// A signed EIP-1559 transfer of 1 wei to `0x4242..42`: raw EIP-2718 bytes.
pub(crate) fn signed_transfer(signer: &Signer, nonce: u64, chain_id: u64) -> Bytes {
    signer.sign_raw(
        TxEip1559 {
            chain_id,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(Address::repeat_byte(0x42)),
            value: U256::from(1),
            ..Default::default()
        }
        .into(),
    )
}
