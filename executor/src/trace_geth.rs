//! Where revm-inspectors' geth tracers depart from geth, put right after
//! they answer: the accounts `prestateTracer` reports, and the struct
//! logger's error strings. Each rule names the geth source it follows.

use alloy_primitives::{Address, KECCAK256_EMPTY};
use alloy_rpc_types_trace::geth::{AccountState, DefaultFrame, PreStateFrame, PreStateMode, StructLog};
use revm::{bytecode::opcode::OpCode, state::EvmState, DatabaseRef};

use crate::trace_limits::TraceOptionError;

/// The accounts geth's `prestateTracer` looks up besides those execution
/// touched (`OnTxStart` in `eth/tracers/native/prestate.go`): the sender,
/// the recipient (none for a creation: geth drops the created account
/// when it was empty) and the coinbase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxLookups {
    /// The sender.
    pub(crate) from: Address,
    /// The recipient of a call.
    pub(crate) to: Option<Address>,
    /// The block's coinbase.
    pub(crate) coinbase: Address,
}

/// The `prestateTracer` options revm-inspectors does not read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PrestateOptions {
    /// geth's `includeEmpty`: also report accounts that were empty.
    pub(crate) include_empty: bool,
    /// Code in the output (`disableCode` not set).
    pub(crate) code_enabled: bool,
}

impl PrestateOptions {
    /// Reads them from a `prestateTracer`'s `tracerConfig`; geth refuses
    /// `includeEmpty` with `diffMode` (`newPrestateTracer`).
    pub(crate) fn from_config(config: &serde_json::Value) -> Result<PrestateOptions, TraceOptionError> {
        let flag = |name: &str| config.get(name).and_then(serde_json::Value::as_bool).unwrap_or(false);
        if flag("diffMode") && flag("includeEmpty") {
            return Err(TraceOptionError::DiffModeWithIncludeEmpty);
        }
        Ok(PrestateOptions { include_empty: flag("includeEmpty"), code_enabled: !flag("disableCode") })
    }
}

/// Whether `addr` was empty before the transaction (geth's `!exists()`:
/// no balance, nonce or code).
fn was_empty<DB: DatabaseRef>(db: &DB, addr: Address) -> Result<bool, DB::Error> {
    let info = db.basic_ref(addr)?.unwrap_or_default();
    Ok(info.balance.is_zero() && info.nonce == 0 && info.code_hash == KECCAK256_EMPTY)
}

/// geth's `prestateTracer` rules where revm-inspectors departs from them
/// (`eth/tracers/native/prestate.go`, geth 1.16): accounts that were empty
/// before the transaction are left out of `pre` in both modes (`OnTxEnd`),
/// unless `includeEmpty` asks for every account looked up (the sender,
/// recipient and coinbase at the start, `OnTxStart`, then each account
/// execution reached). revm-inspectors keeps an empty-before account in
/// a diff's `pre` (`{"balance": "0x0"}`) and has no `includeEmpty`.
pub(crate) fn geth_prestate<DB: DatabaseRef>(
    frame: &mut PreStateFrame,
    state: &EvmState,
    lookups: TxLookups,
    opts: PrestateOptions,
    db: &DB,
) -> Result<(), DB::Error> {
    match frame {
        PreStateFrame::Diff(diff) => {
            let mut empty = Vec::new();
            for addr in diff.pre.keys() {
                if was_empty(db, *addr)? {
                    empty.push(*addr);
                }
            }
            for addr in empty {
                diff.pre.remove(&addr);
            }
        }
        PreStateFrame::Default(PreStateMode(pre)) if opts.include_empty => {
            let touched =
                state.iter().filter(|(_, a)| a.is_touched() && !a.is_created()).map(|(addr, _)| *addr);
            let fixed = [Some(lookups.from), lookups.to, Some(lookups.coinbase)];
            for addr in fixed.into_iter().flatten().chain(touched) {
                if pre.contains_key(&addr) {
                    continue;
                }
                let info = db.basic_ref(addr)?.unwrap_or_default();
                let code = if opts.code_enabled && info.code_hash != KECCAK256_EMPTY {
                    Some(db.code_by_hash_ref(info.code_hash)?.original_bytes())
                } else {
                    None
                };
                pre.insert(addr, AccountState::from_account_info(info.nonce, info.balance, code));
            }
        }
        PreStateFrame::Default(_) => {}
    }
    Ok(())
}

/// geth's struct logger writes a failing step's error as geth's EVM words
/// it (`core/vm/errors.go`: "out of gas", "invalid opcode: INVALID", ...);
/// revm-inspectors writes revm's status in Rust debug form
/// (`"Some(OutOfGas)"`). Rewrites each step's error.
pub(crate) fn geth_struct_log_errors(frame: &mut DefaultFrame) {
    for log in &mut frame.struct_logs {
        if let Some(err) = log.error.take() {
            log.error = Some(geth_error(&err, log));
        }
    }
}

/// geth's words for revm's halt `status` (its debug form, possibly inside
/// `Some(..)`) at `log`'s step.
fn geth_error(status: &str, log: &StructLog) -> String {
    let name = status.strip_prefix("Some(").and_then(|s| s.strip_suffix(')')).unwrap_or(status);
    let op = (0..=u8::MAX).filter_map(OpCode::new).find(|o| o.as_str() == log.op);
    let stack_len = log.stack.as_ref().map(Vec::len);
    match name {
        "OutOfGas" | "MemoryOOG" | "MemoryLimitOOG" | "PrecompileOOG" | "InvalidOperandOOG" => {
            "out of gas".into()
        }
        // core/vm/operations_acl.go: an SSTORE with no more than the
        // EIP-2200 sentry's 2300 gas left.
        "ReentrancySentryOOG" => "not enough gas for reentrancy sentry".into(),
        "InvalidFEOpcode" => "invalid opcode: INVALID".into(),
        "OpcodeNotFound" | "NotActivated" => format!("invalid opcode: {}", log.op),
        "InvalidJump" => "invalid jump destination".into(),
        "StackUnderflow" => match (stack_len, op) {
            (Some(len), Some(op)) => format!("stack underflow ({len} <=> {})", op.inputs()),
            _ => "stack underflow".into(),
        },
        "StackOverflow" => match (stack_len, op) {
            // geth's limit for an op: 1024 + what it pops - what it pushes.
            (Some(len), Some(op)) => {
                format!(
                    "stack limit reached {len} ({})",
                    1024 + usize::from(op.inputs()) - usize::from(op.outputs())
                )
            }
            _ => "stack limit reached 1024".into(),
        },
        "CallTooDeep" => "max call depth exceeded".into(),
        "OutOfFunds" => "insufficient balance for transfer".into(),
        "CreateCollision" => "contract address collision".into(),
        "CreateContractSizeLimit" => "max code size exceeded".into(),
        "CreateInitCodeSizeLimit" => "max initcode size exceeded".into(),
        "CreateContractStartingWithEF" => "invalid code: must not begin with 0xef".into(),
        "StateChangeDuringStaticCall" | "CallNotAllowedInsideStatic" => "write protection".into(),
        "OutOfOffset" => "return data out of bounds".into(),
        "NonceOverflow" => "nonce uint64 overflow".into(),
        "Revert" => "execution reverted".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::U256;
    use revm::interpreter::InstructionResult;

    fn step(op: &str, stack: Option<usize>) -> StructLog {
        StructLog {
            op: op.to_string().into(),
            stack: stack.map(|n| vec![U256::ZERO; n]),
            ..Default::default()
        }
    }

    /// The debug form revm-inspectors writes (`format!("{:?}", status)` of
    /// an `Option<InstructionResult>`), so a change there fails here.
    fn debug(status: InstructionResult) -> String {
        format!("{:?}", Some(status))
    }

    #[test]
    fn revm_halts_read_as_geth_words_them() {
        let cases = [
            (InstructionResult::OutOfGas, step("SSTORE", None), "out of gas"),
            (InstructionResult::MemoryOOG, step("MSTORE", None), "out of gas"),
            (
                InstructionResult::ReentrancySentryOOG,
                step("SSTORE", None),
                "not enough gas for reentrancy sentry",
            ),
            (InstructionResult::InvalidFEOpcode, step("INVALID", None), "invalid opcode: INVALID"),
            (InstructionResult::InvalidJump, step("JUMP", None), "invalid jump destination"),
            (InstructionResult::StackUnderflow, step("ADD", Some(1)), "stack underflow (1 <=> 2)"),
            (InstructionResult::StackOverflow, step("PUSH1", Some(1024)), "stack limit reached 1024 (1023)"),
            (InstructionResult::StateChangeDuringStaticCall, step("SSTORE", None), "write protection"),
            (InstructionResult::CallTooDeep, step("CALL", None), "max call depth exceeded"),
        ];
        for (status, log, want) in cases {
            assert_eq!(geth_error(&debug(status), &log), want, "{status:?}");
        }
    }

    #[test]
    fn every_step_error_of_a_frame_is_rewritten() {
        let mut frame = DefaultFrame {
            struct_logs: vec![
                step("PUSH1", None),
                StructLog { error: Some(debug(InstructionResult::OutOfGas)), ..step("SSTORE", None) },
            ],
            ..Default::default()
        };
        geth_struct_log_errors(&mut frame);
        assert_eq!(frame.struct_logs[0].error, None);
        assert_eq!(frame.struct_logs[1].error.as_deref(), Some("out of gas"));
    }
}
