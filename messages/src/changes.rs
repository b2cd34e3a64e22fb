//! A block's state change set.
//!
//! Canonical order: accounts sorted by address, slots sorted by key. The app
//! hash is computed from this structure directly, and two executors (the
//! sequential oracle and the parallel executor) must produce equal change sets.

use alloy_primitives::{Address, Bytes, B256, U256};

/// New code deployed at an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChange {
    /// Keccak of the code.
    pub hash: B256,
    /// The bytecode.
    pub code: Bytes,
}

/// Everything a block changed about one account: its final values after the
/// block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountChange {
    /// The account.
    pub address: Address,
    /// True if the account no longer exists after the block (self-destructed,
    /// or touched while empty under EIP-161). Other fields are then zero.
    pub deleted: bool,
    /// Balance after the block.
    pub balance: U256,
    /// Nonce after the block.
    pub nonce: u64,
    /// New code, when the block deployed code here.
    pub code: Option<CodeChange>,
    /// True when all storage was wiped before `storage` applies (created or
    /// destroyed in this block).
    pub storage_cleared: bool,
    /// Changed slots and their new values, sorted by slot.
    pub storage: Vec<(U256, U256)>,
}

/// The state changes of one block, sorted by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// One entry per changed account.
    pub accounts: Vec<AccountChange>,
}
