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
    time::Duration,
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

    /// Runs `f(w, gate)` for every worker `w`, all at the same time, one
    /// per thread, and returns the results in worker order; `None` when the
    /// threads could not be started. Worker 0 is the calling thread (its
    /// caches are warm with what it did last), the others are the pool's
    /// `n - 1` threads. The calls may wait for each other, at the [`Gate`]
    /// or on a [`Wake`] of their own: one such run holds the pool at a time,
    /// so two callers cannot each hold a thread the other's calls wait for.
    pub(crate) fn together<T: Send>(&self, f: impl Fn(usize, &Gate) -> T + Sync) -> Option<Vec<T>> {
        let _exclusive = lock(&self.exclusive);
        let gate = Gate {
            n: self.n,
            arrived: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
            wake: Wake::default(),
        };
        self.run(|w| {
            // A panicking call must not leave the others waiting forever.
            match panic::catch_unwind(AssertUnwindSafe(|| f(w, &gate))) {
                Ok(r) => r,
                Err(payload) => {
                    gate.abort();
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
            // block): spin here first, briefly, never yielding (a yield
            // gives the core back to this thread, not to the job it waits
            // for, when the cores are busy).
            let backoff = Backoff::new();
            for _ in 0..SPIN_STEPS {
                if finished.load(Ordering::Acquire) >= self.n - 1 {
                    break;
                }
                backoff.spin();
            }
        });
        slots.into_iter().map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner)).collect()
    }
}

/// Steps of `Backoff::spin` (1, 2, 4 ... 64 pause instructions, then 64
/// each) a waiter spins before it parks: ~1,000 pauses, some 10-40 us
/// depending on the CPU. With a core each, the other worker is usually
/// closer than that; when it is not running, parking gives it the core.
const SPIN_STEPS: u32 = 20;

/// A waiter parks at most this long before it looks again. Progress
/// always wakes it ([`Wake::all`]); this only bounds a wake-up that went
/// missing.
const PARK_LIMIT: Duration = Duration::from_millis(5);

/// Where workers wait for each other's progress (a chunk made final, a
/// phase passed, a stop). A waiter spins briefly, then parks until whoever
/// made progress wakes it. It must not merely yield: when the cores are
/// busy (admission's sender recovery under load), a yielding waiter keeps
/// being scheduled and takes turns from the very thread it waits for.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    /// Held from a waiter's last look to its parking, and by the waker
    /// around its notification, so that no wake-up falls between the two.
    lock: parking_lot::Mutex<()>,
    parked: parking_lot::Condvar,
}

impl Wake {
    /// Wakes every parked waiter: called after any progress another worker
    /// may wait for. Cheap when no one is parked (an uncontended lock).
    pub(crate) fn all(&self) {
        let _held = self.lock.lock();
        self.parked.notify_all();
    }

    /// Waits until `ready` gives a value, or `None` once `stop` is set
    /// (whoever sets it calls [`Wake::all`]).
    pub(crate) fn until<T>(&self, stop: &AtomicBool, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
        let backoff = Backoff::new();
        for _ in 0..SPIN_STEPS {
            if let Some(value) = ready() {
                return Some(value);
            }
            if stop.load(Ordering::Acquire) {
                return None;
            }
            backoff.spin();
        }
        let mut held = self.lock.lock();
        loop {
            if let Some(value) = ready() {
                return Some(value);
            }
            if stop.load(Ordering::Acquire) {
                return None;
            }
            self.parked.wait_for(&mut held, PARK_LIMIT);
        }
    }
}

/// Where the calls of [`Workers::together`] wait for each other between
/// phases.
#[derive(Debug)]
pub(crate) struct Gate {
    n: usize,
    arrived: AtomicUsize,
    aborted: AtomicBool,
    wake: Wake,
}

impl Gate {
    /// Waits until every call has passed `phase` (1 for the first wait, 2
    /// for the second...); `false` if a call panicked meanwhile.
    pub(crate) fn wait(&self, phase: usize) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        self.wake.all();
        self.wake
            .until(&self.aborted, || (self.arrived.load(Ordering::Acquire) >= self.n * phase).then_some(()))
            .is_some()
    }

    /// A call panicked: the others stop waiting.
    fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        self.wake.all();
    }
}

/// Locks `m`, ignoring poisoning: a worker that panicked was caught (the
/// block then runs in order) and left nothing half-written that a later
/// block reads.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
