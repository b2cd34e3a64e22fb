//! What a transaction touched, as revm's journal builds it.
//!
//! A lane's journal carries state across transactions, so a transaction
//! that uses an account or slot already in it never asks the database:
//! the reads cannot be taken from the database alone. But revm builds a
//! journal entry on the first use of an account or slot in a transaction
//! (`account_warmed`, `storage_warmed`; pre-warmed ones are loaded from the
//! database or listed in the transaction's access list) and on every
//! change. [`Entry`] is revm's entry, built by constructors that also note
//! the key in a per-thread log; the note survives a reverted call frame,
//! whose reads decided the transaction's result as much as any other.

use std::cell::RefCell;

use alloy_primitives::{Address, B256, U256};
use revm::{
    context_interface::journaled_state::entry::{JournalEntry, JournalEntryTr, SelfdestructionRevertStatus},
    state::{Bytecode, EvmState, TransientStorage},
};

/// An account (its balance and nonce) or a storage slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    /// An account's balance and nonce (and existence).
    Account(Address),
    /// A storage slot.
    Slot(Address, U256),
}

impl Key {
    /// A 64-bit digest: reads are kept and compared as digests (8 bytes
    /// instead of 53, no hashing of the whole key per lookup). Two keys
    /// with one digest only make a run look stale: it runs again.
    pub(crate) fn digest(&self) -> u64 {
        let (address, word) = match self {
            Key::Account(a) => (a, U256::MAX),
            Key::Slot(a, k) => (a, *k),
        };
        let mut h = 0x243f_6a88_85a3_08d3u64;
        let a = address.as_slice();
        let mut mix = |x: u64| h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        for part in [&a[0..8], &a[8..16]] {
            let mut w = [0u8; 8];
            w.copy_from_slice(part);
            mix(u64::from_le_bytes(w));
        }
        let mut w = [0u8; 4];
        w.copy_from_slice(&a[16..20]);
        mix(u64::from(u32::from_le_bytes(w)));
        for limb in word.as_limbs() {
            mix(*limb);
        }
        h ^ (h >> 31)
    }
}

/// A set of key digests, as a Bloom filter: membership may be a false
/// positive (a run executed again for nothing), never a false negative.
#[derive(Debug, Clone)]
pub(crate) struct Dirty {
    bits: Box<[u64; Dirty::WORDS]>,
}

impl Dirty {
    /// 16 Kibit (2 KiB): a chunk's dirty keys are a few hundred at most,
    /// so a lookup is a false positive about once in ten thousand.
    const WORDS: usize = 256;

    pub(crate) fn new() -> Self {
        Dirty { bits: Box::new([0; Dirty::WORDS]) }
    }

    fn positions(digest: u64) -> [usize; 2] {
        let bits = (Dirty::WORDS * 64) as u64;
        [(digest % bits) as usize, ((digest >> 32).wrapping_mul(0x9e37_79b9) % bits) as usize]
    }

    /// Empties the set, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.bits.fill(0);
    }

    pub(crate) fn insert(&mut self, digest: u64) {
        for p in Self::positions(digest) {
            self.bits[p / 64] |= 1 << (p % 64);
        }
    }

    pub(crate) fn contains(&self, digest: u64) -> bool {
        Self::positions(digest).iter().all(|p| self.bits[p / 64] & (1 << (p % 64)) != 0)
    }
}

/// What the current transaction on this thread touched so far.
#[derive(Debug, Default)]
pub(crate) struct Touches {
    /// Digests of the keys read (first uses, and loads from the database).
    pub(crate) reads: Vec<u64>,
    /// Keys written (possibly to the same value: touches).
    pub(crate) writes: Vec<Key>,
    /// The transaction created or destroyed an account, or changed code:
    /// not modelled by the lanes.
    pub(crate) unsupported: bool,
}

thread_local! {
    // Const-initialised: no lazy-initialisation check on each of the
    // several notes per transaction.
    static TOUCHES: RefCell<Touches> = const {
        RefCell::new(Touches { reads: Vec::new(), writes: Vec::new(), unsupported: false })
    };
}

/// Runs `f` on this thread's log.
pub(crate) fn with_touches<T>(f: impl FnOnce(&mut Touches) -> T) -> T {
    TOUCHES.with(|t| f(&mut t.borrow_mut()))
}

/// Empties this thread's log.
pub(crate) fn clear() {
    with_touches(|t| {
        t.reads.clear();
        t.writes.clear();
        t.unsupported = false;
    });
}

pub(crate) fn note_read(key: Key) {
    with_touches(|t| t.reads.push(key.digest()));
}

fn note_write(key: Key) {
    with_touches(|t| t.writes.push(key));
}

fn note_unsupported() {
    with_touches(|t| t.unsupported = true);
}

/// revm's journal entry; its constructors note what they are about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry(JournalEntry);

impl JournalEntryTr for Entry {
    fn account_warmed(address: Address) -> Self {
        note_read(Key::Account(address));
        Entry(JournalEntry::account_warmed(address))
    }

    fn account_destroyed(
        address: Address,
        target: Address,
        destroyed_status: SelfdestructionRevertStatus,
        had_balance: U256,
    ) -> Self {
        note_unsupported();
        Entry(JournalEntry::account_destroyed(address, target, destroyed_status, had_balance))
    }

    fn account_touched(address: Address) -> Self {
        note_write(Key::Account(address));
        Entry(JournalEntry::account_touched(address))
    }

    fn balance_transfer(from: Address, to: Address, balance: U256) -> Self {
        note_write(Key::Account(from));
        note_write(Key::Account(to));
        Entry(JournalEntry::balance_transfer(from, to, balance))
    }

    fn balance_changed(address: Address, old_balance: U256) -> Self {
        note_write(Key::Account(address));
        Entry(JournalEntry::balance_changed(address, old_balance))
    }

    fn nonce_changed(address: Address, previous_nonce: u64) -> Self {
        note_write(Key::Account(address));
        Entry(JournalEntry::nonce_changed(address, previous_nonce))
    }

    fn nonce_bumped(address: Address) -> Self {
        note_write(Key::Account(address));
        Entry(JournalEntry::nonce_bumped(address))
    }

    fn account_created(address: Address, is_created_globally: bool) -> Self {
        note_unsupported();
        Entry(JournalEntry::account_created(address, is_created_globally))
    }

    fn storage_changed(address: Address, key: U256, had_value: U256) -> Self {
        note_write(Key::Slot(address, key));
        Entry(JournalEntry::storage_changed(address, key, had_value))
    }

    fn storage_warmed(address: Address, key: U256) -> Self {
        note_read(Key::Slot(address, key));
        Entry(JournalEntry::storage_warmed(address, key))
    }

    fn transient_storage_changed(address: Address, key: U256, had_value: U256) -> Self {
        Entry(JournalEntry::transient_storage_changed(address, key, had_value))
    }

    fn code_changed(address: Address, had_code_hash: B256, had_code: Option<Bytecode>) -> Self {
        note_unsupported();
        Entry(JournalEntry::code_changed(address, had_code_hash, had_code))
    }

    fn revert(
        self,
        state: &mut EvmState,
        transient_storage: Option<&mut TransientStorage>,
        is_spurious_dragon_enabled: bool,
    ) {
        self.0.revert(state, transient_storage, is_spurious_dragon_enabled);
    }
}
