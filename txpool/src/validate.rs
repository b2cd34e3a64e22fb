//! Stateless admission checks, in the order listed in the crate docs, and
//! the balance check that needs only the sender's committed balance.
//!
//! The rule for every check: admission never accepts a transaction that
//! revm 43 would refuse as invalid for the same spec, so an admitted
//! transaction fails at execution only because of state (nonce, balance).

use alloy_consensus::{Transaction, TxEnvelope};
use alloy_primitives::{Bytes, U256};
use revm::{
    context_interface::cfg::gas::calculate_initial_tx_gas,
    primitives::{eip3860::MAX_INITCODE_SIZE, eip7825::TX_GAS_LIMIT_CAP, hardfork::SpecId},
};
use sluice_messages::RecoveredTx;

use crate::{
    error::TxError,
    recover::{decode_envelope, recover_sender},
};

/// geth's and reth's limit: 128 KiB, enough for any contract deployment.
pub const DEFAULT_MAX_TX_SIZE_BYTES: usize = 128 * 1024;

/// The EVM rules admission follows (those of the executor).
pub use sluice_messages::Spec;

/// revm's identifier for a fork.
pub fn spec_id(spec: Spec) -> SpecId {
    match spec {
        Spec::Cancun => SpecId::CANCUN,
        Spec::Prague => SpecId::PRAGUE,
        Spec::Osaka => SpecId::OSAKA,
    }
}

/// The node's admission policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRules {
    /// Only transactions signed for this chain (EIP-155) are admitted.
    pub chain_id: u64,
    /// Raw transactions longer than this are refused before decoding.
    pub max_tx_size_bytes: usize,
    /// A transaction must fit in one block.
    pub block_gas_limit: u64,
    /// Minimum fee cap (legacy: gas price) in wei: the base fee, fixed in
    /// sluice, so every admitted transaction stays includable.
    pub min_fee_per_gas: u128,
    /// Whether EIP-7702 (type 4) transactions are admitted (Prague or
    /// later only).
    pub allow_eip7702: bool,
    /// The EVM spec the executor runs.
    pub spec: Spec,
}

impl AdmissionRules {
    /// Rules with the default size limit, the default spec (Osaka), and
    /// EIP-7702 disabled.
    pub fn new(chain_id: u64, block_gas_limit: u64, min_fee_per_gas: u128) -> Self {
        AdmissionRules {
            chain_id,
            max_tx_size_bytes: DEFAULT_MAX_TX_SIZE_BYTES,
            block_gas_limit,
            min_fee_per_gas,
            allow_eip7702: false,
            spec: Spec::default(),
        }
    }

    /// The rules every validator holds another validator's proposal to:
    /// the shared chain and block rules only, never a node's own stricter
    /// policy, so an honest proposer's block always passes them. The fee
    /// floor is the base fee (sluice's is constant), and EIP-7702 is
    /// allowed exactly when the spec has it, as the node's admission does.
    pub fn for_proposals(
        chain_id: u64,
        spec: Spec,
        block_gas_limit: u64,
        base_fee: u64,
        max_tx_size_bytes: usize,
    ) -> Self {
        AdmissionRules {
            chain_id,
            max_tx_size_bytes,
            block_gas_limit,
            min_fee_per_gas: u128::from(base_fee),
            allow_eip7702: spec.has_eip7702(),
            spec,
        }
    }
}

/// Runs every check that needs no state and recovers the sender.
///
/// The checks run cheapest first, so spam is refused before the ~40 us of
/// sender recovery; see the crate docs for the order.
pub fn admit_stateless(raw: Bytes, rules: &AdmissionRules) -> Result<RecoveredTx, TxError> {
    if raw.len() > rules.max_tx_size_bytes {
        return Err(TxError::Oversized { size: raw.len(), limit: rules.max_tx_size_bytes });
    }
    let hash = sluice_messages::keccak256(&raw);
    let tx = decode_envelope(&raw, hash)?;
    check_decoded(&tx, rules)?;
    let sender = recover_sender(&tx)?;
    Ok(RecoveredTx { hash, raw, tx, sender })
}

/// Checks 4-9 of the crate docs on a decoded transaction: type policy,
/// EIP-155 chain id, nonce, gas limit, init code, intrinsic gas and floor,
/// fees. Everything stateless but the size, the decoding and the sender
/// (the caller's, so a batch can recover its senders in parallel).
pub fn check_decoded(tx: &TxEnvelope, rules: &AdmissionRules) -> Result<(), TxError> {
    check_type(tx, rules)?;
    check_replay_and_nonce(tx, rules)?;
    check_gas(tx, rules)?;
    check_fees(tx, rules)
}

fn check_type(tx: &TxEnvelope, rules: &AdmissionRules) -> Result<(), TxError> {
    if let TxEnvelope::Eip7702(signed) = tx {
        if !rules.allow_eip7702 || !rules.spec.has_eip7702() {
            return Err(TxError::TypeNotSupported);
        }
        if signed.tx().authorization_list.is_empty() {
            return Err(TxError::EmptyAuthList);
        }
    }
    Ok(())
}

fn check_replay_and_nonce(tx: &TxEnvelope, rules: &AdmissionRules) -> Result<(), TxError> {
    // Only a legacy transaction can lack a chain id; typed ones always carry
    // one.
    let have = tx.chain_id().ok_or(TxError::Unprotected)?;
    if have != rules.chain_id {
        return Err(TxError::InvalidChainId { have, want: rules.chain_id });
    }
    if tx.nonce() == u64::MAX {
        return Err(TxError::NonceMax);
    }
    Ok(())
}

fn check_gas(tx: &TxEnvelope, rules: &AdmissionRules) -> Result<(), TxError> {
    let gas = tx.gas_limit();
    if gas > rules.block_gas_limit {
        return Err(TxError::GasLimit);
    }
    // EIP-7825, after the block limit as in geth's ValidateTransaction;
    // revm's constant, the cap execution applies on Osaka.
    if rules.spec.has_osaka_caps() && gas > TX_GAS_LIMIT_CAP {
        return Err(TxError::GasLimitTooHigh { cap: TX_GAS_LIMIT_CAP, gas });
    }
    // EIP-3860, enforced by revm from Shanghai on.
    if tx.is_create() && tx.input().len() > MAX_INITCODE_SIZE {
        return Err(TxError::MaxInitCodeSize { size: tx.input().len(), limit: MAX_INITCODE_SIZE });
    }
    let intrinsic = intrinsic_gas(tx, rules.spec);
    if gas < intrinsic.initial {
        return Err(TxError::IntrinsicGas { gas, needed: intrinsic.initial });
    }
    if gas < intrinsic.floor {
        return Err(TxError::FloorDataGas { gas, needed: intrinsic.floor });
    }
    Ok(())
}

fn check_fees(tx: &TxEnvelope, rules: &AdmissionRules) -> Result<(), TxError> {
    let max_fee = tx.max_fee_per_gas();
    if tx.max_priority_fee_per_gas().is_some_and(|tip| tip > max_fee) {
        return Err(TxError::TipAboveFeeCap);
    }
    if max_fee < rules.min_fee_per_gas {
        // geth's message names the sender; recovering it costs what
        // admitting would have, so a flood of these is no cheaper to send
        // than valid ones.
        let sender = recover_sender(tx)?;
        return Err(TxError::FeeCapTooLow {
            sender,
            max_fee_per_gas: max_fee,
            base_fee: rules.min_fee_per_gas,
        });
    }
    Ok(())
}

/// Intrinsic gas of a transaction as revm charges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntrinsicGas {
    /// Base + calldata + access list + authorizations + create costs.
    pub initial: u64,
    /// The EIP-7623 calldata floor (0 before Prague).
    pub floor: u64,
}

/// Computes intrinsic gas with revm's own function, so admission and
/// execution can never disagree about it.
pub fn intrinsic_gas(tx: &TxEnvelope, spec: Spec) -> IntrinsicGas {
    let (accounts, storages) = tx.access_list().map_or((0, 0), |list| {
        list.iter().fold((0u64, 0u64), |(a, s), item| (a + 1, s + item.storage_keys.len() as u64))
    });
    let auths = tx.authorization_list().map_or(0, |list| list.len() as u64);
    let spec_id = spec_id(spec);
    // EIP-2780 (Amsterdam) is off up to Osaka: revm passes None.
    let gas = calculate_initial_tx_gas(spec_id, tx.input(), tx.is_create(), accounts, storages, auths, None);
    // revm checks the floor only from Prague on (validate_initial_tx_gas).
    let floor = if spec_id.is_enabled_in(SpecId::PRAGUE) { gas.floor_gas() } else { 0 };
    IntrinsicGas { initial: gas.initial_total_gas(), floor }
}

/// Whether `new` may replace `old` (same sender, same nonce), geth's rule
/// (legacypool `PriceBump`, default 10): both its fee cap and its tip must
/// be strictly higher and at least `old * (100 + bump_percent) / 100`
/// (integer division, as geth), else `replacement transaction underpriced`.
/// A legacy or EIP-2930 transaction's tip is its gas price. Without the
/// bump a sender could resend the same fees forever, each time pushing its
/// earlier transaction out for free.
pub fn check_replacement(old: &TxEnvelope, new: &TxEnvelope, bump_percent: u64) -> Result<(), TxError> {
    let fields = [
        (old.max_fee_per_gas(), new.max_fee_per_gas()),
        (old.priority_fee_or_price(), new.priority_fee_or_price()),
    ];
    let factor = U256::from(100u64.saturating_add(bump_percent));
    for (old, new) in fields {
        // U256: `old * (100 + bump)` must not overflow for any u128 fee.
        let threshold = U256::from(old).saturating_mul(factor) / U256::from(100u64);
        if new <= old || U256::from(new) < threshold {
            return Err(TxError::ReplaceUnderpriced);
        }
    }
    Ok(())
}

/// A transaction's maximum cost, `gas_limit * max_fee_per_gas + value`
/// (legacy: the gas price): what the sender must hold for revm to accept
/// it, and what it counts for against its sender's balance while in flight.
/// Saturating: a value near 2^256 makes a cost no balance covers anyway.
pub fn max_cost(tx: &TxEnvelope) -> U256 {
    let gas_cost = U256::from(tx.gas_limit()) * U256::from(tx.max_fee_per_gas());
    gas_cost.saturating_add(tx.value())
}

/// Checks that `balance` covers the transaction's maximum cost
/// ([`max_cost`]) with geth's message.
pub fn check_funds(tx: &RecoveredTx, balance: U256) -> Result<(), TxError> {
    let cost = max_cost(&tx.tx);
    if balance < cost {
        return Err(TxError::InsufficientFunds { balance, cost, overshot: cost - balance });
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
