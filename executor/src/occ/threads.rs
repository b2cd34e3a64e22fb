//! The executor's worker threads: a rayon pool that lives as long as the
//! executor, so that a block does not pay for spawning threads, and each
//! thread's allocator heap (and its warm caches) carries over from block to
//! block. Jobs borrow the block and the state reader (rayon's scoped
//! parallel iterators), which plain long-lived threads could not.

use std::sync::OnceLock;

use rayon::{
    iter::{IntoParallelIterator, ParallelIterator},
    ThreadPool, ThreadPoolBuilder,
};

/// `n` worker threads, started on first use.
#[derive(Debug)]
pub(crate) struct Workers {
    n: usize,
    /// `None` if the threads could not be started.
    pool: OnceLock<Option<ThreadPool>>,
}

impl Workers {
    pub(crate) fn new(n: usize) -> Self {
        Workers { n: n.max(1), pool: OnceLock::new() }
    }

    /// How many.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Runs `f(w)` for every worker `w`, on the pool (one worker: on the
    /// calling thread), and returns the results in worker order; `None` when
    /// the threads could not be started. Callers must not rely on the calls
    /// running at the same time: each must be able to finish alone.
    pub(crate) fn each<T: Send>(&self, f: impl Fn(usize) -> T + Sync) -> Option<Vec<T>> {
        if self.n == 1 {
            return Some(vec![f(0)]);
        }
        let pool = self
            .pool
            .get_or_init(|| {
                ThreadPoolBuilder::new()
                    .num_threads(self.n)
                    .thread_name(|i| format!("sluice-occ-{i}"))
                    .build()
                    .ok()
            })
            .as_ref()?;
        // A panic in a job resumes on this thread once every job is done.
        Some(pool.install(|| (0..self.n).into_par_iter().map(&f).collect()))
    }
}
