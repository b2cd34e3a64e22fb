//! Deterministic simulation: N validators running this crate's engine
//! (the real block codec, application, sink, forwarder and own proposals, on real
//! simplex and marshal) on commonware's deterministic runtime and
//! simulated network, in virtual time, from a seed.
//!
//! Only the actor pipeline is replaced: [`SimBackend`] builds blocks from
//! an in-process FIFO, prepares, executes (the sequential executor, the
//! oracle the node's executors are tested against) and commits (an
//! in-memory store) synchronously in the forwarder's task. The real
//! pipeline behind the same trait is covered by the process tests. A
//! crashed validator loses its store and mempool, as a process would, and
//! is rebuilt from genesis by marshal's redelivery and backfill.
//!
//! The harness, by job:
//! - `chain.rs`: the chain every run uses (rules, genesis, funded
//!   senders, transfers).
//! - `backend.rs`: [`SimBackend`], the pipeline behind one node.
//! - `network.rs`: [`Sim`], the simulated network, its links, and the
//!   cuts that partition it.
//! - `nodes.rs`: starting, crashing and restarting validators and
//!   followers, and the equivocating mock.
//! - `runner.rs`: a seed run in the deterministic runtime, waits in
//!   virtual time, the load scenarios submit.
//! - `checks.rs`: what scenarios assert against: the [`Recorder`] of
//!   every commit, the evidence counter, the archives' sections.
//!
//! The scenarios, one file per behaviour: `agreement_tests.rs`,
//! `partition_tests.rs`, `crash_tests.rs`, `misbehaviour_tests.rs`,
//! `inclusion_tests.rs`, `pruning_tests.rs`, `follower_tests.rs` and
//! `verify_tests.rs`. Each run prints its seed; `SIM_SEED=N` replays one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod backend;
mod chain;
mod checks;
mod network;
mod nodes;
mod runner;

mod agreement_tests;
mod crash_tests;
mod follower_tests;
mod inclusion_tests;
mod misbehaviour_tests;
mod partition_tests;
mod pruning_tests;
mod verify_tests;

pub(crate) use backend::SimBackend;
pub(crate) use chain::{
    genesis, rules, sender, transfer, transfer_tx, ARCHIVE_SECTION, CHAIN_ID, QUOTA, SKIP_TIMEOUT,
};
pub(crate) use checks::{evidence_counted, Recorder};
pub(crate) use network::{link, Sim};
pub(crate) use runner::{run, seed, submit, MINUTE};
