//! sluice's pipeline: one actor per stage, joined by bounded mailboxes.
//!
//! The pipeline, with the validator branch, is drawn in ARCHITECTURE.md
//! ("Bird's-eye view"). Every hop is a bounded mailbox ([`mailbox`]); a full mailbox makes the
//! stage before it wait, and a full recovery mailbox or mempool makes
//! admission answer `txpool is full`.
//!
//! Layout:
//! - [`node`]: assembly, threads and shutdown order.
//! - [`port`]: [`ValidatorPort`], the handle consensus drives a validator's
//!   pipeline through (build, restore, deliver, committed height).
//! - [`protocol`]: the messages each actor accepts.
//! - [`mailbox`]: bounded mailboxes with depth metrics.
//! - [`admission`], [`recovery`], [`nonce`], [`shard`], [`producer`], [`preparer`],
//!   [`executor`], [`committer`]: the stages, one actor per file.
//! - The JSON-RPC server is the `sluice-rpc` crate; it reaches the
//!   pipeline through [`admission::Admission`].
//! - [`metrics`]: metric names and the Prometheus exporter.
//! - [`faults`]: named failpoints; [`stall`]: an injected stall as a
//!   stage takes it; [`supervise`]: panic containment, restarts and
//!   escalation to a halt.
//! - [`journal`], [`journal_writer`]: the pending-transaction journal that
//!   makes every transaction answered with a hash survive a kill.
//! - [`replay`]: re-execution of a data dir against its hash vault.

pub mod admission;
pub mod committer;
pub mod executor;
pub mod faults;
pub mod journal;
pub mod journal_writer;
pub mod mailbox;
pub mod metrics;
pub mod node;
pub mod nonce;
pub mod port;
pub mod preparer;
pub mod producer;
pub mod protocol;
pub mod recovery;
pub mod replay;
pub mod shard;
pub mod stall;
pub mod supervise;
#[cfg(test)]
mod test_support;

pub use node::{build_genesis, Node, NodeError};
pub use port::ValidatorPort;
pub use producer::ProducerMode;
pub use protocol::Delivery;
