//! The database a worker's EVM executes against: multi-version memory as
//! seen by one transaction, recording every read for validation.

use alloy_primitives::{Address, B256, U256};
use revm::{
    state::{AccountInfo, Bytecode},
    Database,
};

use super::{
    commit::CoinbaseState,
    engine::Shared,
    footprint::{field, AccountRead, AccountValue, SlotRead},
    mv::lock,
    small::InlineVec,
};
use crate::db::{CodeCache, DbError, StateDb};

/// revm's [`Database`] for one worker, executing one transaction at a time.
#[derive(Debug)]
pub(crate) struct WorkerDb<'s> {
    shared: &'s Shared<'s>,
    /// The transaction being executed: it sees writes of those before it.
    tx: u32,
    pub(crate) account_reads: InlineVec<AccountRead, 2>,
    pub(crate) slot_reads: Vec<SlotRead>,
    pub(crate) coinbase_read: Option<Box<AccountValue>>,
    /// The coinbase as of the committed prefix, when executing at the commit
    /// point; otherwise reads get the shared, possibly stale, copy.
    pub(crate) exact_coinbase: Option<CoinbaseState>,
    /// Analysed code by hash (code is immutable, so this never goes stale).
    codes: CodeCache,
}

impl<'s> WorkerDb<'s> {
    pub(crate) fn new(shared: &'s Shared<'s>) -> Self {
        WorkerDb {
            shared,
            tx: 0,
            account_reads: InlineVec::default(),
            slot_reads: Vec::new(),
            coinbase_read: None,
            exact_coinbase: None,
            codes: CodeCache::default(),
        }
    }

    /// Starts recording for transaction `tx` (the previous records must have
    /// been taken).
    pub(crate) fn begin(&mut self, tx: u32) {
        self.tx = tx;
        self.account_reads = InlineVec::default();
        self.slot_reads.clear();
        self.coinbase_read = None;
    }
}

impl Database for WorkerDb<'_> {
    type Error = DbError;

    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        let shared = self.shared;
        if address == shared.rules.coinbase {
            // Not versioned: the committed state (with every fee committed so
            // far), which the commit checks again against the exact prefix.
            let (value, code) = match &self.exact_coinbase {
                Some(c) => (c.value, c.code.clone()),
                None => {
                    let c = lock(&shared.coinbase_hint);
                    (c.value, c.code.clone())
                }
            };
            self.coinbase_read = Some(Box::new(value));
            return Ok(value.info(code));
        }
        let view = shared.mv.read_account(shared.reader, address, self.tx)?;
        self.account_reads.push(view.read(address, field::ALL));
        Ok(view.value.info(view.code))
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.codes.get(StateDb::new(self.shared.reader), code_hash)
    }

    fn storage(&mut self, address: Address, index: U256) -> Result<U256, DbError> {
        let shared = self.shared;
        let read = shared.mv.read_slot(shared.reader, address, index, self.tx)?;
        self.slot_reads.push(read);
        Ok(read.value)
    }

    fn block_hash(&mut self, number: u64) -> Result<B256, DbError> {
        Ok(self.shared.reader.block_hash(number)?)
    }
}
