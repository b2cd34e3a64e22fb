//! The committed chain: blocks, receipts, transaction index and state,
//! behind one lock so readers always see a whole block.

use std::{collections::HashMap, sync::Arc};

use alloy_primitives::{Address, Bytes, B256, U256};
use parking_lot::RwLock;
use sluice_messages::{
    AccountChange, BlockHeader, ChangeSet, CodeChange, ExecutedBlock, Log, Receipt, SealedBlock,
};

use crate::{apphash::app_hash, state::MemState, Account, Genesis, StateReader, StoreError};

/// A committed block with its results.
#[derive(Debug)]
pub struct StoredBlock {
    /// The sealed block.
    pub block: Arc<SealedBlock>,
    /// Receipts of applied transactions, in order.
    pub receipts: Vec<Receipt>,
    /// For each receipt, the index of its transaction in `block.txs`.
    pub raw_index: Vec<u32>,
    /// Gas used by the block.
    pub gas_used: u64,
    /// App hash after the block (`stateRoot` over RPC).
    pub app_hash: B256,
}

impl StoredBlock {
    /// Raw bytes of the applied transaction at receipt index `i`.
    pub fn raw_tx(&self, i: usize) -> Option<&Bytes> {
        self.raw_index.get(i).and_then(|&r| self.block.txs.get(r as usize))
    }
}

/// Where a committed transaction lives.
#[derive(Debug, Clone, Copy)]
struct TxLocation {
    block: u64,
    index: u32,
}

struct Inner {
    state: MemState,
    blocks: Vec<Arc<StoredBlock>>,
    by_hash: HashMap<B256, u64>,
    txs: HashMap<B256, TxLocation>,
    halted: Option<String>,
}

/// The committed chain and state. Only [`Store::commit`] writes.
pub struct Store {
    inner: RwLock<Inner>,
    genesis_fingerprint: B256,
}

/// A log with the position it was emitted at, for `eth_getLogs`.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// The log.
    pub log: Log,
    /// Block height.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Transaction hash.
    pub tx_hash: B256,
    /// Transaction index in the block.
    pub tx_index: u32,
    /// Log index in the block.
    pub log_index: u32,
}

/// A filter for [`Store::logs`].
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    /// First block (inclusive).
    pub from: u64,
    /// Last block (inclusive).
    pub to: u64,
    /// Matching emitters (empty: any).
    pub addresses: Vec<Address>,
    /// Per topic position, the accepted values (empty: any).
    pub topics: Vec<Vec<B256>>,
}

impl LogFilter {
    fn matches(&self, log: &Log) -> bool {
        if !self.addresses.is_empty() && !self.addresses.contains(&log.address) {
            return false;
        }
        self.topics.iter().enumerate().all(|(i, accepted)| {
            accepted.is_empty() || log.topics.get(i).is_some_and(|t| accepted.contains(t))
        })
    }
}

/// The genesis allocation as a change set, so block 0's app hash is computed
/// like every other block's.
fn genesis_changes(genesis: &Genesis) -> ChangeSet {
    ChangeSet {
        accounts: genesis
            .alloc
            .iter()
            .map(|(address, a)| AccountChange {
                address: *address,
                deleted: false,
                balance: a.balance,
                nonce: a.nonce,
                code: (!a.code.is_empty())
                    .then(|| CodeChange { hash: sluice_messages::keccak256(&a.code), code: a.code.clone() }),
                storage_cleared: false,
                storage: a.storage.iter().map(|(k, v)| (*k, *v)).collect(),
            })
            .collect(),
    }
}

impl Store {
    /// A store holding only the genesis block.
    pub fn new(genesis: &Genesis) -> Store {
        let mut state = MemState::default();
        for (address, acct) in &genesis.alloc {
            state.insert_genesis(*address, acct);
        }
        let header = BlockHeader {
            number: 0,
            parent_hash: B256::ZERO,
            timestamp: genesis.timestamp,
            coinbase: genesis.coinbase,
            gas_limit: genesis.gas_limit,
            base_fee: genesis.base_fee,
            tx_root: sluice_messages::keccak256(&[]),
        };
        let hash = header.hash();
        let app = app_hash(&B256::ZERO, 0, &hash, 0, &genesis_changes(genesis));
        let block = Arc::new(StoredBlock {
            block: Arc::new(SealedBlock { header, hash, txs: Vec::new() }),
            receipts: Vec::new(),
            raw_index: Vec::new(),
            gas_used: 0,
            app_hash: app,
        });
        let inner = Inner {
            state,
            blocks: vec![block],
            by_hash: HashMap::from([(hash, 0)]),
            txs: HashMap::new(),
            halted: None,
        };
        Store { inner: RwLock::new(inner), genesis_fingerprint: genesis.fingerprint() }
    }

    /// Fingerprint of the genesis this store started from.
    pub fn genesis_fingerprint(&self) -> B256 {
        self.genesis_fingerprint
    }

    /// Height of the last committed block.
    pub fn head(&self) -> u64 {
        (self.inner.read().blocks.len() - 1) as u64
    }

    /// The last committed block.
    pub fn head_block(&self) -> Arc<StoredBlock> {
        let inner = self.inner.read();
        Arc::clone(&inner.blocks[inner.blocks.len() - 1])
    }

    /// A committed block by height.
    pub fn block(&self, number: u64) -> Option<Arc<StoredBlock>> {
        let inner = self.inner.read();
        usize::try_from(number).ok().and_then(|n| inner.blocks.get(n)).cloned()
    }

    /// A committed block by hash.
    pub fn block_by_hash(&self, hash: &B256) -> Option<Arc<StoredBlock>> {
        let inner = self.inner.read();
        inner.by_hash.get(hash).and_then(|&n| inner.blocks.get(n as usize)).cloned()
    }

    /// A committed transaction: its block and receipt index.
    pub fn transaction(&self, hash: &B256) -> Option<(Arc<StoredBlock>, usize)> {
        let inner = self.inner.read();
        let loc = inner.txs.get(hash)?;
        Some((Arc::clone(inner.blocks.get(loc.block as usize)?), loc.index as usize))
    }

    /// The error that halted the store, if any.
    pub fn halted(&self) -> Option<String> {
        self.inner.read().halted.clone()
    }

    /// Number of accounts in current state.
    pub fn account_count(&self) -> usize {
        self.inner.read().state.len()
    }

    /// Commits an executed block: applies its changes, indexes it and chains
    /// its app hash. Returns the app hash. Blocks must arrive in order.
    pub fn commit(&self, executed: &ExecutedBlock) -> Result<B256, StoreError> {
        let mut inner = self.inner.write();
        if let Some(reason) = &inner.halted {
            return Err(StoreError::Halted(reason.clone()));
        }
        let expected = inner.blocks.len() as u64;
        let number = executed.block.header.number;
        if number != expected {
            return Err(StoreError::OutOfOrder { expected, got: number });
        }
        let prev = inner.blocks[inner.blocks.len() - 1].app_hash;
        let app = app_hash(&prev, number, &executed.block.hash, executed.gas_used, &executed.changes);
        inner.state.apply(&executed.changes);
        for (i, r) in executed.receipts.iter().enumerate() {
            inner.txs.insert(r.tx_hash, TxLocation { block: number, index: i as u32 });
        }
        inner.by_hash.insert(executed.block.hash, number);
        inner.blocks.push(Arc::new(StoredBlock {
            block: Arc::clone(&executed.block),
            receipts: executed.receipts.clone(),
            raw_index: executed.raw_index.clone(),
            gas_used: executed.gas_used,
            app_hash: app,
        }));
        Ok(app)
    }

    /// Latches a failure: every later commit fails with it.
    pub fn halt(&self, reason: String) {
        self.inner.write().halted.get_or_insert(reason);
    }

    /// Logs matching `filter`, at most `limit` of them; `None` when more
    /// than `limit` match (the caller reports the limit).
    pub fn logs(&self, filter: &LogFilter, limit: usize) -> Option<Vec<LogEntry>> {
        let inner = self.inner.read();
        let mut out = Vec::new();
        let last = filter.to.min(inner.blocks.len() as u64 - 1);
        for number in filter.from..=last {
            let stored = &inner.blocks[number as usize];
            let mut log_index = 0u32;
            for r in &stored.receipts {
                for log in &r.logs {
                    if filter.matches(log) {
                        if out.len() == limit {
                            return None;
                        }
                        out.push(LogEntry {
                            log: log.clone(),
                            block_number: number,
                            block_hash: stored.block.hash,
                            tx_hash: r.tx_hash,
                            tx_index: r.index,
                            log_index,
                        });
                    }
                    log_index += 1;
                }
            }
        }
        Some(out)
    }
}

impl StateReader for Store {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        Ok(self.inner.read().state.account(address))
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        Ok(self.inner.read().state.code(hash))
    }
    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        Ok(self.inner.read().state.storage(address, slot))
    }
    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        let inner = self.inner.read();
        Ok(usize::try_from(number)
            .ok()
            .and_then(|n| inner.blocks.get(n))
            .map(|b| b.block.hash)
            .unwrap_or_default())
    }
}

impl<T: StateReader + ?Sized> StateReader for Arc<T> {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        (**self).account(address)
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        (**self).code(hash)
    }
    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        (**self).storage(address, slot)
    }
    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        (**self).block_hash(number)
    }
}
