//! Reading state: the interface between what executes blocks and what
//! stores them.
//!
//! Like revm's `database/interface` crate beside its databases: the
//! executor reads state through [`StateReader`] and knows nothing of the
//! store; the store, its overlays of executed-but-uncommitted blocks and
//! the test states implement it. The store's errors ([`StoreError`]) and
//! the reason it halts ([`Halt`], in [`halt`]) live here too, so every crate
//! that reads state names them the same way.

pub mod halt;

pub use halt::Halt;

use alloy_primitives::{Address, Bytes, B256, U256};

/// Keccak of empty code.
pub const EMPTY_CODE_HASH: B256 = alloy_primitives::KECCAK256_EMPTY;

/// An account's scalar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// Balance in wei.
    pub balance: U256,
    /// Nonce.
    pub nonce: u64,
    /// Keccak of the code ([`EMPTY_CODE_HASH`] for none).
    pub code_hash: B256,
}

impl Default for Account {
    fn default() -> Self {
        Account { balance: U256::ZERO, nonce: 0, code_hash: EMPTY_CODE_HASH }
    }
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The underlying storage failed to read or write: the operating
    /// system's error, kept whole (its kind tells a full disk from a
    /// timeout), with what was being done in its message.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Stored data is corrupt or from another chain: what was found, for
    /// the operator (nothing matches on it).
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The store halted (an earlier commit failed, consensus found this
    /// node's state wrong, supervision gave up): it accepts no more writes.
    /// The first halt, given to every later caller (the failure itself was
    /// returned once, to whatever met it).
    #[error("store halted: {0}")]
    Halted(Halt),
    /// The store was closed at shutdown: reads of the database and commits
    /// fail from then on.
    #[error("the store was closed at shutdown")]
    Closed,
    /// State at a block older than the node keeps (pruned, or committed
    /// before the data dir kept history). geth's wording for the same.
    #[error("missing trie node: state of block {block} is not available (the oldest block with state is {oldest})")]
    StateUnavailable {
        /// The block asked for.
        block: u64,
        /// The oldest block whose state can be read.
        oldest: u64,
    },
    /// A block (its body, receipts, transactions) older than the node
    /// keeps: pruned by a full node's block retention. geth's wording
    /// (its error code 4444) with the heights.
    #[error("pruned history unavailable: block {block} is older than the oldest block kept ({oldest})")]
    HistoryPruned {
        /// The block asked for.
        block: u64,
        /// The oldest block kept.
        oldest: u64,
    },
    /// A block was committed out of order.
    #[error("block {got} committed out of order, expected {expected}")]
    OutOfOrder {
        /// The height expected next.
        expected: u64,
        /// The height offered.
        got: u64,
    },
}

/// A consistent view of state at some height. Implemented by the committed
/// store, by overlays of executed-but-uncommitted blocks, and by test states.
pub trait StateReader: Send + Sync {
    /// The account at `address`, or `None` if it does not exist.
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError>;
    /// Code by its hash (empty for unknown hashes).
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError>;
    /// A storage slot (zero when unset).
    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError>;
    /// The hash of block `number`, or zero when unknown (BLOCKHASH semantics).
    fn block_hash(&self, number: u64) -> Result<B256, StoreError>;
}

/// A shared reader reads as the reader it shares.
impl<T: StateReader + ?Sized> StateReader for std::sync::Arc<T> {
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
