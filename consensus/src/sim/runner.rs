//! Running a scenario: a seed in the deterministic runtime, waits in
//! virtual time, and the load scenarios submit.

use std::{collections::HashMap, time::Duration};

use alloy_primitives::B256;
use commonware_runtime::{deterministic, Runner as _};

use super::{
    chain::{sender, transfer},
    network::Sim,
};

/// The unit scenarios give their deadlines in (virtual time).
pub(crate) const MINUTE: Duration = Duration::from_secs(60);

/// The seed of a run: `SIM_SEED` replays one; else `default`.
pub(crate) fn seed(default: u64) -> u64 {
    std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Runs `f` in the deterministic runtime, printing the seed first so a
/// failure names it.
pub(crate) fn run<F, Fut>(name: &str, default_seed: u64, f: F) -> Fut::Output
where
    F: FnOnce(deterministic::Context) -> Fut,
    Fut: std::future::Future,
{
    let seed = seed(default_seed);
    eprintln!("{name}: seed {seed} (replay with SIM_SEED={seed})");
    let cfg = deterministic::Config::new().with_seed(seed).with_timeout(Some(Duration::from_secs(3600)));
    deterministic::Runner::new(cfg).start(f)
}

impl Sim {
    /// Waits (virtual time) until every node in `nodes` has committed
    /// `height`; panics after `limit`.
    pub(crate) async fn reach(&self, nodes: &[usize], height: u64, limit: Duration) {
        use commonware_runtime::Clock as _;
        let start = self.ctx.current();
        while nodes.iter().any(|&i| self.recorder.head(i) < height) {
            let waited = self.ctx.current().duration_since(start).unwrap_or_default();
            let heads: Vec<u64> = nodes.iter().map(|&i| self.recorder.head(i)).collect();
            assert!(waited < limit, "nodes {nodes:?} stuck at {heads:?} below {height} after {waited:?}");
            self.ctx.sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits `d` of virtual time.
    pub(crate) async fn sleep(&self, d: Duration) {
        use commonware_runtime::Clock as _;
        self.ctx.sleep(d).await;
    }

    /// The highest height any node committed.
    pub(crate) fn max_head(&self) -> u64 {
        (0..self.keys.len()).map(|i| self.recorder.head(i)).max().unwrap_or(0)
    }
}

/// Submits `count` transfers to each of `nodes`, from one sender per node
/// (so each sender's nonces stay on one validator, as with real clients).
pub(crate) fn submit(
    sim: &Sim,
    nodes: &[usize],
    count: u64,
    nonces: &mut HashMap<usize, u64>,
    sent: &mut Vec<B256>,
) {
    for &i in nodes {
        let s = sender(i);
        let next = nonces.entry(i).or_default();
        for _ in 0..count {
            let tx = transfer(&s, *next);
            sent.push(tx.hash);
            sim.backend(i).submit(tx);
            *next += 1;
        }
    }
}
