//! The executor's worker threads: a rayon pool that lives as long as the
//! executor, so that a block does not pay for spawning threads, and each
//! thread's allocator heap (and its warm caches) carries over from block to
//! block. Jobs borrow the block and the state reader (rayon's scoped
//! parallel iterators), which plain long-lived threads could not.

use std::{
    panic::{self, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Mutex, OnceLock, PoisonError,
    },
};

use crossbeam_utils::Backoff;
use rayon::{ThreadPool, ThreadPoolBuilder};

/// `n` workers: the calling thread and `n - 1` pool threads, started on
/// first use.
#[derive(Debug)]
pub(crate) struct Workers {
    n: usize,
    /// `None` if the threads could not be started.
    pool: OnceLock<Option<ThreadPool>>,
    /// Held by [`Workers::together`]: its jobs wait for each other, so two
    /// such runs sharing the pool could each hold a thread the other needs.
    exclusive: Mutex<()>,
}

impl Workers {
    pub(crate) fn new(n: usize) -> Self {
        Workers { n: n.max(1), pool: OnceLock::new(), exclusive: Mutex::new(()) }
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
        self.run(f)
    }

    /// Like [`Workers::each`], but the calls do run at the same time, one
    /// per thread, and may wait for each other at the [`Gate`] they are
    /// given.
    pub(crate) fn together<T: Send>(&self, f: impl Fn(usize, &Gate) -> T + Sync) -> Option<Vec<T>> {
        let _exclusive = lock(&self.exclusive);
        let gate = Gate { n: self.n, arrived: AtomicUsize::new(0), aborted: AtomicBool::new(false) };
        self.run(|w| {
            // A panicking call must not leave the others waiting forever.
            match panic::catch_unwind(AssertUnwindSafe(|| f(w, &gate))) {
                Ok(r) => r,
                Err(payload) => {
                    gate.aborted.store(true, Ordering::Release);
                    panic::resume_unwind(payload)
                }
            }
        })
    }

    fn run<T: Send>(&self, f: impl Fn(usize) -> T + Sync) -> Option<Vec<T>> {
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
        let finished = AtomicUsize::new(0);
        // A panic in a job resumes on this thread once every job is done.
        pool.in_place_scope(|s| {
            for (w, slot) in slots.iter().enumerate().skip(1) {
                let (f, finished) = (&f, &finished);
                s.spawn(move |_| {
                    *lock(slot) = Some(f(w));
                    finished.fetch_add(1, Ordering::Release);
                });
            }
            *lock(&slots[0]) = Some(f(0));
            // The other jobs are usually microseconds from done. The
            // scope's own wait blocks this thread on a condition variable,
            // and waking it took ~100 us here (~2% of a 5,000-transaction
            // block): wait here first, spinning then yielding, for a while.
            let (backoff, mut steps) = (Backoff::new(), 0);
            while finished.load(Ordering::Acquire) < self.n - 1 && steps < END_WAIT_STEPS {
                backoff.snooze();
                steps += 1;
            }
        });
        slots.into_iter().map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner)).collect()
    }
}

/// Steps (spins, then yields) the calling thread waits for the pool's jobs
/// before it blocks: a few milliseconds at most.
const END_WAIT_STEPS: u32 = 4_096;

/// Where the calls of [`Workers::together`] wait for each other between
/// phases (short waits: spinning, then yielding).
#[derive(Debug)]
pub(crate) struct Gate {
    n: usize,
    arrived: AtomicUsize,
    aborted: AtomicBool,
}

impl Gate {
    /// Waits until every call has passed `phase` (1 for the first wait, 2
    /// for the second...); `false` if a call panicked meanwhile.
    pub(crate) fn wait(&self, phase: usize) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        wait_until(&self.aborted, || (self.arrived.load(Ordering::Acquire) >= self.n * phase).then_some(()))
            .is_some()
    }
}

/// Waits until `ready` gives a value, or `None` once `stop` is set: the
/// other worker is usually microseconds away, so this spins (doubling
/// each step) and then yields the core, as `crossbeam_utils::Backoff`
/// does; it never blocks (the pool's threads park between blocks, not
/// here).
pub(crate) fn wait_until<T>(stop: &AtomicBool, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let backoff = Backoff::new();
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if stop.load(Ordering::Acquire) {
            return None;
        }
        backoff.snooze();
    }
}

/// Locks `m`, ignoring poisoning: a worker that panicked was caught (the
/// block then runs in order) and left nothing half-written that a later
/// block reads.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
