//! sluice's state and chain store.
//!
//! Only store commit writes state ([`Store::commit`]). Readers (RPC, the
//! executor) see whole committed blocks, never half of one; the executor
//! reads blocks that are executed but not yet committed through an
//! [`Overlay`].
//!
//! Layers, each using only those below it:
//! - [`tables`]: the database's tables (fjall keyspaces), their record
//!   encodings and [`StoredBlock`], what a height holds.
//! - [`address_index`]: each address's transactions (sender, call
//!   recipient, created contract), when `store.address_index` is on.
//! - [`history`]: each block's priors, so state reads at any retained
//!   block ([`Store::state_at`]), on the tables.
//! - [`db`]: the on-disk database (fjall): open, reads, close; [`write`]:
//!   one atomic batch per block; [`prune`]: what a full node keeps and
//!   how the rest leaves the disk.
//! - [`cache`]: the bounded cache of current state over the database;
//!   [`state`]: current state in memory (a store without a database).
//! - [`chain`]: the committed chain ([`Store`]) on all of the above:
//!   blocks, receipts, state.
//!
//! Beside them: [`reader`] (the [`StateReader`] trait every state source
//! implements, from `sluice-state`), [`uncommitted`] (executed-but-uncommitted
//! blocks over the store), [`apphash`] (the chained blake3 app hash),
//! [`genesis`] and [`genesis_json`] (dev and geth-style allocations),
//! [`guard`] (a database library's panics on damaged files become errors).

pub mod address_index;
pub mod apphash;
pub mod cache;
pub mod chain;
pub mod db;
pub mod genesis;
pub mod genesis_json;
pub mod guard;
pub mod history;
pub mod prune;
pub mod uncommitted;
/// The state-reading interface (the `sluice-state` crate).
pub use sluice_state as reader;
pub mod state;
pub mod tables;
pub mod write;

pub use address_index::{AddressPage, AddressScan};
pub use cache::{CacheBytes, CacheStats};
pub use chain::{genesis_sealed, CommitInfo, DurableOptions, LogEntry, LogFilter, StateAt, Store};
pub use db::{DbLimits, SyncPolicy};
pub use genesis::{Genesis, GenesisAccount, Synthetic};
pub use reader::{Account, Halt, StateReader, StoreError, EMPTY_CODE_HASH};
pub use tables::StoredBlock;
pub use uncommitted::{Layer, Overlay};
