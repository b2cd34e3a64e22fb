//! revm's read interface over sluice's [`StateReader`].

use alloy_primitives::{Address, B256, U256};
use revm::{
    database_interface::DBErrorMarker,
    state::{AccountInfo, Bytecode},
    DatabaseRef,
};
use sluice_state::{Account, StateReader, StoreError};

/// A store error as revm's database error type (revm needs its own marker
/// trait on the error, which a foreign type cannot get directly).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DbError(#[from] pub StoreError);

impl DBErrorMarker for DbError {}

/// Read-only block-start state as a revm [`DatabaseRef`]. Cheap to copy:
/// it only borrows the reader.
#[derive(Clone, Copy)]
pub struct StateDb<'a> {
    state: &'a dyn StateReader,
}

impl std::fmt::Debug for StateDb<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateDb")
    }
}

impl<'a> StateDb<'a> {
    /// Wraps a state reader.
    pub fn new(state: &'a dyn StateReader) -> Self {
        StateDb { state }
    }

    /// The wrapped reader.
    pub fn reader(&self) -> &'a dyn StateReader {
        self.state
    }
}

/// Keccak of empty code, normalising the all-zero hash some states use for
/// "no code" so that revm and the change set never see two spellings.
pub(crate) fn normalize_code_hash(hash: B256) -> B256 {
    if hash == B256::ZERO {
        revm::primitives::KECCAK_EMPTY
    } else {
        hash
    }
}

/// revm's view of a stored account. Code is left out (`None`) unless the
/// account has none: revm then asks [`DatabaseRef::code_by_hash_ref`] only
/// when it actually runs or inspects the code, so plain transfers never load
/// contract code.
pub(crate) fn account_info(account: &Account) -> AccountInfo {
    let code_hash = normalize_code_hash(account.code_hash);
    let code = (code_hash == revm::primitives::KECCAK_EMPTY).then(empty_code);
    AccountInfo { balance: account.balance, nonce: account.nonce, code_hash, code, ..Default::default() }
}

/// Empty code. revm's `Bytecode::default()` clones one process-wide
/// instance, whose reference count then bounces between the cores of a
/// parallel block; each thread clones its own instead.
pub(crate) fn empty_code() -> Bytecode {
    thread_local! {
        static EMPTY: Bytecode = Bytecode::default();
    }
    EMPTY.with(Bytecode::clone)
}

/// Bytecode from raw stored bytes. Bytes that start like an EIP-7702
/// delegation but are malformed cannot have been deployed by the EVM; they
/// are treated as legacy code instead of panicking as `Bytecode::new_raw`
/// would.
pub(crate) fn bytecode(raw: alloy_primitives::Bytes) -> Bytecode {
    match Bytecode::new_raw_checked(raw.clone()) {
        Ok(code) => code,
        Err(_) => Bytecode::new_legacy(raw),
    }
}

impl DatabaseRef for StateDb<'_> {
    type Error = DbError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        Ok(self.state.account(&address)?.as_ref().map(account_info))
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, DbError> {
        if normalize_code_hash(code_hash) == revm::primitives::KECCAK_EMPTY {
            return Ok(empty_code());
        }
        Ok(bytecode(self.state.code(&code_hash)?))
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, DbError> {
        Ok(self.state.storage(&address, &index)?)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, DbError> {
        Ok(self.state.block_hash(number)?)
    }
}

/// Analysed code by hash: code is immutable, so each contract is analysed
/// once per block (or per worker) and then shared.
#[derive(Debug, Default)]
pub(crate) struct CodeCache(alloy_primitives::map::B256Map<Bytecode>);

impl CodeCache {
    /// The code with this hash, from the cache or `db`.
    pub(crate) fn get(&mut self, db: StateDb<'_>, code_hash: B256) -> Result<Bytecode, DbError> {
        if let Some(code) = self.0.get(&code_hash) {
            return Ok(code.clone());
        }
        let code = db.code_by_hash_ref(code_hash)?;
        self.0.insert(code_hash, code.clone());
        Ok(code)
    }

    /// The code with this hash, if it is cached.
    pub(crate) fn cached(&self, code_hash: &B256) -> Option<&Bytecode> {
        self.0.get(code_hash)
    }
}

/// The change-set entry of an account that existed at block start and does
/// not at its end.
pub(crate) fn deleted(address: Address) -> sluice_messages::AccountChange {
    sluice_messages::AccountChange {
        address,
        deleted: true,
        balance: U256::ZERO,
        nonce: 0,
        code: None,
        storage_cleared: true,
        storage: Vec::new(),
    }
}

/// The change-set entry of an account that exists at the end of the block
/// with `info`; its code is included iff its hash differs from
/// `start_code_hash`, with the bytes from `code_bytes`.
pub(crate) fn updated(
    address: Address,
    info: &AccountInfo,
    start_code_hash: B256,
    storage: Vec<(U256, U256)>,
    storage_cleared: bool,
    code_bytes: impl FnOnce() -> Result<alloy_primitives::Bytes, DbError>,
) -> Result<sluice_messages::AccountChange, DbError> {
    let code = if info.code_hash == start_code_hash {
        None
    } else {
        Some(sluice_messages::CodeChange { hash: info.code_hash, code: code_bytes()? })
    };
    Ok(sluice_messages::AccountChange {
        address,
        deleted: false,
        balance: info.balance,
        nonce: info.nonce,
        code,
        storage_cleared,
        storage,
    })
}

impl From<DbError> for crate::ExecError {
    fn from(e: DbError) -> Self {
        crate::ExecError::Store(e.0)
    }
}
