//! What one execution of a transaction read and wrote, and its result: the
//! unit that workers hand to the ordered commit.
//!
//! Locations are an account's balance, nonce, code (hash) and existence, and
//! each storage slot. Existence is tracked because revm can observe it
//! (EIP-7702 refunds differ for accounts that do not exist), even though
//! after EIP-161 an existing account is almost always non-empty.

use alloy_primitives::{Address, U256};
use revm::{
    primitives::KECCAK_EMPTY,
    state::{AccountInfo, Bytecode, EvmState},
};
use sluice_messages::Receipt;
use sluice_store::Account as StoredAccount;

use super::small::InlineVec;
use crate::db::normalize_code_hash;

/// Account fields (bits of a mask).
pub(crate) mod field {
    pub(crate) const BALANCE: u8 = 1;
    pub(crate) const NONCE: u8 = 2;
    pub(crate) const CODE: u8 = 4;
    pub(crate) const EXISTS: u8 = 8;
    pub(crate) const ALL: u8 = BALANCE | NONCE | CODE | EXISTS;
    /// Each field with its index in a `[_; 4]`.
    pub(crate) const EACH: [(u8, usize); 4] = [(BALANCE, 0), (NONCE, 1), (CODE, 2), (EXISTS, 3)];
}

/// What else an account write did (bits of the same mask as [`field`]).
pub(crate) mod event {
    /// A contract was created here: storage from before no longer applies.
    pub(crate) const CREATED: u8 = 16;
    /// SELFDESTRUCT removed the account.
    pub(crate) const DESTROYED: u8 = 32;
    /// EIP-161 removed the touched, empty account.
    pub(crate) const EMPTIED: u8 = 64;
    /// Any of the above: every slot reads zero afterwards.
    pub(crate) const WIPES: u8 = CREATED | DESTROYED | EMPTIED;
}

/// Which execution wrote a value: a transaction's incarnation, or the
/// block-start state ([`Version::BASE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Version(u64);

impl Version {
    pub(crate) const BASE: Version = Version(0);

    pub(crate) fn of(tx: u32, incarnation: u32) -> Self {
        Version(((u64::from(tx) + 1) << 32) | u64::from(incarnation))
    }

    /// The writing transaction (`None` for the block-start state).
    pub(crate) fn tx(self) -> Option<u32> {
        u32::try_from(self.0 >> 32).ok().and_then(|t| t.checked_sub(1))
    }
}

/// An account's fields as a transaction sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AccountValue {
    pub(crate) balance: U256,
    pub(crate) nonce: u64,
    pub(crate) code_hash: alloy_primitives::B256,
    pub(crate) exists: bool,
}

impl Default for AccountValue {
    /// An account that does not exist.
    fn default() -> Self {
        AccountValue { balance: U256::ZERO, nonce: 0, code_hash: KECCAK_EMPTY, exists: false }
    }
}

impl AccountValue {
    pub(crate) fn from_stored(account: Option<&StoredAccount>) -> Self {
        match account {
            Some(a) => AccountValue {
                balance: a.balance,
                nonce: a.nonce,
                code_hash: normalize_code_hash(a.code_hash),
                exists: true,
            },
            None => AccountValue::default(),
        }
    }

    /// EIP-161 emptiness.
    pub(crate) fn is_empty(&self) -> bool {
        self.balance.is_zero() && self.nonce == 0 && self.code_hash == KECCAK_EMPTY
    }

    /// Whether the fields in `mask` are equal.
    pub(crate) fn same(&self, other: &AccountValue, mask: u8) -> bool {
        (mask & field::BALANCE == 0 || self.balance == other.balance)
            && (mask & field::NONCE == 0 || self.nonce == other.nonce)
            && (mask & field::CODE == 0 || self.code_hash == other.code_hash)
            && (mask & field::EXISTS == 0 || self.exists == other.exists)
    }

    /// revm's view: `None` when the account does not exist.
    pub(crate) fn info(&self, code: Option<Bytecode>) -> Option<AccountInfo> {
        self.exists.then(|| AccountInfo {
            balance: self.balance,
            nonce: self.nonce,
            code_hash: self.code_hash,
            code: if self.code_hash == KECCAK_EMPTY { Some(crate::db::empty_code()) } else { code },
            ..Default::default()
        })
    }
}

/// An account read: the fields in `mask`, with the version each came from.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AccountRead {
    pub(crate) address: Address,
    pub(crate) mask: u8,
    pub(crate) versions: [Version; 4],
    pub(crate) value: AccountValue,
}

/// A storage slot read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SlotRead {
    pub(crate) address: Address,
    pub(crate) key: U256,
    pub(crate) version: Version,
    pub(crate) value: U256,
}

/// An account write: the fields and events in `mask`.
#[derive(Debug, Clone, Default)]
pub(crate) struct AccountWrite {
    pub(crate) address: Address,
    pub(crate) mask: u8,
    pub(crate) value: AccountValue,
    /// The new code, when `mask` has [`field::CODE`].
    pub(crate) code: Option<Bytecode>,
}

/// A storage slot write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotWrite {
    pub(crate) address: Address,
    pub(crate) key: U256,
    pub(crate) value: U256,
}

/// The coinbase account as a transaction left it, before its fee (which the
/// commit adds, see `commit.rs`).
#[derive(Debug, Clone)]
pub(crate) struct CoinbasePost {
    pub(crate) info: AccountInfo,
    pub(crate) created: bool,
    pub(crate) destroyed: bool,
}

/// A transaction's result.
#[derive(Debug)]
pub(crate) enum TxResult {
    /// Applied: its receipt (index and cumulative gas set at commit) and the
    /// priority fee owed to the coinbase.
    Applied { receipt: Receipt, fee: U256 },
    /// Not applicable at its position, with why.
    Skipped(String),
}

/// Outcomes travel boxed: between threads and lists a pointer moves, not
/// the whole (about 1 KiB) outcome.
pub(crate) type Outcome = Box<TxOutcome>;

/// One execution of one transaction.
#[derive(Debug)]
pub(crate) struct TxOutcome {
    pub(crate) incarnation: u32,
    /// How many transactions were committed when it started: its reads of
    /// versions below this are final.
    pub(crate) started: u32,
    /// Executed as a plain transfer, without the interpreter.
    pub(crate) fast: bool,
    /// Its writes are already in the multi-version memory.
    pub(crate) published: bool,
    pub(crate) account_reads: InlineVec<AccountRead, 2>,
    pub(crate) slot_reads: Vec<SlotRead>,
    /// The coinbase account as read (served by the commit, never
    /// versioned). Boxed, as the next one: rare, and outcomes are moved.
    pub(crate) coinbase_read: Option<Box<AccountValue>>,
    pub(crate) account_writes: InlineVec<AccountWrite, 2>,
    pub(crate) slot_writes: Vec<SlotWrite>,
    pub(crate) coinbase_post: Option<Box<CoinbasePost>>,
    pub(crate) result: TxResult,
}

impl TxOutcome {
    /// An outcome to fill in (outcomes are recycled, see [`Self::reset`]).
    pub(crate) fn new() -> Box<Self> {
        Box::new(TxOutcome {
            incarnation: 0,
            started: 0,
            fast: false,
            published: false,
            account_reads: InlineVec::default(),
            slot_reads: Vec::new(),
            coinbase_read: None,
            account_writes: InlineVec::default(),
            slot_writes: Vec::new(),
            coinbase_post: None,
            result: TxResult::Skipped(String::new()),
        })
    }

    /// Empties a recycled outcome for another execution, keeping the
    /// capacity of its lists.
    pub(crate) fn reset(&mut self, incarnation: u32, started: u32) {
        self.incarnation = incarnation;
        self.started = started;
        self.fast = false;
        self.published = false;
        self.account_reads = InlineVec::default();
        self.slot_reads.clear();
        self.coinbase_read = None;
        self.account_writes = InlineVec::default();
        self.slot_writes.clear();
        self.coinbase_post = None;
        self.result = TxResult::Skipped(String::new());
    }

    /// Records the state revm returned for an applied transaction as writes,
    /// following [`crate::overlay`]'s commit rules exactly (untouched
    /// accounts ignored, self-destructed ones removed, touched empty ones
    /// deleted, created ones wiped), but writing only the fields that changed
    /// so that readers of the others do not conflict.
    pub(crate) fn record_state(&mut self, state: EvmState, coinbase: Address) {
        for (address, account) in state {
            if !account.is_touched() {
                continue;
            }
            let destroyed = account.is_selfdestructed();
            let created = account.is_created();
            let emptied = !destroyed && account.info.is_empty() && !created;
            if !destroyed && !emptied {
                for (key, slot) in account.storage.iter() {
                    if slot.is_changed() {
                        self.slot_writes.push(SlotWrite { address, key: *key, value: slot.present_value });
                    }
                }
            }
            if address == coinbase {
                self.coinbase_post = Some(Box::new(CoinbasePost { info: account.info, created, destroyed }));
                continue;
            }
            if destroyed || emptied {
                let mask = field::ALL | if destroyed { event::DESTROYED } else { event::EMPTIED };
                let value = AccountValue::default();
                self.account_writes.push(AccountWrite { address, mask, value, code: None });
                continue;
            }
            let info = &account.info;
            let mask = if created {
                field::ALL | event::CREATED
            } else {
                // Compared with what the transaction read (every account revm
                // touches was read through the database first).
                let before = match self.account_reads.iter().find(|r| r.address == address) {
                    Some(read) => read.value,
                    None => {
                        let o = account.original_info();
                        let exists = !account.is_loaded_as_not_existing();
                        AccountValue { balance: o.balance, nonce: o.nonce, code_hash: o.code_hash, exists }
                    }
                };
                let mut mask = 0;
                if before.balance != info.balance {
                    mask |= field::BALANCE;
                }
                if before.nonce != info.nonce {
                    mask |= field::NONCE;
                }
                if normalize_code_hash(before.code_hash) != info.code_hash {
                    mask |= field::CODE;
                }
                if !before.exists {
                    mask |= field::EXISTS;
                }
                mask
            };
            if mask == 0 {
                continue;
            }
            let value = AccountValue {
                balance: info.balance,
                nonce: info.nonce,
                code_hash: info.code_hash,
                exists: true,
            };
            let code = if mask & field::CODE != 0 { info.code.clone() } else { None };
            self.account_writes.push(AccountWrite { address, mask, value, code });
        }
    }
}
