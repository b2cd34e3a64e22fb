//! Plain value transfers without the EVM interpreter.
//!
//! A transaction qualifies when it is a legacy, EIP-2930 or EIP-1559
//! transaction with no input, no access list and a non-zero value, to an
//! account without code that is not a precompile, the sender or the
//! coinbase, from a sender that is not the coinbase, and every check revm
//! would make passes (chain id, fee caps, gas limit, nonce, funds for the
//! maximum cost). Its effects are then exactly revm's: intrinsic gas 21,000
//! (EIP-7623's floor is also 21,000 without data), the sender pays
//! `gas_limit * price` up front, sends the value, is refunded the unused gas
//! and its nonce goes up by one; the recipient gains the value (so it exists
//! and is not empty: no EIP-161 deletion); the tip goes to the coinbase as a
//! deferred fee.
//!
//! Anything else, including a check that fails, goes through revm, which
//! then produces the exact skip reason.

use alloy_consensus::{Transaction as _, TxEnvelope};
use alloy_eips::Typed2718;
use alloy_primitives::{Address, Bytes, U256};
use revm::context_interface::Cfg as _;
use revm::primitives::KECCAK_EMPTY;
use sluice_messages::{BlockHeader, Receipt, RecoveredTx};

use super::{
    cell::{view, AccountVersion},
    engine::Shared,
    footprint::{field, AccountValue, AccountWrite, TxOutcome, TxResult},
};
use crate::{
    db::DbError,
    env::{cfg_env, ExecConfig},
};

/// Gas of a plain transfer.
pub(crate) const TRANSFER_GAS: u64 = 21_000;

/// The chain's and block's rules a plain transfer is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub(crate) chain_id: u64,
    pub(crate) coinbase: Address,
    pub(crate) base_fee: u64,
    pub(crate) block_gas_limit: u64,
    /// The per-transaction gas cap of the fork (EIP-7825), if any.
    pub(crate) tx_gas_cap: u64,
}

impl Rules {
    pub(crate) fn new(cfg: &ExecConfig, header: &BlockHeader) -> Self {
        Rules {
            chain_id: cfg.chain_id,
            coinbase: header.coinbase,
            base_fee: header.base_fee,
            block_gas_limit: header.gas_limit,
            tx_gas_cap: cfg_env(cfg).tx_gas_limit_cap(),
        }
    }
}

/// What can be decided about a transfer without reading state.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) to: Address,
    value: U256,
    nonce: u64,
    /// `gas_limit * max_fee + value`: the balance revm requires.
    max_cost: U256,
    /// `gas_limit * effective_gas_price`: deducted before execution.
    upfront: U256,
    /// The unused gas returned after execution.
    refund: U256,
    /// The priority fee owed to the coinbase.
    pub(crate) fee: U256,
}

/// `tx`'s plan if it can be a plain transfer, judging by the transaction
/// alone (state can still rule it out: see [`Plan::apply`]).
pub(crate) fn plan(rules: &Rules, tx: &RecoveredTx) -> Option<Plan> {
    let t = &tx.tx;
    let dynamic = match t {
        TxEnvelope::Legacy(_) | TxEnvelope::Eip2930(_) => false,
        TxEnvelope::Eip1559(_) => true,
        _ => return None,
    };
    let to = t.to()?;
    let value = t.value();
    if value.is_zero()
        || !t.input().is_empty()
        || t.access_list().is_some_and(|list| !list.is_empty())
        || t.chain_id() != Some(rules.chain_id)
        || to == tx.sender
        || to == rules.coinbase
        || tx.sender == rules.coinbase
        // Precompiles live at small addresses; leave that whole range to revm.
        || to.0[..18].iter().all(|b| *b == 0)
    {
        return None;
    }
    let gas_limit = t.gas_limit();
    let nonce = t.nonce();
    if gas_limit < TRANSFER_GAS || gas_limit > rules.block_gas_limit || gas_limit > rules.tx_gas_cap {
        return None;
    }
    if nonce == u64::MAX {
        return None;
    }
    // As revm reads them from the transaction environment (see `env.rs`).
    let base_fee = u128::from(rules.base_fee);
    let max_fee = t.max_fee_per_gas();
    let price = if dynamic {
        let tip = t.max_priority_fee_per_gas().unwrap_or_default();
        if tip > max_fee {
            return None;
        }
        max_fee.min(base_fee.saturating_add(tip))
    } else {
        max_fee
    };
    if price < base_fee {
        return None;
    }
    let gas = u128::from(gas_limit);
    let max_cost = U256::from(gas.checked_mul(max_fee)?).checked_add(value)?;
    Some(Plan {
        to,
        value,
        nonce,
        max_cost,
        upfront: U256::from(gas.checked_mul(price)?),
        refund: U256::from(price.saturating_mul(u128::from(gas_limit - TRANSFER_GAS))),
        fee: U256::from((price - base_fee).saturating_mul(u128::from(TRANSFER_GAS))),
    })
}

impl Plan {
    /// The sender's and the recipient's accounts after the transfer, given
    /// them before; `None` when state rules out a plain transfer (code at
    /// either end, wrong nonce, funds short of the maximum cost, a balance
    /// that would overflow), which revm must then judge.
    pub(crate) fn apply(
        &self,
        sender: &AccountValue,
        to: &AccountValue,
    ) -> Option<(AccountValue, AccountValue)> {
        if to.code_hash != KECCAK_EMPTY
            || sender.code_hash != KECCAK_EMPTY
            || sender.nonce != self.nonce
            || sender.balance < self.max_cost
        {
            return None;
        }
        let to_balance = to.balance.checked_add(self.value)?;
        // The same steps as revm: deduct, transfer, refund (an overflowing
        // refund is dropped, as `incr_balance` drops it).
        let balance = sender.balance.saturating_sub(self.upfront).checked_sub(self.value)?;
        let balance = balance.checked_add(self.refund).unwrap_or(balance);
        Some((
            AccountValue { balance, nonce: sender.nonce + 1, ..*sender },
            AccountValue { balance: to_balance, exists: true, ..*to },
        ))
    }

    /// The receipt of `tx` applied as this plan (index and cumulative gas
    /// are the commit's to fill in).
    pub(crate) fn receipt(&self, tx: &RecoveredTx, base_fee: u64) -> Receipt {
        Receipt {
            tx_hash: tx.hash,
            tx_type: tx.tx.ty(),
            index: 0,
            from: tx.sender,
            to: Some(self.to),
            contract_address: None,
            success: true,
            gas_used: TRANSFER_GAS,
            cumulative_gas_used: 0,
            effective_gas_price: tx.tx.effective_gas_price(Some(base_fee)),
            logs: Vec::new(),
            output: Bytes::new(),
        }
    }
}

/// Executes `tx` (transaction `index` of the block) as a plain transfer
/// into `out` (reset for this execution), or returns `false` when it does
/// not qualify (`out` is then untouched).
pub(crate) fn try_transfer(
    shared: &Shared<'_>,
    tx: &RecoveredTx,
    index: u32,
    out: &mut TxOutcome,
) -> Result<bool, DbError> {
    let incarnation = out.incarnation;
    let Some(plan) = plan(&shared.rules, tx) else {
        return Ok(false);
    };
    // Read both accounts and, if the transfer goes ahead, write them, all
    // under their shard locks: two lock round trips for the whole transfer.
    let reader = shared.reader;
    let done = shared.mv.with_pair(plan.to, tx.sender, |to_cell, from_cell| {
        let to = view(to_cell, reader, plan.to, index)?;
        let from = view(from_cell, reader, tx.sender, index)?;
        let Some((from_value, to_value)) = plan.apply(&from.value, &to.value) else {
            return Ok(None);
        };
        let from_write = AccountWrite {
            address: tx.sender,
            mask: field::BALANCE | field::NONCE,
            value: from_value,
            code: None,
        };
        let to_write = AccountWrite {
            address: plan.to,
            mask: field::BALANCE | field::EXISTS,
            value: to_value,
            code: None,
        };
        for (cell, w) in [(&mut *from_cell, &from_write), (&mut *to_cell, &to_write)] {
            cell.versions.insert(AccountVersion {
                tx: index,
                incarnation,
                mask: w.mask,
                value: w.value,
                code: None,
            });
        }
        Ok::<_, DbError>(Some((
            to.read(plan.to, field::BALANCE | field::CODE),
            from.read(tx.sender, field::BALANCE | field::NONCE | field::CODE),
            from_write,
            to_write,
        )))
    })?;
    let Some((to_read, from_read, from_write, to_write)) = done else {
        return Ok(false);
    };
    out.fast = true;
    out.published = true;
    out.account_reads.push(to_read);
    out.account_reads.push(from_read);
    out.account_writes.push(from_write);
    out.account_writes.push(to_write);
    out.result = TxResult::Applied { receipt: plan.receipt(tx, shared.rules.base_fee), fee: plan.fee };
    Ok(true)
}
