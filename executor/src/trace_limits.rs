//! Bounds on one `debug_trace*` call: a deadline and an output size, both
//! enforced while the EVM runs (an inspector beside the tracer), so that a
//! trace of an unbounded loop costs at most the deadline and the memory
//! the limit allows, never the node's.

use std::time::{Duration, Instant};

use revm::{
    interpreter::{InstructionResult, Interpreter},
    Inspector,
};

/// What one trace call may spend.
#[derive(Debug, Clone, Copy)]
pub struct TraceLimits {
    /// Wall time for the whole call (a block's transactions together).
    pub timeout: Duration,
    /// Output the call may collect, estimated per step for the struct
    /// logger.
    pub max_bytes: usize,
}

impl TraceLimits {
    /// `default` unless the call's `timeout` option (a Go duration such as
    /// `"10s"` or `"1.5s"`) asks otherwise, never above `max`; the option
    /// must parse.
    pub fn with_option(
        option: Option<&str>,
        default: Duration,
        max: Duration,
        max_bytes: usize,
    ) -> Result<TraceLimits, String> {
        let timeout = match option {
            None => default,
            Some(s) => parse_go_duration(s).ok_or_else(|| format!("time: invalid duration \"{s}\""))?,
        };
        Ok(TraceLimits { timeout: timeout.min(max), max_bytes })
    }
}

/// Why a trace was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// Past the deadline.
    Timeout,
    /// The output would pass `max_bytes`.
    TooLarge(usize),
}

impl Stopped {
    /// geth's wording for a timeout; the limit's name for the size.
    pub(crate) fn message(self) -> String {
        match self {
            Stopped::Timeout => "execution timeout".into(),
            Stopped::TooLarge(max) => {
                format!("trace output exceeds rpc.trace_max_bytes ({max} bytes); disable stack, memory or storage, or trace with callTracer")
            }
        }
    }
}

/// Steps between clock reads: a step is tens of nanoseconds, a clock read
/// about as much.
const CLOCK_EVERY_STEPS: u64 = 1024;

/// Bytes the struct logger keeps per step beyond its stack and memory
/// (pc, op, gas, cost, depth and their JSON): an over-estimate.
const STEP_BYTES: usize = 128;

/// The inspector that enforces [`TraceLimits`], run beside the tracer.
/// Once a limit is passed every frame halts at its next step, so the
/// transaction unwinds at once. The halt is an out-of-gas (a fatal halt
/// panics in revm's post-execution); the caller reports the budget's
/// cause instead of the transaction's result.
pub(crate) struct Budget {
    deadline: Instant,
    max_bytes: usize,
    /// Per step, whether the output grows by the stack and memory (the
    /// struct logger) or not at all (the other tracers, whose output is
    /// per call and bounded by the response limit).
    per_step: Option<(bool, bool)>,
    bytes: usize,
    steps: u64,
    pub(crate) stopped: Option<Stopped>,
}

impl Budget {
    /// A budget from `limits`, started now. `per_step` is `Some((stack,
    /// memory))` for the struct logger: which of them each step records.
    pub(crate) fn new(limits: &TraceLimits, per_step: Option<(bool, bool)>) -> Budget {
        Budget {
            deadline: Instant::now() + limits.timeout,
            max_bytes: limits.max_bytes,
            per_step,
            bytes: 0,
            steps: 0,
            stopped: None,
        }
    }

    /// Whether the deadline has passed (checked between transactions too).
    pub(crate) fn expired(&mut self) -> bool {
        if self.stopped.is_none() && Instant::now() >= self.deadline {
            self.stopped = Some(Stopped::Timeout);
        }
        self.stopped.is_some()
    }
}

impl<CTX> Inspector<CTX> for Budget {
    fn step(&mut self, interp: &mut Interpreter, _context: &mut CTX) {
        if self.stopped.is_some() {
            interp.halt(InstructionResult::OutOfGas);
            return;
        }
        self.steps += 1;
        if let Some((stack, memory)) = self.per_step {
            self.bytes += STEP_BYTES;
            if stack {
                // Each word is a quoted 0x-hex string of up to 64 digits.
                self.bytes += interp.stack.len() * 70;
            }
            if memory {
                self.bytes += interp.memory.len() / 32 * 70;
            }
            if self.bytes > self.max_bytes {
                self.stopped = Some(Stopped::TooLarge(self.max_bytes));
            }
        }
        if self.steps.is_multiple_of(CLOCK_EVERY_STEPS) {
            self.expired();
        }
        if self.stopped.is_some() {
            interp.halt(InstructionResult::OutOfGas);
        }
    }
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal
/// numbers, each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such
/// as `"300ms"`, `"1.5s"` or `"1h2m"`; `"0"` alone is zero.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_does() {
        assert_eq!(parse_go_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h2m"), Some(Duration::from_secs(3720)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "5", "s", "5x", "-1s", "1..5s", "."] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_option_is_capped_and_must_parse() {
        let (d, max) = (Duration::from_secs(5), Duration::from_secs(30));
        let l = TraceLimits::with_option(None, d, max, 10).unwrap();
        assert_eq!(l.timeout, d);
        let l = TraceLimits::with_option(Some("1m"), d, max, 10).unwrap();
        assert_eq!(l.timeout, max, "capped");
        let l = TraceLimits::with_option(Some("10ms"), d, max, 10).unwrap();
        assert_eq!(l.timeout, Duration::from_millis(10));
        let e = TraceLimits::with_option(Some("soon"), d, max, 10).unwrap_err();
        assert_eq!(e, "time: invalid duration \"soon\"");
    }
}
