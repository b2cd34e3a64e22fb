//! The executor's worker threads: a rayon pool that lives as long as the
//! executor, so that a block does not pay for spawning threads, and each
//! thread's allocator heap (and its warm caches) carries over from block to
//! block. Jobs borrow the block and the state reader (rayon's scoped
//! parallel iterators), which plain long-lived threads could not.

use std::sync::{Mutex, OnceLock, PoisonError};

use rayon::{ThreadPool, ThreadPoolBuilder};

use super::mv::lock;

/// `n` workers: the calling thread and `n - 1` pool threads, started on
/// first use.
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

    /// Runs `f(w)` for every worker `w` and returns the results in worker
    /// order; `None` when the threads could not be started. Worker 0 is the
    /// calling thread (its caches are warm with what it did last), the
    /// others are the pool's `n - 1` threads. Callers must not rely on the
    /// calls running at the same time: each must be able to finish alone.
    pub(crate) fn each<T: Send>(&self, f: impl Fn(usize) -> T + Sync) -> Option<Vec<T>> {
        if self.n == 1 {
            return Some(vec![f(0)]);
        }
        let pool = self
            .pool
            .get_or_init(|| {
                ThreadPoolBuilder::new()
                    .num_threads(self.n - 1)
                    .thread_name(|i| format!("sluice-occ-{}", i + 1))
                    .build()
                    .ok()
            })
            .as_ref()?;
        let slots: Vec<Mutex<Option<T>>> = (0..self.n).map(|_| Mutex::new(None)).collect();
        // A panic in a job resumes on this thread once every job is done.
        pool.in_place_scope(|s| {
            for (w, slot) in slots.iter().enumerate().skip(1) {
                let f = &f;
                s.spawn(move |_| *lock(slot) = Some(f(w)));
            }
            *lock(&slots[0]) = Some(f(0));
        });
        slots.into_iter().map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner)).collect()
    }
}
