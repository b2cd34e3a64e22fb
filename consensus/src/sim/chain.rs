//! The chain every simulation runs: its rules and genesis, the funded
//! senders, and the transfers the scenarios send.

use std::time::Duration;

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, TxKind, B256, U256};
use commonware_runtime::Quota;
use commonware_utils::NZU32;
use sluice_messages::RecoveredTx;
use sluice_store::{Genesis, GenesisAccount};
use sluice_txpool::Signer;

use crate::rules::Rules;

/// The simulated chain's id.
pub(crate) const CHAIN_ID: u64 = 31337;
/// The fixed base fee (wei) every block carries.
pub(crate) const BASE_FEE: u64 = 1_000_000_000;
/// Every block's gas limit.
pub(crate) const GAS_LIMIT: u64 = 30_000_000;
/// Messages per second per peer on every channel.
pub(crate) const QUOTA: Quota = Quota::per_second(NZU32!(10_000));
/// Transaction dissemination as the default config bounds it.
pub(crate) const GOSSIP: crate::gossip::GossipLimits = crate::gossip::GossipLimits {
    batch_max_txs: 2_000,
    batch_max_bytes: 1 << 20,
    max_tx_bytes: 1 << 16,
    interval: Duration::from_millis(5),
};
/// Heights per section of marshal's archives here: small, so that a run of
/// a few thousand heights prunes many sections.
pub(crate) const ARCHIVE_SECTION: std::num::NonZeroU64 = commonware_utils::NZU64!(32);
/// The default config's skip timeout.
pub(crate) const SKIP_TIMEOUT: Duration = Duration::from_millis(2500);

/// The block rules every simulated node agrees on.
pub(crate) fn rules() -> Rules {
    Rules {
        block_gas_limit: GAS_LIMIT,
        base_fee_wei: BASE_FEE,
        max_block_txs: 200,
        max_block_bytes: 1 << 20,
        max_tx_size_bytes: 1 << 16,
        max_timestamp_drift_s: 2,
    }
}

/// Funded senders: one per validator and index.
pub(crate) fn sender(i: usize) -> Signer {
    let mut secret = [0u8; 32];
    secret[24..].copy_from_slice(&(1000 + i as u64).to_be_bytes());
    Signer::from_bytes(&B256::from(secret)).expect("valid key")
}

/// A genesis funding the first `senders` of [`sender`].
pub(crate) fn genesis(senders: usize) -> Genesis {
    let mut g = Genesis {
        chain_id: CHAIN_ID,
        timestamp: 0,
        gas_limit: GAS_LIMIT,
        base_fee: BASE_FEE,
        coinbase: Address::ZERO,
        alloc: Default::default(),
        synthetic: Default::default(),
    };
    for i in 0..senders {
        let balance = U256::from(10u128.pow(24));
        g.alloc.insert(sender(i).address(), GenesisAccount { balance, ..Default::default() });
    }
    g
}

/// The unsigned transfer every simulation sends (1 wei at nonce `nonce`).
pub(crate) fn transfer_tx(nonce: u64) -> TxEip1559 {
    TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 2 * u128::from(BASE_FEE),
        max_priority_fee_per_gas: 1,
        to: TxKind::Call(Address::repeat_byte(0x77)),
        value: U256::from(1),
        ..Default::default()
    }
}

/// A signed transfer as admission would hand it over.
pub(crate) fn transfer(from: &Signer, nonce: u64) -> RecoveredTx {
    let raw = from.sign_raw(TypedTransaction::Eip1559(transfer_tx(nonce)));
    sluice_txpool::recover_raw(raw).expect("a valid transaction")
}
