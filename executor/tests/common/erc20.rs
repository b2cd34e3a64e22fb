//! The token of `sluice_load::contracts` (an ERC-20-like token in
//! Solidity's storage layout, assembled by hand), as these tests call it.

use alloy_primitives::{Address, Bytes, U256};
// Each test binary uses its own part of it.
#[allow(unused_imports)]
pub use sluice_load::contracts::{balance_slot, transfer_topic, TRANSFER_SELECTOR};

/// Calldata of `transfer(to, amount)`.
pub fn transfer_call(to: Address, amount: u64) -> Bytes {
    sluice_load::contracts::call_address_amount(TRANSFER_SELECTOR, to, U256::from(amount))
}

/// The token's runtime bytecode.
pub fn runtime() -> Bytes {
    Bytes::from(sluice_load::contracts::token_runtime())
}
