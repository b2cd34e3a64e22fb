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

use sluice_state::Account as StoredAccount;

use crate::{
    db::normalize_code_hash,
    env::{cfg_env, ExecConfig},
};

/// An account's fields as a plain transfer reads and writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AccountValue {
    pub(crate) balance: U256,
    pub(crate) nonce: u64,
    pub(crate) code_hash: alloy_primitives::B256,
    pub(crate) exists: bool,
}

impl AccountValue {
    /// The account as stored (`None`: it does not exist).
    pub(crate) fn from_stored(account: Option<&StoredAccount>) -> Self {
        match account {
            Some(a) => AccountValue {
                balance: a.balance,
                nonce: a.nonce,
                code_hash: normalize_code_hash(a.code_hash),
                exists: true,
            },
            None => AccountValue { balance: U256::ZERO, nonce: 0, code_hash: KECCAK_EMPTY, exists: false },
        }
    }

    /// EIP-161 emptiness.
    pub(crate) fn is_empty(&self) -> bool {
        self.balance.is_zero() && self.nonce == 0 && self.code_hash == KECCAK_EMPTY
    }
}

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
