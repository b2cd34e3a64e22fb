//! The call pool: a few threads of their own that run the calls executing
//! the EVM for a caller (`eth_call`, `eth_estimateGas`,
//! `eth_createAccessList`, `eth_simulateV1`, `debug_trace*`), so that they never hold an
//! HTTP worker's event loop (every cheap read and submission on that
//! worker would wait behind them) nor an execution thread.
//!
//! Bounded twice: `rpc.call_workers` run at once and `rpc.call_queue_calls`
//! wait; past that a new call is refused at once with -32005, never
//! queued. Each call carries a [`Deadline`]: the caller is answered at it
//! whatever the worker is doing (geth's `execution aborted (timeout =
//! 5s)`), and the deadline is cancelled, so the EVM stops at its next
//! check and a call still waiting is dropped unrun.

use std::{thread, time::Duration};

use sluice_executor::Deadline;

use crate::{
    error::{RpcError, INTERNAL_ERROR, LIMIT_EXCEEDED, SERVER_ERROR},
    metrics as m,
};

/// How long after its deadline a call that has not stopped itself is
/// answered anyway: its EVM checks the deadline every 1,024 steps and
/// before each frame, so this is only reached inside a long precompile.
pub const GRACE: Duration = Duration::from_millis(200);

/// One queued call: runs on a worker, answers through its own channel.
type Job = Box<dyn FnOnce() + Send>;

/// How the call workers are scheduled beside the chain's threads (Linux;
/// elsewhere they run at the default priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// At this niceness (0-19): CFS weights give calls a share of a
    /// contended core (at 10, about a tenth).
    Nice(i32),
    /// `SCHED_IDLE`: calls run only on CPU the chain leaves, and a waking
    /// chain thread preempts them at once (a niced thread may keep the core
    /// until its slice ends, delaying the pipeline's hand-offs). On a busy
    /// chain calls may wait until their deadline.
    Idle,
}

/// The threads and their bounded queue.
pub struct CallPool {
    jobs: flume::Sender<(Deadline, Job)>,
    workers: usize,
    queue: usize,
}

impl CallPool {
    /// Starts `workers` threads (named `rpc-call-N`, scheduled at
    /// `priority`) taking calls from a queue of `queue`. They stop when the pool
    /// is dropped and its queue drained. A thread the OS refuses is logged
    /// and left out: calls then wait for the others (or, with none, answer
    /// at their deadline).
    pub fn new(workers: usize, queue: usize, priority: Priority) -> CallPool {
        let (jobs, rx) = flume::bounded::<(Deadline, Job)>(queue);
        let mut started = 0;
        for i in 0..workers {
            let rx = rx.clone();
            let spawned = thread::Builder::new().name(format!("rpc-call-{i}")).spawn(move || {
                lower_priority(priority);
                for (deadline, job) in rx.iter() {
                    metrics::gauge!(m::RPC_CALLS_QUEUED).decrement(1.0);
                    // Its caller was answered already: nothing to run for.
                    if deadline.passed() {
                        continue;
                    }
                    metrics::gauge!(m::RPC_CALLS_RUNNING).increment(1.0);
                    job();
                    metrics::gauge!(m::RPC_CALLS_RUNNING).decrement(1.0);
                }
            });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::error!(error = %e, "could not start an rpc call worker"),
            }
        }
        CallPool { jobs, workers: started, queue }
    }

    /// Runs `f` on a worker and answers what it returns, or -32005 at once
    /// when every worker is busy and the queue is full. `f` is expected to
    /// stop itself at `deadline` with its own error; if it has not answered
    /// [`GRACE`] later (a precompile cannot be interrupted), the deadline
    /// is cancelled and the caller gets `late` as a -32000 error.
    pub async fn run<T, F>(&self, deadline: &Deadline, late: String, f: F) -> Result<T, RpcError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, RpcError> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            // The caller may have stopped waiting: nothing to tell it.
            let _ = tx.send(f());
        });
        match self.jobs.try_send((deadline.clone(), job)) {
            Ok(()) => metrics::gauge!(m::RPC_CALLS_QUEUED).increment(1.0),
            Err(flume::TrySendError::Full(_)) => {
                metrics::counter!(m::RPC_CALLS_REFUSED).increment(1);
                return Err(RpcError::new(
                    LIMIT_EXCEEDED,
                    format!(
                        "too many calls in flight: {} running and {} waiting (rpc.call_workers, rpc.call_queue_calls)",
                        self.workers, self.queue
                    ),
                ));
            }
            Err(flume::TrySendError::Disconnected(_)) => {
                return Err(RpcError::new(INTERNAL_ERROR, "call workers stopped"))
            }
        }
        match tokio::time::timeout_at((deadline.instant() + GRACE).into(), rx).await {
            Ok(Ok(answer)) => answer,
            // The worker dropped the call (its deadline had passed) or died.
            Ok(Err(_)) => Err(RpcError::new(SERVER_ERROR, late)),
            Err(_) => {
                deadline.cancel();
                metrics::counter!(m::RPC_CALLS_TIMED_OUT).increment(1);
                Err(RpcError::new(SERVER_ERROR, late))
            }
        }
    }
}

/// Lowers this thread's CPU priority (Linux schedules threads by their
/// own policy and niceness): when the cores are busy, the chain's threads
/// (at 0) get the CPU before callers' calls, which still run at full speed
/// on an idle machine. Failing (a platform without per-thread priorities)
/// is logged and harmless.
fn lower_priority(priority: Priority) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid, setpriority and sched_setscheduler take plain
        // integers and a pointer to a param that outlives the call;
        // PRIO_PROCESS / a pid of a thread id set that thread only.
        let done = unsafe {
            let tid = libc::gettid();
            match priority {
                Priority::Nice(0) => 0,
                Priority::Nice(nice) => libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice),
                Priority::Idle => {
                    let param = libc::sched_param { sched_priority: 0 };
                    libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param)
                }
            }
        };
        if done != 0 {
            tracing::warn!(?priority, error = %std::io::Error::last_os_error(), "could not lower the call worker's priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = priority;
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            atomic::{AtomicBool, Ordering},
            Arc,
        },
        time::{Duration, Instant},
    };

    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
    }

    /// A call that holds its worker until `release` is set or its deadline
    /// is cancelled.
    fn hold(release: Arc<AtomicBool>, deadline: Deadline) -> impl FnOnce() -> Result<u32, RpcError> {
        move || {
            while !release.load(Ordering::Relaxed) && !deadline.passed() {
                thread::sleep(Duration::from_millis(1));
            }
            Ok(1)
        }
    }

    #[test]
    fn past_the_workers_and_the_queue_a_call_is_refused_at_once() {
        let pool = Arc::new(CallPool::new(1, 1, Priority::Nice(0)));
        let release = Arc::new(AtomicBool::new(false));
        let long = Deadline::after(Duration::from_secs(60));
        block_on(async {
            // One running, one waiting.
            let a = tokio::spawn({
                let (pool, r, d) = (pool.clone(), release.clone(), long.clone());
                async move { pool.run(&d, String::new(), hold(r, d.clone())).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            let b = tokio::spawn({
                let (pool, r, d) = (pool.clone(), release.clone(), long.clone());
                async move { pool.run(&d, String::new(), hold(r, d.clone())).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            let start = Instant::now();
            let e = pool.run(&long, String::new(), || Ok(3)).await.unwrap_err();
            assert_eq!(e.code, LIMIT_EXCEEDED);
            assert!(start.elapsed() < Duration::from_secs(1), "refused at once");
            release.store(true, Ordering::Relaxed);
            assert_eq!(a.await.unwrap().unwrap(), 1);
            assert_eq!(b.await.unwrap().unwrap(), 1);
            // Room again.
            assert_eq!(pool.run(&long, String::new(), || Ok(3)).await.unwrap(), 3);
        });
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn calls_run_at_the_configured_niceness() {
        let pool = CallPool::new(1, 1, Priority::Nice(7));
        let deadline = Deadline::after(Duration::from_secs(10));
        // SAFETY: plain integers, as in `lower_priority`.
        let nice = block_on(pool.run(&deadline, String::new(), || {
            Ok(unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) })
        }))
        .unwrap();
        assert_eq!(nice, 7);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn calls_run_in_the_idle_class_when_asked() {
        let pool = CallPool::new(1, 1, Priority::Idle);
        let deadline = Deadline::after(Duration::from_secs(10));
        // SAFETY: a plain integer; 0 is this thread.
        let policy =
            block_on(pool.run(&deadline, String::new(), || Ok(unsafe { libc::sched_getscheduler(0) })))
                .unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
    }

    #[test]
    fn a_call_past_its_deadline_is_answered_and_cancelled() {
        let pool = CallPool::new(1, 1, Priority::Nice(0));
        let deadline = Deadline::after(Duration::from_millis(100));
        let release = Arc::new(AtomicBool::new(false));
        let held = Arc::clone(&release);
        // A call that ignores its deadline (as a long precompile does).
        let stuck = move || {
            while !held.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1));
            }
            Ok(1)
        };
        let start = Instant::now();
        let e = block_on(pool.run(&deadline, deadline.message(), stuck)).unwrap_err();
        assert_eq!(e.message, "execution aborted (timeout = 100ms)");
        assert!(start.elapsed() < Duration::from_secs(2));
        assert!(deadline.passed(), "cancelled");
        // The worker is free again once the stuck call returns.
        release.store(true, Ordering::Relaxed);
        let next = Deadline::after(Duration::from_secs(10));
        assert_eq!(block_on(pool.run(&next, String::new(), || Ok(7))).unwrap(), 7);
    }
}
