//! What a journal kept across a block's transactions stands on: the
//! block-start state as revm's database ([`StartDb`], remembering what it
//! served), each thread's tables kept from block to block, and the change
//! set read off the journal at the block's end. Shared by the one journal
//! (`journal/mod.rs`) and lanes (`parallel/lanes/`).

use std::cell::Cell;

use alloy_consensus::TxEnvelope;
use alloy_primitives::{
    map::{AddressMap, HashMap},
    Address, B256, U256,
};
use revm::{
    context::journal::JournalInner,
    primitives::KECCAK_EMPTY,
    state::{Account, AccountInfo, Bytecode, EvmState, EvmStorage},
    Database, DatabaseRef,
};
use sluice_messages::{AccountChange, ChangeSet, PreparedTx};
use sluice_state::{Account as StoredAccount, StateReader};

use crate::db::{account_info, deleted, normalize_code_hash, updated, CodeCache, DbError, StateDb};

/// Block-start state as revm's database, remembering what it served: the
/// journal asks once per account and slot per block, so these are the
/// block-start values the change set is measured against.
pub(crate) struct StartDb<'a> {
    db: StateDb<'a>,
    accounts: AddressMap<Option<StoredAccount>>,
    slots: HashMap<(Address, U256), U256>,
    codes: CodeCache,
    /// Served an account that existed empty since [`StartDb::took_empty`]
    /// last asked.
    served_empty: bool,
}

impl<'a> StartDb<'a> {
    /// Whether an account that existed empty was served since the last
    /// time this was asked (see `journal/mod.rs` for why it matters).
    pub(crate) fn took_empty(&mut self) -> bool {
        std::mem::take(&mut self.served_empty)
    }

    /// Whether `address` was served, and existed empty at block start.
    pub(crate) fn served_empty(&self, address: &Address) -> bool {
        self.accounts.get(address).is_some_and(|a| a.is_some_and(|a| is_empty(&a)))
    }

    /// Serving `state`, remembering what it serves in `tables` (empty, as
    /// [`take_tables`] gives them: kept from an earlier block, they keep
    /// their capacity).
    pub(crate) fn with_tables(state: &'a dyn StateReader, tables: StartTables) -> Self {
        StartDb {
            db: StateDb::new(state),
            accounts: tables.accounts,
            slots: tables.slots,
            codes: CodeCache::default(),
            served_empty: false,
        }
    }

    /// Its tables, for a later block, leaving it empty ones.
    pub(crate) fn take_tables(&mut self) -> StartTables {
        StartTables { accounts: std::mem::take(&mut self.accounts), slots: std::mem::take(&mut self.slots) }
    }
}

/// A journal's tables, kept by each thread from block to block: grown once
/// rather than on every block (a table that doubles copies what it holds,
/// into memory often fresh from the kernel: a page fault per page).
#[derive(Default)]
pub(crate) struct Tables {
    /// The journal's accounts.
    pub(crate) state: EvmState,
    /// The block-start values served.
    pub(crate) start: StartTables,
    /// The storage tables of the accounts with the most slots last block
    /// (a popular token's holders), emptied: see [`install`].
    pub(crate) hot: Vec<(Address, EvmStorage)>,
}

/// Storage tables kept from block to block, and the fewest slots one must
/// have held to be kept.
const HOT_ACCOUNTS: usize = 4;
const HOT_SLOTS: usize = 64;

thread_local! {
    static KEPT: Cell<Tables> = Cell::new(Tables::default());
}

/// This thread's kept tables (empty), or new ones.
pub(crate) fn take_tables() -> Tables {
    KEPT.with(Cell::take)
}

/// Keeps a journal's accounts (`state`) and the block-start values it was
/// served (`start`), emptied here, for this thread's next journal.
pub(crate) fn keep_tables(mut state: EvmState, mut start: StartTables) {
    let mut hot: Vec<(Address, EvmStorage)> = state
        .iter_mut()
        .filter(|(_, account)| account.storage.len() >= HOT_SLOTS)
        .map(|(address, account)| (*address, std::mem::take(&mut account.storage)))
        .collect();
    hot.sort_unstable_by_key(|(_, storage)| std::cmp::Reverse(storage.len()));
    hot.truncate(HOT_ACCOUNTS);
    for (_, storage) in &mut hot {
        storage.clear();
    }
    state.clear();
    start.clear();
    KEPT.with(|kept| kept.set(Tables { state, start, hot }));
}

/// Gives a journal (`inner`, served by `db`) a thread's kept accounts
/// table (`state`, empty), then loads the accounts whose storage tables
/// were kept (`hot`) before the block's first transaction, each with its
/// kept table and cold, as revm would load it on first use.
///
/// A table revm grows for an account loaded fresh doubles from empty: for
/// a token with 1,000 holders in the block, ~450 KiB allocated in steps
/// and each step copied, much of it in memory fresh from the kernel (a
/// page fault per page). An account loaded early that the block never
/// uses is not touched, so it changes nothing.
pub(crate) fn install<E>(
    inner: &mut JournalInner<E>,
    db: &mut StartDb<'_>,
    state: EvmState,
    hot: Vec<(Address, EvmStorage)>,
) -> Result<(), DbError> {
    inner.state = state;
    let tx_id = inner.transaction_id;
    for (address, storage) in hot {
        let Some(info) = db.basic(address)? else { continue };
        let mut account = Account::from(info);
        account.transaction_id = tx_id;
        account.storage = storage;
        account.mark_cold();
        inner.state.insert(address, account);
    }
    Ok(())
}

/// What a [`StartDb`] remembers, apart from the reader.
#[derive(Debug, Default)]
pub(crate) struct StartTables {
    accounts: AddressMap<Option<StoredAccount>>,
    slots: HashMap<(Address, U256), U256>,
}

impl StartTables {
    /// Empties them, keeping their capacity.
    pub(crate) fn clear(&mut self) {
        self.accounts.clear();
        self.slots.clear();
    }
}

impl Database for StartDb<'_> {
    type Error = DbError;

    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        let account = self.db.reader().account(&address)?;
        self.served_empty |= account.is_some_and(|a| is_empty(&a));
        self.accounts.insert(address, account);
        Ok(account.as_ref().map(account_info))
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.codes.get(self.db, code_hash)
    }

    fn storage(&mut self, address: Address, index: U256) -> Result<U256, DbError> {
        // An account absent at block start has no storage (the reader is
        // not asked, as in the sequential executor's block state).
        let value = match self.accounts.get(&address) {
            Some(None) => U256::ZERO,
            _ => self.db.storage_ref(address, index)?,
        };
        self.slots.insert((address, index), value);
        Ok(value)
    }

    fn block_hash(&mut self, number: u64) -> Result<B256, DbError> {
        self.db.block_hash_ref(number)
    }
}

/// Whether the transaction is an EIP-7702 one: a journal kept across
/// transactions cannot reproduce its refunds (see `journal/mod.rs`).
pub(crate) fn sets_code(tx: &PreparedTx) -> bool {
    matches!(tx, PreparedTx::Ready(t) if matches!(t.tx, TxEnvelope::Eip7702(_)))
}

/// The block's change set (as [`crate::sequential`] defines it) from the
/// journal's end state, or `None` if an account was created or destroyed,
/// or one that existed empty at block start was touched: then deletions
/// were observable within the block, and the journal must have settled.
pub(crate) fn change_set(
    db: &StartDb<'_>,
    state: &revm::state::EvmState,
) -> Result<Option<ChangeSet>, DbError> {
    let mut touched: Vec<(Address, &Account)> = Vec::with_capacity(state.len());
    for (address, account) in state {
        if account.is_created() || account.is_selfdestructed() {
            return Ok(None);
        }
        if account.is_touched() {
            touched.push((*address, account));
        }
    }
    // Small (address, reference) pairs sort faster than accounts.
    touched.sort_unstable_by_key(|(address, _)| *address);
    // The block-start values, looked up in a loop of their own: the tables
    // are cold by the block's end, and lookups that do not wait for each
    // other overlap their cache misses.
    let starts: Vec<Option<Option<StoredAccount>>> =
        touched.iter().map(|(address, _)| db.accounts.get(address).copied()).collect();
    let mut accounts = Vec::with_capacity(touched.len());
    for ((address, account), start) in touched.into_iter().zip(starts) {
        let start = match start {
            Some(start) => start,
            None => db.db.reader().account(&address)?,
        };
        if start.is_some_and(|a| is_empty(&a)) {
            return Ok(None);
        }
        if let Some(change) = account_change(db, address, start, account)? {
            accounts.push(change);
        }
    }
    Ok(Some(ChangeSet { accounts }))
}

/// EIP-161's empty: no balance, nonce or code.
fn is_empty(a: &StoredAccount) -> bool {
    a.balance.is_zero() && a.nonce == 0 && normalize_code_hash(a.code_hash) == KECCAK_EMPTY
}

/// One touched account's change, if any. Without creations, destructions
/// or accounts empty at block start, an account is deleted only if it ends
/// empty (EIP-161), and its storage is never wiped.
fn account_change(
    db: &StartDb<'_>,
    address: Address,
    start: Option<StoredAccount>,
    account: &Account,
) -> Result<Option<AccountChange>, DbError> {
    let info = &account.info;
    if info.is_empty() {
        return Ok(start.is_some().then(|| deleted(address)));
    }
    let start_code_hash = start.map_or(KECCAK_EMPTY, |a| normalize_code_hash(a.code_hash));
    let info_changed = start.is_none_or(|a| {
        a.balance != info.balance || a.nonce != info.nonce || start_code_hash != info.code_hash
    });
    let mut storage: Vec<(U256, U256)> = Vec::new();
    // As for accounts in `change_set`: the lookups first, in a loop of
    // their own.
    let served: Vec<Option<U256>> =
        account.storage.keys().map(|key| db.slots.get(&(address, *key)).copied()).collect();
    for ((key, slot), served) in account.storage.iter().zip(served) {
        let key = *key;
        let was = match served {
            Some(v) => v,
            None if start.is_some() => db.db.storage_ref(address, key)?,
            None => U256::ZERO,
        };
        if slot.present_value != was {
            storage.push((key, slot.present_value));
        }
    }
    if !info_changed && storage.is_empty() {
        return Ok(None);
    }
    storage.sort_unstable_by_key(|(k, _)| *k);
    let code_bytes = || match &info.code {
        Some(code) => Ok(code.original_bytes()),
        None => Ok(db.db.reader().code(&info.code_hash)?),
    };
    updated(address, info, start_code_hash, storage, false, code_bytes).map(Some)
}
