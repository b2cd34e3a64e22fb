//! `eth_createAccessList`, as geth and reth answer it: the addresses and
//! slots a call touches (less its sender, its recipient and the
//! precompiles, which are warm anyway), found with revm-inspectors'
//! `AccessListInspector`, and the gas the call uses with that list.

use alloy_primitives::Bytes;
use revm::{
    context::{result::ExecutionResult, Context},
    context_interface::{result::EVMError, transaction::AccessList},
    InspectEvm, MainBuilder, MainContext,
};
use revm_inspectors::access_list::AccessListInspector;
use sluice_messages::BlockHeader;
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    call::{call_envs, halt_message, invalid_message, CallRequest},
    deadline::{CallLimits, Watch},
    env::block_env,
    revert_message, ExecConfig, ExecError,
};

/// What `eth_createAccessList` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessListOutcome {
    /// The addresses and slots touched.
    pub access_list: AccessList,
    /// Gas the call uses with `access_list` attached.
    pub gas_used: u64,
    /// Why the call failed ("execution reverted: ...", a halt), if it did:
    /// geth still answers the list, with this beside it.
    pub error: Option<String>,
}

/// Runs `req` once under the inspector to collect what it touches, then
/// again with that list attached to measure its gas, both within `limits`.
pub fn create_access_list(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    limits: &CallLimits,
    header: &BlockHeader,
    req: &CallRequest,
) -> Result<AccessListOutcome, ExecError> {
    let (env, mut tx) = call_envs(cfg, req, limits.memory_limit_bytes)?;
    tx.gas_limit = req.gas.unwrap_or(header.gas_limit);
    let mut inspector = AccessListInspector::new(req.access_list.clone().unwrap_or_default());
    let mut watch = Watch::new(limits.deadline.clone());
    {
        let mut evm = Context::mainnet()
            .with_db(BlockState::with_capacity(state, 4))
            .with_block(block_env(header, cfg.spec))
            .with_cfg(env.clone())
            .build_mainnet_with_inspector((&mut inspector, &mut watch));
        let res = evm.inspect_tx(tx.clone());
        if watch.hit() {
            return Err(ExecError::Aborted(limits.deadline.message()));
        }
        match res {
            Ok(_) => {}
            Err(EVMError::Transaction(e)) => return Err(ExecError::InvalidCall(invalid_message(&e))),
            Err(EVMError::Database(e)) => return Err(e.into()),
            Err(e) => return Err(ExecError::InvalidCall(e.to_string())),
        }
    }
    let access_list = inspector.into_access_list();
    tx.access_list = access_list.clone();
    // A legacy call carries no list: with one it is an EIP-2930 call.
    tx.tx_type = tx.tx_type.max(1);
    let mut evm = Context::mainnet()
        .with_db(BlockState::with_capacity(state, 4))
        .with_block(block_env(header, cfg.spec))
        .with_cfg(env)
        .build_mainnet_with_inspector(&mut watch);
    let res = evm.inspect_tx(tx);
    if evm.inspector.hit() {
        return Err(ExecError::Aborted(limits.deadline.message()));
    }
    let result = match res {
        Ok(out) => out.result,
        Err(EVMError::Transaction(e)) => return Err(ExecError::InvalidCall(invalid_message(&e))),
        Err(EVMError::Database(e)) => return Err(e.into()),
        Err(e) => return Err(ExecError::InvalidCall(e.to_string())),
    };
    let gas_used = result.tx_gas_used();
    let error = match result {
        ExecutionResult::Success { .. } => None,
        ExecutionResult::Revert { output, .. } => Some(revert_message(&Bytes::from(output.to_vec()))),
        ExecutionResult::Halt { reason, .. } => Some(halt_message(&reason, evm.inspector.last_opcode())),
    };
    Ok(AccessListOutcome { access_list, gas_used, error })
}
