//! Bounds on one `debug_trace*` or `trace_*` call: a deadline and an
//! output size, both enforced while the EVM runs (an inspector beside the
//! tracer), so that a trace of an unbounded loop costs at most the deadline
//! and the memory the limit allows, never the node's.
//!
//! Parity traces (`trace_*`) are counted per frame (its fixed fields, its
//! input and its output) and, with `vmTrace`, per step (its fixed fields,
//! the words it pushes, the memory it writes) and per frame's code.
//!
//! The size counts what the struct logger keeps and later writes out, as
//! it records it: per step its fixed fields, the stack, the memory, the
//! return data (`enableReturnData`) and, at each `SLOAD` and `SSTORE`, the
//! contract's whole storage map so far (the logger snapshots it there, so
//! its size grows with the square of the distinct slots a contract
//! touches).

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use alloy_primitives::{Address, U256};
use alloy_rpc_types_trace::geth::GethDefaultTracingOptions;
use revm::{
    bytecode::opcode,
    interpreter::{
        interpreter_types::{Jumps, LegacyBytecode, ReturnData},
        CallInputs, CallOutcome, CreateInputs, CreateOutcome, InstructionResult, Interpreter,
    },
    Inspector,
};

use crate::deadline::{Deadline, CLOCK_EVERY_STEPS};

/// What one trace call may spend.
#[derive(Debug, Clone)]
pub struct TraceLimits {
    /// When the whole call (a block's transactions together) must stop.
    pub deadline: Deadline,
    /// Output the call may collect, counted per step for the struct
    /// logger.
    pub max_bytes: usize,
    /// EVM memory a traced call (`debug_traceCall`) may use.
    pub memory_limit_bytes: u64,
}

/// A trace option geth refuses. The texts are geth's, since clients
/// compare them; the RPC layer answers them with -32000 (`rpc::trace`'s
/// `timeout` for the duration, `ExecError`'s conversion for the rest).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceOptionError {
    /// `timeout` is not a Go duration; the text is `time.ParseDuration`'s.
    #[error("time: invalid duration \"{0}\"")]
    InvalidDuration(String),
    /// A `prestateTracer` asked for `diffMode` and `includeEmpty`, which
    /// geth's `newPrestateTracer` refuses together.
    #[error("cannot use diffMode with includeEmpty")]
    DiffModeWithIncludeEmpty,
}

/// A trace's timeout: `default` unless the call's `timeout` option (a Go
/// duration such as `"10s"` or `"1.5s"`) asks otherwise, never above
/// `max`; the option must parse.
pub fn trace_timeout(
    option: Option<&str>,
    default: Duration,
    max: Duration,
) -> Result<Duration, TraceOptionError> {
    let timeout = match option {
        None => default,
        Some(s) => parse_go_duration(s).ok_or_else(|| TraceOptionError::InvalidDuration(s.to_owned()))?,
    };
    Ok(timeout.min(max))
}

/// Why a trace was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// Past the deadline.
    Timeout,
    /// The output would pass `max_bytes` (the limit); `parity` for a
    /// `trace_*` call, whose advice differs.
    TooLarge {
        /// `rpc.trace_max_bytes`.
        max: usize,
        /// Whether the trace is a parity one.
        parity: bool,
    },
}

impl Stopped {
    /// geth's wording for a timeout; the limit's name for the size.
    pub(crate) fn message(self) -> String {
        match self {
            Stopped::Timeout => "execution timeout".into(),
            Stopped::TooLarge { max, parity: false } => {
                format!("trace output exceeds rpc.trace_max_bytes ({max} bytes); disable stack, memory, storage or return data, or trace with callTracer")
            }
            Stopped::TooLarge { max, parity: true } => {
                format!("trace output exceeds rpc.trace_max_bytes ({max} bytes); leave out vmTrace, or trace one transaction at a time")
            }
        }
    }
}

/// Bytes the struct logger keeps per step beyond its stack, memory,
/// return data and storage (pc, op, gas, cost, depth and their JSON): an
/// over-estimate.
const STEP_BYTES: usize = 128;

/// Bytes of one word written as a quoted 0x-hex string, with its comma.
const WORD_BYTES: usize = 70;

/// Bytes of one storage entry (`"0x..64..": "0x..64.."`, with its comma).
const SLOT_BYTES: usize = 2 * WORD_BYTES;

/// Bytes of one parity trace frame beyond its input and output (action,
/// result, addresses, gas, `traceAddress`, the localized fields and their
/// JSON): an over-estimate.
const FRAME_BYTES: usize = 640;

/// Bytes of one `vmTrace` step beyond the words it pushes and the memory it
/// writes (`pc`, `cost`, `ex.used`, `ex.store`, `sub` and their JSON).
const VM_STEP_BYTES: usize = 200;

/// What each step of the struct logger records (from its options).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StepRecords {
    stack: bool,
    memory: bool,
    return_data: bool,
    storage: bool,
}

impl StepRecords {
    /// What the struct logger records per step with `opts`.
    pub(crate) fn of(opts: &GethDefaultTracingOptions) -> StepRecords {
        StepRecords {
            stack: !opts.disable_stack.unwrap_or(false),
            memory: opts.enable_memory.unwrap_or(false),
            return_data: opts.is_return_data_enabled(),
            storage: opts.is_storage_enabled(),
        }
    }
}

/// What a parity trace's output records, to count while it runs (its
/// state diff is bounded by gas, and measured once built).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParityRecords {
    /// Each call frame (`trace`).
    pub(crate) frames: bool,
    /// Each step, and each frame's code (`vmTrace`).
    pub(crate) steps: bool,
}

/// The inspector that enforces [`TraceLimits`], run beside the tracer.
/// Once a limit is passed every frame halts at its next step, and no new
/// frame (a precompile included) starts, so the transaction unwinds at
/// once. The halt is an out-of-gas (a fatal halt panics in revm's
/// post-execution); the caller reports the budget's cause instead of the
/// transaction's result.
pub(crate) struct Budget {
    deadline: Deadline,
    max_bytes: usize,
    /// Per step, what the output grows by: `Some` for the struct logger;
    /// `None` for the other geth tracers, whose output is per call and
    /// bounded by the response limit.
    per_step: Option<StepRecords>,
    /// For parity traces: what their output records.
    parity: Option<ParityRecords>,
    bytes: usize,
    steps: u64,
    /// Distinct slots each contract touched so far: the size of the
    /// storage map the logger snapshots at its next `SLOAD`/`SSTORE`.
    slots: HashMap<Address, HashSet<U256>>,
    pub(crate) stopped: Option<Stopped>,
}

impl Budget {
    /// A budget from `limits`. `per_step` is `Some` for the struct logger:
    /// what each step records.
    pub(crate) fn new(limits: &TraceLimits, per_step: Option<StepRecords>) -> Budget {
        Budget {
            deadline: limits.deadline.clone(),
            max_bytes: limits.max_bytes,
            per_step,
            parity: None,
            bytes: 0,
            steps: 0,
            slots: HashMap::new(),
            stopped: None,
        }
    }

    /// A budget from `limits` for parity traces recording `records`.
    pub(crate) fn parity(limits: &TraceLimits, records: ParityRecords) -> Budget {
        Budget { parity: Some(records), ..Budget::new(limits, None) }
    }

    /// `rpc.trace_max_bytes`.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The output counted so far.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Sets the output counted so far to `bytes` (what a filter kept of
    /// what was counted); past `max_bytes` the trace stops.
    pub(crate) fn recount(&mut self, bytes: usize) {
        self.bytes = 0;
        self.add(bytes);
    }

    /// Adds `bytes` to the output; past `max_bytes` the trace stops.
    pub(crate) fn add(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.max_bytes && self.stopped.is_none() {
            self.stopped = Some(Stopped::TooLarge { max: self.max_bytes, parity: self.parity.is_some() });
        }
    }

    /// Counts a parity trace's frame: its fixed fields and its `input`
    /// bytes (hex).
    fn frame(&mut self, input: usize) {
        if self.parity.is_some_and(|p| p.frames) {
            self.add(FRAME_BYTES.saturating_add(input.saturating_mul(2)));
        }
    }

    /// Counts a parity frame's output bytes (hex).
    fn frame_output(&mut self, output: usize) {
        if self.parity.is_some_and(|p| p.frames) {
            self.add(output.saturating_mul(2));
        }
    }

    /// Counts what `vmTrace` records at this step: its fixed fields, the
    /// words it may push, the memory it writes.
    fn vm_step(&mut self, interp: &Interpreter) {
        let op = interp.bytecode.opcode();
        let words = match op {
            // DUPn and SWAPn show the n + 1 words they touch.
            opcode::DUP1..=opcode::SWAP16 => (op & 0x0f) as usize + 2,
            _ => 1,
        };
        let written = memory_written(op, interp.stack.data()).saturating_mul(2);
        self.add((VM_STEP_BYTES + words * WORD_BYTES).saturating_add(written));
    }

    /// Whether the deadline has passed (checked between transactions and
    /// before each frame too).
    pub(crate) fn expired(&mut self) -> bool {
        if self.stopped.is_none() && self.deadline.passed() {
            self.stopped = Some(Stopped::Timeout);
        }
        self.stopped.is_some()
    }

    /// Counts what the struct logger records at this step.
    fn count(&mut self, records: StepRecords, interp: &Interpreter) {
        let mut bytes = STEP_BYTES;
        if records.stack {
            bytes += interp.stack.len() * WORD_BYTES;
        }
        if records.memory {
            bytes += interp.memory.len() / 32 * WORD_BYTES;
        }
        if records.return_data {
            // Hex, two characters a byte.
            bytes += interp.return_data.buffer().len() * 2;
        }
        if records.storage {
            let op = interp.bytecode.opcode();
            if op == opcode::SLOAD || op == opcode::SSTORE {
                let slots = self.slots.entry(interp.input.target_address).or_default();
                if let Some(key) = interp.stack.data().last() {
                    slots.insert(*key);
                }
                bytes += slots.len() * SLOT_BYTES;
            }
        }
        self.add(bytes);
    }
}

/// Bytes of memory `op` writes, read from its arguments on `stack` (the
/// top last), as `vmTrace` records them (`ex.mem`); a size past `usize` is
/// `usize::MAX` (the step will run out of gas, but the trace stops first).
fn memory_written(op: u8, stack: &[U256]) -> usize {
    let arg = |from_top: usize| {
        stack
            .len()
            .checked_sub(from_top + 1)
            .and_then(|i| stack.get(i))
            .map_or(0, |v| usize::try_from(*v).unwrap_or(usize::MAX))
    };
    match op {
        opcode::MSTORE => 32,
        opcode::MSTORE8 => 1,
        opcode::CALLDATACOPY | opcode::CODECOPY | opcode::RETURNDATACOPY | opcode::MCOPY => arg(2),
        opcode::EXTCODECOPY => arg(3),
        // What a call writes back: at most its output size.
        opcode::CALL | opcode::CALLCODE => arg(6),
        opcode::DELEGATECALL | opcode::STATICCALL => arg(5),
        _ => 0,
    }
}

impl<CTX> Inspector<CTX> for Budget {
    fn step(&mut self, interp: &mut Interpreter, _context: &mut CTX) {
        if self.stopped.is_some() {
            interp.halt(InstructionResult::OutOfGas);
            return;
        }
        self.steps += 1;
        if let Some(records) = self.per_step {
            self.count(records, interp);
        }
        if self.parity.is_some_and(|p| p.steps) {
            self.vm_step(interp);
        }
        if self.steps.is_multiple_of(CLOCK_EVERY_STEPS) {
            self.expired();
        }
        if self.stopped.is_some() {
            interp.halt(InstructionResult::OutOfGas);
        }
    }

    fn initialize_interp(&mut self, interp: &mut Interpreter, _context: &mut CTX) {
        // vmTrace writes each frame's code once.
        if self.parity.is_some_and(|p| p.steps) {
            self.add(2 * interp.bytecode.bytecode_len());
        }
    }

    fn call(&mut self, _context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        self.frame(inputs.input.len());
        self.expired().then(|| CallOutcome::new_oog(inputs.gas_limit, inputs.return_memory_offset.clone(), 0))
    }

    fn call_end(&mut self, _context: &mut CTX, _inputs: &CallInputs, outcome: &mut CallOutcome) {
        self.frame_output(outcome.result.output.len());
    }

    fn create(&mut self, _context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        self.frame(inputs.init_code().len());
        self.expired().then(|| CreateOutcome::new_oog(inputs.gas_limit(), 0))
    }

    fn create_end(&mut self, _context: &mut CTX, _inputs: &CreateInputs, outcome: &mut CreateOutcome) {
        self.frame_output(outcome.result.output.len());
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
        assert_eq!(trace_timeout(None, d, max).unwrap(), d);
        assert_eq!(trace_timeout(Some("1m"), d, max).unwrap(), max, "capped");
        assert_eq!(trace_timeout(Some("10ms"), d, max).unwrap(), Duration::from_millis(10));
        let e = trace_timeout(Some("soon"), d, max).unwrap_err();
        assert_eq!(e, TraceOptionError::InvalidDuration("soon".into()));
        assert_eq!(e.to_string(), "time: invalid duration \"soon\"");
    }
}
