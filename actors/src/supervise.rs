//! Panic containment, restarts and escalation for the pipeline's actors.
//!
//! actix does not catch a panic in a handler: it unwinds through the
//! arbiter's event loop and kills the thread with every actor on it, while
//! the rest of the node keeps running (a silent partial node); `Supervised`
//! restarts only after `ctx.stop()` and reuses the actor value. So each
//! stage wraps its handler body in [`contain`], and on a panic rebuilds its
//! own state (from the store, where it has state) and retries the message in
//! place. A [`Supervisor`] counts restarts (`sluice_actor_restarts_total`)
//! and failures; more than `supervision.max_failures` within
//! `supervision.window_ms` halts the node through the store's latch: a clean
//! halt whose reason is logged, shown by `sluice_store_halted`, given to
//! every refused admission, and makes the process exit non-zero on shutdown.

use std::{
    any::Any,
    collections::VecDeque,
    future::Future,
    panic::{catch_unwind, AssertUnwindSafe},
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use parking_lot::{const_mutex, const_rwlock, Mutex, RwLock};
use sluice_store::Halt;

use crate::{
    faults::{Action, Failpoint, Site},
    metrics as m,
};

/// When repeated failures escalate, and how retries are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Failures (panics, errors, lost messages) tolerated within `window`;
    /// one more halts the node.
    pub max_failures: u32,
    /// The window failures are counted over.
    pub window: Duration,
    /// Wait before the n-th consecutive retry on a stage's own thread is
    /// `n * retry_backoff` (capped at one second).
    pub retry_backoff: Duration,
}

type HaltHook = Box<dyn Fn(Halt) + Send + Sync>;

static POLICY: RwLock<Policy> = const_rwlock(Policy {
    max_failures: 5,
    window: Duration::from_secs(10),
    retry_backoff: Duration::from_millis(10),
});
static HALT: Mutex<Option<HaltHook>> = const_mutex(None);

/// Sets the policy and what halting the node means (the node latches its
/// store), and registers every actor's restart counter at zero.
pub fn install(policy: Policy, halt: impl Fn(Halt) + Send + Sync + 'static) {
    *POLICY.write() = policy;
    *HALT.lock() = Some(Box::new(halt));
    for site in Site::ALL {
        metrics::counter!(m::ACTOR_RESTARTS, "actor" => site.name()).increment(0);
    }
    for reason in [
        m::DROP_FAULT,
        m::DROP_HALTED,
        m::DROP_FUTURE_EXPIRED,
        m::DROP_FUTURE_REFUSED,
        m::DROP_FUTURE_EVICTED,
        m::DROP_EVICTED,
    ] {
        metrics::counter!(m::TXS_DROPPED, "reason" => reason).increment(0);
    }
}

/// Runs `f`; a panic becomes `Err(its message)` instead of unwinding into
/// the event loop.
pub fn contain<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(p.as_ref()))
}

/// A future polled inside `catch_unwind` (for futures an actor runs with
/// `ctx.wait`, outside any handler body): a panic while polling becomes
/// `Err(message)`, and the inner future is dropped, never polled again.
pub struct Contained<F> {
    inner: Option<Pin<Box<F>>>,
}

impl<F: Future> Contained<F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        Contained { inner: Some(Box::pin(f)) }
    }
}

impl<F: Future> Future for Contained<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(Err("polled after a panic".into()));
        };
        match contain(|| inner.as_mut().poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                self.inner = None;
                Poll::Ready(Ok(v))
            }
            Err(panic) => {
                self.inner = None;
                Poll::Ready(Err(panic))
            }
        }
    }
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

/// A stage gave up on block `number` of `txs` transactions because the
/// node halted.
pub fn report_abandoned(stage: &'static str, number: u64, txs: usize) {
    // Each admitted transaction in it is reported lost by hash, once, by
    // `report_lost` (the in-flight index holds them all, wherever they
    // were in the pipeline); those another validator proposed were never
    // this node's to report.
    tracing::warn!(stage, number, txs, "block abandoned: the node halted");
}

/// The node halted (`why`): every admitted, uncommitted transaction is
/// lost. Each is taken out of the in-flight index (so
/// `eth_getTransactionByHash` answers null, not pending), logged with its
/// hash and counted in `sluice_txs_dropped_total{reason="halted"}`, once.
/// Returns how many.
pub fn report_lost(pending: &sluice_txpool::PendingTxs, why: &str) -> usize {
    let lost = pending.drain();
    for tx in &lost {
        tracing::error!(tx = %tx.hash, sender = %tx.sender, nonce = tx.nonce(), why, "admitted transaction lost: the node halted before committing it");
    }
    metrics::counter!(m::TXS_DROPPED, "reason" => m::DROP_HALTED).increment(lost.len() as u64);
    lost.len()
}

/// Whether a failed message may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Rebuild (after a panic) and retry.
    Retry,
    /// The node is halted: give up on the message, report it.
    Halted,
}

/// A stage's failure record.
pub struct Supervisor {
    site: Site,
    recent: VecDeque<Instant>,
    restarts: metrics::Counter,
    halted: bool,
}

impl Supervisor {
    /// The supervisor of `site`'s actor.
    pub fn new(site: Site) -> Self {
        Supervisor {
            site,
            recent: VecDeque::new(),
            restarts: metrics::counter!(m::ACTOR_RESTARTS, "actor" => site.name()),
            halted: false,
        }
    }

    /// A panic was contained: counts a restart; on `Retry` the caller
    /// rebuilds its state and retries.
    pub fn panicked(&mut self, detail: &str) -> Verdict {
        self.restarts.increment(1);
        tracing::error!(actor = self.site.name(), panic = detail, "actor panicked; restarting it in place");
        self.failure(format!("panic: {detail}"))
    }

    /// An operation failed (or a message was lost) without a panic.
    pub fn failed(&mut self, detail: &str) -> Verdict {
        tracing::warn!(actor = self.site.name(), error = detail, "actor operation failed; retrying");
        self.failure(detail.to_string())
    }

    fn failure(&mut self, reason: String) -> Verdict {
        if self.halted {
            return Verdict::Halted;
        }
        let policy = *POLICY.read();
        let now = Instant::now();
        self.recent.push_back(now);
        while self.recent.front().is_some_and(|t| now.duration_since(*t) > policy.window) {
            self.recent.pop_front();
        }
        if self.recent.len() as u64 <= u64::from(policy.max_failures) {
            return Verdict::Retry;
        }
        self.halted = true;
        let halt = Halt::GaveUp {
            site: self.site.name().to_string(),
            cause: format!(
                "failed {} times within {} ms (last: {reason})",
                self.recent.len(),
                policy.window.as_millis()
            ),
        };
        tracing::error!(actor = self.site.name(), reason = %halt, "too many failures; halting the node");
        if let Some(hook) = HALT.lock().as_ref() {
            hook(halt);
        }
        Verdict::Halted
    }

    /// How long to wait before the next retry on a stage's own thread.
    pub fn backoff(&self) -> Duration {
        let policy = *POLICY.read();
        (policy.retry_backoff * self.recent.len() as u32).min(Duration::from_secs(1))
    }

    /// True once this supervisor halted the node.
    pub fn halted(&self) -> bool {
        self.halted
    }
}

/// What an attempt must inject at the stage's chosen point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    /// Nothing.
    Nothing,
    /// Panic there.
    Panic,
    /// Fail there with an error.
    Error,
}

impl Inject {
    /// Applies the injection at this point of the handler.
    pub fn strike(self, site: Site) -> Result<(), AttemptError> {
        match self {
            Inject::Nothing => Ok(()),
            Inject::Panic => panic!("injected panic at failpoint {}", site.name()),
            Inject::Error => Err(AttemptError::Injected(site)),
        }
    }
}

/// Why a stage's attempt failed and may be retried. Real fatal failures (a
/// failed commit) are handled inside the stage; what is left to retry is
/// an injected error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttemptError {
    /// An error injected at the stage's failpoint.
    #[error("injected error at failpoint {}", .0.name())]
    Injected(Site),
}

/// A stage that runs alone on its own thread and handles each message by
/// reference, so a failed attempt can be retried with the same message.
pub trait Stage {
    /// The message.
    type Msg;
    /// Handles the message once. Real fatal failures (a failed commit) are
    /// handled inside and return `Ok`; `Err` means the attempt may be
    /// retried. `inject` is struck at the stage's fault point.
    fn attempt(&mut self, msg: &Self::Msg, inject: Inject) -> Result<(), AttemptError>;
    /// Rebuilds the stage's state after a contained panic.
    fn rebuild(&mut self);
    /// The node halted before the message could be handled: report it.
    fn abandon(&mut self, msg: &Self::Msg);
    /// The stage's supervisor.
    fn supervisor(&mut self) -> &mut Supervisor;
}

/// Handles `msg` on a stage's own thread with failpoint `fp`: panics are
/// contained (rebuild, retry), errors and lost messages are retried after a
/// backoff, and a supervisor that escalates abandons the message. Delays
/// and stalls block this thread only, which is the stage's alone.
pub fn run_blocking<S: Stage>(stage: &mut S, fp: &Failpoint, msg: &S::Msg) {
    loop {
        let mut stall = None;
        let inject = match fp.fire() {
            None => Inject::Nothing,
            Some(Action::Panic) => Inject::Panic,
            Some(Action::Error) => Inject::Error,
            Some(Action::Delay(d)) => {
                std::thread::sleep(d);
                Inject::Nothing
            }
            Some(Action::Stall(d)) => {
                stall = Some(d);
                Inject::Nothing
            }
            Some(Action::Drop) => {
                // A block cannot be skipped without forking the chain, so a
                // lost block message is redelivered; a stage that keeps
                // losing it escalates like any other failure.
                if stage.supervisor().failed("message dropped; redelivering it") == Verdict::Halted {
                    stage.abandon(msg);
                    return;
                }
                std::thread::sleep(stage.supervisor().backoff());
                continue;
            }
        };
        let verdict = match contain(|| stage.attempt(msg, inject)) {
            Ok(Ok(())) => {
                if let Some(d) = stall {
                    std::thread::sleep(d);
                }
                return;
            }
            Ok(Err(e)) => stage.supervisor().failed(&e.to_string()),
            Err(panic) => {
                let v = stage.supervisor().panicked(&panic);
                if v == Verdict::Retry {
                    if let Err(p) = contain(|| stage.rebuild()) {
                        tracing::error!(panic = p, "rebuilding an actor's state panicked");
                    }
                }
                v
            }
        };
        if verdict == Verdict::Halted {
            stage.abandon(msg);
            return;
        }
        std::thread::sleep(stage.supervisor().backoff());
    }
}

/// Held by unit tests that touch the process-wide hooks (the halt hook, the
/// policy, armed failpoints) or run a node that installs them, so that one
/// test's escalation never halts another test's node.
#[cfg(test)]
pub(crate) static PROCESS_HOOKS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_with_its_message() {
        assert_eq!(contain(|| 7), Ok(7));
        let r: Result<(), String> = contain(|| panic!("boom {}", 1));
        assert_eq!(r, Err("boom 1".to_string()));
    }

    #[test]
    fn failures_past_the_limit_within_the_window_halt_once() {
        let _hooks = PROCESS_HOOKS.blocking_lock();
        let mut sup = Supervisor::new(Site::Producer);
        let limit = POLICY.read().max_failures;
        for _ in 0..limit {
            assert_eq!(sup.failed("x"), Verdict::Retry);
        }
        assert_eq!(sup.panicked("y"), Verdict::Halted);
        assert!(sup.halted());
        assert_eq!(sup.failed("z"), Verdict::Halted, "halted stays halted");
    }
}
