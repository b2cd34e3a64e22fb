//! Execution configuration and its translation into revm's environments.

use alloy_consensus::{Transaction as _, TxEnvelope};
use alloy_eips::Typed2718;
use alloy_primitives::U256;
use revm::{
    context::{BlockEnv, CfgEnv, TxEnv},
    context_interface::{block::BlobExcessGasAndPrice, either::Either},
    primitives::{eip4844, hardfork::SpecId},
};
use sluice_messages::{BlockHeader, RecoveredTx};

/// The hard fork whose rules execution follows.
pub use sluice_messages::Spec;

/// revm's identifier for a fork.
pub(crate) fn spec_id(spec: Spec) -> SpecId {
    match spec {
        Spec::Cancun => SpecId::CANCUN,
        Spec::Prague => SpecId::PRAGUE,
        Spec::Osaka => SpecId::OSAKA,
    }
}

/// What execution needs to know about the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecConfig {
    /// EIP-155 chain id: checked against transactions and returned by CHAINID.
    pub chain_id: u64,
    /// Fork rules.
    pub spec: Spec,
}

impl ExecConfig {
    /// The default rules ([`Spec::default`], Osaka) on the given chain.
    pub fn new(chain_id: u64) -> Self {
        ExecConfig { chain_id, spec: Spec::default() }
    }
}

/// revm's configuration for executing blocks: every check enabled.
///
/// `tx_gas_limit_cap` is left `None` on purpose: revm then derives the cap
/// from the spec (EIP-7825's 2^24 from Osaka on, none before), the same
/// rule admission applies.
pub(crate) fn cfg_env(cfg: &ExecConfig) -> CfgEnv {
    let mut env = CfgEnv::new_with_spec(spec_id(cfg.spec));
    env.chain_id = cfg.chain_id;
    env.tx_gas_limit_cap = None;
    env
}

/// revm's block environment for a header.
///
/// PREVRANDAO is the parent hash: sluice has no beacon chain, the value must
/// be deterministic, and revm refuses post-merge blocks without one. There are
/// no blobs, so the excess blob gas is zero (blob gas price 1), which only
/// exists to satisfy revm's Cancun header validation. Osaka keeps Prague's
/// update fraction (only the later BPO forks change it).
pub(crate) fn block_env(header: &BlockHeader, spec: Spec) -> BlockEnv {
    let fraction = match spec {
        Spec::Cancun => eip4844::BLOB_BASE_FEE_UPDATE_FRACTION_CANCUN,
        Spec::Prague | Spec::Osaka => eip4844::BLOB_BASE_FEE_UPDATE_FRACTION_PRAGUE,
    };
    BlockEnv {
        number: U256::from(header.number),
        beneficiary: header.coinbase,
        timestamp: U256::from(header.timestamp),
        gas_limit: header.gas_limit,
        basefee: header.base_fee,
        difficulty: U256::ZERO,
        prevrandao: Some(header.parent_hash),
        blob_excess_gas_and_price: Some(BlobExcessGasAndPrice::new(0, fraction)),
        ..Default::default()
    }
}

/// revm's transaction for a recovered transaction, or why it cannot run.
///
/// Blob (EIP-4844) transactions are refused: sluice carries no blobs, so
/// there is nothing their versioned hashes could commit to.
pub(crate) fn tx_env(tx: &RecoveredTx) -> Result<TxEnv, &'static str> {
    let t = &tx.tx;
    if matches!(t, TxEnvelope::Eip4844(_)) {
        return Err("blob transactions are not supported");
    }
    let authorization_list = match t.authorization_list() {
        Some(list) => list.iter().cloned().map(Either::Left).collect(),
        None => Vec::new(),
    };
    Ok(TxEnv {
        tx_type: t.ty(),
        caller: tx.sender,
        gas_limit: t.gas_limit(),
        // For legacy and EIP-2930 transactions this is the gas price.
        gas_price: t.max_fee_per_gas(),
        kind: t.kind(),
        value: t.value(),
        data: t.input().clone(),
        nonce: t.nonce(),
        chain_id: t.chain_id(),
        access_list: t.access_list().cloned().unwrap_or_default(),
        gas_priority_fee: t.max_priority_fee_per_gas(),
        blob_hashes: Vec::new(),
        max_fee_per_blob_gas: 0,
        authorization_list,
    })
}

#[cfg(test)]
mod tests {
    use revm::{context_interface::Cfg as _, primitives::eip7825::TX_GAS_LIMIT_CAP};

    use super::*;

    #[test]
    fn osaka_blocks_cap_transaction_gas_and_prague_does_not() {
        let osaka = cfg_env(&ExecConfig { chain_id: 1, spec: Spec::Osaka });
        assert_eq!(osaka.tx_gas_limit_cap(), TX_GAS_LIMIT_CAP);
        assert_eq!(TX_GAS_LIMIT_CAP, 1 << 24);
        let prague = cfg_env(&ExecConfig { chain_id: 1, spec: Spec::Prague });
        assert_eq!(prague.tx_gas_limit_cap(), u64::MAX);
    }
}
