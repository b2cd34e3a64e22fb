//! Shared setup of the fuzz targets: the admission rules and a JSON-RPC
//! state with no running pipeline (`sluice_rpc::offline`:
//! `eth_sendRawTransaction` runs the stateless checks and sender recovery,
//! then answers "admission stopped"). The block gas limit is small so a fuzzed `eth_call` cannot
//! run for seconds.

use std::sync::Arc;

use alloy_primitives::{Address, U256};
use sluice_rpc::RpcState;
use sluice_store::{Genesis, GenesisAccount, Store};
use sluice_txpool::AdmissionRules;

/// Chain id of the fuzzed node.
pub const CHAIN_ID: u64 = 31337;
const GAS_LIMIT: u64 = 1_000_000;
const BASE_FEE: u64 = 1_000_000_000;

/// Admission rules as a default node has them, with a small gas limit.
pub fn rules() -> AdmissionRules {
    AdmissionRules::new(CHAIN_ID, GAS_LIMIT, u128::from(BASE_FEE))
}

/// An RPC state over an in-memory genesis with one funded account.
pub fn offline_state() -> Arc<RpcState> {
    let mut alloc = std::collections::BTreeMap::new();
    let funded: Address = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266".parse().unwrap_or_default();
    alloc.insert(funded, GenesisAccount { balance: U256::from(10u128.pow(21)), ..Default::default() });
    let genesis = Genesis {
        chain_id: CHAIN_ID,
        timestamp: 0,
        gas_limit: GAS_LIMIT,
        base_fee: BASE_FEE,
        coinbase: Address::ZERO,
        alloc,
        synthetic: Default::default(),
    };
    let mut limits = sluice_config::Config::default().rpc;
    limits.max_batch_len = 50;
    let exec = sluice_executor::ExecConfig { chain_id: CHAIN_ID, spec: sluice_executor::Spec::default() };
    sluice_rpc::offline::offline_state(Arc::new(Store::new(&genesis)), rules(), exec, limits)
}
