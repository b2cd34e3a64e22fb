//! The sequential executor: the block's transactions strictly in order, one
//! revm instance for the whole block. It is the oracle any faster executor
//! is compared against, so its results are defined exactly here.
//!
//! # Skipped transactions
//!
//! A transaction that cannot be applied at its position is skipped: it
//! changes no state, gets no receipt and does not count towards the block's
//! gas, and it is listed in [`BlockOutcome::skipped`] with a readable reason.
//! That covers [`PreparedTx::Invalid`], blob transactions, a gas limit above
//! the block gas still available (block gas limit minus the gas used by the
//! transactions applied before it), and everything revm rejects before
//! execution (nonce mismatch, funds below `gas_limit * max_fee + value`, fee
//! cap below the base fee, wrong chain id, intrinsic gas above the limit,
//! sender with code...). Only a failure to read state is an error.
//!
//! # Change set
//!
//! Let S0 be the state at block start and S1 the state after the last
//! applied transaction. Accounts "exist" as revm sees them after each
//! transaction: SELFDESTRUCT (of a contract created in the same transaction,
//! EIP-6780) and EIP-161 (a touched account with zero nonce and balance and no
//! code) remove an account. An account is *wiped* in the block when some
//! applied transaction created a contract at its address, self-destructed it,
//! or deleted it under EIP-161 while it existed.
//!
//! An account appears in the change set iff it exists in S0 or S1, and its
//! existence, balance, nonce or code hash differs between S0 and S1, or some
//! storage slot differs between S0 and S1, or it was wiped. Its entry holds:
//! - `deleted`: it does not exist in S1 (then every other field is zero or
//!   empty and `storage_cleared` is true);
//! - `balance`, `nonce`: values in S1;
//! - `code`: the S1 code and hash, iff its code hash differs from S0 (an
//!   account absent from S0 has the empty-code hash there); this includes
//!   EIP-7702 delegations;
//! - `storage_cleared`: wiped or deleted, so the store must drop all its slots
//!   before applying `storage`;
//! - `storage`: when cleared, every slot non-zero in S1; otherwise every slot
//!   whose S1 value differs from S0. Sorted by slot.
//!
//! Accounts are sorted by address. Accounts that exist in neither S0 nor S1
//! never appear, whatever happened to them in between. An account absent
//! from S0 has no storage in S0 (the state reader is not asked), which is
//! what a store honouring `storage_cleared` on deletion guarantees anyway.
//!
//! # Fees
//!
//! London rules as revm applies them: the sender pays `gas_used *
//! effective_gas_price`, the base fee part is burned and the tip
//! (`effective_gas_price - base_fee` per gas) goes to the coinbase.

use alloy_consensus::Transaction as _;
use alloy_eips::Typed2718;
use alloy_primitives::{Bytes, B256};
use revm::{
    context::{result::ExecutionResult, Context, TxEnv},
    context_interface::result::EVMError,
    ExecuteEvm, MainBuilder, MainContext,
};
use sluice_messages::{ChangeSet, Log, PreparedBlock, PreparedTx, Receipt, RecoveredTx, SkipReason};
use sluice_state::StateReader;

use crate::{
    block_state::BlockState,
    env::{block_env, cfg_env, tx_env},
    skip::refusal,
    BlockOutcome, ExecConfig, ExecError,
};

/// Executes a prepared block on top of `state`, in order.
pub fn execute_block(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
) -> Result<BlockOutcome, ExecError> {
    let header = &block.block.header;
    let mut evm = Context::mainnet()
        // Typically a sender and a recipient per transaction, plus the coinbase.
        .with_db(BlockState::with_capacity(state, 2 * block.txs.len() + 1))
        .with_block(block_env(header, cfg.spec))
        .with_cfg(cfg_env(cfg))
        .build_mainnet();

    let mut tally = Tally::new(block.txs.len());
    for prepared in &block.txs {
        let Some((tx, env)) = tally.applicable(prepared, header.gas_limit) else {
            continue;
        };
        match evm.transact(env) {
            Ok(out) => {
                evm.ctx.journaled_state.database.commit_tx(out.state)?;
                tally.applied(tx, header.base_fee, out.result);
            }
            Err(EVMError::Database(e)) => return Err(e.into()),
            // Transaction and header validation errors, and anything else
            // revm refuses before changing state: revm has already discarded
            // the transaction's journal, so skipping it is exact.
            Err(e) => tally.skipped.push((tx.hash, refusal(e))),
        }
    }
    let changes = evm.ctx.journaled_state.database.change_set()?;
    Ok(tally.outcome(changes))
}

/// A block's results so far, as its transactions are applied in order.
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) receipts: Vec<Receipt>,
    pub(crate) skipped: Vec<(B256, SkipReason)>,
    pub(crate) gas_used: u64,
}

impl Tally {
    pub(crate) fn new(txs: usize) -> Self {
        Tally { receipts: Vec::with_capacity(txs), skipped: Vec::new(), gas_used: 0 }
    }

    /// The transaction and its revm environment, if it can be applied
    /// next in a block with this gas limit; else it is skipped, with why.
    pub(crate) fn applicable<'t>(
        &mut self,
        prepared: &'t PreparedTx,
        block_gas_limit: u64,
    ) -> Option<(&'t RecoveredTx, TxEnv)> {
        let remaining = block_gas_limit.saturating_sub(self.gas_used);
        let tx = match prepared {
            PreparedTx::Ready(tx) => tx,
            PreparedTx::Invalid { hash, reason } => {
                self.skipped.push((*hash, SkipReason::Other(reason.clone())));
                return None;
            }
        };
        if tx.gas_limit() > remaining {
            let reason = SkipReason::BlockGasReached { gas_limit: tx.gas_limit(), remaining };
            self.skipped.push((tx.hash, reason));
            return None;
        }
        match tx_env(tx) {
            Ok(env) => Some((tx, env)),
            Err(reason) => {
                self.skipped.push((tx.hash, SkipReason::Other(reason.to_owned())));
                None
            }
        }
    }

    /// Records an applied transaction's receipt.
    pub(crate) fn applied(&mut self, tx: &RecoveredTx, base_fee: u64, result: ExecutionResult) {
        self.gas_used = self.gas_used.saturating_add(result.tx_gas_used());
        let index = u32::try_from(self.receipts.len()).unwrap_or(u32::MAX);
        self.receipts.push(receipt(tx, base_fee, index, self.gas_used, result));
    }

    /// The block's outcome, with its change set.
    pub(crate) fn outcome(self, changes: ChangeSet) -> BlockOutcome {
        let Tally { receipts, skipped, gas_used } = self;
        BlockOutcome { receipts, skipped, gas_used, changes, stats: Default::default() }
    }
}

/// The receipt of an applied transaction.
pub(crate) fn receipt(
    tx: &RecoveredTx,
    base_fee: u64,
    index: u32,
    cumulative: u64,
    result: ExecutionResult,
) -> Receipt {
    let gas_used = result.tx_gas_used();
    let contract_address = result.created_address();
    let success = result.is_success();
    let (logs, output) = match result {
        ExecutionResult::Success { logs, .. } => (logs, Bytes::new()),
        ExecutionResult::Revert { logs, output, .. } => (logs, output),
        ExecutionResult::Halt { logs, .. } => (logs, Bytes::new()),
    };
    Receipt {
        tx_hash: tx.hash,
        tx_type: tx.tx.ty(),
        index,
        from: tx.sender,
        to: tx.tx.to(),
        contract_address,
        success,
        gas_used,
        cumulative_gas_used: cumulative,
        effective_gas_price: tx.tx.effective_gas_price(Some(base_fee)),
        logs: logs.into_iter().map(log).collect(),
        output,
    }
}

/// A revm log as sluice's.
pub(crate) fn log(l: revm::primitives::Log) -> Log {
    let (topics, data) = l.data.split();
    Log { address: l.address, topics, data }
}
