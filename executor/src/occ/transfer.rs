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
use revm::primitives::KECCAK_EMPTY;
use sluice_messages::{Receipt, RecoveredTx};

use super::{
    cell::{view, AccountVersion},
    engine::Shared,
    footprint::{field, AccountValue, AccountWrite, TxOutcome, TxResult},
};
use crate::db::DbError;

/// Gas of a plain transfer.
const TRANSFER_GAS: u64 = 21_000;

/// What can be decided about a transfer without reading state.
struct Plan {
    to: Address,
    value: U256,
    nonce: u64,
    /// `gas_limit * max_fee + value`: the balance revm requires.
    max_cost: U256,
    /// `gas_limit * effective_gas_price`: deducted before execution.
    upfront: U256,
    /// The unused gas returned after execution.
    refund: U256,
    /// The priority fee owed to the coinbase.
    fee: U256,
}

fn plan(shared: &Shared<'_>, tx: &RecoveredTx) -> Option<Plan> {
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
        || t.chain_id() != Some(shared.chain_id)
        || to == tx.sender
        || to == shared.coinbase
        || tx.sender == shared.coinbase
        // Precompiles live at small addresses; leave that whole range to revm.
        || to.0[..18].iter().all(|b| *b == 0)
    {
        return None;
    }
    let gas_limit = t.gas_limit();
    let nonce = t.nonce();
    if gas_limit < TRANSFER_GAS || gas_limit > shared.block_gas_limit || gas_limit > shared.tx_gas_cap {
        return None;
    }
    if nonce == u64::MAX {
        return None;
    }
    // As revm reads them from the transaction environment (see `env.rs`).
    let base_fee = u128::from(shared.base_fee);
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
    let Some(plan) = plan(shared, tx) else {
        return Ok(false);
    };
    // Read both accounts and, if the transfer goes ahead, write them, all
    // under their shard locks: two lock round trips for the whole transfer.
    let reader = shared.reader;
    let done = shared.mv.with_pair(plan.to, tx.sender, |to_cell, from_cell| {
        let to = view(to_cell, reader, plan.to, index)?;
        if to.value.code_hash != KECCAK_EMPTY {
            return Ok(None);
        }
        let Some(to_balance) = to.value.balance.checked_add(plan.value) else {
            return Ok(None);
        };
        let from = view(from_cell, reader, tx.sender, index)?;
        let sender = from.value;
        if sender.code_hash != KECCAK_EMPTY || sender.nonce != plan.nonce || sender.balance < plan.max_cost {
            return Ok(None);
        }
        // The same steps as revm: deduct, transfer, refund (an overflowing
        // refund is dropped, as `incr_balance` drops it).
        let Some(balance) = sender.balance.saturating_sub(plan.upfront).checked_sub(plan.value) else {
            return Ok(None);
        };
        let balance = balance.checked_add(plan.refund).unwrap_or(balance);
        let from_write = AccountWrite {
            address: tx.sender,
            mask: field::BALANCE | field::NONCE,
            value: AccountValue { balance, nonce: sender.nonce + 1, ..sender },
            code: None,
        };
        let to_write = AccountWrite {
            address: plan.to,
            mask: field::BALANCE | field::EXISTS,
            value: AccountValue { balance: to_balance, exists: true, ..to.value },
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
    let receipt = Receipt {
        tx_hash: tx.hash,
        tx_type: tx.tx.ty(),
        index: 0,
        from: tx.sender,
        to: Some(plan.to),
        contract_address: None,
        success: true,
        gas_used: TRANSFER_GAS,
        cumulative_gas_used: 0,
        effective_gas_price: tx.tx.effective_gas_price(Some(shared.base_fee)),
        logs: Vec::new(),
        output: Bytes::new(),
    };
    out.result = TxResult::Applied { receipt, fee: plan.fee };
    Ok(true)
}
