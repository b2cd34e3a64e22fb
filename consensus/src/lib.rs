//! sluice as one of N validators on Commonware's BFT consensus (simplex
//! for votes, marshal for block dissemination, ordering, persistence and
//! backfill), over authenticated, encrypted TCP; or as a follower of them
//! (marshal alone, fed with verified finalizations: `follower.rs`).
//! Where this sits in the node's pipeline: ARCHITECTURE.md, "Consensus".
//!
//! Every commonware type stays inside this crate. The node starts
//! consensus with [`run::spawn`]; consensus reaches the node only through
//! the [`Backend`] trait, in plain sluice types: it asks for a proposal
//! ([`Backend::build`]) and hands on each finalized block once, in order
//! ([`Backend::deliver`]), acknowledging it to marshal only once the node
//! has committed it, so a restart redelivers what was not committed.
//!
//! Execution is agreed on afterwards: each header carries a state
//! reference, an earlier height's app hash as its proposer computed it;
//! the other validators refuse a proposal whose reference disagrees with
//! their own, and a node whose own app hash disagrees with a finalized
//! reference halts (store commit).

mod app;
mod archives;
pub mod backend;
mod behind;
pub mod block;
mod engine;
mod feed;
mod follower;
mod gossip;
pub mod idle_links;
pub mod metrics;
pub mod proposals;
pub mod rules;
pub mod run;
#[cfg(test)]
mod sim;
mod sink;
pub mod testnet;
mod upstream;
pub mod validators;

pub use backend::{Backend, BuildRequest, Built, FinalizedItem, OnCommit, Parent, PipelineClosed};
pub use engine::{EngineError, Timeouts};
pub use gossip::{BatchError, GossipLimits};
pub use rules::Rules;
pub use run::{spawn, ConsensusError, LinkTimeouts, Running, ValidatorConfig};
pub use validators::{ValidatorEntry, ValidatorSet};

/// Describes and zeroes the consensus metrics.
pub fn describe_metrics() {
    metrics::describe();
}
