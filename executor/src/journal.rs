//! In-order execution with one revm journal for the whole block: the fast
//! way to run a block that cannot run in parallel (a dependency chain, a
//! small block).
//!
//! [`crate::sequential`] finalizes every transaction into a fresh state map
//! and folds it into an overlay, as revm's `transact_commit` does. revm 43's
//! journal can instead carry state from one transaction to the next
//! (`transact_one`: warmth and EIP-2200 original values are reset per
//! transaction by its transaction id, a rejected transaction is discarded),
//! so an account or slot used by many transactions is loaded once per
//! block, and nothing is allocated per transaction for state. The change set
//! is read off the journal once, at the end.
//!
//! The journal does not delete an account between transactions, so the two
//! differ where deletion is observable later in the same block: a contract
//! created or self-destructed (a re-created address starts with empty
//! storage), an account that existed at block start while empty (EIP-161
//! would delete it, with any storage, when touched), and an EIP-7702
//! authority that was touched while empty (the refund depends on whether it
//! "existed"). Blocks with any of those are not run here ([`None`]); the
//! caller runs them on the sequential executor. Everything else is equal to
//! [`crate::sequential::execute_block`], and `tests/journal.rs` checks it on
//! the randomized blocks.

use std::cell::Cell;

use alloy_consensus::TxEnvelope;
use alloy_primitives::{
    map::{AddressMap, HashMap},
    Address, B256, U256,
};
use revm::{
    context::{journal::JournalInner, Context},
    context_interface::result::EVMError,
    primitives::KECCAK_EMPTY,
    state::{Account, AccountInfo, Bytecode, EvmState, EvmStorage},
    Database, DatabaseRef, ExecuteEvm, MainBuilder, MainContext,
};
use sluice_messages::{AccountChange, ChangeSet, PreparedBlock, PreparedTx};
use sluice_state::{Account as StoredAccount, StateReader};

use crate::{
    db::{account_info, deleted, normalize_code_hash, updated, CodeCache, DbError, StateDb},
    env::{block_env, cfg_env},
    sequential::Tally,
    BlockOutcome, ExecConfig, ExecError,
};

/// Block-start state as revm's database, remembering what it served: the
/// journal asks once per account and slot per block, so these are the
/// block-start values the change set is measured against.
pub(crate) struct StartDb<'a> {
    db: StateDb<'a>,
    accounts: AddressMap<Option<StoredAccount>>,
    slots: HashMap<(Address, U256), U256>,
    codes: CodeCache,
}

impl<'a> StartDb<'a> {
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
        self.accounts.insert(address, account);
        Ok(account.as_ref().map(account_info))
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.codes.get(self.db, code_hash)
    }

    fn storage(&mut self, address: Address, index: U256) -> Result<U256, DbError> {
        // An account absent at block start has no storage (the reader is
        // not asked, as in the sequential overlay).
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

/// Executes `block` on top of `state` in order on one journal, or `None`
/// when the block does something this cannot reproduce exactly (see the
/// module documentation): run it on [`crate::sequential::execute_block`].
pub fn execute_block_one_journal(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
) -> Result<Option<BlockOutcome>, ExecError> {
    let header = &block.block.header;
    // The tables are not sized for the block (two accounts per transaction
    // at most): memory reserved and never used still costs a page fault per
    // page touched, and measured, growing them as needed is faster (ERC-20
    // transfers among 1,000 holders: ~5-20%; a counter every transaction
    // increments, 5,000 senders: ~10%). They are the thread's from its last
    // block, already grown to what that block needed (~1-2% measured).
    let tables = take_tables();
    let db = StartDb::with_tables(state, tables.start);
    let mut evm = Context::mainnet()
        .with_db(db)
        .with_block(block_env(header, cfg.spec))
        .with_cfg(cfg_env(cfg))
        .build_mainnet();
    let journal = &mut evm.ctx.journaled_state;
    install(&mut journal.inner, &mut journal.database, tables.state, tables.hot)?;
    crate::keccak::install(&mut evm.instruction);
    let mut tally = Tally::new(block.txs.len());
    for (i, prepared) in block.txs.iter().enumerate() {
        crate::prefetch::ahead(&block.txs, i);
        // Checked here rather than in a pass over the block first: that
        // pass read every transaction from memory, ~50 us for 5,000. The
        // thread keeps its tables all the same.
        if sets_code(prepared) {
            keep_tables(evm.finalize(), evm.ctx.journaled_state.database.take_tables());
            return Ok(None);
        }
        let Some((tx, env)) = tally.applicable(prepared, header.gas_limit) else {
            continue;
        };
        match evm.transact_one(env) {
            Ok(result) => tally.applied(tx, header.base_fee, result),
            Err(EVMError::Database(e)) => return Err(e.into()),
            // Refused before execution: revm discarded the transaction's
            // journal entries, as in the sequential executor.
            Err(e) => tally.skipped.push((tx.hash, e.to_string())),
        }
    }
    let state = evm.finalize();
    let changes = change_set(&evm.ctx.journaled_state.database, &state)?;
    keep_tables(state, evm.ctx.journaled_state.database.take_tables());
    let Some(changes) = changes else {
        return Ok(None);
    };
    Ok(Some(tally.outcome(changes)))
}

/// Whether the transaction is an EIP-7702 one: a journal kept across
/// transactions cannot reproduce its refunds (see the module docs).
pub(crate) fn sets_code(tx: &PreparedTx) -> bool {
    matches!(tx, PreparedTx::Ready(t) if matches!(t.tx, TxEnvelope::Eip7702(_)))
}

/// The block's change set (as [`crate::sequential`] defines it) from the
/// journal's end state, or `None` if an account was created or destroyed,
/// or one that existed empty at block start was touched.
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
