//! `sluice load`: a load generator for any Ethereum JSON-RPC node (sluice,
//! anvil, geth, reth), reached on the loopback interface only.
//!
//! It offers a fixed rate of pre-signed transactions, open loop, and
//! compares what the node admitted with what it included, found by
//! scanning blocks rather than trusting send results.
//!
//! ```text
//!  keys ─▶ setup (deploy, mint) ─▶ nonces ─▶ pre-sign on all cores ─▶ clock starts
//!                                                                      │
//!   sender threads (one keep-alive connection each, JSON-RPC batches) ◀┘
//!        │ admitted / rejected by class / dropped       block scanner (eth_getBlockByNumber)
//!        ▼                                                     │ included
//!   monitor: one progress line a second (+ sluice's pipeline gauges, node /proc)
//!        ▼
//!   summary (text, --json), plot (--plot SVG)
//! ```
//!
//! # Layout
//! - [`cli`]: the command line ([`LoadCommand`]).
//! - [`keys`] / [`genesis`]: seeded or mnemonic sender keys; the genesis
//!   file that funds seeded keys.
//! - [`workload`]: what each transaction does; parallel pre-signing.
//! - [`contracts`]: hand-assembled counter and ERC-20-like token.
//! - [`setup`]: chain id, nonces, deploys, mints, recovery cost.
//! - [`schedule`]: the open-loop schedule and the in-flight bound.
//! - [`engine`]: sender threads, nonce resync after refusals.
//! - [`scanner`]: inclusion by block scanning.
//! - [`monitor`]: per-second rows, Prometheus and /proc sampling.
//! - [`stats`]: error classes, counters, tally, percentiles.
//! - [`report`] / [`plot`]: the summary and the SVG.
//! - [`run`]: the run from start to summary.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cli;
pub mod contracts;
pub mod engine;
pub mod error;
pub mod genesis;
pub mod keys;
pub mod monitor;
pub mod plot;
pub mod report;
pub mod rpc;
pub mod run;
pub mod scanner;
pub mod schedule;
pub mod setup;
pub mod stats;
pub mod workload;

pub use cli::{LoadCommand, LoadSubcommand};
pub use error::LoadError;
pub use report::Summary;

use alloy_primitives::U256;

/// Runs `sluice load …`: writes a genesis, or runs a load and prints its
/// summary.
pub fn main(cmd: LoadCommand) -> Result<(), LoadError> {
    match cmd.command {
        Some(LoadSubcommand::Genesis(g)) => {
            let addrs: Vec<_> =
                keys::seeded_keys(g.seed, g.accounts as usize).iter().map(|s| s.address()).collect();
            let spec = genesis::GenesisSpec {
                chain_id: g.chain_id,
                gas_limit: g.gas_limit,
                balance_wei: U256::from(g.balance_eth) * U256::from(10u64).pow(U256::from(18u64)),
            };
            let text = genesis::genesis_json(&spec, &addrs);
            match g.out {
                Some(path) => std::fs::write(&path, text).map_err(|e| LoadError::io(path, e)),
                None => {
                    print!("{text}");
                    Ok(())
                }
            }
        }
        None => run::run(&cmd.run).map(|_| ()),
    }
}
