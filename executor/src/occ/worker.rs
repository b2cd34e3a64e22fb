//! One worker: executes transactions (as plain transfers or on its own,
//! reused EVM) into [`TxOutcome`]s.

use std::sync::atomic::Ordering;

use alloy_primitives::map::AddressSet;
use revm::{
    context::{result::EVMError, Context, ContextSetters},
    handler::{Handler, MainnetContext},
    ExecuteEvm, MainBuilder, MainContext, MainnetEvm,
};
use sluice_messages::PreparedTx;

use super::{
    commit::CoinbaseState,
    db::WorkerDb,
    engine::Shared,
    fee::DeferredFee,
    footprint::{Outcome, TxOutcome, TxResult},
    transfer,
};
use crate::{db::DbError, env::tx_env, sequential::receipt};

type WorkerEvm<'s> = MainnetEvm<MainnetContext<WorkerDb<'s>>>;

/// A worker thread's executor.
pub(crate) struct Worker<'s> {
    shared: &'s Shared<'s>,
    /// Built on first use: blocks of plain transfers never need one.
    evm: Option<WorkerEvm<'s>>,
    /// Accounts this worker flagged as having storage written.
    pub(crate) flagged: AddressSet,
    /// Outcomes to reuse: allocating one per transaction, and freeing it on
    /// another thread, costs more than executing a transfer.
    spare: Vec<Outcome>,
}

impl<'s> Worker<'s> {
    pub(crate) fn new(shared: &'s Shared<'s>, spare: Vec<Outcome>) -> Self {
        Worker { shared, evm: None, flagged: AddressSet::default(), spare }
    }

    /// Gives an outcome back for reuse. Kept however many there are (at
    /// most one per transaction): freeing it here, when another thread
    /// allocated it, would contend for that thread's allocator lock.
    pub(crate) fn recycle(&mut self, out: Outcome) {
        self.spare.push(out);
    }

    /// Its spare outcomes, for the next block.
    pub(crate) fn into_spare(self) -> Vec<Outcome> {
        self.spare
    }

    /// Executes transaction `index` against the multi-version memory.
    /// `exact_coinbase` is the committed coinbase when executing at the
    /// commit point (every earlier transaction committed).
    pub(crate) fn execute(
        &mut self,
        index: u32,
        incarnation: u32,
        exact_coinbase: Option<&CoinbaseState>,
    ) -> Result<Outcome, DbError> {
        let shared = self.shared;
        let started = shared.committed.load(Ordering::Acquire);
        let mut out = self.spare.pop().unwrap_or_else(TxOutcome::new);
        out.reset(incarnation, started);
        let tx = match shared.tx(index) {
            PreparedTx::Ready(tx) => tx,
            PreparedTx::Invalid { reason, .. } => {
                out.result = TxResult::Skipped(reason.clone());
                return Ok(out);
            }
        };
        if transfer::try_transfer(shared, tx, index, &mut out)? {
            return Ok(out);
        }
        let env = match tx_env(tx) {
            Ok(env) => env,
            Err(reason) => {
                out.result = TxResult::Skipped(reason.to_string());
                return Ok(out);
            }
        };
        let evm = self.evm.get_or_insert_with(|| {
            let mut evm = Context::mainnet()
                .with_db(WorkerDb::new(shared))
                .with_block(shared.block_env.clone())
                .with_cfg(shared.cfg_env.clone())
                .build_mainnet();
            crate::keccak::install(&mut evm.instruction);
            evm
        });
        let db = &mut evm.ctx.journaled_state.database;
        db.begin(index);
        db.exact_coinbase = exact_coinbase.cloned();
        evm.ctx.set_tx(env);
        let mut handler = DeferredFee::<WorkerEvm<'_>>::new();
        let result = handler.run(evm);
        // Clears the journal whatever happened, as `transact` does.
        let state = evm.finalize();
        let db = &mut evm.ctx.journaled_state.database;
        db.exact_coinbase = None;
        // Swapped, not taken: both lists keep their capacity for reuse.
        std::mem::swap(&mut out.account_reads, &mut db.account_reads);
        std::mem::swap(&mut out.slot_reads, &mut db.slot_reads);
        out.coinbase_read = db.coinbase_read.take();
        match result {
            Ok(result) => {
                out.record_state(state, shared.rules.coinbase);
                let receipt = receipt(tx, shared.rules.base_fee, 0, 0, result);
                out.result = TxResult::Applied { receipt, fee: handler.fee() };
            }
            Err(EVMError::Database(e)) => return Err(e),
            // Refused before execution (nonce, funds, fee cap...): revm has
            // discarded the journal, so nothing was written. As in the
            // sequential executor, the reason is revm's message.
            Err(e) => out.result = TxResult::Skipped(e.to_string()),
        }
        Ok(out)
    }
}
