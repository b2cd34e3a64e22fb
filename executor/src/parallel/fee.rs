//! revm's mainnet handler, except that the priority fee is not paid to the
//! coinbase but kept, for the executor to credit in block order.
//!
//! Paying it through the EVM would make every transaction write the
//! coinbase balance, so every pair of transactions would conflict.

use std::{cell::Cell, marker::PhantomData};

use alloy_primitives::U256;
use revm::{
    context::result::{EVMError, HaltReason, InvalidTransaction},
    context_interface::{Block as _, ContextTr, JournalTr, Transaction as _},
    handler::{EvmTr, FrameResult, FrameTr, Handler},
    interpreter::interpreter_action::FrameInit,
    state::EvmState,
};

use crate::db::DbError;

/// The handler; `fee` holds the last transaction's priority fee.
pub(crate) struct DeferredFee<EVM> {
    fee: Cell<U256>,
    _evm: PhantomData<fn() -> EVM>,
}

impl<EVM> DeferredFee<EVM> {
    pub(crate) fn new() -> Self {
        DeferredFee { fee: Cell::new(U256::ZERO), _evm: PhantomData }
    }

    /// The priority fee the last transaction owes the coinbase.
    pub(crate) fn fee(&self) -> U256 {
        self.fee.get()
    }
}

impl<EVM> Handler for DeferredFee<EVM>
where
    EVM: EvmTr<
        Context: ContextTr<Journal: JournalTr<State = EvmState>, Db: revm::Database<Error = DbError>>,
        Frame: FrameTr<FrameInit = FrameInit, FrameResult = FrameResult>,
    >,
{
    type Evm = EVM;
    type Error = EVMError<DbError, InvalidTransaction>;
    type HaltReason = HaltReason;

    fn reward_beneficiary(
        &self,
        evm: &mut Self::Evm,
        exec_result: &mut FrameResult,
    ) -> Result<(), Self::Error> {
        // revm's `post_execution::reward_beneficiary`, without the payment
        // (London rules: the base fee is burned).
        let ctx = evm.ctx_ref();
        let base_fee = u128::from(ctx.block().basefee());
        let price = ctx.tx().effective_gas_price(base_fee).saturating_sub(base_fee);
        let gas = exec_result.gas();
        let used = gas.used().saturating_sub(gas.reservoir());
        self.fee.set(U256::from(price.saturating_mul(u128::from(used))));
        Ok(())
    }
}
