//! An optional thread budget for the node, split between its pools by
//! weight.
//!
//! Five pools run the node's CPU work: the HTTP workers, admission's
//! sender recovery, block preparation, execution and the consensus
//! runtime. By default each has one thread per core. With
//! `pipeline.thread_budget` set, each pool not sized explicitly gets its
//! weight's share of the budget instead, at least one thread: a cap for a
//! node sharing a large machine.
//!
//! Why no budget by default: on 2 vCPUs one thread per pool (a budget of
//! one per core) included ~20% fewer transfers at saturation than one per
//! core per pool (PERFORMANCE.md, "One thread budget"): a pool that waits
//! for another (the HTTP workers for recovery) leaves its core idle, and
//! the one waiting for threads to be scheduled, lanes handing chunks on,
//! now runs in order while admission works (`executor/src/parallel/rule.rs`).
//!
//! The weights follow where the time goes under load: recovering a
//! sender (~40 us a transaction) is the largest job, executing and
//! serving HTTP next, preparation (mostly cache hits of admission's
//! recoveries) and consensus (votes, a block's dissemination) least.

/// A pool of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// `rpc.workers`: HTTP and WebSocket serving.
    Http,
    /// `pipeline.recovery_workers`: admission's checks and sender recovery.
    Recovery,
    /// `pipeline.prepare_workers`: block preparation (hashing, recovery).
    Prepare,
    /// `pipeline.execute_workers`: the parallel executor's workers.
    Execute,
    /// `consensus.worker_threads`: the consensus runtime.
    Consensus,
}

impl Pool {
    /// Every pool, in the order shares are handed out.
    pub const ALL: [Pool; 5] = [Pool::Recovery, Pool::Execute, Pool::Http, Pool::Prepare, Pool::Consensus];

    /// Its weight in the budget.
    fn weight(self) -> usize {
        match self {
            Pool::Recovery => 3,
            Pool::Execute | Pool::Http => 2,
            Pool::Prepare | Pool::Consensus => 1,
        }
    }
}

/// The sum of the weights.
fn total_weight() -> usize {
    Pool::ALL.iter().map(|p| p.weight()).sum()
}

/// `pool`'s threads out of `budget`: its weight's share, rounded down, at
/// least one. (So every pool has one thread on a small machine: the five
/// can then exceed the budget, never by more than the pools it starves.)
pub fn share(pool: Pool, budget: usize) -> usize {
    (budget * pool.weight() / total_weight()).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(budget: usize) -> Vec<usize> {
        Pool::ALL.iter().map(|p| share(*p, budget)).collect()
    }

    #[test]
    fn small_machines_get_one_thread_per_pool() {
        for budget in [1, 2, 4] {
            assert_eq!(shares(budget), vec![1; 5], "budget {budget}");
        }
    }

    #[test]
    fn large_budgets_split_by_weight_within_the_budget() {
        // Recovery, execute, http, prepare, consensus.
        assert_eq!(shares(9), vec![3, 2, 2, 1, 1]);
        assert_eq!(shares(16), vec![5, 3, 3, 1, 1]);
        assert_eq!(shares(192), vec![64, 42, 42, 21, 21]);
        for budget in 9..=512 {
            assert!(shares(budget).iter().sum::<usize>() <= budget, "budget {budget}");
        }
    }
}
