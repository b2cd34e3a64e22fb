//! `eth_simulateV1` as geth serves it (`internal/ethapi/simulate.go`): a
//! chain of blocks on top of a base block, each with its own block and
//! state overrides and its calls, executed in order, each call and each
//! block seeing the state the previous ones left. Nothing is written.
//!
//! As in geth: blocks are numbered from the base's number + 1, a block's
//! `number` override may skip ahead (the gap is filled with empty blocks)
//! but never go back (-38020), timestamps default to the previous one + 12
//! and must increase (-38021), at most [`MAX_SIMULATE_BLOCKS`] blocks
//! (-38026). The fee recipient and gas limit carry over from block to
//! block. Without `validation` calls run as `eth_call` runs them (no nonce
//! check, base fee 0 unless overridden, no base-fee check); with it, nonces,
//! balances and the base fee are checked, and a refusal fails the whole
//! request with geth's code (-38010, -38011, -38013, -38014, -32602). Every
//! call's gas defaults to what is left of its block's gas limit, and all
//! calls together spend at most the gas cap (geth's gas pool). With
//! `traceTransfers`, each ether transfer is reported as an ERC-7528 log
//! from `0xEeee...EEeE`, among the call's logs in execution order.

use alloy_primitives::{address, b256, Address, Bytes, B256, U256};
use alloy_rpc_types_eth::{state::StateOverride, BlockOverrides};
use revm::{
    context::{result::InvalidTransaction, Context},
    context_interface::result::EVMError,
    interpreter::{CallInputs, CallOutcome, CallScheme, CreateInputs, CreateOutcome, Interpreter},
    primitives::{Log as RevmLog, KECCAK_EMPTY},
    state::{Account, Bytecode, EvmState, EvmStorageSlot, TransactionId},
    Database, InspectEvm, Inspector, MainBuilder, MainContext,
};
use sluice_messages::BlockHeader;
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    call::{call_envs, outcome, CallOutcome as Outcome, CallRequest},
    deadline::{CallLimits, Watch},
    env::{block_env, cfg_env},
    overrides::override_header,
    sequential::log,
    ExecConfig, ExecError,
};

/// The most blocks one request may simulate, gaps included (geth's
/// `maxSimulateBlocks`).
pub const MAX_SIMULATE_BLOCKS: u64 = 256;
/// Seconds between a block and the next when no time is given (geth's
/// `timestampIncrement`).
pub const TIMESTAMP_INCREMENT: u64 = 12;
/// ERC-7528's address standing for ether in transfer logs.
pub const TRANSFER_ADDRESS: Address = address!("0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE");
/// `keccak256("Transfer(address,address,uint256)")`.
pub const TRANSFER_TOPIC: B256 = b256!("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");

/// geth's error codes for `eth_simulateV1` (`internal/ethapi/errors.go`).
pub mod codes {
    /// The call's nonce is below the sender's.
    pub const NONCE_TOO_LOW: i64 = -38010;
    /// The call's nonce is above the sender's.
    pub const NONCE_TOO_HIGH: i64 = -38011;
    /// The call's gas is below its intrinsic cost.
    pub const INTRINSIC_GAS: i64 = -38013;
    /// The sender cannot pay for gas and value.
    pub const INSUFFICIENT_FUNDS: i64 = -38014;
    /// The calls of a block need more than its gas limit.
    pub const BLOCK_GAS_LIMIT_REACHED: i64 = -38015;
    /// Block numbers not increasing.
    pub const BLOCK_NUMBER_INVALID: i64 = -38020;
    /// Block timestamps not increasing.
    pub const BLOCK_TIMESTAMP_INVALID: i64 = -38021;
    /// Too many blocks.
    pub const CLIENT_LIMIT_EXCEEDED: i64 = -38026;
    /// Anything else that stops the simulation.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Bad parameters (fee fields among them).
    pub const INVALID_PARAMS: i64 = -32602;
    /// A call reverted (in `calls[i].error`).
    pub const REVERTED: i64 = 3;
    /// A call halted other than by reverting (in `calls[i].error`).
    pub const VM_ERROR: i64 = -32015;
    /// geth's generic server error.
    pub const SERVER_ERROR: i64 = -32000;
}

/// One block to simulate, as the request describes it.
#[derive(Debug, Clone, Default)]
pub struct SimBlock {
    /// Its header's overrides (number, time, gas limit, fee recipient,
    /// base fee, prevRandao).
    pub block_overrides: BlockOverrides,
    /// Accounts to override before its calls run.
    pub state_overrides: StateOverride,
    /// Its calls, in order.
    pub calls: Vec<CallRequest>,
}

/// How to simulate.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimOptions {
    /// Check nonces, balances and the base fee, as a real block would.
    pub validation: bool,
    /// Report ether transfers as ERC-7528 logs.
    pub trace_transfers: bool,
    /// The gas all calls together may spend (0: unbounded).
    pub gas_cap: u64,
}

/// One simulated call: what it was run as and what it did.
#[derive(Debug, Clone)]
pub struct SimulatedCall {
    /// The request with geth's defaults filled in: sender, nonce, gas and
    /// fees.
    pub request: CallRequest,
    /// Its outcome; with `traceTransfers`, the logs include the transfers.
    pub outcome: Outcome,
}

/// One simulated block.
#[derive(Debug, Clone)]
pub struct SimulatedBlock {
    /// Its header as its calls saw it. `parent_hash` holds its PREVRANDAO
    /// (the override, else zero): the parent's hash is the caller's to
    /// chain.
    pub header: BlockHeader,
    /// Gas used by its calls.
    pub gas_used: u64,
    /// Its calls, in order.
    pub calls: Vec<SimulatedCall>,
}

/// Why a simulation failed as a whole: a JSON-RPC code and geth's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SimError {
    /// The JSON-RPC error code ([`codes`]).
    pub code: i64,
    /// geth's message.
    pub message: String,
}

impl SimError {
    fn new(code: i64, message: impl Into<String>) -> SimError {
        SimError { code, message: message.into() }
    }
}

impl From<ExecError> for SimError {
    fn from(e: ExecError) -> SimError {
        let code = match e {
            ExecError::Store(_) | ExecError::Aborted(_) => codes::INTERNAL_ERROR,
            _ => codes::SERVER_ERROR,
        };
        SimError::new(code, e.to_string())
    }
}

impl From<crate::db::DbError> for SimError {
    fn from(e: crate::db::DbError) -> SimError {
        ExecError::from(e).into()
    }
}

/// Simulates `blocks` on `state` (the state after `base`), within `limits`
/// (one deadline for all calls).
pub fn simulate(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    limits: &CallLimits,
    base: &BlockHeader,
    blocks: &[SimBlock],
    opts: &SimOptions,
) -> Result<Vec<SimulatedBlock>, SimError> {
    if blocks.is_empty() {
        return Err(SimError::new(codes::INVALID_PARAMS, "empty input"));
    }
    if blocks.len() as u64 > MAX_SIMULATE_BLOCKS {
        return Err(SimError::new(codes::CLIENT_LIMIT_EXCEEDED, "too many blocks"));
    }
    let chain = sanitize_chain(base, blocks)?;

    let mut env = cfg_env(cfg);
    env.disable_nonce_check = !opts.validation;
    env.disable_base_fee = !opts.validation;
    // geth skips the sender's EOA check and the per-transaction gas cap
    // even when validating; the block gas limit is checked here.
    env.disable_eip3607 = true;
    env.disable_block_gas_limit = true;
    env.tx_gas_limit_cap = Some(u64::MAX);
    env.memory_limit = limits.memory_limit_bytes;
    let mut evm = Context::mainnet()
        .with_db(BlockState::with_capacity(state, 16))
        .with_block(block_env(base, cfg.spec))
        .with_cfg(env)
        .build_mainnet_with_inspector(SimInspector::new(
            Watch::new(limits.deadline.clone()),
            opts.trace_transfers,
        ));

    let mut pool = if opts.gas_cap == 0 { u64::MAX } else { opts.gas_cap };
    let mut out = Vec::with_capacity(chain.len());
    let (mut coinbase, mut gas_limit) = (base.coinbase, base.gas_limit);
    for (number, time, block) in chain {
        let o = block.map(|b| &b.block_overrides);
        let mut header = BlockHeader {
            number,
            timestamp: time,
            coinbase,
            gas_limit,
            base_fee: if opts.validation { base.base_fee } else { 0 },
            parent_hash: B256::ZERO,
            ..base.clone()
        };
        if let Some(o) = o {
            // Number and time are settled; the rest as eth_call takes them.
            let rest = BlockOverrides { number: None, time: None, ..o.clone() };
            header = override_header(&header, &rest)?;
        }
        (coinbase, gas_limit) = (header.coinbase, header.gas_limit);
        evm.ctx.block = block_env(&header, cfg.spec);
        let Some(block) = block else {
            out.push(SimulatedBlock { header, gas_used: 0, calls: Vec::new() });
            continue;
        };
        apply_overrides(&mut evm.ctx.journaled_state.database, &block.state_overrides)?;

        let mut gas_used = 0u64;
        let mut calls = Vec::with_capacity(block.calls.len());
        for req in &block.calls {
            let mut req = req.clone();
            let from = req.from.unwrap_or_default();
            req.from = Some(from);
            let db = &mut evm.ctx.journaled_state.database;
            let state_nonce = db.basic(from)?.map_or(0, |a| a.nonce);
            let nonce = *req.nonce.get_or_insert(state_nonce);
            // geth checks the nonce before the fees (revm after).
            if opts.validation && nonce != state_nonce {
                let kind = if nonce > state_nonce {
                    InvalidTransaction::NonceTooHigh { tx: nonce, state: state_nonce }
                } else {
                    InvalidTransaction::NonceTooLow { tx: nonce, state: state_nonce }
                };
                return Err(refusal(&kind, from));
            }
            let gas = req.gas.unwrap_or(header.gas_limit.saturating_sub(gas_used));
            if gas_used.saturating_add(gas) > header.gas_limit {
                return Err(SimError::new(
                    codes::BLOCK_GAS_LIMIT_REACHED,
                    format!("block gas limit reached: {gas_used} >= {}", header.gas_limit),
                ));
            }
            req.gas = Some(gas.min(pool));
            let (_, mut tx) = call_envs(cfg, &req, limits.memory_limit_bytes)?;
            tx.gas_limit = req.gas.unwrap_or(0);
            tx.nonce = req.nonce.unwrap_or(0);

            if evm.inspector.watch.hit() {
                return Err(ExecError::Aborted(evm.inspector.watch.deadline().message()).into());
            }
            evm.inspector.start();
            let res = evm.inspect_tx(tx);
            if evm.inspector.watch.hit() {
                return Err(ExecError::Aborted(evm.inspector.watch.deadline().message()).into());
            }
            let done = match res {
                Ok(done) => done,
                Err(EVMError::Transaction(e)) => return Err(refusal(&e, from)),
                Err(EVMError::Database(e)) => return Err(e.into()),
                Err(e) => return Err(SimError::new(codes::INTERNAL_ERROR, e.to_string())),
            };
            evm.ctx.journaled_state.database.commit_tx(done.state)?;
            let used = done.result.tx_gas_used();
            gas_used = gas_used.saturating_add(used);
            pool = pool.saturating_sub(used);
            let transfers = evm.inspector.finish(done.result.is_success());
            let mut outcome = outcome(done.result, evm.inspector.watch.last_opcode());
            if let Some(logs) = transfers {
                outcome.logs = logs.into_iter().map(log).collect();
            }
            calls.push(SimulatedCall { request: req, outcome });
        }
        out.push(SimulatedBlock { header, gas_used, calls });
    }
    Ok(out)
}

/// Each block's number, time and request (`None` for a gap's).
type Chain<'b> = Vec<(u64, u64, Option<&'b SimBlock>)>;

/// Each block's number and time, with the gaps filled by empty blocks
/// (`None`); geth's `sanitizeChain`.
fn sanitize_chain<'b>(base: &BlockHeader, blocks: &'b [SimBlock]) -> Result<Chain<'b>, SimError> {
    let (mut number, mut time) = (base.number, base.timestamp);
    let mut out = Vec::with_capacity(blocks.len());
    for block in blocks {
        let o = &block.block_overrides;
        let next = match o.number {
            None => number.saturating_add(1),
            Some(n) => u64::try_from(n).map_err(|_| {
                SimError::new(codes::INVALID_PARAMS, "block override number does not fit in 64 bits")
            })?,
        };
        if next <= number {
            return Err(SimError::new(
                codes::BLOCK_NUMBER_INVALID,
                format!("block numbers must be in order: {next} <= {number}"),
            ));
        }
        if next - base.number > MAX_SIMULATE_BLOCKS {
            return Err(SimError::new(codes::CLIENT_LIMIT_EXCEEDED, "too many blocks"));
        }
        for gap in number + 1..next {
            time = time.saturating_add(TIMESTAMP_INCREMENT);
            out.push((gap, time, None));
        }
        number = next;
        let t = match o.time {
            None => time.saturating_add(TIMESTAMP_INCREMENT),
            Some(t) if t <= time => {
                return Err(SimError::new(
                    codes::BLOCK_TIMESTAMP_INVALID,
                    format!("block timestamps must be in order: {t} <= {time}"),
                ))
            }
            Some(t) => t,
        };
        time = t;
        out.push((number, time, Some(block)));
    }
    Ok(out)
}

/// Writes geth's account overrides into the simulation's state, so that
/// later calls and blocks see them (and may change them).
fn apply_overrides(db: &mut BlockState<'_>, overrides: &StateOverride) -> Result<(), SimError> {
    let invalid = |m: String| SimError::new(codes::SERVER_ERROR, m);
    let mut changes = EvmState::default();
    for (address, o) in overrides {
        if o.state.is_some() && o.state_diff.is_some() {
            return Err(invalid(format!("account {address} has both 'state' and 'stateDiff'")));
        }
        if o.move_precompile_to.is_some() {
            return Err(invalid("movePrecompileToAddress is not supported".into()));
        }
        let mut info = db.basic(*address)?.unwrap_or_default();
        if let Some(balance) = o.balance {
            info.balance = balance;
        }
        if let Some(nonce) = o.nonce {
            info.nonce = nonce;
        }
        if let Some(code) = &o.code {
            let code = Bytecode::new_raw(code.clone());
            info.code_hash = if code.is_empty() { KECCAK_EMPTY } else { code.hash_slow() };
            info.code = Some(code);
        }
        let mut account = Account::from(info);
        account.mark_touch();
        if o.state.is_some() {
            // The whole storage is replaced: as a creation, it starts empty.
            account.mark_created();
        }
        for (slot, value) in o.state.iter().chain(o.state_diff.iter()).flatten() {
            let (slot, value) = (U256::from_be_bytes(slot.0), U256::from_be_bytes(value.0));
            let original = if o.state.is_some() { U256::ZERO } else { db.storage(*address, slot)? };
            // A slot set to what it holds is left as it is.
            account.storage.insert(slot, EvmStorageSlot::new_changed(original, value, TransactionId::ZERO));
        }
        changes.insert(*address, account);
    }
    db.commit_tx(changes)?;
    Ok(())
}

/// geth's code and message for a call a real block would refuse.
fn refusal(e: &InvalidTransaction, from: Address) -> SimError {
    match e {
        InvalidTransaction::NonceTooHigh { tx, state } => SimError::new(
            codes::NONCE_TOO_HIGH,
            format!("nonce too high: address {from}, tx: {tx} state: {state}"),
        ),
        InvalidTransaction::NonceTooLow { tx, state } => SimError::new(
            codes::NONCE_TOO_LOW,
            format!("nonce too low: address {from}, tx: {tx} state: {state}"),
        ),
        InvalidTransaction::LackOfFundForMaxFee { fee, balance } => SimError::new(
            codes::INSUFFICIENT_FUNDS,
            format!("insufficient funds for gas * price + value: address {from} have {balance} want {fee}"),
        ),
        InvalidTransaction::CallGasCostMoreThanGasLimit { initial_gas, gas_limit }
        | InvalidTransaction::GasFloorMoreThanGasLimit { gas_floor: initial_gas, gas_limit } => {
            SimError::new(
                codes::INTRINSIC_GAS,
                format!("intrinsic gas too low: have {gas_limit}, want {initial_gas}"),
            )
        }
        InvalidTransaction::GasPriceLessThanBasefee => SimError::new(
            codes::INVALID_PARAMS,
            format!("max fee per gas less than block base fee: address {from}"),
        ),
        InvalidTransaction::PriorityFeeGreaterThanMaxFee => SimError::new(
            codes::INVALID_PARAMS,
            format!("max priority fee per gas higher than max fee per gas: address {from}"),
        ),
        other => SimError::new(codes::INTERNAL_ERROR, crate::call::invalid_message(other)),
    }
}

/// The deadline's watch, and with `traceTransfers` the call's logs and
/// transfers in execution order, by frame (a failed frame's are dropped,
/// as geth's simulate tracer does).
struct SimInspector {
    watch: Watch,
    trace: bool,
    /// Open frames' logs, and whether the first is a creation's transfer
    /// still addressed to zero (its address is known at its end).
    frames: Vec<(Vec<RevmLog>, bool)>,
    /// The outermost frame's logs, once it ended successfully.
    done: Vec<RevmLog>,
}

impl SimInspector {
    fn new(watch: Watch, trace: bool) -> Self {
        SimInspector { watch, trace, frames: Vec::new(), done: Vec::new() }
    }

    /// Before each call.
    fn start(&mut self) {
        self.frames.clear();
        self.done.clear();
    }

    /// After each call: its logs with the transfers, if traced.
    fn finish(&mut self, success: bool) -> Option<Vec<RevmLog>> {
        if !self.trace {
            return None;
        }
        let logs = std::mem::take(&mut self.done);
        self.frames.clear();
        Some(if success { logs } else { Vec::new() })
    }

    fn enter(&mut self, transfer: Option<(Address, Address, U256)>, create: bool) {
        if !self.trace {
            return;
        }
        let mut frame = Vec::new();
        if let Some((from, to, value)) = transfer.filter(|t| !t.2.is_zero()) {
            frame.push(transfer_log(from, to, value));
        }
        let pending = create && !frame.is_empty();
        self.frames.push((frame, pending));
    }

    fn exit(&mut self, ok: bool, created: Option<Address>) {
        if !self.trace {
            return;
        }
        let Some((mut frame, pending)) = self.frames.pop() else { return };
        if let (true, Some(address), Some(first)) = (pending, created, frame.first_mut()) {
            // A creation's transfer goes to the address it got.
            let mut topics = first.topics().to_vec();
            if let Some(to) = topics.get_mut(2) {
                *to = address.into_word();
            }
            first.data.set_topics_unchecked(topics);
        }
        if !ok {
            return;
        }
        match self.frames.last_mut() {
            Some((parent, _)) => parent.append(&mut frame),
            None => self.done = frame,
        }
    }
}

/// An ERC-7528 ether transfer log.
fn transfer_log(from: Address, to: Address, value: U256) -> RevmLog {
    RevmLog::new_unchecked(
        TRANSFER_ADDRESS,
        vec![TRANSFER_TOPIC, from.into_word(), to.into_word()],
        Bytes::from(value.to_be_bytes::<32>().to_vec()),
    )
}

impl<CTX> Inspector<CTX> for SimInspector {
    fn step(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        self.watch.step(interp, context);
    }

    fn log(&mut self, _context: &mut CTX, log: RevmLog) {
        if let Some((frame, _)) = self.frames.last_mut() {
            frame.push(log);
        }
    }

    fn call(&mut self, context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        let transfer = (inputs.scheme != CallScheme::DelegateCall)
            .then(|| inputs.transfer_value().map(|v| (inputs.transfer_from(), inputs.transfer_to(), v)))
            .flatten();
        self.enter(transfer, false);
        self.watch.call(context, inputs)
    }

    fn call_end(&mut self, _context: &mut CTX, _inputs: &CallInputs, outcome: &mut CallOutcome) {
        self.exit(outcome.instruction_result().is_ok(), None);
    }

    fn create(&mut self, context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        self.enter(Some((inputs.caller(), Address::ZERO, inputs.value())), true);
        self.watch.create(context, inputs)
    }

    fn create_end(&mut self, _context: &mut CTX, _inputs: &CreateInputs, outcome: &mut CreateOutcome) {
        self.exit(outcome.instruction_result().is_ok(), outcome.address);
    }

    fn selfdestruct(&mut self, contract: Address, target: Address, value: U256) {
        if self.trace && !value.is_zero() {
            if let Some((frame, _)) = self.frames.last_mut() {
                frame.push(transfer_log(contract, target, value));
            }
        }
    }
}

/// Why a call failed, as `calls[i].error` reports it: code 3 with the
/// revert data for a revert, -32015 for a halt, worded as the
/// execution-apis schema requires (`vm execution error: ` and geth's
/// message).
pub fn call_error(outcome: &Outcome) -> Option<(i64, String, Option<Bytes>)> {
    if outcome.success {
        None
    } else if outcome.revert {
        Some((codes::REVERTED, crate::revert_message(&outcome.output), Some(outcome.output.clone())))
    } else {
        // The execution-apis schema requires the prefix; geth's own words
        // (which geth answers alone) follow it.
        let reason = outcome.halt_reason.as_deref().unwrap_or("execution halted");
        Some((codes::VM_ERROR, format!("vm execution error: {reason}"), None))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use alloy_rpc_types_eth::state::AccountOverride;

    use super::*;
    use crate::testing::MemState;

    /// Increments slot 0 and returns it.
    const COUNTER: &[u8] = &[
        0x60, 0x00, 0x54, 0x60, 0x01, 0x01, 0x80, 0x60, 0x00, 0x55, 0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00,
        0xf3,
    ];
    /// Reverts with the word 42.
    const REVERTS: &[u8] = &[0x60, 0x2a, 0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00, 0xfd];

    const X: Address = Address::repeat_byte(0x42);
    const A: Address = Address::repeat_byte(0xa1);
    const B: Address = Address::repeat_byte(0xb2);

    fn base() -> BlockHeader {
        BlockHeader {
            number: 10,
            parent_hash: B256::ZERO,
            timestamp: 1_000,
            coinbase: Address::repeat_byte(0xc0),
            gas_limit: 30_000_000,
            base_fee: 7,
            tx_root: B256::ZERO,
            state_ref: None,
        }
    }

    fn run(state: &MemState, blocks: &[SimBlock], opts: SimOptions) -> Result<Vec<SimulatedBlock>, SimError> {
        let limits = CallLimits::new(Duration::from_secs(10), 32 << 20);
        simulate(state, &ExecConfig::new(1), &limits, &base(), blocks, &opts)
    }

    fn word(out: &Bytes) -> U256 {
        U256::from_be_slice(out)
    }

    fn call_to(to: Address) -> CallRequest {
        CallRequest { from: Some(A), to: Some(to), ..Default::default() }
    }

    #[test]
    fn the_second_block_sees_the_first_blocks_state() {
        let mut code = StateOverride::default();
        code.insert(X, AccountOverride { code: Some(Bytes::from_static(COUNTER)), ..Default::default() });
        let blocks = [
            SimBlock { state_overrides: code, calls: vec![call_to(X), call_to(X)], ..Default::default() },
            SimBlock { calls: vec![call_to(X)], ..Default::default() },
        ];
        let out = run(&MemState::new(), &blocks, SimOptions::default()).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].header.number, out[0].header.timestamp), (11, 1_012));
        assert_eq!((out[1].header.number, out[1].header.timestamp), (12, 1_024));
        assert_eq!(out[0].header.base_fee, 0, "no validation: base fee 0");
        let words: Vec<U256> =
            out.iter().flat_map(|b| b.calls.iter().map(|c| word(&c.outcome.output))).collect();
        assert_eq!(words, [U256::from(1), U256::from(2), U256::from(3)]);
        assert_eq!(out[0].gas_used, out[0].calls.iter().map(|c| c.outcome.gas_used).sum::<u64>());
        // The sender's nonce advanced call by call.
        let nonces: Vec<_> = out.iter().flat_map(|b| b.calls.iter().map(|c| c.request.nonce)).collect();
        assert_eq!(nonces, [Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn block_numbers_skip_ahead_with_empty_blocks_but_never_go_back() {
        let at = |n: u64| SimBlock {
            block_overrides: BlockOverrides { number: Some(U256::from(n)), ..Default::default() },
            ..Default::default()
        };
        let out = run(&MemState::new(), &[at(13)], SimOptions::default()).unwrap();
        let numbers: Vec<_> = out.iter().map(|b| (b.header.number, b.header.timestamp)).collect();
        assert_eq!(numbers, [(11, 1_012), (12, 1_024), (13, 1_036)]);
        let e = run(&MemState::new(), &[at(12), at(12)], SimOptions::default()).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-38020, "block numbers must be in order: 12 <= 12"));
        let e = run(&MemState::new(), &[at(10 + 257)], SimOptions::default()).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-38026, "too many blocks"));
        let late = SimBlock {
            block_overrides: BlockOverrides { time: Some(1_000), ..Default::default() },
            ..Default::default()
        };
        let e = run(&MemState::new(), &[late], SimOptions::default()).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-38021, "block timestamps must be in order: 1000 <= 1000"));
    }

    #[test]
    fn validation_refuses_a_nonce_gap_and_an_overdraft_as_geth() {
        let mut state = MemState::new();
        state.set_account(A, U256::from(10u64.pow(18)), 0);
        let validate = SimOptions { validation: true, ..Default::default() };
        let priced = |nonce, value: u64| CallRequest {
            from: Some(A),
            to: Some(B),
            nonce,
            value: Some(U256::from(value)),
            max_fee_per_gas: Some(7),
            max_priority_fee_per_gas: Some(0),
            ..Default::default()
        };
        let one = |req| [SimBlock { calls: vec![req], ..Default::default() }];
        let e = run(&state, &one(priced(Some(5), 1)), validate).unwrap_err();
        assert_eq!(e.code, -38011);
        assert_eq!(e.message, format!("nonce too high: address {A}, tx: 5 state: 0"));
        let e = run(&state, &one(priced(None, 2 * 10u64.pow(18))), validate).unwrap_err();
        assert_eq!(e.code, -38014);
        assert!(
            e.message.starts_with(&format!("insufficient funds for gas * price + value: address {A} have ")),
            "{e}"
        );
        // Without validation the gap is no matter; the block's base fee is
        // the base's when validating.
        let out = run(&state, &one(priced(Some(5), 1)), SimOptions::default()).unwrap();
        assert!(out[0].calls[0].outcome.success);
        let out = run(&state, &one(priced(None, 1)), validate).unwrap();
        assert_eq!(out[0].header.base_fee, 7);
    }

    #[test]
    fn trace_transfers_reports_ether_moved_as_erc7528_logs() {
        let mut state = MemState::new();
        state.set_account(A, U256::from(1_000), 0);
        let send = CallRequest { value: Some(U256::from(5)), ..call_to(B) };
        let blocks = [SimBlock { calls: vec![send], ..Default::default() }];
        let out = run(&state, &blocks, SimOptions { trace_transfers: true, ..Default::default() }).unwrap();
        let logs = &out[0].calls[0].outcome.logs;
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert_eq!(logs[0].address, TRANSFER_ADDRESS);
        assert_eq!(logs[0].topics, vec![TRANSFER_TOPIC, A.into_word(), B.into_word()]);
        assert_eq!(word(&logs[0].data), U256::from(5));
        let out = run(&state, &blocks, SimOptions::default()).unwrap();
        assert!(out[0].calls[0].outcome.logs.is_empty(), "not traced");

        // A creation's transfer goes to the created address.
        let create = CallRequest {
            from: Some(A),
            value: Some(U256::from(3)),
            input: Bytes::from_static(&[0x00]),
            ..Default::default()
        };
        let blocks = [SimBlock { calls: vec![create], ..Default::default() }];
        let out = run(&state, &blocks, SimOptions { trace_transfers: true, ..Default::default() }).unwrap();
        let logs = &out[0].calls[0].outcome.logs;
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert_eq!(logs[0].topics[2], A.create(0).into_word());
    }

    #[test]
    fn a_reverting_call_fails_alone_with_code_3() {
        let mut code = StateOverride::default();
        code.insert(X, AccountOverride { code: Some(Bytes::from_static(REVERTS)), ..Default::default() });
        let blocks =
            [SimBlock { state_overrides: code, calls: vec![call_to(X), call_to(B)], ..Default::default() }];
        let out = run(&MemState::new(), &blocks, SimOptions::default()).unwrap();
        let (reverted, fine) = (&out[0].calls[0].outcome, &out[0].calls[1].outcome);
        assert!(!reverted.success && reverted.revert);
        let (code, message, data) = call_error(reverted).unwrap();
        assert_eq!((code, message.as_str()), (3, "execution reverted"));
        assert_eq!(data.map(|d| word(&d)), Some(U256::from(42)));
        assert!(fine.success && call_error(fine).is_none());

        // Any other failure: -32015, in the spec's words then geth's.
        let mut code = StateOverride::default();
        code.insert(X, AccountOverride { code: Some(Bytes::from_static(&[0xfe])), ..Default::default() });
        let blocks = [SimBlock { state_overrides: code, calls: vec![call_to(X)], ..Default::default() }];
        let out = run(&MemState::new(), &blocks, SimOptions::default()).unwrap();
        let (code, message, data) = call_error(&out[0].calls[0].outcome).unwrap();
        assert_eq!(
            (code, message.as_str(), data),
            (-32015, "vm execution error: invalid opcode: INVALID", None)
        );
    }

    #[test]
    fn all_calls_together_spend_at_most_the_gas_cap() {
        let blocks = [
            SimBlock { calls: vec![call_to(B)], ..Default::default() },
            SimBlock { calls: vec![call_to(B)], ..Default::default() },
        ];
        let e =
            run(&MemState::new(), &blocks, SimOptions { gas_cap: 30_000, ..Default::default() }).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-38013, "intrinsic gas too low: have 9000, want 21000"));
        let out =
            run(&MemState::new(), &blocks, SimOptions { gas_cap: 42_000, ..Default::default() }).unwrap();
        assert_eq!(out[1].gas_used, 21_000);
    }
}
