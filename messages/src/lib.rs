//! The vocabulary of sluice: plain data that crosses actor mailboxes and,
//! through [`wire`], leaves the process.
//!
//! Nothing here has behaviour beyond construction, hashing of its own bytes
//! and conversion to and from the protobuf wire format. Actors, engines and
//! the RPC layer all speak these types, so this crate depends on no other
//! sluice crate.
//!
//! Layout:
//! - [`tx`]: a transaction as admitted (raw bytes, hash, decoded form, sender).
//! - [`block`]: headers, sealed blocks (raw transactions) and prepared blocks.
//! - [`block_size`]: EIP-7934's cap on a block's RLP size.
//! - [`receipt`]: execution results per transaction, with logs.
//! - [`skip`]: why a block's transaction was not applied.
//! - [`changes`]: a block's state change set in canonical order.
//! - [`proposal`]: what a validator's consensus and pipeline hand each
//!   other (the parent, the sealed proposal, the commit callback).
//! - [`spec`]: the hard fork whose rules the chain follows.
//! - [`synthetic`]: addresses of the synthetic accounts funded at genesis.
//! - [`wire`]: the protobuf (prost) schema used by the store and, later, peers.

pub mod block;
pub mod block_size;
pub mod changes;
pub mod proposal;
pub mod receipt;
pub mod skip;
pub mod spec;
pub mod synthetic;
pub mod tx;
pub mod wire;

pub use block::{BlockHeader, ExecutedBlock, PreparedBlock, SealedBlock, StateRef};
pub use changes::{AccountChange, ChangeSet, CodeChange};
pub use proposal::{Built, FinalizedItem, OnCommit, Parent, PipelineClosed};
pub use receipt::{Log, LogCriteria, Receipt};
pub use skip::SkipReason;
pub use spec::Spec;
pub use synthetic::synthetic_address;
pub use tx::{keccak256, PreparedTx, RecoveredTx};
