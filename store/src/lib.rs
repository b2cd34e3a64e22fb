//! sluice's state and chain store.
//!
//! Only store commit writes state ([`Store::commit`]). Readers (RPC, the
//! executor) see whole committed blocks, never half of one; the executor
//! reads blocks that are executed but not yet committed through an
//! [`Overlay`].
//!
//! Layout:
//! - [`reader`]: the [`StateReader`] trait every state source implements
//!   (defined in `sluice-state`, re-exported here).
//! - [`chain`]: the committed chain ([`Store`]): blocks, receipts, state.
//! - [`db`]: the on-disk database (fjall): blocks, results, change sets,
//!   the hash vault and current state; [`write`]: one batch per block.
//! - [`cache`]: the bounded cache of current state over the database.
//! - [`state`]: current state in memory (a store without a database).
//! - [`history`]: each block's priors, so state reads at any retained
//!   block ([`Store::state_at`]).
//! - [`overlay`]: executed-but-uncommitted blocks over the store.
//! - [`apphash`]: the chained blake3 app hash.
//! - [`genesis`], [`genesis_json`]: genesis allocation, dev and geth-style.
//! - [`guard`]: a database library's panics on damaged files become errors.

pub mod apphash;
pub mod cache;
pub mod chain;
pub mod db;
pub mod genesis;
pub mod genesis_json;
pub mod guard;
pub mod history;
pub mod overlay;
/// The state-reading interface (the `sluice-state` crate).
pub use sluice_state as reader;
pub mod state;
pub mod write;

pub use cache::{CacheBytes, CacheStats};
pub use chain::{
    genesis_sealed, CommitInfo, DurableOptions, LogEntry, LogFilter, StateAt, Store, StoredBlock,
};
pub use db::{DbMemory, SyncPolicy};
pub use genesis::{Genesis, GenesisAccount, Synthetic};
pub use overlay::{Layer, Overlay};
pub use reader::{Account, StateReader, StoreError, EMPTY_CODE_HASH};
