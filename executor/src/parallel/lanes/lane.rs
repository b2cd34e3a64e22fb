//! One lane: a worker's revm journal (its replica of the block state), the
//! transactions it ran on it with what each touched, and the primitives a
//! chunk is corrected with: undo, redo, set a key to a value.

use std::ops::Range;

use alloy_consensus::Transaction as _;
use alloy_primitives::{Address, U256};
use revm::{
    context::{result::EVMError, BlockEnv, CfgEnv, Context, ContextSetters, Journal, TxEnv},
    context_interface::result::ExecutionResult,
    handler::Handler,
    state::{Account, AccountInfo, Bytecode, EvmState, EvmStorageSlot, TransactionId},
    Database, MainBuilder, MainnetEvm,
};
use sluice_messages::{ChangeSet, PreparedBlock, PreparedTx, SkipReason};
use sluice_state::StateReader;

use super::entry::{self, Entry, Key};
use crate::{
    db::DbError,
    env::{block_env, cfg_env, spec_id, tx_env},
    journal::{change_set, sets_code, StartDb},
    parallel::fee::DeferredFee,
    skip::refusal,
    ExecConfig, ExecError,
};

/// The block-start state, noting every load in the thread's log: a load
/// from the database is a read even when revm builds no journal entry for
/// it (pre-warmed accounts: the coinbase, precompiles, access lists).
pub(crate) struct LaneDb<'a> {
    start: StartDb<'a>,
}

impl Database for LaneDb<'_> {
    type Error = DbError;

    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        entry::note_read(Key::Account(address));
        self.start.basic(address)
    }

    fn code_by_hash(&mut self, code_hash: alloy_primitives::B256) -> Result<Bytecode, DbError> {
        self.start.code_by_hash(code_hash)
    }

    fn storage(&mut self, address: Address, index: U256) -> Result<U256, DbError> {
        entry::note_read(Key::Slot(address, index));
        self.start.storage(address, index)
    }

    fn block_hash(&mut self, number: u64) -> Result<alloy_primitives::B256, DbError> {
        self.start.block_hash(number)
    }
}

type LaneEvm<'a> = MainnetEvm<Context<BlockEnv, TxEnv, CfgEnv, LaneDb<'a>, Journal<LaneDb<'a>, Entry>>>;

/// A key's value: an account's balance and nonce, or a slot's word (and
/// nonce 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Val {
    pub(crate) word: U256,
    pub(crate) nonce: u64,
}

/// How one execution of a transaction ended.
#[derive(Debug)]
pub(crate) enum Res {
    /// Applied, with the priority fee it owes the coinbase.
    Applied { result: ExecutionResult, fee: U256 },
    /// Refused by revm at its position (nonce, funds...): depends on state.
    Refused(SkipReason),
    /// Skipped whatever the state (invalid, unsupported type).
    Static(SkipReason),
}

/// One execution of a transaction on a lane: ranges into the lane's logs.
#[derive(Debug)]
pub(crate) struct Run {
    reads: Range<usize>,
    /// Keys whose value it changed: (key, before, after).
    writes: Range<usize>,
    pub(crate) res: Res,
}

/// Why a lane stops.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The block does something lanes do not model (a creation, a
    /// self-destruct, a code change, a transaction over the gas left):
    /// it runs in order instead.
    Decline,
    /// Most runs had to be executed again: the block is a dependency
    /// chain, faster in order.
    Contended,
    /// The state could not be read.
    Failed(ExecError),
}

impl From<DbError> for Stop {
    fn from(e: DbError) -> Self {
        Stop::Failed(e.into())
    }
}

/// A worker's replica of the block state and its logs.
pub(crate) struct Lane<'a> {
    evm: LaneEvm<'a>,
    coinbase: Address,
    /// Digests of the keys runs read.
    reads: Vec<u64>,
    writes: Vec<(Key, Val, Val)>,
}

impl<'a> Lane<'a> {
    /// A lane at block start.
    pub(crate) fn new(
        state: &'a dyn StateReader,
        cfg: &ExecConfig,
        block: &PreparedBlock,
    ) -> Result<Self, Stop> {
        let header = &block.block.header;
        // Not sized for the block; the thread's kept tables, as in `journal.rs`.
        let tables = crate::journal::take_tables();
        let db = LaneDb { start: StartDb::with_tables(state, tables.start) };
        let mut evm = Context::<BlockEnv, TxEnv, CfgEnv, LaneDb<'a>, Journal<LaneDb<'a>, Entry>>::new(
            db,
            spec_id(cfg.spec),
        )
        .with_block(block_env(header, cfg.spec))
        .with_cfg(cfg_env(cfg))
        .build_mainnet();
        crate::keccak::install(&mut evm.instruction);
        let journal = &mut evm.ctx.journaled_state;
        crate::journal::install(&mut journal.inner, &mut journal.database.start, tables.state, tables.hot)?;
        Ok(Lane { evm, coinbase: header.coinbase, reads: Vec::new(), writes: Vec::new() })
    }

    /// Forgets the logs of the runs of the last chunk.
    pub(crate) fn clear_logs(&mut self) {
        self.reads.clear();
        self.writes.clear();
    }

    /// How many values the runs since [`Lane::clear_logs`] changed.
    pub(crate) fn writes_len(&self) -> usize {
        self.writes.len()
    }

    /// Executes `prepared` as the next transaction on the lane's state.
    pub(crate) fn execute(&mut self, prepared: &PreparedTx) -> Result<Run, Stop> {
        let (r, w) = (self.reads.len(), self.writes.len());
        let run = |res| Run { reads: r..r, writes: w..w, res };
        let tx = match prepared {
            PreparedTx::Invalid { reason, .. } => {
                return Ok(run(Res::Static(SkipReason::Other(reason.clone()))))
            }
            PreparedTx::Ready(tx) => tx,
        };
        if sets_code(prepared) {
            return Err(Stop::Decline);
        }
        let env = match tx_env(tx) {
            Ok(env) => env,
            Err(reason) => return Ok(run(Res::Static(SkipReason::Other(reason.to_owned())))),
        };
        // Access-listed slots are warm: revm builds no entry when one is
        // first used, so they count as read.
        if let Some(list) = tx.tx.access_list() {
            for item in list.iter() {
                self.reads.push(Key::Account(item.address).digest());
                self.reads
                    .extend(item.storage_keys.iter().map(|k| Key::Slot(item.address, (*k).into()).digest()));
            }
        }
        entry::clear();
        self.evm.ctx.set_tx(env);
        let mut handler = DeferredFee::<LaneEvm<'a>>::new();
        let res = match handler.run(&mut self.evm) {
            Ok(result) => Res::Applied { result, fee: handler.fee() },
            Err(EVMError::Database(e)) => return Err(e.into()),
            Err(e) => Res::Refused(refusal(e)),
        };
        let applied = matches!(res, Res::Applied { .. });
        let state = &mut self.evm.ctx.journaled_state.inner.state;
        let (reads, writes) = (&mut self.reads, &mut self.writes);
        let unsupported = entry::with_touches(|log| {
            reads.append(&mut log.reads);
            // A refused transaction was discarded: it wrote nothing.
            if applied {
                // A handful of keys, often repeated (a balance changed
                // twice): the first occurrence of each, without sorting.
                for (i, key) in log.writes.iter().enumerate() {
                    if log.writes[..i].contains(key) {
                        continue;
                    }
                    if let Some((before, after)) = changed(state, key) {
                        writes.push((*key, before, after));
                    }
                }
            }
            log.unsupported
        });
        if unsupported {
            return Err(Stop::Decline);
        }
        Ok(Run { reads: r..self.reads.len(), writes: w..self.writes.len(), res })
    }

    /// Whether `run` read a key whose digest is `dirty`.
    pub(crate) fn read_any(&self, run: &Run, dirty: impl Fn(u64) -> bool) -> bool {
        self.reads[run.reads.clone()].iter().any(|d| dirty(*d))
    }

    /// The keys `run` changed, with their values after it.
    pub(crate) fn written(&self, run: &Run) -> impl Iterator<Item = (Key, Val)> + '_ {
        self.writes[run.writes.clone()].iter().map(|(k, _, after)| (*k, *after))
    }

    /// Takes `run`'s writes back (the state is as just after it).
    pub(crate) fn undo(&mut self, run: &Run) -> Result<(), Stop> {
        for i in run.writes.clone().rev() {
            let (key, before, _) = self.writes[i];
            self.set(key, before)?;
        }
        Ok(())
    }

    /// Writes `run`'s writes again (the state is as just before it, and
    /// everything it read has the value it read).
    pub(crate) fn redo(&mut self, run: &Run) -> Result<(), Stop> {
        for i in run.writes.clone() {
            let (key, _, after) = self.writes[i];
            self.set(key, after)?;
        }
        Ok(())
    }

    /// Credits a transaction's priority fee to the coinbase (touching it
    /// even when zero, as revm does).
    pub(crate) fn credit(&mut self, fee: U256) -> Result<(), Stop> {
        let coinbase = self.coinbase;
        let account = self.account(coinbase)?;
        account.info.balance = account.info.balance.saturating_add(fee);
        account.mark_touch();
        Ok(())
    }

    /// The coinbase.
    pub(crate) fn coinbase(&self) -> Address {
        self.coinbase
    }

    /// `key`'s value now (zero if never loaded).
    pub(crate) fn value(&self, key: Key) -> Val {
        let state = &self.evm.ctx.journaled_state.inner.state;
        match key {
            Key::Account(a) => state.get(&a).map_or(Val { word: U256::ZERO, nonce: 0 }, |acc| Val {
                word: acc.info.balance,
                nonce: acc.info.nonce,
            }),
            Key::Slot(a, k) => Val {
                word: state
                    .get(&a)
                    .and_then(|acc| acc.storage.get(&k))
                    .map_or(U256::ZERO, |s| s.present_value),
                nonce: 0,
            },
        }
    }

    /// Sets `key` to `val` between transactions, as if a transaction had
    /// written it (the account is touched).
    pub(crate) fn set(&mut self, key: Key, val: Val) -> Result<(), Stop> {
        self.set_all(&[(key, val)])
    }

    /// Sets each key to its value, in order; consecutive slots of one
    /// account look the account up once.
    pub(crate) fn set_all(&mut self, writes: &[(Key, Val)]) -> Result<(), Stop> {
        let journal = &mut self.evm.ctx.journaled_state;
        let tx_id = journal.inner.transaction_id;
        let (state, start) = (&mut journal.inner.state, &mut journal.database.start);
        let mut i = 0;
        while let Some((key, val)) = writes.get(i) {
            match *key {
                Key::Account(a) => {
                    let account = load(state, start, tx_id, a)?;
                    account.info.balance = val.word;
                    account.info.nonce = val.nonce;
                    account.mark_touch();
                    i += 1;
                }
                Key::Slot(a, _) => {
                    // A storage write touches its account (the change set
                    // only looks at touched accounts).
                    let account = load(state, start, tx_id, a)?;
                    account.mark_touch();
                    while let Some((Key::Slot(b, k), val)) = writes.get(i) {
                        if *b != a {
                            break;
                        }
                        let slot = match account.storage.entry(*k) {
                            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                            // Not read from the block-start state: the
                            // value is overwritten below, and the change
                            // set asks the state for a start value it was
                            // not served.
                            std::collections::hash_map::Entry::Vacant(e) => {
                                e.insert(EvmStorageSlot::new(val.word, tx_id))
                            }
                        };
                        // As a committed value: the next transaction's
                        // EIP-2200 original, and cold on its first use
                        // (warmth is per transaction).
                        slot.present_value = val.word;
                        slot.original_value = val.word;
                        slot.mark_cold();
                        i += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// The account, loaded from the block-start state if the journal does
    /// not have it yet; cold for the next transaction.
    fn account(&mut self, address: Address) -> Result<&mut Account, Stop> {
        let journal = &mut self.evm.ctx.journaled_state;
        let tx_id = journal.inner.transaction_id;
        load(&mut journal.inner.state, &mut journal.database.start, tx_id, address)
    }

    /// Whether an account this lane saw touched existed empty at block
    /// start: EIP-161 deletes it mid-block, which a journal does not.
    ///
    /// The journal's touched flags are the record: revm never clears them
    /// between transactions (a transaction refused, or a frame reverted,
    /// takes back only the touches it made itself), and correcting a chunk
    /// touches every account it sets. So every account a run on this lane
    /// touched, even one whose run was later undone, is flagged; and over
    /// all lanes, that is every account the block touches, which is what
    /// EIP-161's deletions need.
    pub(crate) fn touched_empty(&self) -> bool {
        let journal = &self.evm.ctx.journaled_state;
        let start = &journal.database.start;
        journal.inner.state.iter().any(|(a, account)| account.is_touched() && start.served_empty(a))
    }

    /// The block's change set, from this lane's state: call once every
    /// chunk is applied here. `None` where the one-journal executor would
    /// decline the block.
    pub(crate) fn change_set(&self) -> Result<Option<ChangeSet>, ExecError> {
        let journal = &self.evm.ctx.journaled_state;
        Ok(change_set(&journal.database.start, &journal.inner.state)?)
    }
}

impl Drop for Lane<'_> {
    /// Hands the lane's tables to this thread's next journal, however the
    /// lane ends. A block lanes give up on (found contended, or doing what
    /// they do not model) runs in order next, on this same thread: on
    /// fresh tables, grown by doubling as it loads, that run of a counter
    /// block took ~1 ms (~18%) longer than on kept ones.
    fn drop(&mut self) {
        let journal = &mut self.evm.ctx.journaled_state;
        crate::journal::keep_tables(
            std::mem::take(&mut journal.inner.state),
            journal.database.start.take_tables(),
        );
    }
}

/// The account in the journal's `state`, loaded from the block-start state
/// if it is not there yet; cold for the next transaction.
fn load<'s>(
    state: &'s mut EvmState,
    start: &mut StartDb<'_>,
    tx_id: TransactionId,
    address: Address,
) -> Result<&'s mut Account, Stop> {
    let account = match state.entry(address) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let account = match start.basic(address)? {
                Some(info) => {
                    let mut account = Account::from(info);
                    account.transaction_id = tx_id;
                    account
                }
                None => Account::new_not_existing(tx_id),
            };
            e.insert(account)
        }
    };
    account.mark_cold();
    Ok(account)
}

/// A written key's value before and after the transaction, if it changed.
/// (`original_info_mut`, not `original_info`: the latter clones the
/// account's code, a reference count touched on every call.)
fn changed(state: &mut EvmState, key: &Key) -> Option<(Val, Val)> {
    match key {
        Key::Account(a) => {
            let account = state.get_mut(a)?;
            let after = Val { word: account.info.balance, nonce: account.info.nonce };
            // `None` stands for the default info: making it explicit
            // changes no behaviour of the account.
            let before = account.original_info_mut();
            let before = Val { word: before.balance, nonce: before.nonce };
            (before != after).then_some((before, after))
        }
        Key::Slot(a, k) => {
            let slot = state.get(a)?.storage.get(k)?;
            (slot.original_value != slot.present_value).then_some((
                Val { word: slot.original_value, nonce: 0 },
                Val { word: slot.present_value, nonce: 0 },
            ))
        }
    }
}

/// The transaction's gas limit, if it is one revm would run.
pub(crate) fn gas_limit(prepared: &PreparedTx) -> Option<u64> {
    match prepared {
        PreparedTx::Ready(tx) => Some(tx.tx.gas_limit()),
        PreparedTx::Invalid { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use alloy_primitives::B256;
    use sluice_messages::{BlockHeader, SealedBlock};

    use super::*;
    use crate::testing::MemState;

    #[test]
    fn a_lane_given_up_leaves_its_tables_to_the_thread() {
        // A lane that ends early (its block found contended) is dropped,
        // not kept by hand: its tables must still go to the in-order run
        // that follows on this thread.
        let header = BlockHeader {
            number: 1,
            parent_hash: B256::ZERO,
            timestamp: 1,
            coinbase: Address::repeat_byte(0xc0),
            gas_limit: 30_000_000,
            base_fee: 1,
            tx_root: B256::ZERO,
            state_ref: None,
        };
        let block = PreparedBlock {
            block: Arc::new(SealedBlock { header, hash: B256::ZERO, txs: Vec::new() }),
            txs: Vec::new(),
        };
        let mut state = MemState::new();
        let addresses: Vec<Address> =
            (0..100u64).map(|i| Address::left_padding_from(&i.to_be_bytes())).collect();
        for a in &addresses {
            state.set_account(*a, U256::from(1), 0);
        }
        drop(crate::journal::take_tables());
        let mut lane = Lane::new(&state, &ExecConfig::new(1), &block).expect("a lane");
        for a in &addresses {
            lane.account(*a).expect("loads");
        }
        drop(lane);
        let kept = crate::journal::take_tables();
        assert!(kept.state.is_empty() && kept.state.capacity() >= addresses.len());
    }
}
