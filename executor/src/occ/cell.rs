//! The cells of the multi-version memory: one location's block-start value
//! and the versions written during the block, and how transaction `k` sees
//! an account.

use alloy_primitives::{Address, U256};
use revm::state::Bytecode;
use sluice_store::{Account as StoredAccount, StateReader};

use super::{
    footprint::{field, AccountRead, AccountValue, Version},
    small::{ByTx, Versions},
};
use crate::db::DbError;

/// One account write, by one incarnation of one transaction.
#[derive(Debug, Clone)]
pub(crate) struct AccountVersion {
    pub(crate) tx: u32,
    pub(crate) incarnation: u32,
    pub(crate) mask: u8,
    pub(crate) value: AccountValue,
    pub(crate) code: Option<Bytecode>,
}

impl ByTx for AccountVersion {
    fn tx(&self) -> u32 {
        self.tx
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotVersion {
    pub(crate) tx: u32,
    pub(crate) incarnation: u32,
    pub(crate) value: U256,
}

impl ByTx for SlotVersion {
    fn tx(&self) -> u32 {
        self.tx
    }
}

#[derive(Debug, Default)]
pub(crate) struct AccountCell {
    /// Block-start account, once loaded (`Some(None)`: did not exist).
    pub(crate) base: Option<Option<StoredAccount>>,
    /// Some transaction wrote one of its storage slots.
    pub(crate) storage_written: bool,
    pub(crate) versions: Versions<AccountVersion>,
}

#[derive(Debug, Default)]
pub(crate) struct SlotCell {
    /// Block-start value, once loaded.
    pub(crate) base: Option<U256>,
    pub(crate) versions: Versions<SlotVersion>,
}

/// An account as read by transaction `k`.
#[derive(Debug, Clone)]
pub(crate) struct AccountView {
    pub(crate) value: AccountValue,
    pub(crate) versions: [Version; 4],
    /// The code, when a transaction of this block set it.
    pub(crate) code: Option<Bytecode>,
}

impl AccountView {
    pub(crate) fn read(&self, address: Address, mask: u8) -> AccountRead {
        AccountRead { address, mask, versions: self.versions, value: self.value }
    }
}

pub(crate) fn load_base(
    cell: &mut AccountCell,
    reader: &dyn StateReader,
    address: &Address,
) -> Result<Option<StoredAccount>, DbError> {
    if let Some(base) = cell.base {
        return Ok(base);
    }
    let base = reader.account(address)?;
    cell.base = Some(base);
    Ok(base)
}

/// `cell` (of `address`) as transaction `tx` sees it.
pub(crate) fn view(
    cell: &mut AccountCell,
    reader: &dyn StateReader,
    address: Address,
    tx: u32,
) -> Result<AccountView, DbError> {
    let mut view = AccountView { value: AccountValue::default(), versions: [Version::BASE; 4], code: None };
    let mut missing = field::ALL;
    for v in cell.versions.below(tx) {
        let found = v.mask & missing;
        if found == 0 {
            continue;
        }
        let version = Version::of(v.tx, v.incarnation);
        for (bit, i) in field::EACH {
            if found & bit != 0 {
                view.versions[i] = version;
            }
        }
        if found & field::BALANCE != 0 {
            view.value.balance = v.value.balance;
        }
        if found & field::NONCE != 0 {
            view.value.nonce = v.value.nonce;
        }
        if found & field::CODE != 0 {
            view.value.code_hash = v.value.code_hash;
            view.code = v.code.clone();
        }
        if found & field::EXISTS != 0 {
            view.value.exists = v.value.exists;
        }
        missing &= !found;
        if missing == 0 {
            return Ok(view);
        }
    }
    let base = AccountValue::from_stored(load_base(cell, reader, &address)?.as_ref());
    if missing & field::BALANCE != 0 {
        view.value.balance = base.balance;
    }
    if missing & field::NONCE != 0 {
        view.value.nonce = base.nonce;
    }
    if missing & field::CODE != 0 {
        view.value.code_hash = base.code_hash;
    }
    if missing & field::EXISTS != 0 {
        view.value.exists = base.exists;
    }
    Ok(view)
}
