//! `eth_call` and `eth_estimateGas`, with geth's semantics.
//!
//! A call runs on top of a state and a header without committing anything.
//! As in geth: the sender defaults to the zero address, the nonce is not
//! checked, a sender with code is allowed (EIP-3607 off), the gas defaults
//! to the block gas limit and may exceed it, and EIP-7825's per-transaction
//! cap does not apply (an estimate stays within it on Osaka, as geth's
//! gasestimator). When no fee is given (all fee fields absent or zero) the
//! call is free: base fee and balance checks are off, as geth's `NoBaseFee`
//! does.

use alloy_primitives::{Address, Bytes, TxKind, U256};
use revm::{
    context::{
        result::{ExecutionResult, HaltReason, InvalidTransaction},
        Context, TxEnv,
    },
    context_interface::{result::EVMError, transaction::AccessList},
    handler::{MainnetContext, MainnetEvm},
    primitives::{eip7825::TX_GAS_LIMIT_CAP, KECCAK_EMPTY},
    InspectEvm, MainBuilder, MainContext,
};
use sluice_messages::{BlockHeader, Log};
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    db::normalize_code_hash,
    deadline::{CallLimits, Watch},
    env::{block_env, cfg_env},
    sequential::log,
    ExecConfig, ExecError,
};

/// Gas of a plain value transfer.
const TX_GAS: u64 = 21_000;
/// Gas a CALL with value forwards for free; part of geth's first guess.
const CALL_STIPEND: u64 = 2_300;

/// An `eth_call` / `eth_estimateGas` request, as the RPC layer decoded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallRequest {
    /// Sender; the zero address when absent.
    pub from: Option<Address>,
    /// Recipient; `None` simulates a contract creation.
    pub to: Option<Address>,
    /// Gas limit; the block gas limit when absent.
    pub gas: Option<u64>,
    /// Legacy gas price.
    pub gas_price: Option<u128>,
    /// EIP-1559 fee cap.
    pub max_fee_per_gas: Option<u128>,
    /// EIP-1559 tip cap.
    pub max_priority_fee_per_gas: Option<u128>,
    /// Value sent.
    pub value: Option<U256>,
    /// Calldata (or init code for a creation).
    pub input: Bytes,
    /// Nonce; accepted but not checked.
    pub nonce: Option<u64>,
    /// EIP-2930 access list.
    pub access_list: Option<AccessList>,
}

/// What a call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// True when execution succeeded.
    pub success: bool,
    /// Return data on success, revert data on revert, empty on a halt.
    pub output: Bytes,
    /// Gas used (after refunds), as a receipt would report it.
    pub gas_used: u64,
    /// Logs emitted (none survive a revert or halt).
    pub logs: Vec<Log>,
    /// True when execution ended with REVERT.
    pub revert: bool,
    /// Why execution halted (out of gas, invalid opcode...), if it did.
    pub halt_reason: Option<String>,
}

/// Executes a call without committing it, within `limits`.
pub fn call(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    limits: &CallLimits,
    header: &BlockHeader,
    req: &CallRequest,
) -> Result<CallOutcome, ExecError> {
    let mut sim = Simulator::new(state, cfg, limits, header, req)?;
    match sim.run(req.gas.unwrap_or(header.gas_limit))? {
        Run::Invalid(e) => Err(ExecError::InvalidCall(invalid_message(&e))),
        Run::Done(result) => {
            let precompile_failed = matches!(
                result,
                ExecutionResult::Halt {
                    reason: HaltReason::PrecompileError | HaltReason::PrecompileErrorWithContext(_),
                    ..
                }
            );
            let mut out = outcome(result, sim.evm.inspector.last_opcode());
            if precompile_failed && cfg.spec.has_osaka_caps() {
                if let Some(why) = modexp_bound(req) {
                    out.halt_reason = Some(why.into());
                }
            }
            Ok(out)
        }
    }
}

/// geth's words for a MODEXP call (`0x05`) past EIP-7823's 1,024-byte
/// bound on a length (revm's own names no length), checked in geth's order;
/// `None` for any other call.
fn modexp_bound(req: &CallRequest) -> Option<&'static str> {
    if req.to != Some(Address::with_last_byte(5)) {
        return None;
    }
    // Lengths are 32-byte big-endian words, the input zero-padded.
    let length = |i: usize| {
        let mut word = [0u8; 32];
        for (j, b) in word.iter_mut().enumerate() {
            *b = req.input.get(i * 32 + j).copied().unwrap_or(0);
        }
        U256::from_be_bytes(word)
    };
    let bound = U256::from(1024);
    [(0, "base length is too large"), (1, "exponent length is too large"), (2, "modulus length is too large")]
        .into_iter()
        .find(|(i, _)| length(*i) > bound)
        .map(|(_, why)| why)
}

/// Estimates the gas a call needs, like geth: the smallest gas limit at which
/// it succeeds, searched between its gas use and the cap (the request's gas,
/// else the block gas limit, lowered to what the sender can pay for at the
/// given fee). The whole search shares `limits`' deadline.
pub fn estimate_gas(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    limits: &CallLimits,
    header: &BlockHeader,
    req: &CallRequest,
) -> Result<u64, ExecError> {
    let mut sim = Simulator::new(state, cfg, limits, header, req)?;
    let mut hi = match req.gas {
        Some(gas) if gas >= TX_GAS => gas,
        _ => header.gas_limit,
    };
    // geth's gasestimator: on Osaka no transaction may declare more than
    // the EIP-7825 cap, so no estimate is above it.
    if cfg.spec.has_osaka_caps() {
        hi = hi.min(TX_GAS_LIMIT_CAP);
    }
    let fee_cap = req.gas_price.or(req.max_fee_per_gas).unwrap_or(0);
    if fee_cap > 0 {
        let from = req.from.unwrap_or_default();
        let balance = state.account(&from)?.map_or(U256::ZERO, |a| a.balance);
        let value = req.value.unwrap_or_default();
        let Some(available) = balance.checked_sub(value) else {
            return Err(ExecError::InvalidCall("insufficient funds for transfer".into()));
        };
        hi = hi.min((available / U256::from(fee_cap)).saturating_to::<u64>());
    }

    // A plain transfer to an account without code needs exactly 21000
    // (checked by running it once: an access list or a precompile recipient
    // needs more and falls through to the search).
    if let Some(to) = req.to {
        let no_code = state.account(&to)?.is_none_or(|a| normalize_code_hash(a.code_hash) == KECCAK_EMPTY);
        if req.input.is_empty() && no_code && hi >= TX_GAS && sim.succeeds(TX_GAS)? {
            return Ok(TX_GAS);
        }
    }

    let first = match sim.run(hi)? {
        Run::Invalid(e) if needs_more_gas(&e) => return Err(ExecError::GasExceedsAllowance(hi)),
        Run::Invalid(e) => return Err(ExecError::InvalidCall(invalid_message(&e))),
        Run::Done(result) => result,
    };
    let used = first.tx_gas_used();
    // Gas spent before refunds: what the call needs to hold at its peak.
    let spent = sim.last_spent.max(used);
    match first {
        ExecutionResult::Success { .. } => {}
        ExecutionResult::Revert { output, .. } => return Err(ExecError::Reverted { output }),
        ExecutionResult::Halt { reason: HaltReason::OutOfGas(_), .. } => {
            return Err(ExecError::GasExceedsAllowance(hi))
        }
        ExecutionResult::Halt { reason, .. } => {
            return Err(ExecError::Halted(halt_message(&reason, sim.evm.inspector.last_opcode())))
        }
    }

    // Anything below the gas used fails; geth's first guess above it is the
    // gas spent before refunds plus a stipend, allowing for the 63/64 rule.
    let mut lo = used.saturating_sub(1);
    let optimistic =
        u64::try_from((u128::from(spent) + u128::from(CALL_STIPEND)) * 64 / 63).unwrap_or(u64::MAX);
    if optimistic < hi {
        if sim.succeeds(optimistic)? {
            hi = optimistic;
        } else {
            lo = optimistic;
        }
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if sim.succeeds(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The configuration and transaction `req` runs with, as geth runs calls:
/// no nonce check, EIP-3607 and the block gas limit relaxed, and an
/// unpriced call free of the base fee and balance checks, and the EVM's
/// memory bounded by `memory_limit_bytes`. The gas limit is left 0 for the
/// caller to set.
pub(crate) fn call_envs(
    cfg: &ExecConfig,
    req: &CallRequest,
    memory_limit_bytes: u64,
) -> Result<(revm::context::CfgEnv, TxEnv), ExecError> {
    let dynamic = req.max_fee_per_gas.is_some() || req.max_priority_fee_per_gas.is_some();
    if dynamic && req.gas_price.is_some() {
        return Err(ExecError::InvalidCall(
            "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified".into(),
        ));
    }
    let priced = [req.gas_price, req.max_fee_per_gas, req.max_priority_fee_per_gas]
        .iter()
        .any(|fee| fee.unwrap_or(0) > 0);

    let mut env = cfg_env(cfg);
    env.disable_nonce_check = true;
    env.disable_eip3607 = true;
    env.disable_block_gas_limit = true;
    env.memory_limit = memory_limit_bytes;
    // geth runs calls with SkipTransactionChecks, which include EIP-7825's
    // cap: an eth_call may use more than 2^24 gas on Osaka (it defaults to
    // the block gas limit). Estimates are capped separately.
    env.tx_gas_limit_cap = Some(u64::MAX);
    if !priced {
        env.disable_base_fee = true;
        env.disable_balance_check = true;
    }
    let tx = TxEnv {
        tx_type: if dynamic {
            2
        } else if req.access_list.is_some() {
            1
        } else {
            0
        },
        caller: req.from.unwrap_or_default(),
        gas_limit: 0,
        gas_price: if dynamic { req.max_fee_per_gas } else { req.gas_price }.unwrap_or(0),
        kind: req.to.map_or(TxKind::Create, TxKind::Call),
        value: req.value.unwrap_or_default(),
        data: req.input.clone(),
        nonce: req.nonce.unwrap_or(0),
        chain_id: Some(cfg.chain_id),
        access_list: req.access_list.clone().unwrap_or_default(),
        gas_priority_fee: dynamic.then(|| req.max_priority_fee_per_gas.unwrap_or(0)),
        blob_hashes: Vec::new(),
        max_fee_per_blob_gas: 0,
        authorization_list: Vec::new(),
    };
    Ok((env, tx))
}

/// One simulated execution.
enum Run {
    /// Executed (successfully or not).
    Done(ExecutionResult),
    /// revm refused the transaction before execution.
    Invalid(InvalidTransaction),
}

/// A reusable EVM over the call's state, with the request as a template,
/// watched by the call's deadline.
struct Simulator<'a> {
    evm: MainnetEvm<MainnetContext<BlockState<'a>>, Watch>,
    tx: TxEnv,
    /// Gas spent before refunds by the last run that executed.
    last_spent: u64,
}

impl<'a> Simulator<'a> {
    fn new(
        state: &'a dyn StateReader,
        cfg: &ExecConfig,
        limits: &CallLimits,
        header: &BlockHeader,
        req: &CallRequest,
    ) -> Result<Self, ExecError> {
        let (env, tx) = call_envs(cfg, req, limits.memory_limit_bytes)?;
        let evm = Context::mainnet()
            .with_db(BlockState::with_capacity(state, 4))
            .with_block(block_env(header, cfg.spec))
            .with_cfg(env)
            .build_mainnet_with_inspector(Watch::new(limits.deadline.clone()));
        Ok(Simulator { evm, tx, last_spent: 0 })
    }

    /// Runs the request with `gas`, discarding its state changes; past the
    /// deadline (before or during the run), geth's timeout error.
    fn run(&mut self, gas: u64) -> Result<Run, ExecError> {
        if self.evm.inspector.hit() {
            return Err(ExecError::Aborted(self.evm.inspector.deadline().message()));
        }
        let mut tx = self.tx.clone();
        tx.gas_limit = gas;
        let res = self.evm.inspect_tx(tx);
        // A stopped run unwinds as out of gas: its cause is the deadline's.
        if self.evm.inspector.hit() {
            return Err(ExecError::Aborted(self.evm.inspector.deadline().message()));
        }
        match res {
            Ok(out) => {
                self.last_spent = out.result.gas().total_gas_spent();
                Ok(Run::Done(out.result))
            }
            Err(EVMError::Transaction(e)) => Ok(Run::Invalid(e)),
            Err(EVMError::Database(e)) => Err(e.into()),
            Err(e) => Err(ExecError::InvalidCall(e.to_string())),
        }
    }

    /// Whether the request succeeds with `gas`. Too little gas for the
    /// intrinsic cost counts as failure; other refusals are errors.
    fn succeeds(&mut self, gas: u64) -> Result<bool, ExecError> {
        match self.run(gas)? {
            Run::Done(result) => Ok(result.is_success()),
            Run::Invalid(e) if needs_more_gas(&e) => Ok(false),
            Run::Invalid(e) => Err(ExecError::InvalidCall(invalid_message(&e))),
        }
    }
}

/// Refusals that more gas would cure.
fn needs_more_gas(e: &InvalidTransaction) -> bool {
    matches!(
        e,
        InvalidTransaction::CallGasCostMoreThanGasLimit { .. }
            | InvalidTransaction::GasFloorMoreThanGasLimit { .. }
    )
}

/// The outcome of a run; `last_opcode` is the opcode its last step ran.
pub(crate) fn outcome(result: ExecutionResult, last_opcode: u8) -> CallOutcome {
    let gas_used = result.tx_gas_used();
    let (success, output, logs, revert, halt_reason) = match result {
        ExecutionResult::Success { output, logs, .. } => (true, output.into_data(), logs, false, None),
        ExecutionResult::Revert { output, logs, .. } => (false, output, logs, true, None),
        ExecutionResult::Halt { reason, logs, .. } => {
            (false, Bytes::new(), logs, false, Some(halt_message(&reason, last_opcode)))
        }
    };
    CallOutcome { success, output, gas_used, logs: logs.into_iter().map(log).collect(), revert, halt_reason }
}

/// geth's wording for refusals RPC clients commonly match on.
pub(crate) fn invalid_message(e: &InvalidTransaction) -> String {
    match e {
        InvalidTransaction::LackOfFundForMaxFee { fee, balance } => {
            format!("insufficient funds for gas * price + value: have {balance} want {fee}")
        }
        InvalidTransaction::GasPriceLessThanBasefee => "max fee per gas less than block base fee".into(),
        InvalidTransaction::CallGasCostMoreThanGasLimit { initial_gas, gas_limit } => {
            format!("intrinsic gas too low: have {gas_limit}, want {initial_gas}")
        }
        InvalidTransaction::PriorityFeeGreaterThanMaxFee => {
            "max priority fee per gas higher than max fee per gas".into()
        }
        InvalidTransaction::TxGasLimitGreaterThanCap { gas_limit, cap } => {
            format!("transaction gas limit too high (cap: {cap}, tx: {gas_limit})")
        }
        other => other.to_string(),
    }
}

/// geth's wording for halts; `opcode` is the one the halting step ran
/// (geth names it when it is invalid: `invalid opcode: CLZ` for an opcode
/// of a later fork, `invalid opcode: opcode 0xc not defined` for one no
/// fork defines).
pub(crate) fn halt_message(reason: &HaltReason, opcode: u8) -> String {
    match reason {
        HaltReason::OutOfGas(_) => "out of gas".into(),
        HaltReason::InvalidFEOpcode => "invalid opcode: INVALID".into(),
        HaltReason::OpcodeNotFound | HaltReason::NotActivated => {
            format!("invalid opcode: {}", opcode_name(opcode))
        }
        HaltReason::InvalidJump => "invalid jump destination".into(),
        HaltReason::StackUnderflow => "stack underflow".into(),
        HaltReason::StackOverflow => "stack limit reached 1024".into(),
        HaltReason::CreateCollision => "contract address collision".into(),
        HaltReason::OutOfFunds => "insufficient balance for transfer".into(),
        HaltReason::CallTooDeep => "max call depth exceeded".into(),
        HaltReason::StateChangeDuringStaticCall => "write protection".into(),
        HaltReason::CreateContractSizeLimit => "max code size exceeded".into(),
        HaltReason::CreateContractStartingWithEF => "invalid code: must not begin with 0xef".into(),
        HaltReason::NonceOverflow => "nonce uint64 overflow".into(),
        HaltReason::OutOfOffset => "return data out of bounds".into(),
        // A precompile's own words, not revm's debug form of them.
        HaltReason::PrecompileError => "precompile error".into(),
        HaltReason::PrecompileErrorWithContext(why) => why.clone(),
        other => format!("{other:?}"),
    }
}

/// geth's `OpCode.String`: the name of any opcode some fork defines (revm
/// knows the same names for those), else `opcode 0x.. not defined` (Go's
/// `%#x`, no leading zero).
fn opcode_name(opcode: u8) -> String {
    match revm::bytecode::opcode::OpCode::new(opcode) {
        Some(op) => op.as_str().to_string(),
        None => format!("opcode {opcode:#x} not defined"),
    }
}
