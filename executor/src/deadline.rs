//! Bounds on one EVM run made for a caller (`eth_call`, an estimate, an
//! access list, a trace): a wall-clock [`Deadline`] that the caller may
//! also cancel, and a memory limit, bundled as [`CallLimits`].
//!
//! The deadline is enforced by the [`Watch`] inspector: it reads the clock
//! every [`CLOCK_EVERY_STEPS`] steps and before every call or creation
//! frame (so a precompile is never *started* past it), and once it has
//! passed every frame halts at its next step, unwinding the transaction at
//! once. A precompile already running is not interrupted (revm has no hook
//! inside one); the gas cap bounds what it can cost, and the RPC layer
//! answers the caller at the deadline whatever the thread is doing.

use std::{
    fmt,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use revm::interpreter::{
    interpreter_types::Jumps as _, CallInputs, CallOutcome, CreateInputs, CreateOutcome, InstructionResult,
    Interpreter,
};
use revm::Inspector;

/// Steps between clock reads: a step is tens of nanoseconds, a clock read
/// about as much.
pub(crate) const CLOCK_EVERY_STEPS: u64 = 1024;

/// When a run must stop: an instant, or earlier if [`Deadline::cancel`] is
/// called (the caller gave up). Clones share the cancellation.
#[derive(Debug, Clone)]
pub struct Deadline {
    at: Instant,
    /// The timeout the deadline was made from, for the error message.
    timeout: Duration,
    cancelled: Arc<AtomicBool>,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub fn after(timeout: Duration) -> Deadline {
        Deadline::at(Instant::now() + timeout, timeout)
    }

    /// A deadline at `at`, reported as a `timeout` in messages.
    pub fn at(at: Instant, timeout: Duration) -> Deadline {
        Deadline { at, timeout, cancelled: Arc::default() }
    }

    /// The instant it passes.
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// The timeout it was made from.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Stops every run watching this deadline at its next check.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether it has passed or was cancelled.
    pub fn passed(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || Instant::now() >= self.at
    }

    /// geth's error for a call stopped by its deadline
    /// (`execution aborted (timeout = 5s)`, the timeout as Go prints it).
    pub fn message(&self) -> String {
        format!("execution aborted (timeout = {})", GoDuration(self.timeout))
    }
}

/// What one caller's EVM run may spend besides its gas.
#[derive(Debug, Clone)]
pub struct CallLimits {
    /// When it must stop.
    pub deadline: Deadline,
    /// The EVM memory (all frames together) it may use; past it the frame
    /// halts out of gas, as revm's `memory_limit` does.
    pub memory_limit_bytes: u64,
}

impl CallLimits {
    /// Limits of `timeout` from now and `memory_limit_bytes`.
    pub fn new(timeout: Duration, memory_limit_bytes: u64) -> CallLimits {
        CallLimits { deadline: Deadline::after(timeout), memory_limit_bytes }
    }
}

/// The inspector that enforces a [`Deadline`]: once it has passed, every
/// frame halts at its next step and no new frame starts. The halt is an
/// out-of-gas (a fatal halt panics in revm's post-execution); the caller
/// checks [`Watch::hit`] and reports the deadline instead of the result.
#[derive(Debug)]
pub struct Watch {
    deadline: Deadline,
    steps: u64,
    hit: bool,
    /// The opcode of the last step: when a call halts on an invalid or not
    /// yet activated opcode, geth's message names it, and revm's halt
    /// reason does not carry it.
    last_opcode: u8,
}

impl Watch {
    /// A watch over `deadline`.
    pub fn new(deadline: Deadline) -> Watch {
        Watch { deadline, steps: 0, hit: false, last_opcode: 0 }
    }

    /// The opcode of the last step executed (0 before any). After a halt
    /// of the outermost frame, the one it halted on: an inner frame's halt
    /// returns to its caller, which then steps again.
    pub fn last_opcode(&self) -> u8 {
        self.last_opcode
    }

    /// Whether the deadline stopped the run (checked now, too).
    pub fn hit(&mut self) -> bool {
        if !self.hit && self.deadline.passed() {
            self.hit = true;
        }
        self.hit
    }

    /// The deadline watched.
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }
}

impl<CTX> Inspector<CTX> for Watch {
    fn step(&mut self, interp: &mut Interpreter, _context: &mut CTX) {
        self.steps += 1;
        self.last_opcode = interp.bytecode.opcode();
        if self.hit || (self.steps.is_multiple_of(CLOCK_EVERY_STEPS) && self.hit()) {
            interp.halt(InstructionResult::OutOfGas);
        }
    }

    fn call(&mut self, _context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        self.hit().then(|| CallOutcome::new_oog(inputs.gas_limit, inputs.return_memory_offset.clone(), 0))
    }

    fn create(&mut self, _context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        self.hit().then(|| CreateOutcome::new_oog(inputs.gas_limit(), 0))
    }
}

/// A duration printed as Go's `time.Duration.String` does for the values
/// a timeout takes: `5s`, `1.5s`, `100ms`, `1m30s`.
struct GoDuration(Duration);

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d < Duration::from_secs(1) {
            let ms = d.as_secs_f64() * 1e3;
            return write!(f, "{}ms", trim(ms));
        }
        let secs = d.as_secs();
        let (h, m, s) = (secs / 3600, secs / 60 % 60, d.as_secs_f64() - (secs - secs % 60) as f64);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if h > 0 || m > 0 {
            write!(f, "{m}m")?;
        }
        write!(f, "{}s", trim(s))
    }
}

/// A number without trailing zeros (at most millisecond precision).
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_print_as_go_prints_them() {
        let p = |ms| GoDuration(Duration::from_millis(ms)).to_string();
        assert_eq!(p(5_000), "5s");
        assert_eq!(p(1_500), "1.5s");
        assert_eq!(p(100), "100ms");
        assert_eq!(p(90_000), "1m30s");
        assert_eq!(p(3_600_000), "1h0m0s");
        assert_eq!(p(0), "0s");
        assert_eq!(Deadline::after(Duration::from_secs(5)).message(), "execution aborted (timeout = 5s)");
    }

    #[test]
    fn cancelling_passes_the_deadline_for_every_clone() {
        let d = Deadline::after(Duration::from_secs(60));
        let c = d.clone();
        assert!(!c.passed());
        d.cancel();
        assert!(c.passed());
        assert!(Deadline::after(Duration::ZERO).passed());
    }
}
