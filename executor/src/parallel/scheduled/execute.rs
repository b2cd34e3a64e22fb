//! Running a scheduled block's groups: each worker claims chunks of the
//! block and runs the groups that start in them, whole and in block order,
//! over its own list of the accounts they touch.

use alloy_primitives::{
    map::{AddressMap, Entry},
    Address, U256,
};
use revm::primitives::KECCAK_EMPTY;
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_state::StateReader;

use super::{plan::Schedule, Failed};
use crate::{db::DbError, parallel::transfer::AccountValue};

/// An account a worker touched, as it is now. Only balance and nonce: an
/// account with code never qualifies, and every touched account ends the
/// block changed and existing (a sender's nonce went up, a recipient's
/// balance grew by a non-zero value), so nothing else is needed for its
/// change. Small entries keep a worker's list in its core's cache.
#[derive(Debug, Clone, Copy)]
pub(super) struct Touched {
    pub(super) balance: U256,
    pub(super) nonce: u64,
}

impl Touched {
    /// What is kept of `value` (see above for why that is enough).
    fn of(value: &AccountValue) -> Self {
        Touched { balance: value.balance, nonce: value.nonce }
    }

    /// As [`Plan::apply`](super::transfer::Plan::apply) takes it (without
    /// code, by construction).
    fn value(self) -> AccountValue {
        AccountValue { balance: self.balance, nonce: self.nonce, code_hash: KECCAK_EMPTY, exists: true }
    }
}

/// The accounts one worker touched: a list, so that a transfer finds both
/// of its accounts with one lookup each and the output can refer to an
/// entry by position, and an index into it.
#[derive(Debug, Default)]
pub(super) struct Accounts {
    index: AddressMap<u32>,
    pub(super) list: Vec<(Address, Touched)>,
}

impl Accounts {
    /// Room for `more` accounts in the list (the index is only used by
    /// groups of more than one transaction, and grows as they need).
    pub(super) fn reserve(&mut self, more: usize) {
        self.list.reserve(more);
    }

    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.list.clear();
    }

    /// Where `address` is in the list, read from the state on first touch;
    /// `None` if it has code.
    fn find(&mut self, reader: &dyn StateReader, address: Address) -> Result<Option<usize>, DbError> {
        Ok(match self.index.entry(address) {
            Entry::Occupied(e) => Some(*e.get() as usize),
            Entry::Vacant(e) => {
                let base = AccountValue::from_stored(reader.account(&address)?.as_ref());
                let Ok(at) = u32::try_from(self.list.len()) else {
                    return Ok(None);
                };
                if base.code_hash != KECCAK_EMPTY {
                    return Ok(None);
                }
                e.insert(at);
                self.list.push((address, Touched::of(&base)));
                Some(at as usize)
            }
        })
    }
}

/// Runs the groups this worker claims, recording the accounts they touched
/// in `accounts` (empty); `false` when one of them turned out not to be a
/// plain transfer (or another worker found one).
pub(super) fn execute(
    reader: &dyn StateReader,
    block: &PreparedBlock,
    schedule: &Schedule<'_>,
    abandon: &Failed,
    accounts: &mut Accounts,
) -> Result<bool, DbError> {
    while let Some(chunk) = schedule.claim() {
        if abandon.any() {
            return Ok(false);
        }
        for first in chunk {
            if schedule.alone(first) {
                if !run_alone(reader, block, schedule, first, &mut accounts.list)? {
                    return Ok(false);
                }
                continue;
            }
            for i in schedule.group(first) {
                let PreparedTx::Ready(tx) = &block.txs[i] else {
                    return Ok(false);
                };
                let plan = schedule.plan(i);
                let (Some(from), Some(to)) =
                    (accounts.find(reader, tx.sender)?, accounts.find(reader, plan.to)?)
                else {
                    return Ok(false);
                };
                let list = &mut accounts.list;
                let Some((from_after, to_after)) = plan.apply(&list[from].1.value(), &list[to].1.value())
                else {
                    return Ok(false);
                };
                list[from].1 = Touched::of(&from_after);
                list[to].1 = Touched::of(&to_after);
            }
        }
    }
    Ok(true)
}

/// Runs transaction `i`, a group of its own: its two accounts are touched
/// by no other transaction, so they go to the list without the index;
/// `false` when it turned out not to be a plain transfer.
fn run_alone(
    reader: &dyn StateReader,
    block: &PreparedBlock,
    schedule: &Schedule<'_>,
    i: usize,
    list: &mut Vec<(Address, Touched)>,
) -> Result<bool, DbError> {
    let PreparedTx::Ready(tx) = &block.txs[i] else {
        return Ok(false);
    };
    let plan = schedule.plan(i);
    let from = AccountValue::from_stored(reader.account(&tx.sender)?.as_ref());
    let to = AccountValue::from_stored(reader.account(&plan.to)?.as_ref());
    // `apply` refuses accounts with code.
    let Some((from, to)) = plan.apply(&from, &to) else {
        return Ok(false);
    };
    list.push((tx.sender, Touched::of(&from)));
    list.push((plan.to, Touched::of(&to)));
    Ok(true)
}
